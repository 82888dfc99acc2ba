//! Random schema changes: what an operator or a migration does to the tables cached queries
//! read, between reads. The admin runs one random DDL statement or write at a time on the
//! server; freshet is waited for until it has applied the binlog to the server's position;
//! then cached reads run on a direct connection and on one through freshet, and every answer
//! (column definitions, rows, or the error) must be the server's. freshet may rebuild its
//! views, or relay, but never answer with rows shaped or filled before the change.
//!
//! The statements change columns' types, lengths, character sets, collations, names,
//! nullability and defaults (some of them rewriting the stored values with no row event:
//! a shorter VARCHAR, fewer decimals, another character set, an ENUM), add and drop columns
//! anywhere in the row (`SELECT *` reads them), add and drop keys (ALTER IGNORE deletes
//! duplicates), change the engine and the partitioning, truncate a partition or the table,
//! swap tables by RENAME as online schema change tools do, and drop and create a table again.
//!
//! `FRESHET_SCHEMA_SEED` picks the sequence and `FRESHET_SCHEMA_STEPS` its length.

mod common;

use common::answers::*;
use common::*;
use freshet_testkit::rng::Rng;
use mysql_async::prelude::*;
use mysql_async::{Conn, Value};

const ITEMS: &str = "CREATE TABLE sc_items (id INT PRIMARY KEY, k INT NOT NULL, name VARCHAR(40) NOT NULL, \
     amount DECIMAL(10,3) NOT NULL, ts DATETIME NULL, KEY (k)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci";
const TAGS: &str =
    "CREATE TABLE sc_tags (item_id INT NOT NULL, tag VARCHAR(20) NOT NULL, PRIMARY KEY (item_id, tag)) DEFAULT CHARSET=utf8mb4";

const NAMES: [&str; 10] = ["Ana", "ana", "Ána", "Bob", "bob ", "Zoë", "Łukasz", "Ærø", "ß", "a long name, longer than most"];

/// (cache name, its query, the key's kind).
const CACHES: [(&str, &str, Key); 6] = [
    ("sc_point", "SELECT id, k, name, amount FROM sc_items WHERE id = ?", Key::Id),
    ("sc_ordered", "SELECT id, name FROM sc_items WHERE k = ? ORDER BY name, id", Key::K),
    // MAX of a text would show, among spellings equal under the collation, the server's
    // first read (docs/decisions.md, "A text MIN or MAX"): a temporal's instead.
    ("sc_sums", "SELECT k, COUNT(*) AS n, SUM(amount) AS s, MAX(ts) AS m FROM sc_items WHERE k = ? GROUP BY k", Key::K),
    ("sc_named", "SELECT id, k FROM sc_items WHERE name = ? ORDER BY id", Key::Name),
    ("sc_star", "SELECT * FROM sc_items WHERE k = ? ORDER BY id", Key::K),
    (
        "sc_tagged",
        "SELECT i.id, i.name, t.tag FROM sc_items i JOIN sc_tags t ON t.item_id = i.id WHERE i.k = ? ORDER BY i.id, t.tag",
        Key::K,
    ),
];

