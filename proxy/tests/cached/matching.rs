//! Which cache answers a read: the spellings of its text (white space, comments, literals, signs,
//! quoting, the case of names), a session's learnt text shapes, and caches of one shape that
//! differ in their constants.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_queries_of_every_spelling_hit_and_match_the_server_byte_for_byte() {
    items_table("ct_items", 60).await;
    let proxy = start_proxy(&cache_config(&[("items", "SELECT id, name, price, created, qty FROM ct_items WHERE id = ?")])).await;
    let mut direct = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    for sql in [
        "SELECT id, name, price, created, qty FROM ct_items WHERE id = 5",
        "select  id,name ,price, created,   qty from ct_items where id=6 -- trailing comment",
        "SELECT /* a comment */ `id`, `name`, price, created, qty FROM `ct_items` WHERE `id` = 7",
        "SELECT ct_items.id, ct_items.name, ct_items.price, ct_items.created, ct_items.qty FROM ct_items WHERE ct_items.id = 14",
        "SELECT id, name, price, created, qty FROM ct_items WHERE id = 100000",
        "SELECT id, name, price, created, qty FROM ct_items WHERE id = '9'",
    ] {
        let cached = hit(&mut through, &proxy, "items", sql).await;
        assert_eq!(cached, direct.query(sql).await, "{sql}");
    }
    // Spellings whose column definitions differ from the ones above (the names as written,
    // aliases, the table's alias in each definition), or that the cache does not answer: each
    // read is the server's answer, whether it is relayed or, once its own definitions are
    // captured, a hit.
    for sql in [
        "SELECT ID, Name, PRICE, created, qty FROM ct_items WHERE id = 10",
        "SELECT id AS a, name AS b, price, created, qty FROM ct_items WHERE id = 11",
        "SELECT x.id, x.name, x.price, x.created, x.qty FROM ct_items x WHERE x.id = 12",
        "SELECT X.id, X.name, X.price, X.created, X.qty FROM ct_items AS X WHERE X.id = 13",
        "SELECT id, name, price, created, qty FROM freshet_test.ct_items WHERE id = 15",
        "SELECT `ID`, name, price, created, qty FROM ct_items WHERE ID = 16",
        "SELECT id, name, price, created, qty FROM ct_items WHERE id = 16",
        "SELECT id, name, price, created, qty FROM ct_items WHERE id = 17 LIMIT 1",
    ] {
        let want = direct.query(sql).await;
        for read in 0..5 {
            assert_eq!(through.query(sql).await, want, "{sql} (read {read})");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Without DEPRECATE_EOF too (classic EOF packets).
    let classic = DEFAULT_CAPS & !freshet_proxy::protocol::Capabilities::DEPRECATE_EOF;
    let mut direct = RawClient::connect(&upstream_addr(), classic).await.unwrap();
    let mut through = RawClient::connect(&proxy.mysql.to_string(), classic).await.unwrap();
    let sql = "SELECT id, name, price, created, qty FROM ct_items WHERE id = 21";
    assert_eq!(hit(&mut through, &proxy, "items", sql).await, direct.query(sql).await);
}

/// A session learns the text of a cached shape it sent (`matching::shape`) and classifies the
/// same text with other values without tokenizing it; here, through a session against the
/// server: those texts are answered as the server answers them, and a text that differs
/// anywhere but in a value goes the whole way (relayed here). That the learnt path is the one
/// taken, and gives what classifying gives, is `matching::shape`'s unit tests' to check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learnt_text_shape_answers_other_values_and_nothing_else() {
    items_table("ls_items", 30).await;
    let proxy = start_proxy(&cache_config(&[("items", "SELECT id, name, price, created, qty FROM ls_items WHERE id = ?")])).await;
    let mut direct = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let mut through = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let read = "SELECT id, name, price, created, qty FROM ls_items WHERE id = ";
    hit(&mut through, &proxy, "items", &format!("{read}5")).await;
    // The executable comment comes last: a session that sent one relays its cached reads from
    // then on (its state may have changed in ways freshet does not follow).
    for (value, answered) in [
        ("6", true),
        ("000012", true),
        ("7 OR id = 8", false),
        ("7 UNION SELECT 1, 2, 3, 4, 5", false),
        ("(SELECT 9)", false),
        // A string literal's first read captures its own column definitions (the server may
        // describe them apart from an integer's), the next is answered.
        ("'12'", false),
        ("'13'", true),
        ("14", true),
        ("7 /*! OR id = 9 */", false),
    ] {
        let sql = format!("{read}{value}");
        let before = hits(&proxy, "items");
        let reply = through.query(&sql).await;
        assert_eq!(hits(&proxy, "items") > before, answered, "{sql}");
        assert_eq!(reply, direct.query(&sql).await, "{sql}");
    }
}

