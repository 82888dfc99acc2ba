//! `EXPLAIN CACHE`: a compiled view described as `(section, detail)` lines for an admin
//! statement to print as a two-column result set.
//!
//! Owns: [`Dataflow::explain`] (an installed view) and [`explain_sql`] (a query that is not
//! installed, or why it cannot be). Does not own: the facts it prints; they come from the plan
//! (`plan`), the cost bounds (`cost`) and the fill request builder (`seeding`), so what is
//! printed is what runs.
//!
//! Sections, in order: `query` (the SQL), `graph` (one line per operator, pre-order, indented
//! two spaces per depth; an operator's expressions name its input columns `c0..` by position,
//! "partition key at output" names its own output columns),
//! `state` (one line per state kept), `cost` (hit, per-table fill and write bounds, class),
//! `fill sql` (each statement a fill of one missing partition sends an upstream fill source,
//! with `?` for the key values), `domain` (installed views only: the views sharing state).

use super::seeding::build_request;
use super::{Dataflow, Domain};
use crate::compile::{Catalog, CompiledQuery, Refusal, compile};
use crate::cost::cost_bounds;
use crate::delta::Position;
use crate::fill::{FillTicket, ViewId};
use crate::ops::{DEFAULT_TOPK_SLACK, Key};
use crate::plan::{AggKind, JoinKind, Node};
use crate::render::expr_sql;
use crate::value::Value;

/// Lines of an explanation: `(section, detail)`.
pub type Explanation = Vec<(String, String)>;

impl Dataflow {
    /// Explains installed view `v` (see the module header for the sections), or `None` if
    /// there is no such view. The `fill sql` lines are those of the view's domain: a fill
    /// seeds every state of the views sharing its partitions.
    pub fn explain(&self, v: ViewId) -> Option<Explanation> {
        let view = self.view(v)?;
        let domain = self.domains.get(view.domain)?.as_ref()?;
        let mut out = describe(&view.q, &self.catalog);
        out.extend(fill_lines(domain, v, view.q.key_columns.len()));
        let others: Vec<ViewId> = self.domain_of(v).into_iter().filter(|o| *o != v).collect();
        if others.is_empty() {
            out.push(line("domain", "no other view shares this view's state"));
        }
        for o in others {
            let sql = self.query(o).map(|q| q.sql.as_str()).unwrap_or("");
            out.push(line("domain", format!("shares operators and partitions with view {}: {sql}", o.0)));
        }
        Some(out)
    }
}

/// Explains `sql` as it would be cached (without the `domain` section: sharing depends on
/// what else is installed), or returns why it cannot be cached.
pub fn explain_sql(sql: &str, catalog: &Catalog) -> Result<Explanation, Refusal> {
    let q = compile(sql, catalog)?;
    let mut out = describe(&q, catalog);
    let mut domain = Domain::new(DEFAULT_TOPK_SLACK);
    domain.add_view(ViewId(0), &q.root, catalog);
    out.extend(fill_lines(&domain, ViewId(0), q.key_columns.len()));
    Ok(out)
}

fn line(section: &str, detail: impl Into<String>) -> (String, String) {
    (section.to_string(), detail.into())
}

/// The `query`, `graph`, `state` and `cost` sections.
fn describe(q: &CompiledQuery, catalog: &Catalog) -> Explanation {
    let mut out = vec![line("query", q.sql.clone())];
    let mut graph = Vec::new();
    walk(&q.root, 0, &mut graph);
    out.extend(graph.into_iter().map(|g| line("graph", g)));
    let keys: Vec<&str> = q.key_columns.iter().map(|k| k.name.as_str()).collect();
    let partitioning = if keys.is_empty() {
        "one partition (no parameters): filled and evicted whole".to_string()
    } else {
        format!("partitioned by {}: each parameter value filled and evicted on its own", keys.join(", "))
    };
    for n in q.root.post_order() {
        if !n.is_stateful() {
            continue;
        }
        let extra = match n {
            Node::Join { .. } if n.is_dimension_join() => "; holds the dimension rows its partition's join keys cover",
            Node::TopK { .. } => "; keeps OFFSET + LIMIT + slack rows per partition",
            _ => "",
        };
        out.push(line("state", format!("{}: partial, {partitioning}{extra}", n.op_name())));
    }
    out.push(line("state", format!("reader: partial, {partitioning}; {} published columns", q.published)));
    let cost = cost_bounds(q, catalog);
    out.push(line("cost", format!("hit: {}", cost.hit)));
    for t in &cost.tables {
        let kind = if t.dimension {
            "dimension table"
        } else if cost.single_partition {
            "whole table"
        } else {
            "partition-keyed table"
        };
        out.push(line("cost", format!("{} ({kind}): fill reads {}, write {}", t.table, t.fill_rows, t.write)));
    }
    out.push(line("cost", format!("class: {}", cost.class())));
    out
}

