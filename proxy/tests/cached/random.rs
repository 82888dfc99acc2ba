//! Random cached queries (`freshet_testkit::sqlgen`) answered as the server answers them: as they
//! are, after a schema change, read after the session's own writes, evicted and filled again, and
//! filled from the replica.

use super::*;

/// Random queries of every shape a cache compiles (`freshet_testkit::sqlgen`: joins of columns of
/// any kinds, groupings, top-k, DISTINCT, UNION ALL) over two tables holding each type's ends,
/// NULLs and strings equal under the collation but spelled otherwise, cached together, read
/// through freshet and directly (as text and as prepared statements) after the fill and after
/// each of three rounds of random inserts, updates and deletes (of one row or of many, every
/// other round in one transaction): end to end (fills by the server's SQL, the binlog's rows
/// decoded, values encoded on the wire), every answer must be the server's. The dataflow's
/// `random_queries_answer_as_the_server_answers` checks the views alone, with many more queries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cached_queries_answer_as_the_server_answers() {
    random_cached_queries(Variant { db: "freshet_test", ..Variant::default() }).await;
}

/// The same with a schema change between two rounds: a text column's collation and a
/// DECIMAL's scale change, so views are rebuilt with the new types or relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cached_queries_after_a_schema_change_answer_as_the_server_answers() {
    let ddl = "ALTER TABLE ex MODIFY s VARCHAR(12) COLLATE utf8mb4_bin NULL, MODIFY d DECIMAL(12,3) NULL";
    random_cached_queries(Variant { db: "freshet_test_ddl", ddl: Some(ddl), ..Variant::default() }).await;
}

/// The same with the writes sent through freshet by the session that reads, each read right
/// after them: read-your-writes (`[consistency] read_your_writes`) waits for the session's
/// writes to be applied, or relays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cached_queries_read_after_their_sessions_writes_answer_as_the_server_answers() {
    random_cached_queries(Variant { db: "freshet_test_ryw", writes_through_freshet: true, ..Variant::default() }).await;
}

/// The same with a memory limit the views do not fit in: partitions are evicted and filled
/// again between the reads, in a database of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cached_queries_evicted_and_filled_again_answer_as_the_server_answers() {
    random_cached_queries(Variant { db: "freshet_test_evicted", memory: Some("64KiB"), ..Variant::default() }).await;
}

/// The same with `[fill] source = "replica"`: misses are filled from the local RocksDB copy
/// of the tables (their rows encoded and decoded by the replica), in a database of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cached_queries_filled_from_the_replica_answer_as_the_server_answers() {
    let path = std::env::temp_dir().join(format!("freshet-random-replica-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    random_cached_queries(Variant { db: "freshet_test_replica", replica: Some(&path), ..Variant::default() }).await;
    let _ = std::fs::remove_dir_all(&path);
}

/// How a run of [`random_cached_queries_answer_as_the_server_answers`] differs.
#[derive(Default)]
struct Variant<'a> {
    /// Its database (each run its own: they run at once).
    db: &'a str,
    /// Misses filled from a replica at this path, not from the server.
    replica: Option<&'a std::path::Path>,
    /// The views' memory limit.
    memory: Option<&'a str>,
    /// The writes sent through freshet by the reading session, read without waiting.
    writes_through_freshet: bool,
    /// A schema change made before the third round of reads.
    ddl: Option<&'a str>,
}

