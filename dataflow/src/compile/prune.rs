//! Projection pushdown: every join keeps, per input row, only the columns something above it
//! reads, so a partition's join state holds narrow rows, and rows that become equal once
//! narrowed are held once with a count.
//!
//! Owns: [`prune`], the last pass of `compile`. Does not own: the trees it is given (select
//! builds them) or what runs them (ops, view).
//!
//! Invariants:
//! - The root's output is unchanged, column for column: everything the reader, the result
//!   columns, the ordering and the read filters refer to stays where it was.
//! - Every node keeps its partition key columns ([`Node::key_positions`] never points at a
//!   dropped column), and a join keeps its join columns on both sides.
//! - Only joins' inputs are narrowed (by a `Project` of plain columns above the input). Filters
//!   and projections pass the narrowing down; aggregates, DISTINCT, top-k and UNION ALL read
//!   every input column (their input is already what they need: compile projects an
//!   aggregate's input to its group columns and arguments).
//! - `col IS [NOT] NULL` of a column that cannot be NULL where it is read becomes a test that
//!   reads fewer columns, decided from the catalog's `NOT NULL` and the join kinds: a constant
//!   when no row can carry a NULL there, and for a LEFT JOIN's right side, the same test of the
//!   side's join column (a right row matched on an equality has non-NULL join columns, and a
//!   NULL-extended row has NULL in every right column). `COUNT(votes.user_id)` over `LEFT JOIN
//!   votes ON votes.story_id = ...` then reads only `story_id`, and a story's votes are one row
//!   counted ten times. A schema change recompiles the view (the writer's DDL path), so the
//!   `NOT NULL` it relied on still holds for every row it sees.

use super::Catalog;
use crate::expr::Expr;
use crate::plan::{JoinKind, Node};

/// For each output column of a node before pruning, its position after (`None`: dropped).
type ColMap = Vec<Option<usize>>;

/// Narrows `root`'s joins to the columns read above them; the root's output is unchanged.
/// A tree that breaks the plan's invariants (a column read that is not there) is returned
/// as it is: pruning saves memory, it must never make a plan wrong or panic.
pub(super) fn prune(root: Node, catalog: &Catalog) -> Node {
    let need = vec![true; root.width()];
    let pruned = Pruner { catalog }.node(root.clone(), need);
    match pruned {
        Some((pruned, map)) if map.iter().enumerate().all(|(i, m)| *m == Some(i)) && dimensions_traceable(&pruned) => pruned,
        _ => {
            debug_assert!(false, "pruning failed on {root:?}");
            root
        }
    }
}

/// True if every dimension join's columns on its dimension side are copies of the dimension
/// table's columns ([`Node::origin`]): the writer routes dimension rows by those base columns
/// (`view/dims.rs`). Projections of plain columns keep it so; this says it of the result.
fn dimensions_traceable(root: &Node) -> bool {
    root.post_order().into_iter().all(|n| match n {
        Node::Join { right, on, .. } if n.is_dimension_join() => {
            let occ = right.bases().first().and_then(|b| if let Node::Base { occ, .. } = b { Some(*occ) } else { None });
            on.iter().all(|&(_, r)| right.origin(r).is_some_and(|o| Some(o.0) == occ))
        }
        _ => true,
    })
}

struct Pruner<'a> {
    catalog: &'a Catalog,
}

