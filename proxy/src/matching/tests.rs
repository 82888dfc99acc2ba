//! Fingerprint and literal-extraction tests: one per lexical case, then properties.

use std::borrow::Cow;

use proptest::prelude::*;

use super::*;
use crate::cache::route::{ParamMap, SlotUse, Verdict, VerdictTable};

fn q(sql: &str) -> Query<'_> {
    classify(sql.as_bytes(), SqlMode::default())
}

fn norm(sql: &str) -> String {
    q(sql).fingerprint.normalized.clone()
}

fn same(a: &str, b: &str) {
    let (x, y) = (q(a), q(b));
    assert_eq!(x.fingerprint, y.fingerprint, "\n{a}\n{b}");
}

fn differ(a: &str, b: &str) {
    assert_ne!(q(a).fingerprint.hash, q(b).fingerprint.hash, "\n{a}\n{b}");
}

fn s(bytes: &str) -> Literal<'_> {
    Literal::String { bytes: Cow::Borrowed(bytes.as_bytes()), introducer: None, national: false }
}

#[test]
fn normalized_form() {
    assert_eq!(norm("select id, title from stories where id = 42"), "SELECT id, title FROM stories WHERE id = ?");
    assert_eq!(norm("SELECT COUNT(*) FROM votes WHERE story_id IN (1, 2, 3)"), "SELECT COUNT(*) FROM votes WHERE story_id IN (...)");
    assert_eq!(norm("SELECT a FROM t WHERE f(x, 'y') > 2.5"), "SELECT a FROM t WHERE F(x, ?) > ?");
}

#[test]
fn whitespace_case_and_comments_do_not_matter() {
    same("SELECT id FROM stories WHERE id = 42", "  select\n\tid   from stories\r\nWHERE id=42  ");
    same("SELECT id FROM stories WHERE id = 42", "SELECT /* c */ id -- x\nFROM # y\n stories WHERE id = 42;");
    same("SELECT id FROM t WHERE lower(x) = 'a'", "SELECT id FROM t WHERE LOWER (x) = 'b'");
}

#[test]
fn identifier_case_matters() {
    // Table names are case-sensitive on most servers, column names name the result columns.
    differ("SELECT id FROM Stories", "SELECT id FROM stories");
    differ("SELECT ID FROM stories", "SELECT id FROM stories");
}

#[test]
fn backticks_are_removed_unless_needed() {
    same("SELECT `id` FROM `stories` WHERE `id` = 1", "SELECT id FROM stories WHERE id = 2");
    assert_eq!(norm("SELECT `order`, `a b`, `x``y`, `1e5` FROM t"), "SELECT `order`, `a b`, `x``y`, `1e5` FROM t");
    differ("SELECT `select` FROM t", "SELECT `SELECT` FROM t");
}

/// A quoted name that is a reserved word to the server is a name; written bare, the server
/// refuses it (1064). The two texts must not share a fingerprint, or a bare `range` would be
/// answered from the cache of `` `range` ``. A keyword the server takes bare as a name
/// (`status`, `date`) reads the same either way.
#[test]
fn a_reserved_word_keeps_its_backticks() {
    for word in ["range", "rows", "offset", "recursive", "over", "returning", "portion", "values", "div", "schemas", "real"] {
        differ(&format!("SELECT `{word}` FROM t WHERE id = 1"), &format!("SELECT {word} FROM t WHERE id = 1"));
        differ(&format!("SELECT id FROM `{word}` WHERE id = 1"), &format!("SELECT id FROM {word} WHERE id = 1"));
    }
    for word in ["status", "date", "name", "comment", "position", "level", "role", "user"] {
        same(&format!("SELECT `{word}` FROM t WHERE id = 1"), &format!("SELECT {word} FROM t WHERE id = 1"));
    }
}