/// Schema changes, each run on its own (errors are part of the sequence: dropping a column
/// that is not there changes nothing).
const CHANGES: &[&str] = &[
    "ALTER TABLE sc_items ADD COLUMN extra INT NOT NULL DEFAULT 7",
    "ALTER TABLE sc_items ADD COLUMN first_col VARCHAR(8) DEFAULT 'x' FIRST",
    "ALTER TABLE sc_items ADD COLUMN after_id INT AFTER id",
    "ALTER TABLE sc_items ADD COLUMN quick INT NOT NULL DEFAULT 3, ALGORITHM = INSTANT",
    "ALTER TABLE sc_items DROP COLUMN extra",
    "ALTER TABLE sc_items DROP COLUMN first_col",
    "ALTER TABLE sc_items DROP COLUMN after_id",
    "ALTER TABLE sc_items DROP COLUMN quick",
    "ALTER TABLE sc_items MODIFY name VARCHAR(3) NOT NULL",
    "ALTER TABLE sc_items MODIFY name VARCHAR(40) NOT NULL",
    "ALTER TABLE sc_items MODIFY name VARCHAR(40) NULL",
    "ALTER TABLE sc_items MODIFY name CHAR(12) NOT NULL",
    "ALTER TABLE sc_items MODIFY name TEXT NOT NULL",
    "ALTER TABLE sc_items MODIFY name VARBINARY(40) NOT NULL",
    "ALTER TABLE sc_items MODIFY name VARCHAR(40) COMPRESSED NOT NULL",
    "ALTER TABLE sc_items MODIFY name VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL",
    "ALTER TABLE sc_items MODIFY name VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL",
    "ALTER TABLE sc_items MODIFY name ENUM('Ana', 'Bob', 'Zoë', 'ß') NOT NULL",
    "ALTER TABLE sc_items CONVERT TO CHARACTER SET latin1",
    "ALTER TABLE sc_items CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
    "ALTER TABLE sc_items MODIFY amount DECIMAL(10,1) NOT NULL",
    "ALTER TABLE sc_items MODIFY amount DECIMAL(10,3) NOT NULL",
    "ALTER TABLE sc_items MODIFY amount DOUBLE NOT NULL",
    "ALTER TABLE sc_items MODIFY amount INT NOT NULL",
    // A column the cached queries read, gone and back with another type.
    "ALTER TABLE sc_items DROP COLUMN amount",
    "ALTER TABLE sc_items ADD COLUMN amount DECIMAL(10,3) NOT NULL DEFAULT 2.5",
    "ALTER TABLE sc_items ADD COLUMN amount VARCHAR(10) NOT NULL DEFAULT ' 1.5e1x' AFTER k",
    "ALTER TABLE sc_items MODIFY k BIGINT NOT NULL",
    "ALTER TABLE sc_items MODIFY k SMALLINT UNSIGNED NOT NULL",
    "ALTER TABLE sc_items MODIFY k VARCHAR(10) NOT NULL",
    "ALTER TABLE sc_items MODIFY k DECIMAL(5,1) NOT NULL",
    "ALTER TABLE sc_items MODIFY k INT NOT NULL",
    "ALTER TABLE sc_items MODIFY id BIGINT NOT NULL",
    "ALTER TABLE sc_items MODIFY id INT NOT NULL",
    "ALTER TABLE sc_items MODIFY ts TIMESTAMP NULL",
    "ALTER TABLE sc_items MODIFY ts DATE NULL",
    "ALTER TABLE sc_items MODIFY ts DATETIME NULL",
    "ALTER TABLE sc_items CHANGE name title VARCHAR(40) NOT NULL",
    "ALTER TABLE sc_items CHANGE title name VARCHAR(40) NOT NULL",
    "ALTER TABLE sc_items CHANGE name NAME VARCHAR(40) NOT NULL",
    "ALTER TABLE sc_items RENAME COLUMN k TO K",
    "ALTER TABLE sc_items RENAME COLUMN k TO kk",
    "ALTER TABLE sc_items RENAME COLUMN kk TO k",
    "ALTER TABLE sc_items ALTER COLUMN k SET DEFAULT 3",
    "ALTER TABLE sc_items ADD COLUMN j JSON DEFAULT '{\"a\": [1, 2.5, null]}'",
    "ALTER TABLE sc_items ADD COLUMN bits BIT(3) DEFAULT b'101', ADD COLUMN y YEAR DEFAULT 2024",
    "ALTER TABLE sc_items ADD COLUMN labels SET('a', 'b', 'c') DEFAULT 'a,c', ADD COLUMN f FLOAT DEFAULT 1.5",
    "ALTER TABLE sc_items ADD COLUMN t TIME(3) DEFAULT '-01:02:03.456', ADD COLUMN z INT(4) UNSIGNED ZEROFILL DEFAULT 7",
    "ALTER TABLE sc_items ADD COLUMN created DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)",
    "ALTER TABLE sc_items DROP COLUMN j",
    "ALTER TABLE sc_items DROP COLUMN bits, DROP COLUMN y",
    "ALTER TABLE sc_items DROP COLUMN labels, DROP COLUMN f",
    "ALTER TABLE sc_items DROP COLUMN t, DROP COLUMN z",
    "ALTER TABLE sc_items DROP COLUMN created",
    "ALTER TABLE sc_items ADD COLUMN v INT AS (k * 2) VIRTUAL",
    "ALTER TABLE sc_items ADD COLUMN p INT AS (k + 1) PERSISTENT",
    "ALTER TABLE sc_items DROP COLUMN v",
    "ALTER TABLE sc_items DROP COLUMN p",
    "ALTER TABLE sc_items ADD INDEX by_name (name)",
    "ALTER TABLE sc_items DROP INDEX by_name",
    "ALTER IGNORE TABLE sc_items ADD UNIQUE KEY one_per_k (k)",
    "ALTER TABLE sc_items DROP INDEX one_per_k",
    "ALTER TABLE sc_items DROP PRIMARY KEY, ADD PRIMARY KEY (id, k)",
    "ALTER TABLE sc_items DROP PRIMARY KEY, ADD PRIMARY KEY (id)",
    "ALTER TABLE sc_items ENGINE = Aria",
    "ALTER TABLE sc_items ENGINE = MyISAM",
    "ALTER TABLE sc_items ENGINE = InnoDB",
    "ALTER TABLE sc_items ORDER BY name",
    "ALTER TABLE sc_items PARTITION BY HASH (id) PARTITIONS 3",
    "ALTER TABLE sc_items TRUNCATE PARTITION p0",
    "ALTER TABLE sc_items REMOVE PARTITIONING",
    "RENAME TABLE sc_items TO sc_moved",
    "RENAME TABLE sc_moved TO sc_items",
    "ALTER TABLE sc_items RENAME TO sc_moved",
    "ALTER TABLE sc_moved RENAME TO sc_items",
    "OPTIMIZE TABLE sc_items",
    "ANALYZE TABLE sc_items",
    "TRUNCATE TABLE sc_items",
    "ALTER TABLE sc_tags MODIFY tag VARCHAR(2) NOT NULL",
    "ALTER TABLE sc_tags MODIFY tag VARCHAR(20) NOT NULL",
    "ALTER TABLE sc_tags MODIFY item_id BIGINT NOT NULL",
    "ALTER TABLE sc_tags MODIFY item_id INT NOT NULL",
    "TRUNCATE TABLE sc_tags",
    // A foreign key's cascades are the engine's: no row event carries them.
    "SET STATEMENT foreign_key_checks = 0 FOR ALTER TABLE sc_tags ADD CONSTRAINT fk_item FOREIGN KEY (item_id) REFERENCES sc_items (id) ON DELETE CASCADE ON UPDATE CASCADE",
    "ALTER TABLE sc_tags DROP FOREIGN KEY fk_item",
    "CREATE TRIGGER sc_tag_new AFTER INSERT ON sc_items FOR EACH ROW INSERT IGNORE INTO sc_tags VALUES (NEW.id, 'trigger')",
    "DROP TRIGGER IF EXISTS sc_tag_new",
];

/// The rows a (re)created table starts with; `salt` changes their names and amounts, so that
/// a table created again does not hold what the one before held.
fn item_rows(salt: u64) -> String {
    let rows: Vec<String> = (0..30u64)
        .map(|id| {
            let name = NAMES[((id + salt) % NAMES.len() as u64) as usize];
            let ts = if id % 4 == 0 { "NULL".to_string() } else { format!("'2024-01-{:02} {:02}:30:00'", 1 + salt % 28, id % 24) };
            format!("({id}, {}, '{name}', {}.{:03}, {ts})", id % 5, (id * 7 + salt) % 50, id * 37 % 1000)
        })
        .collect();
    format!("INSERT INTO sc_items (id, k, name, amount, ts) VALUES {}", rows.join(", "))
}

fn tag_rows(salt: u64) -> String {
    let rows: Vec<String> =
        (0..30u64).filter(|id| id % 3 != 0).map(|id| format!("({id}, 'tag{}'), ({id}, 'Tag{}')", (id + salt) % 4, id % 2)).collect();
    format!("INSERT IGNORE INTO sc_tags VALUES {}", rows.join(", "))
}

