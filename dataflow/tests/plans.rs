//! Query shapes as the proxy matches them: `same_plan` (two texts, literals replaced by `?`,
//! are the same view), `same_plan_except_arity` with `Reader::lookup_in` (an `IN (...)` read
//! answered from a `= ?` view, checked against the view compiled from the IN text and a
//! from-scratch evaluation on random data), and what must not be merged across keys.

use freshet_dataflow::eval::eval;
use freshet_dataflow::expr::{Expr, Repr};
use freshet_dataflow::plan::Node;
use freshet_dataflow::*;

use freshet_testkit::catalog::news as catalog;
use freshet_testkit::rng::Rng;

fn q(sql: &str) -> CompiledQuery {
    compile(sql, &catalog()).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[test]
fn qualified_aliased_and_flipped_names_compile_to_one_plan() {
    let base = q("SELECT id, title FROM stories WHERE id = ?");
    for other in [
        "SELECT stories.id, stories.title FROM stories WHERE stories.id = ?",
        "select s.id, s.title from stories s where s.id = ?",
        "SELECT s.id, title FROM stories AS s WHERE id = ?",
        "SELECT id, title FROM stories WHERE ? = id",
        "SELECT `id`, `title` FROM `stories` WHERE `id` = ?",
    ] {
        assert!(base.same_plan(&q(other)), "{other}: {:?} vs {:?}", base, q(other));
    }
    assert_eq!(base.columns, vec!["id", "title"]);
    // Joins and aggregates, qualified by table name or by alias.
    let a = q("SELECT comments.id, users.name FROM comments JOIN users ON users.id = comments.author_id WHERE comments.story_id = ?");
    let b = q("SELECT c.id, u.name FROM comments c JOIN users u ON u.id = c.author_id WHERE c.story_id = ?");
    assert!(a.same_plan(&b));
    let a = q("SELECT story_id, COUNT(*) FROM votes WHERE story_id = ? GROUP BY story_id");
    let b = q("SELECT v.story_id, COUNT(*) FROM votes v WHERE v.story_id = ? GROUP BY v.story_id");
    assert!(a.same_plan(&b));
}

#[test]
fn different_shapes_are_different_plans() {
    let base = q("SELECT id, title FROM stories WHERE id = ?");
    for other in [
        // Result column names differ.
        "SELECT id AS x, title FROM stories WHERE id = ?",
        "SELECT ID, title FROM stories WHERE id = ?",
        // Columns, their order, filters, parameters, ordering, limits.
        "SELECT id FROM stories WHERE id = ?",
        "SELECT title, id FROM stories WHERE id = ?",
        "SELECT id, title FROM stories WHERE id = ? AND author_id = ?",
        "SELECT id, title FROM stories WHERE author_id = ?",
        "SELECT id, title FROM stories WHERE id = ? AND title = 'x'",
        "SELECT id, title FROM stories WHERE id IN (?, ?)",
        "SELECT id, title FROM stories WHERE id = ? ORDER BY title",
        "SELECT id, title FROM stories WHERE id = ? ORDER BY title LIMIT 2",
        "SELECT DISTINCT id, title FROM stories WHERE id = ?",
    ] {
        assert!(!base.same_plan(&q(other)), "{other}");
    }
    let lim = |n| q(&format!("SELECT id FROM comments WHERE story_id = ? ORDER BY id LIMIT {n}"));
    assert!(!lim(2).same_plan(&lim(3)));
    assert!(lim(2).same_plan(&lim(2)));
}

#[test]
fn in_lists_match_equalities_only_when_mergeable() {
    let pairs = [
        ("SELECT id, title FROM stories WHERE id = ?", "SELECT id, title FROM stories WHERE id IN (?, ?, ?)"),
        (
            "SELECT story_id, COUNT(*) FROM votes WHERE story_id = ? GROUP BY story_id",
            "SELECT story_id, COUNT(*) FROM votes WHERE story_id IN (?, ?) GROUP BY story_id",
        ),
        (
            "SELECT id, body FROM comments WHERE story_id = ? AND id > ? ORDER BY id",
            "SELECT id, body FROM comments WHERE story_id IN (?, ?, ?) AND id > ? ORDER BY id",
        ),
        (
            "SELECT id, body FROM comments WHERE id > ? AND story_id = ? AND author_id = ?",
            "SELECT id, body FROM comments WHERE id > ? AND story_id IN (?, ?) AND author_id IN (?, ?, ?)",
        ),
    ];
    for (eq, inl) in pairs {
        let (e, i) = (q(eq), q(inl));
        assert!(e.mergeable && i.mergeable, "{eq}");
        assert!(e.same_plan_except_arity(&i) && i.same_plan_except_arity(&e), "{eq} / {inl}");
        assert!(!e.same_plan(&i));
        assert!(e.same_plan_except_arity(&e));
    }
    // Different filters, columns or key columns.
    let e = q("SELECT id, title FROM stories WHERE id = ?");
    for other in [
        "SELECT id FROM stories WHERE id IN (?, ?)",
        "SELECT id, title FROM stories WHERE author_id IN (?, ?)",
        "SELECT id, title FROM stories WHERE id IN (?, ?) AND author_id = ?",
    ] {
        assert!(!e.same_plan_except_arity(&q(other)), "{other}");
    }
    // A range filter on another column is a different plan.
    let e = q("SELECT id, body FROM comments WHERE story_id = ? AND id > ?");
    assert!(!e.same_plan_except_arity(&q("SELECT id, body FROM comments WHERE story_id IN (?, ?) AND id < ?")));

    // Shapes whose per-key results must not be merged: MySQL applies LIMIT to the whole IN
    // result, and an aggregate without GROUP BY key is one row for all keys. Compile refuses
    // them with an IN list; their `=` views are not mergeable, so no arity may differ.
    for eq in [
        "SELECT id, body FROM comments WHERE story_id = ? ORDER BY id DESC LIMIT 3",
        "SELECT COUNT(*) FROM votes WHERE story_id = ?",
        "SELECT user_id, COUNT(*) FROM votes WHERE story_id = ? GROUP BY user_id",
        "SELECT DISTINCT author_id FROM comments WHERE story_id = ?",
        "SELECT id FROM comments WHERE story_id = ? ORDER BY author_id",
    ] {
        let e = q(eq);
        assert!(!e.mergeable, "{eq}");
        let inl = eq.replace("= ?", "IN (?, ?, ?)");
        assert!(compile(&inl, &catalog()).is_err(), "{inl}");
        // A one-element IN list is the same query.
        let one = q(&eq.replace("= ?", "IN (?)"));
        assert!(e.same_plan_except_arity(&one), "{eq}");
        let mut forged = e.clone();
        forged.param_slots = vec![vec![0, 1, 2]];
        forged.n_params = 3;
        assert!(!e.same_plan_except_arity(&forged), "{eq}");
        assert!(!forged.same_plan_except_arity(&e), "{eq}");
    }
}

fn int(i: i64) -> Value {
    Value::Int(i)
}
fn text(s: &str) -> Value {
    Value::text(s, Collation::Utf8mb4GeneralCi)
}

fn read(df: &mut Dataflow, store: &MemStore, replica: bool, f: impl Fn(&Reader) -> Result<Lookup, LookupError>, r: &Reader) -> Vec<Row> {
    for _ in 0..3 {
        match f(r).unwrap() {
            Lookup::Hit(rows) => return rows.iter().map(|r| Row::from(r.to_vec())).collect::<Vec<Row>>(),
            Lookup::Miss(_) if replica => {
                df.run_fills(&mut MemReplica { store }).unwrap();
            }
            Lookup::Miss(_) => {
                df.run_fills(&mut MemUpstream { store }).unwrap();
            }
        }
    }
    panic!("still missing after fills");
}

/// Random writes; `lookup_in` on the `=` view must return exactly (row order included, when
/// the query orders) what the view compiled from the IN text returns, and what a
/// from-scratch evaluation of the IN query returns.
#[test]
fn lookup_in_on_an_equality_view_equals_the_in_view() {
    // (`=` text, IN text with three `?` per IN list)
    let shapes = [
        ("SELECT id, title FROM stories WHERE id = ?", "SELECT id, title FROM stories WHERE id IN (?, ?, ?)"),
        (
            "SELECT id, author_id, body FROM comments WHERE story_id = ? ORDER BY author_id DESC, id",
            "SELECT id, author_id, body FROM comments WHERE story_id IN (?, ?, ?) ORDER BY author_id DESC, id",
        ),
        (
            "SELECT story_id, COUNT(*), MAX(user_id) FROM votes WHERE story_id = ? GROUP BY story_id ORDER BY 2 DESC",
            "SELECT story_id, COUNT(*), MAX(user_id) FROM votes WHERE story_id IN (?, ?, ?) GROUP BY story_id ORDER BY 2 DESC",
        ),
        (
            "SELECT comments.id, users.name FROM comments JOIN users ON users.id = comments.author_id WHERE comments.story_id = ? ORDER BY comments.id",
            "SELECT c.id, u.name FROM comments c JOIN users u ON u.id = c.author_id WHERE c.story_id IN (?, ?, ?) ORDER BY c.id",
        ),
        (
            "SELECT id, story_id FROM comments WHERE id > ? AND story_id = ? ORDER BY id",
            "SELECT id, story_id FROM comments WHERE id > ? AND story_id IN (?, ?, ?) ORDER BY id",
        ),
        (
            "SELECT id FROM comments WHERE story_id = ? AND author_id = ?",
            "SELECT id FROM comments WHERE story_id IN (?, ?, ?) AND author_id IN (?, ?, ?)",
        ),
    ];
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    for replica in [false, true] {
        let mut df_eq = Dataflow::new(catalog(), ByteSize(1 << 30));
        let mut df_in = Dataflow::new(catalog(), ByteSize(1 << 30));
        let views: Vec<(ViewId, ViewId, CompiledQuery)> = shapes
            .iter()
            .map(|(e, i)| {
                let (qe, qi) = (q(e), q(i));
                assert!(qe.same_plan_except_arity(&qi), "{e}");
                (df_eq.install(qe), df_in.install(qi.clone()), qi)
            })
            .collect();
        let mut store = MemStore::new();
        let mut live: Vec<(&'static str, Row)> = Vec::new();
        let (mut compared, mut nonempty) = (0, 0);
        for round in 0..30u64 {
            let mut b = Batch::new(Position(round + 1));
            for _ in 0..6 {
                if !live.is_empty() && rng.below(4) == 0 {
                    let (t, r) = live.swap_remove(rng.below(live.len() as u64) as usize);
                    b.delete(t, r);
                    continue;
                }
                let (t, r): (&str, Row) = match rng.below(4) {
                    0 => ("users", vec![int(rng.below(6) as i64), text(["ann", "bob", "cy"][rng.below(3) as usize])].into()),
                    1 => ("stories", vec![int(rng.below(6) as i64), int(rng.below(6) as i64), text("t")].into()),
                    2 => {
                        ("comments", vec![int(rng.below(40) as i64), int(rng.below(6) as i64), int(rng.below(6) as i64), text("c")].into())
                    }
                    _ => ("votes", vec![int(rng.below(6) as i64), int(rng.below(6) as i64)].into()),
                };
                b.insert(t, r.clone());
                live.push((t, r));
            }
            store.apply(&b);
            df_eq.apply(&b).unwrap();
            df_in.apply(&b).unwrap();
            for (ve, vi, qi) in &views {
                // Three key values per IN list (repeats and NULLs included), plus a range.
                let mut params: Vec<Value> = (0..qi.n_params).map(|_| int(rng.below(7) as i64)).collect();
                if rng.below(5) == 0 {
                    params[qi.param_slots[0][1]] = Value::Null;
                }
                let (re, ri) = (df_eq.reader(*ve).unwrap(), df_in.reader(*vi).unwrap());
                let slots = qi.param_slots.clone();
                let got = read(&mut df_eq, &store, replica, |r| r.lookup_in(&slots, &params), &re);
                let want = read(&mut df_in, &store, replica, |r| r.lookup(&params), &ri);
                if qi.order.is_empty() {
                    let (mut g, mut w) = (got.clone(), want.clone());
                    g.sort();
                    w.sort();
                    assert_eq!(g, w, "{}", qi.sql);
                } else {
                    assert_eq!(got, want, "{} {params:?}", qi.sql);
                }
                // And the IN query evaluated from scratch, for the same keys.
                let mut keys: Vec<Vec<Value>> = vec![vec![]];
                for s in &qi.param_slots {
                    let vals: Vec<Value> = s.iter().map(|&i| params[i].clone()).filter(|v| !v.is_null()).collect();
                    keys = keys.iter().flat_map(|k| vals.iter().map(move |v| [k.clone(), vec![v.clone()]].concat())).collect();
                }
                let keys: std::collections::HashSet<Key> = keys.into_iter().map(Vec::into_boxed_slice).collect();
                let mut oracle: Vec<Row> = if keys.is_empty() { vec![] } else { eval(&qi.root, &store, Some(&keys)).into_iter().collect() };
                let mut g: Vec<Row> = got.clone();
                if !qi.read_filters.is_empty() {
                    // The oracle row is the root's: apply the range filter (`id > ?`) here.
                    let f = &qi.read_filters[0];
                    let bound = &params[f.param];
                    oracle.retain(|r| !r[f.column].is_null() && !bound.is_null() && r[f.column] > *bound);
                }
                let mut oracle: Vec<Row> = oracle.into_iter().map(|r| r[..qi.visible].to_vec().into()).collect();
                oracle.sort();
                g.sort();
                assert_eq!(g, oracle, "{} {params:?}", qi.sql);
                compared += 1;
                nonempty += usize::from(!got.is_empty());
            }
        }
        assert!(compared >= 100 && nonempty >= compared / 2, "{nonempty} of {compared} non-empty");
    }
}

#[test]
fn lookup_in_refuses_what_it_cannot_merge() {
    let mut df = Dataflow::new(catalog(), ByteSize(1 << 30));
    let top = df.install_sql("SELECT id, body FROM comments WHERE story_id = ? ORDER BY id DESC LIMIT 2").unwrap();
    let count = df.install_sql("SELECT COUNT(*) FROM votes WHERE story_id = ?").unwrap();
    let store = MemStore::new();
    for v in [top, count] {
        let r = df.reader(v).unwrap();
        assert_eq!(r.lookup_in(&[vec![0, 1, 2]], &[int(1), int(2), int(3)]).unwrap_err(), LookupError::NotMergeable);
        // One distinct key is a plain lookup.
        let got = read(&mut df, &store, false, |r| r.lookup_in(&[vec![0, 1]], &[int(1), int(1)]), &r);
        let want = read(&mut df, &store, false, |r| r.lookup(&[int(1)]), &r);
        assert_eq!(got, want);
    }
    let r = df.reader(top).unwrap();
    assert_eq!(r.lookup_in(&[vec![0, 0]], &[int(1)]).unwrap_err(), LookupError::ParamSlots);
    assert_eq!(r.lookup_in(&[vec![]], &[]).unwrap_err(), LookupError::ParamSlots);
    assert_eq!(r.lookup_in(&[vec![3]], &[int(1)]).unwrap_err(), LookupError::ParamSlots);
    assert_eq!(r.lookup_in(&[vec![0], vec![1]], &[int(1), int(2)]).unwrap_err(), LookupError::ParamSlots);
    assert!(matches!(r.lookup_in(&[vec![0]], &[int(1), int(2)]).unwrap_err(), LookupError::ParamCount { .. }));
}

#[test]
fn a_null_key_on_an_ungrouped_aggregate_is_relayed_not_answered_empty() {
    let mut df = Dataflow::new(catalog(), ByteSize(1 << 30));
    let count = df.install_sql("SELECT COUNT(*) FROM votes WHERE story_id = ?").unwrap();
    let grouped = df.install_sql("SELECT story_id, COUNT(*) FROM votes WHERE story_id = ? GROUP BY story_id").unwrap();
    // MySQL answers `COUNT(*) ... WHERE story_id = NULL` with one row, 0.
    let r = df.reader(count).unwrap();
    assert_eq!(r.lookup(&[Value::Null]).unwrap_err(), LookupError::NullKey);
    assert_eq!(r.lookup_in(&[vec![0, 1]], &[Value::Null, Value::Null]).unwrap_err(), LookupError::NullKey);
    // Grouped, no group matches: no rows, as MySQL.
    let Lookup::Hit(rows) = df.reader(grouped).unwrap().lookup(&[Value::Null]).unwrap() else { panic!("miss") };
    assert!(rows.is_empty());
}

/// Asserts that each of `ok` compiles against `catalog` and each of `refused` does not.
/// An integer literal in GROUP BY or ORDER BY, parenthesised or not, is a select-list position
/// to the server (`GROUP BY 1` groups by the first column); a negative one is its error
/// `Unknown column '-1'`, and a position naming an aggregate is `Can't group on`.
#[test]
fn group_by_and_order_by_positions_name_select_items() {
    for (position, named) in [
        (
            "SELECT title, COUNT(*) FROM stories WHERE author_id = ? GROUP BY 1",
            "SELECT title, COUNT(*) FROM stories WHERE author_id = ? GROUP BY title",
        ),
        (
            "SELECT title, COUNT(*) FROM stories WHERE author_id = ? GROUP BY (1)",
            "SELECT title, COUNT(*) FROM stories WHERE author_id = ? GROUP BY title",
        ),
        (
            "SELECT id, title FROM stories WHERE author_id = ? ORDER BY (2) DESC LIMIT 3",
            "SELECT id, title FROM stories WHERE author_id = ? ORDER BY title DESC LIMIT 3",
        ),
    ] {
        assert!(q(position).same_plan(&q(named)), "{position}: {:?}\nvs {:?}", q(position).root, q(named).root);
    }
    compiles_only(
        &catalog(),
        &[],
        &[
            "SELECT title, COUNT(*) FROM stories WHERE author_id = ? GROUP BY 2",
            "SELECT title, COUNT(*) FROM stories WHERE author_id = ? GROUP BY 3",
            "SELECT title, COUNT(*) FROM stories WHERE author_id = ? GROUP BY -1",
            "SELECT id, title FROM stories WHERE author_id = ? ORDER BY -1 LIMIT 3",
            "SELECT id, title FROM stories WHERE author_id = ? ORDER BY (3) LIMIT 3",
        ],
    );
}

/// A view matches join keys by their values; the server compares two columns of different
/// kinds by a conversion (`'42' = 42` and `'x' = 0` as numbers), so such a join is refused.
#[test]
fn joins_of_columns_the_server_compares_by_a_conversion_are_refused() {
    let mut c = catalog();
    let col = |n: &str, ty: SqlType| ColumnSchema::new(n, ty);
    c.add(TableSchema::new(
        "tags",
        vec![
            col("id", SqlType::Int { bytes: 8, unsigned: false }),
            col("label", SqlType::Text).with_collation(Some(Collation::Utf8mb4Bin)),
            col("price", SqlType::Decimal { precision: 8, scale: 2 }),
            col("day", SqlType::Date),
            col("at", SqlType::DateTime { fsp: 0 }),
        ],
        vec![0],
    ))
    .unwrap();
    compiles_only(
        &c,
        &[
            "SELECT stories.id, comments.id FROM stories JOIN comments ON comments.story_id = stories.id WHERE stories.id = ?",
            "SELECT stories.id, tags.id FROM stories JOIN tags ON tags.price = stories.author_id WHERE stories.id = ?",
            "SELECT users.id, stories.id FROM users JOIN stories ON stories.title = users.name WHERE users.id = ?",
            "SELECT t1.id, t2.id FROM tags t1 JOIN tags t2 ON t2.day = t1.day WHERE t1.id = ?",
        ],
        &[
            "SELECT stories.id, comments.id FROM stories JOIN comments ON comments.body = stories.id WHERE stories.id = ?",
            "SELECT stories.id, tags.id FROM stories LEFT JOIN tags ON tags.label = stories.title WHERE stories.id = ?",
            "SELECT stories.id, tags.id FROM stories JOIN tags ON tags.day = stories.title WHERE stories.id = ?",
            "SELECT t1.id, t2.id FROM tags t1 JOIN tags t2 ON t2.at = t1.day WHERE t1.id = ?",
        ],
    );
}

fn compiles_only(catalog: &Catalog, ok: &[&str], refused: &[&str]) {
    for sql in ok {
        compile(sql, catalog).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    for sql in refused {
        assert!(compile(sql, catalog).is_err(), "{sql} compiled");
    }
}

/// The SQL of the capped (top-k) fill `EXPLAIN CACHE` shows for `sql`.
fn capped_fill(sql: &str, catalog: &Catalog) -> String {
    let explained = explain_sql(sql, catalog).unwrap();
    explained.into_iter().find(|l| l.1.contains("freshet_rn")).expect("a capped fill").1
}

/// The dataflow holds an ENUM as its index and a SET as its bit mask; the server agrees with
/// that for some uses only, and compares or renders them as strings elsewhere (`LIKE`, `<`,
/// `BETWEEN`, `MIN`, `CONCAT`, a join with another column, a SET against a string). Those
/// queries are refused, so they are relayed; the uses both agree on still compile.
#[test]
fn enum_and_set_columns_compile_only_where_an_index_means_what_the_server_means() {
    let int = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 4, unsigned: false });
    let labelled = |n: &str, ty: SqlType| ColumnSchema::new(n, ty).with_collation(Some(Collation::Utf8mb4GeneralCi));
    let labels = || vec!["small".to_string(), "large".to_string()];
    let mut catalog = Catalog::new();
    catalog
        .add(TableSchema::new(
            "t",
            vec![
                int("id"),
                int("k"),
                labelled("e", SqlType::Enum(labels())),
                labelled("s", SqlType::Set(labels())),
                ColumnSchema::new("name", SqlType::Text),
            ],
            vec![0],
        ))
        .unwrap();
    catalog.add(TableSchema::new("u", vec![int("id"), labelled("e", SqlType::Enum(labels()))], vec![0])).unwrap();
    let ok = [
        "SELECT id, e, s FROM t WHERE k = ?",
        "SELECT id FROM t WHERE k = ? AND e = 'small'",
        "SELECT id FROM t WHERE k = ? AND e IN ('small', 'LARGE')",
        "SELECT id FROM t WHERE k = ? AND e <> 'large'",
        "SELECT id FROM t WHERE e = ?",
        "SELECT e, COUNT(*) FROM t WHERE k = ? GROUP BY e",
        "SELECT id FROM t WHERE k = ? ORDER BY e, id LIMIT 3",
        "SELECT id FROM t WHERE k = ? AND s IS NULL",
    ];
    // A top-k's fill breaks ties by a text column's bytes, and by an ENUM's index as it is
    // (its bytes would be its label's, in another order than the view's).
    let fill = capped_fill("SELECT id, e, name FROM t WHERE k = ? ORDER BY id LIMIT 2", &catalog);
    // Its rows are (id, e, name, k): the ENUM c1 as it is, the text c2 by its bytes.
    assert!(fill.contains("ORDER BY c0, c0, c1, CAST(c2 AS BINARY), c3)"), "{fill}");
    // A number computed from text is a number: its bytes would order 10 before 9.
    let fill = capped_fill("SELECT id, CHAR_LENGTH(name) AS n FROM t WHERE k = ? ORDER BY id LIMIT 2", &catalog);
    assert!(!fill.contains("CAST("), "{fill}");
    // Text computed from text is text: its rows equal under the collation are apart in the
    // view, so the fill breaks their ties by bytes.
    let fill = capped_fill("SELECT id, CONCAT(name, '!') AS x FROM t WHERE k = ? ORDER BY id LIMIT 2", &catalog);
    assert!(fill.contains("ORDER BY c0, c0, CAST(c1 AS BINARY), c2)"), "{fill}");
    let refused = [
        "SELECT id FROM t WHERE k = ? AND e LIKE 'sm%'",
        "SELECT id FROM t WHERE k = ? AND e < 'small'",
        "SELECT id FROM t WHERE k = ? AND e BETWEEN 'a' AND 'm'",
        "SELECT id FROM t WHERE k = ? AND e = name",
        "SELECT id FROM t WHERE k = ? AND e = 1",
        "SELECT id FROM t WHERE k = ? AND s = 'small'",
        "SELECT id FROM t WHERE k = ? AND s IN ('small')",
        "SELECT CONCAT(e, '!') FROM t WHERE k = ?",
        "SELECT UPPER(s) FROM t WHERE k = ?",
        "SELECT k, MIN(e) FROM t WHERE k = ? GROUP BY k",
        "SELECT k, MAX(s) FROM t WHERE k = ? GROUP BY k",
        "SELECT t.id FROM t JOIN u ON u.e = t.e WHERE t.k = ?",
        "SELECT id FROM t WHERE e > ?",
    ];
    compiles_only(&catalog, &ok, &refused);
}

/// SUM and AVG of floating-point values are refused: their result depends on the order of
/// addition (`proxy/tests/cached/types.rs`, `sums_of_doubles_are_the_servers`); MIN, MAX and COUNT
/// of them, and sums of exact numbers, compile. ROUND of a DOUBLE (or of a string, a DOUBLE
/// to the server) is too: the server types it with fixed digits, and where it holds values
/// (DISTINCT, a grouping's temporary table) `ROUND(1e300)` is 1e17.
#[test]
fn sums_and_rounds_of_floating_point_values_are_refused() {
    let mut catalog = Catalog::new();
    let int = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 4, unsigned: false });
    catalog
        .add(TableSchema::new(
            "f",
            vec![int("id"), int("k"), ColumnSchema::new("d", SqlType::Double), ColumnSchema::new("r", SqlType::Float)],
            vec![0],
        ))
        .unwrap();
    let ok = [
        "SELECT k, MIN(d), MAX(r), COUNT(d) FROM f WHERE k = ? GROUP BY k",
        "SELECT k, SUM(id), AVG(id * 2) FROM f WHERE k = ? GROUP BY k",
        "SELECT id, ROUND(id * 1.5) FROM f WHERE k = ?",
    ];
    let refused = [
        "SELECT k, SUM(d) FROM f WHERE k = ? GROUP BY k",
        "SELECT k, AVG(r) FROM f WHERE k = ? GROUP BY k",
        "SELECT k, SUM(d + id) FROM f WHERE k = ? GROUP BY k",
        "SELECT k, SUM(id * 1e0) FROM f WHERE k = ? GROUP BY k",
        "SELECT id, ROUND(d) FROM f WHERE k = ?",
        "SELECT DISTINCT ROUND(d, 2) FROM f WHERE k = ?",
        "SELECT k, MAX(ROUND(r)) FROM f WHERE k = ? GROUP BY k",
        "SELECT id, ROUND('2.5') FROM f WHERE k = ?",
    ];
    compiles_only(&catalog, &ok, &refused);
}