/// The `fill sql` section: the state queries of a fill of one partition of `domain`.
fn fill_lines(domain: &Domain, v: ViewId, key_width: usize) -> Explanation {
    let key: Key = vec![Value::Null; key_width].into();
    let ticket = FillTicket { domain: 0, epoch: domain.epoch };
    let req = build_request(domain, v, ticket, vec![key], Position(0));
    req.queries.into_iter().map(|sq| line("fill sql", sq.sql)).collect()
}

/// One graph line per node, pre-order, indented by depth.
fn walk(n: &Node, depth: usize, out: &mut Vec<String>) {
    let cols = |w: usize| (0..w).map(|i| format!("c{i}")).collect::<Vec<_>>();
    let detail = match n {
        Node::Base { table, columns, key, occ } => {
            let role = if key.is_empty() {
                String::new()
            } else {
                let names: Vec<&str> = key.iter().map(|&k| columns.get(k).map(String::as_str).unwrap_or("?")).collect();
                format!(" keyed by {}", names.join(", "))
            };
            format!("{table} (occurrence {occ}){role}")
        }
        Node::Filter { input, pred } => format!("WHERE {}", expr_sql(pred, input.width())),
        Node::Project { input, exprs } => exprs.iter().map(|e| expr_sql(e, input.width())).collect::<Vec<_>>().join(", "),
        Node::Join { left, on, kind, .. } => {
            let lw = left.width();
            let on: Vec<String> = on.iter().map(|(a, b)| format!("c{a} = c{}", lw + b)).collect();
            let dim = if n.is_dimension_join() { " (dimension)" } else { "" };
            let k = if *kind == JoinKind::Left { "LEFT " } else { "" };
            format!("{k}ON {}{dim}", on.join(" AND "))
        }
        Node::Aggregate { group, aggs, global, .. } => {
            let a: Vec<String> = aggs
                .iter()
                .map(|a| {
                    let c = format!("c{}", a.arg);
                    match a.kind {
                        AggKind::CountStar => "COUNT(*)".to_string(),
                        AggKind::CountNotNull => format!("COUNT(non-null {c})"),
                        AggKind::CountDistinct => format!("COUNT(DISTINCT {c})"),
                        AggKind::Sum => format!("SUM({c})"),
                        AggKind::Avg => format!("AVG({c})"),
                        AggKind::Min => format!("MIN({c})"),
                        AggKind::Max => format!("MAX({c})"),
                    }
                })
                .collect();
            let g = if *global { " (no GROUP BY: one group per partition)".to_string() } else { String::new() };
            format!("GROUP BY {}: {}{g}", cols(*group).join(", "), a.join(", "))
        }
        Node::Distinct { .. } => String::new(),
        Node::TopK { order, limit, offset, .. } => {
            let ob: Vec<String> = order.iter().map(|(c, d)| format!("c{c}{}", if *d { " DESC" } else { "" })).collect();
            format!("ORDER BY {} LIMIT {limit} OFFSET {offset}", ob.join(", "))
        }
        Node::Union { inputs } => format!("{} inputs", inputs.len()),
    };
    let kp = n.key_positions();
    let part = if kp.is_empty() {
        String::new()
    } else {
        format!("; partition key at output {}", kp.iter().map(|k| format!("c{k}")).collect::<Vec<_>>().join(", "))
    };
    let state = if n.is_stateful() { "partial state" } else { "stateless" };
    let sep = if detail.is_empty() { "" } else { " " };
    out.push(format!("{}{}{sep}{detail}{part}; {state}", "  ".repeat(depth), n.op_name()));
    for i in n.inputs() {
        walk(i, depth + 1, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ByteSize;
    use crate::schema::{ColumnSchema, SqlType, TableSchema};
    use crate::value::Collation;

    fn catalog() -> Catalog {
        let i = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 8, unsigned: false });
        let t = |n: &str| ColumnSchema::new(n, SqlType::Text).with_collation(Some(Collation::Utf8mb4GeneralCi));
        let mut c = Catalog::new();
        c.add(TableSchema::new("users", vec![i("id"), t("name")], vec![0])).unwrap();
        c.add(TableSchema::new("comments", vec![i("id"), i("story_id"), i("author_id"), t("body")], vec![0])).unwrap();
        c.add(TableSchema::new("votes", vec![i("user_id"), i("story_id")], vec![0, 1])).unwrap();
        c
    }

    fn section<'a>(e: &'a Explanation, s: &str) -> Vec<&'a str> {
        e.iter().filter(|(k, _)| k == s).map(|(_, d)| d.as_str()).collect()
    }

    const COMMENTS: &str =
        "SELECT comments.id, users.name FROM comments JOIN users ON users.id = comments.author_id WHERE comments.story_id = ?";
    const COUNT: &str = "SELECT story_id, COUNT(*) FROM votes WHERE story_id = ? GROUP BY story_id";

    #[test]
    fn explains_an_installed_view_and_the_same_query_uninstalled() {
        let mut df = Dataflow::new(catalog(), ByteSize(1 << 20));
        let v = df.install_sql(COMMENTS).unwrap();
        let e = df.explain(v).unwrap();
        assert_eq!(section(&e, "query"), vec![COMMENTS]);
        let graph = section(&e, "graph");
        assert!(graph[0].starts_with("project ") && graph[0].ends_with("stateless"), "{graph:?}");
        assert!(graph.iter().any(|g| g.starts_with("  join ON c2 = c3 (dimension)") && g.ends_with("partial state")), "{graph:?}");
        // The join keeps of a comment only what the query reads (compile's `prune`): not its body.
        assert!(graph.iter().any(|g| g.starts_with("    project c0, c1, c2;")), "{graph:?}");
        assert!(graph.iter().any(|g| g.starts_with("      base comments (occurrence 0) keyed by story_id")), "{graph:?}");
        assert!(graph.iter().any(|g| g.starts_with("    base users (occurrence 1);")), "{graph:?}");
        let state = section(&e, "state");
        assert!(state[0].starts_with("join: partial, partitioned by comments.story_id"), "{state:?}");
        assert!(state.last().unwrap().starts_with("reader: partial"));
        let cost = section(&e, "cost");
        assert_eq!(cost[0], "hit: constant");
        assert!(
            cost.iter().any(|c| c.starts_with("users (dimension table): fill reads linear in partition, write per filled partition")),
            "{cost:?}"
        );
        assert_eq!(*cost.last().unwrap(), "class: fan-out");
        let fill = section(&e, "fill sql");
        assert!(!fill.is_empty() && fill.iter().all(|f| f.starts_with("SELECT ")), "{fill:?}");
        assert!(fill[0].contains("WHERE `story_id` IN (?)"), "{fill:?}");
        assert_eq!(section(&e, "domain"), vec!["no other view shares this view's state"]);

        // The uninstalled explanation is the same but for the domain.
        let u = explain_sql(COMMENTS, df.catalog()).unwrap();
        let without: Explanation = e.iter().filter(|(s, _)| s != "domain").cloned().collect();
        assert_eq!(u, without);

        // A second view sharing the join state names the first in its domain.
        let w = df.install_sql(&format!("{COMMENTS} ORDER BY comments.id")).unwrap();
        assert_ne!(v, w);
        let d = section(&df.explain(w).unwrap(), "domain").join("\n");
        assert!(d.contains(&format!("view {}: {COMMENTS}", v.0)), "{d}");
        assert!(df.explain(ViewId(99)).is_none());
    }

    #[test]
    fn explains_aggregates_parameterless_views_and_refusals() {
        let e = explain_sql(COUNT, &catalog()).unwrap();
        let graph = section(&e, "graph");
        assert!(graph.iter().any(|g| g.contains("aggregate GROUP BY c0, c1: COUNT(*)")), "{graph:?}");
        let fill = section(&e, "fill sql");
        assert!(fill.iter().any(|f| f.contains("COUNT(*)") && f.contains("IN (?)")), "{fill:?}");
        assert_eq!(*section(&e, "cost").last().unwrap(), "class: linear in partition");

        let e = explain_sql("SELECT COUNT(*) FROM votes", &catalog()).unwrap();
        assert!(section(&e, "state")[0].contains("one partition (no parameters)"));
        assert!(section(&e, "fill sql").iter().all(|f| !f.contains('?')));
        assert_eq!(*section(&e, "cost").last().unwrap(), "class: linear in table");

        let e = explain_sql("SELECT id, name FROM users WHERE id = ?", &catalog()).unwrap();
        assert_eq!(*section(&e, "cost").last().unwrap(), "class: constant");

        let r = explain_sql("SELECT NOW() FROM users", &catalog()).unwrap_err();
        assert!(r.reason.contains("NOW"), "{r}");
    }
}