/// Quoted names that MariaDB 10.11 reads otherwise bare, found by asking it for each word of
/// its information_schema.KEYWORDS and SQL_FUNCTIONS and each `_` + character set name
/// whether `` `w` `` and `w` answer alike as a column, a table, an alias: a charset
/// introducer (1064 bare, whatever its case), `current_role` (the session's role bare),
/// `master_ssl_verify_server_cert` (reserved, and longer than the keywords the table held),
/// `sql_cache`, `sql_no_cache`, `sql_buffer_result` (options first in a select list),
/// `sounds` (`a sounds` is `a SOUNDS LIKE ...`), `window` (no table alias bare), `next` and
/// `previous` (`next value` is `NEXT VALUE FOR s`) and `value` (after them).
#[test]
fn a_quoted_name_the_server_reads_otherwise_bare_keeps_its_backticks() {
    let charsets =
        ["_utf8mb4", "_utf8mb3", "_utf8", "_latin1", "_binary", "_BINARY", "_UTF8MB4", "_Latin1", "_ucs2", "_utf16le", "_gb18030"];
    let words = [
        "current_role",
        "master_ssl_verify_server_cert",
        "MASTER_SSL_VERIFY_SERVER_CERT",
        "sql_cache",
        "sql_no_cache",
        "sql_buffer_result",
    ];
    for word in charsets.iter().chain(&words).chain(&["sounds", "window", "next", "previous", "value"]) {
        differ(&format!("SELECT `{word}` FROM t WHERE id = 1"), &format!("SELECT {word} FROM t WHERE id = 1"));
        differ(&format!("SELECT `{word}`, id FROM t WHERE id = 1"), &format!("SELECT {word}, id FROM t WHERE id = 1"));
        differ(&format!("SELECT id FROM t WHERE `{word}` = 1"), &format!("SELECT id FROM t WHERE {word} = 1"));
        differ(&format!("SELECT id FROM t `{word}` WHERE id = 1"), &format!("SELECT id FROM t {word} WHERE id = 1"));
    }
    differ("SELECT `next` value FROM t WHERE id = 1", "SELECT next value FROM t WHERE id = 1");
    differ("SELECT next `value` FROM t WHERE id = 1", "SELECT next value FROM t WHERE id = 1");
    // Not a charset: a name like any other.
    for word in ["_id", "_utf9", "_latin", "_", "__utf8mb4"] {
        same(&format!("SELECT `{word}` FROM t WHERE id = 1"), &format!("SELECT {word} FROM t WHERE id = 2"));
    }
}

#[test]
fn qualified_names_are_kept_as_written() {
    assert_eq!(norm("SELECT stories.id FROM stories WHERE stories . id = 1"), "SELECT stories.id FROM stories WHERE stories.id = ?");
    differ("SELECT id FROM stories WHERE stories.id = 1", "SELECT id FROM stories WHERE id = 1");
}

#[test]
fn in_lists_fold_with_their_arity() {
    let (a, b) = (q("SELECT a FROM t WHERE id IN (1,2,3) AND x = 'k'"), q("SELECT a FROM t WHERE id IN (4, 5) AND x = 'j'"));
    assert_eq!(a.fingerprint, b.fingerprint);
    assert_eq!((a.in_lists, b.in_lists), (vec![3], vec![2]));
    assert_eq!(a.literals, vec![Literal::Int(1), Literal::Int(2), Literal::Int(3), s("k")]);
    same("SELECT a FROM t WHERE id IN (?, ?)", "SELECT a FROM t WHERE id IN (-1, 'x', NULL, 0x1F)");
    // A subquery or expressions are not a literal list.
    assert_eq!(norm("SELECT a FROM t WHERE id IN (SELECT b FROM u)"), "SELECT a FROM t WHERE id IN (SELECT b FROM u)");
    assert_eq!(norm("SELECT a FROM t WHERE id IN (1, b)"), "SELECT a FROM t WHERE id IN (?, b)");
    assert_eq!(q("SELECT a FROM t WHERE id IN (?, b) AND c = ?").literals, vec![Literal::Placeholder(0), Literal::Placeholder(1)]);
}

