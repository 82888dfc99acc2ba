//! A server started with `lower_case_table_names = 1` (common where databases came from
//! Windows, and a setting of managed MySQL services) keeps every database and table name in
//! lower case and reads any spelling as it: a config naming `Folded_Db` and a query naming
//! `Items` are `folded_db` and `items`, and so are the row events and DDL that change them.
//! The test runs a MariaDB of its own (scripts/mariadb.sh with that option), since the setting
//! can only be chosen when a datadir is made.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use freshet_testkit::mariadb::PrivateServer;
use mysql_async::prelude::*;

/// The rows of `sql` through `conn`, as values.
async fn rows(conn: &mut mysql_async::Conn, sql: &str) -> Vec<Vec<mysql_async::Value>> {
    let rows: Vec<mysql_async::Row> = conn.query(sql).await.unwrap();
    rows.into_iter().map(|r| r.unwrap()).collect()
}

/// The reasons freshet relayed cached reads for, with their counts.
fn relayed(proxy: &Proxy) -> Vec<(String, u64)> {
    let counters = &proxy.engine.get().expect("the cache engine started").counters;
    let reasons = freshet_proxy::cache::RelayReason::ALL.iter().enumerate();
    reasons.map(|(i, r)| (format!("{r:?}"), counters.relayed[i].get())).filter(|(_, n)| *n > 0).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_folds_names_is_followed_however_the_config_spells_them() {
    let server =
        PrivateServer::start(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("folded-names-mariadb"), "--lower-case-table-names=1");
    let base = server.url.rsplit_once('/').expect("a URL with a database").0.to_string();
    let mut admin = mysql_async::Conn::from_url(format!("{base}/freshet_test")).await.unwrap();
    admin.query_drop("DROP DATABASE IF EXISTS Folded_Db").await.unwrap();
    admin.query_drop("CREATE DATABASE Folded_Db").await.unwrap();
    admin.query_drop("USE fOLDED_dB").await.unwrap();
    admin.query_drop("CREATE TABLE Folded_Db.Items (id INT PRIMARY KEY, k INT NOT NULL, n INT)").await.unwrap();
    admin.query_drop("INSERT INTO Folded_Db.Items VALUES (1, 1, 10), (2, 1, 20)").await.unwrap();
    let reads = [
        ("folded", "SELECT id, n FROM Items WHERE k = ?", "SELECT id, n FROM Items WHERE k = 1"),
        ("folded_all", "SELECT * FROM ITEMS WHERE k = ?", "SELECT * FROM items WHERE k = 1"),
    ];
    let mut config = String::from("[admin]\nusers = [\"freshet\"]\n[fill]\ntimeout = \"3s\"\n");
    for (name, query, _) in &reads {
        config.push_str(&format!("[[cache]]\nname = \"{name}\"\nquery = \"{query}\"\n"));
    }
    let proxy = start_proxy_with_url(&format!("{base}/Folded_Db"), &config).await;
    let (host, port) = (proxy.mysql.ip().to_string(), proxy.mysql.port());
    let through_opts = mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&format!("{base}/Folded_Db")).unwrap())
        .ip_or_hostname(host)
        .tcp_port(port)
        .prefer_socket(false);
    let mut ours = mysql_async::Conn::new(through_opts).await.unwrap();
    let mut theirs = mysql_async::Conn::from_url(format!("{base}/Folded_Db")).await.unwrap();
    let served = |name: &str| proxy.engine.get().unwrap().by_name(name).unwrap().stats().hits;
    for (name, _, sql) in &reads {
        for _ in 0..50 {
            if served(name) > 0 {
                break;
            }
            rows(&mut ours, sql).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(served(name) > 0, "{sql} is answered from its view (relayed: {:?})", relayed(&proxy));
    }
    // Rows changed through names of every case, and a column added to a table named in
    // capitals in a database named in capitals.
    for write in [
        "UPDATE items SET n = 11 WHERE id = 1",
        "INSERT INTO ITEMS VALUES (3, 1, 30)",
        "DELETE FROM FOLDED_DB.Items WHERE id = 2",
        "ALTER TABLE FOLDED_DB.ITEMS ADD COLUMN z INT NOT NULL DEFAULT 5",
        "INSERT INTO folded_db.items VALUES (4, 1, 40, 6)",
    ] {
        admin.query_drop(write).await.unwrap();
    }
    caught_up_with(&mut ours, &mut theirs).await;
    for (name, _, sql) in &reads {
        let want = rows(&mut theirs, sql).await;
        let before = served(name);
        for _ in 0..250 {
            assert_eq!(rows(&mut ours, sql).await, want, "{sql} after the writes");
            if served(name) > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(served(name) > before, "{sql} is answered from its view again (relayed: {:?})", relayed(&proxy));
    }
}
