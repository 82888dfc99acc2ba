//! Random SQL for the differential tests against the server: expressions over columns of
//! every numeric kind, text and DATE, and queries of every shape a cache compiles, over two
//! tables (`ex`, partitioned by `k`, and `ey`). The dataflow's tests compare views with the
//! server's answers for them; the proxy's compare freshet's answers end to end. Seeded (a
//! failure repeats) and plain strings (no dependency).

use crate::rng::Rng;

/// `ex`: one column of each kind (`i` INT, `u` INT UNSIGNED, `b` BIGINT, `d` DECIMAL(10,2), `s`
/// text under utf8mb4_general_ci, `t` TINYINT, `dt` DATE), partitioned by `k`.
pub const EX_DDL: &str = "CREATE TABLE ex (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, i INT NULL, u INT UNSIGNED NULL, \
    b BIGINT NULL, d DECIMAL(10,2) NULL, s VARCHAR(12) COLLATE utf8mb4_general_ci NULL, t TINYINT NULL, dt DATE NULL)";

/// `ey`: joined with `ex` on columns of the same kind or not (`j` INT, `e` DECIMAL(6,1), `w`
/// text under utf8mb4_general_ci, `f` DOUBLE, `ts` DATETIME(3), `bs` text under utf8mb4_bin,
/// `uc` text under utf8mb4_unicode_ci, `tm` TIME, `yr` YEAR, `en` an ENUM whose labels are
/// not in their order, `bt` BIT(8), `st` a SET, `vb` VARBINARY(4), `tz` TIMESTAMP(2), read in
/// UTC by the tests' sessions, `fl` FLOAT, `bn` BINARY(4), which the server pads with zero
/// bytes and the binlog carries without them).
pub const EY_DDL: &str = "CREATE TABLE ey (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, j INT NULL, e DECIMAL(6,1) NULL, \
    w VARCHAR(8) COLLATE utf8mb4_general_ci NULL, f DOUBLE NULL, ts DATETIME(3) NULL, bs VARCHAR(8) COLLATE utf8mb4_bin NULL, \
    uc VARCHAR(8) COLLATE utf8mb4_unicode_ci NULL, tm TIME NULL, yr YEAR NULL, en ENUM('b', 'a', 'c') NULL, \
    bt BIT(8) NULL, st SET('x', 'y', 'z') NULL, vb VARBINARY(4) NULL, tz TIMESTAMP(2) NULL, fl FLOAT NULL, bn BINARY(4) NULL)";

/// The labels of `ey.st`, in their order.
pub const ST_LABELS: [&str; 3] = ["x", "y", "z"];

/// The labels of `ey.en`, in their order.
pub const EN_LABELS: [&str; 3] = ["b", "a", "c"];

/// The literals each column of `ex` after `id` and `k` takes: the ends of its type, NULL, and
/// strings equal under the collation but spelled otherwise.
pub const EX_POOLS: [&[&str]; 7] = [
    &["0", "1", "-1", "3", "42", "2147483647", "-2147483648", "NULL"],
    &["0", "1", "5", "42", "4294967295", "NULL"],
    &["0", "-1", "12", "3", "9223372036854775807", "-9223372036854775808", "NULL"],
    &["0.00", "1.50", "-2.25", "3.00", "42.00", "99999999.99", "-0.01", "NULL"],
    &["''", "'a'", "'A'", "'a '", "'Abc'", "'ß'", "'s'", "'É'", "'e'", "'12'", "'-3.5'", "'42'", "NULL"],
    &["0", "-128", "127", "1", "3", "NULL"],
    &["'2024-02-29'", "'1999-12-31'", "'0001-01-01'", "'9999-12-31'", "'2024-03-01'", "NULL"],
];