#[test]
fn string_escapes_are_undone() {
    let query = q(r#"SELECT a FROM t WHERE x = 'it\'s' AND y = 'it''s' AND z = "q\"q" AND w = "d""d" AND v = 'a\nb\\'"#);
    assert_eq!(query.literals, vec![s("it's"), s("it's"), s("q\"q"), s("d\"d"), s("a\nb\\")]);
}

#[test]
fn introducers_and_national_strings() {
    let query = q("SELECT a FROM t WHERE x = _utf8mb4'caf\u{e9}' AND y = N'n'");
    assert_eq!(query.fingerprint.normalized, "SELECT a FROM t WHERE x = _utf8mb4 ? AND y = N?");
    assert_eq!(
        query.literals,
        vec![
            Literal::String { bytes: Cow::Borrowed("caf\u{e9}".as_bytes()), introducer: Some("utf8mb4"), national: false },
            Literal::String { bytes: Cow::Borrowed(b"n"), introducer: None, national: true },
        ]
    );
    differ("SELECT a FROM t WHERE x = _latin1'a'", "SELECT a FROM t WHERE x = 'a'");
}

#[test]
fn numbers_and_their_types() {
    let query = q(
        "SELECT a FROM t WHERE a = 1 AND b = 1.50 AND c = 1e3 AND d = 18446744073709551615 AND e = 99999999999999999999 AND f = 0x1F AND g = X'ab' AND h = b'101' AND i = 0b11 AND j = NULL",
    );
    assert_eq!(
        query.literals,
        vec![
            Literal::Int(1),
            Literal::Decimal("1.50".into()),
            Literal::Float(1000.0),
            Literal::UInt(u64::MAX),
            Literal::Decimal("99999999999999999999".into()),
            Literal::HexNumber("1F"),
            Literal::HexString("ab"),
            Literal::BitString("101"),
            Literal::BitNumber("11"),
            Literal::Null,
        ]
    );
}

#[test]
fn negative_numbers_fold_into_the_literal() {
    same("SELECT a FROM t WHERE id = -5", "SELECT a FROM t WHERE id = 5");
    same("SELECT a FROM t WHERE id = - 5", "SELECT a FROM t WHERE id = +5");
    assert_eq!(
        q("SELECT a FROM t WHERE id = -5 AND x > -1.5 AND y < -2e1").literals,
        vec![Literal::Int(-5), Literal::Decimal("-1.5".into()), Literal::Float(-20.0)]
    );
    assert_eq!(q("SELECT a FROM t WHERE id = -9223372036854775808").literals, vec![Literal::Int(i64::MIN)]);
    // After an operand the sign is binary.
    assert_eq!(norm("SELECT a FROM t WHERE b -5 = c"), "SELECT a FROM t WHERE b - ? = c");
    assert_eq!(q("SELECT a FROM t WHERE b -5 = c").literals, vec![Literal::Int(5)]);
    assert_eq!(norm("SELECT a FROM t WHERE (b) - 5 = c"), "SELECT a FROM t WHERE (b) - ? = c");
    // `1--2` is 1 minus -2, not a comment.
    assert_eq!(q("SELECT a FROM t WHERE b = 1--2").literals, vec![Literal::Int(1), Literal::Int(-2)]);
}

#[test]
fn null_after_is_stays_a_keyword() {
    assert_eq!(
        norm("SELECT a FROM t WHERE b IS NULL AND c IS NOT null AND d = null"),
        "SELECT a FROM t WHERE b IS NULL AND c IS NOT NULL AND d = ?"
    );
}

#[test]
fn structural_literals_stay() {
    differ("SELECT a FROM t ORDER BY 1", "SELECT a FROM t ORDER BY 2");
    differ("SELECT a, b FROM t GROUP BY 1, 2", "SELECT a, b FROM t GROUP BY 1, 3");
    same("SELECT a FROM t ORDER BY a LIMIT 10", "SELECT a FROM t ORDER BY a LIMIT 20");
    differ("SELECT a FROM t WHERE CAST(b AS CHAR(10)) = 'x'", "SELECT a FROM t WHERE CAST(b AS CHAR(20)) = 'x'");
    differ("SELECT a FROM t WHERE CAST(b AS DECIMAL(10, 2)) = 1", "SELECT a FROM t WHERE CAST(b AS DECIMAL(10, 3)) = 1");
}

#[test]
fn select_list_expressions_keep_their_text() {
    // The server names `a+1` and `a + 1` differently: they must not share column metadata.
    differ("SELECT a+1 FROM t", "SELECT a + 1 FROM t");
    differ("SELECT a*b FROM t", "SELECT a * b FROM t");
    same("SELECT * FROM t WHERE a = 1", "SELECT  *  FROM t WHERE a = 2");
    same("SELECT t.*, u.* FROM t, u", "SELECT t . * ,u.* FROM t, u");
    differ("SELECT 'x' FROM t", "SELECT 'y' FROM t");
    differ("SELECT count(*) FROM t", "SELECT COUNT(*) FROM t");
    differ("SELECT (SELECT b FROM u WHERE c = 1) FROM t", "SELECT (SELECT b FROM u WHERE c = 2) FROM t");
    assert!(q("SELECT a+1 FROM t WHERE b = 1").literals == vec![Literal::Int(1)]);
    // Plain names (and DISTINCT, aliases) are normalized as usual.
    same("select distinct a, t.b as c, * FROM t", "SELECT DISTINCT a,t.b AS c,* from t");
    // A subquery in WHERE has its own select list.
    same("SELECT a FROM t WHERE b IN (SELECT c FROM u WHERE d = 1)", "SELECT a FROM t WHERE b IN (SELECT c FROM u WHERE d = 2)");
}

#[test]
fn prepared_placeholders_share_the_fingerprint() {
    let (text, prepared) = (q("SELECT a FROM t WHERE id = 42 AND b = 'x'"), q("SELECT a FROM t WHERE id = ? AND b = ?"));
    assert_eq!(text.fingerprint, prepared.fingerprint);
    assert_eq!(prepared.literals, vec![Literal::Placeholder(0), Literal::Placeholder(1)]);
    // A `?` kept in a select list still counts: the WHERE's `?` is the second parameter.
    assert_eq!(q("SELECT ?, a FROM t WHERE id = ?").literals, vec![Literal::Placeholder(1)]);
}

#[test]
fn relays_are_detected_from_tokens() {
    let cases = [
        ("SELECT NOW()", "session-dependent"),
        ("SELECT a FROM t WHERE b > now ( )", "session-dependent"),
        ("SELECT a FROM t WHERE b < CURRENT_TIMESTAMP", "session-dependent"),
        ("SELECT RAND()", "session-dependent"),
        ("SELECT UUID()", "session-dependent"),
        ("SELECT LAST_INSERT_ID()", "session-dependent"),
        ("SELECT a FROM t WHERE b = @x", "user variable"),
        ("SELECT @@session.sql_mode", "system variable"),
        ("SELECT a FROM t WHERE id = 1 FOR UPDATE", "locking"),
        ("SELECT a FROM t WHERE id = 1 LOCK IN SHARE MODE", "locking"),
        ("SELECT a FROM t FOR SHARE", "locking"),
        ("SELECT a FROM t INTO OUTFILE '/tmp/x'", "INTO"),
        ("SELECT SQL_CALC_FOUND_ROWS a FROM t", "SQL_CALC_FOUND_ROWS"),
        ("SELECT 1; SELECT 2", "multiple"),
        ("UPDATE t SET a = 1", "not a SELECT"),
        ("SELECT /*!40001 SQL_NO_CACHE */ a FROM t", "executable"),
        ("SELECT /*+ MAX_EXECUTION_TIME(10) */ a FROM t", "executable"),
        ("SELECT a FROM t WHERE b = 'x", "unterminated"),
        ("SELECT a FROM t /* x", "unterminated"),
        ("SELECT a FROM t WHERE b = 1e999", "out of range"),
        ("SELECT NEXT VALUE FOR s", "sequence"),
    ];
    for (sql, why) in cases {
        let reason = q(sql).relay;
        assert!(reason.is_some_and(|r| r.contains(why)), "{sql}: {reason:?}");
    }
    for sql in [
        "SELECT a FROM t WHERE id = 1;",
        "SELECT now_col FROM t",
        "SELECT a FROM t WHERE user_id = 1 ORDER BY a FOR_x",
        "SELECT user FROM t",
    ] {
        assert_eq!(q(sql).relay, None, "{sql}");
    }
    let modes = SqlMode { ansi_quotes: true, no_backslash_escapes: false };
    assert!(classify(b"SELECT a FROM t", modes).relay.is_some());
}

/// Where the server's reading of a text ends a statement or a comment, this reading must too.
/// A `#` or `-- ` comment ends at a NUL byte as at a newline (the server then refuses the NUL
/// unless it ends the text), so what follows it is not part of a comment; and a comment after a
/// trailing `;` is a statement of its own for a client with multi-statements (the server
/// answers a second result), so it is relayed whatever the client.
#[test]
fn a_text_ends_where_the_server_ends_it() {
    for (sql, read) in [
        ("SELECT id, v FROM t WHERE k = 5 #\0\n AND j = 7", "SELECT id, v FROM t WHERE k = 5 AND j = 7"),
        ("SELECT id, v FROM t WHERE k = 5 -- \0\n AND j = 7", "SELECT id, v FROM t WHERE k = 5 AND j = 7"),
    ] {
        differ(sql, read);
    }
    for sql in ["SELECT id, v FROM t WHERE k = 5; -- x", "SELECT id, v FROM t WHERE k = 5;/**/;", "SELECT id, v FROM t WHERE k = 5; # x"] {
        assert!(q(sql).relay.is_some(), "{sql}");
        // Its own shape: the plain read's stored verdict is not its (an audit).
        assert_ne!(q(sql).fingerprint, q("SELECT id, v FROM t WHERE k = 5").fingerprint, "{sql}");
    }
    for sql in ["SELECT id, v FROM t WHERE k = 5 ;", "SELECT id, v FROM t WHERE k = 5;; \n\t", "SELECT id FROM t WHERE k = 5 -- x\n;"] {
        assert_eq!(q(sql).relay, None, "{sql}");
    }
}

#[test]
fn render_puts_the_literals_back() {
    let sql =
        r"SELECT a FROM t WHERE id IN (1, -2, 'x''y') AND b = _utf8mb4'c\\' AND c = N'n' AND d = -1.5 AND e IS NULL AND f = 0x0A LIMIT 5";
    let query = q(sql);
    let rendered = query.render();
    let again = classify(&rendered, SqlMode::default());
    assert_eq!(again.fingerprint, query.fingerprint, "{}", String::from_utf8_lossy(&rendered));
    assert_eq!(again.literals, query.literals);
    assert_eq!(again.in_lists, query.in_lists);
}

#[test]
fn verdicts_are_shared_by_every_spelling_of_a_query() {
    let table = VerdictTable::new(64);
    let first = q("SELECT id, title FROM stories WHERE id = 42");
    table.insert(&first.fingerprint, Verdict::cache(CacheId(7), ParamMap { slots: [SlotUse::Param(0)].into() }));
    for sql in [
        "select id,title from `stories` where id=-1",
        "SELECT id, title FROM stories WHERE id = ?",
        "SELECT /* x */ id, title\nFROM stories WHERE id = '42'",
    ] {
        let query = q(sql);
        let entry = table.get(&query.fingerprint).unwrap_or_else(|| panic!("{sql}"));
        assert!(matches!(entry.verdict.matches(), [m] if m.id == CacheId(7)), "{sql}");
        VerdictTable::record(&entry, std::time::Duration::from_micros(3));
    }
    assert!(table.get(&q("SELECT id, title FROM stories WHERE stories.id = 42").fingerprint).is_none());
    assert_eq!(table.top(1)[0].count(), 3);
}

#[test]
fn table_is_shared_across_threads() {
    let table = std::sync::Arc::new(VerdictTable::new(32));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let table = table.clone();
            std::thread::spawn(move || {
                for n in 0..500 {
                    let sql = format!("SELECT a FROM t{} WHERE b = {n}", n % 50);
                    let query = classify(sql.as_bytes(), SqlMode::default());
                    let entry = match table.get(&query.fingerprint) {
                        Some(entry) => entry,
                        None => table.insert(&query.fingerprint, Verdict::relay(&format!("thread {t}"))),
                    };
                    VerdictTable::record(&entry, std::time::Duration::from_nanos(1));
                }
            })
        })
        .collect();
    for thread in threads {
        assert!(thread.join().is_ok());
    }
    assert!(table.len() <= 32 && !table.is_empty());
}