/// A comment after the last `;` is a second statement to a client with multi-statements (the
/// server answers the read with SERVER_MORE_RESULTS_EXISTS, then an OK). Such a text is
/// relayed; it shared its fingerprint with the plain read (the comment is no part of the
/// normalized text), so once the plain read's verdict was stored it was answered from the view,
/// one result only (an audit of statement forms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comment_after_the_last_semicolon_is_relayed_after_the_plain_read() {
    let _admin = fresh_table("ct_tail", "id INT PRIMARY KEY, v VARCHAR(10) NOT NULL", "(1, 'a'), (2, 'b')").await;
    let cache = "SELECT id, v FROM ct_tail WHERE id = ?";
    let reads = [
        ("tail", cache, "SELECT id, v FROM ct_tail WHERE id = 1"),
        ("tail", cache, "SELECT id, v FROM ct_tail WHERE id = 1; -- x"),
        ("tail", cache, "SELECT id, v FROM ct_tail WHERE id = 2;/* */"),
        ("tail", cache, "SELECT id, v FROM ct_tail WHERE id = 2; # x"),
    ];
    // The plain read first: its verdict is the one stored.
    let (proxy, mut client, mut check) = warmed(&reads[..1]).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "tail") > 0, "the plain read answered from the view");
}

/// After a dot, a reserved word is a name, and names of tables are case-sensitive here
/// (`lower_case_table_names = 0`): `db.ORDER` and `db.Order` are not `db.order`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserved_word_after_a_dot_keeps_its_case() {
    let mut admin = direct().await;
    for t in ["`order`", "`ORDER`"] {
        admin.query_drop(format!("CREATE OR REPLACE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(20))")).await.unwrap();
    }
    admin.query_drop("INSERT INTO `order` VALUES (1, 'lower')").await.unwrap();
    admin.query_drop("INSERT INTO `ORDER` VALUES (1, 'upper')").await.unwrap();
    let cached = "SELECT id, v FROM freshet_test.order WHERE id = ?";
    let reads = [
        ("reserved", cached, "SELECT id, v FROM freshet_test.order WHERE id = 1"),
        ("reserved", cached, "SELECT id, v FROM freshet_test.ORDER WHERE id = 1"),
        ("reserved", cached, "SELECT id, v FROM freshet_test.Order WHERE id = 1"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "reserved") > 0);
    for t in ["`order`", "`ORDER`"] {
        admin.query_drop(format!("DROP TABLE {t}")).await.unwrap();
    }
}

