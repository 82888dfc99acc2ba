//! `compile` never panics: random token soups, random bytes, and mutations of valid queries.

use freshet_dataflow::*;
use proptest::prelude::*;

fn catalog() -> Catalog {
    let i = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 4, unsigned: false });
    let mut c = Catalog::new();
    c.add(TableSchema::new("a", vec![i("id"), i("k"), i("g"), i("x"), ColumnSchema::new("s", SqlType::Text)], vec![0])).unwrap();
    c.add(TableSchema::new("b", vec![i("id"), i("k"), i("y"), ColumnSchema::new("d", SqlType::Date)], vec![0])).unwrap();
    c
}

const TOKENS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP BY",
    "HAVING",
    "ORDER BY",
    "LIMIT",
    "OFFSET",
    "JOIN",
    "LEFT JOIN",
    "ON",
    "AND",
    "OR",
    "NOT",
    "IN",
    "(",
    ")",
    ",",
    "?",
    "=",
    "<",
    ">",
    "<=",
    "<>",
    "+",
    "-",
    "*",
    "/",
    "%",
    "DIV",
    "a",
    "b",
    "a.k",
    "b.k",
    "id",
    "k",
    "g",
    "x",
    "s",
    "y",
    "d",
    "COUNT(*)",
    "COUNT",
    "SUM",
    "AVG",
    "MIN",
    "MAX",
    "DISTINCT",
    "UNION ALL",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "IS NULL",
    "IS NOT NULL",
    "BETWEEN",
    "LIKE",
    "'x'",
    "'2024-01-01'",
    "1",
    "0",
    "-1",
    "1.5",
    "1e3",
    "NULL",
    "AS",
    "t",
    "CONCAT",
    "COALESCE",
    "IFNULL",
    "SUBSTRING",
    "YEAR",
    "DESC",
    "ASC",
    "*",
    "a.*",
    "99999999999999999999999999999999",
    "X'4'",
    "`a`",
];

fn compile_no_panic(sql: &str) {
    let c = catalog();
    if let Ok(q) = compile(sql, &c) {
        // Anything that compiles must install, render fills and report costs without panicking.
        let mut df = Dataflow::new(c, ByteSize(1 << 20));
        let v = df.install(q);
        let params = vec![Value::Int(1); df.query(v).unwrap().n_params];
        let r = df.reader(v).unwrap();
        let _ = r.lookup(&params);
        let store = MemStore::new();
        let _ = df.run_fills(&mut MemUpstream { store: &store });
        let _ = r.lookup(&params);
        let _ = df.cost(v);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]
    #[test]
    fn token_soup(toks in proptest::collection::vec(0..TOKENS.len(), 0..30)) {
        let sql = toks.iter().map(|&i| TOKENS[i]).collect::<Vec<_>>().join(" ");
        compile_no_panic(&sql);
    }

    #[test]
    fn select_shaped(toks in proptest::collection::vec(0..TOKENS.len(), 0..24)) {
        let sql = format!("SELECT {}", toks.iter().map(|&i| TOKENS[i]).collect::<Vec<_>>().join(" "));
        compile_no_panic(&sql);
    }

    #[test]
    fn random_text(s in "\\PC{0,80}") {
        compile_no_panic(&s);
    }

    #[test]
    fn mutated_valid(base in 0..6usize, cut in 0..200usize, len in 0..20usize, ins in 0..TOKENS.len()) {
        let valid = [
            "SELECT a.id, COUNT(b.id) FROM a LEFT JOIN b ON b.k = a.k WHERE a.k = ? GROUP BY a.id",
            "SELECT id, x FROM a WHERE k IN (?, ?) ORDER BY x DESC",
            "SELECT DISTINCT g FROM a WHERE k = ? AND s LIKE 'a%' LIMIT 3",
            "SELECT id FROM a UNION ALL SELECT id FROM b",
            "SELECT CASE WHEN x > 1 THEN 'a' ELSE s END, SUBSTRING(s, 1, 2) FROM a WHERE k = ?",
            "SELECT k, AVG(x) v FROM a GROUP BY k HAVING v > 1 ORDER BY 2",
        ];
        let s = valid[base];
        let cut = cut.min(s.len());
        let end = (cut + len).min(s.len());
        if s.is_char_boundary(cut) && s.is_char_boundary(end) {
            let m = format!("{} {} {}", &s[..cut], TOKENS[ins], &s[end..]);
            compile_no_panic(&m);
        }
    }
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let sql = format!("SELECT {}1{} FROM a", "(".repeat(5000), ")".repeat(5000));
    assert!(compile(&sql, &catalog()).is_err());
    let sql = format!("SELECT id FROM a WHERE {}", vec!["x = 1"; 3000].join(" AND "));
    let _ = compile(&sql, &catalog());
}