// ---- properties ----

/// A query with plain select list and a WHERE of literals, as tokens, so that whitespace and
/// comments can be put between any two of them.
fn query_tokens() -> impl Strategy<Value = Vec<String>> {
    let ident = prop_oneof![
        Just("id".to_string()),
        Just("title".to_string()),
        Just("`user id`".to_string()),
        Just("t.a".to_string()),
        "[a-z][a-z0-9_]{0,6}".prop_map(|s| format!("c_{s}"))
    ];
    query_tokens_over(ident.boxed(), "[a-z][a-z0-9_]{0,6}".prop_map(|s| format!("c_{s}")).boxed())
}

/// The columns of the temporary table the MariaDB check creates.
fn table_t_tokens() -> impl Strategy<Value = Vec<String>> {
    let ident = prop_oneof![Just("id".to_string()), Just("title".to_string()), Just("`user id`".to_string()), Just("t.a".to_string())];
    query_tokens_over(ident.boxed(), Just("t".to_string()).boxed())
}

fn query_tokens_over(ident: BoxedStrategy<String>, table: BoxedStrategy<String>) -> impl Strategy<Value = Vec<String>> {
    let lit = prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        (any::<i32>(), 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
        (-1.0e10f64..1.0e10).prop_map(|v| format!("{v:e}")),
        "[ -~]{0,12}".prop_map(|s| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))),
        "[0-9a-f]{0,8}".prop_map(|s| format!("X'{}'", if s.len() % 2 == 1 { format!("0{s}") } else { s })),
        "[01]{1,8}".prop_map(|s| format!("b'{s}'")),
        Just("NULL".to_string()),
    ];
    let cond =
        prop_oneof![
            (ident.clone(), prop_oneof![Just("="), Just("<"), Just(">="), Just("<>"), Just("<=>")], lit.clone())
                .prop_map(|(i, op, l)| vec![i, op.to_string(), l]),
            (ident.clone(), prop::collection::vec(lit.clone(), 1..5)).prop_map(|(i, ls)| {
                let mut v = vec![i, "IN".to_string(), "(".to_string()];
                for (n, l) in ls.into_iter().enumerate() {
                    if n > 0 {
                        v.push(",".to_string());
                    }
                    v.push(l);
                }
                v.push(")".to_string());
                v
            }),
            ident.clone().prop_map(|i| vec![i, "IS".to_string(), "NOT".to_string(), "NULL".to_string()]),
        ];
    (prop::collection::vec(ident, 1..4), table, prop::collection::vec(cond, 1..4), prop::option::of(0u32..100)).prop_map(
        |(cols, table, conds, limit)| {
            let mut v = vec!["SELECT".to_string()];
            for (n, c) in cols.into_iter().enumerate() {
                if n > 0 {
                    v.push(",".to_string());
                }
                v.push(c);
            }
            v.extend(["FROM".to_string(), table, "WHERE".to_string()]);
            for (n, c) in conds.into_iter().enumerate() {
                if n > 0 {
                    v.push("AND".to_string());
                }
                v.extend(c);
            }
            if let Some(l) = limit {
                v.extend(["LIMIT".to_string(), l.to_string()]);
            }
            v
        },
    )
}