/// The literals each column of `ey` after `id` and `k` takes.
pub const EY_POOLS: [&[&str]; 16] = [
    &["0", "1", "-1", "3", "42", "12", "NULL"],
    &["0.0", "1.5", "-2.2", "3.0", "42.0", "NULL"],
    &["'a'", "'A'", "'a '", "'ß'", "'s'", "'12'", "'x'", "'42'", "NULL"],
    &["0", "-0", "1.5", "0.1", "-2.5", "1e300", "3", "123456789.125", "NULL"],
    &["'2024-02-29 10:00:00.123'", "'2024-02-29 10:00:00.000'", "'1999-12-31 23:59:59.999'", "'2024-02-29 00:00:00.000'", "NULL"],
    &["'a'", "'A'", "'a '", "'ß'", "'b'", "NULL"],
    &["'ß'", "'ss'", "'SS'", "'Æ'", "'ae'", "'a'", "'A'", "NULL"],
    &["'00:00:00'", "'-01:00:00'", "'838:59:59'", "'12:30:00'", "'-00:00:01'", "NULL"],
    &["1999", "2024", "2155", "1901", "NULL"],
    &["'a'", "'b'", "'c'", "NULL"],
    &["0", "1", "5", "65", "255", "NULL"],
    &["''", "'x'", "'y,x'", "'x,z'", "'z'", "NULL"],
    // Bytes: compared byte by byte, no case folding and no trailing-space padding.
    &["''", "'a'", "'A'", "'a '", "'ab'", "'12'", "'b'", "NULL"],
    // The TIMESTAMP range's ends, and equal seconds with and without a fraction.
    &[
        "'2024-02-29 10:00:00.12'",
        "'2024-02-29 10:00:00.00'",
        "'1970-01-01 00:00:01.00'",
        "'2038-01-19 03:14:07.99'",
        "'1999-12-31 23:59:59.99'",
        "NULL",
    ],
    // Single precision: 0.1 is not the DOUBLE 0.1, 16777217 is stored as 16777216.
    &["0", "0.1", "-1.5", "16777217", "3.4e38", "-0", "NULL"],
    // Fixed-width bytes: stored padded with zero bytes to four ('' is four of them).
    &["''", "'a'", "'A'", "'ab'", "'abcd'", "'a '", "'12'", "NULL"],
];

/// A random row's literals: `id`, a partition (`k` 0 or 1), and one literal of each pool.
pub fn random_row(rng: &mut Rng, id: i64, pools: &[&[&str]]) -> Vec<String> {
    let mut lits = vec![id.to_string(), rng.below(2).to_string()];
    lits.extend(pools.iter().map(|p| p[rng.below(p.len() as u64) as usize].to_string()));
    lits
}

/// A random expression over the columns of `ex` :
/// numbers, strings and truth values nested up to `depth`, written as SQL.
pub fn random_expr(rng: &mut Rng, depth: u32) -> String {
    random_expr_over(rng, depth, EX_LEAVES)
}

/// The leaves of [`random_expr`]: `ex`'s columns and literals of every kind.
pub const EX_LEAVES: &[&str] = &[
    "i",
    "u",
    "b",
    "d",
    "s",
    "t",
    "dt",
    "0",
    "1",
    "-1",
    "2",
    "3",
    "10",
    "2147483647",
    "9223372036854775807",
    "1.5",
    "0.25",
    "-2.5",
    "'a'",
    "''",
    "'3'",
    "' x'",
    "'2024-02-29'",
    "NULL",
];

/// A random expression whose leaves are drawn from `leaves`.
pub fn random_expr_over(rng: &mut Rng, depth: u32, leaves: &[&str]) -> String {
    if depth == 0 || rng.below(4) == 0 {
        return leaves[rng.below(leaves.len() as u64) as usize].to_string();
    }
    let mut e = || random_expr_over(rng, depth - 1, leaves);
    let (a, b, c) = (e(), e(), e());
    let n = ["-1", "0", "1", "2"][(a.len() + b.len()) % 4];
    match rng.below(37) {
        0 => format!("({a} + {b})"),
        1 => format!("({a} - {b})"),
        2 => format!("({a} * {b})"),
        3 => format!("({a} / {b})"),
        4 => format!("({a} DIV {b})"),
        5 => format!("({a} % {b})"),
        6 => format!("(-{a})"),
        7 => format!("ABS({a})"),
        8 => format!("ROUND({a})"),
        9 => format!("ROUND({a}, {n})"),
        10 => format!("FLOOR({a})"),
        11 => format!("CEILING({a})"),
        12 => format!("LENGTH({a})"),
        13 => format!("CHAR_LENGTH({a})"),
        14 => format!("IF({a}, {b}, {c})"),
        15 => format!("COALESCE({a}, {b})"),
        16 => format!("IFNULL({a}, {b})"),
        17 => format!("NULLIF({a}, {b})"),
        18 => format!("(CASE WHEN {a} THEN {b} ELSE {c} END)"),
        19 => format!("CONCAT({a}, {b})"),
        20 => format!("UPPER({a})"),
        21 => format!("SUBSTRING({a}, {n})"),
        22 => format!("LEFT({a}, {n})"),
        23 => format!("TRIM({a})"),
        24 => format!("REPLACE({a}, 'a', 'bb')"),
        25 => format!("({a} = {b})"),
        26 => format!("({a} < {b})"),
        27 => format!("({a} <> {b})"),
        28 => format!("({a} <=> {b})"),
        29 => format!("({a} IS NULL)"),
        30 => format!("({a} BETWEEN {b} AND {c})"),
        31 => format!("({a} IN ({b}, {c}))"),
        32 => format!("({a} AND {b})"),
        33 => format!("YEAR({a})"),
        34 => format!("MONTH({a})"),
        35 => format!("DAY({a})"),
        _ => format!("(NOT {a})"),
    }
}

