//! ENUM and SET columns, where the dataflow's values mean what the server's mean.
//!
//! The dataflow holds an ENUM as its index and a SET as its bit mask. The server agrees with
//! that for some uses only: selecting the column, grouping, DISTINCT, ORDER BY (by index), IS
//! NULL, and an ENUM compared with `=`, `<>`, `<=>` or `IN` to a string constant or a `?`
//! (whose label is found under the column's collation when the query compiles or the
//! parameter is bound, [`crate::schema::enum_index`]). Everywhere else the server compares or
//! renders them as strings (`LIKE`, `<`, `BETWEEN`, `MIN`/`MAX`, functions, a join with
//! another column, a number, and any comparison of a SET), which an index cannot reproduce:
//! such a query is refused, so it is relayed.
//!
//! JSON columns likewise: MariaDB's JSON is a LONGTEXT under utf8mb4_bin, compared, searched
//! and measured as text (`j = '[2]'`), MySQL 8's a type compared as JSON values, and a view
//! holds it as a kind of its own. It is served selected, grouped, ordered or tested for NULL,
//! and refused in any other expression, aggregate, join, key or range.

use super::{Catalog, CompiledQuery, Refusal, refuse};
use crate::expr::{CmpOp, Expr};
use crate::plan::{AggKind, Node};
use crate::schema::SqlType;
use crate::value::Value;

/// Refuses `q` if it uses an ENUM, SET or JSON column other than as the module header allows.
pub(super) fn check(q: &CompiledQuery, catalog: &Catalog) -> Result<(), Refusal> {
    let labelled = |node: &Node, col: usize| -> Option<Kind> {
        let (table, column) = node.origin_column(col)?;
        match catalog.column(table, column)?.ty {
            SqlType::Enum(_) => Some(Kind::Enum),
            SqlType::Set(_) => Some(Kind::Set),
            SqlType::Json => Some(Kind::Json),
            _ => None,
        }
    };
    // An aggregate of the values themselves, not a count of them.
    let by_value = |k: AggKind| !matches!(k, AggKind::CountStar | AggKind::CountNotNull | AggKind::CountDistinct);
    for node in q.root.post_order() {
        match node {
            Node::Filter { input, pred } => uses(pred, &|c| labelled(input, c))?,
            Node::Project { input, exprs } => {
                for e in exprs.iter().filter(|e| !matches!(e, Expr::Col(_))) {
                    uses(e, &|c| labelled(input, c))?;
                }
            }
            Node::Join { left, right, on, .. } if on.iter().any(|&(l, r)| labelled(left, l).is_some() || labelled(right, r).is_some()) => {
                return refused();
            }
            Node::Aggregate { input, aggs, .. } if aggs.iter().any(|a| by_value(a.kind) && labelled(input, a.arg).is_some()) => {
                return refused();
            }
            _ => {}
        }
    }
    let range_on_labels = q.read_filters.iter().any(|f| matches!(f.column_type.ty, SqlType::Enum(_) | SqlType::Set(_) | SqlType::Json));
    let set_key = q.key_columns.iter().any(|k| matches!(k.ty, SqlType::Set(_) | SqlType::Json));
    if range_on_labels || set_key {
        return refused();
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Enum,
    Set,
    Json,
}

fn refused() -> Result<(), Refusal> {
    refuse(
        "an ENUM, SET or JSON column can be cached only as itself, grouped or ordered, or (an ENUM) compared with =, <> or IN to strings; the server compares it as a string elsewhere",
    )
}

/// Refuses an expression that uses a column `labelled` says is an ENUM or SET other than as
/// an ENUM compared for equality with a constant the compiler turned into its index.
fn uses(e: &Expr, labelled: &dyn Fn(usize) -> Option<Kind>) -> Result<(), Refusal> {
    let is_enum = |x: &Expr| matches!(x, Expr::Col(c) if labelled(*c) == Some(Kind::Enum));
    let index = |x: &Expr| matches!(x, Expr::Lit(l) if matches!(l.0, Value::Enum(_) | Value::Null));
    match e {
        Expr::Col(c) if labelled(*c).is_some() => refused(),
        Expr::Cmp(CmpOp::Eq | CmpOp::NotEq | CmpOp::NullSafeEq, a, b) if (is_enum(a) && index(b)) || (is_enum(b) && index(a)) => Ok(()),
        Expr::InList { expr, list, .. } if is_enum(expr) && list.iter().all(index) => Ok(()),
        Expr::IsNull(x, _) if matches!(**x, Expr::Col(_)) => Ok(()),
        _ => e.children().into_iter().try_for_each(|x| uses(x, labelled)),
    }
}
