//! The freshet binary killed with SIGKILL in the middle of the replica's copy: the next start
//! continues the copy from its last committed batch (it copies fewer rows than the table has)
//! and then answers the cached query as the server does. Killed again while the binlog is
//! being applied (writes before, during and after the kill): the third start copies nothing
//! and answers as the server does. Observed through the binary's log
//! (the copy's progress lines) and the MySQL port.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use mysql_async::prelude::*;
use tokio::io::{AsyncBufReadExt, BufReader};

const TABLE: &str = "rk_items";
const ROWS: u64 = 30_000;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The log line without ANSI colour codes.
fn plain(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn spawn(config: &std::path::Path, mysql: u16) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_freshet"))
        .env_remove("FRESHET_CONFIG")
        .env("FRESHET_LISTEN_MYSQL", format!("127.0.0.1:{mysql}"))
        .env("FRESHET_LISTEN_ADMIN", format!("127.0.0.1:{}", free_port()))
        .env("NO_COLOR", "1")
        .arg("--config")
        .arg(config)
        // freshet logs to stderr (stdout is kept for `freshet check`'s report).
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Every cached group read through freshet (until answered, and again) equals the server's.
async fn same_answers(c: &mut mysql_async::Conn, mysql: u16, groups: &[i64]) {
    let mut through = mysql_async::Conn::new(opts(&format!("127.0.0.1:{mysql}"))).await.unwrap();
    for grp in groups {
        let sql = format!("SELECT id, name FROM {TABLE} WHERE grp = {grp}");
        let mut want: Vec<(i64, String)> = c.query(&sql).await.unwrap();
        want.sort();
        for _ in 0..3 {
            let mut got: Vec<(i64, String)> = through.query(&sql).await.unwrap();
            got.sort();
            assert_eq!(got, want, "{sql}");
        }
    }
}

fn copied_rows(line: &str) -> u64 {
    line.split("rows=").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{line}"))
}

/// Reads log lines until one contains `what`; returns it.
async fn wait_for(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStderr>>, what: &str) -> String {
    let found = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let line = plain(&line);
            if line.contains(what) {
                return line;
            }
        }
        panic!("freshet's log ended before {what:?}");
    });
    found.await.unwrap_or_else(|_| panic!("no {what:?} in freshet's log within 120 s"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_copy_resumes_from_its_last_batch() {
    let mut c = direct().await;
    c.query_drop(format!("DROP TABLE IF EXISTS {TABLE}")).await.unwrap();
    c.query_drop(format!("CREATE TABLE {TABLE} (id INT PRIMARY KEY, grp INT NOT NULL, name VARCHAR(30) NOT NULL)")).await.unwrap();
    c.query_drop(format!("INSERT INTO {TABLE} SELECT seq, seq % 50, CONCAT('row ', seq) FROM seq_1_to_{ROWS}")).await.unwrap();
    let dir = std::env::temp_dir().join(format!("freshet-replica-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("freshet.toml");
    std::fs::write(
        &config,
        format!(
            "[upstream]\nurl = \"{}\"\ntls = \"disabled\"\n[log]\nlevel = \"info\"\n[fill]\nsource = \"replica\"\n\
             [replica]\npath = \"{}\"\ncopy_batch_rows = 10\n[[cache]]\nname = \"by_grp\"\nquery = \"SELECT id, name FROM {TABLE} WHERE grp = ?\"\n",
            upstream_url(),
            dir.join("rocks").display()
        ),
    )
    .unwrap();

    // First life: killed once the copy has started, well before its 3000 batches are done.
    let mut first = spawn(&config, free_port());
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    wait_for(&mut lines, "replica: copying tables").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    first.start_kill().unwrap();
    first.wait().await.unwrap();
    while let Ok(Some(line)) = lines.next_line().await {
        assert!(!plain(&line).contains("replica: tables copied"), "the first life finished its copy before the kill");
    }

    // Second life: resumes the copy.
    let mysql = free_port();
    let mut second = spawn(&config, mysql);
    let mut lines = BufReader::new(second.stderr.take().unwrap()).lines();
    let registered = wait_for(&mut lines, "replica: table registered").await;
    assert!(registered.contains("kept=true"), "the copied rows were kept: {registered}");
    let done = wait_for(&mut lines, "replica: tables copied").await;
    let rows = copied_rows(&done);
    assert!(rows > 0 && rows < ROWS, "the second life copied {rows} of {ROWS} rows: it must continue, not start over ({done})");
    same_answers(&mut c, mysql, &[0, 7, 49]).await;

    // Writes while it runs, a SIGKILL in the middle of more writes, writes while it is down.
    c.query_drop(format!("UPDATE {TABLE} SET grp = 7, name = 'moved' WHERE id BETWEEN 100 AND 160")).await.unwrap();
    let writes = tokio::spawn(async move {
        let mut w = direct().await;
        for i in 0..200 {
            w.query_drop(format!("UPDATE {TABLE} SET name = 'edit {i}' WHERE id = {}", 1 + i * 50 % ROWS as i64)).await.unwrap();
        }
        w
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    second.start_kill().unwrap();
    second.wait().await.unwrap();
    let mut w = writes.await.unwrap();
    w.query_drop(format!("DELETE FROM {TABLE} WHERE grp = 49")).await.unwrap();
    w.query_drop(format!("INSERT INTO {TABLE} VALUES ({}, 0, 'late')", ROWS + 1)).await.unwrap();

    // Third life: nothing to copy; the stream resumes at the replica's position.
    let mysql = free_port();
    let mut third = spawn(&config, mysql);
    let mut lines = BufReader::new(third.stderr.take().unwrap()).lines();
    let done = wait_for(&mut lines, "replica: tables copied").await;
    assert_eq!(copied_rows(&done), 0, "a restart after a kill copies nothing again ({done})");
    same_answers(&mut c, mysql, &[0, 1, 7, 49]).await;
    third.start_kill().unwrap();
    third.wait().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    c.query_drop(format!("DROP TABLE IF EXISTS {TABLE}")).await.unwrap();
}