/// The leaves of a random expression over `ex` joined with `ey`: both tables' columns (`ey`'s
/// are `j`, `e`, `w`) and a few literals.
pub const JOIN_LEAVES: &[&str] = &[
    "i", "u", "b", "d", "s", "t", "dt", "j", "e", "w", "f", "ts", "bs", "uc", "tm", "yr", "en", "bt", "st", "vb", "tz", "fl", "bn", "ey.k",
    "0", "1", "-1", "2.5", "'a'", "NULL",
];

/// The join conditions of the random queries: `ey`'s column and `ex`'s, of the same kind or not
/// (the server compares an integer with a string as numbers, a string with a string under the
/// collation).
pub const JOIN_ON: &[(&str, &str)] = &[
    ("ey.k", "ex.k"),
    ("ey.j", "ex.i"),
    ("ey.j", "ex.u"),
    ("ey.j", "ex.t"),
    ("ey.j", "ex.b"),
    ("ey.e", "ex.d"),
    ("ey.e", "ex.i"),
    ("ey.w", "ex.s"),
    ("ey.w", "ex.i"),
    ("ey.j", "ex.d"),
    ("ey.bs", "ex.s"),
    ("ey.f", "ex.i"),
    ("ey.ts", "ex.dt"),
    ("ey.uc", "ex.s"),
    ("ey.yr", "ex.i"),
    ("ey.en", "ex.s"),
    ("ey.bt", "ex.t"),
    ("ey.st", "ex.s"),
    ("ey.vb", "ex.s"),
    ("ey.tz", "ex.dt"),
    ("ey.fl", "ex.i"),
    ("ey.bn", "ex.s"),
];

