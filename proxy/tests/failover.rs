//! A failover behind an address that keeps existing connections where they were: a TCP proxy
//! that sends new connections to the new primary and leaves old ones on the old (HAProxy
//! without `on-marked-down shutdown-sessions`), or DNS with the old primary still up. freshet's
//! binlog stream, position poll and fill pool keep their connections to the old server, which
//! goes on answering; an audit saw freshet serve the old primary's rows for good and say it was
//! caught up. The poll now asks a new connection who the server is every few seconds.
//!
//! A file of its own: two private servers of its own, and a forwarder in front of them.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use common::*;
use freshet_testkit::mariadb::PrivateServer;
use mysql_async::prelude::*;

/// A TCP forwarder on a port of its own: each new connection goes to the port `backend` holds
/// when it is accepted; connections already made stay where they are.
async fn forwarder(backend: Arc<AtomicU16>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let to = backend.load(Ordering::SeqCst);
            tokio::spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    port
}

/// A connection to `url` over TCP (a driver would take the server's socket on the same host
/// otherwise, past freshet and the forwarder).
async fn connect(url: &str) -> mysql_async::Conn {
    let opts = mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(url).unwrap()).prefer_socket(false);
    mysql_async::Conn::new(opts).await.unwrap()
}

/// The port of a `mysql://user:password@127.0.0.1:port/db` URL.
fn port_of(url: &str) -> u16 {
    let after = url.rsplit_once(':').expect("a port").1;
    after.split('/').next().unwrap().parse().expect("a port number")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_that_keeps_old_connections_is_followed() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let a = PrivateServer::start(&dir.join("failover-a-mariadb"), "");
    let b = PrivateServer::start(&dir.join("failover-b-mariadb"), "--server-id=2");
    for (server, v) in [(&a, "from a"), (&b, "from b")] {
        let mut c = mysql_async::Conn::from_url(&server.url).await.unwrap();
        c.query_drop("DROP TABLE IF EXISTS fo").await.unwrap();
        c.query_drop("CREATE TABLE fo (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)").await.unwrap();
        c.query_drop(format!("INSERT INTO fo VALUES (1, '{v}')")).await.unwrap();
    }
    let backend = Arc::new(AtomicU16::new(port_of(&a.url)));
    let forwarded = forwarder(backend.clone()).await;
    let at = |url: &str, port: u16| url.replace(&format!(":{}/", port_of(url)), &format!(":{port}/"));
    let upstream = at(&a.url, forwarded);
    let proxy = start_proxy_with_url(
        &upstream,
        "[fill]\ntimeout = \"3s\"\n[[cache]]\nname = \"fo\"\nquery = \"SELECT id, v FROM fo WHERE id = ?\"\n",
    )
    .await;
    let through = at(&upstream, proxy.mysql.port());
    let hits = || proxy.engine.get().unwrap().by_name("fo").unwrap().stats().hits;
    let read = "SELECT id, v FROM fo WHERE id = 1";
    let mut first = connect(&through).await;
    let mut served = false;
    for _ in 0..100 {
        let before = hits();
        let rows: Vec<(i32, String)> = first.query(read).await.unwrap();
        assert_eq!(rows, [(1, "from a".to_string())]);
        if hits() > before {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served, "answered from the cache before the failover");

    // The failover: new connections reach b; a stays up, and so do the connections made to it.
    backend.store(port_of(&b.url), Ordering::SeqCst);
    let switched = Instant::now();
    let read_anew = || async {
        let mut c = connect(&through).await;
        let rows: Vec<(i32, String)> = c.query(read).await.unwrap();
        rows
    };
    loop {
        let rows = read_anew().await;
        if rows == [(1, "from b".to_string())] {
            break;
        }
        assert!(switched.elapsed() < Duration::from_secs(30), "{rows:?} from a new session {:?} after the failover", switched.elapsed());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // From then on, b's row only, and from the cache again once the stream follows b.
    let cached = || proxy.engine.get().unwrap().counters.hits.get();
    let before = cached();
    while cached() == before {
        assert_eq!(read_anew().await, [(1, "from b".to_string())], "a's row after b's was read");
        assert!(switched.elapsed() < Duration::from_secs(60), "b's rows not cached {:?} after the failover", switched.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..20 {
        assert_eq!(read_anew().await, [(1, "from b".to_string())], "a's row after b's was read from the cache");
    }
}

/// A failover flipped and back within the poll's period: a fill made while the address led to
/// the other server read its rows at its position, which the stream's server's positions may
/// never overtake (an audit: the other server's rows served for good, the first server's later
/// writes to them skipped). Each fill now checks that it reads the stream's server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_from_another_server_than_the_streams_is_refused() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let a = PrivateServer::start(&dir.join("flip-a-mariadb"), "");
    let b = PrivateServer::start(&dir.join("flip-b-mariadb"), "--server-id=2");
    for (server, v) in [(&a, "from a"), (&b, "from b")] {
        let mut c = mysql_async::Conn::from_url(&server.url).await.unwrap();
        c.query_drop("DROP TABLE IF EXISTS fo").await.unwrap();
        c.query_drop("CREATE TABLE fo (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)").await.unwrap();
        c.query_drop(format!("INSERT INTO fo VALUES (1, '{v}'), (2, '{v}'), (3, '{v}'), (4, '{v}')")).await.unwrap();
    }
    let backend = Arc::new(AtomicU16::new(port_of(&a.url)));
    let forwarded = forwarder(backend.clone()).await;
    let at = |url: &str, port: u16| url.replace(&format!(":{}/", port_of(url)), &format!(":{port}/"));
    let upstream = at(&a.url, forwarded);
    let proxy = start_proxy_with_url(
        &upstream,
        "[fill]\ntimeout = \"3s\"\n[[cache]]\nname = \"fo\"\nquery = \"SELECT id, v FROM fo WHERE id = ?\"\n",
    )
    .await;
    let through = at(&upstream, proxy.mysql.port());
    let cached = || proxy.engine.get().unwrap().counters.hits.get();
    let read = |id: i32| {
        let through = through.clone();
        async move {
            let mut c = connect(&through).await;
            let rows: Vec<(i32, String)> = c.query(format!("SELECT id, v FROM fo WHERE id = {id}")).await.unwrap();
            rows
        }
    };
    // Key 1 cached from a.
    let before = cached();
    while cached() == before {
        assert_eq!(read(1).await, [(1, "from a".to_string())]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A flip to b for a moment: sessions made then read keys 2 to 4 at once, misses whose
    // fills need connections the pool does not have (it keeps one idle): made to b.
    backend.store(port_of(&b.url), Ordering::SeqCst);
    let mut on_b = Vec::new();
    for _ in 0..3 {
        on_b.push(connect(&through).await);
    }
    let reads = on_b.iter_mut().zip(2..).map(|(c, id)| async move {
        let _: Vec<(i32, String)> = c.query(format!("SELECT id, v FROM fo WHERE id = {id}")).await.unwrap();
    });
    futures_join(reads).await;
    backend.store(port_of(&a.url), Ordering::SeqCst);
    drop(on_b);
    // Back on a: a's rows only, whatever was filled meanwhile, for longer than the poll's
    // period.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(8) {
        for id in 1..=4 {
            let got = read(id).await;
            assert_eq!(got, [(id, "from a".to_string())], "key {id}, {:?} after the flip", start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the futures at once.
async fn futures_join<F: std::future::Future<Output = ()>>(futures: impl Iterator<Item = F>) {
    let handles: Vec<_> = futures.collect();
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = handles.into_iter().map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        pinned.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if pinned.is_empty() { std::task::Poll::Ready(()) } else { std::task::Poll::Pending }
    })
    .await;
}