/// A quoted name that the server reads otherwise bare: a charset introducer (`_utf8mb4`,
/// `_binary`: bare, 1064), `current_role` (bare, the session's role: NULL),
/// `master_ssl_verify_server_cert` (reserved: 1064), `sql_cache` first in a select list (an
/// option: 1064). The bare spelling must not be answered from the cache of the quoted one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quoted_name_the_server_reads_otherwise_bare_is_not_its_bare_word() {
    let mut admin = fresh_table(
        "ct_kw2",
        "id INT PRIMARY KEY, `_utf8mb4` INT, `_latin1` VARCHAR(5), `_binary` INT, k INT, KEY(k)",
        "(1, 11, 'l1', 111, 5), (2, 22, 'l2', 222, 5)",
    )
    .await;
    admin
        .query_drop(
            "CREATE OR REPLACE TABLE ct_kw3 (id INT PRIMARY KEY, `current_role` VARCHAR(10), \
             `master_ssl_verify_server_cert` INT, `sql_cache` INT)",
        )
        .await
        .unwrap();
    admin.query_drop("INSERT INTO ct_kw3 VALUES (1, 'colval', 7, 8)").await.unwrap();
    let intro = "SELECT `_utf8mb4`, `_latin1`, `_binary` FROM ct_kw2 WHERE id = ?";
    let role = "SELECT id, `current_role`, `master_ssl_verify_server_cert` FROM ct_kw3 WHERE id = ?";
    let option = "SELECT `sql_cache`, id FROM ct_kw3 WHERE id = ?";
    let reads = [
        ("intro", intro, "SELECT `_utf8mb4`, `_latin1`, `_binary` FROM ct_kw2 WHERE id = 2"),
        ("intro", intro, "SELECT _utf8mb4, `_latin1`, `_binary` FROM ct_kw2 WHERE id = 2"),
        ("intro", intro, "SELECT `_utf8mb4`, `_latin1`, _binary FROM ct_kw2 WHERE id = 2"),
        ("intro", intro, "SELECT `_utf8mb4`, _LATIN1, `_binary` FROM ct_kw2 WHERE id = 2"),
        ("role", role, "SELECT id, `current_role`, `master_ssl_verify_server_cert` FROM ct_kw3 WHERE id = 1"),
        ("role", role, "SELECT id, current_role, `master_ssl_verify_server_cert` FROM ct_kw3 WHERE id = 1"),
        ("role", role, "SELECT id, `current_role`, master_ssl_verify_server_cert FROM ct_kw3 WHERE id = 1"),
        ("option", option, "SELECT `sql_cache`, id FROM ct_kw3 WHERE id = 1"),
        ("option", option, "SELECT sql_cache, id FROM ct_kw3 WHERE id = 1"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    for cache in ["intro", "role", "option"] {
        assert!(hits(&proxy, cache) > 0, "{cache}: its quoted read is answered from the cache");
    }
    admin.query_drop("DROP TABLE ct_kw2, ct_kw3").await.unwrap();
}

/// Spellings of one read that the server may read alike or not: white space the server's
/// lexer knows (and some it does not), comments, adjacent strings, number and string literal
/// forms, quoted names, a trailing `;`, a NUL. Each is answered as the server answers it:
/// rows, or its error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spellings_of_a_read_are_read_as_the_server_reads_them() {
    let _admin = fresh_table("ct_lex", "id INT PRIMARY KEY, s VARCHAR(8) NULL", "(1, 'a'), (2, 'ab'), (10, 'x'), (16, 'y')").await;
    let point = "SELECT id, s FROM ct_lex WHERE id = ?";
    let texts = [
        "SELECT id, s FROM ct_lex WHERE id = 1",
        "SELECT id, s FROM ct_lex WHERE id=1",
        "SELECT id, s FROM ct_lex WHERE id =\t1",
        "SELECT id, s FROM ct_lex WHERE id =\r\n1",
        "SELECT id, s FROM ct_lex WHERE id =\x0b1",
        "SELECT id, s FROM ct_lex WHERE id =\x0c1",
        "SELECT id, s FROM ct_lex WHERE id =\u{a0}1",
        "SELECT id, s FROM ct_lex WHERE id =\u{3000}1",
        "SELECT id, s FROM ct_lex WHERE id = 1\0",
        "SELECT id, s FROM ct_lex WHERE id = 1\0 AND 0",
        "SELECT id, s FROM ct_lex WHERE id = 1;",
        "SELECT id, s FROM ct_lex WHERE id = 1 ;  ",
        "SELECT id, s FROM ct_lex WHERE id = 1 -- x",
        "SELECT id, s FROM ct_lex WHERE id = 1 --x",
        "SELECT id, s FROM ct_lex WHERE id = 1 # x",
        "SELECT id, s FROM ct_lex WHERE id = 1 /* x */",
        "SELECT id, s FROM ct_lex WHERE id = 1 /* x",
        "SELECT id, s FROM ct_lex WHERE id = 1 /*! AND 0 */",
        "SELECT id, s FROM ct_lex WHERE id = 1 /*M!100000 AND 0 */",
        "SELECT id, s FROM ct_lex WHERE id = '1' '0'",
        "SELECT id, s FROM ct_lex WHERE id = '1' \"0\"",
        "SELECT id, s FROM ct_lex WHERE id = \"1\"",
        "SELECT id, s FROM ct_lex WHERE id = _binary'1'",
        "SELECT id, s FROM ct_lex WHERE id = N'1'",
        "SELECT id, s FROM ct_lex WHERE id = 0x10",
        "SELECT id, s FROM ct_lex WHERE id = X'10'",
        "SELECT id, s FROM ct_lex WHERE id = 0b1010",
        "SELECT id, s FROM ct_lex WHERE id = b'1010'",
        "SELECT id, s FROM ct_lex WHERE id = 1.",
        "SELECT id, s FROM ct_lex WHERE id = .1e1",
        "SELECT id, s FROM ct_lex WHERE id = 1e0",
        "SELECT id, s FROM ct_lex WHERE id = 1e",
        "SELECT id, s FROM ct_lex WHERE id = 1x",
        "SELECT id, s FROM ct_lex WHERE id = 0x",
        "SELECT id, s FROM ct_lex WHERE id = 0x1g",
        "SELECT id, s FROM ct_lex WHERE id = 1.e1",
        "SELECT id, s FROM ct_lex WHERE id = (1)",
        "SELECT id, s FROM ct_lex WHERE (id) = 1",
        "SELECT id, s FROM ct_lex WHERE id = +1",
        "SELECT id, s FROM ct_lex WHERE id = - -1",
        "SELECT id, s FROM ct_lex WHERE id = 01",
        "SELECT id, s FROM ct_lex WHERE id = 1.0",
        "SELECT id, s FROM ct_lex WHERE id = 1.5",
        "SELECT id, s FROM ct_lex WHERE `id` = 1",
        "SELECT id, s FROM `ct_lex` WHERE id = 1",
        "SELECT id, s FROM freshet_test.ct_lex WHERE id = 1",
        "SELECT id, s FROM freshet_test . ct_lex WHERE id = 1",
        "SELECT id, s FROM ct_lex WHERE ct_lex.id = 1",
        "SELECT id, s FROM ct_lex WHERE ct_lex . id = 1",
        "select id, s from ct_lex where id = 1",
        "SELECT id, s FROM ct_lex WHERE id = 1 AND 1",
        "SELECT id, s FROM ct_lex WHERE id = '1abc'",
        "SELECT id, s FROM ct_lex WHERE id = ' 1'",
        "SELECT id, s FROM ct_lex WHERE id = '1 '",
        "SELECT id, s FROM ct_lex WHERE id = '\\x31'",
        "SELECT id, s FROM ct_lex WHERE id = 1 LIMIT 1",
        "SELECT id, s FROM ct_lex WHERE id = 1 LIMIT 0",
        "SELECT id, s FROM ct_lex WHERE id = 1 ORDER BY s",
        "SELECT id, s FROM ct_lex WHERE id IN (1)",
        "SELECT id, s FROM ct_lex WHERE id IN (1, 1, 2)",
        "SELECT id, s FROM ct_lex WHERE id IN ('1', 2.0, 0x10)",
        "SELECT id, s FROM ct_lex WHERE id = \\N",
        "SELECT id, s FROM ct_lex WHERE id <=> \\N",
        "SELECT id, s FROM ct_lex WHERE id = 1e400",
        "SELECT id, s FROM ct_lex WHERE id = 1e-400",
        "SELECT id, s FROM ct_lex WHERE id = -0",
        "SELECT id, s FROM ct_lex WHERE id = 18446744073709551616",
        "SELECT id, s FROM ct_lex WHERE id = 0x1",
        "SELECT id, s FROM ct_lex WHERE id = 1 /* a /* b */ */",
        "SELECT id, s FROM ct_lex WHERE id = @x",
        "SELECT id, s FROM ct_lex WHERE id = @@auto_increment_increment",
        "SELECT id, s FROM ct_lex WHERE id = (SELECT 1)",
        "SELECT id, s FROM ct_lex WHERE id = ?",
        "SELECT id, s FROM ct_lex WHERE id = 1 INTO @y",
        "SELECT id, s FROM ct_lex WHERE id = 1 FOR UPDATE",
        "SELECT id, s FROM ct_lex WHERE id = 1 LOCK IN SHARE MODE",
        "SELECT SQL_NO_CACHE id, s FROM ct_lex WHERE id = 1",
        "SELECT id, s FROM ct_lex WHERE id = 1 PROCEDURE ANALYSE()",
        "SELECT id, s FROM ct_lex USE INDEX (PRIMARY) WHERE id = 1",
        "SELECT id, s FROM ct_lex PARTITION (p0) WHERE id = 1",
        "SELECT id, s FROM ct_lex AS OF TIMESTAMP NOW() WHERE id = 1",
        "SELECT id, s FROM ct_lex FOR SYSTEM_TIME ALL WHERE id = 1",
    ];
    let reads: Vec<(&str, &str, &str)> = texts.iter().map(|t| ("lex", point, *t)).collect();
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "lex") > 0, "reads answered from the view");
}