/// One step of the admin's: several statements in order (errors ignored), then freshet is
/// waited for.
fn change(rng: &mut Rng, salt: u64) -> Vec<String> {
    let id = rng.below(36);
    match rng.below(20) {
        0 => {
            // What an online schema change tool does: a copy of the table, changed, swapped
            // in by one RENAME.
            vec![
                "DROP TABLE IF EXISTS sc_new, sc_old".into(),
                "CREATE TABLE sc_new LIKE sc_items".into(),
                "INSERT INTO sc_new SELECT * FROM sc_items WHERE id % 2 = 0".into(),
                "UPDATE sc_new SET amount = amount + 100".into(),
                "RENAME TABLE sc_items TO sc_old, sc_new TO sc_items".into(),
                "DROP TABLE sc_old".into(),
            ]
        }
        1 => vec!["DROP TABLE IF EXISTS sc_items".into(), ITEMS.into(), item_rows(salt)],
        19 if rng.below(2) == 0 => {
            // A partition exchanged with a table of other rows (when the table is
            // partitioned): rows move in and out with no row event.
            vec![
                "DROP TABLE IF EXISTS sc_swap".into(),
                "CREATE TABLE sc_swap LIKE sc_items".into(),
                "ALTER TABLE sc_swap REMOVE PARTITIONING".into(),
                format!(
                    "INSERT INTO sc_swap (id, k, name, amount, ts) VALUES (3, 1, 'swapped', 5, NULL), ({}, 2, 'swapped', 6, NULL)",
                    3 * (10 + salt)
                ),
                "ALTER TABLE sc_items EXCHANGE PARTITION p0 WITH TABLE sc_swap".into(),
            ]
        }
        2 => vec![ITEMS.replace("CREATE TABLE", "CREATE OR REPLACE TABLE"), item_rows(salt)],
        3 => vec!["DROP TABLE IF EXISTS sc_tags".into(), TAGS.into(), tag_rows(salt)],
        18 if rng.below(2) == 0 => {
            // A cache dropped and created again at run time (freshet's admin SQL; the server
            // answers it with a syntax error, which the test ignores).
            let (name, query, _) = *pick(rng, &CACHES);
            vec![format!("DROP CACHE {name}"), format!("CREATE CACHE {name} FROM {query}")]
        }
        4..=11 => vec![match rng.below(5) {
            0 => format!("UPDATE sc_items SET amount = amount + 1.5, name = '{}' WHERE id = {id}", pick(rng, &NAMES)),
            1 => format!(
                "INSERT INTO sc_items (id, k, name, amount, ts) VALUES ({id}, {}, '{}', 1, NOW()) ON DUPLICATE KEY UPDATE k = {}",
                id % 5,
                pick(rng, &NAMES),
                rng.below(5)
            ),
            2 => match rng.below(3) {
                0 => format!("UPDATE sc_items SET id = id + 40 WHERE id = {id}"),
                _ => format!("DELETE FROM sc_items WHERE id = {id}"),
            },
            3 => format!("INSERT IGNORE INTO sc_tags VALUES ({id}, 'tag{}')", rng.below(4)),
            _ => format!("DELETE FROM sc_tags WHERE item_id = {id}"),
        }],
        _ => vec![pick(rng, CHANGES).to_string()],
    }
}

/// freshet's config; with `replica`, fills read a copy of the tables in RocksDB there.
fn config(replica: Option<&std::path::Path>) -> String {
    let mut config = String::from(
        "[admin]\nusers = [\"freshet\"]\n[consistency]\nmax_lag = \"5s\"\nread_your_writes = true\nryw_timeout = \"3s\"\n[caches]\nstrict = false\n[fill]\ntimeout = \"3s\"\n",
    );
    if let Some(path) = replica {
        config.push_str(&format!("source = \"replica\"\n[replica]\npath = \"{}\"\ncopy_batch_rows = 16\n", path.display()));
    }
    for (name, query, _) in CACHES {
        config.push_str(&format!("[[cache]]\nname = \"{name}\"\nquery = \"{query}\"\n"));
    }
    config
}

/// A read of a cached query: text, prepared afresh, or from the driver's statement cache.
///
/// The key flags of a join's columns are left out: MariaDB shows them where its plan reads
/// the rows from the tables and not where it sorts them through a temporary table, and which
/// plan it takes depends on the tables' statistics (the join ordered by both tables' columns
/// reads `sc_tags` first while it is nearly empty, `sc_items` by `k` once it is not).
/// freshet keeps the definitions of the read it captured (docs/decisions.md, "Column
/// definitions per kinds of literals").
async fn read(conn: &mut Conn, how: u64, query: &str, value: &Value, literal: &str) -> Answer {
    let answer = read_as_sent(conn, how, query, value, literal).await;
    if !query.contains(" JOIN ") {
        return answer;
    }
    const KEY_FLAGS: u16 = 2 | 4 | 8 | 16384;
    answer.map(|sets| {
        sets.into_iter()
            .map(|(columns, rows)| {
                (columns.into_iter().map(|(s, t, n, ty, f, l, c, d)| (s, t, n, ty, f & !KEY_FLAGS, l, c, d)).collect(), rows)
            })
            .collect()
    })
}

