//! A client that asks for a large cached answer and stops reading it holds no more of
//! freshet's memory than a relayed answer would: the relay flushes every 256 KiB and waits
//! for the client, so a stalled client holds one such chunk. A cached answer was encoded
//! whole into the session's write buffer before the first byte went out, so each stalled
//! session held the whole answer (8 MB each, for as many sessions as the client opened,
//! outside `[memory] limit`). Its own test binary: it measures the process's resident set,
//! which other tests running alongside would move.

mod common;

use std::time::Duration;

use common::*;
use mysql_async::prelude::*;

fn resident_bytes() -> u64 {
    process_status_bytes("VmRSS")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_a_cached_answer_holds_a_bounded_part_of_it() {
    let mut admin = direct().await;
    admin.query_drop("DROP TABLE IF EXISTS sa_big").await.unwrap();
    admin.query_drop("CREATE TABLE sa_big (id INT PRIMARY KEY, grp INT NOT NULL, body TEXT NOT NULL)").await.unwrap();
    // One group of 8,000 rows of 4 KB: a 32 MB answer.
    admin.query_drop("INSERT INTO sa_big SELECT seq, 1, REPEAT(CHAR(97 + seq % 26), 4000) FROM seq_1_to_8000").await.unwrap();
    let sql = "SELECT id, body FROM sa_big WHERE grp = 1";
    let proxy = start_proxy(
        "[memory]\nlimit = \"512MiB\"\n[fill]\ntimeout = \"10s\"\n[[cache]]\nname = \"big\"\nquery = \"SELECT id, body FROM sa_big WHERE grp = ?\"\n",
    )
    .await;
    let answer_bytes = 8_000 * 4_000;
    // Read whole until it is answered from the cache (filled, columns captured).
    let mut reader = through(&proxy).await;
    let engine = proxy.engine.get().expect("the cache engine").clone();
    let hits = || engine.by_name("big").expect("the cache").stats().hits;
    for _ in 0..100 {
        let before = hits();
        let rows: Vec<(i32, String)> = reader.query(sql).await.unwrap();
        assert_eq!(rows.len(), 8_000);
        if hits() > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(hits() > 0, "the answer is served from the cache");
    let before = resident_bytes();
    // Eight sessions ask for it and never read a byte of the answer.
    let mut stalled = Vec::new();
    for _ in 0..8 {
        let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
        client.send(&[&[0x03u8][..], sql.as_bytes()].concat()).await;
        stalled.push(client);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let grown = resident_bytes().saturating_sub(before);
    eprintln!("8 stalled sessions of a {} MB answer: resident set grew {} MB", answer_bytes >> 20, grown >> 20);
    // Each may hold a chunk and what the kernel's socket buffers do not take; not the answer.
    assert!(grown < 2 * answer_bytes, "8 stalled sessions grew the resident set {} MB", grown >> 20);
    // The other sessions are answered meanwhile, the answer sent a chunk at a time equal to
    // the server's, as text and as a prepared statement's.
    let want: Vec<(i32, String)> = admin.query(sql).await.unwrap();
    let before = hits();
    assert_eq!(reader.query::<(i32, String), _>(sql).await.unwrap(), want);
    let prepared = "SELECT id, body FROM sa_big WHERE grp = ?";
    let want: Vec<(i32, String)> = admin.exec(prepared, (1,)).await.unwrap();
    for _ in 0..3 {
        assert_eq!(reader.exec::<(i32, String), _, _>(prepared, (1,)).await.unwrap(), want);
    }
    assert!(hits() > before, "answered from the cache");
    drop(stalled);
    admin.query_drop("DROP TABLE sa_big").await.unwrap();
}