fn join(tokens: &[String], seps: &[String], case_flip: bool) -> String {
    let keywords = ["SELECT", "FROM", "WHERE", "AND", "IN", "IS", "NOT", "NULL", "LIMIT"];
    let mut out = String::new();
    for (n, t) in tokens.iter().enumerate() {
        out.push_str(seps.get(n).map_or(" ", |s| s.as_str()));
        if case_flip && keywords.contains(&t.as_str()) {
            out.push_str(&t.to_lowercase());
        } else {
            out.push_str(t);
        }
    }
    out
}

fn separator() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(" ".to_string()),
        Just("\n\t ".to_string()),
        Just(" /* c */ ".to_string()),
        Just(" -- c\n".to_string()),
        Just(" #x\n".to_string()),
        Just("/**/ ".to_string())
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let query = classify(&bytes, SqlMode::default());
        let _ = query.render();
    }

    #[test]
    fn never_panics_on_sql_like_text(text in "[a-zA-Z0-9 ,.()'\"`\\\\@?*=<>!+#/;\n-]{0,80}") {
        let query = classify(text.as_bytes(), SqlMode::default());
        let _ = query.render();
    }

    #[test]
    fn fingerprint_ignores_whitespace_comments_and_keyword_case(tokens in query_tokens(), seps in prop::collection::vec(separator(), 0..40)) {
        let plain = join(&tokens, &[], false);
        let noisy = join(&tokens, &seps, true);
        let (a, b) = (q(&plain), q(&noisy));
        prop_assert_eq!(&a.fingerprint, &b.fingerprint, "\n{}\n{}", plain, noisy);
        prop_assert_eq!(a.literals, b.literals);
        prop_assert_eq!(a.relay, None);
    }

    #[test]
    fn literals_round_trip_through_render(tokens in query_tokens()) {
        let sql = join(&tokens, &[], false);
        let query = q(&sql);
        let rendered = query.render();
        let again = classify(&rendered, SqlMode::default());
        prop_assert_eq!(&again.fingerprint, &query.fingerprint, "\n{}\n{}", sql, String::from_utf8_lossy(&rendered));
        prop_assert_eq!(&again.literals, &query.literals);
        prop_assert_eq!(&again.in_lists, &query.in_lists);
    }
}

