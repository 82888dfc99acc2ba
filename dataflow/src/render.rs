//! Rendering an operator subtree as MySQL SQL, restricted to a set of partitions: the query an
//! upstream fill source runs so that the server computes the missing state (e.g.
//! `SELECT ... COUNT(*) ... WHERE story_id IN (?, ?) GROUP BY ...`) instead of shipping rows.
//!
//! Owns: [`render_fill`]. Does not own: running the SQL or tying it to a binlog position (cdc).
//!
//! Invariants: every derived table's columns are named `c0..cN` in the node's output order, so
//! a result row lines up with the node's output; each base table gets
//! `WHERE key IN (?, ...)`, the partition restriction, with one parameter per key value, in the
//! order they appear in the text. Top-k subtrees are rendered with a global ORDER BY/LIMIT,
//! which is correct for one partition only; the view never asks the server for a top-k state
//! (it seeds top-k from its input), so this only matters to callers rendering a subtree
//! themselves.

use crate::expr::Expr;
use crate::ops::Key;
use crate::plan::{AggKind, JoinKind, Node, OrderSpec};
use crate::value::Value;

fn ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

fn cols(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("c{i}")).collect()
}

struct Ctx<'a> {
    keys: &'a [Key],
    params: Vec<Value>,
    alias: usize,
}

impl Ctx<'_> {
    fn alias(&mut self) -> String {
        self.alias += 1;
        format!("t{}", self.alias)
    }
}

/// Renders `node` restricted to `keys`. With `grouped`, the output is `[node columns...,
/// COUNT(*)]` grouped by all node columns, i.e. the node's output as a multiset with counts.
/// Returns the SQL text (with `?` placeholders) and the parameter values in order.
pub fn render_fill(node: &Node, keys: &[Key], grouped: bool) -> (String, Vec<Value>) {
    render_fill_capped(node, keys, grouped, None, &[])
}

/// Like [`render_fill`]; with `cap = Some((order, n))` only the first `n` rows of each
/// partition in `order` are returned (ties broken by every column), via `ROW_NUMBER()`
/// (MySQL 8, MariaDB 10.2+) or, for a single partition, `LIMIT`.
///
/// `text[i]` says column `i` holds text. The dataflow keeps rows by their exact bytes (`'a'`,
/// `'A'` and `'a '` are three rows under a case-insensitive PAD SPACE collation) and breaks
/// ties by them, so a grouped fill groups a text column by its bytes as well, and a capped
/// fill breaks ties by them: the server's `GROUP BY` and `ORDER BY` compare under the
/// collation, and would merge the three into one counted row or cut among them at random.
pub fn render_fill_capped(
    node: &Node,
    keys: &[Key],
    grouped: bool,
    cap: Option<(&OrderSpec, usize)>,
    text: &[bool],
) -> (String, Vec<Value>) {
    let exact = |i: usize| if text.get(i) == Some(&true) { format!("CAST(c{i} AS BINARY)") } else { format!("c{i}") };
    let mut ctx = Ctx { keys, params: Vec::new(), alias: 0 };
    let inner = render(node, &mut ctx);
    if let Some((order, n)) = cap {
        let w = node.width();
        let mut ob: Vec<String> = order.iter().map(|(c, d)| format!("c{c}{}", if *d { " DESC" } else { "" })).collect();
        ob.extend((0..w).map(exact));
        let kp = node.key_positions();
        let (t, t2) = (ctx.alias(), ctx.alias());
        let sql = if kp.is_empty() {
            format!("SELECT * FROM ({inner}) AS {t} ORDER BY {} LIMIT {n}", ob.join(", "))
        } else {
            let part: Vec<String> = kp.iter().map(|k| format!("c{k}")).collect();
            format!(
                "SELECT {} FROM (SELECT {t}.*, ROW_NUMBER() OVER (PARTITION BY {} ORDER BY {}) AS freshet_rn FROM ({inner}) AS {t}) AS {t2} WHERE freshet_rn <= {n}",
                cols(w).join(", "),
                part.join(", "),
                ob.join(", ")
            )
        };
        return (sql, ctx.params);
    }
    let sql = if grouped {
        let w = node.width();
        let t = ctx.alias();
        let c = cols(w).join(", ");
        let sep = if w == 0 { "" } else { ", " };
        let by: Vec<String> =
            (0..w).flat_map(|i| if text.get(i) == Some(&true) { vec![format!("c{i}"), exact(i)] } else { vec![format!("c{i}")] }).collect();
        let group = if w == 0 { String::new() } else { format!(" GROUP BY {}", by.join(", ")) };
        format!("SELECT {c}{sep}COUNT(*) AS c{w} FROM ({inner}) AS {t}{group}")
    } else {
        inner
    };
    (sql, ctx.params)
}