async fn read_as_sent(conn: &mut Conn, how: u64, query: &str, value: &Value, literal: &str) -> Answer {
    match how {
        0 => {
            let statement = conn.prep(query).await.map_err(server_error)?;
            let answer = prepared(conn, statement.clone(), value.clone()).await;
            conn.close(statement).await.map_err(server_error)?;
            answer
        }
        1 => prepared(conn, query, value.clone()).await,
        _ => text(conn, &query.replace('?', literal)).await,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_answer_as_the_server_answers_across_schema_changes() {
    schema_changes(None).await;
}

/// The same with fills from the local replica, whose stored rows a schema change rewrites in
/// the background (or copies again) while fills go to the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_filled_from_the_replica_answer_as_the_server_answers_across_schema_changes() {
    let path = std::env::temp_dir().join(format!("freshet-schema-changes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    schema_changes(Some(&path)).await;
    let _ = std::fs::remove_dir_all(&path);
}

/// The tests of this file share their tables: one at a time.
static TABLES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn schema_changes(replica: Option<&std::path::Path>) {
    let _tables = TABLES.lock().await;
    let seed: u64 = std::env::var("FRESHET_SCHEMA_SEED").map_or(20261129, |s| s.parse().unwrap());
    let steps: usize = std::env::var("FRESHET_SCHEMA_STEPS").map_or(120, |s| s.parse().unwrap());
    // How many steps a failure shows before its own.
    let shown: usize = std::env::var("FRESHET_SCHEMA_SHOWN").map_or(40, |s| s.parse().unwrap());
    let mut admin = direct().await;
    // Changes that shorten or convert values do so as a migration run without strict mode does.
    admin.query_drop("SET SESSION sql_mode = ''").await.unwrap();
    for sql in ["DROP TABLE IF EXISTS sc_tags, sc_items, sc_new, sc_old, sc_moved, sc_swap", ITEMS, TAGS, &item_rows(0), &tag_rows(0)] {
        admin.query_drop(sql).await.unwrap();
    }
    let proxy = start_proxy(&config(replica)).await;
    let engine = proxy.engine.get().expect("the cache engine started").clone();
    let hits = || CACHES.iter().filter_map(|(name, ..)| engine.by_name(name)).map(|c| c.stats().hits).sum::<u64>();
    let mut rng = Rng::new(seed);
    // Every session reads as the admin's does, which a migration runs without strict mode.
    let mut d = direct().await;
    let mut t = through(&proxy).await;
    for c in [&mut d, &mut t] {
        c.query_drop("SET SESSION sql_mode = ''").await.unwrap();
    }
    let mut watcher = through(&proxy).await;
    let mut admin_through = through(&proxy).await;
    admin_through.query_drop("SET SESSION sql_mode = ''").await.unwrap();
    let mut history: Vec<String> = Vec::new();
    let (mut total_hits, mut reads) = (0, 0);
    let mut recent: Vec<(&str, Value, String)> = Vec::new();
    for salt in 1..=steps as u64 {
        // The admin's statements go to the server, or through freshet (relayed) now and then.
        let via_freshet = rng.below(4) == 0;
        // Now and then reads race the change on a connection of their own (their answers are
        // not compared: the server changes under them), so that fills and captures are in
        // flight across it; what they leave behind is read below.
        let racing = (rng.below(3) == 0).then(|| {
            let (proxy_addr, seed) = (proxy.mysql.to_string(), rng.next_u64());
            tokio::spawn(async move {
                let mut rng = Rng::new(seed);
                let Ok(mut c) = Conn::new(opts(&proxy_addr)).await else { return };
                let _ = c.query_drop("SET SESSION sql_mode = ''").await;
                for _ in 0..8 {
                    let (_, query, kind) = *pick(&mut rng, &CACHES);
                    let (value, literal) = key(&mut rng, kind, &NAMES);
                    let _ = read(&mut c, rng.below(4), query, &value, &literal).await;
                }
            })
        });
        // Now and then under MariaDB's SET STATEMENT, as migrations set a timeout or turn
        // foreign key checks off for one statement (not around one that sets them itself).
        let wrapped = rng.below(6) == 0;
        for sql in change(&mut rng, salt) {
            let sql = if wrapped && !sql.starts_with("SET ") { format!("SET STATEMENT lock_wait_timeout = 30 FOR {sql}") } else { sql };
            let conn = if via_freshet { &mut admin_through } else { &mut admin };
            let outcome = conn.query_drop(&sql).await;
            let how = if via_freshet { "through freshet" } else { "on the server" };
            history
                .push(format!("(the admin, {how}) {sql}{}", outcome.err().map(|e| format!("  [{}]", server_error(e))).unwrap_or_default()));
        }
        if let Some(racing) = racing {
            racing.await.expect("racing reads");
            history.push("(reads raced the change on another connection)".into());
        }
        // With read-your-writes, the admin's session through freshet reads right after its own
        // statements (freshet waits until its views have applied them); the other session
        // once freshet has applied them.
        let mut own_read = via_freshet;
        if !own_read {
            caught_up(&mut watcher).await;
        }
        for _ in 0..1 + rng.below(6) {
            // Half the reads are one read before, which a view that kept its rows answers.
            let (query, value, literal) = match recent.len() {
                n if n > 0 && rng.below(2) == 0 => recent[rng.below(n as u64) as usize].clone(),
                _ => {
                    let (_, query, kind) = *pick(&mut rng, &CACHES);
                    let (value, literal) = key(&mut rng, kind, &NAMES);
                    recent.push((query, value.clone(), literal.clone()));
                    if recent.len() > 8 {
                        recent.remove(0);
                    }
                    (query, value, literal)
                }
            };
            let how = rng.below(4);
            history.push(format!("{query} with {literal} ({})", ["prepared", "driver-cached", "text", "text"][how as usize]));
            let want = read(&mut d, how, query, &value, &literal).await;
            let before = hits();
            let got = read(if own_read { &mut admin_through } else { &mut t }, how, query, &value, &literal).await;
            // (A view rebuilt while the read waited starts its count again: then not told.)
            let after = hits();
            let served = after > before;
            total_hits += after.saturating_sub(before);
            if std::mem::take(&mut own_read) {
                history.last_mut().unwrap().push_str(" by the admin's session");
                caught_up(&mut watcher).await;
            }
            reads += 1;
            // The driver's cached statements keep the definitions of their prepare (see
            // `prepared`), which do not take part here either.
            assert!(
                got == want,
                "seed {seed}, step {} ({}): {}\nthrough freshet: {got:?}\nthe server:      {want:?}\nthe steps before:\n{}",
                history.len(),
                if served { "answered from a view" } else { "relayed" },
                history.last().unwrap(),
                history[history.len().saturating_sub(shown)..history.len() - 1].join("\n")
            );
            if served {
                history.last_mut().unwrap().push_str("  [answered from a view]");
            }
        }
    }
    if let Some(replica) = proxy.engine.get().and_then(|e| e.replica.get()) {
        eprintln!("the replica: {:?}", replica.figures());
    }
    eprintln!("seed {seed}: {reads} reads, {total_hits} answered from a view");
    assert!(total_hits > 0, "seed {seed}: no read was answered from the cache");
}

/// Runs `setup` on the server and starts freshet caching `read` as `name`: the admin's
/// connection and freshet.
async fn one_cache(setup: &[&str], name: &str, read: &str) -> (Conn, Proxy) {
    let mut admin = direct().await;
    for sql in setup {
        admin.query_drop(*sql).await.unwrap();
    }
    let proxy = start_proxy(&format!("[admin]\nusers = [\"freshet\"]\n[[cache]]\nname = \"{name}\"\nquery = \"{read}\"\n")).await;
    (admin, proxy)
}

/// A text read of `sql` through freshet and on the server, after freshet applied what the
/// server wrote; `served` is whether freshet answered it from a view.
async fn read_both(proxy: &Proxy, name: &str, sql: &str) -> (Answer, Answer, bool) {
    caught_up(&mut through(proxy).await).await;
    let hits = || proxy.engine.get().unwrap().by_name(name).unwrap().stats().hits;
    let want = text(&mut direct().await, sql).await;
    let mut t = through(proxy).await;
    for _ in 0..50 {
        let before = hits();
        let got = text(&mut t, sql).await;
        if hits() > before {
            return (got, want, true);
        }
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    (text(&mut t, sql).await, want, false)
}

/// A DDL the binlog does not carry (run with `sql_log_bin = 0`): the next row event's table map
/// differs, the stream reads the schema again, and the views' catalog must get it too. Made
/// uncacheable (a COMPRESSED column), the table's rows were skipped while its views served
/// the rows they held (an audit's suspicion, confirmed here); with its columns moved, the
/// views served the old row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_made_uncacheable_by_unlogged_ddl_stops_being_served() {
    let _tables = TABLES.lock().await;
    let read = "SELECT id, v FROM sc_unseen WHERE id = ?";
    let setup = [
        "DROP TABLE IF EXISTS sc_unseen",
        "CREATE TABLE sc_unseen (id INT PRIMARY KEY, v VARCHAR(50) NOT NULL)",
        "INSERT INTO sc_unseen VALUES (1, 'old'), (2, 'two')",
    ];
    let (mut admin, proxy) = one_cache(&setup, "sc_unseen", read).await;
    let sql = read.replace('?', "1");
    let (got, want, served) = read_both(&proxy, "sc_unseen", &sql).await;
    assert!(served && got == want, "before: {got:?} / {want:?}");
    admin.query_drop("SET SESSION sql_log_bin = 0").await.unwrap();
    admin.query_drop("ALTER TABLE sc_unseen MODIFY v VARCHAR(50) COMPRESSED NOT NULL").await.unwrap();
    admin.query_drop("SET SESSION sql_log_bin = 1").await.unwrap();
    admin.query_drop("UPDATE sc_unseen SET v = 'new' WHERE id = 1").await.unwrap();
    let (got, want, served) = read_both(&proxy, "sc_unseen", &sql).await;
    assert_eq!(got, want, "after the unlogged ALTER and a write");
    assert!(!served, "a table freshet cannot cache answered from a view");
    // An unlogged ALTER that leaves the table cacheable, with its columns moved: the views
    // must read the new layout (they served the old row).
    admin.query_drop("SET SESSION sql_log_bin = 0").await.unwrap();
    admin.query_drop("ALTER TABLE sc_unseen MODIFY v VARCHAR(50) NOT NULL, ADD COLUMN w INT NOT NULL DEFAULT 7 FIRST").await.unwrap();
    admin.query_drop("SET SESSION sql_log_bin = 1").await.unwrap();
    let (got, want, _) = read_both(&proxy, "sc_unseen", &sql).await;
    assert_eq!(got, want, "after the second unlogged ALTER");
    admin.query_drop("UPDATE sc_unseen SET v = 'newer' WHERE id = 1").await.unwrap();
    let (got, want, _) = read_both(&proxy, "sc_unseen", &sql).await;
    assert_eq!(got, want, "after the second unlogged ALTER and a write");
    admin.query_drop("DROP TABLE sc_unseen").await.unwrap();
}

/// MariaDB pads a CHAR's and a BINARY's values to the column's width: a CHAR shows them
/// without trailing spaces, a BINARY with its trailing zero bytes. A VARCHAR changed to a
/// CHAR of the same length (the same octet length, so nothing else of the column changes)
/// loses its values' trailing spaces, a VARBINARY changed to a BINARY gains zero bytes, and
/// the views must not keep the values they held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_made_fixed_width_is_read_anew() {
    let _tables = TABLES.lock().await;
    let read = "SELECT id, v, b FROM sc_fixed WHERE k = ?";
    let setup = [
        "DROP TABLE IF EXISTS sc_fixed",
        "CREATE TABLE sc_fixed (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(10) NOT NULL, b VARBINARY(4) NOT NULL) CHARSET utf8mb4",
        "INSERT INTO sc_fixed VALUES (1, 1, 'bob ', 'ab'), (2, 1, 'ann', 'cd')",
    ];
    let (mut admin, proxy) = one_cache(&setup, "sc_fixed", read).await;
    let sql = read.replace('?', "1");
    let (got, want, served) = read_both(&proxy, "sc_fixed", &sql).await;
    assert!(served && got == want, "before: {got:?} / {want:?}");
    for (change, what) in [
        ("ALTER TABLE sc_fixed MODIFY v CHAR(10) NOT NULL, MODIFY b BINARY(4) NOT NULL", "made CHAR and BINARY"),
        ("UPDATE sc_fixed SET v = 'carl ', b = 'e' WHERE id = 2", "written as CHAR and BINARY"),
        ("ALTER TABLE sc_fixed MODIFY v VARCHAR(10) NOT NULL, MODIFY b VARBINARY(4) NOT NULL", "made VARCHAR and VARBINARY again"),
    ] {
        admin.query_drop(change).await.unwrap();
        let (got, want, served) = read_both(&proxy, "sc_fixed", &sql).await;
        assert_eq!(got, want, "after the columns were {what} (answered from a view: {served})");
        assert!(served, "answered from a view after the columns were {what}");
    }
}

/// A shorter VARCHAR cuts the values that do not fit (a migration run without strict mode),
/// with no row event: a replica that keeps its stored rows across a new length fills views
/// with values the server no longer holds. And a DDL that no write follows must leave the
/// replica answering fills: its position is the DDL's once the DDL is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_column_is_read_anew_into_the_replica() {
    replica_case(
        "sc_short",
        &[
            "SET SESSION sql_mode = ''",
            "CREATE TABLE sc_short (id INT PRIMARY KEY, k INT NOT NULL, name VARCHAR(20) NOT NULL) CHARSET utf8mb4",
            "INSERT INTO sc_short SELECT seq, seq % 4, CONCAT('a long name ', seq) FROM seq_1_to_40",
        ],
        "ALTER TABLE sc_short MODIFY name VARCHAR(8) NOT NULL",
    )
    .await;
}

/// A table dropped and created again with the same columns is another table: the replica
/// must not keep the dropped one's rows, also when the stream reads the schema after the new
/// table exists (it reads it when it reaches the DROP: here one text runs all three).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_dropped_and_created_again_is_copied_anew_into_the_replica() {
    let create = "CREATE TABLE sc_again (id INT PRIMARY KEY, k INT NOT NULL, name VARCHAR(20) NOT NULL) CHARSET utf8mb4";
    replica_case(
        "sc_again",
        &[create, "INSERT INTO sc_again SELECT seq, seq % 4, CONCAT('old ', seq) FROM seq_1_to_40"],
        &format!("DROP TABLE sc_again; {create}; INSERT INTO sc_again SELECT seq, seq % 4, CONCAT('new ', seq) FROM seq_1_to_20"),
    )
    .await;
}