/// Floating-point arithmetic may overflow a DOUBLE, which is the server's error 1690 ("DOUBLE
/// value is out of range"), and a view has no error to answer with: an audit inserted 1e308
/// into a cached partition of `d * 2` and read NULL where the server refuses. Refused in the
/// select list and in a filter, for FLOAT and DOUBLE columns, float literals and strings (a
/// string in arithmetic is a DOUBLE); the values themselves, and their negation, compile.
#[test]
fn floating_point_arithmetic_is_refused() {
    let mut catalog = Catalog::new();
    let int = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 4, unsigned: false });
    catalog
        .add(TableSchema::new(
            "f",
            vec![
                int("id"),
                int("k"),
                ColumnSchema::new("d", SqlType::Double),
                ColumnSchema::new("r", SqlType::Float),
                ColumnSchema::new("s", SqlType::Text),
            ],
            vec![0],
        ))
        .unwrap();
    let ok = ["SELECT id, d, -d, r FROM f WHERE k = ?", "SELECT id, k * 2, id / 3 FROM f WHERE k = ? AND d > 1"];
    let refused = [
        "SELECT id, d * 2 FROM f WHERE k = ?",
        "SELECT id, r * 1e300 FROM f WHERE k = ?",
        "SELECT id, id * 1e300 FROM f WHERE k = ?",
        "SELECT id, d / 0.5 FROM f WHERE k = ?",
        "SELECT id FROM f WHERE k = ? AND d + d > 1",
        "SELECT id, s * 10 FROM f WHERE k = ?",
    ];
    compiles_only(&catalog, &ok, &refused);
}