/// Each extracted literal, rendered alone, reads back in MariaDB as the same value with the
/// same type as the literal as written. Needs `eval "$(scripts/mariadb.sh env)"`, and fails
/// without it.
#[tokio::test]
async fn rendered_literals_read_back_the_same_in_mariadb() {
    let url = test_url();
    let samples = [
        "42",
        "-42",
        "- 7",
        "+3",
        "0",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "-18446744073709551616",
        "1.50",
        "-0.001",
        ".5",
        "1.",
        "1e3",
        "-1.5E-2",
        "2.5e+10",
        "0x1F",
        "0x0",
        "X'ab'",
        "X''",
        "b'101'",
        "0b11",
        "b''",
        "'plain'",
        "'it\\'s'",
        "'it''s'",
        "\"dq\"",
        "\"d\"\"q\"",
        "'a\\nb\\tc\\\\'",
        "'\\0x\\Z'",
        "'50\\%'",
        "'caf\u{e9}'",
        "_utf8mb4'x'",
        "_latin1'y'",
        "_binary'z'",
        "N'n'",
        "NULL",
        "''",
    ];
    let pool = mysql_async::Pool::new(url.as_str());
    let mut conn = pool.get_conn().await.expect("connect to MariaDB");
    for sample in samples {
        let sql = format!("SELECT a FROM t WHERE a = {sample}");
        let query = q(&sql);
        assert_eq!(query.literals.len(), 1, "{sample}");
        assert_eq!(query.relay, None, "{sample}");
        let normalized = &query.fingerprint.normalized;
        // What the fingerprint keeps before the slot (an introducer or N) goes with it.
        let prefix = normalized.rsplit_once("= ").map_or("", |(_, p)| p.trim_end_matches('?'));
        let mut rendered = prefix.as_bytes().to_vec();
        query.literals[0].render(&mut rendered);
        let rendered = String::from_utf8(rendered).expect("samples are UTF-8");
        let original = read_one(&mut conn, &format!("SELECT {sample}")).await;
        let again = read_one(&mut conn, &format!("SELECT {rendered}")).await;
        assert_eq!(again, original, "{sample} rendered as {rendered}");
    }
    drop(conn);
    pool.disconnect().await.expect("disconnect");
}

/// A sample of generated queries and their re-rendered form: MariaDB reads both the same way
/// (the same rewritten query in EXPLAIN EXTENDED's note). Fails without the test MariaDB.
#[tokio::test]
async fn rendered_queries_parse_the_same_in_mariadb() {
    use mysql_async::prelude::Queryable;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let url = test_url();
    let pool = mysql_async::Pool::new(url.as_str());
    let mut conn = pool.get_conn().await.expect("connect to MariaDB");
    // Session-only: a temporary table, gone with the connection.
    // latin1 accepts every byte, so random hex literals compared with `title` stay valid
    // whatever the server's default character set (utf8mb4 would reject most of them).
    conn.query_drop("CREATE TEMPORARY TABLE t (id INT, title VARCHAR(20), `user id` INT, a INT) CHARACTER SET latin1")
        .await
        .expect("temporary table");
    let mut runner = TestRunner::deterministic();
    let strategy = table_t_tokens();
    for _ in 0..100 {
        let tokens = strategy.new_tree(&mut runner).expect("a sample").current();
        let sql = join(&tokens, &[], false);
        let query = q(&sql);
        let rendered = String::from_utf8(query.render()).expect("generated queries are UTF-8");
        let original = explained(&mut conn, &sql).await;
        assert_eq!(explained(&mut conn, &rendered).await, original, "\n{sql}\n{rendered}");
    }
    drop(conn);
    pool.disconnect().await.expect("disconnect");
}

