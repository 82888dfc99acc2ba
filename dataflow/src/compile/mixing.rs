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

use super::{Catalog, Refusal, refuse};
use crate::expr::{Expr, Func};
use crate::plan::Node;
use crate::schema::SqlType;
use crate::value::Collation;

/// Refuses an expression of `root`'s plan that meets text of two collations.
pub(super) fn check(root: &Node, catalog: &Catalog) -> Result<(), Refusal> {
    let is_text = |t: &str, c: &str| catalog.column(t, c).is_some_and(|c| c.ty == SqlType::Text);
    let base = |t: &str, c: &str| catalog.column(t, c).and_then(|c| if c.ty == SqlType::Text { c.collation } else { None });
    for node in root.post_order() {
        let (input, exprs): (&Node, Vec<&Expr>) = match node {
            Node::Filter { input, pred } => (input, vec![pred]),
            Node::Project { input, exprs } => (input, exprs.iter().collect()),
            _ => continue,
        };
        let collation = |c: usize| if input.column_is_text(c, &is_text) { input.column_collation(c, &base) } else { None };
        for e in exprs {
            mixed(e, &collation)?;
        }
    }
    Ok(())
}

/// Refuses `e` if it, or an expression inside it, meets text of two collations.
fn mixed(e: &Expr, collation: &dyn Fn(usize) -> Option<Collation>) -> Result<(), Refusal> {
    let compared: Vec<&Expr> = match e {
        Expr::Cmp(_, a, b) => vec![a, b],
        Expr::Like { expr, pattern, .. } => vec![expr, pattern],
        Expr::InList { expr, list, .. } => std::iter::once(&**expr).chain(list).collect(),
        Expr::Between { expr, low, high, .. } => vec![expr, low, high],
        Expr::Func(Func::NullIf, args) => args.iter().collect(),
        Expr::Case { operand: Some(x), whens, .. } => std::iter::once(&**x).chain(whens.iter().map(|(w, _)| w)).collect(),
        // A string value built from its parts: its own collations.
        _ => vec![e],
    };
    let mut found = Vec::new();
    for x in compared {
        text_collations(x, collation, &mut found);
    }
    if found.len() > 1 {
        return refuse(format!(
            "compares or joins into one string text of two collations ({}): the server picks one by coercibility or refuses, a view uses the first",
            found.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
        ));
    }
    e.children().into_iter().try_for_each(|c| mixed(c, collation))
}

/// Adds to `out` the collations of the text columns `e`'s string value is made of (none for a
/// number, a truth value or a literal).
fn text_collations(e: &Expr, collation: &dyn Fn(usize) -> Option<Collation>, out: &mut Vec<Collation>) {
    let mut add = |parts: &mut dyn Iterator<Item = &Expr>| {
        for p in parts {
            text_collations(p, collation, out);
        }
    };
    match e {
        Expr::Col(c) => {
            if let Some(k) = collation(*c)
                && !out.contains(&k)
            {
                out.push(k);
            }
        }
        Expr::Func(
            Func::Concat
            | Func::Lower
            | Func::Upper
            | Func::Substring
            | Func::Trim
            | Func::Left
            | Func::Right
            | Func::Replace
            | Func::Coalesce
            | Func::IfNull,
            args,
        ) => add(&mut args.iter()),
        Expr::Func(Func::If, args) => add(&mut args.iter().skip(1)),
        Expr::Func(Func::NullIf, args) => add(&mut args.iter().take(1)),
        Expr::Case { whens, otherwise, .. } => add(&mut whens.iter().map(|(_, then)| then).chain(otherwise.as_deref())),
        Expr::Typed(x, _) => text_collations(x, collation, out),
        _ => {}
    }
}
