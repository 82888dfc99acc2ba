//! Unit tests of the operators, one partition at a time.

use super::*;
use crate::expr::Expr;
use crate::plan::AggKind;
use crate::value::Decimal;

fn base(occ: usize, width: usize) -> Node {
    Node::Base { occ, table: "t".into(), columns: (0..width).map(|i| format!("c{i}")).collect(), key: vec![0] }
}
fn r(v: &[i64]) -> Row {
    v.iter().map(|&i| Value::Int(i)).collect()
}
fn key() -> Key {
    vec![Value::Int(1)].into()
}
fn sorted(ks: &KeyState) -> Vec<Row> {
    let mut v = ks.reader_rows();
    v.sort_by_key(|a| ExactRow(a.clone()));
    v
}

#[test]
fn left_join_null_row_comes_and_goes() {
    let root = Node::Join { left: Box::new(base(0, 2)), right: Box::new(base(1, 2)), on: vec![(0, 0)], kind: JoinKind::Left };
    let g = Graph::new(&root);
    let mut ks = KeyState::empty(&g, &key(), Position(0), false);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 10]), 1)], vec![]]);
    assert_eq!(ks.reader_rows(), vec![[Value::Int(1), Value::Int(10), Value::Null, Value::Null].into()]);
    ks.process(&g, &key(), &mut [vec![], vec![(r(&[1, 20]), 1), (r(&[1, 21]), 1)]]);
    assert_eq!(sorted(&ks), vec![r(&[1, 10, 1, 20]), r(&[1, 10, 1, 21])]);
    ks.process(&g, &key(), &mut [vec![], vec![(r(&[1, 20]), -1), (r(&[1, 21]), -1)]]);
    assert_eq!(ks.reader_rows(), vec![[Value::Int(1), Value::Int(10), Value::Null, Value::Null].into()]);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 10]), -1)], vec![]]);
    assert!(ks.reader_rows().is_empty());
    assert_eq!(ks.bytes(), 0, "state bytes return to zero");
}

#[test]
fn dimension_join_holds_only_covered_keys_and_flags_uncovered_left_rows() {
    // Left: (key, author); right: a dimension (id, name) joined on author = id.
    let dim = Node::Base { occ: 1, table: "users".into(), columns: vec!["id".into(), "name".into()], key: vec![] };
    let root = Node::Join { left: Box::new(base(0, 2)), right: Box::new(dim), on: vec![(1, 0)], kind: JoinKind::Left };
    let g = Graph::new(&root);
    assert!(g.dim[g.root()]);
    let mut ks = KeyState::empty(&g, &key(), Position(0), false);
    ks.cover(g.root(), vec![Value::Int(7)].into());
    let covered_bytes = ks.bytes();
    assert!(covered_bytes > 0, "covers are charged");
    // Rows for uncovered keys are ignored; the covered one joins.
    ks.process(&g, &key(), &mut [vec![(r(&[1, 7]), 1)], vec![(r(&[7, 70]), 1), (r(&[8, 80]), 1)]]);
    assert_eq!(ks.reader_rows(), vec![r(&[1, 7, 7, 70])]);
    assert!(!ks.needs_refill);
    // A dimension row changing its join key leaves (7 -> 8): the left row is NULL-extended.
    ks.process(&g, &key(), &mut [vec![], vec![(r(&[7, 70]), -1), (r(&[8, 70]), 1)]]);
    assert_eq!(ks.reader_rows(), vec![[Value::Int(1), Value::Int(7), Value::Null, Value::Null].into()]);
    // A NULL join key needs no dimension row; an uncovered one cannot be joined here.
    ks.process(&g, &key(), &mut [vec![(vec![Value::Int(1), Value::Null].into(), 1)], vec![]]);
    assert!(!ks.needs_refill);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 9]), 1)], vec![]]);
    assert!(ks.needs_refill, "an uncovered key asks for eviction");
    assert_eq!(ks.covered().count(), 1);
}

#[test]
fn self_join_with_both_sides_changing_in_one_batch() {
    let root = Node::Join { left: Box::new(base(0, 2)), right: Box::new(base(1, 2)), on: vec![(0, 0)], kind: JoinKind::Inner };
    let g = Graph::new(&root);
    let mut ks = KeyState::empty(&g, &key(), Position(0), false);
    // The same base row reaches both occurrences of the table.
    ks.process(&g, &key(), &mut [vec![(r(&[1, 5]), 1)], vec![(r(&[1, 5]), 1)]]);
    assert_eq!(ks.reader_rows(), vec![r(&[1, 5, 1, 5])]);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 6]), 1)], vec![(r(&[1, 6]), 1)]]);
    assert_eq!(ks.reader_rows().len(), 4);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 5]), -1)], vec![(r(&[1, 5]), -1)]]);
    assert_eq!(ks.reader_rows(), vec![r(&[1, 6, 1, 6])]);
}

