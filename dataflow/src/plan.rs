//! The operator tree a query compiles to, and the facts about it that every later stage needs.
//!
//! Owns: [`Node`] (base, filter, project, join, aggregate, distinct, top-k, union), its output
//! width, where the partition key sits in every node's output, and which nodes keep state.
//! Does not own: building trees from SQL (compile), running them incrementally (ops, view),
//! evaluating them from scratch (eval) or rendering them as SQL (render).
//!
//! Invariants (established by `compile`, relied on everywhere else):
//! - Every node's output carries the partition key columns ([`Node::key_positions`]). A view is
//!   partitioned by the values of its `?` parameters. A base occurrence with columns equal to
//!   the parameters (directly or through join equalities) is *partition-keyed* (`key` non-empty):
//!   each of its rows belongs to exactly one partition. Any other occurrence of a parameterised
//!   view is a *dimension* (`key` empty): it is the right input (possibly under a `Filter`) of a
//!   [dimension join](Node::is_dimension_join) whose left input is partition-keyed, so the rows
//!   a partition needs from it are exactly those whose join key some left row of the partition
//!   carries. A partition keeps those rows inside its own state (see `ops`, "cover"), which
//!   keeps it the unit of filling, eviction and memory accounting, and keeps descendant
//!   eviction trivial: all state derived from a partition lives in that partition.
//! - The join tree is left-deep and its left-most base is partition-keyed (compile re-places
//!   inner joins to achieve that, projecting back to FROM column order above the joins), so a
//!   join's key columns come from its left input.
//! - A parameterless view has one partition, the empty key.
//! - `Aggregate` input columns are `[group columns..., aggregate arguments...]`, and the first
//!   `key width` group columns are the partition key.

use crate::expr::Expr;
use crate::value::Collation;

/// Inner or left outer join.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JoinKind {
    Inner,
    Left,
}

/// Aggregate functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AggKind {
    /// `COUNT(*)`.
    CountStar,
    /// `COUNT(expr)`; its argument column holds `expr IS NOT NULL` (1/0), so a fill can ship
    /// the server's counts instead of the values.
    CountNotNull,
    /// `COUNT(DISTINCT expr)`.
    CountDistinct,
    Sum,
    Avg,
    Min,
    Max,
}

/// One aggregate: its function and its argument column in the aggregate's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AggSpec {
    pub kind: AggKind,
    /// Input column of the argument; unused for `CountStar`.
    pub arg: usize,
}

/// Sort direction per column: `(column, descending)`.
pub type OrderSpec = Vec<(usize, bool)>;

/// A node of the operator tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// One occurrence of a base table (`occ` numbers occurrences; a self-join has two).
    Base {
        occ: usize,
        table: String,
        /// Base column names, for rendering SQL.
        columns: Vec<String>,
        /// Base columns holding the partition key, in key order.
        key: Vec<usize>,
    },
    Filter {
        input: Box<Node>,
        pred: Expr,
    },
    Project {
        input: Box<Node>,
        exprs: Vec<Expr>,
    },
    /// Output is left columns followed by right columns. `on` pairs (left col, right col).
    Join {
        left: Box<Node>,
        right: Box<Node>,
        on: Vec<(usize, usize)>,
        kind: JoinKind,
    },
    /// Output is the `group` group columns followed by one column per aggregate. `global`
    /// means no user GROUP BY: each partition has exactly one group, even when empty.
    Aggregate {
        input: Box<Node>,
        group: usize,
        aggs: Vec<AggSpec>,
        global: bool,
    },
    Distinct {
        input: Box<Node>,
    },
    /// Rows `offset .. offset + limit` of the partition in `order` (ties broken by the whole
    /// row, so the result is deterministic).
    TopK {
        input: Box<Node>,
        order: OrderSpec,
        limit: usize,
        offset: usize,
    },
    /// UNION ALL; all inputs have the same width and key positions.
    Union {
        inputs: Vec<Node>,
    },
}