/// Typed and ODBC literals against a DATE key: `DATE '...'`, `TIMESTAMP '...'`, `{d '...'}`,
/// and strings the server reads as a date, a date-time or neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn date_literals_are_read_as_the_server_reads_them() {
    let _admin =
        fresh_table("ct_dlit", "id INT PRIMARY KEY, d DATE NULL, KEY (d)", "(1, '2024-01-01'), (2, '2024-01-02'), (3, NULL)").await;
    let cached = "SELECT id FROM ct_dlit WHERE d = ?";
    let texts = [
        "SELECT id FROM ct_dlit WHERE d = '2024-01-01'",
        "SELECT id FROM ct_dlit WHERE d = DATE '2024-01-01'",
        "SELECT id FROM ct_dlit WHERE d = DATE'2024-01-02'",
        "SELECT id FROM ct_dlit WHERE d = TIMESTAMP '2024-01-01 00:00:00'",
        "SELECT id FROM ct_dlit WHERE d = TIMESTAMP '2024-01-01 00:00:01'",
        "SELECT id FROM ct_dlit WHERE d = '2024-01-01 00:00:01'",
        "SELECT id FROM ct_dlit WHERE d = '2024-01-01 00:00:00.000000'",
        "SELECT id FROM ct_dlit WHERE d = {d '2024-01-01'}",
        "SELECT id FROM ct_dlit WHERE d = {ts '2024-01-01 00:00:00'}",
        "SELECT id FROM ct_dlit WHERE d = '20240101'",
        "SELECT id FROM ct_dlit WHERE d = 20240101",
        "SELECT id FROM ct_dlit WHERE d = '2024/01/01'",
        "SELECT id FROM ct_dlit WHERE d = '24-1-1'",
        "SELECT id FROM ct_dlit WHERE d = '2024-01-01x'",
        "SELECT id FROM ct_dlit WHERE d = TIME '00:00:00'",
    ];
    let reads: Vec<(&str, &str, &str)> = texts.iter().map(|t| ("dlit", cached, *t)).collect();
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "dlit") > 0, "reads answered from the view");
}

/// String literals with every escape the server knows, and some it does not: `\%` and `\_`
/// keep their backslash, `\a` is `a`, `\Z` is byte 26, `\0` a NUL, a doubled quote one
/// quote. Each read is answered as the server answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_literals_are_read_as_the_server_reads_them() {
    let _admin = fresh_table(
        "ct_esc",
        "id INT PRIMARY KEY, s VARBINARY(16) NULL, KEY (s)",
        r#"(1, 'a%'), (2, 'a\\%'), (3, 'a_'), (4, 'a\\_'), (5, 'a''b'), (6, 'a\"b'), (7, 'a\\b'), (8, 'x\ty'), (9, 'n\0x'), (10, 'z\Zx'), (11, 'a'), (12, 'q\bq'), (13, 'r\rr')"#,
    )
    .await;
    let cached = "SELECT id FROM ct_esc WHERE s = ?";
    let texts = [
        r"SELECT id FROM ct_esc WHERE s = 'a%'",
        r"SELECT id FROM ct_esc WHERE s = 'a\%'",
        r"SELECT id FROM ct_esc WHERE s = 'a\\%'",
        r"SELECT id FROM ct_esc WHERE s = 'a\_'",
        r"SELECT id FROM ct_esc WHERE s = 'a''b'",
        r"SELECT id FROM ct_esc WHERE s = 'a\'b'",
        r#"SELECT id FROM ct_esc WHERE s = "a""b""#,
        r#"SELECT id FROM ct_esc WHERE s = 'a\"b'"#,
        r#"SELECT id FROM ct_esc WHERE s = "a'b""#,
        r"SELECT id FROM ct_esc WHERE s = 'a\\b'",
        r"SELECT id FROM ct_esc WHERE s = 'x\ty'",
        r"SELECT id FROM ct_esc WHERE s = 'n\0x'",
        r"SELECT id FROM ct_esc WHERE s = 'z\Zx'",
        r"SELECT id FROM ct_esc WHERE s = '\a'",
        r"SELECT id FROM ct_esc WHERE s = 'q\bq'",
        r"SELECT id FROM ct_esc WHERE s = 'r\rr'",
        r"SELECT id FROM ct_esc WHERE s = X'612562'",
        r"SELECT id FROM ct_esc WHERE s = 0x61",
        r"SELECT id FROM ct_esc WHERE s = _binary'a'",
        r"SELECT id FROM ct_esc WHERE s = _latin1'a'",
        r"SELECT id FROM ct_esc WHERE s = 'a' COLLATE utf8mb4_bin",
    ];
    let reads: Vec<(&str, &str, &str)> = texts.iter().map(|t| ("esc", cached, *t)).collect();
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "esc") > 0, "reads answered from the view");
}