impl Pruner<'_> {
    /// Prunes `node` so that its output keeps at least the columns in `need` and its key
    /// columns. Columns are only dropped, never reordered.
    fn node(&self, node: Node, mut need: Vec<bool>) -> Option<(Node, ColMap)> {
        node.key_positions().into_iter().for_each(|k| mark(&mut need, k));
        Some(match node {
            Node::Base { .. } => {
                let w = node.width();
                (node, (0..w).map(Some).collect())
            }
            Node::Filter { input, pred } => {
                pred.columns(&mut |c| mark(&mut need, c));
                let (input, map) = self.node(*input, need)?;
                let pred = remap(&pred, &map)?;
                (Node::Filter { input: Box::new(input), pred }, map)
            }
            Node::Project { input, exprs } => {
                let exprs: Vec<Expr> = exprs.into_iter().map(|e| self.simplify(e, &input)).collect();
                let kept: Vec<usize> = (0..exprs.len()).filter(|&i| need.get(i) == Some(&true)).collect();
                let mut need_in = vec![false; input.width()];
                for &i in &kept {
                    exprs[i].columns(&mut |c| mark(&mut need_in, c));
                }
                let (input, inner) = self.node(*input, need_in)?;
                let exprs = kept.iter().map(|&i| remap(&exprs[i], &inner)).collect::<Option<_>>()?;
                let map = ranks(&need);
                (Node::Project { input: Box::new(input), exprs }, map)
            }
            Node::Join { left, right, on, kind } => {
                let lw = left.width().min(need.len());
                let (mut nl, mut nr) = (need[..lw].to_vec(), need[lw..].to_vec());
                for &(l, r) in &on {
                    mark(&mut nl, l);
                    mark(&mut nr, r);
                }
                let (left, ml) = self.narrow(*left, nl)?;
                let (right, mr) = self.narrow(*right, nr)?;
                let lw2 = left.width();
                let on = on.iter().map(|&(l, r)| Some((at(&ml, l)?, at(&mr, r)?))).collect::<Option<_>>()?;
                let map = ml.into_iter().chain(mr.into_iter().map(|m| m.map(|c| c + lw2))).collect();
                (Node::Join { left: Box::new(left), right: Box::new(right), on, kind }, map)
            }
            Node::Aggregate { input, group, aggs, global } => {
                let input = self.whole(*input)?;
                let w = group + aggs.len();
                (Node::Aggregate { input: Box::new(input), group, aggs, global }, identity(w))
            }
            Node::Distinct { input } => {
                let input = self.whole(*input)?;
                let w = input.width();
                (Node::Distinct { input: Box::new(input) }, identity(w))
            }
            Node::TopK { input, order, limit, offset } => {
                let input = self.whole(*input)?;
                let w = input.width();
                (Node::TopK { input: Box::new(input), order, limit, offset }, identity(w))
            }
            Node::Union { inputs } => {
                let inputs: Vec<Node> = inputs.into_iter().map(|i| self.whole(i)).collect::<Option<_>>()?;
                let w = inputs.first().map_or(0, Node::width);
                (Node::Union { inputs }, identity(w))
            }
        })
    }

    /// Prunes below `node`, which keeps every output column (so none moves).
    fn whole(&self, node: Node) -> Option<Node> {
        let need = vec![true; node.width()];
        let (node, map) = self.node(node, need)?;
        map.iter().enumerate().all(|(i, m)| *m == Some(i)).then_some(node)
    }

    /// Prunes `node` and, if its output still has columns beyond `need` and its key, puts a
    /// projection of just those above it (merged into a projection it already is).
    fn narrow(&self, node: Node, mut need: Vec<bool>) -> Option<(Node, ColMap)> {
        node.key_positions().into_iter().for_each(|k| mark(&mut need, k));
        let (node, map) = self.node(node, need.clone())?;
        let wanted: Vec<usize> = (0..need.len()).filter(|&i| need[i]).map(|i| at(&map, i)).collect::<Option<_>>()?;
        if wanted.len() == node.width() {
            return Some((node, map));
        }
        // Columns are never reordered, so a needed column's place is its rank among them.
        let map = ranks(&need);
        let node = match node {
            Node::Project { input, exprs } => {
                Node::Project { input, exprs: wanted.iter().map(|&c| exprs.get(c).cloned()).collect::<Option<_>>()? }
            }
            other => Node::Project { input: Box::new(other), exprs: wanted.into_iter().map(Expr::Col).collect() },
        };
        Some((node, map))
    }

    /// `e`, read over `input`'s output; if it is `col IS [NOT] NULL` of a column that cannot
    /// be NULL there, the test that reads fewer columns (see the module's invariants). Only a
    /// projection's top-level expressions are looked at: `COUNT(col)` lowers to
    /// `col IS NOT NULL`, the case that matters.
    fn simplify(&self, e: Expr, input: &Node) -> Expr {
        let Expr::IsNull(x, negated) = &e else { return e };
        let (&Expr::Col(c), negated) = (x.as_ref(), *negated) else { return e };
        match self.null_test(input, c) {
            NullTest::Never => Expr::lit(crate::value::Value::Int(i64::from(negated))),
            NullTest::Column(j) => Expr::IsNull(Box::new(Expr::Col(j)), negated),
            NullTest::Unknown => e,
        }
    }

    /// How `col IS NULL` over `node`'s output can be answered.
    fn null_test(&self, node: &Node, col: usize) -> NullTest {
        match node {
            Node::Filter { input, .. } => self.null_test(input, col),
            Node::Join { left, right, on, kind } => {
                let lw = left.width();
                if col < lw {
                    return if self.never_null(left, col) { NullTest::Never } else { NullTest::Unknown };
                }
                if !self.never_null(right, col - lw) {
                    return NullTest::Unknown;
                }
                match (kind, on.first()) {
                    (JoinKind::Inner, _) => NullTest::Never,
                    (JoinKind::Left, Some(&(_, r))) => NullTest::Column(lw + r),
                    (JoinKind::Left, None) => NullTest::Unknown,
                }
            }
            n if self.never_null(n, col) => NullTest::Never,
            _ => NullTest::Unknown,
        }
    }

    /// True if output column `col` of `node` is NULL in no row: a copy of a `NOT NULL` base
    /// column, not on the right of a LEFT JOIN.
    fn never_null(&self, node: &Node, col: usize) -> bool {
        match node {
            Node::Base { table, columns, .. } => self
                .catalog
                .get(table)
                .and_then(|t| t.columns.iter().find(|c| Some(&c.name) == columns.get(col)))
                .is_some_and(|c| !c.nullable),
            Node::Filter { input, .. } | Node::Distinct { input } | Node::TopK { input, .. } => self.never_null(input, col),
            Node::Project { input, exprs } => matches!(exprs.get(col), Some(Expr::Col(c)) if self.never_null(input, *c)),
            Node::Join { left, right, kind, .. } => {
                let lw = left.width();
                if col < lw { self.never_null(left, col) } else { *kind == JoinKind::Inner && self.never_null(right, col - lw) }
            }
            Node::Aggregate { input, group, .. } => col < *group && self.never_null(input, col),
            Node::Union { .. } => false,
        }
    }
}

