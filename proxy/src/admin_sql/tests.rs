use proptest::prelude::*;

use super::*;

fn ok(sql: &str) -> AdminStatement {
    match parse(sql.as_bytes()) {
        Some(Ok(s)) => s,
        other => panic!("{sql:?}: expected an admin statement, got {other:?}"),
    }
}

fn err(sql: &str) -> String {
    match parse(sql.as_bytes()) {
        Some(Err(e)) => e,
        other => panic!("{sql:?}: expected a malformed admin statement, got {other:?}"),
    }
}

fn select(s: &str) -> String {
    s.to_string()
}

#[test]
fn statements() {
    assert_eq!(ok("SHOW CACHES"), AdminStatement::ShowCaches);
    assert_eq!(ok("  show\n\tcaches ;  "), AdminStatement::ShowCaches);
    assert_eq!(ok("SHOW PROXIED QUERIES"), AdminStatement::ShowProxiedQueries { limit: None });
    assert_eq!(ok("Show Proxied Queries Limit 5;"), AdminStatement::ShowProxiedQueries { limit: Some(5) });
    assert_eq!(ok("SHOW FRESHET STATUS"), AdminStatement::ShowFreshetStatus);
    assert_eq!(
        ok("EXPLAIN CACHE SELECT * FROM t WHERE id = ? ;\n"),
        AdminStatement::ExplainCache { select: select("SELECT * FROM t WHERE id = ?") }
    );
    assert_eq!(ok("explain cache (select 1)"), AdminStatement::ExplainCache { select: select("(select 1)") });
    assert_eq!(ok("CREATE CACHE FROM SELECT a FROM t"), AdminStatement::CreateCache { name: None, select: select("SELECT a FROM t") });
    assert_eq!(
        ok("create cache by_id from select a from t where id = ?;"),
        AdminStatement::CreateCache { name: Some("by_id".into()), select: select("select a from t where id = ?") }
    );
    assert_eq!(
        ok("CREATE CACHE `Q_1` FROM WITH x AS (SELECT 1) SELECT * FROM x"),
        AdminStatement::CreateCache { name: Some("Q_1".into()), select: select("WITH x AS (SELECT 1) SELECT * FROM x") }
    );
    assert_eq!(ok("DROP CACHE by_id"), AdminStatement::DropCache { name: "by_id".into() });
    assert_eq!(ok("drop cache `by_id`;"), AdminStatement::DropCache { name: "by_id".into() });
}

#[test]
fn comments_between_tokens() {
    assert_eq!(ok("/* hi */ SHOW/**/CACHES -- trailing\n"), AdminStatement::ShowCaches);
    assert_eq!(ok("# note\nSHOW PROXIED /* x */ QUERIES LIMIT/*y*/10 ; -- done"), AdminStatement::ShowProxiedQueries { limit: Some(10) });
    assert_eq!(ok("-- \nDROP CACHE c"), AdminStatement::DropCache { name: "c".into() });
    assert_eq!(ok("EXPLAIN CACHE /* why */ SELECT 1"), AdminStatement::ExplainCache { select: select("/* why */ SELECT 1") });
}

#[test]
fn real_sql_is_not_claimed() {
    for sql in [
        "SHOW TABLES",
        "SHOW STATUS",
        "show status like 'Com_%'",
        "SHOW CACHE",
        "SHOW FULL PROCESSLIST",
        "EXPLAIN SELECT * FROM t",
        "EXPLAIN cache",
        "EXPLAIN cache some_column",
        "EXPLAIN `cache` SELECT 1",
        "DESCRIBE cache",
        "CREATE TABLE caches (id INT)",
        "CREATE CACHES",
        "DROP TABLE caches",
        "DROP caches",
        "SELECT 'SHOW CACHES'",
        "SELECT 1",
        "",
        "   ",
        ";",
        "/* unterminated SHOW CACHES",
        "/*! SHOW CACHES */",
        "/*M!100100 SHOW CACHES */",
        "--SHOW CACHES",
        "SHOW/*!50000 CACHES*/",
        "SHOW",
        "DROP",
        "showcaches",
        "SHOW_CACHES",
        "CREATE OR REPLACE VIEW cache AS SELECT 1",
    ] {
        assert_eq!(parse(sql.as_bytes()), None, "{sql:?}");
    }
    // A comment hides the statement's first word, as it would from the server.
    assert_eq!(parse(b"-- SHOW CACHES"), None);
}