/// A name the server parses as a built-in function only when `(` follows it at once (COUNT,
/// MAX, SUM, SUBSTRING, NOW, ...: MariaDB's `sql_functions`): with a space or a comment
/// before the `(`, the server reads a stored function of that name (ER_SP_DOES_NOT_EXIST,
/// 1630) or a syntax error (`COUNT (*)`). Such a read is the server's to answer. A name the
/// server looks up by name (CONCAT) takes the space.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_before_a_functions_parenthesis_is_read_as_the_server_reads_it() {
    let _admin = fresh_table(
        "ct_space",
        "id INT PRIMARY KEY, k INT NOT NULL, v INT NULL, s VARCHAR(8) NULL, KEY (k)",
        "(1, 1, 5, 'abc'), (2, 1, 7, 'xyz'), (3, 2, 1, 'q')",
    )
    .await;
    let grouped = "SELECT k, COUNT(*), MAX(v), SUM(v) FROM ct_space WHERE k = ? GROUP BY k";
    let point = "SELECT id, SUBSTRING(s, 2), CONCAT(s, 'x') FROM ct_space WHERE id = ?";
    let filtered = "SELECT id FROM ct_space WHERE k = ? AND SUBSTRING(s, 1, 1) <> 'x'";
    let having = "SELECT k FROM ct_space WHERE k = ? GROUP BY k HAVING MAX(v) > 0";
    let reads = [
        ("space_g", grouped, "SELECT k, COUNT(*), MAX(v), SUM(v) FROM ct_space WHERE k = 1 GROUP BY k"),
        ("space_g", grouped, "SELECT k, COUNT (*), MAX(v), SUM(v) FROM ct_space WHERE k = 1 GROUP BY k"),
        ("space_g", grouped, "SELECT k, COUNT(*), MAX (v), SUM(v) FROM ct_space WHERE k = 1 GROUP BY k"),
        ("space_g", grouped, "SELECT k, COUNT(*), MAX/**/(v), SUM(v) FROM ct_space WHERE k = 1 GROUP BY k"),
        ("space_g", grouped, "SELECT k, COUNT(*), MAX(v), SUM\n(v) FROM ct_space WHERE k = 1 GROUP BY k"),
        ("space_p", point, "SELECT id, SUBSTRING(s, 2), CONCAT (s, 'x') FROM ct_space WHERE id = 1"),
        ("space_p", point, "SELECT id, SUBSTRING (s, 2), CONCAT(s, 'x') FROM ct_space WHERE id = 1"),
        ("space_p", point, "SELECT id, SUBSTRING(s, 2), `CONCAT`(s, 'x') FROM ct_space WHERE id = 1"),
        ("space_w", filtered, "SELECT id FROM ct_space WHERE k = 1 AND SUBSTRING(s, 1, 1) <> 'x'"),
        ("space_w", filtered, "SELECT id FROM ct_space WHERE k = 1 AND SUBSTRING (s, 1, 1) <> 'x'"),
        ("space_w", filtered, "SELECT id FROM ct_space WHERE k = 1 AND SUBSTRING/* a comment */(s, 1, 1) <> 'x'"),
        ("space_w", filtered, "SELECT id FROM ct_space WHERE k = 1 AND `SUBSTRING`(s, 1, 1) <> 'x'"),
        ("space_w", filtered, "SELECT id FROM ct_space WHERE k = 1 AND `substr`(s, 1, 1) <> 'x'"),
        ("space_h", having, "SELECT k FROM ct_space WHERE k = 1 GROUP BY k HAVING MAX(v) > 0"),
        ("space_h", having, "SELECT k FROM ct_space WHERE k = 1 GROUP BY k HAVING MAX (v) > 0"),
        ("space_h", having, "SELECT k FROM ct_space WHERE k = 1 GROUP BY k HAVING COUNT (*) > 0"),
        ("space_h", having, "SELECT k FROM ct_space WHERE k = 1 GROUP BY k HAVING `MAX`(v) > 0"),
        ("space_h", having, "SELECT k FROM ct_space WHERE k = 1 GROUP BY k HAVING freshet_test.MAX(v) > 0"),
        ("space_h", having, "SELECT k FROM ct_space WHERE k = 1 GROUP BY k HAVING freshet_test.`MAX`(v) > 0"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    for cache in ["space_g", "space_p", "space_w", "space_h"] {
        assert!(hits(&proxy, cache) > 0, "{cache}: reads answered from the view");
    }
}

/// A result's column names are the query's spelling (`SELECT ID` names its column `ID`, an
/// alias as written): reads of one cache spelled in other cases each get their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_names_are_spelled_as_the_read_spells_them() {
    let _admin = fresh_table("ct_names", "id INT PRIMARY KEY, k INT NOT NULL, n INT", "(1, 1, 10), (2, 1, 20)").await;
    let reads = [
        ("names", "SELECT id, n AS total FROM ct_names WHERE k = ?", "SELECT id, n AS total FROM ct_names WHERE k = 1"),
        ("names", "SELECT id, n AS total FROM ct_names WHERE k = ?", "SELECT ID, n AS Total FROM ct_names WHERE k = 1"),
        ("names", "SELECT id, n AS total FROM ct_names WHERE k = ?", "select Id, N as TOTAL from ct_names where K = 1"),
        ("names", "SELECT id, n AS total FROM ct_names WHERE k = ?", "SELECT `iD`, n AS `toTal` FROM ct_names WHERE k = 1"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "names") > 0, "reads answered from the view");
}

