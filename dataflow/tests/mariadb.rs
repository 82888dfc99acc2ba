//! The upstream SQL path against a real server: for a set of queries, every state query the
//! dataflow renders for a fill is run on MariaDB and must return what the in-memory upstream
//! returns, and the view's answers must equal MariaDB's own answers to the cached query.
//!
//! Needs the project's private MariaDB (`scripts/mariadb.sh start`; this test reads
//! `FRESHET_TEST_MYSQL_SOCKET`) and the `mariadb` command-line client; the dataflow crate has
//! no MySQL client dependency, by design. Fails, saying how to set it up, when either is
//! missing (a test that cannot fail proves nothing): run
//! `eval "$(scripts/mariadb.sh env)"` first. Works in its own database, with binary logging off for its session so that replication tests
//! running against the same server see none of its writes.

use std::process::Command;

use freshet_dataflow::expr::{Expr, Func, literal_sql, parse_temporal, text_of};
use freshet_dataflow::*;
use freshet_testkit::sqlgen;

const DB: &str = "freshet_dataflow_test";

struct Server {
    socket: String,
}

impl Server {
    /// The project's test server, or a panic that says how to provide it.
    fn connect() -> Server {
        const HOW: &str =
            "start the project's MariaDB (scripts/mariadb.sh start) and run `eval \"$(scripts/mariadb.sh env)\"` before `cargo test`";
        freshet_testkit::mysql_url();
        let Ok(socket) = std::env::var("FRESHET_TEST_MYSQL_SOCKET") else {
            panic!("FRESHET_TEST_MYSQL_SOCKET is not set: this test talks to MariaDB through its socket; {HOW}");
        };
        let s = Server { socket };
        if let Err(e) = s.run_raw(None, "SELECT 1") {
            panic!("cannot run `mariadb -S {} -e 'SELECT 1'` ({e}); is the server up and the `mariadb` client installed? {HOW}", s.socket);
        }
        s
    }
    fn run_raw(&self, db: Option<&str>, sql: &str) -> Result<Vec<Vec<String>>, String> {
        let mut cmd = Command::new("mariadb");
        cmd.args(["-S", &self.socket, "-uroot", "-N", "-B"]);
        if let Some(d) = db {
            cmd.args(["-D", d]);
        }
        // In UTC, as views hold TIMESTAMPs (the proxy serves them to such sessions only).
        let full = format!("SET SESSION sql_log_bin = 0, time_zone = '+00:00'; {sql}");
        let out = cmd.args(["-e", &full]).output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("{sql}: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(String::from_utf8_lossy(&out.stdout).lines().map(|l| l.split('\t').map(str::to_string).collect()).collect())
    }
    fn run(&self, sql: &str) -> Vec<Vec<String>> {
        self.run_raw(Some(DB), sql).unwrap_or_else(|e| panic!("{e}"))
    }
}

fn inline(sql: &str, params: &[Value]) -> String {
    let mut out = String::new();
    let mut it = params.iter();
    for c in sql.chars() {
        if c == '?' {
            out += &literal_sql(it.next().unwrap_or(&Value::Null));
        } else {
            out.push(c);
        }
    }
    out
}

fn text(v: &Value) -> String {
    text_of(v).unwrap_or_else(|| "NULL".into())
}

fn int(i: i64) -> Value {
    Value::Int(i)
}

const QUERIES: &[&str] = &[
    "SELECT id, x FROM a WHERE k = ?",
    "SELECT k, COUNT(*), SUM(x), MIN(x), MAX(x), COUNT(DISTINCT g), AVG(x), COUNT(x) FROM a WHERE k = ? GROUP BY k",
    "SELECT COUNT(*), MAX(s), MIN(x) FROM a WHERE k = ?",
    "SELECT g, COUNT(x) AS n FROM a WHERE k = ? GROUP BY g HAVING COUNT(*) > 1",
    "SELECT a.id, b.y FROM a JOIN b ON b.k = a.k WHERE a.k = ?",
    "SELECT a.id, COUNT(b.id), MAX(b.y) FROM a LEFT JOIN b ON b.k = a.k AND b.y > 2 WHERE a.k = ? GROUP BY a.id",
    "SELECT a.id, b.id FROM a JOIN b ON b.k = a.k AND b.y = a.g WHERE a.k = ?",
    "SELECT a1.id, a2.id FROM a a1 JOIN a a2 ON a2.k = a1.k AND a2.g = a1.g WHERE a1.k = ?",
    "SELECT id, x FROM a WHERE k = ? ORDER BY x DESC, id LIMIT 3",
    "SELECT id FROM a WHERE k = ? ORDER BY g, id LIMIT 2 OFFSET 1",
    "SELECT DISTINCT g FROM a WHERE k = ?",
    "SELECT id, x * 2 + 1, CASE WHEN x > 3 THEN 'hi' ELSE s END, COALESCE(x, -1), CONCAT(s, '-', g) FROM a WHERE k = ? AND (s LIKE 'a%' OR x BETWEEN 2 AND 5)",
    "SELECT s, COUNT(*), SUM(x) / 3 FROM a WHERE k = ? GROUP BY s",
    "SELECT g, COUNT(*) FROM a GROUP BY g",
    // COUNT(*) alone reads no column of its table (an audit: its fill's SQL was malformed).
    "SELECT COUNT(*) AS n FROM a",
    "SELECT COUNT(*) FROM a WHERE k = ?",
    "SELECT id FROM a WHERE x IS NULL UNION ALL SELECT id FROM b WHERE y < 3",
    "SELECT id, s FROM a ORDER BY s, id LIMIT 4",
    "SELECT id, g FROM a WHERE k = ? AND x >= ? ORDER BY id",
    // Dimension joins (tables joined on columns other than the parameter).
    "SELECT a.id, b.y FROM a JOIN b ON b.k = a.g WHERE a.k = ?",
    "SELECT a.id, b.id, b.s FROM a LEFT JOIN b ON b.k = a.g AND b.y > 1 WHERE a.k = ?",
    "SELECT a.id, b.id FROM a JOIN b ON b.k = a.g AND b.y = a.x WHERE a.k = ?",
    "SELECT a.id, b.id, b.s FROM a JOIN b ON b.k = a.g AND b.s = a.s WHERE a.k = ?",
    "SELECT a.id, b.id, c.id FROM a JOIN b ON b.k = a.g JOIN a c ON c.k = b.y WHERE a.k = ?",
    "SELECT a.id, b.id, c.x FROM a LEFT JOIN b ON b.k = a.x LEFT JOIN a c ON c.g = b.y AND c.k = b.k WHERE a.k = ?",
    "SELECT a.k, COUNT(c.id), SUM(c.x) FROM a JOIN b ON b.k = a.k JOIN a c ON c.g = b.y WHERE a.k = ? GROUP BY a.k",
    "SELECT a.k, COUNT(b.id), MAX(b.y) FROM a LEFT JOIN b ON b.k = a.g WHERE a.k = ? GROUP BY a.k",
    "SELECT a.id, b.s FROM a JOIN b ON b.k = a.g WHERE a.k = ? ORDER BY b.y DESC, a.id, b.id LIMIT 2",
    "SELECT a.k, a.id, b.y FROM a JOIN b ON b.k = a.g WHERE a.k IN (?, ?)",
    "SELECT c.id, b.id, a.id FROM a c JOIN b ON b.y = c.k JOIN a ON a.g = b.k WHERE a.k = ?",
    "SELECT a.id, b.id, c.id FROM a JOIN b ON b.k = a.g JOIN a c ON c.k = b.y AND c.g = a.g WHERE a.k = ?",
    "SELECT b.id, COUNT(*), SUM(a.x) FROM b JOIN a ON a.g = b.k AND a.s = b.s WHERE a.k = ? GROUP BY b.id",
    "SELECT id, ROUND(x * 1.005, 2), ROUND(x * 0.5), ROUND(x * 7, -1), FLOOR(x * 0.25), CEIL(x * 0.25), CEILING(-x * 0.25), x / 3, LEFT(s, 1), RIGHT(s, 1), REPLACE(s, 'a', 'zz'), IF(x > 2, 'big', 'small'), NULLIF(g, 1), LENGTH(s), UPPER(s), SUBSTRING(s, 2), x DIV 2, x % 3 FROM a WHERE k = ?",
];

use freshet_testkit::catalog::ab as catalog;

#[test]
fn rendered_fill_sql_and_results_match_mariadb() {
    let server = Server::connect();
    server.run_raw(None, &format!("DROP DATABASE IF EXISTS {DB}; CREATE DATABASE {DB}")).unwrap();
    server.run(
        "CREATE TABLE a (id INT PRIMARY KEY, k INT, g INT, x INT NULL, s VARCHAR(10) COLLATE utf8mb4_general_ci);
         CREATE TABLE b (id INT PRIMARY KEY, k INT, y INT, s VARCHAR(10) COLLATE utf8mb4_general_ci)",
    );
    // Deterministic pseudo-random rows, identical in MariaDB and in the MemStore.
    let strings = ["a", "b", "ab", "c", "Ba"];
    let mut seed = 12345u64;
    let mut next = |m: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((seed >> 33) % m) as i64
    };
    let mut batch = Batch::new(Position(1));
    let mut sql_a = Vec::new();
    let mut sql_b = Vec::new();
    for id in 1..=60 {
        let (k, g, xr, s) = (next(4), next(3), next(7), strings[next(5) as usize]);
        let x = if xr == 6 { Value::Null } else { int(xr) };
        let st = Value::text(s, Collation::Utf8mb4GeneralCi);
        sql_a.push(format!("({id}, {k}, {g}, {}, '{s}')", literal_sql(&x)));
        batch.insert("a", vec![int(id), int(k), int(g), x, st].into());
        let (k, y, s) = (next(4), next(6), strings[next(5) as usize]);
        let st = Value::text(s, Collation::Utf8mb4GeneralCi);
        sql_b.push(format!("({id}, {k}, {y}, '{s}')"));
        batch.insert("b", vec![int(id), int(k), int(y), st].into());
    }
    server.run(&format!("INSERT INTO a VALUES {}; INSERT INTO b VALUES {}", sql_a.join(","), sql_b.join(",")));
    let mut store = MemStore::new();
    store.apply(&batch);

