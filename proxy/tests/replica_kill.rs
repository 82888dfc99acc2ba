//! The freshet binary killed with SIGKILL in the middle of the replica's copy: the next start
//! continues the copy from its last committed batch (it copies fewer rows than the table has)
//! and then answers the cached query as the server does. Killed again while the binlog is
//! being applied (writes before, during and after the kill): the third start copies nothing
//! and answers as the server does. Observed through the binary's log
//! (the copy's progress lines) and the MySQL port.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use freshet_testkit::process::Freshet;
use mysql_async::prelude::*;

const TABLE: &str = "rk_items";
const ROWS: u64 = 30_000;

async fn spawn(config: &Path, log: &Path) -> Freshet {
    Freshet::start(Path::new(env!("CARGO_BIN_EXE_freshet")), config, log).await
}

/// Every cached group read through freshet (until answered, and again) equals the server's.
async fn same_answers(c: &mut mysql_async::Conn, freshet: &Freshet, groups: &[i64]) {
    let mut through = mysql_async::Conn::new(opts(&freshet.mysql.to_string())).await.unwrap();
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
    let mut first = spawn(&config, &dir.join("first.log")).await;
    first.wait_for_log("replica: copying tables").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = first.log();
    first.kill().await;
    assert!(!log.contains("replica: tables copied"), "the first life finished its copy before the kill");

    // Second life: resumes the copy.
    let mut second = spawn(&config, &dir.join("second.log")).await;
    let registered = second.wait_for_log("replica: table registered").await;
    assert!(registered.contains("kept=true"), "the copied rows were kept: {registered}");
    let done = second.wait_for_log("replica: tables copied").await;
    let rows = copied_rows(&done);
    assert!(rows > 0 && rows < ROWS, "the second life copied {rows} of {ROWS} rows: it must continue, not start over ({done})");
    same_answers(&mut c, &second, &[0, 7, 49]).await;

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
    second.kill().await;
    let mut w = writes.await.unwrap();
    w.query_drop(format!("DELETE FROM {TABLE} WHERE grp = 49")).await.unwrap();
    w.query_drop(format!("INSERT INTO {TABLE} VALUES ({}, 0, 'late')", ROWS + 1)).await.unwrap();

    // Third life: nothing to copy; the stream resumes at the replica's position.
    let mut third = spawn(&config, &dir.join("third.log")).await;
    let done = third.wait_for_log("replica: tables copied").await;
    assert_eq!(copied_rows(&done), 0, "a restart after a kill copies nothing again ({done})");
    same_answers(&mut c, &third, &[0, 1, 7, 49]).await;
    third.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
    c.query_drop(format!("DROP TABLE IF EXISTS {TABLE}")).await.unwrap();
}