/// A table that was Aria for a while (its changes then applied from the binlog, nothing read
/// without a snapshot) is copied again and answered from the replica once InnoDB again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_back_from_an_engine_without_snapshots_is_copied_anew_into_the_replica() {
    replica_case(
        "sc_engine2",
        &[
            "CREATE TABLE sc_engine2 (id INT PRIMARY KEY, k INT NOT NULL, name VARCHAR(20) NOT NULL) ENGINE = InnoDB",
            "INSERT INTO sc_engine2 SELECT seq, seq % 4, CONCAT('name ', seq) FROM seq_1_to_40",
        ],
        "ALTER TABLE sc_engine2 ENGINE = Aria; UPDATE sc_engine2 SET k = (k + 1) % 4 WHERE id < 10; \
         ALTER TABLE sc_engine2 ENGINE = InnoDB; DELETE FROM sc_engine2 WHERE id = 12",
    )
    .await;
}

/// `table` (id, k, name) made by `setup` and cached as `SELECT id, name ... WHERE k = ?` with
/// fills from a replica; once it is copied, the admin runs `change`, and once freshet has
/// applied it and the replica holds the table again, every `k` of 0..4 must be answered from
/// a view filled from the replica, as the server answers it.
async fn replica_case(table: &str, setup: &[&str], change: &str) {
    let _tables = TABLES.lock().await;
    let path = std::env::temp_dir().join(format!("freshet-schema-{table}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    let mut admin = direct().await;
    admin.query_drop(format!("DROP TABLE IF EXISTS {table}")).await.unwrap();
    for sql in setup {
        admin.query_drop(*sql).await.unwrap();
    }
    let read = format!("SELECT id, name FROM {table} WHERE k = ? ORDER BY id");
    let config = format!(
        "[admin]\nusers = [\"freshet\"]\n[fill]\nsource = \"replica\"\n[replica]\npath = \"{}\"\ncopy_batch_rows = 16\n[[cache]]\nname = \"{table}\"\nquery = \"{read}\"\n",
        path.display()
    );
    let proxy = start_proxy(&config).await;
    let replica = || proxy.engine.get().unwrap().replica.get().expect("the replica started").figures();
    let copied = |f: &freshet_proxy::cache::replica::ReplicaFigures| f.copy.tables_total > 0 && f.copy.tables_done == f.copy.tables_total;
    assert!(eventually(|| copied(&replica())).await, "the copy did not finish: {:?}", replica());
    admin.query_drop(change).await.unwrap();
    caught_up(&mut through(&proxy).await).await;
    assert!(eventually(|| copied(&replica())).await, "the table is not the replica's again: {:?}", replica());
    let fills = replica().fills;
    for k in 0..4 {
        let (got, want, served) = read_both(&proxy, table, &read.replace('?', &k.to_string())).await;
        assert_eq!(got, want, "k = {k} after `{change}` (answered from a view: {served})");
        assert!(served, "k = {k} answered from a view after `{change}`: {:?}", replica());
    }
    assert!(replica().fills > fills, "filled from the replica: {:?}", replica());
    let _ = std::fs::remove_dir_all(&path);
}

/// MariaDB runs `SET STATEMENT var = value FOR <statement>` as the statement with the
/// variables set, and logs it so. A foreign key added that way (with `foreign_key_checks = 0`,
/// as migrations do to add one over existing rows) must be known like any other: its cascades
/// change the child's rows with no row event, and the views reading the child must refill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_key_added_under_set_statement_cascades_into_the_views() {
    let _tables = TABLES.lock().await;
    let read = "SELECT item_id, tag FROM sc_child WHERE tag = ? ORDER BY item_id";
    let setup = [
        "DROP TABLE IF EXISTS sc_child, sc_parent",
        "CREATE TABLE sc_parent (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL)",
        "CREATE TABLE sc_child (item_id INT NOT NULL, tag VARCHAR(20) NOT NULL, PRIMARY KEY (item_id, tag))",
        "INSERT INTO sc_parent VALUES (1, 'one'), (2, 'two')",
        "INSERT INTO sc_child VALUES (1, 'red'), (2, 'red'), (2, 'blue')",
    ];
    let (mut admin, proxy) = one_cache(&setup, "sc_child", read).await;
    admin
        .query_drop(
            "SET STATEMENT foreign_key_checks = 0 FOR ALTER TABLE sc_child ADD CONSTRAINT sc_child_item \
             FOREIGN KEY (item_id) REFERENCES sc_parent (id) ON UPDATE CASCADE ON DELETE CASCADE",
        )
        .await
        .unwrap();
    let sql = read.replace('?', "'red'");
    let (got, want, served) = read_both(&proxy, "sc_child", &sql).await;
    assert!(served && got == want, "before: {got:?} / {want:?}");
    // The cascades: item 1's tags move to 101, item 2's go.
    admin.query_drop("UPDATE sc_parent SET id = 101 WHERE id = 1").await.unwrap();
    admin.query_drop("DELETE FROM sc_parent WHERE id = 2").await.unwrap();
    let (got, want, served) = read_both(&proxy, "sc_child", &sql).await;
    assert_eq!(got, want, "after the parent's rows changed (answered from a view: {served})");
    admin.query_drop("DROP TABLE sc_child, sc_parent").await.unwrap();
}

/// A fill reads a table in a consistent snapshot at a binlog position, and then applies what
/// the binlog holds after it. A non-transactional engine (Aria, MyISAM, MEMORY) has no
/// snapshot: the read sees writes committed after the position, which are then applied a
/// second time (the random test saw a group count a moved row twice). freshet refuses such a
/// table at start-up (`check_upstream`); one altered to such an engine while freshet runs must
/// be relayed too, and served again once it is InnoDB again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_altered_to_an_engine_without_snapshots_is_relayed() {
    let _tables = TABLES.lock().await;
    let read = "SELECT id, k FROM sc_engine WHERE k = ? ORDER BY id";
    let setup = [
        "DROP TABLE IF EXISTS sc_engine",
        "CREATE TABLE sc_engine (id INT PRIMARY KEY, k INT NOT NULL) ENGINE = InnoDB",
        "INSERT INTO sc_engine VALUES (1, 1), (2, 1), (3, 2)",
    ];
    let (mut admin, proxy) = one_cache(&setup, "sc_engine", read).await;
    let sql = read.replace('?', "1");
    let (got, want, served) = read_both(&proxy, "sc_engine", &sql).await;
    assert!(served && got == want, "before: {got:?} / {want:?}");
    for engine in ["Aria", "MyISAM", "MEMORY"] {
        admin.query_drop(format!("ALTER TABLE sc_engine ENGINE = {engine}")).await.unwrap();
        admin.query_drop("UPDATE sc_engine SET k = 1 WHERE id = 3").await.unwrap();
        let (got, want, served) = read_both(&proxy, "sc_engine", &sql).await;
        assert_eq!(got, want, "as {engine}");
        assert!(!served, "a table of engine {engine} answered from a view");
        admin.query_drop("UPDATE sc_engine SET k = 2 WHERE id = 3").await.unwrap();
    }
    admin.query_drop("ALTER TABLE sc_engine ENGINE = InnoDB").await.unwrap();
    let (got, want, served) = read_both(&proxy, "sc_engine", &sql).await;
    assert!(served && got == want, "InnoDB again: {got:?} / {want:?} (answered from a view: {served})");
    admin.query_drop("DROP TABLE sc_engine").await.unwrap();
}