/// DECIMAL arithmetic whose result may need more digits than a view's DECIMAL holds (28) is
/// refused (`proxy/tests/cached/types.rs`, `decimal_arithmetic_past_28_digits_is_the_servers`);
/// the usual money arithmetic compiles.
#[test]
fn decimal_arithmetic_past_28_digits_is_refused() {
    let mut catalog = Catalog::new();
    let col = |n: &str, ty: SqlType| ColumnSchema::new(n, ty);
    catalog
        .add(TableSchema::new(
            "w",
            vec![
                col("id", SqlType::Int { bytes: 4, unsigned: false }),
                col("qty", SqlType::Int { bytes: 4, unsigned: false }),
                col("big", SqlType::Int { bytes: 8, unsigned: false }),
                col("price", SqlType::Decimal { precision: 10, scale: 2 }),
                col("d", SqlType::Decimal { precision: 20, scale: 6 }),
            ],
            vec![0],
        ))
        .unwrap();
    let ok = [
        "SELECT id, price * qty, price + d, d * 2, price / 3, ROUND(price * 1.5, 2) FROM w WHERE id = ?",
        "SELECT id, qty * qty FROM w WHERE id = ?",
        "SELECT id FROM w WHERE id = ? AND price * qty > 100",
    ];
    let refused = [
        "SELECT id, d * d FROM w WHERE id = ?",
        "SELECT id, big * price FROM w WHERE id = ?",
        "SELECT id FROM w WHERE id = ? AND d * d > 1",
        "SELECT id, IF(qty > 1, d * price, 0) FROM w WHERE id = ?",
    ];
    compiles_only(&catalog, &ok, &refused);
}