async fn explained(conn: &mut mysql_async::Conn, sql: &str) -> Vec<String> {
    use mysql_async::prelude::Queryable;
    conn.query_drop(format!("EXPLAIN EXTENDED {sql}")).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let notes: Vec<(String, u32, String)> = conn.query("SHOW WARNINGS").await.expect("warnings");
    notes.into_iter().map(|(level, code, message)| format!("{level} {code} {message}")).collect()
}

type ReadBack = (Option<mysql_async::Value>, mysql_async::consts::ColumnType, mysql_async::consts::ColumnFlags, u8, u16);

async fn read_one(conn: &mut mysql_async::Conn, sql: &str) -> ReadBack {
    use mysql_async::prelude::Queryable;
    let row: mysql_async::Row = conn.query_first(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}")).expect("one row");
    let column = &row.columns_ref()[0];
    (row.as_ref(0).cloned(), column.column_type(), column.flags(), column.decimals(), column.character_set())
}

/// The test MariaDB's URL; a test that needs it fails (never skips) without it.
use freshet_testkit::mysql_url as test_url;

#[test]
fn statements_over_the_bound_are_relayed_without_being_normalized() {
    let bounds = Bounds { max_statement: 1024, max_in_list: 1000 };
    let classify_b = |sql: &str| classify_bounded(sql.as_bytes(), SqlMode::default(), bounds).fingerprint;
    let long = format!("SELECT {}1 FROM t", "1,".repeat(1000));
    let query = classify_bounded(long.as_bytes(), SqlMode::default(), bounds);
    assert!(query.relay.is_some_and(|r| r.contains("max_query")), "{:?}", query.relay);
    assert!(query.fingerprint.normalized.len() < 100 && query.literals.is_empty() && query.fingerprint.slots.is_empty());
    // Every long SELECT is one shape; other statements stay "not a SELECT" (the session still
    // follows them), under a shape per first word.
    assert_eq!(classify_b(&format!("select {}2 FROM u", "2,".repeat(2000))), query.fingerprint);
    let set = format!("SET @x = '{}'", "x".repeat(2000));
    let set_query = classify_bounded(set.as_bytes(), SqlMode::default(), bounds);
    assert_eq!(set_query.relay, Some("not a SELECT"));
    assert!(!set_query.fingerprint.normalized.contains("xxx"));
    assert_ne!(set_query.fingerprint, query.fingerprint);
    // Up to the bound, the usual.
    let fits = format!("SELECT a FROM t WHERE b = 1{}", " ".repeat(1024 - 27));
    assert_eq!(fits.len(), 1024);
    assert_eq!(classify_b(&fits), q("SELECT a FROM t WHERE b = 1").fingerprint);
}

#[test]
fn in_lists_over_the_bound_are_relayed_under_a_shape_of_their_own() {
    let bounds = Bounds { max_statement: 1 << 20, max_in_list: 3 };
    let short = classify_bounded(b"SELECT a FROM t WHERE b IN (1, 2, 3)", SqlMode::default(), bounds);
    assert_eq!(short.relay, None);
    let long = classify_bounded(b"SELECT a FROM t WHERE b IN (1, 2, 3, 4)", SqlMode::default(), bounds);
    assert!(long.relay.is_some_and(|r| r.contains("max_in_list")), "{:?}", long.relay);
    assert_ne!(long.fingerprint.hash, short.fingerprint.hash);
    assert!(long.literals.is_empty() && long.in_lists.is_empty());
    let longer = classify_bounded(b"SELECT a FROM t WHERE b IN (5, 6, 7, 8, 9)", SqlMode::default(), bounds);
    assert_eq!(longer.fingerprint, long.fingerprint);
}

/// Literal tokens left in a shown text, looking inside executable comments too.
fn literals_in(shown: &str) -> Vec<String> {
    let bytes = shown.as_bytes();
    let mut found = Vec::new();
    for t in lexer::Lexer::new(bytes) {
        use lexer::TokenKind::*;
        let text = String::from_utf8_lossy(t.text(bytes)).into_owned();
        match t.kind {
            Integer | Decimal | Float | HexNumber | BitNumber | HexString | BitString | SingleQuoted | DoubleQuoted | NationalString
            | Unterminated => found.push(text),
            // The version after `/*!` is the server's business, not a value.
            ExecComment => found.extend(literals_in(
                text.trim_start_matches("/*")
                    .trim_end_matches("*/")
                    .trim_start_matches(['!', 'M', '+'])
                    .trim_start_matches(|c: char| c.is_ascii_digit()),
            )),
            UserVariable if text.starts_with("@'") || text.starts_with("@\"") => found.push(text),
            _ => {}
        }
    }
    found
}

