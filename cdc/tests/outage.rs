//! Reconnect with backoff through a server outage: the stream talks to MariaDB through a TCP
//! relay the test controls. Cutting every connection and refusing new ones for a while makes
//! the stream retry with backoff and then resume with nothing lost or duplicated; an outage
//! longer than `max_retries` allows ends in an error the caller sees (bounded in time).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use freshet_cdc::{BinlogStream, StartAt, StreamConfig, StreamEvent};
use freshet_dataflow::Value;
use mysql_async::prelude::Queryable;
use mysql_async::{Opts, OptsBuilder};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A relay to the server that can be switched off (all connections cut, new ones refused).
struct Relay {
    port: u16,
    up: Arc<AtomicBool>,
    cut: watch::Sender<u64>,
}

impl Relay {
    async fn start() -> Relay {
        let target = opts_for(None);
        let addr = format!("{}:{}", target.ip_or_hostname(), target.tcp_port());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let (cut, _) = watch::channel(0u64);
        let (up2, cut2) = (up.clone(), cut.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else { return };
                if !up2.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let addr = addr.clone();
                let mut cut_rx = cut2.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&addr).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut_rx.changed() => {}
                    }
                });
            }
        });
        Relay { port, up, cut }
    }
    fn down(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }
    fn up(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
    fn opts(&self) -> Opts {
        OptsBuilder::from_opts(opts_for(None)).ip_or_hostname("127.0.0.1").tcp_port(self.port).prefer_socket(false).into()
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_ridden_out_with_backoff_and_nothing_lost() {
    let (db, mut c) = fresh_db("outage").await;
    c.query_drop("CREATE TABLE cdc_o (id INT PRIMARY KEY)").await.unwrap();
    let relay = Relay::start().await;
    let mut cfg = StreamConfig::new(&db, server_id());
    cfg.backoff_initial = Duration::from_millis(50);
    cfg.backoff_max = Duration::from_millis(400);
    cfg.max_retries = 100;
    cfg.read_timeout = Duration::from_secs(3);
    let mut s = BinlogStream::connect(relay.opts(), cfg, StartAt::Current).await.unwrap();
    let lag = s.lag();
    const N: i64 = 600;
    let wdb = db.clone();
    let writer = tokio::spawn(async move {
        let mut w = mysql_async::Conn::new(opts_for(Some(&wdb))).await.unwrap();
        for i in 0..N {
            w.exec_drop("INSERT INTO cdc_o VALUES (?)", (i,)).await.unwrap();
            if i % 100 == 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    let mut next = 0;
    let mut outage_done = false;
    within(60, "through the outage", async {
        while next < N {
            let StreamEvent::Batch(b) = s.next().await.expect("the stream rides out the outage") else { continue };
            for ch in &b.changes {
                assert_eq!(int(&ch.row[0]), next, "in order, once");
                next += 1;
            }
            if next >= 100 && !outage_done {
                outage_done = true;
                relay.down();
                let r = relay.up.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    r.store(true, Ordering::SeqCst);
                });
            }
        }
    })
    .await;
    writer.await.unwrap();
    let reconnects = lag.get().reconnects;
    eprintln!("{N} rows delivered exactly once through a 1.5 s outage; {reconnects} connection attempts");
    assert!(reconnects >= 3, "several attempts were refused during the outage ({reconnects})");
    relay.up();
    drop_db(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_outage_ends_in_an_error_within_the_retry_budget() {
    let (db, _c) = fresh_db("outage2").await;
    let relay = Relay::start().await;
    let mut cfg = StreamConfig::new(&db, server_id());
    cfg.backoff_initial = Duration::from_millis(20);
    cfg.backoff_max = Duration::from_millis(100);
    cfg.max_retries = 4;
    cfg.read_timeout = Duration::from_secs(2);
    let mut s = BinlogStream::connect(relay.opts(), cfg, StartAt::Current).await.unwrap();
    relay.down();
    let t0 = Instant::now();
    // Transactions the other test commits meanwhile (in its own database) may still come
    // through as empty batches before the cut is noticed; the error must follow.
    let e = within(30, "gives up", async {
        loop {
            if let Err(e) = s.next().await {
                return e;
            }
        }
    })
    .await;
    assert!(e.retry_safe(), "an outage is retryable later: {e}");
    assert!(t0.elapsed() < Duration::from_secs(10));
    drop_db(&db).await;
}