/// A random cached query over `ex` (and `ey`), partitioned by `ex.k`: a join, a grouping with or
/// without HAVING, an ORDER BY with LIMIT, a DISTINCT, a UNION ALL or a join grouped per `ex`
/// row. Each is answered per partition, as the server answers it with `k` bound.
pub fn random_query(rng: &mut Rng) -> String {
    let x = |rng: &mut Rng, depth| random_expr(rng, depth);
    let filter = |rng: &mut Rng| {
        if rng.below(2) == 0 { format!(" AND {}", random_expr(rng, 1)) } else { String::new() }
    };
    let on = |rng: &mut Rng| JOIN_ON[rng.below(JOIN_ON.len() as u64) as usize];
    match rng.below(15) {
        0 => {
            let (l, r) = on(rng);
            let kind = ["JOIN", "LEFT JOIN"][rng.below(2) as usize];
            let extra = if rng.below(3) == 0 { format!(" AND {}", random_expr_over(rng, 1, JOIN_LEAVES)) } else { String::new() };
            let sel = random_expr_over(rng, 2, JOIN_LEAVES);
            format!("SELECT ex.id, ey.id, {sel} FROM ex {kind} ey ON {l} = {r}{extra} WHERE ex.k = ?")
        }
        1 => {
            let g = ["s", "t", "d", "dt", "u", "b"][rng.below(6) as usize];
            let g = if rng.below(3) == 0 { x(rng, 1) } else { g.to_string() };
            let v = x(rng, 2);
            let having = match rng.below(5) {
                0 => " HAVING COUNT(*) > 1".to_string(),
                1 => format!(" HAVING MAX({v}) > {}", ["0", "1", "'a'", "2.5"][rng.below(4) as usize]),
                2 => format!(" HAVING {}", ["MIN(i) IS NOT NULL", "SUM(t) > 0", "COUNT(s) < 2", "MAX(s) >= 'b'"][rng.below(4) as usize]),
                // An aggregate of a random expression, compared with a random literal.
                3 => {
                    let agg = ["MIN(", "MAX(", "SUM(", "COUNT(", "COUNT(DISTINCT ", "AVG("][rng.below(6) as usize];
                    let op = ["=", "<", ">=", "<>"][rng.below(4) as usize];
                    format!(" HAVING {agg}{}) {op} {}", x(rng, 1), EX_LEAVES[7 + rng.below(EX_LEAVES.len() as u64 - 7) as usize])
                }
                _ => String::new(),
            };
            let f = filter(rng);
            format!("SELECT {g}, COUNT(*), SUM(i), MIN({v}), MAX({v}) FROM ex WHERE k = ?{f} GROUP BY {g}{having}")
        }
        2 => {
            let o = if rng.below(2) == 0 { ["s", "d", "dt", "i", "u", "t", "b"][rng.below(7) as usize].to_string() } else { x(rng, 1) };
            let dir = ["", " DESC"][rng.below(2) as usize];
            let (limit, offset) = (1 + rng.below(4), rng.below(3));
            let offset = if offset == 0 { String::new() } else { format!(" OFFSET {offset}") };
            let f = filter(rng);
            let sel = x(rng, 1);
            format!("SELECT id, {sel} FROM ex WHERE k = ?{f} ORDER BY {o}{dir}, id LIMIT {limit}{offset}")
        }
        3 => {
            let f = filter(rng);
            format!("SELECT DISTINCT {} FROM ex WHERE k = ?{f}", x(rng, 1))
        }
        4 => {
            let (a, b) = (x(rng, 1), x(rng, 1));
            let (fa, fb) = (filter(rng), filter(rng));
            // A UNION ALL with parameters is refused: its branches are read without one.
            format!("SELECT id, {a} FROM ex WHERE k = 0{fa} UNION ALL SELECT id, {b} FROM ex WHERE k = 1{fb}")
        }
        5 => {
            let (l, r) = on(rng);
            let v = random_expr_over(rng, 1, JOIN_LEAVES);
            format!("SELECT ex.id, COUNT(ey.id), MAX({v}), MIN(ey.w) FROM ex LEFT JOIN ey ON {l} = {r} WHERE ex.k = ? GROUP BY ex.id")
        }
        6 => {
            let (l, r) = on(rng);
            let o = [
                "ey.j", "ey.w", "ey.e", "ex.s", "ex.d", "ey.f", "ey.ts", "ey.bs", "ey.uc", "ey.tm", "ey.yr", "ey.en", "ey.bt", "ey.st",
                "ey.bn",
            ][rng.below(15) as usize];
            let dir = ["", " DESC"][rng.below(2) as usize];
            format!(
                "SELECT ex.id, ey.id, {o} FROM ex JOIN ey ON {l} = {r} WHERE ex.k = ? ORDER BY {o}{dir}, ex.id, ey.id LIMIT {}",
                1 + rng.below(3)
            )
        }
        7 => {
            let g = ["s", "t", "dt", "u"][rng.below(4) as usize];
            format!("SELECT {g}, COUNT(*), MAX({}), COUNT(DISTINCT {}) FROM ex GROUP BY {g}", x(rng, 1), x(rng, 1))
        }
        8 => {
            let (l, r) = on(rng);
            format!("SELECT ex.id, ex.s FROM ex LEFT JOIN ey ON {l} = {r} WHERE ex.k = ? AND ey.id IS NULL")
        }
        9 => {
            let (l, r) = on(rng);
            let sel = random_expr_over(rng, 1, JOIN_LEAVES);
            format!("SELECT ey.id, ex.id, {sel} FROM ey JOIN ex ON {l} = {r} WHERE ey.k = ?")
        }
        10 => {
            let (g1, g2) = (["s", "t", "dt"][rng.below(3) as usize], ["u", "d", "b"][rng.below(3) as usize]);
            let f = filter(rng);
            format!("SELECT {g1}, {g2}, COUNT(DISTINCT {}), AVG(i), SUM(d) FROM ex WHERE k IN (?, ?){f} GROUP BY k, {g1}, {g2}", x(rng, 1))
        }
        11 => {
            let g = ["s", "t", "dt", "u", "d"][rng.below(5) as usize];
            let f = filter(rng);
            format!(
                "SELECT {g}, COUNT(*) AS c, SUM(i) AS si FROM ex WHERE k = ?{f} GROUP BY {g} ORDER BY c DESC, {g} LIMIT {}",
                1 + rng.below(3)
            )
        }
        12 => {
            let c = ["s", "t", "dt", "u", "d", "b"][rng.below(6) as usize];
            let dir = ["", " DESC"][rng.below(2) as usize];
            format!("SELECT DISTINCT {c} FROM ex WHERE k = ? ORDER BY {c}{dir} LIMIT {}", 1 + rng.below(3))
        }
        13 => {
            let (l, r) = on(rng);
            format!(
                "SELECT ex.id, COUNT(ey.id) AS n FROM ex LEFT JOIN ey ON {l} = {r} WHERE ex.k = ? GROUP BY ex.id ORDER BY n DESC, ex.id LIMIT 2"
            )
        }
        _ => {
            let (l, r) = on(rng);
            let kind = ["JOIN", "LEFT JOIN"][rng.below(2) as usize];
            format!("SELECT ex.id, ey.id, e2.id, e2.s FROM ex JOIN ey ON {l} = {r} {kind} ex e2 ON e2.i = ey.j WHERE ex.k = ?")
        }
    }
}