/// A SUM holds the digits of its argument and those of the number of rows it adds: a SUM of a
/// DECIMAL(27,9) passed a view's 28 digits after 93 rows of 10^18 and was NULL where the
/// server answers its 29 digits (an audit). A partition adds fewer than 10^9 rows, so a SUM
/// of an argument of more than 19 digits is refused; money and BIGINT sums compile.
#[test]
fn sums_that_may_pass_28_digits_are_refused() {
    let mut catalog = Catalog::new();
    let col = |n: &str, ty: SqlType| ColumnSchema::new(n, ty);
    catalog
        .add(TableSchema::new(
            "s",
            vec![
                col("id", SqlType::Int { bytes: 4, unsigned: false }),
                col("k", SqlType::Int { bytes: 4, unsigned: false }),
                col("big", SqlType::Int { bytes: 8, unsigned: false }),
                col("price", SqlType::Decimal { precision: 19, scale: 4 }),
                col("wide", SqlType::Decimal { precision: 27, scale: 9 }),
                col("twenty", SqlType::Decimal { precision: 20, scale: 0 }),
            ],
            vec![0],
        ))
        .unwrap();
    let ok = [
        "SELECT k, SUM(price), SUM(big), SUM(id) FROM s WHERE k = ? GROUP BY k",
        "SELECT k, MAX(wide), COUNT(wide) FROM s WHERE k = ? GROUP BY k",
    ];
    let refused = [
        "SELECT k, SUM(wide) FROM s WHERE k = ? GROUP BY k",
        "SELECT k, SUM(twenty) FROM s WHERE k = ? GROUP BY k",
        "SELECT k, SUM(price * 10) FROM s WHERE k = ? GROUP BY k",
    ];
    compiles_only(&catalog, &ok, &refused);
}