/// MariaDB's column compression (`VARCHAR(n) COMPRESSED`, 10.3): the binlog carries such a
/// column compressed, with a type of its own in the table map (140, 141) that the binlog
/// reader cannot size, so no row of such a table can be read from the binlog. Its caches are
/// relayed, and its writes must not end the stream: that evicted every cache, of every table,
/// at each write (an audit: 307 of 440 reads of an unrelated table relayed in 3 s), while the
/// status said the stream was up. Adding such a column to a cached table does the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_column_is_relayed_and_its_writes_leave_the_stream_up() {
    let _tables = TABLES.lock().await;
    let read = "SELECT id, name FROM sc_compressed WHERE k = ? ORDER BY id";
    let plain = "SELECT id, v FROM sc_plain WHERE id = ?";
    let setup = [
        "DROP TABLE IF EXISTS sc_compressed, sc_plain",
        "CREATE TABLE sc_compressed (id INT PRIMARY KEY, k INT NOT NULL, name VARCHAR(200) COMPRESSED NOT NULL, body TEXT COMPRESSED)",
        "INSERT INTO sc_compressed VALUES (1, 1, REPEAT('abc', 50), REPEAT('x', 300)), (2, 1, 'short', NULL)",
        "CREATE TABLE sc_plain (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)",
        "INSERT INTO sc_plain VALUES (1, 'one'), (2, 'two')",
    ];
    let mut admin = direct().await;
    for sql in setup {
        admin.query_drop(sql).await.unwrap();
    }
    let proxy = start_proxy(&format!(
        "[admin]\nusers = [\"freshet\"]\n[caches]\nstrict = false\n[[cache]]\nname = \"sc_compressed\"\nquery = \"{read}\"\n[[cache]]\nname = \"sc_plain\"\nquery = \"{plain}\"\n"
    ))
    .await;
    let engine = proxy.engine.get().unwrap().clone();
    let restarts = || engine.counters.restarts.get();
    let sql = read.replace('?', "1");
    let plain_sql = plain.replace('?', "1");
    let (got, want, _) = read_both(&proxy, "sc_plain", &plain_sql).await;
    assert_eq!(got, want, "the plain table before");
    let before = restarts();
    let evicted = engine.by_name("sc_plain").unwrap().stats().evictions;
    admin.query_drop("UPDATE sc_compressed SET name = REPEAT('xyz', 60) WHERE id = 2").await.unwrap();
    admin.query_drop("INSERT INTO sc_compressed VALUES (3, 1, REPEAT('q', 150), 'b')").await.unwrap();
    let (got, want, served) = read_both(&proxy, "sc_compressed", &sql).await;
    assert_eq!(got, want, "after writes");
    assert!(!served, "a table the binlog cannot be read for answered from a view");
    let (got, want, served) = read_both(&proxy, "sc_plain", &plain_sql).await;
    assert!(served && got == want, "the plain table after: {got:?} / {want:?} (answered from a view: {served})");
    assert_eq!(restarts(), before, "a write to the compressed table ended the binlog stream");
    assert_eq!(engine.by_name("sc_plain").unwrap().stats().evictions, evicted, "the plain table's cache was evicted");
    // A compressed column added to a cached table: relayed from then on, the stream up.
    admin.query_drop("ALTER TABLE sc_plain ADD COLUMN z TEXT COMPRESSED").await.unwrap();
    admin.query_drop("UPDATE sc_plain SET v = 'uno', z = REPEAT('z', 100) WHERE id = 1").await.unwrap();
    let (got, want, served) = read_both(&proxy, "sc_plain", &plain_sql).await;
    assert_eq!(got, want, "the plain table after its compressed column");
    assert!(!served, "a table with a compressed column answered from a view");
    assert_eq!(restarts(), before, "a write to the altered table ended the binlog stream");
    admin.query_drop("DROP TABLE sc_compressed, sc_plain").await.unwrap();
}

