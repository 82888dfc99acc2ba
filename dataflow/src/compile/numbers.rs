//! Numbers the dataflow cannot compute as the server does; a query that needs them is refused
//! (relayed).
//!
//! - Sums of FLOAT and DOUBLE. The server adds a SUM or AVG of floating-point values in its
//!   scan order at every read; a view keeps a running total through inserts and deletions, in
//!   the binlog's order. Float addition is not associative: after `(1e16, 1, -1e16)` loses its
//!   `1`, the server answers 0 and the running total -1. The binary protocol sends a DOUBLE's
//!   bytes as they are. Refused whether the values are a FLOAT or DOUBLE column, computed
//!   from one, or from a floating-point literal (`1e0`).
//! - DECIMAL arithmetic past 28 digits. A view's DECIMAL holds 28 significant digits
//!   ([`crate::Decimal`]); the server's holds 65 and gives a product of two DECIMAL(20,6)
//!   values all its 40. An expression (in the select list or a filter) whose DECIMAL result
//!   may need more digits than that, by the server's rules for the digits of a result (a
//!   product has the digits of both, a quotient four more decimals), is refused. Integer-only
//!   arithmetic is not counted: its overflow is an error on the server (docs/decisions.md,
//!   "Divergences from MySQL kept on purpose").

use super::{Catalog, CompiledQuery, Refusal, refuse};
use crate::expr::{ArithOp, Expr, Func};
use crate::plan::{AggKind, Node};
use crate::schema::SqlType;
use crate::value::Value;

/// Refuses `q` if it sums or averages floating-point values, or computes a DECIMAL that may
/// need more than [`MAX_DIGITS`].
pub(super) fn check(q: &CompiledQuery, catalog: &Catalog) -> Result<(), Refusal> {
    let column_type = |table: &str, column: &str| Some(catalog.column(table, column)?.ty.clone());
    let float_column = |table: &str, column: &str| matches!(column_type(table, column), Some(SqlType::Float | SqlType::Double));
    for node in q.root.post_order() {
        match node {
            Node::Aggregate { input, aggs, .. }
                if aggs.iter().any(|a| matches!(a.kind, AggKind::Sum | AggKind::Avg) && floating(input, a.arg, &float_column)) =>
            {
                return refuse(
                    "SUM and AVG of FLOAT or DOUBLE values depend on the order they are added in, which a view cannot keep as the server does",
                );
            }
            Node::Project { input, exprs } => {
                for e in exprs {
                    digits(e, &|c| exact_digits(input.origin_column(c).and_then(|(t, n)| column_type(t, n))?))?;
                }
            }
            Node::Filter { input, pred } => {
                digits(pred, &|c| exact_digits(input.origin_column(c).and_then(|(t, n)| column_type(t, n))?))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The significant digits a view's DECIMAL holds exactly (a 96-bit mantissa).
const MAX_DIGITS: u32 = 28;

/// Digits of an exact number: before the point, after it, and whether it is a DECIMAL (not an
/// integer).
#[derive(Clone, Copy)]
struct Digits {
    int: u32,
    scale: u32,
    decimal: bool,
}

/// The digits a column of type `ty` holds, for the exact numeric types.
fn exact_digits(ty: SqlType) -> Option<Digits> {
    let int = |int| Some(Digits { int, scale: 0, decimal: false });
    match ty {
        SqlType::Int { bytes, unsigned } => int(match bytes {
            1 => 3,
            2 => 5,
            3 => 8,
            4 => 10,
            _ if unsigned => 20,
            _ => 19,
        }),
        SqlType::Year => int(4),
        SqlType::Decimal { precision, scale } => {
            Some(Digits { int: u32::from(precision).saturating_sub(u32::from(scale)), scale: u32::from(scale), decimal: true })
        }
        _ => None,
    }
}

/// The number of decimal digits of `n` (1 for 0).
fn width(n: u128) -> u32 {
    n.checked_ilog10().map_or(1, |d| d + 1)
}

/// The digits `e`'s value may need, `None` if it is not an exact number; refuses a DECIMAL
/// result (of `e` or a part of it) that may need more than [`MAX_DIGITS`].
fn digits(e: &Expr, column: &dyn Fn(usize) -> Option<Digits>) -> Result<Option<Digits>, Refusal> {
    let parts: Vec<Option<Digits>> = e.children().into_iter().map(|x| digits(x, column)).collect::<Result<_, _>>()?;
    let both = |f: fn(Digits, Digits) -> (u32, u32)| match (parts.first().copied().flatten(), parts.get(1).copied().flatten()) {
        (Some(a), Some(b)) => {
            let (int, scale) = f(a, b);
            Some(Digits { int, scale, decimal: a.decimal || b.decimal })
        }
        _ => None,
    };
    let d = match e {
        Expr::Col(c) => column(*c),
        Expr::Lit(l) => match &l.0 {
            Value::Int(i) => Some(Digits { int: width(u128::from(i.unsigned_abs())), scale: 0, decimal: false }),
            Value::UInt(u) => Some(Digits { int: width(u128::from(*u)), scale: 0, decimal: false }),
            Value::Decimal(x) => {
                let scale = u32::from(x.scale());
                Some(Digits { int: width(x.mantissa().unsigned_abs()).saturating_sub(scale).max(1), scale, decimal: true })
            }
            _ => None,
        },
        Expr::Arith(op, ..) => match op {
            ArithOp::Add | ArithOp::Sub => both(|a, b| (a.int.max(b.int) + 1, a.scale.max(b.scale))),
            ArithOp::Mul => both(|a, b| (a.int + b.int, a.scale + b.scale)),
            // MySQL's quotient has div_precision_increment (4) more decimals than the dividend;
            // dividing by a number as small as the divisor's last decimal moves digits left.
            ArithOp::Div => both(|a, b| (a.int + b.scale, a.scale + 4)).map(|d| Digits { decimal: true, ..d }),
            ArithOp::IntDiv => both(|a, b| (a.int + b.scale, 0)).map(|d| Digits { decimal: false, ..d }),
            ArithOp::Mod => both(|a, b| (a.int.max(b.int), a.scale.max(b.scale))),
        },
        Expr::Neg(_) => parts.first().copied().flatten(),
        // ROUND, FLOOR and CEILING may carry into one more digit.
        Expr::Func(Func::Round | Func::Floor | Func::Ceil | Func::Abs, _) => {
            parts.first().copied().flatten().map(|d| Digits { int: d.int + 1, ..d })
        }
        // A value chosen among its arguments' (the condition of IF among them, harmlessly).
        Expr::Func(Func::Coalesce | Func::IfNull | Func::NullIf | Func::If, _) | Expr::Case { .. } => parts
            .iter()
            .flatten()
            .copied()
            .reduce(|a, b| Digits { int: a.int.max(b.int), scale: a.scale.max(b.scale), decimal: a.decimal || b.decimal }),
        _ => None,
    };
    if let Some(d) = d
        && d.decimal
        && d.int + d.scale > MAX_DIGITS
    {
        return refuse(format!(
            "a DECIMAL computed here may need {} digits, more than the {MAX_DIGITS} a view's DECIMAL holds (the server's holds 65)",
            d.int + d.scale
        ));
    }
    Ok(d)
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
