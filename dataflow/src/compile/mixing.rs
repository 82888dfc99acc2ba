//! Strings of two collations met in one comparison or one string value. The server decides
//! the collation of such an operation by the operands' coercibility: two columns of the same
//! character set and different collations compare under the `_bin` one if there is one, and
//! are an error otherwise ("Illegal mix of collations"); a string built from both (`CONCAT`,
//! `IF`, `COALESCE`) has no collation, so comparing, grouping or ordering it is an error or
//! binary. A view compares under its first operand's collation, so such a query is refused:
//! any comparison (`=`, `<`, `<=>`, `LIKE`, `IN`, `BETWEEN`, `NULLIF`, `CASE x WHEN`) or string
//! function whose text operands read text columns of two collations. A literal compared with a
//! column takes the column's collation (`lower::coerce_pair`), so it mixes nothing. Join keys
//! are checked by their own rule (`types::joinable`).
//!
//! Text made of literals alone (`CASE ... THEN 'Yes' ELSE 'yes' END`, `CONCAT('a', n)`) has
//! the session's `collation_connection` on the server and general_ci in a view. A query that
//! compares, groups, orders or deduplicates such text is marked
//! (`CompiledQuery::literal_text`), and the proxy serves it only to sessions on general_ci.

use super::{Catalog, Refusal, refuse};
use crate::expr::{Expr, Func};
use crate::plan::{AggKind, Node, OrderSpec};
use crate::schema::SqlType;
use crate::value::Collation;

/// Refuses an expression of `root`'s plan that meets text of two collations; returns true if
/// the plan compares, groups, orders or deduplicates text made of literals alone, whose
/// collation is the session's `collation_connection` on the server and general_ci in a view
/// (`CompiledQuery::literal_text`). `order` is the reader's ORDER BY over `root`'s columns.
pub(super) fn check(root: &Node, order: &OrderSpec, catalog: &Catalog) -> Result<bool, Refusal> {
    let is_text = |t: &str, c: &str| catalog.column(t, c).is_some_and(|c| c.ty == SqlType::Text);
    let base = |t: &str, c: &str| catalog.column(t, c).and_then(|c| if c.ty == SqlType::Text { c.collation } else { None });
    // An output column of `node` that holds text no column decides the collation of.
    let literal = |node: &Node, c: usize| node.column_is_text(c, &is_text) && node.column_collation(c, &base).is_none();
    let mut literal_text = order.iter().any(|&(c, _)| literal(root, c));
    for node in root.post_order() {
        let (input, exprs): (&Node, Vec<&Expr>) = match node {
            Node::Filter { input, pred } => (input, vec![pred]),
            Node::Project { input, exprs } => (input, exprs.iter().collect()),
            Node::Aggregate { input, group, aggs, .. } => {
                // Text compared by the aggregate: MIN, MAX, COUNT(DISTINCT).
                let compares =
                    aggs.iter().filter(|a| matches!(a.kind, AggKind::Min | AggKind::Max | AggKind::CountDistinct)).map(|a| a.arg);
                literal_text |= (0..*group).chain(compares).any(|c| literal(input, c));
                continue;
            }
            Node::Distinct { input } => {
                literal_text |= (0..input.width()).any(|c| literal(input, c));
                continue;
            }
            Node::TopK { input, order, .. } => {
                literal_text |= order.iter().any(|&(c, _)| literal(input, c));
                continue;
            }
            _ => continue,
        };
        let collation = |c: usize| if input.column_is_text(c, &is_text) { input.column_collation(c, &base) } else { None };
        let text = |c: usize| input.column_is_text(c, &is_text);
        for e in exprs {
            mixed(e, &Columns { collation: &collation, text: &text }, &mut literal_text)?;
        }
    }
    Ok(literal_text)
}

/// What an expression's input columns are: the collation of each text column (none for text
/// computed from literals alone), and whether it holds text.
struct Columns<'a> {
    collation: &'a dyn Fn(usize) -> Option<Collation>,
    text: &'a dyn Fn(usize) -> bool,
}

/// Refuses `e` if it, or an expression inside it, meets text of two collations; sets
/// `literal_text` if it compares text made of literals alone with text.
fn mixed(e: &Expr, columns: &Columns<'_>, literal_text: &mut bool) -> Result<(), Refusal> {
    let (compared, comparison): (Vec<&Expr>, bool) = match e {
        Expr::Cmp(_, a, b) => (vec![a, b], true),
        Expr::Like { expr, pattern, .. } => (vec![expr, pattern], true),
        Expr::InList { expr, list, .. } => (std::iter::once(&**expr).chain(list).collect(), true),
        Expr::Between { expr, low, high, .. } => (vec![expr, low, high], true),
        Expr::Func(Func::NullIf, args) => (args.iter().collect(), true),
        Expr::Case { operand: Some(x), whens, .. } => (std::iter::once(&**x).chain(whens.iter().map(|(w, _)| w)).collect(), true),
        // A string value built from its parts: its own collations.
        _ => (vec![e], false),
    };
    let mut found = Vec::new();
    for x in &compared {
        x.text_collations(columns.collation, &mut found);
    }
    if found.len() > 1 {
        return refuse(format!(
            "compares or joins into one string text of two collations ({}): the server picks one by coercibility or refuses, a view uses the first",
            found.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
        ));
    }
    // The case of text no column decides the collation of is mapped under the connection's
    // (`UPPER('i')` is `İ` under utf8mb4_turkish_ci).
    if let Expr::Func(Func::Upper | Func::Lower, args) = e {
        let mut own = Vec::new();
        args.iter().for_each(|a| a.text_collations(columns.collation, &mut own));
        *literal_text |= own.is_empty();
    }
    // Text against text, none of it a column's: compared under the connection's collation.
    let null = |x: &Expr| matches!(x, Expr::Lit(l) if l.0.is_null());
    if comparison && found.is_empty() && compared.iter().all(|x| null(x) || x.yields_text(columns.text)) {
        *literal_text |= compared.iter().any(|x| !null(x));
    }
    e.children().into_iter().try_for_each(|c| mixed(c, columns, literal_text))
}