impl Node {
    /// Number of output columns.
    pub fn width(&self) -> usize {
        match self {
            Node::Base { columns, .. } => columns.len(),
            Node::Filter { input, .. } | Node::Distinct { input } | Node::TopK { input, .. } => input.width(),
            Node::Project { exprs, .. } => exprs.len(),
            Node::Join { left, right, .. } => left.width() + right.width(),
            Node::Aggregate { group, aggs, .. } => group + aggs.len(),
            Node::Union { inputs } => inputs.first().map(Node::width).unwrap_or(0),
        }
    }

    /// Output positions of the partition key columns.
    pub fn key_positions(&self) -> Vec<usize> {
        match self {
            Node::Base { key, .. } => key.clone(),
            Node::Filter { input, .. } | Node::Distinct { input } | Node::TopK { input, .. } => input.key_positions(),
            Node::Project { input, exprs } => {
                input.key_positions().into_iter().map(|k| exprs.iter().position(|e| *e == Expr::Col(k)).unwrap_or(usize::MAX)).collect()
            }
            Node::Join { left, .. } => left.key_positions(),
            Node::Aggregate { input, .. } => input.key_positions(),
            Node::Union { inputs } => inputs.first().map(Node::key_positions).unwrap_or_default(),
        }
    }

    /// The base column that output column `col` is a copy of: `(occurrence, base column)`,
    /// followed through filters, plain-column projections, joins, group columns, DISTINCT and
    /// top-k. `None` for computed columns (expressions, aggregates) and for UNION ALL.
    pub fn origin(&self, col: usize) -> Option<(usize, usize)> {
        match self {
            Node::Base { occ, columns, .. } => (col < columns.len()).then_some((*occ, col)),
            Node::Filter { input, .. } | Node::Distinct { input } | Node::TopK { input, .. } => input.origin(col),
            Node::Project { input, exprs } => match exprs.get(col) {
                Some(Expr::Col(c)) => input.origin(*c),
                _ => None,
            },
            Node::Join { left, right, .. } => {
                let lw = left.width();
                if col < lw { left.origin(col) } else { right.origin(col - lw) }
            }
            Node::Aggregate { input, group, .. } => {
                if col < *group {
                    input.origin(col)
                } else {
                    None
                }
            }
            Node::Union { .. } => None,
        }
    }

    /// Direct inputs, left to right.
    pub fn inputs(&self) -> Vec<&Node> {
        match self {
            Node::Base { .. } => vec![],
            Node::Filter { input, .. }
            | Node::Project { input, .. }
            | Node::Aggregate { input, .. }
            | Node::Distinct { input }
            | Node::TopK { input, .. } => vec![input],
            Node::Join { left, right, .. } => vec![left, right],
            Node::Union { inputs } => inputs.iter().collect(),
        }
    }

    /// True for a join of a parameterised view whose right input is a dimension table: the left
    /// input carries the partition key, the right input does not.
    pub fn is_dimension_join(&self) -> bool {
        match self {
            Node::Join { left, right, .. } => !left.key_positions().is_empty() && right.key_positions().is_empty(),
            _ => false,
        }
    }

    /// True if this node keeps per-partition state.
    pub fn is_stateful(&self) -> bool {
        matches!(self, Node::Join { .. } | Node::Aggregate { .. } | Node::Distinct { .. } | Node::TopK { .. })
    }

    /// True if the node's full output for a partition can be computed from the states at or
    /// below it without reading base rows.
    pub fn derivable(&self) -> bool {
        match self {
            Node::Base { .. } => false,
            n if n.is_stateful() => true,
            n => n.inputs().iter().all(|i| i.derivable()),
        }
    }

    /// The base table and column that output column `col` is a copy of (see [`Node::origin`]).
    pub fn origin_column(&self, col: usize) -> Option<(&str, &str)> {
        let (occ, c) = self.origin(col)?;
        self.bases().into_iter().find_map(|b| match b {
            Node::Base { occ: o, table, columns, .. } if *o == occ => Some((table.as_str(), columns.get(c)?.as_str())),
            _ => None,
        })
    }

