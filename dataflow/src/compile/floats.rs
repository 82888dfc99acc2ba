//! Sums of FLOAT and DOUBLE, which the dataflow cannot keep as the server computes them.
//!
//! The server adds a SUM or AVG of floating-point values in its scan order at every read; a
//! view keeps a running total through inserts and deletions, in the binlog's order. Float
//! addition is not associative: after `(1e16, 1, -1e16)` loses its `1`, the server answers 0
//! and the running total -1. The binary protocol sends a DOUBLE's bytes as they are, so such
//! a query is refused (relayed), whether the values are a FLOAT or DOUBLE column or computed
//! from one, or from a floating-point literal (`1e0`).

use super::{Catalog, CompiledQuery, Refusal, refuse};
use crate::expr::Expr;
use crate::plan::{AggKind, Node};
use crate::schema::SqlType;
use crate::value::Value;

/// Refuses `q` if it sums or averages floating-point values.
pub(super) fn check(q: &CompiledQuery, catalog: &Catalog) -> Result<(), Refusal> {
    let float_column = |table: &str, column: &str| {
        catalog
            .get(table)
            .and_then(|t| t.columns.get(t.column_index(column)?))
            .is_some_and(|c| matches!(c.ty, SqlType::Float | SqlType::Double))
    };
    for node in q.root.post_order() {
        if let Node::Aggregate { input, aggs, .. } = node
            && aggs.iter().any(|a| matches!(a.kind, AggKind::Sum | AggKind::Avg) && floating(input, a.arg, &float_column))
        {
            return refuse(
                "SUM and AVG of FLOAT or DOUBLE values depend on the order they are added in, which a view cannot keep as the server does",
            );
        }
    }
    Ok(())
}

/// True if output column `col` of `node` may hold floating-point values: a copy of a FLOAT or
/// DOUBLE column, or computed from one or from a floating-point literal.
fn floating(node: &Node, col: usize, float_column: &dyn Fn(&str, &str) -> bool) -> bool {
    if let Some((table, column)) = node.origin_column(col) {
        return float_column(table, column);
    }
    match node {
        Node::Project { input, exprs } => exprs.get(col).is_some_and(|e| {
            let mut any = has_float_literal(e);
            e.columns(&mut |c| any |= floating(input, c, float_column));
            any
        }),
        Node::Filter { input, .. } | Node::Distinct { input } | Node::TopK { input, .. } => floating(input, col, float_column),
        Node::Join { left, right, .. } => {
            let lw = left.width();
            if col < lw { floating(left, col, float_column) } else { floating(right, col - lw, float_column) }
        }
        Node::Aggregate { input, group, aggs, .. } => match col.checked_sub(*group) {
            None => floating(input, col, float_column),
            Some(a) => aggs.get(a).is_some_and(|a| {
                !matches!(a.kind, AggKind::CountStar | AggKind::CountNotNull | AggKind::CountDistinct)
                    && floating(input, a.arg, float_column)
            }),
        },
        Node::Union { inputs } => inputs.iter().any(|i| floating(i, col, float_column)),
        Node::Base { .. } => false,
    }
}

fn has_float_literal(e: &Expr) -> bool {
    matches!(e, Expr::Lit(l) if matches!(l.0, Value::Float(_) | Value::Double(_))) || e.children().into_iter().any(has_float_literal)
}