/// Signs around a literal are the server's arithmetic: `k = --1` is `k = 1` (`--` followed by
/// a digit is no comment), `k = - 1` is -1, `k = -+1` -1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signs_before_a_literal_are_read_as_the_server_reads_them() {
    let _admin = fresh_table("ct_signs", "id INT PRIMARY KEY, k INT NOT NULL", "(1, 1), (2, -1), (3, 0)").await;
    let reads = [
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = 1"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = --1"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = - 1"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = -+1"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = +-1"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = - -1"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = -'1'"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k = -0"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE k IN (-1, --1)"),
        ("signs", "SELECT id FROM ct_signs WHERE k = ?", "SELECT id FROM ct_signs WHERE -1 = k"),
    ];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (wrong, _) = answered_otherwise(&proxy, &mut client, &mut check, &reads).await;
    assert!(wrong.is_empty(), "answered otherwise than the server: {wrong:#?}");
    assert!(hits(&proxy, "signs") > 0, "reads answered from the view");
}

/// With `lower_case_table_names = 0`, Linux's default, a table's name is case-sensitive:
/// `ct_case` and `CT_CASE` are two tables, and `Ct_Case` names none. A read of another table
/// must not be answered from a view of `ct_case`, nor may writes to it reach that view (a
/// session that may write a table of its own would otherwise write into others' answers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_whose_names_differ_in_case_are_different_tables() {
    let mut admin = direct().await;
    for t in ["ct_case", "CT_CASE"] {
        admin.query_drop(format!("DROP TABLE IF EXISTS {t}")).await.unwrap();
        admin.query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY, k INT NOT NULL, n INT)")).await.unwrap();
    }
    admin.query_drop("INSERT INTO ct_case VALUES (1, 1, 10), (2, 1, 20)").await.unwrap();
    admin.query_drop("INSERT INTO CT_CASE VALUES (1, 1, 666)").await.unwrap();
    admin.query_drop("CREATE DATABASE IF NOT EXISTS ct_other").await.unwrap();
    admin.query_drop("CREATE OR REPLACE TABLE ct_other.ct_case (id INT PRIMARY KEY, k INT NOT NULL, n INT)").await.unwrap();
    admin.query_drop("INSERT INTO ct_other.ct_case VALUES (1, 1, 555)").await.unwrap();
    let reads = [("case_lower", "SELECT id, n FROM ct_case WHERE k = ?", "SELECT id, n FROM ct_case WHERE k = 1")];
    let (proxy, mut client, mut check) = warmed(&reads).await;
    let (name, _, sql) = reads[0];
    hit(&mut client, &proxy, name, sql).await;
    let others = [
        "SELECT id, n FROM CT_CASE WHERE k = 1",
        "SELECT id, n FROM Ct_Case WHERE k = 1",
        // A table alias is case-sensitive too: the server knows no `CT_CASE.id` here.
        "SELECT CT_CASE.id, n FROM ct_case WHERE k = 1",
        // And so is a database's name, and a table of another database is another table.
        "SELECT id, n FROM FRESHET_TEST.ct_case WHERE k = 1",
        "SELECT id, n FROM ct_other.ct_case WHERE k = 1",
    ];
    let before = hits(&proxy, name);
    for other in others {
        let want = check.query(other).await;
        for _ in 0..20 {
            assert_eq!(client.query(other).await, want, "{other}: another table, or none");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(hits(&proxy, name), before, "reads of other tables answered from {name}");
    admin.query_drop("INSERT INTO CT_CASE VALUES (3, 1, 777)").await.unwrap();
    admin.query_drop("UPDATE CT_CASE SET n = 888 WHERE id = 1").await.unwrap();
    admin.query_drop("DELETE FROM CT_CASE WHERE id = 3").await.unwrap();
    admin.query_drop("INSERT INTO CT_CASE VALUES (2, 1, 999)").await.unwrap();
    admin.query_drop("UPDATE ct_other.ct_case SET n = 444 WHERE id = 1").await.unwrap();
    answered_as_the_server_after(&proxy, &mut client, &mut check, &reads, "writes to CT_CASE", |p| p).await;
    for t in ["ct_case", "CT_CASE"] {
        admin.query_drop(format!("DROP TABLE {t}")).await.unwrap();
    }
    admin.query_drop("DROP DATABASE ct_other").await.unwrap();
}

/// Two caches of one shape but for a constant (`a > 100`, `a > 2`) are two caches: a read is
/// answered by the one whose constants it has. Only the first cache of a shape was ever asked,
/// so every read of the second was relayed (`constant`) and it never served (an audit of
/// session 53).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_of_one_shape_with_other_constants_each_answer_their_reads() {
    fresh_table(
        "ct_consts",
        "id INT PRIMARY KEY, k INT NOT NULL, a INT NOT NULL, b VARCHAR(10), KEY(k)",
        "(1, 1, 1, 'one'), (2, 1, 5, 'five'), (3, 1, 150, 'big'), (4, 2, 3, 'three')",
    )
    .await;
    let caches = [
        ("consts_big", "SELECT id, b FROM ct_consts WHERE k = ? AND a > 100"),
        ("consts_small", "SELECT id, b FROM ct_consts WHERE k = ? AND a > 2"),
    ];
    let (proxy, mut client, mut check) = keys_hit_as_the_server(&caches, &[1, 2]).await;
    // A constant neither cache has is the server's.
    let before = relayed(&proxy, RelayReason::Constant);
    let sql = "SELECT id, b FROM ct_consts WHERE k = 1 AND a > 50";
    assert_eq!(client.query(sql).await, check.query(sql).await);
    assert_eq!(relayed(&proxy, RelayReason::Constant), before + 1);
}