#[test]
fn min_max_after_deleting_extremes_and_sum_count() {
    let input = Node::Project { input: Box::new(base(0, 2)), exprs: vec![Expr::Col(0), Expr::Col(1)] };
    let root = Node::Aggregate {
        input: Box::new(input),
        group: 1,
        aggs: vec![
            AggSpec { kind: AggKind::Min, arg: 1 },
            AggSpec { kind: AggKind::Max, arg: 1 },
            AggSpec { kind: AggKind::Sum, arg: 1 },
            AggSpec { kind: AggKind::CountStar, arg: 0 },
        ],
        global: true,
    };
    let g = Graph::new(&root);
    let mut ks = KeyState::empty(&g, &key(), Position(0), false);
    let d = |v: i64| Value::Decimal(Decimal::new(v as i128, 0).unwrap_or_else(|| unreachable!()));
    ks.process(&g, &key(), &mut [vec![]]);
    assert_eq!(ks.reader_rows(), vec![[Value::Int(1), Value::Null, Value::Null, Value::Null, Value::Int(0)].into()]);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 3]), 1), (r(&[1, 9]), 1), (r(&[1, 5]), 2)]]);
    assert_eq!(ks.reader_rows(), vec![[Value::Int(1), Value::Int(3), Value::Int(9), d(22), Value::Int(4)].into()]);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 9]), -1), (r(&[1, 3]), -1)]]);
    assert_eq!(ks.reader_rows(), vec![[Value::Int(1), Value::Int(5), Value::Int(5), d(10), Value::Int(2)].into()]);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 5]), -2)]]);
    assert_eq!(ks.reader_rows(), vec![[Value::Int(1), Value::Null, Value::Null, Value::Null, Value::Int(0)].into()]);
}

/// MIN and MAX of text count each spelling apart: when the row whose spelling was shown goes,
/// the answer is a spelling a remaining row has (the server's is one of those too).
#[test]
fn min_max_of_text_show_a_spelling_a_row_has() {
    let input = Node::Project { input: Box::new(base(0, 2)), exprs: vec![Expr::Col(0), Expr::Col(1)] };
    let aggs = vec![AggSpec { kind: AggKind::Min, arg: 1 }, AggSpec { kind: AggKind::Max, arg: 1 }];
    let root = Node::Aggregate { input: Box::new(input), group: 1, aggs, global: true };
    let g = Graph::new(&root);
    let mut ks = KeyState::empty(&g, &key(), Position(0), false);
    let t = |s: &str| Value::text(s, crate::value::Collation::Utf8mb4GeneralCi);
    let row = |s: &str| -> Row { vec![Value::Int(1), t(s)].into() };
    let shown = |ks: &KeyState| -> (String, String) {
        let rows = ks.reader_rows();
        let text = |v: &Value| crate::expr::text_of(v).unwrap_or_default();
        (text(&rows[0][1]), text(&rows[0][2]))
    };
    ks.process(&g, &key(), &mut [vec![(row("B"), 1), (row("a "), 1), (row("A"), 1), (row("b"), 1)]]);
    assert_eq!(shown(&ks), ("A".into(), "b".into()), "among equal spellings, the least (MIN) and greatest (MAX) by bytes");
    ks.process(&g, &key(), &mut [vec![(row("A"), -1), (row("b"), -1)]]);
    assert_eq!(shown(&ks), ("a ".into(), "B".into()), "the rows that had the shown spellings went");
    ks.process(&g, &key(), &mut [vec![(row("a "), -1), (row("B"), -1)]]);
    assert_eq!(ks.reader_rows()[0][1], Value::Null);
}

#[test]
fn top_k_pulls_rows_back_in_when_it_shrinks() {
    let root = Node::TopK { input: Box::new(base(0, 2)), order: vec![(1, true)], limit: 2, offset: 0 };
    let g = Graph::new(&root);
    let mut ks = KeyState::empty(&g, &key(), Position(0), false);
    ks.process(&g, &key(), &mut [(1..=5).map(|i| (r(&[1, i]), 1)).collect()]);
    assert_eq!(sorted(&ks), vec![r(&[1, 4]), r(&[1, 5])]);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 5]), -1), (r(&[1, 4]), -1), (r(&[1, 3]), -1)]]);
    assert_eq!(sorted(&ks), vec![r(&[1, 1]), r(&[1, 2])]);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 2]), -1)]]);
    assert_eq!(sorted(&ks), vec![r(&[1, 1])]);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 7]), 1)]]);
    assert_eq!(sorted(&ks), vec![r(&[1, 1]), r(&[1, 7])]);
}