#[test]
fn malformed_statements_are_errors() {
    assert!(err("SHOW CACHES LIKE 'x'").contains("unexpected"));
    assert!(err("SHOW CACHES; SHOW CACHES").contains("unexpected"));
    assert!(err("SHOW CACHES;;").contains("unexpected"));
    assert!(err("SHOW PROXIED").contains("QUERIES"));
    assert!(err("SHOW PROXIED QUERIES LIMIT").contains("LIMIT"));
    assert!(err("SHOW PROXIED QUERIES LIMIT -1").contains("LIMIT"));
    assert!(err("SHOW PROXIED QUERIES LIMIT 1,2").contains("unexpected"));
    assert!(err("SHOW PROXIED QUERIES LIMIT 99999999999999999999999").contains("too large"));
    assert!(err("SHOW PROXIED QUERIES LIMIT 5x").contains("LIMIT"));
    assert!(err("SHOW FRESHET").contains("STATUS"));
    assert!(err("SHOW FRESHET VARIABLES").contains("STATUS"));
    assert!(err("CREATE CACHE").contains("FROM"));
    assert!(err("CREATE CACHE c").contains("FROM"));
    assert!(err("CREATE CACHE c FROM").contains("SELECT"));
    assert!(err("CREATE CACHE FROM UPDATE t SET a = 1").contains("SELECT"));
    assert!(err("CREATE CACHE `a-b` FROM SELECT 1").contains("letters"));
    assert!(err("CREATE CACHE `` FROM SELECT 1").contains("letters"));
    assert!(err("CREATE CACHE `c FROM SELECT 1").contains("unterminated"));
    assert!(err("CREATE CACHE c AS SELECT 1").contains("FROM"));
    assert!(err("CREATE CACHE 'c' FROM SELECT 1").contains("name"));
    assert!(err("DROP CACHE").contains("name"));
    assert!(err("DROP CACHE ;").contains("name"));
    assert!(err("DROP CACHE a b").contains("unexpected"));
    assert!(err("DROP CACHE café").contains("letters"));
    assert!(err("SHOW CACHES /* unterminated").contains("unterminated"));
    assert_eq!(parse(b"EXPLAIN CACHE SELECT \xff"), Some(Err("the SELECT is not valid UTF-8".to_string())));
}

/// An error names the token it stopped at whole: `LIMIT 1.5` was answered "not '1'" and a
/// string by its opening quote alone (found by session 53's admin audit).
#[test]
fn errors_name_the_whole_token() {
    assert!(err("SHOW PROXIED QUERIES LIMIT 1.5").contains("not '1.5'"), "{}", err("SHOW PROXIED QUERIES LIMIT 1.5"));
    assert!(err("SHOW PROXIED QUERIES LIMIT 'ten'").contains("not ''ten''"), "{}", err("SHOW PROXIED QUERIES LIMIT 'ten'"));
    assert!(err("SHOW PROXIED QUERIES LIMIT >= 2").contains("not '>='"), "{}", err("SHOW PROXIED QUERIES LIMIT >= 2"));
    assert!(err("CREATE CACHE c FROM 0x1f").contains("not '0x1f'"), "{}", err("CREATE CACHE c FROM 0x1f"));
    assert!(err("DROP CACHE c 2.5e3").contains("unexpected '2.5e3'"), "{}", err("DROP CACHE c 2.5e3"));
    assert!(err("SHOW CACHES ; ;").contains("unexpected ';'"));
    let long = format!("SHOW PROXIED QUERIES LIMIT '{}'", "x".repeat(1000));
    assert!(err(&long).len() < 200, "an error quotes at most 40 bytes of a token");
}

#[test]
fn column_layouts() {
    let names = |cols: Vec<SynthColumn>| cols.into_iter().map(|c| c.name).collect::<Vec<_>>();
    let caches = show_caches_columns();
    assert_eq!(caches.len(), 12);
    assert_eq!(caches[6], SynthColumn::new("hit_ratio", SynthType::Double));
    assert_eq!(caches[11], SynthColumn::new("cost_class", SynthType::Text));
    assert_eq!(names(proxied_queries_columns()), ["query", "count", "total_ms", "cacheable", "reason"]);
    assert_eq!(names(explain_columns()), ["section", "detail"]);
    assert_eq!(names(status_columns()), ["variable_name", "value"]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse(&bytes);
    }

    /// Arbitrary bytes after an admin statement's keywords, where the parser does most work.
    #[test]
    fn never_panics_after_keywords(
        head in prop::sample::select(vec!["SHOW CACHES", "SHOW PROXIED QUERIES LIMIT ", "SHOW FRESHET ", "EXPLAIN CACHE ", "CREATE CACHE ", "CREATE CACHE `", "DROP CACHE ", "/*", "SHOW /*", "--"]),
        tail in proptest::collection::vec(any::<u8>(), 0..32),
    ) {
        let sql = [head.as_bytes(), &tail].concat();
        if let Some(Ok(AdminStatement::CreateCache { name: Some(name), .. } | AdminStatement::DropCache { name })) = parse(&sql) {
            prop_assert!(!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        }
    }

    /// Whatever follows, a statement that does not start with one of the four words is relayed.
    #[test]
    fn other_first_words_are_relayed(
        first in "[A-Za-z_]{1,8}",
        rest in ".{0,20}",
    ) {
        let upper = first.to_ascii_uppercase();
        prop_assume!(!["SHOW", "EXPLAIN", "CREATE", "DROP"].contains(&upper.as_str()));
        prop_assert_eq!(parse(format!("{first} {rest}").as_bytes()), None);
    }
}

/// A cache name is what a config's may be, 1-64 letters, digits or underscores: it is a
/// metrics label. CREATE CACHE took a name of any length (a megabyte's label on every
/// metric of the cache), and DROP CACHE of an 8 MB name answered an 8 MB error that quoted it
/// (session 53's admin audit).
#[test]
fn a_cache_name_is_at_most_64_characters() {
    let longest = "n".repeat(64);
    assert_eq!(ok(&format!("DROP CACHE {longest}")), AdminStatement::DropCache { name: longest.clone() });
    for long in ["n".repeat(65), "n".repeat(8 << 20)] {
        for sql in [format!("DROP CACHE {long}"), format!("CREATE CACHE {long} FROM SELECT id FROM t WHERE id = ?")] {
            let e = err(&sql);
            assert!(e.len() < 200 && e.contains("64"), "{}: {e}", &sql[..20]);
        }
    }
}