    /// True if output column `col` holds text: a copy of a text column (`base(table,
    /// column)`), or a value computed as text ([`Expr::yields_text`]); a MIN or MAX of text.
    pub fn column_is_text(&self, col: usize, base: &dyn Fn(&str, &str) -> bool) -> bool {
        match self {
            Node::Base { table, columns, .. } => columns.get(col).is_some_and(|c| base(table, c)),
            Node::Filter { input, .. } | Node::Distinct { input } | Node::TopK { input, .. } => input.column_is_text(col, base),
            Node::Project { input, exprs } => exprs.get(col).is_some_and(|e| e.yields_text(&|c| input.column_is_text(c, base))),
            Node::Join { left, right, .. } => {
                let lw = left.width();
                if col < lw { left.column_is_text(col, base) } else { right.column_is_text(col - lw, base) }
            }
            Node::Aggregate { input, group, aggs, .. } => match col.checked_sub(*group) {
                None => input.column_is_text(col, base),
                Some(a) => aggs.get(a).is_some_and(|a| matches!(a.kind, AggKind::Min | AggKind::Max) && input.column_is_text(a.arg, base)),
            },
            Node::Union { inputs } => inputs.iter().any(|i| i.column_is_text(col, base)),
        }
    }

    /// The collation the dataflow gives the text values of output column `col`: a base
    /// column's own (`base(table, column)`), carried through copies; for a computed column,
    /// that of the first text column its string value is made of (a function of text takes
    /// its first text argument's collation, `expr::funcs`; a choice its values', never its
    /// condition's: `Expr::text_collations`); a MIN or MAX keeps its argument's. `None` when
    /// no column decides it (numbers, literals alone).
    pub fn column_collation(&self, col: usize, base: &dyn Fn(&str, &str) -> Option<Collation>) -> Option<Collation> {
        match self {
            Node::Base { table, columns, .. } => base(table, columns.get(col)?),
            Node::Filter { input, .. } | Node::Distinct { input } | Node::TopK { input, .. } => input.column_collation(col, base),
            Node::Project { input, exprs } => {
                let mut found = Vec::new();
                exprs.get(col)?.text_collations(&|c| input.column_collation(c, base), &mut found);
                found.first().copied()
            }
            Node::Join { left, right, .. } => {
                let lw = left.width();
                if col < lw { left.column_collation(col, base) } else { right.column_collation(col - lw, base) }
            }
            Node::Aggregate { input, group, aggs, .. } => match col.checked_sub(*group) {
                None => input.column_collation(col, base),
                Some(a) => match aggs.get(a)? {
                    AggSpec { kind: AggKind::Min | AggKind::Max, arg } => input.column_collation(*arg, base),
                    _ => None,
                },
            },
            Node::Union { inputs } => inputs.first()?.column_collation(col, base),
        }
    }

    /// Base occurrences in this subtree, in order.
    pub fn bases(&self) -> Vec<&Node> {
        let mut out = Vec::new();
        fn walk<'a>(n: &'a Node, out: &mut Vec<&'a Node>) {
            if let Node::Base { .. } = n {
                out.push(n);
            }
            for i in n.inputs() {
                walk(i, out);
            }
        }
        walk(self, &mut out);
        out
    }

    /// The nodes of the tree in post-order (inputs before the node), root last.
    pub fn post_order(&self) -> Vec<&Node> {
        let mut out = Vec::new();
        fn walk<'a>(n: &'a Node, out: &mut Vec<&'a Node>) {
            for i in n.inputs() {
                walk(i, out);
            }
            out.push(n);
        }
        walk(self, &mut out);
        out
    }

    /// Short operator name, for cost reports and debugging.
    pub fn op_name(&self) -> &'static str {
        match self {
            Node::Base { .. } => "base",
            Node::Filter { .. } => "filter",
            Node::Project { .. } => "project",
            Node::Join { kind: JoinKind::Inner, .. } => "join",
            Node::Join { kind: JoinKind::Left, .. } => "left join",
            Node::Aggregate { .. } => "aggregate",
            Node::Distinct { .. } => "distinct",
            Node::TopK { .. } => "top-k",
            Node::Union { .. } => "union all",
        }
    }
}
