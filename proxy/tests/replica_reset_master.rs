//! `[fill] source = "replica"` across RESET MASTER while freshet is stopped: the server's
//! binlog starts again in a file of the same name, and the same number of same-sized writes
//! lands it on the replica's stored position, with the same GTIDs (MariaDB numbers them from 1
//! again). The position is no proof: the file at it is another file, created later, and its
//! transactions are not the ones the store applied. The store must be copied again.
//!
//! A file of its own: it resets the server's binary logs, which would make the concurrent
//! tests of another file lose their streams.

mod common;

use std::time::Duration;

use common::*;
use mysql_async::prelude::*;

const TABLE: &str = "rr_items";

fn config(path: &std::path::Path) -> String {
    format!(
        "[admin]\nusers = [\"freshet\"]\n[fill]\ntimeout = \"3s\"\nsource = \"replica\"\n[replica]\npath = \"{}\"\n\
         [consistency]\nmax_lag = \"5s\"\n[[cache]]\nname = \"by_grp\"\nquery = \"SELECT id, val FROM {TABLE} WHERE grp = ?\"\n",
        path.display()
    )
}

fn upstream(sql: &str) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut c = direct().await;
        c.query_drop(sql).await.unwrap();
    });
}

/// One life of freshet over the store at `path`: waits until it has caught up and copied,
/// runs `writes` on the server, waits again, and returns the answers read through freshet
/// from the cache, with the server's, for each group, and the rows it copied.
/// An answer read through freshet, and the server's.
type Compared = (Vec<Vec<u8>>, Vec<Vec<u8>>);

fn life(path: &std::path::Path, writes: &[String]) -> (Vec<Compared>, u64) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let answers = rt.block_on(async {
        let proxy = start_proxy(&config(path)).await;
        let engine = proxy.engine.get().expect("engine").clone();
        let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
        let mut direct_client = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
        caught_up(&mut mysql_async::Conn::new(opts(&proxy.mysql.to_string())).await.unwrap()).await;
        for _ in 0..300 {
            let f = engine.replica.get().map(|r| r.figures());
            if f.as_ref().is_some_and(|f| f.copy.tables_total > 0 && f.copy.tables_done == f.copy.tables_total) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut admin = direct().await;
        for w in writes {
            admin.query_drop(w).await.unwrap();
        }
        caught_up(&mut mysql_async::Conn::new(opts(&proxy.mysql.to_string())).await.unwrap()).await;
        let hits = || engine.by_name("by_grp").expect("cache").stats().hits;
        let mut answers = Vec::new();
        for grp in [1, 2] {
            let sql = format!("SELECT id, val FROM {TABLE} WHERE grp = {grp}");
            let mut answer = None;
            for _ in 0..100 {
                let before = hits();
                let got = through.query(&sql).await;
                if hits() > before {
                    answer = Some(got);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            answers.push((answer.unwrap_or_else(|| panic!("{sql} was never answered from the cache")), direct_client.query(&sql).await));
        }
        (answers, engine.replica.get().expect("the replica started").figures().copy.rows_copied)
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    answers
}

#[test]
fn a_binlog_started_again_at_the_replicas_position_is_not_taken_for_its_history() {
    let path = std::env::temp_dir().join(format!("freshet-proxy-replica-reset-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    upstream(&format!("DROP TABLE IF EXISTS {TABLE}"));
    upstream(&format!("CREATE TABLE {TABLE} (id INT PRIMARY KEY, grp INT NOT NULL, val INT NOT NULL, KEY (grp))"));
    upstream(&format!("INSERT INTO {TABLE} VALUES (1, 1, 100), (2, 2, 200), (3, 1, 300), (4, 2, 400)"));
    upstream("RESET MASTER");
    let bump = |id: i32| (0..5).map(|_| format!("UPDATE {TABLE} SET val = val + 1 WHERE id = {id}")).collect::<Vec<_>>();
    // A second later (so that the new file is begun at another second), the binlog started
    // again, then five writes of row `id`: the same sizes whichever row, so the same offsets.
    let reset_then_bump = |id: i32| {
        std::thread::sleep(Duration::from_millis(1100));
        upstream("RESET MASTER");
        for w in bump(id) {
            upstream(&w);
        }
    };
    let (answers, copied) = life(&path, &bump(1));
    assert_eq!(copied, 4, "the first life copies the table");
    for (got, want) in answers {
        assert_eq!(got, want, "the first life");
    }
    // Stopped: the same writes of another row bring the new binlog to the same file, offset
    // and GTIDs.
    reset_then_bump(2);
    let (answers, copied) = life(&path, &[]);
    for (got, want) in answers {
        assert_eq!(String::from_utf8_lossy(&got.concat()), String::from_utf8_lossy(&want.concat()), "after RESET MASTER while stopped");
    }
    assert_eq!(copied, 4, "the store is copied again");
    // A store that applied nothing after its copy: its position is where its stream started,
    // and no transaction of that file was ever applied to it.
    let _ = std::fs::remove_dir_all(&path);
    reset_then_bump(1);
    let (_, copied) = life(&path, &[]);
    assert_eq!(copied, 4, "a new store copies the table");
    reset_then_bump(2);
    let (answers, copied) = life(&path, &[]);
    for (got, want) in answers {
        assert_eq!(
            String::from_utf8_lossy(&got.concat()),
            String::from_utf8_lossy(&want.concat()),
            "after RESET MASTER while stopped, the store having applied nothing"
        );
    }
    assert_eq!(copied, 4, "the store is copied again");
    let _ = std::fs::remove_dir_all(&path);
    upstream(&format!("DROP TABLE IF EXISTS {TABLE}"));
}