/// A random cached query over `ex` whose parameter is a column other than `k` (text under a
/// case-insensitive collation, DECIMAL, DATE, INT UNSIGNED, BIGINT), and the literals to read
/// it with: the column's values and, for the text, spellings of them the collation finds
/// equal (`'A '` for `'a'`, `'SS'`, `'e '`), so that a read with one spelling must find the
/// rows of every other.
pub fn random_keyed_query(rng: &mut Rng) -> (String, Vec<&'static str>) {
    let (column, pool): (&str, &[&'static str]) = match rng.below(5) {
        0 | 1 => ("s", EX_POOLS[4]),
        2 => ("d", EX_POOLS[3]),
        3 => ("dt", EX_POOLS[6]),
        _ => (["u", "b"][rng.below(2) as usize], EX_POOLS[1 + rng.below(2) as usize]),
    };
    let pool = if column == "b" { EX_POOLS[2] } else { pool };
    let mut keys: Vec<&'static str> = pool.iter().copied().filter(|l| *l != "NULL").collect();
    if column == "s" {
        keys.extend(["'A '", "'SS'", "'e '", "'ABC'"]);
    }
    let sql = match rng.below(4) {
        0 => format!("SELECT id, {} FROM ex WHERE {column} = ?", random_expr(rng, 1)),
        1 => format!("SELECT {column}, COUNT(*), MAX(i), MIN(s) FROM ex WHERE {column} = ? GROUP BY {column}"),
        2 => format!("SELECT ex.id, ey.id, ey.w FROM ex JOIN ey ON ey.w = ex.s WHERE ex.{column} = ?"),
        _ => format!("SELECT id, k FROM ex WHERE {column} = ? ORDER BY id DESC LIMIT 2"),
    };
    (sql, keys)
}

/// Whether `ours` are the rows `theirs` are, by `same` (a row of ours and one of theirs): in
/// order for an ordered query, as multisets otherwise (each of ours matched to one of theirs).
pub fn same_rows<A, B>(ours: &[A], theirs: &[B], ordered: bool, same: impl Fn(&A, &B) -> bool) -> bool {
    if ours.len() != theirs.len() {
        return false;
    }
    if ordered {
        return ours.iter().zip(theirs).all(|(o, t)| same(o, t));
    }
    let mut used = vec![false; theirs.len()];
    ours.iter().all(|o| match (0..theirs.len()).find(|&i| !used[i] && same(o, &theirs[i])) {
        Some(i) => {
            used[i] = true;
            true
        }
        None => false,
    })
}