    let mut compared = 0;
    for sql in QUERIES {
        let mut df = Dataflow::new(catalog(), ByteSize(1 << 30));
        // No slack: top-k fills ask the server for exactly OFFSET + LIMIT rows per partition.
        df.set_topk_slack(0);
        df.set_applied(Position(1));
        let v = df.install_sql(sql).unwrap();
        let q = df.query(v).unwrap().clone();
        let key_sets: Vec<Vec<Key>> = if q.key_columns.is_empty() {
            vec![vec![Box::new([])]]
        } else {
            vec![vec![vec![int(0)].into(), vec![int(1)].into()], vec![vec![int(2)].into(), vec![int(3)].into()]]
        };
        for keys in key_sets {
            for req in df.request_fill(v, keys.clone()) {
                // Every state query, run by the server, equals the in-memory upstream's answer.
                let FillData::States(mem) = MemUpstream { store: &store }.fill(&req).unwrap().data else { unreachable!() };
                for (sq, mem_rows) in req.queries.iter().zip(&mem) {
                    let mut server_rows = server.run(&inline(&sq.sql, &sq.params));
                    let mut ours: Vec<Vec<String>> = mem_rows
                        .iter()
                        .map(|(r, w)| {
                            let mut t: Vec<String> = r.iter().map(text).collect();
                            if sq.grouped {
                                t.push(w.to_string());
                            }
                            t
                        })
                        .collect();
                    server_rows.sort();
                    ours.sort();
                    assert_eq!(ours, server_rows, "state query of {sql}:\n{}", sq.sql);
                    compared += 1;
                }
                let resp = MemUpstream { store: &store }.fill(&req).unwrap();
                df.complete_fill(resp);
            }
            // The view's answer equals the server's answer to the cached query itself.
            let r = df.reader(v).unwrap();
            for k in &keys {
                let mut params: Vec<Value> = k.iter().cloned().cycle().take(q.n_params).collect();
                for f in &q.read_filters {
                    params[f.param] = int(2);
                }
                let Lookup::Hit(rows) = r.lookup(&params).unwrap() else { panic!("miss after fill") };
                let mut ours: Vec<Vec<String>> = rows.iter().map(|r| r.to_vec().iter().map(text).collect()).collect();
                let mut theirs = server.run(&inline(sql, &params));
                if q.order.is_empty() {
                    ours.sort();
                    theirs.sort();
                }
                assert_eq!(ours, theirs, "{sql} with {params:?}");
                compared += 1;
            }
        }
    }
    eprintln!("compared {compared} result sets with MariaDB");
    server.run_raw(None, &format!("DROP DATABASE {DB}")).unwrap();
}

/// The hex of a string's UTF-32 encoding, for `_utf32 X'...'` literals (no quoting to get
/// wrong, and NUL or control characters pass unharmed).
fn utf32_hex(s: &str) -> String {
    s.chars().map(|c| format!("{:08X}", c as u32)).collect()
}

/// The case-insensitive collations' tables give every character of the BMP, and a sample
/// above it, the weights the server's `WEIGHT_STRING` gives (scripts/collation-tables wrote
/// them from the same server; this keeps them true to the server the tests run on).
#[test]
fn every_character_weighs_as_the_server_says() {
    let server = Server::connect();
    for coll in [Collation::Utf8mb4GeneralCi, Collation::Utf8mb4UnicodeCi] {
        let weight = |c: &str| format!("HEX(WEIGHT_STRING(CONVERT(CHAR({c} USING utf32) USING utf8mb4) COLLATE {}))", coll.name());
        let above = [0x10000, 0x1F600, 0x1F601, 0x20000, 0xE0001, 0x10FFFD].map(|c| format!("SELECT {c}, {}", weight(&c.to_string())));
        let sql = format!(
            "SET NAMES utf8mb4; SET max_recursive_iterations = 100000; \
             WITH RECURSIVE n(c) AS (SELECT 0 UNION ALL SELECT c + 1 FROM n WHERE c < 65535) \
             SELECT c, {} FROM n WHERE c < 55296 OR c > 57343 UNION ALL {}",
            weight("c"),
            above.join(" UNION ALL ")
        );
        let rows = server.run_raw(None, &sql).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rows.len(), 0x10000 - 0x800 + above.len(), "one row per character");
        let mut ours = Vec::new();
        for row in &rows {
            let c = char::from_u32(row[0].parse().unwrap()).unwrap();
            ours.clear();
            coll.char_weights(c, &mut ours);
            let hex: String = ours.iter().map(|w| format!("{w:04X}")).collect();
            assert_eq!(hex, row[1], "{} of U+{:04X}", coll.name(), c as u32);
        }
    }
}