#[test]
fn bounded_top_k_asks_for_a_refill_when_its_prefix_runs_short() {
    let root = Node::TopK { input: Box::new(base(0, 2)), order: vec![(1, false)], limit: 2, offset: 0 };
    let mut g = Graph::new(&root);
    g.topk_slack = 1; // keeps 3 rows
    let mut ks = KeyState::empty(&g, &key(), Position(0), false);
    ks.process(&g, &key(), &mut [(1..=5).map(|i| (r(&[1, i]), 1)).collect()]);
    assert_eq!(sorted(&ks), vec![r(&[1, 1]), r(&[1, 2])]);
    assert!(!ks.needs_refill);
    // A row past the held prefix is dropped; one inside pushes the last out.
    ks.process(&g, &key(), &mut [vec![(r(&[1, 9]), 1), (r(&[1, 0]), 1)]]);
    assert_eq!(sorted(&ks), vec![r(&[1, 0]), r(&[1, 1])]);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 0]), -1)]]);
    assert_eq!(sorted(&ks), vec![r(&[1, 1]), r(&[1, 2])]);
    assert!(!ks.needs_refill);
    // Held: 1, 2. Deleting 1 leaves one row while 3.. exist upstream: refill.
    ks.process(&g, &key(), &mut [vec![(r(&[1, 1]), -1)]]);
    assert!(ks.needs_refill);
}

#[test]
fn distinct_counts_duplicates() {
    let root = Node::Distinct { input: Box::new(base(0, 2)) };
    let g = Graph::new(&root);
    let mut ks = KeyState::empty(&g, &key(), Position(0), false);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 2]), 1), (r(&[1, 2]), 1)]]);
    assert_eq!(ks.reader_rows(), vec![r(&[1, 2])]);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 2]), -1)]]);
    assert_eq!(ks.reader_rows(), vec![r(&[1, 2])]);
    ks.process(&g, &key(), &mut [vec![(r(&[1, 2]), -1)]]);
    assert!(ks.reader_rows().is_empty());
    assert_eq!(ks.bytes(), 0);
}

/// A group shows one spelling its rows still have, by index: it stays on its spelling when
/// another goes, moves to the first remaining one when its own goes, keeps the last at zero
/// rows when all go, and its key shows until it has a spelling. The key's own spelling is held
/// as the empty row: it costs no copy of the key's values.
#[test]
fn a_group_shows_a_spelling_its_rows_have() {
    let t = |s: &str| -> Row { vec![Value::text(s, crate::value::Collation::Utf8mb4GeneralCi)].into() };
    let key = t("story");
    let mut g = agg::Group::new(Vec::new());
    assert_eq!(g.values(&key), &key[..], "no spelling yet: the key");
    let added = g.count_spelling(&t("Story"), false, 1) + g.count_spelling(&t("STORY"), false, 1);
    let own = g.count_spelling(&t("story"), true, 1);
    assert_eq!(own, crate::value::row_bytes(&[]) as isize, "the key's own spelling holds no values");
    let added = added + own;
    assert_eq!(g.settle_spellings(), 0);
    assert_eq!(g.values(&key), &t("Story")[..]);
    // Another spelling goes: the shown one stays.
    g.count_spelling(&t("STORY"), false, -1);
    let dropped = g.settle_spellings();
    assert_eq!(g.values(&key), &t("Story")[..]);
    // Its own goes: the first remaining one, the key's.
    g.count_spelling(&t("Story"), false, -1);
    let dropped = dropped + g.settle_spellings();
    assert_eq!(g.values(&key), &t("story")[..]);
    // All go: the last shown stays, at zero rows, and its bytes are the group's to give back.
    g.count_spelling(&t("story"), true, -1);
    let dropped = dropped + g.settle_spellings();
    assert_eq!(g.values(&key), &t("story")[..]);
    assert_eq!(added + dropped - g.spelling_bytes(), 0, "every spelling's bytes come back");
    // A new spelling replaces the zero-row one.
    g.count_spelling(&t("STORY"), false, 1);
    g.settle_spellings();
    assert_eq!(g.values(&key), &t("STORY")[..]);
    assert_eq!(g.spellings.len(), 1);
}