/// Integer arithmetic whose result may leave the range of its type (BIGINT, or BIGINT
/// UNSIGNED when an operand is UNSIGNED, YEAR or BIT) is the server's error, so it is refused
/// (`proxy/tests/cached/types.rs`, `integer_arithmetic_out_of_range_is_the_servers_error`); what
/// stays in range compiles. Checked on MariaDB 10.11 with rows at each column's ends: every
/// refused line but two is an error there for some row; `ROUND(ubig, -1)` answers
/// 18446744073709551620, which a view's integers do not hold, and `qty DIV 1e0` is refused
/// because a DOUBLE's quotient is not bounded. No accepted line is an error.
#[test]
fn integer_arithmetic_that_may_leave_its_range_is_refused() {
    let mut catalog = Catalog::new();
    let col = |n: &str, ty: SqlType| ColumnSchema::new(n, ty);
    let int = |bytes, unsigned| SqlType::Int { bytes, unsigned };
    catalog
        .add(TableSchema::new(
            "r",
            vec![
                col("id", int(4, false)),
                col("qty", int(4, false)),
                col("stock", int(4, true)),
                col("tiny", int(1, true)),
                col("big", int(8, false)),
                col("ubig", int(8, true)),
                col("y", SqlType::Year),
                col("flags", SqlType::Bit { bits: 8 }),
                col("price", SqlType::Decimal { precision: 10, scale: 2 }),
            ],
            vec![0],
        ))
        .unwrap();
    let ok = [
        "SELECT id, qty + 1, qty - 1, qty * qty, stock * stock, stock + 1, -qty, -stock, ABS(qty) FROM r WHERE id = ?",
        "SELECT id, stock DIV 2, stock % 7, qty DIV -1, tiny * 2 FROM r WHERE id = ?",
        "SELECT id, IF(qty > 0, stock, -1) - 5, COALESCE(stock, 0) - 1, CASE WHEN qty > 0 THEN stock ELSE qty END - 1 FROM r WHERE id = ?",
        "SELECT id, ROUND(stock), FLOOR(qty) - 1, ROUND(qty, -2), LENGTH(id) - 5, y + 1, price - 1 FROM r WHERE id = ?",
        "SELECT id FROM r WHERE id = ? AND qty - 10 > 0",
        "SELECT qty, COUNT(*) + 1, COUNT(*) * 2, MAX(qty) - 1 FROM r WHERE qty = ? GROUP BY qty",
        "SELECT id, stock - 1 FROM r WHERE id = ? AND stock > 0",
        "SELECT id, price DIV 0.25, qty DIV 2.5 FROM r WHERE id = ?",
    ];
    let refused = [
        "SELECT id, stock - 1 FROM r WHERE id = ?",
        "SELECT id, tiny - qty FROM r WHERE id = ?",
        "SELECT id, stock * -1 FROM r WHERE id = ?",
        "SELECT id, qty * stock FROM r WHERE id = ?",
        "SELECT id, big + 1 FROM r WHERE id = ?",
        "SELECT id, big * 2 FROM r WHERE id = ?",
        "SELECT id, ubig + 1 FROM r WHERE id = ?",
        "SELECT id, -big FROM r WHERE id = ?",
        "SELECT id, ABS(big) FROM r WHERE id = ?",
        "SELECT id, stock DIV -1 FROM r WHERE id = ?",
        "SELECT id, -5 DIV stock FROM r WHERE id = ?",
        // A divisor that may be zero: the server warns (`-5 % 0` is NULL and a warning).
        "SELECT id, -5 % stock FROM r WHERE id = ?",
        "SELECT id, qty DIV price FROM r WHERE id = ?",
        "SELECT id, price DIV 0 FROM r WHERE id = ?",
        "SELECT id, y - 3000 FROM r WHERE id = ?",
        "SELECT id, flags - 10 FROM r WHERE id = ?",
        "SELECT id, COALESCE(stock) - 1 FROM r WHERE id = ?",
        "SELECT id, NULLIF(tiny, 1) - 5 FROM r WHERE id = ?",
        "SELECT id, (stock + 0) - 5 FROM r WHERE id = ?",
        "SELECT id FROM r WHERE id = ? AND stock - 10 > 0",
        "SELECT qty, MIN(stock) - 1 FROM r WHERE qty = ? GROUP BY qty",
        "SELECT qty, MAX(tiny) - COUNT(*) FROM r WHERE qty = ? GROUP BY qty",
        "SELECT id, ROUND(ubig, -1) FROM r WHERE id = ?",
        "SELECT id, s FROM (SELECT id, stock - 1 AS s FROM r) AS d WHERE id = ?",
        "SELECT id, big DIV 0.5 FROM r WHERE id = ?",
        "SELECT id, stock DIV price FROM r WHERE id = ?",
        "SELECT id, qty DIV 1e0 FROM r WHERE id = ?",
        // A UNION ALL of a signed and an UNSIGNED integer is a DECIMAL to the server, which
        // may be narrower than the values: `1 * stock UNION ALL ROUND(9223372036854775807)`
        // answers 999999999999999999.
        "SELECT id, 1 * stock FROM r WHERE qty = 0 UNION ALL SELECT id, ROUND(9223372036854775807) FROM r WHERE qty = 1",
        "SELECT id, stock FROM r WHERE qty = 0 UNION ALL SELECT id, big FROM r WHERE qty = 1",
    ];
    compiles_only(&catalog, &ok, &refused);
    compiles_only(
        &catalog,
        &[
            "SELECT id, stock FROM r WHERE qty = 0 UNION ALL SELECT id, qty FROM r WHERE qty = 1",
            "SELECT id, big FROM r WHERE qty = 0 UNION ALL SELECT id, big FROM r WHERE qty = 1",
        ],
        &[],
    );
}