/// Random strings of characters chosen to be awkward (case pairs, accents, expansions,
/// ignorable and space-like characters, characters below the space, characters above the
/// BMP, a letter with a combining mark, and LIKE's wildcards) compare, equal and match LIKE
/// patterns as the server says, under each collation freshet implements. The server is
/// asked in a few statements per collation.
#[test]
fn random_strings_compare_as_the_server_compares() {
    let server = Server::connect();
    let pool: Vec<char> = "aAbBsSßſＳeéÉEæÆoœŒ _-.%1²ﬁfiİıи\u{306}й\u{0}\t\u{A0}\u{200B}\u{301}L·😀😁\u{FFFD}中日カか".chars().collect();
    let mut rng = freshet_testkit::rng::Rng::new(20261127);
    let word = |rng: &mut freshet_testkit::rng::Rng| -> String {
        let n = rng.below(5);
        (0..n).map(|_| pool[rng.below(pool.len() as u64) as usize]).collect()
    };
    for coll in [Collation::Binary, Collation::Utf8mb4Bin, Collation::Utf8mb4GeneralCi, Collation::Utf8mb4UnicodeCi] {
        let pairs: Vec<(String, String)> = (0..400)
            .map(|i| {
                let a = word(&mut rng);
                let b = match i % 4 {
                    // Starting alike exercises padding and ties: a tail of space-like,
                    // ignorable and below-the-space characters, or any.
                    0 if rng.below(2) == 0 => {
                        let tail: String =
                            (0..1 + rng.below(3)).map(|_| [' ', '\u{A0}', '\u{0}', '\u{200B}', '\t'][rng.below(5) as usize]).collect();
                        format!("{a}{tail}")
                    }
                    0 => format!("{a}{}", word(&mut rng)),
                    // A few characters of `a` swapped for others (often an equal one): patterns
                    // that nearly match, and equal strings spelt differently.
                    1 => a.chars().map(|c| if rng.below(3) == 0 { pool[rng.below(pool.len() as u64) as usize] } else { c }).collect(),
                    _ => word(&mut rng),
                };
                if i % 8 < 4 { (a, b) } else { (b, a) }
            })
            .collect();
        // `binary` is a character set of its own: its strings are bytes.
        let lit = |s: &str| match coll {
            Collation::Binary => format!("CAST(CONVERT(_utf32 X'{}' USING utf8mb4) AS BINARY)", utf32_hex(s)),
            _ => format!("CONVERT(_utf32 X'{}' USING utf8mb4) COLLATE {}", utf32_hex(s), coll.name()),
        };
        let selects: Vec<String> =
            pairs.iter().map(|(a, b)| format!("SELECT STRCMP({}, {}), {} LIKE {}", lit(a), lit(b), lit(a), lit(b))).collect();
        // In statements of 50 pairs: the client takes the text as one argument.
        let rows: Vec<Vec<String>> = selects
            .chunks(50)
            .flat_map(|c| server.run_raw(None, &format!("SET NAMES utf8mb4; {}", c.join(" UNION ALL "))).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        assert_eq!(rows.len(), pairs.len());
        for ((a, b), row) in pairs.iter().zip(&rows) {
            let (x, y) = (Value::text(a, coll), Value::text(b, coll));
            let ours = match x.cmp_total(&y) {
                std::cmp::Ordering::Less => "-1",
                std::cmp::Ordering::Equal => "0",
                std::cmp::Ordering::Greater => "1",
            };
            assert_eq!(ours, row[0], "{}: {a:?} against {b:?}", coll.name());
            if ours == "0" {
                let hasher = std::hash::RandomState::new();
                let hash = |v: &Value| std::hash::BuildHasher::hash_one(&hasher, v);
                assert_eq!(hash(&x), hash(&y), "{}: {a:?} and {b:?} are equal, so they hash alike", coll.name());
            }
            let like = Expr::Like { expr: Box::new(Expr::lit(x)), pattern: Box::new(Expr::lit(y)), escape: '\\', negated: false };
            assert_eq!(like.eval(&[]), Value::Int(row[1].parse().unwrap()), "{}: {a:?} LIKE {b:?}", coll.name());
        }
    }
}

/// UPPER and LOWER change every BMP character as the server's case table does (one
/// character for one: `ß` keeps its case, `İ` lowers to `i`), under each UTF-8 collation.
#[test]
fn every_character_changes_case_as_the_server_says() {
    let server = Server::connect();
    for coll in [Collation::Utf8mb4Bin, Collation::Utf8mb4GeneralCi, Collation::Utf8mb4UnicodeCi] {
        let sql = format!(
            "SET NAMES utf8mb4; SET max_recursive_iterations = 100000; \
             WITH RECURSIVE n(c) AS (SELECT 0 UNION ALL SELECT c + 1 FROM n WHERE c < 65535), \
             s AS (SELECT c, CONVERT(CHAR(c USING utf32) USING utf8mb4) COLLATE {} AS x FROM n WHERE c < 55296 OR c > 57343) \
             SELECT c, HEX(CONVERT(UPPER(x) USING utf32)), HEX(CONVERT(LOWER(x) USING utf32)) FROM s",
            coll.name()
        );
        let rows = server.run_raw(None, &sql).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rows.len(), 0x10000 - 0x800);
        for row in &rows {
            let c = char::from_u32(row[0].parse().unwrap()).unwrap();
            for (f, want) in [(Func::Upper, &row[1]), (Func::Lower, &row[2])] {
                let got = Expr::Func(f, vec![Expr::lit(Value::text(&c.to_string(), coll))]).eval(&[]);
                assert_eq!(utf32_hex(&text_of(&got).unwrap()), *want, "{f:?} of U+{:04X} under {}", c as u32, coll.name());
            }
        }
    }
}

/// The string functions freshet evaluates give the server's answers on random awkward
/// strings (the pool of `random_strings_compare_as_the_server_compares`), under each UTF-8
/// collation: UPPER, LOWER, TRIM, SUBSTRING, LEFT, RIGHT, REPLACE, CONCAT, CHAR_LENGTH, LENGTH.
#[test]
fn string_functions_answer_as_the_server_answers() {
    let server = Server::connect();
    let pool: Vec<char> = "aAbBsSßſＳeéÉEæÆoœŒ _-.1²ﬁfiİıΣσςи\u{306}й\u{0}\t\u{A0}\u{301}L·😀\u{FFFD}中カ".chars().collect();
    let mut rng = freshet_testkit::rng::Rng::new(20261128);
    let mut word = || -> String { (0..rng.below(7)).map(|_| pool[rng.below(pool.len() as u64) as usize]).collect() };
    let calls: [(&str, Func, Vec<Value>); 10] = [
        ("UPPER(x)", Func::Upper, vec![]),
        ("LOWER(x)", Func::Lower, vec![]),
        ("TRIM(x)", Func::Trim, vec![]),
        ("SUBSTRING(x, 2, 3)", Func::Substring, vec![Value::Int(2), Value::Int(3)]),
        ("SUBSTRING(x, -2)", Func::Substring, vec![Value::Int(-2)]),
        ("LEFT(x, 2)", Func::Left, vec![Value::Int(2)]),
        ("RIGHT(x, 2)", Func::Right, vec![Value::Int(2)]),
        (
            "REPLACE(x, 's', 'Ｘ')",
            Func::Replace,
            vec![Value::text("s", Collation::Utf8mb4GeneralCi), Value::text("Ｘ", Collation::Utf8mb4GeneralCi)],
        ),
        ("CHAR_LENGTH(x)", Func::CharLength, vec![]),
        ("LENGTH(x)", Func::Length, vec![]),
    ];
    for coll in [Collation::Utf8mb4Bin, Collation::Utf8mb4GeneralCi, Collation::Utf8mb4UnicodeCi] {
        let words: Vec<(String, String)> = (0..150).map(|_| (word(), word())).collect();
        for chunk in words.chunks(50) {
            let selects: Vec<String> = chunk
                .iter()
                .map(|(x, y)| {
                    let lit = |s: &str| format!("CONVERT(_utf32 X'{}' USING utf8mb4) COLLATE {}", utf32_hex(s), coll.name());
                    let mut cols: Vec<String> =
                        calls.iter().map(|(sql, ..)| format!("HEX(CONVERT({} USING utf32))", sql.replace('x', &lit(x)))).collect();
                    cols.push(format!("HEX(CONVERT(CONCAT({}, {}) USING utf32))", lit(x), lit(y)));
                    format!("SELECT {}", cols.join(", "))
                })
                .collect();
            let rows =
                server.run_raw(None, &format!("SET NAMES utf8mb4; {}", selects.join(" UNION ALL "))).unwrap_or_else(|e| panic!("{e}"));
            for ((x, y), row) in chunk.iter().zip(&rows) {
                let (vx, vy) = (Value::text(x, coll), Value::text(y, coll));
                for ((sql, f, rest), want) in calls.iter().zip(row) {
                    let args = std::iter::once(Expr::lit(vx.clone())).chain(rest.iter().cloned().map(Expr::lit)).collect();
                    let got = text_of(&Expr::Func(*f, args).eval(&[])).unwrap();
                    assert_eq!(utf32_hex(&got), *want, "{sql} with x = {x:?} under {}", coll.name());
                }
                let got = text_of(&Expr::Func(Func::Concat, vec![Expr::lit(vx), Expr::lit(vy)]).eval(&[])).unwrap();
                assert_eq!(utf32_hex(&got), row[calls.len()], "CONCAT({x:?}, {y:?}) under {}", coll.name());
            }
        }
    }
}