/// A logged DDL whose text the stream cannot read (a non-ASCII letter right before a
/// backtick, text past 64 KiB, a session in another character set) evicts every cache, and
/// must give the views the table's new schema too: two columns that swapped names keep their
/// types, so the table map matched the old schema and the rows after it were read into the
/// wrong columns (an audit: two rows for one primary key, served from the cache, for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ddl_text_the_stream_cannot_read_gives_the_views_the_new_schema() {
    let _tables = TABLES.lock().await;
    let read = "SELECT id, `aä`, `bä` FROM sc_unread WHERE id = ?";
    let setup = [
        "DROP TABLE IF EXISTS sc_unread",
        "CREATE TABLE sc_unread (id INT PRIMARY KEY, `aä` INT NOT NULL, `bä` INT NOT NULL) DEFAULT CHARSET=utf8mb4",
        "INSERT INTO sc_unread VALUES (1, 10, 20), (2, 10, 30)",
    ];
    let (mut admin, proxy) = one_cache(&setup, "sc_unread", read).await;
    let sql = read.replace('?', "1");
    let (got, want, served) = read_both(&proxy, "sc_unread", &sql).await;
    assert!(served && got == want, "before: {got:?} / {want:?}");
    let long = format!("/* {} */", "x".repeat(70_000));
    for (n, swap) in [
        "ALTER TABLE sc_unread RENAME COLUMN `aä` TO `cä`, RENAME COLUMN `bä` TO `aä`".to_string(),
        format!("ALTER TABLE sc_unread {long} RENAME COLUMN `cä` TO `bä`"),
        "ALTER TABLE sc_unread RENAME COLUMN `aä` TO `bä`, RENAME COLUMN `bä` TO `aä`".to_string(),
    ]
    .iter()
    .enumerate()
    {
        admin.query_drop(swap).await.unwrap();
        let (got, want, _) = read_both(&proxy, "sc_unread", &sql).await;
        assert_eq!(got, want, "after swap {n}");
        admin.query_drop(format!("UPDATE sc_unread SET `aä` = {} WHERE id = 1", 90 + n)).await.unwrap();
        let (got, want, served) = read_both(&proxy, "sc_unread", &sql).await;
        assert_eq!(got, want, "after swap {n} and a write (answered from a view: {served})");
    }
    admin.query_drop("DROP TABLE sc_unread").await.unwrap();
}

