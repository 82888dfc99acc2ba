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

/// Two private servers, `a` and `b` (server ids 1 and 2), each with `fo` holding keys 1 to
/// `keys` valued "from a" and "from b"; a forwarder in front of them sending new connections
/// to the port `backend` holds (a's at first); and freshet caching `fo`'s point read through
/// it. `through` is the URL of freshet's MySQL port.
struct Failover {
    a: PrivateServer,
    b: PrivateServer,
    backend: Arc<AtomicU16>,
    proxy: Proxy,
    through: String,
}

/// Held while servers are made: two `mariadb-install-db` runs at once collide on the temporary
/// tables of their bootstraps (a CI rehearsal: "Could not remove temporary table").
static MAKING_SERVERS: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Failover {
    async fn start(name: &str, keys: i32) -> Failover {
        Failover::start_with(name, keys, "").await
    }

    /// [`Failover::start`] with `fill` added to the `[fill]` section of freshet's config.
    async fn start_with(name: &str, keys: i32, fill: &str) -> Failover {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let (a, b) = {
            let _one_at_a_time = MAKING_SERVERS.lock().unwrap_or_else(|e| e.into_inner());
            (
                PrivateServer::start(&dir.join(format!("{name}-a-mariadb")), ""),
                PrivateServer::start(&dir.join(format!("{name}-b-mariadb")), "--server-id=2"),
            )
        };
        for (server, v) in [(&a, "from a"), (&b, "from b")] {
            let mut c = mysql_async::Conn::from_url(&server.url).await.unwrap();
            c.query_drop("DROP TABLE IF EXISTS fo").await.unwrap();
            c.query_drop("CREATE TABLE fo (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)").await.unwrap();
            let rows: Vec<String> = (1..=keys).map(|k| format!("({k}, '{v}')")).collect();
            c.query_drop(format!("INSERT INTO fo VALUES {}", rows.join(", "))).await.unwrap();
        }
        // a's binlog positions ahead of b's (a later file): what was read from b at its
        // position counts as current on a's stream, so a mix-up is served, not waited for.
        let mut c = mysql_async::Conn::from_url(&a.url).await.unwrap();
        for _ in 0..2 {
            c.query_drop("FLUSH BINARY LOGS").await.unwrap();
        }
        drop(c);
        let backend = Arc::new(AtomicU16::new(port_of(&a.url)));
        let forwarded = forwarder(backend.clone()).await;
        let at = |url: &str, port: u16| url.replace(&format!(":{}/", port_of(url)), &format!(":{port}/"));
        let upstream = at(&a.url, forwarded);
        let proxy = start_proxy_with_url(
            &upstream,
            &format!("[fill]\ntimeout = \"3s\"\n{fill}[[cache]]\nname = \"fo\"\nquery = \"SELECT id, v FROM fo WHERE id = ?\"\n"),
        )
        .await;
        let through = at(&upstream, proxy.mysql.port());
        Failover { a, b, backend, proxy, through }
    }

    /// New connections reach `server` from now on.
    fn switch_to(&self, server: &PrivateServer) {
        self.backend.store(port_of(&server.url), Ordering::SeqCst);
    }

    /// Reads served from a cache so far.
    fn cached(&self) -> u64 {
        self.proxy.engine.get().unwrap().counters.hits.get()
    }

    /// Key `id` read by a new session through freshet.
    async fn read(&self, id: i32) -> Vec<(i32, String)> {
        let mut c = connect(&self.through).await;
        c.query(format!("SELECT id, v FROM fo WHERE id = {id}")).await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_that_keeps_old_connections_is_followed() {
    let f = Failover::start("failover", 1).await;
    let before = f.cached();
    while f.cached() == before {
        assert_eq!(f.read(1).await, [(1, "from a".to_string())]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The failover: new connections reach b; a stays up, and so do the connections made to it.
    f.switch_to(&f.b);
    let switched = Instant::now();
    loop {
        let rows = f.read(1).await;
        if rows == [(1, "from b".to_string())] {
            break;
        }
        assert!(switched.elapsed() < Duration::from_secs(30), "{rows:?} from a new session {:?} after the failover", switched.elapsed());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // From then on, b's row only, and from the cache again once the stream follows b.
    let before = f.cached();
    while f.cached() == before {
        assert_eq!(f.read(1).await, [(1, "from b".to_string())], "a's row after b's was read");
        assert!(switched.elapsed() < Duration::from_secs(60), "b's rows not cached {:?} after the failover", switched.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..20 {
        assert_eq!(f.read(1).await, [(1, "from b".to_string())], "a's row after b's was read from the cache");
    }
}

/// A failover flipped and back within the poll's period: a fill made while the address led to
/// the other server read its rows at its position, which the stream's server's positions may
/// never overtake (an audit: the other server's rows served for good, the first server's later
/// writes to them skipped). Each fill now checks that it reads the stream's server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_from_another_server_than_the_streams_is_refused() {
    let f = Failover::start("flip", 4).await;
    // Key 1 cached from a.
    let before = f.cached();
    while f.cached() == before {
        assert_eq!(f.read(1).await, [(1, "from a".to_string())]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A flip to b for a moment: sessions made then read keys 2 to 4 at once, misses whose
    // fills need connections the pool does not have (it keeps one idle): made to b.
    f.switch_to(&f.b);
    let mut on_b = Vec::new();
    for _ in 0..3 {
        on_b.push(connect(&f.through).await);
    }
    let reads = on_b.iter_mut().zip(2..).map(|(c, id)| async move {
        let _: Vec<(i32, String)> = c.query(format!("SELECT id, v FROM fo WHERE id = {id}")).await.unwrap();
    });
    futures_join(reads).await;
    f.switch_to(&f.a);
    drop(on_b);
    // Back on a: a's rows only, whatever was filled meanwhile, for longer than the poll's
    // period.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(8) {
        for id in 1..=4 {
            assert_eq!(f.read(id).await, [(id, "from a".to_string())], "key {id}, {:?} after the flip", start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The replica's copy (`[fill] source = "replica"`) reads the upstream on connections of its
/// own, made when it starts or when DDL asks it to read a table's changed columns again: an
/// audit saw such a connection, made while the address led to another server for a moment,
/// fill the replica with that server's rows at its position, served from then on. The copy
/// now reads only from the server the stream reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replicas_copy_reads_only_the_streams_server() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("failover-replica");
    let _ = std::fs::remove_dir_all(&dir);
    let fill = format!("source = \"replica\"\n[replica]\npath = \"{}\"\ncopy_batch_rows = 16\n", dir.display());
    let f = Failover::start_with("replica", 4, &fill).await;
    let replica = || f.proxy.engine.get().unwrap().replica.get().expect("the replica started").figures();
    let start = Instant::now();
    while replica().copy.tables_done == 0 || f.cached() == 0 {
        assert_eq!(f.read(1).await, [(1, "from a".to_string())]);
        assert!(start.elapsed() < Duration::from_secs(30), "the replica did not copy fo: {:?}", replica());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A shorter v makes the copy read fo again, on a new connection. It is made while the
    // address leads to b for a moment (b has had the same change).
    let read_again = || replica().copy.rows_copied + replica().copy.rows_rewritten;
    let before = read_again();
    let alter = "ALTER TABLE fo MODIFY v VARCHAR(10) NOT NULL";
    connect(&f.b.url).await.query_drop(alter).await.unwrap();
    f.switch_to(&f.b);
    connect(&f.a.url).await.query_drop(alter).await.unwrap();
    let flipped = Instant::now();
    while read_again() == before && replica().copy.failures == 0 && flipped.elapsed() < Duration::from_millis(1500) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f.switch_to(&f.a);
    // Back on a: a's rows only, for longer than the poll's period.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(8) {
        for id in 1..=4 {
            assert_eq!(f.read(id).await, [(id, "from a".to_string())], "key {id}, {:?} after the flip", start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(read_again() > before, "the copy never read fo again from a: {:?}", replica());
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
