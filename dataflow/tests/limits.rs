//! LIMIT and OFFSET past any window a top-k state can hold are refused (the query is then
//! relayed), never installed: `LIMIT 18446744073709551615` is MySQL's documented way to say
//! "all rows", and a window of `limit + offset + slack` rows overflowed — an empty window
//! served as the answer, or a panic installing the view.

use freshet_dataflow::*;

fn catalog() -> Catalog {
    let i = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 4, unsigned: false });
    let mut c = Catalog::new();
    c.add(TableSchema::new("a", vec![i("id").not_null(), i("k"), i("x")], vec![0])).unwrap();
    c
}

fn install(sql: &str) -> Result<ViewId, Refusal> {
    Dataflow::new(catalog(), ByteSize(1 << 20)).install_sql(sql)
}

#[test]
fn a_limit_past_any_window_is_refused() {
    for tail in
        ["LIMIT 18446744073709551615", "LIMIT 18446744073709551615 OFFSET 1", "LIMIT 1 OFFSET 18446744073709551615", "LIMIT 5000000000"]
    {
        let sql = format!("SELECT id, x FROM a WHERE k = ? ORDER BY x, id {tail}");
        let reason = install(&sql).expect_err(&sql).reason;
        assert!(reason.contains("LIMIT"), "{sql}: {reason}");
    }
}

#[test]
fn ordinary_limits_are_still_cached() {
    for tail in ["LIMIT 3", "LIMIT 3 OFFSET 2", "LIMIT 100000"] {
        let sql = format!("SELECT id, x FROM a WHERE k = ? ORDER BY x, id {tail}");
        install(&sql).unwrap_or_else(|e| panic!("{sql}: {}", e.reason));
    }
}
