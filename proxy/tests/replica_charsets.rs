//! `[fill] source = "replica"` and text the binlog decoder reads lossily (character sets other
//! than utf8mb4, utf8mb3, latin1, ucs2, utf16 and utf32, and ascii past 0x7F): the copy gets
//! the server's conversion of such text to utf8mb4, the stream the bytes read as UTF-8, so the
//! replica's rows would not be what the server holds. Keyed by such text, rows merge: every
//! answer read through freshet must still equal the server's.

mod common;

use std::time::Duration;

use common::*;
use freshet_proxy::cache::replica::ReplicaFigures;
use mysql_async::prelude::*;

fn figures(proxy: &Proxy) -> Option<ReplicaFigures> {
    proxy.engine.get().and_then(|e| e.replica.get().map(|r| r.figures()))
}

fn hits(proxy: &Proxy, cache: &str) -> u64 {
    proxy.engine.get().expect("engine").by_name(cache).expect("cache").stats().hits
}

/// Reads `sql` through freshet until `cache` answers it, and compares it with the server's.
async fn same(proxy: &Proxy, through: &mut RawClient, direct: &mut RawClient, cache: &str, sql: &str) {
    for _ in 0..200 {
        let before = hits(proxy, cache);
        let got = through.query(sql).await;
        if hits(proxy, cache) > before {
            assert_eq!(got, direct.query(sql).await, "{sql}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    panic!("{sql} was never answered from {cache}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_with_text_the_binlog_reads_lossily_is_answered_as_the_server_answers() {
    let mut c = direct().await;
    let tables = [
        ("rpf_tok", "p VARCHAR(5) CHARACTER SET utf8mb4 PRIMARY KEY, k INT, v INT, KEY(k)"),
        ("rpf_tcp", "p VARCHAR(5) CHARACTER SET cp1251 PRIMARY KEY, k INT, v INT, KEY(k)"),
        ("rpf_tl2", "p VARCHAR(5) CHARACTER SET latin2 PRIMARY KEY, k INT, v INT, KEY(k)"),
        ("rpf_tas", "p VARCHAR(5) CHARACTER SET ascii PRIMARY KEY, k INT, v INT, KEY(k)"),
        ("rpf_tnk", "p INT PRIMARY KEY, k INT, v INT, c VARCHAR(5) CHARACTER SET cp1251, KEY(k)"),
    ];
    for (t, cols) in tables {
        c.query_drop(format!("DROP TABLE IF EXISTS {t}")).await.unwrap();
        c.query_drop(format!("CREATE TABLE {t} ({cols})")).await.unwrap();
    }
    c.query_drop("INSERT INTO rpf_tok VALUES ('a', 0, 0)").await.unwrap();
    c.query_drop("INSERT INTO rpf_tcp VALUES ('x', 0, 0)").await.unwrap();
    c.query_drop("INSERT INTO rpf_tl2 VALUES ('ąb', 2, 1), ('ęb', 2, 2), ('x', 0, 0)").await.unwrap();
    // Both shown as '?' to a utf8mb4 connection (the copy's).
    c.query_drop("INSERT INTO rpf_tas VALUES (_binary 0xE9, 1, 1), (_binary 0xEA, 1, 2), ('x', 0, 0)").await.unwrap();
    c.query_drop("INSERT INTO rpf_tnk VALUES (1, 1, 1, 'дом'), (2, 1, 2, 'кот')").await.unwrap();

    let path = std::env::temp_dir().join(format!("freshet-replica-charsets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    let mut config = format!(
        "[admin]\nusers = [\"freshet\"]\n[fill]\ntimeout = \"3s\"\nsource = \"replica\"\n[replica]\npath = \"{}\"\n\
         [consistency]\nmax_lag = \"5s\"\n",
        path.display()
    );
    for (t, _) in tables {
        config.push_str(&format!("[[cache]]\nname = \"{t}\"\nquery = \"SELECT k, v FROM {t} WHERE k = ?\"\n"));
    }
    let proxy = start_proxy(&config).await;
    let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut direct_raw = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let mut admin = mysql_async::Conn::new(opts(&proxy.mysql.to_string())).await.unwrap();
    // Every table the replica keeps is copied (at least the utf8mb4 one), and its fills come
    // from the replica.
    let mut copied = false;
    for _ in 0..400 {
        if let Some(f) = figures(&proxy)
            && f.copy.tables_total > 0
            && f.copy.tables_done == f.copy.tables_total
        {
            copied = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(copied, "the copy did not finish: {:?}", figures(&proxy));
    for g in 100..500 {
        let before = figures(&proxy).unwrap().fills;
        let _ = through.query(&format!("SELECT k, v FROM rpf_tok WHERE k = {g}")).await;
        if figures(&proxy).unwrap().fills > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A non-key column read lossily by the stream: filled first, then changed by the stream.
    same(&proxy, &mut through, &mut direct_raw, "rpf_tnk", "SELECT k, v FROM rpf_tnk WHERE k = 1").await;
    c.query_drop("UPDATE rpf_tnk SET v = v + 10").await.unwrap();
    c.query_drop("DELETE FROM rpf_tnk WHERE p = 2").await.unwrap();
    // Keys the stream reads as the same string.
    c.query_drop("INSERT INTO rpf_tcp VALUES ('дом', 1, 1), ('жук', 1, 2), ('кот', 1, 3)").await.unwrap();
    c.query_drop("INSERT INTO rpf_tl2 VALUES ('ńb', 3, 3), ('śb', 3, 4)").await.unwrap();
    c.query_drop("DELETE FROM rpf_tl2 WHERE p = 'ąb'").await.unwrap();
    caught_up(&mut admin).await;

    same(&proxy, &mut through, &mut direct_raw, "rpf_tnk", "SELECT k, v FROM rpf_tnk WHERE k = 1").await;
    same(&proxy, &mut through, &mut direct_raw, "rpf_tcp", "SELECT k, v FROM rpf_tcp WHERE k = 1").await;
    same(&proxy, &mut through, &mut direct_raw, "rpf_tl2", "SELECT k, v FROM rpf_tl2 WHERE k = 2").await;
    same(&proxy, &mut through, &mut direct_raw, "rpf_tl2", "SELECT k, v FROM rpf_tl2 WHERE k = 3").await;
    same(&proxy, &mut through, &mut direct_raw, "rpf_tas", "SELECT k, v FROM rpf_tas WHERE k = 1").await;
    same(&proxy, &mut through, &mut direct_raw, "rpf_tok", "SELECT k, v FROM rpf_tok WHERE k = 0").await;
    assert!(figures(&proxy).unwrap().following, "{:?}", figures(&proxy));
    drop(proxy);
    for (t, _) in tables {
        c.query_drop(format!("DROP TABLE IF EXISTS {t}")).await.unwrap();
    }
    let _ = std::fs::remove_dir_all(&path);
}