#[test]
fn shown_texts_replace_every_literal_of_every_statement_kind() {
    for sql in [
        "GRANT SELECT ON db.t TO 'u'@'%' IDENTIFIED BY 'pw'",
        "/*!40101 SET PASSWORD FOR 'u'@'%' = PASSWORD('pw') */",
        "SELECT 'pw' AS x, 42, 1.5, 0x1f, X'1f', b'1', 0b1, N'pw', \"pw\" FROM t WHERE id = 1",
        "SELECT a FROM t WHERE b = 'pw' /*!99999 AND c = 'pw2' */ /*M!100000 AND 'pw3' */ /*+ hint('pw4') */",
        "CREATE USER u IDENTIFIED VIA ed25519 USING PASSWORD('pw')",
        "INSERT INTO t VALUES (1, 'pw'), (2, 'pw')",
        "SELECT CAST(a AS CHAR(10)), b FROM t ORDER BY 1",
        "SELECT a FROM t WHERE b = 'unterminated",
        "SELECT (SELECT 'pw') FROM t",
    ] {
        let shown = shown(&norm(sql));
        assert_eq!(literals_in(&shown), Vec::<String>::new(), "{sql} -> {shown}");
        assert!(!shown.contains("pw"), "{sql} -> {shown}");
    }
    assert_eq!(shown(&norm("SELECT a, 'x' FROM t WHERE b IN (1, 2) AND c = ?")), "SELECT a, ? FROM t WHERE b IN (...) AND c = ?");
}

proptest! {
    #[test]
    fn no_literal_is_ever_shown(sql in "[ -~]{0,80}") {
        let shown = shown(&norm(&sql));
        prop_assert_eq!(literals_in(&shown), Vec::<String>::new(), "{} -> {}", sql, shown);
    }
}

#[test]
fn a_parsed_functions_name_apart_from_its_parenthesis_relays() {
    for sql in [
        "SELECT a FROM t WHERE MAX (v) > 1",
        "SELECT a FROM t WHERE k = 1 AND SUBSTRING/* c */(s, 1) = 'x'",
        "SELECT a FROM t WHERE k = 1 GROUP BY a HAVING count\n(*) > 1",
        "SELECT a FROM t WHERE TRIM (s) = 'x'",
        "SELECT a FROM t WHERE `MAX`(v) > 1",
    ] {
        assert_eq!(q(sql).relay, Some(fingerprint::APART_FROM_ITS_PARENTHESIS), "{sql}");
    }
    for sql in [
        "SELECT a FROM t WHERE MAX(v) > 1",
        "SELECT a FROM t WHERE CONCAT (s, 'x') = 'ax'",
        "SELECT a FROM t WHERE k IN (1, 2) AND s = 'max (v)'",
        "SELECT a FROM t WHERE `concat`(s, 'x') = 'ax'",
    ] {
        assert_ne!(q(sql).relay, Some(fingerprint::APART_FROM_ITS_PARENTHESIS), "{sql}");
    }
}

#[test]
fn a_parsed_functions_name_apart_from_its_parenthesis_is_another_fingerprint() {
    let joined = q("SELECT a FROM t WHERE k = 1 AND MAX(v) > 1").fingerprint;
    for sql in [
        "SELECT a FROM t WHERE k = 1 AND MAX (v) > 1",
        "SELECT a FROM t WHERE k = 1 AND MAX/**/(v) > 1",
        "SELECT a FROM t WHERE k = 1 AND `MAX`(v) > 1",
    ] {
        assert_ne!(q(sql).fingerprint, joined, "{sql}");
    }
    assert_eq!(
        q("SELECT a FROM t WHERE k = 1 AND CONCAT (v) > 1").fingerprint,
        q("SELECT a FROM t WHERE k = 1 AND CONCAT(v) > 1").fingerprint
    );
}

/// The server takes no sign before a row count: `LIMIT +3` is a syntax error (1064), and so
/// are `LIMIT 0, +1`, `OFFSET -1`, `FETCH FIRST +1 ROWS` and `ROWS EXAMINED +5`. The sign was
/// folded into the literal, so `LIMIT +3` had the cached `LIMIT 3`'s shape and constant and
/// was answered with rows (session 53's audit). A sign elsewhere still folds.
#[test]
fn a_signed_row_count_is_relayed() {
    for sql in [
        "SELECT id FROM t WHERE k = 4 ORDER BY id LIMIT +3",
        "SELECT id FROM t WHERE k = 4 ORDER BY id LIMIT -3",
        "SELECT id FROM t WHERE k = 4 ORDER BY id LIMIT 0, +1",
        "SELECT id FROM t WHERE k = 4 ORDER BY id LIMIT 1 OFFSET +0",
        "SELECT id FROM t WHERE k = 4 ORDER BY id OFFSET 0 ROWS FETCH FIRST +1 ROWS ONLY",
        "SELECT id FROM t WHERE k = 4 ORDER BY id OFFSET 0 ROWS FETCH NEXT +1 ROWS ONLY",
        "SELECT id FROM t WHERE k = 4 LIMIT 1 ROWS EXAMINED +5",
    ] {
        assert!(q(sql).relay.is_some(), "{sql}");
    }
    for sql in ["SELECT id FROM t WHERE k = +4 ORDER BY id LIMIT 3", "SELECT id FROM t WHERE k = -4 LIMIT 0, 3"] {
        assert_eq!(q(sql).relay, None, "{sql}");
    }
}