enum NullTest {
    /// The column is never NULL: the test is a constant.
    Never,
    /// The column is NULL exactly when this column is.
    Column(usize),
    Unknown,
}

fn identity(w: usize) -> ColMap {
    (0..w).map(Some).collect()
}

/// Where a column read above sits now (`None` only if the tree broke an invariant).
fn at(map: &ColMap, c: usize) -> Option<usize> {
    map.get(c).copied().flatten()
}

/// Each needed column's rank among the needed ones: where it sits once the others are gone.
fn ranks(need: &[bool]) -> ColMap {
    let mut next = 0;
    need.iter()
        .map(|&n| {
            n.then(|| {
                next += 1;
                next - 1
            })
        })
        .collect()
}

fn mark(need: &mut [bool], c: usize) {
    if let Some(n) = need.get_mut(c) {
        *n = true;
    }
}

/// `e` with its columns moved through `map`; `None` if it reads a dropped column.
fn remap(e: &Expr, map: &ColMap) -> Option<Expr> {
    let mut ok = true;
    e.columns(&mut |c| ok &= at(map, c).is_some());
    ok.then(|| e.remap(&|c| at(map, c).unwrap_or(c)))
}

#[cfg(test)]
mod tests {
    use crate::compile::{Catalog, compile, compile_unpruned};
    use crate::plan::Node;
    use crate::schema::{ColumnSchema, SqlType, TableSchema};