/// The server types an expression before it reads a row; where the type decides the answer and
/// a view's values would not have it, the compiler gives them that type (`Expr::Typed`) or
/// refuses the query (`compile/types.rs`, and the quotients of `compile/numbers.rs`). The
/// refused lines are one example of each rule; the rules come from expressions that answered
/// otherwise than MariaDB in `random_expressions_answer_as_the_server_answers`
/// (`dataflow/tests/mariadb.rs`).
#[test]
fn expressions_the_server_types_otherwise_are_typed_or_refused() {
    let mut catalog = Catalog::new();
    let col = |n: &str, ty: SqlType| ColumnSchema::new(n, ty);
    catalog
        .add(TableSchema::new(
            "e",
            vec![
                col("id", SqlType::Int { bytes: 4, unsigned: false }),
                col("n", SqlType::Int { bytes: 4, unsigned: false }),
                col("d", SqlType::Decimal { precision: 10, scale: 2 }),
                col("f", SqlType::Double),
                col("s", SqlType::Text),
                col("day", SqlType::Date),
                col("at", SqlType::DateTime { fsp: 3 }),
                col("tm", SqlType::Time { fsp: 0 }),
                col("vb", SqlType::Bytes),
                col("bt", SqlType::Bit { bits: 8 }),
                col("wide", SqlType::Decimal { precision: 28, scale: 26 }),
                col("big", SqlType::Decimal { precision: 24, scale: 0 }),
            ],
            vec![0],
        ))
        .unwrap();
    let ok = [
        // An AVG of 24 digits has its four more decimals in a view's 28.
        "SELECT n, AVG(big) FROM e WHERE n = ? GROUP BY n",
        // A BIT is a number to arithmetic and comparisons.
        "SELECT id, bt + 0, bt = 65, IFNULL(bt, 0), bt BETWEEN 1 AND 70 FROM e WHERE id = ?",
        "SELECT id, YEAR(at), MONTH(at), DAY(day), DATE(at), tm FROM e WHERE id = ?",
        "SELECT id, COALESCE(d, 0), IF(n > 1, d, n), ROUND(d, 3), ROUND(d, 1), IFNULL(f, 0.5), CASE WHEN n > 0 THEN d END FROM e WHERE id = ?",
        "SELECT id, CONCAT(COALESCE(d, 0), '!'), LENGTH(ROUND(d, 3)), COALESCE(s, ''), CONCAT(day, '') FROM e WHERE id = ?",
        "SELECT id, n / 3, d / 7, IF(n > 0, n / 3, 0), CONCAT(n / 3) FROM e WHERE id = ? AND n / 3 > 0.3333",
        "SELECT n, AVG(d), COUNT(*) FROM e WHERE n = ? GROUP BY n HAVING AVG(d) > 1",
        "SELECT id, s BETWEEN 'a' AND 'm', n BETWEEN 1 AND 5, s IN ('1', 'x'), n IN (1, '2'), day = '2024-01-01', YEAR(day) FROM e WHERE id = ?",
    ];
    let refused = [
        // A string or a date picked with a number: the server's answer is a string.
        "SELECT id, IF(n > 1, s, n) FROM e WHERE id = ?",
        "SELECT id, COALESCE(day, 0) FROM e WHERE id = ?",
        // A DOUBLE or fractional seconds shown as text: the server's own digits.
        "SELECT id, CONCAT(f) FROM e WHERE id = ?",
        "SELECT id, CONCAT(at) FROM e WHERE id = ?",
        // Numbers of dates, dates of numbers; FLOOR of a DOUBLE or string, an exact integer
        // of any size.
        "SELECT id, day + 0 FROM e WHERE id = ?",
        "SELECT id, YEAR(n) FROM e WHERE id = ?",
        // A date of a TIME: the server's is today's date plus the time (DAY(TIME '-01:00:00')
        // is yesterday's day).
        "SELECT id, DAY(tm) FROM e WHERE id = ?",
        "SELECT id, DATE(tm) FROM e WHERE id = ?",
        "SELECT id, FLOOR(f) FROM e WHERE id = ?",
        "SELECT id, CEILING(s) FROM e WHERE id = ?",
        // ROUND to a computed number of decimals; a DECIMAL remainder (a negative zero).
        "SELECT id, ROUND(d, n) FROM e WHERE id = ?",
        "SELECT id, d % 2 FROM e WHERE id = ?",
        // BETWEEN of a string and a number, compared under one type by the server.
        "SELECT id FROM e WHERE id = ? AND s BETWEEN 2 AND 'a'",
        // Of bytes and text: all three compared as bytes by the server.
        "SELECT id FROM e WHERE id = ? AND s BETWEEN vb AND 'B'",
        // A date compared with what is not one.
        "SELECT id FROM e WHERE id = ? AND day = n",
        // A TIME compared with a date: the server makes the TIME a DATETIME on today's date
        // (an audit: `tm < at` kept answering as of no date at all).
        "SELECT id FROM e WHERE id = ? AND tm < at",
        "SELECT id, tm = day FROM e WHERE id = ?",
        "SELECT id FROM e WHERE id = ? AND day IN (at, tm)",
        // A quotient used as a number again: the server keeps more decimals than it shows.
        "SELECT id, ROUND(n / 3, 2) FROM e WHERE id = ?",
        // A string read as a number: the server warns for each that is not one.
        "SELECT id, s IN (1, 'x') FROM e WHERE id = ?",
        "SELECT id FROM e WHERE id = ? AND s = 0",
        "SELECT id, n + 'a', n = '5 ', ABS(s) FROM e WHERE id = ?",
        "SELECT id FROM e WHERE id = ? AND s",
        "SELECT id, IF(s, 1, 2), CASE WHEN 'x' THEN 1 END FROM e WHERE id = ?",
        // Bytes read as a number warn as a string does (an audit: `vb < 1` answered with 0
        // warnings where the server counts 1292 for each byte string that is not a number).
        "SELECT id FROM e WHERE id = ? AND vb < 1",
        "SELECT id FROM e WHERE id = ? AND vb",
        "SELECT id, vb IN (1, 2), ABS(vb) FROM e WHERE id = ?",
        // A hex literal met by a number: `0x31` is the number 49 to MariaDB, `X'31'` the
        // string '1', and the parser writes both alike (a second audit: `v = 0x31` found v = 1).
        "SELECT id FROM e WHERE id = ? AND n = 0x31",
        "SELECT id, n = X'31', n + 0x31 FROM e WHERE id = ?",
        // A number past what the server's conversion holds: an overflow warning (1916) per
        // evaluation (an audit of the check above).
        "SELECT id, LEFT(s, 99999999999999999999) FROM e WHERE id = ?",
        "SELECT id, SUBSTRING(s, 99999999999999999999) FROM e WHERE id = ?",
        "SELECT id, RIGHT(s, -99999999999999999999) FROM e WHERE id = ?",
        "SELECT id, LEFT(s, 1e30) FROM e WHERE id = ?",
        "SELECT id, LEFT(s, '99999999999999999999') FROM e WHERE id = ?",
        "SELECT id, d = '1e400' FROM e WHERE id = ?",
        "SELECT id, n = '1e400' FROM e WHERE id = ?",
        "SELECT id, (n / 3) * 3 FROM e WHERE id = ?",
        "SELECT n, SUM(d / 3) FROM e WHERE n = ? GROUP BY n",
        "SELECT n, AVG(d) * 2 FROM e WHERE n = ? GROUP BY n",
        // An AVG has four more decimals than its argument: past a view's 28 digits it was
        // NULL where the server answers 0.5 (an audit: AVG of a DECIMAL(28,26)).
        "SELECT n, AVG(wide) FROM e WHERE n = ? GROUP BY n",
        "SELECT n, AVG(big * 10) FROM e WHERE n = ? GROUP BY n",
        // SUM of what is not an exact number: the server's conversions.
        "SELECT n, SUM(day) FROM e WHERE n = ? GROUP BY n",
        "SELECT n, AVG(s) FROM e WHERE n = ? GROUP BY n",
        "SELECT id FROM e WHERE id = ? AND n / 3",
        "SELECT id, IF(n / 3, 1, 0) FROM e WHERE id = ?",
        // NULL's arithmetic, typed by the server's own choice, picked with a column.
        "SELECT id, COALESCE(NULL + 1, d) FROM e WHERE id = ?",
        // FLOOR, CEILING, ABS, ROUND and the negation of NULL are DOUBLEs to the server, so a
        // UNION ALL of them with an integer is a DOUBLE column (9223372036854776000).
        "SELECT id, FLOOR(9223372036854775807) FROM e WHERE id = 1 UNION ALL SELECT id, FLOOR(NULL) FROM e WHERE id = 2",
        "SELECT id, n FROM e WHERE id = 1 UNION ALL SELECT id, -NULL FROM e WHERE id = 2",
        "SELECT id, n FROM e WHERE id = 1 UNION ALL SELECT id, ROUND(NULL) FROM e WHERE id = 2",
        // A BIT as a string is its bytes to the server (b'1000001' is 'A'), not its number.
        "SELECT id, CONCAT(bt) FROM e WHERE id = ?",
        "SELECT id, LENGTH(bt) FROM e WHERE id = ?",
        "SELECT id, -REPLACE(bt, 'a', 'bb') FROM e WHERE id = ?",
        "SELECT id, LEFT(bt, 1) FROM e WHERE id = ?",
        "SELECT id FROM e WHERE id = ? AND bt LIKE 'A'",
        "SELECT id, UPPER(COALESCE(bt, bt)) FROM e WHERE id = ?",
        // Bytes in a string function or LIKE: no case (UPPER leaves them), lengths in bytes,
        // a binary result; a view read them as text under a collation.
        "SELECT id, UPPER(vb) FROM e WHERE id = ?",
        "SELECT id, LENGTH(vb) FROM e WHERE id = ?",
        "SELECT id FROM e WHERE id = ? AND vb LIKE 'A'",
        "SELECT id FROM e WHERE id = ? AND CONCAT(vb, '') = 'A'",
        "SELECT id, LEFT(vb, 1) FROM e WHERE id = ?",
    ];
    compiles_only(&catalog, &ok, &refused);
    // A choice whose picks differ in decimals is given the server's (two), one between
    // integers is not wrapped, and both render for a fill as written.
    let typed = |sql: &str| {
        let q = compile(sql, &catalog).unwrap();
        let mut found = Vec::new();
        for node in q.root.post_order() {
            if let Node::Project { exprs, .. } = node {
                found.extend(exprs.iter().filter_map(|e| match e {
                    Expr::Typed(_, repr) => Some(*repr),
                    _ => None,
                }));
            }
        }
        found
    };
    assert_eq!(typed("SELECT id, COALESCE(d, 0) AS x FROM e WHERE id = ?"), [Repr::Decimal(2)]);
    assert_eq!(typed("SELECT id, ROUND(d, 3) AS x FROM e WHERE id = ?"), [Repr::Decimal(3)]);
    assert_eq!(typed("SELECT id, IFNULL(f, 0.5) AS x FROM e WHERE id = ?"), [Repr::Double]);
    assert!(typed("SELECT id, COALESCE(n, 0), ROUND(d, 1) AS x FROM e WHERE id = ?").is_empty());
    let explained = explain_sql("SELECT id, COALESCE(d, 0) AS x FROM e WHERE id = ?", &catalog).unwrap();
    assert!(explained.iter().any(|l| l.1.contains("COALESCE(")), "{explained:?}");
}

/// A query that reads a TIMESTAMP column anywhere says so (`reads_timestamp`): the server
/// reads it in the session's time zone, a view in UTC, so the proxy serves it only to
/// sessions in UTC. Reads of other columns of the same table do not.
#[test]
fn reads_of_a_timestamp_column_are_marked() {
    use freshet_testkit::catalog::int;
    let mut c = catalog();
    let ts = ColumnSchema::new("at", SqlType::Timestamp { fsp: 0 });
    let dt = ColumnSchema::new("due", SqlType::DateTime { fsp: 0 });
    c.add(TableSchema::new("events", vec![int("id", 4), int("k", 4), ts, dt], vec![0])).expect("events");
    let marked = |sql: &str| compile(sql, &c).unwrap_or_else(|e| panic!("{sql}: {e}")).reads_timestamp;
    for sql in [
        "SELECT id, at FROM events WHERE k = ?",
        "SELECT * FROM events WHERE k = ?",
        "SELECT e.* FROM events e WHERE k = ?",
        "SELECT id FROM events WHERE k = ? AND at >= '2024-01-01 01:00:00'",
        "SELECT DATE(at) AS day, COUNT(*) FROM events WHERE k = ? GROUP BY DATE(at)",
        "SELECT id FROM events WHERE k = ? ORDER BY at LIMIT 3",
        "SELECT e.id FROM events e JOIN events f ON f.at = e.at WHERE e.k = ?",
        "SELECT COUNT(at) FROM events WHERE k = ?",
    ] {
        assert!(marked(sql), "{sql}");
    }
    for sql in [
        "SELECT id, due FROM events WHERE k = ?",
        "SELECT id FROM events WHERE k = ? AND due > '2024-01-01'",
        "SELECT COUNT(*) FROM events WHERE k = ?",
    ] {
        assert!(!marked(sql), "{sql}");
    }
}

