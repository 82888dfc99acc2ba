//! Strings the server orders by a prefix. A filesort (an ORDER BY that no index gives)
//! compares strings by their first `max_sort_length` bytes of sort key (1,024 by default;
//! measured on MariaDB 10.11: 1,024 bytes of the value under utf8mb4_general_ci and
//! utf8mb4_bin, 512 weights under utf8mb4_unicode_ci, 1,022 bytes of a VARBINARY): two
//! values equal there are equal to it, and ordered by the next ORDER BY key or as its plan
//! reads them. An index that gives the order compares whole values. A view compares whole
//! values, so an ORDER BY (the reader's, or a top-k's) whose key may be a string longer than
//! [`SHORT`] bytes is refused. A column's longest value is its CHARACTER_OCTET_LENGTH
//! (`ColumnSchema::max_bytes`); a computed string's is bounded from its parts ([`longest`]),
//! or not known, and then refused.
//!
//! Left: under utf8mb4_unicode_ci a character may weigh several weights (`ß` two), so 255
//! characters of such letters could pass 512 weights; it takes values that agree in their
//! first 512 weights.

use super::{Catalog, Refusal, refuse};
use crate::expr::{Expr, Func};
use crate::plan::{AggKind, Node, OrderSpec};
use crate::schema::SqlType;
use crate::value::Value;

/// The longest value ordered as a view orders it: less than any prefix a filesort cuts
/// (a VARCHAR(255) of utf8mb4 is 1,020 bytes).
pub(super) const SHORT: u64 = 1020;

/// What a value that is not a string takes as text at most (a number, a date, a time).
const NOT_TEXT: u64 = 64;

/// Refuses an ORDER BY of `root` (`order`, over its columns) or of a top-k in it whose key
/// may be a string longer than [`SHORT`] bytes.
pub(super) fn check(root: &Node, order: &OrderSpec, catalog: &Catalog) -> Result<(), Refusal> {
    let mut keys: Vec<(&Node, &OrderSpec)> = vec![(root, order)];
    for node in root.post_order() {
        if let Node::TopK { input, order, .. } = node {
            keys.push((input, order));
        }
    }
    if keys.iter().any(|(node, order)| order.iter().any(|&(c, _)| longest(node, c, catalog).is_none_or(|n| n > SHORT))) {
        return refuse(format!(
            "ORDER BY a string that may be longer than {SHORT} bytes: the server's filesort orders strings by their first \
             max_sort_length bytes, a view by the whole"
        ));
    }
    Ok(())
}

/// The most bytes a string function's result may take in a view: MariaDB answers NULL with
/// warning 1301 for one longer than its `max_allowed_packet` (16 MiB by default, taken to be
/// at least this), where a view computes it whole.
pub(super) const LONG: u64 = 1 << 20;

/// Refuses a string function of `root`'s plan (CONCAT, REPLACE, UPPER, LOWER: those that may
/// build more than they read) whose result may be longer than [`LONG`] bytes.
pub(super) fn check_lengths(root: &Node, catalog: &Catalog) -> Result<(), Refusal> {
    for node in root.post_order() {
        let (input, exprs): (&Node, Vec<&Expr>) = match node {
            Node::Project { input, exprs } => (input, exprs.iter().collect()),
            Node::Filter { input, pred } => (input, vec![pred]),
            _ => continue,
        };
        if exprs.into_iter().any(|e| too_long(e, &|c| longest(input, c, catalog))) {
            return refuse(format!(
                "a string function whose result may be longer than {LONG} bytes: the server answers NULL and a warning past its \
                 max_allowed_packet, a view the whole string"
            ));
        }
    }
    Ok(())
}