/// [`random_cached_queries_answer_as_the_server_answers`] as `variant` says.
async fn random_cached_queries(variant: Variant<'_>) {
    let Variant { db, replica, memory, writes_through_freshet, ddl } = variant;
    use freshet_testkit::sqlgen;
    let mut admin = direct().await;
    admin.query_drop(format!("CREATE DATABASE IF NOT EXISTS {db}")).await.unwrap();
    let mut admin = mysql_async::Conn::new(opts(&upstream_addr()).db_name(Some(db))).await.unwrap();
    let mut rng = freshet_testkit::rng::Rng::new(std::env::var("FRESHET_QUERY_SEED").map_or(20261128, |s| s.parse().unwrap()));
    // Rows of both tables, as literals: (table, pools, rows).
    let mut tables: [SqlTable; 2] = [("ex", &sqlgen::EX_POOLS, Vec::new()), ("ey", &sqlgen::EY_POOLS, Vec::new())];
    admin.query_drop(format!("DROP TABLE IF EXISTS ex, ey; {}; {}", sqlgen::EX_DDL, sqlgen::EY_DDL)).await.unwrap();
    for (t, (name, pools, rows)) in tables.iter_mut().enumerate() {
        for id in 0..[8, 6][t] {
            rows.push(sqlgen::random_row(&mut rng, id, pools));
        }
        let values: Vec<String> = rows.iter().map(|r| format!("({})", r.join(", "))).collect();
        admin.query_drop(format!("INSERT INTO {name} VALUES {}", values.join(", "))).await.unwrap();
    }
    let count = std::env::var("FRESHET_QUERY_COUNT").map_or(30, |s| s.parse().unwrap());
    // Each query with the literals of its reads, one per `?`: partition 0 and 1 for the
    // queries partitioned by `k`, and a third of as many keyed by another column.
    let mut queries: Vec<(String, Vec<Vec<String>>)> = (0..count)
        .map(|_| {
            let q = sqlgen::random_query(&mut rng);
            let n = q.matches('?').count();
            (q, ["0", "1"].iter().map(|k| vec![k.to_string(); n]).collect())
        })
        .collect();
    queries.extend((0..count / 3).map(|_| {
        let (q, keys) = sqlgen::random_keyed_query(&mut rng);
        (q, keys.iter().map(|k| vec![k.to_string()]).collect())
    }));
    let caches: Vec<(String, &str)> = queries.iter().enumerate().map(|(n, (q, _))| (format!("rq{n}"), q.as_str())).collect();
    let names: Vec<(&str, &str)> = caches.iter().map(|(n, q)| (n.as_str(), *q)).collect();
    let mut config = lenient_config(&names);
    if let Some(limit) = memory {
        config += &format!("[memory]\nlimit = \"{limit}\"\n");
    }
    if let Some(path) = replica {
        config += &format!("[replica]\npath = \"{}\"\n", path.display());
        config = config.replace("[fill]\n", "[fill]\nsource = \"replica\"\n");
    }
    let proxy = start_proxy_with_url(&freshet_testkit::url_with_db(&upstream_url(), db), &config).await;
    let e = engine(&proxy);
    let mut client = mysql_async::Conn::new(opts(&proxy.mysql.to_string()).db_name(Some(db))).await.unwrap();
    if replica.is_some() {
        // Reads are answered once the copy is done: until then misses go upstream.
        let copied = |e: &Engine| {
            e.replica.get().map(|r| r.figures()).is_some_and(|f| f.copy.tables_total > 0 && f.copy.tables_done == f.copy.tables_total)
        };
        for _ in 0..300 {
            if copied(&e) {
                break;
            }
            let _: Vec<mysql_async::Row> = client.query("SELECT 1").await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(copied(&e), "the replica's copy did not finish");
    }
    let live: Vec<(&str, &str, &[Vec<String>])> = caches
        .iter()
        .zip(&queries)
        .filter(|((name, _), _)| e.by_name(name).is_some_and(|c| c.live().is_ok()))
        .map(|((name, q), (_, bindings))| (name.as_str(), *q, bindings.as_slice()))
        .collect();
    // Each cache's text reads: its text with each binding's literals, then (partitioned by `k`)
    // both partitions in one read, answered by merging the partitions' answers where that is
    // the query's answer, relayed where it is not (a LIMIT over both).
    let reads: Vec<(&str, Vec<String>)> = live
        .iter()
        .map(|(name, q, bindings)| {
            let mut texts: Vec<String> = bindings.iter().map(|b| bind(q, b)).collect();
            if q.matches('?').count() == 1 && q.contains("k = ?") {
                texts.push(q.replace("k = ?", "k IN (1, 0)"));
            }
            (*name, texts)
        })
        .collect();
    assert!(reads.len() >= 10, "only {} of {} random queries compiled", reads.len(), caches.len());
    for ((name, texts), (_, _, bindings)) in reads.iter().zip(&live) {
        // Each binding's partition is filled (a read of both may be relayed, and never hits).
        for sql in &texts[..bindings.len()] {
            for _ in 0..10 {
                let before = hits(&proxy, name);
                let _: Vec<mysql_async::Row> = client.query(sql).await.unwrap();
                if hits(&proxy, name) > before {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    // A row as text: every value as the text protocol sends it.
    // A row as text: every value as the text protocol sends it, or as the binary one decodes.
    // An answer as rows of text, or the server's error as its one row (freshet must relay it).
    let text_rows = |rows: Result<Vec<mysql_async::Row>, mysql_async::Error>| -> Vec<Vec<String>> {
        let rows = match rows {
            Ok(rows) => rows,
            Err(mysql_async::Error::Server(e)) => return vec![vec![format!("error {}: {}", e.code, e.message)]],
            Err(e) => panic!("{e}"),
        };
        rows.into_iter()
            .map(|r| {
                r.unwrap()
                    .into_iter()
                    .map(|v| match v {
                        mysql_async::Value::NULL => "NULL".to_string(),
                        mysql_async::Value::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                        other => format!("{other:?}"),
                    })
                    .collect()
            })
            .collect()
    };
    let (mut served, mut served_prepared, mut wrong) = (0u64, 0u64, Vec::new());
    for round in 0..4 {
        if let Some(ddl) = ddl.filter(|_| round == 2) {
            admin.query_drop(ddl).await.unwrap();
            caught_up(&mut client).await;
        }
        if round > 0 {
            let mut writes = Vec::new();
            for _ in 0..1 + rng.below(4) {
                let (name, pools, rows) = &mut tables[rng.below(2) as usize];
                let next_id = rows.iter().map(|r| r[0].parse::<i64>().unwrap()).max().unwrap_or(0) + 1;
                match rng.below(5) {
                    0 if !rows.is_empty() => {
                        let gone = rows.remove(rng.below(rows.len() as u64) as usize);
                        writes.push(format!("DELETE FROM {name} WHERE id = {}", gone[0]));
                    }
                    // Statements of many rows: a partition's rows all set, or half of them gone.
                    3 => {
                        let (k, fresh) = (rng.below(2).to_string(), sqlgen::random_row(&mut rng, next_id, pools));
                        let c = 2 + rng.below(fresh.len() as u64 - 2) as usize;
                        for row in rows.iter_mut().filter(|r| r[1] == k) {
                            row[c] = fresh[c].clone();
                        }
                        writes.push(format!("UPDATE {name} SET {} = {} WHERE k = {k}", column(name, c), fresh[c]));
                    }
                    4 => {
                        let k = rng.below(2).to_string();
                        rows.retain(|r| r[1] != k || r[0].parse::<i64>().unwrap() % 2 == 1);
                        writes.push(format!("DELETE FROM {name} WHERE k = {k} AND id % 2 = 0"));
                    }
                    1 if !rows.is_empty() => {
                        let at = rng.below(rows.len() as u64) as usize;
                        let fresh = sqlgen::random_row(&mut rng, next_id, pools);
                        let c = 1 + rng.below(fresh.len() as u64 - 1) as usize;
                        rows[at][c] = fresh[c].clone();
                        writes.push(format!("UPDATE {name} SET {} = {} WHERE id = {}", column(name, c), fresh[c], rows[at][0]));
                    }
                    _ => {
                        let row = sqlgen::random_row(&mut rng, next_id, pools);
                        writes.push(format!("INSERT INTO {name} VALUES ({})", row.join(", ")));
                        rows.push(row);
                    }
                }
            }
            // Every other round is one transaction: one batch of the binlog's.
            if round % 2 == 0 {
                writes.insert(0, "BEGIN".to_string());
                writes.push("COMMIT".to_string());
            }
            if writes_through_freshet {
                // The transactions as one text of several statements (UPDATE ... SET among
                // them: read one by one, they leave the session followed), the others one
                // statement at a time.
                if round % 2 == 0 {
                    client.query_drop(writes.join("; ")).await.unwrap();
                } else {
                    for w in writes {
                        client.query_drop(w).await.unwrap();
                    }
                }
            } else {
                admin.query_drop(writes.join("; ")).await.unwrap();
                caught_up(&mut client).await;
            }
        }
        let spellings: Vec<String> = tables
            .iter()
            .flat_map(|(_, _, rows)| rows.iter().flatten())
            .filter_map(|l| Some(l.strip_prefix('\'')?.strip_suffix('\'')?.to_string()))
            .collect();
        for (name, texts) in &reads {
            for sql in texts {
                let before = hits(&proxy, name);
                let ours = text_rows(client.query(sql).await);
                served += hits(&proxy, name) - before;
                let theirs = text_rows(admin.query(sql).await);
                if !same_rows(&ours, &theirs, sql.contains("ORDER BY"), &spellings) {
                    wrong.push(format!(
                        "{sql} (round {round})\n  freshet: {ours:?}\n  server:  {theirs:?}\n  rows: {:?}",
                        tables.iter().map(|t| &t.2).collect::<Vec<_>>()
                    ));
                }
            }
        }
        // And each binding executed as a prepared statement.
        for (name, sql, bindings) in &live {
            for binding in bindings.iter() {
                let params: Vec<mysql_async::Value> = binding.iter().map(|l| param(l)).collect();
                let before = hits(&proxy, name);
                let ours = text_rows(client.exec(*sql, params.clone()).await);
                served_prepared += hits(&proxy, name) - before;
                let theirs = text_rows(admin.exec(*sql, params).await);
                if !same_rows(&ours, &theirs, sql.contains("ORDER BY"), &spellings) {
                    wrong.push(format!(
                        "{sql} executed with {binding:?} (round {round})\n  freshet: {ours:?}\n  server:  {theirs:?}\n  rows: {:?}",
                        tables.iter().map(|t| &t.2).collect::<Vec<_>>()
                    ));
                }
            }
        }
    }
    let from_replica = e.replica.get().map_or(0, |r| r.figures().fills);
    let evictions: u64 = live.iter().filter_map(|(name, _, _)| e.by_name(name)).map(|c| c.stats().evictions).sum();
    eprintln!(
        "{} of {} random queries cached; {served} text reads and {served_prepared} prepared reads answered from views; {from_replica} fills from the replica; {evictions} evictions",
        reads.len(),
        caches.len()
    );
    assert!(replica.is_none() || from_replica > 0, "no miss was filled from the replica");
    assert!(wrong.is_empty(), "{} answers differ from the server's:\n{}", wrong.len(), wrong.join("\n"));
    let relays: Vec<String> = RelayReason::ALL
        .iter()
        .map(|r| (r.label(), relayed(&proxy, *r)))
        .filter(|(_, n)| *n > 0)
        .map(|(l, n)| format!("{l} {n}"))
        .collect();
    eprintln!("relayed: {}", relays.join(", "));
    // The session's own writes, several to a text, did not stop it being followed.
    assert_eq!(relayed(&proxy, RelayReason::SessionState), 0, "reads relayed for the session's state");
    assert!(memory.is_none() || evictions > 0, "nothing was evicted under {memory:?}");
    // Under a memory limit, a read of an evicted partition is relayed while it is filled again.
    let answered = if memory.is_some() { reads.len() } else { reads.len() * 4 };
    assert!(
        served.min(served_prepared) as usize >= answered,
        "only {served} text and {served_prepared} prepared reads were answered from views: the test compared relayed answers"
    );
}

/// `sql` with its `?`s replaced, in order, by `literals`.
fn bind(sql: &str, literals: &[String]) -> String {
    let mut parts = sql.split('?');
    let mut out = parts.next().unwrap_or_default().to_string();
    for (part, literal) in parts.zip(literals) {
        out.push_str(literal);
        out.push_str(part);
    }
    out
}

/// A literal as a client binds it to a prepared statement: a string as bytes, an integer as
/// one, a decimal as its text.
fn param(literal: &str) -> mysql_async::Value {
    if let Some(s) = literal.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
        return mysql_async::Value::Bytes(s.as_bytes().to_vec());
    }
    match literal.parse::<i64>() {
        Ok(i) => mysql_async::Value::Int(i),
        Err(_) => literal.parse::<u64>().map_or_else(|_| mysql_async::Value::Bytes(literal.as_bytes().to_vec()), mysql_async::Value::UInt),
    }
}

/// One of `sqlgen`'s tables: its name, the literals its columns after `id` and `k` take, and
/// its rows, as literals.
type SqlTable = (&'static str, &'static [&'static [&'static str]], Vec<Vec<String>>);

/// The name of column `c` of `ex` or `ey` (`sqlgen`'s tables).
fn column(table: &str, c: usize) -> &'static str {
    let ex = ["id", "k", "i", "u", "b", "d", "s", "t", "dt"];
    let ey = ["id", "k", "j", "e", "w", "f", "ts", "bs", "uc", "tm", "yr", "en", "bt", "st", "vb", "tz", "fl", "bn"];
    if table == "ex" { ex[c] } else { ey[c] }
}

/// Whether freshet's rows are the server's: in order for an ordered query, as multisets
/// otherwise. Where strings the collation finds equal are spelled otherwise ('a', 'A', 'a '),
/// the spelling a group, DISTINCT, MIN or MAX shows is the first the server's plan reads; a
/// view shows one its rows have, which must be one of `spellings` (the tables' strings now) where the server's is.
fn same_rows(ours: &[Vec<String>], theirs: &[Vec<String>], ordered: bool, spellings: &[String]) -> bool {
    use freshet_dataflow::{Collation, Value};
    // Equal under one of the tables' case-insensitive collations.
    let ci = |x: &str, t: &str| {
        [Collation::Utf8mb4GeneralCi, Collation::Utf8mb4UnicodeCi].iter().any(|c| Value::text(x, *c) == Value::text(t, *c))
    };
    // A spelling the tables hold must be answered with one they hold; a computed one
    // (`CONCAT(d, uc)`) with any the collation finds equal.
    let spelled = |x: &String, t: &String| spellings.contains(x) || !spellings.contains(t);
    let same = |o: &Vec<String>, t: &Vec<String>| {
        o.len() == t.len() && o.iter().zip(t).all(|(x, t)| x == t || (x != "NULL" && t != "NULL" && ci(x, t) && spelled(x, t)))
    };
    freshet_testkit::sqlgen::same_rows(ours, theirs, ordered, same)
}