/// A query with a quotient (`/`, AVG) says so (`divides`): the server gives it
/// `div_precision_increment` more decimals, a view 4, so the proxy serves it only to sessions
/// with the default.
#[test]
fn quotients_are_marked() {
    for sql in [
        "SELECT id, author_id / 3 FROM stories WHERE id = ?",
        "SELECT story_id, AVG(user_id) FROM votes WHERE story_id = ? GROUP BY story_id",
        "SELECT id FROM stories WHERE id = ? AND author_id / 2 > 1",
    ] {
        assert!(q(sql).divides, "{sql}");
    }
    for sql in [
        "SELECT id, author_id DIV 3 FROM stories WHERE id = ?",
        "SELECT story_id, SUM(user_id) FROM votes WHERE story_id = ? GROUP BY story_id",
    ] {
        assert!(!q(sql).divides, "{sql}");
    }
}

/// Text of two collations in one comparison or one string: the server compares under the
/// `_bin` one of two columns (`uc < bs` is a binary comparison) or refuses ("Illegal mix of
/// collations"); a view compared under its first operand's. Refused; one collation, or a
/// literal meeting a column, compiles.
#[test]
fn text_of_two_collations_in_one_comparison_is_refused() {
    use freshet_testkit::catalog::int;
    let mut c = Catalog::new();
    let text = |n: &str, coll| ColumnSchema::new(n, SqlType::Text).with_collation(Some(coll));
    c.add(TableSchema::new(
        "t",
        vec![
            int("id", 4),
            int("k", 4),
            text("uc", Collation::Utf8mb4UnicodeCi),
            text("s", Collation::Utf8mb4GeneralCi),
            text("bs", Collation::Utf8mb4Bin),
            text("s2", Collation::Utf8mb4GeneralCi),
        ],
        vec![0],
    ))
    .unwrap();
    let compiles = |e: &str| compile(&format!("SELECT id, {e} FROM t WHERE k = ?"), &c).is_ok();
    for e in [
        "uc = s",
        "uc < bs",
        "NULLIF(uc, s)",
        "uc IN (s, 'a')",
        "uc LIKE s",
        "CASE uc WHEN s THEN 1 END",
        "uc BETWEEN s AND 'z'",
        "CONCAT(uc, s) = 'a'",
        "IF(k, uc, s) = 'a'",
        "COALESCE(uc, s) = s",
        "UPPER(CONCAT(uc, s))",
    ] {
        assert!(!compiles(e), "{e}");
    }
    for e in
        ["s = s2", "CONCAT(s, s2) = 'a'", "uc = 'a'", "uc LIKE 'a%'", "IF(uc = 'a', s, 'b')", "CONCAT(uc, '!')", "s BETWEEN 'a' AND s2"]
    {
        assert!(compiles(e), "{e}");
    }
}

/// Text made of literals alone (no column decides its collation) takes the session's
/// `collation_connection` on the server, general_ci in a view: a query that compares, groups,
/// orders or deduplicates such text says so (`literal_text`), and the proxy serves it only to
/// sessions on general_ci. A literal meeting a column takes the column's collation in both.
#[test]
fn text_made_of_literals_alone_is_marked() {
    use freshet_testkit::catalog::{int, text_ci};
    let mut c = Catalog::new();
    c.add(TableSchema::new("t", vec![int("id", 4), int("k", 4), int("n", 4), text_ci("s")], vec![0])).unwrap();
    let marked = |sql: &str| compile(sql, &c).unwrap_or_else(|e| panic!("{sql}: {e}")).literal_text;
    for sql in [
        "SELECT id FROM t WHERE k = ? AND CONCAT('a', n) = 'A1'",
        "SELECT CASE WHEN n > 1 THEN 'Yes' ELSE 'yes' END AS c, COUNT(*) FROM t WHERE k = ? GROUP BY c",
        "SELECT DISTINCT IF(n > 1, 'a', 'A') FROM t WHERE k = ?",
        "SELECT id FROM t WHERE k = ? ORDER BY CONCAT('x', n) LIMIT 2",
        "SELECT k, MAX(IF(n > 1, 'a', 'B')) FROM t WHERE k = ? GROUP BY k",
        "SELECT k, COUNT(DISTINCT IF(n > 1, 'a', 'A')) FROM t WHERE k = ? GROUP BY k",
        "SELECT id, CONCAT(n, 'x') LIKE 'X%' FROM t WHERE k = ?",
        // A column in a condition, or counted, decides no collation (an audit of collations:
        // these took the condition's column's and were served to utf8mb4_bin sessions).
        "SELECT id, IF(s = 'ss', 'a', 'B') AS y FROM t WHERE k = ? ORDER BY y, id",
        "SELECT COUNT(DISTINCT CASE WHEN s = 'a' THEN 'Yes' ELSE 'yes' END) FROM t WHERE k = ?",
        "SELECT CONCAT(CHAR_LENGTH(s), IF(id > 3, 'a', 'A')) AS y, COUNT(*) FROM t WHERE k = ? GROUP BY y",
    ] {
        assert!(marked(sql), "{sql}");
    }
    // Computed text takes the collation of the text it is made of, not of a column its
    // condition reads: grouped under `a`'s utf8mb4_bin, `IF(a = 'q', 'z', c)` split c's
    // general_ci groups ('A' and 'a').
    let mut two = Catalog::new();
    let bin = text_ci("a").with_collation(Some(Collation::Utf8mb4Bin));
    two.add(TableSchema::new("two", vec![int("id", 4), int("k", 4), bin, text_ci("c")], vec![0])).unwrap();
    let q = compile("SELECT IF(a = 'q', 'z', c) AS y, COUNT(*) FROM two WHERE k = ? GROUP BY y", &two).unwrap();
    let base = |t: &str, n: &str| two.column(t, n).and_then(|c| c.collation);
    assert_eq!(q.root.column_collation(0, &base), Some(Collation::Utf8mb4GeneralCi));
    for sql in [
        "SELECT id FROM t WHERE k = ? AND s = 'a'",
        "SELECT id FROM t WHERE k = ? AND n = '1'",
        "SELECT id, 'x', CONCAT('a', n) FROM t WHERE k = ?",
        "SELECT id FROM t WHERE k = ? ORDER BY CONCAT(s, 'x') LIMIT 2",
        "SELECT s, COUNT(*) FROM t WHERE k = ? GROUP BY s",
        "SELECT id FROM t WHERE k = ? AND IF(n > 1, s, 'x') = 'A'",
        "SELECT id, UPPER(s), LOWER(CONCAT(s, 'I')) FROM t WHERE k = ?",
    ] {
        assert!(!marked(sql), "{sql}");
    }
    // The case of such text is mapped under the connection's collation too (an audit:
    // `UPPER('i')` is `İ` under utf8mb4_turkish_ci, `I` in a view).
    for sql in ["SELECT id, UPPER('i') AS up FROM t WHERE k = ?", "SELECT id, LOWER(CONCAT('I', n)) FROM t WHERE k = ?"] {
        assert!(marked(sql), "{sql}");
    }
}