fn render(node: &Node, ctx: &mut Ctx<'_>) -> String {
    match node {
        Node::Base { table, columns, key, .. } => {
            let list: Vec<String> = columns.iter().enumerate().map(|(i, c)| format!("{} AS c{i}", ident(c))).collect();
            let mut sql = format!("SELECT {} FROM {}", list.join(", "), ident(table));
            if !key.is_empty() {
                let kc: Vec<String> = key.iter().map(|&k| ident(columns.get(k).map(String::as_str).unwrap_or("?"))).collect();
                let mut tuples = Vec::new();
                for k in ctx.keys {
                    ctx.params.extend(k.iter().cloned());
                    let ph = vec!["?"; k.len()].join(", ");
                    tuples.push(if k.len() == 1 { ph } else { format!("({ph})") });
                }
                let lhs = if kc.len() == 1 { kc.join("") } else { format!("({})", kc.join(", ")) };
                sql += &format!(" WHERE {lhs} IN ({})", tuples.join(", "));
            }
            sql
        }
        Node::Filter { input, pred } => {
            let inner = render(input, ctx);
            let t = ctx.alias();
            format!("SELECT * FROM ({inner}) AS {t} WHERE {}", pred.to_sql(&cols(input.width())))
        }
        Node::Project { input, exprs } => {
            let inner = render(input, ctx);
            let t = ctx.alias();
            let names = cols(input.width());
            let list: Vec<String> = exprs.iter().enumerate().map(|(i, e)| format!("{} AS c{i}", e.to_sql(&names))).collect();
            // No column read above it (`COUNT(*)` alone): SQL has no empty select list, so a
            // constant stands for the rows, which nothing above reads.
            let list = if list.is_empty() { "1 AS c0".to_string() } else { list.join(", ") };
            format!("SELECT {list} FROM ({inner}) AS {t}")
        }
        Node::Join { left, right, on, kind } => {
            let (l, r) = (render(left, ctx), render(right, ctx));
            let (lt, rt) = (ctx.alias(), ctx.alias());
            let lw = left.width();
            let mut list: Vec<String> = (0..lw).map(|i| format!("{lt}.c{i} AS c{i}")).collect();
            list.extend((0..right.width()).map(|i| format!("{rt}.c{i} AS c{}", lw + i)));
            let cond: Vec<String> = on.iter().map(|(a, b)| format!("{lt}.c{a} = {rt}.c{b}")).collect();
            let j = if *kind == JoinKind::Left { "LEFT JOIN" } else { "JOIN" };
            format!("SELECT {} FROM ({l}) AS {lt} {j} ({r}) AS {rt} ON {}", list.join(", "), cond.join(" AND "))
        }
        Node::Aggregate { input, group, aggs, .. } => {
            let inner = render(input, ctx);
            let t = ctx.alias();
            let mut list: Vec<String> = (0..*group).map(|i| format!("c{i}")).collect();
            for (i, a) in aggs.iter().enumerate() {
                let c = format!("c{}", a.arg);
                let e = match a.kind {
                    AggKind::CountStar => "COUNT(*)".to_string(),
                    AggKind::CountNotNull => format!("COALESCE(SUM({c}), 0)"),
                    AggKind::CountDistinct => format!("COUNT(DISTINCT {c})"),
                    AggKind::Sum => format!("SUM({c})"),
                    AggKind::Avg => format!("AVG({c})"),
                    AggKind::Min => format!("MIN({c})"),
                    AggKind::Max => format!("MAX({c})"),
                };
                list.push(format!("{e} AS c{}", group + i));
            }
            let gb = if *group == 0 { String::new() } else { format!(" GROUP BY {}", cols(*group).join(", ")) };
            format!("SELECT {} FROM ({inner}) AS {t}{gb}", list.join(", "))
        }
        Node::Distinct { input } => {
            let inner = render(input, ctx);
            let t = ctx.alias();
            format!("SELECT DISTINCT * FROM ({inner}) AS {t}")
        }
        Node::TopK { input, order, limit, offset } => {
            let inner = render(input, ctx);
            let t = ctx.alias();
            let ob: Vec<String> = order.iter().map(|(c, d)| format!("c{c}{}", if *d { " DESC" } else { "" })).collect();
            let ob = if ob.is_empty() { String::new() } else { format!(" ORDER BY {}", ob.join(", ")) };
            format!("SELECT * FROM ({inner}) AS {t}{ob} LIMIT {limit} OFFSET {offset}")
        }
        Node::Union { inputs } => {
            let mut parts = Vec::new();
            for i in inputs {
                let inner = render(i, ctx);
                let t = ctx.alias();
                parts.push(format!("SELECT * FROM ({inner}) AS {t}"));
            }
            parts.join(" UNION ALL ")
        }
    }
}

/// Renders a scalar expression over columns named `c0..` (used by tests and EXPLAIN).
pub fn expr_sql(e: &Expr, width: usize) -> String {
    e.to_sql(&cols(width))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Node {
        Node::Base { occ: 0, table: "t".into(), columns: vec!["id".into(), "name".into()], key: vec![0] }
    }

    /// Text columns are grouped and tie-broken by their bytes too, other columns as they are.
    #[test]
    fn text_columns_group_and_break_ties_by_their_bytes() {
        let keys = [vec![Value::Int(1)].into()];
        let (sql, _) = render_fill_capped(&base(), &keys, true, None, &[false, true]);
        assert!(sql.ends_with(" GROUP BY c0, c1, CAST(c1 AS BINARY)"), "{sql}");
        let order = vec![(1, false)];
        let (sql, _) = render_fill_capped(&base(), &keys, false, Some((&order, 3)), &[false, true]);
        assert!(sql.contains("ORDER BY c1, c0, CAST(c1 AS BINARY)) AS freshet_rn"), "{sql}");
        let (sql, _) = render_fill_capped(&base(), &keys, true, None, &[]);
        assert!(sql.ends_with(" GROUP BY c0, c1"), "{sql}");
    }
}