/// A cache created with CREATE CACHE for a shape that has a verdict already answers its reads.
/// Creating a cache forgot only the shapes relayed for want of one: a shape whose verdict
/// listed the cache of another constant (`id > 100`) kept it, so the new cache (`id > 200`)
/// was never asked and its reads were relayed (`constant`) for good (an audit of session 53).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_created_for_a_shape_with_a_verdict_answers_its_reads() {
    fresh_table("ct_late_const", "id INT PRIMARY KEY, k INT NOT NULL, v INT, KEY(k)", "(50, 3, 1), (150, 3, 2), (250, 3, 3), (260, 4, 4)")
        .await;
    let proxy = start_proxy(&cache_config(&[("late_first", "SELECT id, v FROM ct_late_const WHERE k = ? AND id > 100")])).await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    let first = "SELECT id, v FROM ct_late_const WHERE k = 3 AND id > 100";
    assert_eq!(hit(&mut client, &proxy, "late_first", first).await, check.query(first).await);
    // The shape's verdict is the first cache's: another constant is the server's.
    let second = "SELECT id, v FROM ct_late_const WHERE k = 3 AND id > 200";
    let before = relayed(&proxy, RelayReason::Constant);
    assert_eq!(client.query(second).await, check.query(second).await);
    assert_eq!(relayed(&proxy, RelayReason::Constant), before + 1);

    let mut conn = through(&proxy).await;
    conn.query_drop("CREATE CACHE late_second FROM SELECT id, v FROM ct_late_const WHERE k = ? AND id > 200").await.unwrap();
    assert_eq!(hit(&mut client, &proxy, "late_second", second).await, check.query(second).await);
    assert_eq!(hit(&mut client, &proxy, "late_first", first).await, check.query(first).await);
    let shapes: Vec<(String, u64, String, String, String)> = conn.query("SHOW PROXIED QUERIES LIMIT 100").await.unwrap();
    assert!(shapes.iter().any(|s| s.0.contains("ct_late_const") && s.4.contains("matches cache late_first, late_second")), "{shapes:?}");
}