/// `DATE()` is NULL under NO_ZERO_DATE for a zero date, and under NO_ZERO_IN_DATE for one with
/// a zero month or day, where a view gives the date (an audit: Laravel's strict mode read
/// `2020-00-10` from the cache and NULL from the server): a query that calls it says so
/// (`converts_dates`), and the proxy serves it only to sessions without those modes.
#[test]
fn date_of_a_value_is_marked() {
    use freshet_testkit::catalog::int;
    let mut c = Catalog::new();
    c.add(TableSchema::new("t", vec![int("id", 4), int("k", 4), ColumnSchema::new("d", SqlType::DateTime { fsp: 0 })], vec![0])).unwrap();
    let marked = |sql: &str| compile(sql, &c).unwrap_or_else(|e| panic!("{sql}: {e}")).converts_dates;
    assert!(marked("SELECT id, DATE(d) FROM t WHERE k = ?"));
    assert!(marked("SELECT id FROM t WHERE k = ? AND DATE(d) IS NULL"));
    assert!(!marked("SELECT id, d, YEAR(d), MONTH(d), DAY(d) FROM t WHERE k = ?"));
    // A choice of a date converts it the same way (a second audit): COALESCE, IFNULL, IF,
    // CASE, NULLIF.
    for sql in [
        "SELECT id, COALESCE(d) FROM t WHERE k = ?",
        "SELECT id, IFNULL(d, d) FROM t WHERE k = ?",
        "SELECT id, IF(id > 0, d, d) FROM t WHERE k = ?",
        "SELECT id, CASE WHEN id > 5 THEN d ELSE d END FROM t WHERE k = ?",
        "SELECT id, NULLIF(d, d) FROM t WHERE k = ?",
        // Grouped, deduplicated or put together by UNION, a date goes through a temporary
        // table, which converts it the same way (a third audit).
        "SELECT d, COUNT(*) FROM t WHERE k = ? GROUP BY d",
        "SELECT DISTINCT d FROM t WHERE k = ?",
        "SELECT k, COUNT(DISTINCT d) FROM t WHERE k = ? GROUP BY k",
        "SELECT id, d FROM t WHERE k = 1 UNION ALL SELECT id, d FROM t WHERE k = 2",
    ] {
        assert!(marked(sql), "{sql}");
    }
}

/// A filesort orders strings by their first `max_sort_length` bytes; a view by the whole. An
/// ORDER BY (or a top-k) over a string that may be longer than 1,020 bytes is refused: a column
/// by its CHARACTER_OCTET_LENGTH, computed text by its parts.
#[test]
fn long_strings_are_not_ordered_by_a_view() {
    use freshet_testkit::catalog::{int, text_ci};
    let mut c = Catalog::new();
    let columns = vec![int("id", 4), int("k", 4), int("n", 4), text_ci("short").with_max_bytes(1020), text_ci("long").with_max_bytes(8000)];
    c.add(TableSchema::new("t", columns, vec![0])).unwrap();
    let compiles = |sql: &str| compile(sql, &c).is_ok();
    for sql in [
        "SELECT id FROM t WHERE k = ? ORDER BY short, id",
        "SELECT id, short FROM t WHERE k = ? ORDER BY short DESC LIMIT 2",
        "SELECT id FROM t WHERE k = ? ORDER BY CONCAT('x', n) LIMIT 2",
        "SELECT id FROM t WHERE k = ? ORDER BY n, id",
        "SELECT id, long FROM t WHERE k = ? ORDER BY id",
    ] {
        assert!(compiles(sql), "{sql}");
    }
    for sql in [
        "SELECT id FROM t WHERE k = ? ORDER BY long, id",
        "SELECT id, long FROM t WHERE k = ? ORDER BY long DESC LIMIT 2",
        "SELECT id FROM t WHERE k = ? ORDER BY CONCAT(short, short) LIMIT 2",
        "SELECT id FROM t WHERE k = ? ORDER BY UPPER(short)",
        "SELECT id FROM t WHERE k = ? ORDER BY REPLACE(n, '1', 'x')",
        "SELECT k, MAX(long) AS m FROM t WHERE k = ? GROUP BY k ORDER BY m",
    ] {
        assert!(!compiles(sql), "{sql}");
    }
}

/// A string function's result past the server's `max_allowed_packet` is NULL to MariaDB, with
/// warning 1301; a view computes it whole (an audit of large values: 30 copies of a 9 MiB
/// MEDIUMTEXT answered 283 MB where the server answers NULL, and a filled NULL row stayed after
/// the row was deleted). One that may pass 1 MiB is refused.
#[test]
fn string_functions_that_may_pass_a_mebibyte_are_refused() {
    use freshet_testkit::catalog::{int, text_ci};
    let mut c = Catalog::new();
    let columns = vec![int("id", 4), int("k", 4), text_ci("small").with_max_bytes(1020), text_ci("medium").with_max_bytes(16_777_215)];
    c.add(TableSchema::new("t", columns, vec![0])).unwrap();
    let compiles = |sql: &str| compile(sql, &c).is_ok();
    for sql in [
        "SELECT id, CONCAT(small, '-', small), UPPER(small), REPLACE(small, 'a', 'bb') FROM t WHERE k = ?",
        "SELECT id, medium, LEFT(medium, 10), REPLACE(medium, 'ab', 'c') FROM t WHERE k = ?",
    ] {
        assert!(compiles(sql), "{sql}");
    }
    for sql in [
        "SELECT id, CONCAT(medium, medium) FROM t WHERE k = ?",
        "SELECT id, UPPER(medium) FROM t WHERE k = ?",
        "SELECT id, REPLACE(medium, 'a', 'bb') FROM t WHERE k = ?",
        "SELECT id, REPLACE(small, small, medium) FROM t WHERE k = ?",
        "SELECT id FROM t WHERE k = ? AND CONCAT(medium, 'x') = 'y'",
        "SELECT id, LENGTH(CONCAT(medium, medium)) FROM t WHERE k = ?",
    ] {
        assert!(!compiles(sql), "{sql}");
    }
}

/// MariaDB declares FLOOR, CEILING, ROUND and ABS of an integer literal, and a DIV of one, a
/// digit narrower than the literal, and a DECIMAL choice over one as narrow:
/// `IF(c, 0.25, ABS(10))` is a DECIMAL(3,2). Where its plan keeps the value in a temporary
/// table of that type (DISTINCT, GROUP BY of it, MIN and MAX grouped without the key's index)
/// the server clips 10.00 to 9.99; where it does not, it shows 10.00. A view cannot follow the
/// plan: such a choice is refused (dataflow seed 106, and seed 68 with a 19-digit literal).
#[test]
fn a_decimal_choice_over_a_narrowed_literal_is_refused() {
    use freshet_testkit::catalog::int;
    let mut c = Catalog::new();
    c.add(TableSchema::new("t", vec![int("id", 4), int("k", 4), int("n", 4)], vec![0])).unwrap();
    let compiles = |sql: &str| compile(sql, &c).is_ok();
    for sql in [
        "SELECT id, IF(n > 0, 0.25, n) AS x FROM t WHERE k = ?",
        "SELECT id, IF(n > 0, 5, ABS(10)) AS x FROM t WHERE k = ?",
        "SELECT id, ABS(10) + 0.25 AS x FROM t WHERE k = ?",
    ] {
        assert!(compiles(sql), "{sql}");
    }
    for sql in [
        "SELECT id, IF(n > 0, 0.25, ABS(10)) AS x FROM t WHERE k = ?",
        "SELECT k, MAX(NULLIF(IF(NOT 1.5, 0.25, ABS(10)), NOT '3')) AS m FROM t WHERE k = ? GROUP BY k",
        "SELECT id, CASE WHEN n > 0 THEN 1.5 ELSE CEILING(99) END AS x FROM t WHERE k = ?",
        "SELECT id, COALESCE(NULL, FLOOR(100), 0.5) AS x FROM t WHERE k = ?",
        "SELECT id, IF(n > 0, 0.5, 100 DIV 1) AS x FROM t WHERE k = ?",
        "SELECT id, IFNULL(ROUND(1000), 2.5) AS x FROM t WHERE k = ?",
    ] {
        assert!(!compiles(sql), "{sql}");
    }
}

/// LIMIT without ORDER BY: which rows the server returns is its plan's (the index it reads, a
/// scan, a descending key), which a view does not know, so such a read is refused (an audit
/// saw other rows returned). A read whose key parameters cover its one table's primary key
/// has one row at most, whatever the plan: `find_by`'s `LIMIT 1` stays cached.
#[test]
fn a_limit_without_order_by_is_refused_unless_one_row_is_all_there_is() {
    for sql in [
        "SELECT id, body FROM comments WHERE story_id = ? LIMIT 3",
        "SELECT id, body FROM comments WHERE story_id = ? LIMIT 1",
        "SELECT id FROM comments WHERE story_id = ? LIMIT 2 OFFSET 1",
        "SELECT c.id, s.title FROM comments c JOIN stories s ON s.id = c.story_id WHERE c.id = ? LIMIT 1",
    ] {
        assert!(compile(sql, &catalog()).is_err(), "{sql}");
    }
    for sql in [
        "SELECT id, body FROM comments WHERE id = ? LIMIT 1",
        "SELECT id, title FROM stories WHERE id = ? LIMIT 5",
        "SELECT id, body FROM comments WHERE story_id = ? ORDER BY id LIMIT 3",
        "SELECT story_id, COUNT(*) FROM comments WHERE story_id = ? GROUP BY story_id LIMIT 1",
    ] {
        compile(sql, &catalog()).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}