/// Whether `e`, or a string function in it, may build more than [`LONG`] bytes, and more than
/// the longest text it reads (a value the server holds, it can send).
fn too_long(e: &Expr, column: &dyn Fn(usize) -> Option<u64>) -> bool {
    let grows = |result: Option<u64>, args: &[Expr]| {
        let read = args.iter().try_fold(0, |m, a| Some(m.max(bound(a, column)?)));
        match (result, read) {
            (Some(n), Some(read)) => n > LONG && n > read,
            _ => true,
        }
    };
    let here = match e {
        Expr::Func(Func::Concat | Func::Upper | Func::Lower, args) => grows(bound(e, column), args),
        // REPLACE(s, from, to) grows `s` by at most `to`'s length over `from`'s per match.
        Expr::Func(Func::Replace, args) => {
            let literal = |i: usize| match args.get(i) {
                Some(Expr::Lit(l)) => match &l.0 {
                    Value::Text(s, _) => Some(s.len() as u64),
                    _ => None,
                },
                _ => None,
            };
            let grown = match (args.first().and_then(|s| bound(s, column)), literal(1), literal(2)) {
                (Some(n), Some(from), Some(to)) if to <= from || from == 0 => Some(n),
                (Some(n), Some(from), Some(to)) => n.checked_mul(to.div_ceil(from)),
                _ => None,
            };
            grows(grown, args.get(..1).unwrap_or_default())
        }
        _ => false,
    };
    here || e.children().into_iter().any(|c| too_long(c, column))
}

/// The most bytes output column `col` of `node` may hold as text; `None` if not bounded.
fn longest(node: &Node, col: usize, catalog: &Catalog) -> Option<u64> {
    match node {
        Node::Base { table, columns, .. } => {
            let c = catalog.column(table, columns.get(col)?)?;
            match c.ty {
                SqlType::Text | SqlType::Bytes | SqlType::Json => Some(c.max_bytes.unwrap_or(0)),
                _ => Some(NOT_TEXT),
            }
        }
        Node::Filter { input, .. } | Node::Distinct { input } | Node::TopK { input, .. } => longest(input, col, catalog),
        Node::Project { input, exprs } => bound(exprs.get(col)?, &|c| longest(input, c, catalog)),
        Node::Join { left, right, .. } => {
            let lw = left.width();
            if col < lw { longest(left, col, catalog) } else { longest(right, col - lw, catalog) }
        }
        Node::Aggregate { input, group, aggs, .. } => match col.checked_sub(*group) {
            None => longest(input, col, catalog),
            Some(a) => match aggs.get(a)? {
                a if matches!(a.kind, AggKind::Min | AggKind::Max) => longest(input, a.arg, catalog),
                _ => Some(NOT_TEXT),
            },
        },
        Node::Union { inputs } => inputs.iter().map(|i| longest(i, col, catalog)).try_fold(0, |m, n| Some(m.max(n?))),
    }
}

/// The most bytes `e` may take as text, its columns bounded by `column`; `None` if not
/// bounded (REPLACE may grow its text).
fn bound(e: &Expr, column: &dyn Fn(usize) -> Option<u64>) -> Option<u64> {
    let most = |es: Vec<&Expr>| es.into_iter().try_fold(0, |m, e| Some(m.max(bound(e, column)?)));
    match e {
        Expr::Col(c) => column(*c),
        Expr::Lit(l) => Some(match &l.0 {
            Value::Text(s, _) => s.len() as u64,
            Value::Bytes(b) => b.len() as u64,
            _ => NOT_TEXT,
        }),
        Expr::Func(Func::Concat, args) => args.iter().try_fold(0u64, |sum, a| sum.checked_add(bound(a, column)?)),
        // A case mapping may take more bytes per character (`ɐ` is two, `Ɐ` three).
        Expr::Func(Func::Upper | Func::Lower, args) => bound(args.first()?, column)?.checked_mul(2),
        Expr::Func(Func::Trim | Func::Left | Func::Right | Func::Substring, args) => bound(args.first()?, column),
        Expr::Func(Func::Replace, _) => None,
        Expr::Func(Func::Coalesce | Func::IfNull, args) => most(args.iter().collect()),
        Expr::Func(Func::If, args) => most(args.iter().skip(1).collect()),
        Expr::Func(Func::NullIf, args) => most(args.iter().take(1).collect()),
        Expr::Case { whens, otherwise, .. } => most(whens.iter().map(|(_, then)| then).chain(otherwise.as_deref()).collect()),
        Expr::Typed(e, _) => bound(e, column),
        _ => Some(NOT_TEXT),
    }
}