/// Two caches whose queries compile to the same plan share one view. A DDL that rebuilds it
/// gave the new view to the first of them only: the other relayed every read for good while
/// its status said it was serving (an audit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_sharing_a_view_are_both_served_after_ddl() {
    let _tables = TABLES.lock().await;
    let mut admin = direct().await;
    for sql in [
        "DROP TABLE IF EXISTS sc_shared",
        "CREATE TABLE sc_shared (id INT PRIMARY KEY, k INT NOT NULL, s VARCHAR(20), n INT)",
        "INSERT INTO sc_shared VALUES (1, 1, 'one', 10), (2, 1, 'two', 20)",
    ] {
        admin.query_drop(sql).await.unwrap();
    }
    let proxy = start_proxy(
        "[admin]\nusers = [\"freshet\"]\n[[cache]]\nname = \"by_id\"\nquery = \"SELECT id, k, s, n FROM sc_shared WHERE id = ?\"\n\
         [[cache]]\nname = \"by_id_star\"\nquery = \"SELECT * FROM sc_shared WHERE id = ?\"\n",
    )
    .await;
    let reads = [("by_id", "SELECT id, k, s, n FROM sc_shared WHERE id = 1"), ("by_id_star", "SELECT * FROM sc_shared WHERE id = 1")];
    for (name, sql) in reads {
        let (got, want, served) = read_both(&proxy, name, sql).await;
        assert!(served && got == want, "{name} before: {got:?} / {want:?}");
    }
    admin.query_drop("ALTER TABLE sc_shared MODIFY n BIGINT").await.unwrap();
    for (name, sql) in reads {
        let (got, want, served) = read_both(&proxy, name, sql).await;
        assert_eq!(got, want, "{name} after the ALTER");
        assert!(served, "{name} answered from its view after the ALTER");
    }
    admin.query_drop("DROP TABLE sc_shared").await.unwrap();
}

/// The same from a session whose default database is another: the table is named with its
/// database, and every table's schema read again must still reach the views (an audit: a
/// collation changed so was never the views', which compared keys under the old one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ddl_text_the_stream_cannot_read_from_another_database_gives_the_views_the_new_schema() {
    let _tables = TABLES.lock().await;
    let read = "SELECT id, s FROM sc_unread_coll WHERE s = ? ORDER BY id";
    let setup = [
        "DROP TABLE IF EXISTS sc_unread_coll",
        "CREATE TABLE sc_unread_coll (id INT PRIMARY KEY, s VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL)",
        "INSERT INTO sc_unread_coll VALUES (1, 'abc'), (2, 'ABC')",
    ];
    let (mut admin, proxy) = one_cache(&setup, "sc_unread_coll", read).await;
    for key in ["'abc'", "'ABC'", "'Abc'"] {
        let sql = read.replace('?', key);
        let (got, want, _) = read_both(&proxy, "sc_unread_coll", &sql).await;
        assert_eq!(got, want, "{key} before");
    }
    admin.query_drop("CREATE DATABASE IF NOT EXISTS sc_elsewhere").await.unwrap();
    admin.query_drop("USE sc_elsewhere").await.unwrap();
    admin
        .query_drop("ALTER TABLE freshet_test.sc_unread_coll MODIFY s VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL COMMENT 'é`'")
        .await
        .unwrap();
    admin.query_drop("INSERT INTO freshet_test.sc_unread_coll VALUES (4, 'aBc')").await.unwrap();
    for key in ["'abc'", "'ABC'", "'Abc'"] {
        let sql = read.replace('?', key);
        let (got, want, served) = read_both(&proxy, "sc_unread_coll", &sql).await;
        assert_eq!(got, want, "{key} after the collation changed (answered from a view: {served})");
    }
    admin.query_drop("DROP TABLE freshet_test.sc_unread_coll").await.unwrap();
}

/// A cache's fill and eviction counts go on across DDL that rebuilds its view: they are
/// Prometheus counters, and their help says evictions count what DDL dropped. They were the
/// live view's own, so a rebuilt view started them from zero and the partitions DDL dropped
/// were never counted (an audit: `fills_total` 19, then 0 after an ALTER).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caches_counts_go_on_across_a_rebuilt_view() {
    let _tables = TABLES.lock().await;
    let read = "SELECT id, v FROM sc_counted WHERE id = ?";
    let setup = [
        "DROP TABLE IF EXISTS sc_counted",
        "CREATE TABLE sc_counted (id INT PRIMARY KEY, v INT NOT NULL)",
        "INSERT INTO sc_counted VALUES (1, 10), (2, 20)",
    ];
    let (mut admin, proxy) = one_cache(&setup, "sc_counted", read).await;
    for id in [1, 2] {
        let (got, want, served) = read_both(&proxy, "sc_counted", &read.replace('?', &id.to_string())).await;
        assert!(served && got == want, "key {id}: {got:?} / {want:?}");
    }
    let stats = || proxy.engine.get().unwrap().by_name("sc_counted").unwrap().stats();
    let before = stats();
    assert!(before.fills >= 2, "{before:?}");
    admin.query_drop("ALTER TABLE sc_counted ADD COLUMN w INT NOT NULL DEFAULT 7").await.unwrap();
    let (got, want, served) = read_both(&proxy, "sc_counted", &read.replace('?', "1")).await;
    assert!(served && got == want, "after the ALTER: {got:?} / {want:?}");
    let after = stats();
    assert!(after.fills > before.fills, "fills went from {} to {}", before.fills, after.fills);
    assert!(after.evictions >= before.evictions + 2, "the ALTER's evictions were not counted: {before:?} then {after:?}");
    admin.query_drop("DROP TABLE sc_counted").await.unwrap();
}