    /// The news tables; `votes.user_id` nullable or not.
    fn news(user_id_nullable: bool) -> Catalog {
        let int = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 8, unsigned: false }).not_null();
        let text = |n: &str| ColumnSchema::new(n, SqlType::Text).not_null();
        let mut c = Catalog::new();
        c.add(TableSchema::new("users", vec![int("id"), text("name")], vec![0])).unwrap();
        c.add(TableSchema::new("stories", vec![int("id"), int("author_id"), text("title"), text("url"), text("created_at")], vec![0]))
            .unwrap();
        let user_id =
            if user_id_nullable { ColumnSchema::new("user_id", SqlType::Int { bytes: 8, unsigned: false }) } else { int("user_id") };
        c.add(TableSchema::new("votes", vec![user_id, int("story_id")], vec![])).unwrap();
        c
    }

    const STORY_WITH_VOTES: &str = "SELECT stories.id, stories.title, stories.url, COUNT(votes.user_id) AS votes FROM stories \
        LEFT JOIN votes ON votes.story_id = stories.id WHERE stories.id = ? GROUP BY stories.id, stories.title, stories.url";
    const KARMA: &str = "SELECT users.id, COUNT(votes.user_id) AS karma FROM users LEFT JOIN stories ON stories.author_id = users.id \
        LEFT JOIN votes ON votes.story_id = stories.id WHERE users.id = ? GROUP BY users.id";

    /// Per output column: the `(occurrence, base column)` it copies, `None` if computed.
    type Origins = Vec<Option<(usize, usize)>>;

    /// Each join's (left, right) input: the base columns it keeps.
    fn join_inputs(root: &Node) -> Vec<(Origins, Origins)> {
        let cols = |n: &Node| (0..n.width()).map(|c| n.origin(c)).collect();
        root.post_order()
            .into_iter()
            .filter_map(|n| if let Node::Join { left, right, .. } = n { Some((cols(left), cols(right))) } else { None })
            .collect()
    }

    #[test]
    fn a_left_joined_count_of_a_not_null_column_reads_only_the_join_column() {
        let q = compile(STORY_WITH_VOTES, &news(false)).unwrap();
        // Stories keep id, title and url (not author_id, created_at); votes keep story_id
        // only, so a story's votes are one row counted as many times as it has votes.
        assert_eq!(join_inputs(&q.root), vec![(vec![Some((0, 0)), Some((0, 2)), Some((0, 3))], vec![Some((1, 1))])]);
        let whole = compile_unpruned(STORY_WITH_VOTES, &news(false)).unwrap();
        assert_eq!(join_inputs(&whole.root), vec![((0..5).map(|c| Some((0, c))).collect(), vec![Some((1, 0)), Some((1, 1))])]);
        assert_eq!((q.root.width(), q.visible, q.published), (whole.root.width(), whole.visible, whole.published));
    }

    #[test]
    fn a_count_of_a_nullable_column_keeps_the_column() {
        let q = compile(STORY_WITH_VOTES, &news(true)).unwrap();
        assert_eq!(join_inputs(&q.root)[0].1, vec![Some((1, 0)), Some((1, 1))]);
    }

    #[test]
    fn karma_keeps_ids_through_both_joins() {
        let q = compile(KARMA, &news(false)).unwrap();
        let joins = join_inputs(&q.root);
        // users ⋈ stories: users.id; stories.id and author_id (its join column).
        assert_eq!(joins[0], (vec![Some((0, 0))], vec![Some((1, 0)), Some((1, 1))]));
        // (users ⋈ stories) ⋈ votes: users.id (the key) and stories.id; votes.story_id.
        assert_eq!(joins[1], (vec![Some((0, 0)), Some((1, 0))], vec![Some((2, 1))]));
    }

    #[test]
    fn a_plan_without_joins_is_left_alone() {
        let c = news(false);
        for sql in [
            "SELECT id, title, author_id FROM stories WHERE id = ?",
            "SELECT author_id, COUNT(*) FROM stories WHERE author_id = ? GROUP BY author_id",
            "SELECT DISTINCT title FROM stories WHERE author_id = ?",
            "SELECT id FROM stories WHERE author_id = ? ORDER BY created_at DESC LIMIT 3",
        ] {
            assert_eq!(compile(sql, &c).unwrap().root, compile_unpruned(sql, &c).unwrap().root, "{sql}");
        }
    }
}