/// A position or a length given to SUBSTRING, LEFT or RIGHT is an integer to the server, read
/// by the argument's kind: a DECIMAL rounds half away from zero (2.5 is 3), a DOUBLE half to
/// even (2.5 is 2, 3.5 is 4), and text by its integer prefix (`'2.7'` is 2, `'2e1'` 2, `'.9'` 0).
#[test]
fn string_function_positions_are_read_as_the_server_reads_them() {
    let server = Server::connect();
    let text = |s: &str| Value::text(s, Collation::Utf8mb4GeneralCi);
    let dec = |s: &str| Value::Decimal(Decimal::parse(s).unwrap());
    let args: [(&str, Value); 14] = [
        ("2", Value::Int(2)),
        ("2.5", dec("2.5")),
        ("-2.5", dec("-2.5")),
        ("2.5e0", Value::Double(2.5)),
        ("3.5e0", Value::Double(3.5)),
        ("-2.5e0", Value::Double(-2.5)),
        ("1.5e0", Value::Double(1.5)),
        ("'2.5'", text("2.5")),
        ("'2.7'", text("2.7")),
        ("'2e1'", text("2e1")),
        ("'-2.5'", text("-2.5")),
        ("'.9'", text(".9")),
        ("' 3x'", text(" 3x")),
        ("'99999999999999999999'", text("99999999999999999999")),
    ];
    let subject = "abcdefghijklmnopqrstuvwxyz";
    let calls = |a: &str| {
        [
            format!("SUBSTRING('{subject}', {a})"),
            format!("SUBSTRING('{subject}', 2, {a})"),
            format!("LEFT('{subject}', {a})"),
            format!("RIGHT('{subject}', {a})"),
        ]
    };
    let sql = args.iter().map(|(a, _)| format!("SELECT {}", calls(a).join(", "))).collect::<Vec<_>>().join(" UNION ALL ");
    let rows = server.run_raw(None, &sql).unwrap_or_else(|e| panic!("{e}"));
    let mut wrong = Vec::new();
    for ((a, v), row) in args.iter().zip(&rows) {
        let s = || Expr::lit(text(subject));
        let exprs = [
            Expr::Func(Func::Substring, vec![s(), Expr::lit(v.clone())]),
            Expr::Func(Func::Substring, vec![s(), Expr::lit(Value::Int(2)), Expr::lit(v.clone())]),
            Expr::Func(Func::Left, vec![s(), Expr::lit(v.clone())]),
            Expr::Func(Func::Right, vec![s(), Expr::lit(v.clone())]),
        ];
        for ((call, e), want) in calls(a).iter().zip(exprs).zip(row) {
            let got = text_of(&e.eval(&[])).unwrap_or_default();
            if got != *want {
                wrong.push(format!("{call}: view {got:?}, server {want:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Whether a view's answer `ours` is the server's `theirs` (the `mariadb -N -B` text of one
/// value). A DOUBLE is compared as a number: the text protocol relays every DOUBLE, and the
/// binary one sends its bits, which the server prints rounded, to 15 or so digits or to the
/// decimals of the expression's type (`ROUND(x, 1)` is `1.0`). A DECIMAL by its value, since
/// the wire shows the column definition's decimals, not the value's scale; a DATETIME by its
/// value too.
fn same_value(ours: &Value, theirs: &str) -> bool {
    match ours {
        Value::Double(x) => theirs.parse::<f64>().is_ok_and(|t| {
            let shown = match theirs.split_once('.') {
                Some((_, decimals)) if !theirs.contains('e') => 0.5 * 10f64.powi(-(decimals.len() as i32)),
                _ => 0.0,
            };
            t == *x || (t - x).abs() <= shown * (1.0 + 1e-9) || ((t - x) / t).abs() < 1e-12
        }),
        // `mariadb -B` prints a FLOAT with six significant digits (16777216 as 16777200).
        Value::Float(x) => theirs.parse::<f64>().is_ok_and(|t| {
            let x = f64::from(*x);
            t == x || ((t - x) / t).abs() < 1e-5
        }),
        Value::Decimal(_) | Value::Int(_) | Value::UInt(_) => {
            let norm = |s: &str| {
                let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { s };
                if s == "-0" { "0".to_string() } else { s.to_string() }
            };
            norm(&text(ours)) == norm(theirs)
        }
        // The wire shows the column's fractional digits (`.000`), the value has them or not.
        Value::DateTime(_) | Value::Timestamp(_) => parse_temporal(theirs).is_some_and(|t| t == *ours),
        // A view holds an ENUM as its index and a SET as its mask; the only ones are the random
        // queries' `ey.en` and `ey.st`.
        Value::Enum(i) => usize::from(*i).checked_sub(1).and_then(|i| sqlgen::EN_LABELS.get(i)) == Some(&theirs),
        Value::Set(mask) => {
            let labels: Vec<&str> = sqlgen::ST_LABELS.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, l)| *l).collect();
            labels.join(",") == theirs
        }
        // `mariadb -B` prints a BIT(8) as its byte: NUL escaped, others raw (255 not UTF-8). A
        // BIT the server typed as a number (`IF(j, b, bt)` is a BIGINT) is printed as one (the
        // pools' bits, 0, 1, 5, 65 and 255, are no digit's byte, so the two do not meet).
        Value::Bit(b) => match theirs {
            "\\0" => *b == 0,
            "\u{FFFD}" => *b >= 0x80,
            t if t == b.to_string() => true,
            t => t.chars().count() == 1 && t.chars().next().is_some_and(|c| u64::from(c) == *b),
        },
        // `mariadb -B` escapes a NUL (BINARY(4)'s padding), a tab, a newline and a backslash.
        Value::Bytes(b) if b.iter().any(|c| matches!(c, 0 | b'\t' | b'\n' | b'\\')) => {
            let shown: String = b
                .iter()
                .map(|&c| match c {
                    0 => "\\0".to_string(),
                    b'\t' => "\\t".to_string(),
                    b'\n' => "\\n".to_string(),
                    b'\\' => "\\\\".to_string(),
                    c => char::from(c).to_string(),
                })
                .collect();
            shown == theirs
        }
        _ => text(ours) == theirs,
    }
}

/// A row of `ex`: `k`, `i` (INT), `u` (INT UNSIGNED), `b` (BIGINT), `d` (DECIMAL(10,2)), `s`
/// (text), `t` (TINYINT), `dt` (DATE).
type ExRow = (i64, Option<i64>, Option<u64>, Option<i64>, Option<&'static str>, Option<&'static str>, Option<i64>, Option<&'static str>);

/// Random expressions over columns of every numeric kind, text and DATE, as a cached query's
/// select list and filter, and every fourth aggregated per partition: each one the compiler
/// accepts must answer, row for row, what MariaDB answers, and one that MariaDB answers with an error (an integer out of range) must
/// be refused, and so must one MariaDB answers with warnings (a string that is not a number
/// read as one, a division by zero): a cached answer's warning count is 0 (session 43, from
/// an audit; 38 of 175 accepted expressions warned). Seeded, so a failure repeats; every
/// mismatch is listed before the test fails.
/// `FRESHET_EXPR_SEED` and `FRESHET_EXPR_COUNT` run other and more expressions (session 30
/// ran seeds 7, 11, 13 and 17 with 3,000 each, all answered as the server does).
#[test]
fn random_expressions_answer_as_the_server_answers() {
    // A database of this process's own: runs with other seeds may share the server.
    let edb = format!("freshet_dataflow_expr_{}", std::process::id());
    let server = Server::connect();
    server.run_raw(None, &format!("DROP DATABASE IF EXISTS {edb}; CREATE DATABASE {edb}")).unwrap();
    let run = |sql: &str| server.run_raw(Some(&edb), sql);
    run(sqlgen::EX_DDL).unwrap();
    let col = |n: &str, ty: SqlType| ColumnSchema::new(n, ty);
    let mut catalog = Catalog::new();
    catalog
        .add(TableSchema::new(
            "ex",
            vec![
                col("id", SqlType::Int { bytes: 4, unsigned: false }).not_null(),
                col("k", SqlType::Int { bytes: 4, unsigned: false }).not_null(),
                col("i", SqlType::Int { bytes: 4, unsigned: false }),
                col("u", SqlType::Int { bytes: 4, unsigned: true }),
                col("b", SqlType::Int { bytes: 8, unsigned: false }),
                col("d", SqlType::Decimal { precision: 10, scale: 2 }),
                col("s", SqlType::Text).with_collation(Some(Collation::Utf8mb4GeneralCi)),
                col("t", SqlType::Int { bytes: 1, unsigned: false }),
                col("dt", SqlType::Date),
            ],
            vec![0],
        ))
        .unwrap();
    // Rows at the ends of each type, and NULLs, in two partitions.
    let rows: [ExRow; 10] = [
        (0, Some(0), Some(0), Some(0), Some("0.00"), Some(""), Some(0), Some("2024-02-29")),
        (0, Some(1), Some(1), Some(-1), Some("1.50"), Some("a"), Some(-128), Some("1999-12-31")),
        (0, Some(-1), Some(4294967295), Some(9223372036854775807), Some("-2.25"), Some("Abc"), Some(127), Some("2000-01-01")),
        (0, Some(-2147483648), Some(5), Some(-9223372036854775808), Some("99999999.99"), Some(" x "), Some(1), Some("1970-01-01")),
        (0, None, None, None, None, None, None, None),
        (1, Some(2147483647), Some(10), Some(12), Some("3.33"), Some("ß"), Some(-1), Some("2038-01-19")),
        (1, Some(42), Some(3), Some(1000000), Some("-0.01"), Some("12"), Some(5), Some("2024-12-31")),
        (1, Some(-5), Some(0), Some(-3), Some("10.00"), Some("-3.5"), Some(2), Some("0001-01-01")),
        (1, Some(3), Some(100), Some(2), Some("0.10"), Some("hello"), None, Some("9999-12-31")),
        (1, Some(7), Some(7), Some(5), Some("7.77"), Some("É"), Some(3), Some("2024-03-01")),
    ];
    let mut batch = Batch::new(Position(1));
    let mut values = Vec::new();
    for (id, (k, i, u, b, d, s, t, dt)) in rows.iter().enumerate() {
        let row = vec![
            int(id as i64),
            int(*k),
            i.map_or(Value::Null, Value::Int),
            u.map_or(Value::Null, Value::UInt),
            b.map_or(Value::Null, Value::Int),
            d.map_or(Value::Null, |d| Value::Decimal(Decimal::parse(d).unwrap())),
            s.map_or(Value::Null, |s| Value::text(s, Collation::Utf8mb4GeneralCi)),
            t.map_or(Value::Null, Value::Int),
            dt.map_or(Value::Null, |dt| parse_temporal(dt).unwrap()),
        ];
        values.push(format!("({})", row.iter().map(literal_sql).collect::<Vec<_>>().join(", ")));
        batch.insert("ex", row.into());
    }
    run(&format!("INSERT INTO ex VALUES {}", values.join(", "))).unwrap();
    let mut store = MemStore::new();
    store.apply(&batch);

    let mut rng = freshet_testkit::rng::Rng::new(std::env::var("FRESHET_EXPR_SEED").map_or(20261127, |s| s.parse().unwrap()));
    let (mut compared, mut refused, mut failures) = (0, 0, Vec::new());
    // First, expressions of faults found here before, then random ones:
    // a quotient compared by BETWEEN, IN or CASE is its unrounded value to the server (seed
    // 47); CEILING of a DECIMAL past BIGINT is a DECIMAL, and a DIV by a choice that may be
    // text is exact (seed 69); a choice of a signed and an UNSIGNED integer is a DECIMAL
    // (seed 81); a quotient picked into a DOUBLE is its whole value (seed 97). Seeds 68 and 106's DECIMAL choice over ABS, CEILING (...) of a literal,
    // which the server clips where its plan uses a temporary table, is refused
    // (`plans.rs`, `a_decimal_choice_over_a_narrowed_literal_is_refused`).
    let known = [
        "(10 / d) BETWEEN -1 AND 0",
        "0 BETWEEN (10 / d) AND 1",
        "(10 / d) IN (0, 1)",
        "CASE (10 / d) WHEN 0 THEN 1 ELSE 2 END",
        "ROUND(CEILING((b * -2.5)))",
        "(b DIV NULLIF(SUBSTRING(dt, 2), FLOOR(2147483647)))",
        "LENGTH(ROUND((CASE WHEN 'a' THEN i ELSE u END), 2))",
        "ROUND(IF(i > 0, i, u), 2)",
        "(CASE WHEN (-CONCAT('3', t)) THEN (t / 3) ELSE ABS('a') END)",
    ];
    for n in 0..known.len() + std::env::var("FRESHET_EXPR_COUNT").map_or(600, |s| s.parse().unwrap()) {
        let (x, filter) = match known.get(n) {
            Some(x) => (x.to_string(), String::new()),
            None => {
                let x = sqlgen::random_expr(&mut rng, 3);
                (x, if n % 3 == 0 { format!(" AND {}", sqlgen::random_expr(&mut rng, 2)) } else { String::new() })
            }
        };
        // Every fourth expression is aggregated per partition instead: a view keeps its
        // values in the aggregate's state, the server computes them at each read.
        let (cached, server_sql) = if n % 4 == 1 && n >= known.len() {
            let aggs = format!("SUM({x}), MIN({x}), MAX({x}), AVG({x}), COUNT({x})");
            (
                format!("SELECT k, {aggs} FROM ex WHERE k = ?{filter} GROUP BY k"),
                format!("SELECT k, k, {aggs} FROM ex WHERE k IN (0, 1){filter} GROUP BY k ORDER BY k"),
            )
        } else {
            (
                format!("SELECT id, {x} AS x FROM ex WHERE k = ?{filter}"),
                format!("SELECT k, id, {x} AS x FROM ex WHERE k IN (0, 1){filter} ORDER BY k, id"),
            )
        };
        let theirs = run(&format!("{server_sql}; SELECT @@warning_count"));
        let mut df = Dataflow::new(catalog.clone(), ByteSize(1 << 30));
        df.set_applied(Position(1));
        let v = match df.install_sql(&cached) {
            Ok(v) => v,
            Err(_) => {
                refused += 1;
                continue;
            }
        };
        let mut theirs = match theirs {
            Ok(rows) => rows,
            Err(e) => {
                failures.push(format!("{cached}: compiled, but the server answers an error: {}", e.lines().last().unwrap_or("")));
                continue;
            }
        };
        // The server's warning count is part of its answer, and a view's answer has none.
        let warnings = theirs.pop().and_then(|r| r.into_iter().next()).unwrap_or_default();
        if warnings != "0" {
            failures.push(format!("{cached}: compiled, but the server's answer has {warnings} warnings"));
            continue;
        }
        let keys: Vec<Key> = vec![vec![int(0)].into(), vec![int(1)].into()];
        for req in df.request_fill(v, keys.clone()) {
            df.complete_fill(MemUpstream { store: &store }.fill(&req).unwrap());
        }
        let reader = df.reader(v).unwrap();
        // (partition, the row's id or key, its values)
        let mut ours: Vec<(i64, Value, Vec<Value>)> = Vec::new();
        for k in [0, 1] {
            let Lookup::Hit(found) = reader.lookup(&[int(k)]).unwrap() else { panic!("{cached}: miss after fill") };
            ours.extend(found.iter().map(|r| {
                let r = r.to_vec();
                (k, r[0].clone(), r[1..].to_vec())
            }));
        }
        ours.sort_by_key(|(k, id, _)| (*k, text(id).parse::<i64>().unwrap_or(0)));
        let agree = ours.len() == theirs.len()
            && ours.iter().zip(&theirs).all(|((_, id, xs), row)| {
                text(id) == row[1]
                    && xs.len() + 2 == row.len()
                    && xs.iter().zip(&row[2..]).all(|(x, t)| (t == "NULL") == x.is_null() && (x.is_null() || same_value(x, t)))
            });
        if agree {
            compared += 1;
        } else {
            let ours: Vec<String> =
                ours.iter().map(|(k, id, xs)| format!("{k} {} {}", text(id), xs.iter().map(text).collect::<Vec<_>>().join(" "))).collect();
            let theirs: Vec<String> = theirs.iter().map(|r| r.join(" ")).collect();
            failures.push(format!("{cached}\n  ours:   {ours:?}\n  server: {theirs:?}"));
        }
    }
    eprintln!("{compared} expressions answered as the server does, {refused} refused, {} wrong", failures.len());
    server.run_raw(None, &format!("DROP DATABASE {edb}")).unwrap();
    assert!(failures.is_empty(), "{} expressions answered otherwise than the server:\n{}", failures.len(), failures.join("\n"));
}

/// A table of the random queries: its name, and its rows as literals (for the server) and
/// values (for the views).
type Table = (&'static str, Vec<(Vec<String>, Vec<Value>)>);

/// Rows as `mariadb -N -B` prints them.
type ServerRows = Vec<Vec<String>>;

/// Whether the view's rows are the server's: in order for an ordered query, as multisets
/// otherwise (each of ours matched to one of theirs, value by value with [`same_value`]).
///
/// Where strings the collation finds equal are spelled otherwise ('a', 'A', 'a '), the
/// spelling a group, DISTINCT, MIN or MAX shows is the first the server's plan reads; a view
/// shows one its rows have, which must be one of `spellings` (the tables' strings now) where the server's is.
fn same_rows(ours: &[Vec<Value>], theirs: &[Vec<String>], ordered: bool, spellings: &[&str]) -> bool {
    let same_spelling = |x: &Value, t: &str| match x {
        // A spelling the tables hold must be answered with one they hold; a computed one
        // (`CONCAT(d, uc)`) with any the collation finds equal.
        Value::Text(s, c) => same_value(x, t) || (*x == Value::text(t, *c) && (spellings.contains(&&**s) || !spellings.contains(&t))),
        _ => same_value(x, t),
    };
    let same = |o: &Vec<Value>, t: &Vec<String>| {
        o.len() == t.len() && o.iter().zip(t).all(|(x, t)| (t == "NULL") == x.is_null() && (x.is_null() || same_spelling(x, t)))
    };
    sqlgen::same_rows(ours, theirs, ordered, same)
}

/// Random queries of every shape the cache compiles (joins inner and outer on columns of the
/// same kind or not, groupings with HAVING, ORDER BY with LIMIT and OFFSET, DISTINCT, UNION ALL,
/// joins grouped per row) over columns of every kind, filled, then kept through rounds of random
/// inserts, updates and deletes: after the fill and after each round, every partition's answer
/// must be the server's answer to the query with its key bound, and every state query a fill
/// renders must return, on the server, what the in-memory upstream returns. A query MariaDB
/// answers with an error must be refused. Seeded; `FRESHET_QUERY_SEED` and
/// `FRESHET_QUERY_COUNT` run others and more.
#[test]
fn random_queries_answer_as_the_server_answers() {
    let qdb = format!("freshet_dataflow_query_{}", std::process::id());
    let server = Server::connect();
    server.run_raw(None, &format!("DROP DATABASE IF EXISTS {qdb}; CREATE DATABASE {qdb}")).unwrap();
    let run = |sql: &str| server.run_raw(Some(&qdb), sql);
    run(&format!("{}; {}", sqlgen::EX_DDL, sqlgen::EY_DDL)).unwrap();
    let col = |n: &str, ty: SqlType| ColumnSchema::new(n, ty);
    let int4 = SqlType::Int { bytes: 4, unsigned: false };
    let ci = Some(Collation::Utf8mb4GeneralCi);
    let mut catalog = Catalog::new();
    catalog
        .add(TableSchema::new(
            "ex",
            vec![
                col("id", int4.clone()).not_null(),
                col("k", int4.clone()).not_null(),
                col("i", int4.clone()),
                col("u", SqlType::Int { bytes: 4, unsigned: true }),
                col("b", SqlType::Int { bytes: 8, unsigned: false }),
                col("d", SqlType::Decimal { precision: 10, scale: 2 }),
                col("s", SqlType::Text).with_collation(ci),
                col("t", SqlType::Int { bytes: 1, unsigned: false }),
                col("dt", SqlType::Date),
            ],
            vec![0],
        ))
        .unwrap();
    catalog
        .add(TableSchema::new(
            "ey",
            vec![
                col("id", int4.clone()).not_null(),
                col("k", int4.clone()).not_null(),
                col("j", int4),
                col("e", SqlType::Decimal { precision: 6, scale: 1 }),
                col("w", SqlType::Text).with_collation(ci),
                col("f", SqlType::Double),
                col("ts", SqlType::DateTime { fsp: 3 }),
                col("bs", SqlType::Text).with_collation(Some(Collation::Utf8mb4Bin)),
                col("uc", SqlType::Text).with_collation(Some(Collation::Utf8mb4UnicodeCi)),
                col("tm", SqlType::Time { fsp: 0 }),
                col("yr", SqlType::Year),
                col("en", SqlType::Enum(sqlgen::EN_LABELS.iter().map(|l| l.to_string()).collect())).with_collation(ci),
                col("bt", SqlType::Bit { bits: 8 }),
                col("st", SqlType::Set(sqlgen::ST_LABELS.iter().map(|l| l.to_string()).collect())).with_collation(ci),
                col("vb", SqlType::Bytes),
                col("tz", SqlType::Timestamp { fsp: 2 }),
                col("fl", SqlType::Float),
                col("bn", SqlType::Bytes),
            ],
            vec![0],
        ))
        .unwrap();

    let (ex_pools, ey_pools) = (sqlgen::EX_POOLS, sqlgen::EY_POOLS);
    let types_of = |name: &str| -> Vec<ColumnSchema> { catalog.tables().find(|t| t.name == name).unwrap().columns.clone() };
    let (ex_cols, ey_cols) = (types_of("ex"), types_of("ey"));
    let (ex_types, ey_types) = (ex_cols.clone(), ey_cols.clone());
    // A literal of a pool as the value a binlog event carries for a column.
    let value_of = |lit: &str, column: &ColumnSchema| -> Value {
        if lit == "NULL" {
            return Value::Null;
        }
        let unquoted = lit.trim_matches('\'');
        match column.ty {
            SqlType::Int { unsigned: true, .. } => Value::UInt(unquoted.parse().unwrap()),
            SqlType::Int { .. } => Value::Int(unquoted.parse().unwrap()),
            SqlType::Decimal { .. } => Value::Decimal(Decimal::parse(unquoted).unwrap()),
            SqlType::Double => Value::Double(unquoted.parse().unwrap()),
            SqlType::Float => Value::Float(unquoted.parse().unwrap()),
            SqlType::Text => Value::text(unquoted, column.collation.unwrap()),
            // BINARY(4) (`bn`) as cdc hands it over: padded back to its width.
            SqlType::Bytes if column.name == "bn" => {
                let mut bytes = unquoted.as_bytes().to_vec();
                bytes.resize(4, 0);
                Value::Bytes(bytes.into())
            }
            SqlType::Bytes => Value::Bytes(unquoted.as_bytes().into()),
            SqlType::Timestamp { .. } => match parse_temporal(unquoted) {
                Some(Value::DateTime(t)) => Value::Timestamp(t),
                other => panic!("a TIMESTAMP literal {lit}: {other:?}"),
            },
            SqlType::Year => Value::Year(unquoted.parse().unwrap()),
            SqlType::Enum(_) => Value::Enum(1 + sqlgen::EN_LABELS.iter().position(|l| *l == unquoted).unwrap() as u16),
            SqlType::Bit { .. } => Value::Bit(unquoted.parse().unwrap()),
            SqlType::Set(_) => Value::Set(
                unquoted.split(',').filter(|l| !l.is_empty()).map(|l| 1 << sqlgen::ST_LABELS.iter().position(|x| *x == l).unwrap()).sum(),
            ),
            SqlType::Time { .. } => {
                let (sign, hms) = unquoted.strip_prefix('-').map_or((1, unquoted), |t| (-1, t));
                let seconds = hms.split(':').fold(0i64, |acc, part| acc * 60 + part.parse::<i64>().unwrap());
                Value::Time(sign * seconds * 1_000_000)
            }
            _ => parse_temporal(unquoted).unwrap(),
        }
    };
    let mut rng = freshet_testkit::rng::Rng::new(std::env::var("FRESHET_QUERY_SEED").map_or(20261128, |s| s.parse().unwrap()));
    // A random row of a table: its literals (for the server) and values (for the views).
    let random_row = |rng: &mut freshet_testkit::rng::Rng, id: i64, pools: &[&[&str]], types: &[ColumnSchema]| {
        let lits = sqlgen::random_row(rng, id, pools);
        let values: Vec<Value> = lits.iter().zip(types).map(|(l, ty)| value_of(l, ty)).collect();
        (lits, values)
    };

    let (mut compared, mut refused, mut refills, mut failures) = (0usize, 0usize, 0usize, Vec::new());
    let mut reasons = std::collections::BTreeMap::<String, usize>::new();
    for n in 0..std::env::var("FRESHET_QUERY_COUNT").map_or(150, |s| s.parse().unwrap()) {
        let cached = sqlgen::random_query(&mut rng);
        // Fresh tables for each query: eight rows of `ex` and six of `ey`.
        let mut store = MemStore::new();
        let mut tables: [Table; 2] = [("ex", Vec::new()), ("ey", Vec::new())];
        let mut batch = Batch::new(Position(1));
        for (t, (name, rows)) in tables.iter_mut().enumerate() {
            for id in 0..[8, 6][t] {
                let (pools, types): (&[&[&str]], &[ColumnSchema]) = if t == 0 { (&ex_pools, &ex_types) } else { (&ey_pools, &ey_types) };
                let row = random_row(&mut rng, id, pools, types);
                batch.insert(name, row.1.clone().into());
                rows.push(row);
            }
        }
        let inserts: Vec<String> = tables
            .iter()
            .map(|(name, rows)| {
                let vals: Vec<String> = rows.iter().map(|(l, _)| format!("({})", l.join(", "))).collect();
                format!("INSERT INTO {name} VALUES {}", vals.join(", "))
            })
            .collect();
        run(&format!("DELETE FROM ex; DELETE FROM ey; {}", inserts.join("; "))).unwrap();
        store.apply(&batch);

        let mut df = Dataflow::new(catalog.clone(), ByteSize(1 << 30));
        df.set_topk_slack(n % 2);
        df.set_applied(Position(1));
        let v = match df.install_sql(&cached) {
            Ok(v) => v,
            Err(e) => {
                *reasons.entry(e.reason.chars().take(70).collect::<String>()).or_insert(0) += 1;
                refused += 1;
                continue;
            }
        };
        let q = df.query(v).unwrap().clone();
        let ordered = !q.order.is_empty();
        let params = |k: i64| vec![int(k); q.n_params];
        // The server's answers for both partitions, or its error.
        let theirs = |run: &dyn Fn(&str) -> Result<ServerRows, String>| -> Result<Vec<ServerRows>, String> {
            [0, 1].iter().map(|&k| run(&inline(&cached, &params(k)))).collect()
        };
        let answer = match theirs(&run) {
            Ok(a) => a,
            Err(e) => {
                failures.push(format!("{cached}: compiled, but the server answers an error: {}", e.lines().last().unwrap_or("")));
                continue;
            }
        };
        // The partition of `k`: its value, or none for a query without a parameter.
        let key = |k: i64| -> Key { if q.key_columns.is_empty() { Box::new([]) } else { vec![int(k)].into() } };
        let keys: Vec<Key> = vec![key(0), key(1)];
        let mut fill_ok = true;
        for req in df.request_fill(v, keys) {
            let FillData::States(mem) = MemUpstream { store: &store }.fill(&req).unwrap().data else { unreachable!() };
            for (sq, mem_rows) in req.queries.iter().zip(&mem) {
                let server_rows = run(&inline(&sq.sql, &sq.params)).unwrap_or_else(|e| panic!("{cached}: a state query errs: {e}"));
                let ours: Vec<Vec<Value>> = mem_rows
                    .iter()
                    .map(|(r, w)| {
                        let mut r = r.to_vec();
                        if sq.grouped {
                            r.push(int(*w));
                        }
                        r
                    })
                    .collect();
                if !same_rows(&ours, &server_rows, false, &[]) {
                    failures.push(format!("{cached}: state query\n  {}\n  ours:   {ours:?}\n  server: {server_rows:?}", sq.sql));
                    fill_ok = false;
                }
            }
            df.complete_fill(MemUpstream { store: &store }.fill(&req).unwrap());
        }
        if !fill_ok {
            continue;
        }
        // Whether both partitions answer as the server does. A write may leave a partition to
        // be filled again (a top-k short of its limit, a join whose other side changed): a miss
        // is filled, as the cache does, and then must answer.
        let check = |df: &mut Dataflow,
                     store: &MemStore,
                     refills: &mut usize,
                     answer: &[Vec<Vec<String>>],
                     when: &str,
                     tables: &[Table],
                     failures: &mut Vec<String>|
         -> bool {
            for k in [0, 1] {
                if matches!(df.reader(v).unwrap().lookup(&params(k)).unwrap(), Lookup::Miss(_)) {
                    *refills += 1;
                    for req in df.request_fill(v, vec![key(k)]) {
                        df.complete_fill(MemUpstream { store }.fill(&req).unwrap());
                    }
                }
                let Lookup::Hit(found) = df.reader(v).unwrap().lookup(&params(k)).unwrap() else {
                    failures.push(format!("{cached}: a miss after a fill, {when}"));
                    return false;
                };
                let ours: Vec<Vec<Value>> = found.iter().map(|r| r.cut(q.visible).to_vec()).collect();
                let literals = || tables.iter().flat_map(|(_, rows)| rows.iter().flat_map(|(l, _)| l.iter()));
                let spellings: Vec<&str> = literals().filter_map(|l| l.strip_prefix('\'')?.strip_suffix('\'')).collect();
                if !same_rows(&ours, &answer[k as usize], ordered, &spellings) {
                    let ours: Vec<String> = ours.iter().map(|r| r.iter().map(text).collect::<Vec<_>>().join(" ")).collect();
                    let server: Vec<String> = answer[k as usize].iter().map(|r| r.join(" ")).collect();
                    let rows: Vec<String> =
                        tables.iter().flat_map(|(t, rows)| rows.iter().map(move |(l, _)| format!("{t}({})", l.join(", ")))).collect();
                    failures.push(format!("{cached}\n  k = {k}, {when}\n  ours:   {ours:?}\n  server: {server:?}\n  rows: {rows:?}"));
                    return false;
                }
            }
            true
        };
        if !check(&mut df, &store, &mut refills, &answer, "after the fill", &tables, &mut failures) {
            continue;
        }
        // Rounds of writes, each applied to the server and to the views as one batch.
        let mut next_id = [8i64, 6];
        let mut ok = true;
        for round in 0..3 {
            let mut batch = Batch::new(Position(2 + round));
            let mut sql = Vec::new();
            for _ in 0..1 + rng.below(4) {
                let t = rng.below(2) as usize;
                let (pools, types): (&[&[&str]], &[ColumnSchema]) = if t == 0 { (&ex_pools, &ex_types) } else { (&ey_pools, &ey_types) };
                let (name, rows) = &mut tables[t];
                match rng.below(3) {
                    0 if !rows.is_empty() => {
                        let (lits, values) = rows.remove(rng.below(rows.len() as u64) as usize);
                        sql.push(format!("DELETE FROM {name} WHERE id = {}", lits[0]));
                        batch.delete(name, values.into());
                    }
                    1 if !rows.is_empty() => {
                        let at = rng.below(rows.len() as u64) as usize;
                        let (old_lits, old) = rows[at].clone();
                        let fresh = random_row(&mut rng, old_lits[0].parse().unwrap(), pools, types);
                        // Change one column (the partition key included), keeping the rest.
                        let c = 1 + rng.below(types.len() as u64 - 1) as usize;
                        let (mut lits, mut values) = (old_lits.clone(), old.clone());
                        lits[c] = fresh.0[c].clone();
                        values[c] = fresh.1[c].clone();
                        let column = &[&ex_cols, &ey_cols][t][c].name;
                        sql.push(format!("UPDATE {name} SET {column} = {} WHERE id = {}", lits[c], lits[0]));
                        batch.update(name, old.into(), values.clone().into());
                        rows[at] = (lits, values);
                    }
                    _ => {
                        let row = random_row(&mut rng, next_id[t], pools, types);
                        next_id[t] += 1;
                        sql.push(format!("INSERT INTO {name} VALUES ({})", row.0.join(", ")));
                        batch.insert(name, row.1.clone().into());
                        rows.push(row);
                    }
                }
            }
            run(&sql.join("; ")).unwrap_or_else(|e| panic!("{cached}: a write errs: {e}"));
            store.apply(&batch);
            df.apply(&batch).unwrap();
            let answer = match theirs(&run) {
                Ok(a) => a,
                Err(e) => {
                    failures.push(format!("{cached}: after writes the server answers an error: {}", e.lines().last().unwrap_or("")));
                    ok = false;
                    break;
                }
            };
            if !check(
                &mut df,
                &store,
                &mut refills,
                &answer,
                &format!("after write round {round}: {}", sql.join("; ")),
                &tables,
                &mut failures,
            ) {
                ok = false;
                break;
            }
        }
        if ok {
            compared += 1;
        }
    }
    eprintln!(
        "{compared} queries answered as the server does, {refused} refused, {} wrong; {refills} partitions filled again after writes",
        failures.len()
    );
    let mut reasons: Vec<(usize, String)> = reasons.into_iter().map(|(r, n)| (n, r)).collect();
    reasons.sort_by(|a, b| b.cmp(a));
    for (n, r) in reasons.iter().take(12) {
        eprintln!("  refused {n}: {r}");
    }
    server.run_raw(None, &format!("DROP DATABASE {qdb}")).unwrap();
    assert!(failures.is_empty(), "{} queries answered otherwise than the server:\n{}", failures.len(), failures.join("\n"));
}

/// Column names and aliases with letters beyond ASCII name what they name on the server: a
/// name matches a column or an alias of another case (`é` is `É`, `σ` is `Σ`, `ǆ` is `ǅ`), not
/// one of another accent (`é` is not `e`) or another length in bytes (`İD` is not `id`,
/// though LOWER('İ') is 'i'). Each query is answered by the view as the server answers it,
/// or refused; a query the server answers with an error must be refused. (a) and (b) of
/// session 53's audit: the view ordered by the column `É` where the server orders by the
/// alias `é`, and grouped by the alias `é` where the server groups by the column.
#[test]
fn non_ascii_names_resolve_as_the_server_resolves() {
    let db = format!("freshet_dataflow_names_{}", std::process::id());
    let server = Server::connect();
    let run = |sql: &str| server.run_raw(Some(&db), &format!("SET NAMES utf8mb4; {sql}"));
    server.run_raw(None, &format!("DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}")).unwrap();
    run("CREATE TABLE ue2 (id INT PRIMARY KEY, k INT, `É` INT, i INT, KEY(k)); INSERT INTO ue2 VALUES (1,1,10,2),(2,1,20,3),(3,1,30,1),(4,2,5,0)")
        .unwrap();
    let int4 = SqlType::Int { bytes: 4, unsigned: false };
    let mut catalog = Catalog::new();
    let columns = ["id", "k", "É", "i"].map(|n| ColumnSchema::new(n, int4.clone()));
    catalog.add(TableSchema::new("ue2", columns.to_vec(), vec![0])).unwrap();
    let mut batch = Batch::new(Position(1));
    for (id, k, e, i) in [(1, 1, 10, 2), (2, 1, 20, 3), (3, 1, 30, 1), (4, 2, 5, 0)] {
        batch.insert("ue2", vec![int(id), int(k), int(e), int(i)].into());
    }
    let mut store = MemStore::new();
    store.apply(&batch);
    let queries = [
        // (a): ORDER BY names the alias first; `É` is the alias `é`.
        "SELECT id, -`É` AS é FROM ue2 WHERE k = ? ORDER BY É LIMIT 2",
        // (b): GROUP BY names the column first (the server warns, 1052).
        "SELECT k, `É` DIV 20 AS é, COUNT(*) FROM ue2 WHERE k = ? GROUP BY k, é",
        "SELECT id, é FROM ue2 WHERE k = ? ORDER BY é DESC",
        "SELECT ue2.é, ue2.`É` FROM ue2 WHERE k = ? AND é > 10",
        "SELECT id, -`É` AS `Σ` FROM ue2 WHERE k = ? ORDER BY `σ` LIMIT 2",
        "SELECT id, -`É` AS `ǅ` FROM ue2 WHERE k = ? ORDER BY `ǆ` LIMIT 2",
        "SELECT id, -`É` AS `Д` FROM ue2 WHERE k = ? ORDER BY `д` LIMIT 2",
        "SELECT k, COUNT(*) AS ñ FROM ue2 WHERE k = ? GROUP BY k HAVING Ñ > 1",
        // Another accent is another name: `é` is the column, not the alias `e`.
        "SELECT id, -`É` AS e FROM ue2 WHERE k = ? ORDER BY é LIMIT 2",
        // Another length in bytes is another name: `id` is the column, not the alias `İD`.
        "SELECT id, -id AS `İD` FROM ue2 WHERE k = ? ORDER BY id LIMIT 2",
        // But ORDER BY's search of the select list takes the alias `İ` (two bytes) of a
        // column for the column `i` (the alias of an expression it does not: the second
        // query), and the Kelvin sign's (three) for `k` (session 53's second audit): a pair of
        // names one in lower case, not as long in bytes, is refused.
        "SELECT `É` AS `İ`, id FROM ue2 WHERE k = ? ORDER BY i DESC LIMIT 2",
        "SELECT -`É` AS `İ`, id FROM ue2 WHERE k = ? ORDER BY i DESC LIMIT 2",
        "SELECT `É` AS `K`, id FROM ue2 WHERE k = ? ORDER BY k DESC, id LIMIT 2",
        // Unknown to the server: the final sigma is not `Σ`'s lower case, `ß` is not `ss`.
        "SELECT id, -`É` AS `Σ` FROM ue2 WHERE k = ? ORDER BY `ς` LIMIT 2",
        "SELECT id, -`É` AS `ß` FROM ue2 WHERE k = ? ORDER BY ss LIMIT 2",
        "SELECT id FROM ue2 WHERE k = ? AND `e` > 10",
    ];
    let (mut compared, mut refused, mut failures) = (0, 0, Vec::new());
    for sql in queries {
        let mut df = Dataflow::new(catalog.clone(), ByteSize(1 << 30));
        df.set_applied(Position(1));
        let theirs = run(&inline(sql, &[int(1)]));
        let v = match df.install_sql(sql) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("refused: {sql}: {}", e.reason);
                refused += 1;
                continue;
            }
        };
        let theirs = match theirs {
            Ok(rows) => rows,
            Err(e) => {
                failures.push(format!("{sql}: compiled, but the server answers an error: {}", e.lines().last().unwrap_or("")));
                continue;
            }
        };
        let q = df.query(v).unwrap().clone();
        for req in df.request_fill(v, vec![vec![int(1)].into()]) {
            df.complete_fill(MemUpstream { store: &store }.fill(&req).unwrap());
        }
        let Lookup::Hit(found) = df.reader(v).unwrap().lookup(&[int(1)]).unwrap() else { panic!("{sql}: a miss after a fill") };
        let ours: Vec<Vec<Value>> = found.iter().map(|r| r.cut(q.visible).to_vec()).collect();
        if same_rows(&ours, &theirs, !q.order.is_empty(), &[]) {
            compared += 1;
        } else {
            failures.push(format!("{sql}\n  ours:   {ours:?}\n  server: {theirs:?}"));
        }
    }
    eprintln!("{compared} answered as the server does, {refused} refused");
    server.run_raw(None, &format!("DROP DATABASE {db}")).unwrap();
    assert!(failures.is_empty(), "{} queries answered otherwise than the server:\n{}", failures.len(), failures.join("\n"));
}