/// A cache whose query has an IN list of constants answers the reads that repeat that list,
/// value for value; another list is the server's. A list of constants was taken for one of
/// placeholders gone wrong: such a cache was built and said available, and never served, not
/// even its own text (relayed, `no_cache`; an audit of session 53). A list that mixes constants
/// and placeholders, which no read could match, is refused where the cache is defined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_in_list_of_constants_answers_its_own_list_and_a_mixed_list_is_refused() {
    fresh_table(
        "ct_const_list",
        "id INT PRIMARY KEY, k INT NOT NULL, v INT, KEY(k)",
        "(3, 1, 30), (53, 1, 530), (103, 2, 1030), (104, 1, 1040)",
    )
    .await;
    let cached = "SELECT id, v FROM ct_const_list WHERE k = ? AND id IN (3, 53, 103)";
    let proxy = start_proxy(&cache_config(&[("const_list", cached)])).await;
    let mut client = RawClient::connect(&proxy.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let mut check = RawClient::connect(&upstream_addr(), DEFAULT_CAPS).await.unwrap();
    for sql in [
        "SELECT id, v FROM ct_const_list WHERE k = 1 AND id IN (3, 53, 103)",
        "select id, v from ct_const_list where k = 2 and id in (3,53,103)",
        "SELECT ct_const_list.id, ct_const_list.v FROM ct_const_list WHERE ct_const_list.k = 1 AND ct_const_list.id IN (3, 53, 103)",
    ] {
        assert_eq!(hit(&mut client, &proxy, "const_list", sql).await, check.query(sql).await, "{sql}");
    }
    // Another value, another order or another length is another list: the server's.
    for sql in [
        "SELECT id, v FROM ct_const_list WHERE k = 1 AND id IN (3, 53, 104)",
        "SELECT id, v FROM ct_const_list WHERE k = 1 AND id IN (53, 3, 103)",
        "SELECT id, v FROM ct_const_list WHERE k = 1 AND id IN (3, 53)",
        "SELECT id, v FROM ct_const_list WHERE k = 1 AND id IN (3, 53, 103, 104)",
    ] {
        let before = relayed(&proxy, RelayReason::Constant);
        assert_eq!(client.query(sql).await, check.query(sql).await, "{sql}");
        assert_eq!(relayed(&proxy, RelayReason::Constant), before + 1, "{sql}");
    }

    // A list of constants and placeholders: refused by CREATE CACHE, saying why.
    let mixed = "SELECT id, v FROM ct_const_list WHERE k = ? AND id IN (?, 3)";
    let err = through(&proxy).await.query_drop(format!("CREATE CACHE mixed FROM {mixed}")).await.unwrap_err().to_string();
    assert!(err.contains("cannot cache") && err.contains("IN list") && err.contains("constants and placeholders"), "{err}");
    assert!(engine(&proxy).by_name("mixed").is_none());
    // In the config: a strict start fails naming the cache and the problem; a lenient one
    // keeps the cache unavailable, with why, and serves the others.
    let toml = format!(
        "[upstream]\nurl = \"{}\"\ntls = \"disabled\"\n[listen]\nmysql = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{}",
        upstream_url(),
        cache_config(&[("const_list", cached), ("mixed", mixed)])
    );
    let err = match freshet_proxy::Server::bind(freshet_testkit::freshet::config(&toml)).await {
        Ok(_) => panic!("a cached IN list of constants and placeholders must fail a strict start"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("mixed") && err.contains("constants and placeholders"), "{err}");
    let lenient = start_proxy_raw(&format!("{toml}[caches]\nstrict = false\n")).await;
    let why = engine(&lenient).by_name("mixed").unwrap().live().err().unwrap_or_default();
    assert!(why.contains("constants and placeholders"), "{why}");
    let (_, body) = http::get(lenient.admin, "/metrics").await;
    assert!(body.contains("freshet_proxy_cache_available{cache=\"mixed\"} 0"), "{body}");
    assert!(body.contains("freshet_proxy_cache_available{cache=\"const_list\"} 1"), "{body}");
    let mut client = RawClient::connect(&lenient.mysql.to_string(), DEFAULT_CAPS).await.unwrap();
    let sql = "SELECT id, v FROM ct_const_list WHERE k = 1 AND id IN (3, 53, 103)";
    assert_eq!(hit(&mut client, &lenient, "const_list", sql).await, check.query(sql).await);
}

/// EXPLAIN CACHE shows the plan of the cache that answers the read, or says that none does.
/// It showed the first cache of the read's shape even when the read's constants were none of
/// its caches' (the read itself relayed, `constant`; an audit of session 53).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_cache_shows_the_cache_that_answers_the_read_or_none() {
    fresh_table("ct_explain_const", "id INT PRIMARY KEY, k INT NOT NULL, v INT, KEY(k)", "(50, 3, 1), (150, 3, 2), (250, 3, 30)").await;
    let caches = [
        ("explain_big", "SELECT id, v FROM ct_explain_const WHERE k = ? AND id > 100"),
        ("explain_small", "SELECT id, v FROM ct_explain_const WHERE k = ? AND id > 2"),
        ("explain_one", "SELECT id, v FROM ct_explain_const WHERE k = ? AND v < 10"),
    ];
    let proxy = start_proxy(&cache_config(&caches)).await;
    let mut conn = through(&proxy).await;
    let mut explained = Vec::new();
    for (sql, answering) in [
        ("SELECT id, v FROM ct_explain_const WHERE k = 3 AND id > 100", Some(0)),
        ("SELECT id, v FROM ct_explain_const WHERE k = ? AND id > 2", Some(1)),
        (
            "SELECT ct_explain_const.id, ct_explain_const.v FROM ct_explain_const WHERE ct_explain_const.k = 3 AND ct_explain_const.id > 2",
            Some(1),
        ),
        ("SELECT id, v FROM ct_explain_const WHERE k = 3 AND v < 10", Some(2)),
        // Of a shape of two caches, and of one: neither's constant.
        ("SELECT id, v FROM ct_explain_const WHERE k = 3 AND id > 50", None),
        ("SELECT id, v FROM ct_explain_const WHERE k = 3 AND v < 20", None),
    ] {
        let lines: Vec<(String, String)> = conn.query(format!("EXPLAIN CACHE {sql}")).await.unwrap();
        explained.push((sql, answering, lines));
    }
    let section =
        |lines: &[(String, String)], name: &str| lines.iter().find(|(s, _)| s == name).map(|(_, d)| d.clone()).unwrap_or_default();
    // The plan shown is the answering cache's, or the read's own.
    for (sql, answering, lines) in &explained {
        assert_eq!(section(lines, "query"), answering.map_or(*sql, |i| caches[i].1), "{sql}: {lines:?}");
    }
    // And a line says which.
    for (sql, answering, lines) in &explained {
        let said = answering.map_or("no cache answers", |i| caches[i].0);
        assert!(section(lines, "cache").contains(said), "{sql}: {lines:?}");
    }
}
