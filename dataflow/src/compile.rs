//! From a SELECT to an operator tree: parsing (sqlparser, MySQL dialect), name resolution,
//! parameter extraction, join planning, aggregate planning and the reasons for refusing.
//!
//! Owns: [`Catalog`], [`compile`], [`CompiledQuery`], [`Refusal`]. Does not own: running the
//! tree (ops, view), cost bounds (cost), SQL rendering of fills (render).
//!
//! Invariants:
//! - `compile` never panics; anything outside the supported set is a [`Refusal`] whose reason
//!   says what to change (sqlparser's own recursion limit bounds nesting depth).
//! - `?` parameters are accepted only as top-level `column = ?` / `column IN (?, ...)`
//!   conjuncts of WHERE; they define the partition key. Every table occurrence must have a
//!   column equal to each key column (through JOIN ... ON equalities), which is what makes the
//!   partitions independent (see `plan`).
//! - The tree's root output is `[select list..., hidden ORDER BY columns..., hidden key
//!   columns...]`; the first `visible` columns are the query's result columns, in its order.

use std::collections::HashMap;
use std::ops::ControlFlow;

use sqlparser::ast::{self as a, visit_expressions};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use crate::expr::{parse_temporal, ArithOp, CmpOp, Expr, Func, LitValue};
use crate::plan::{AggKind, AggSpec, JoinKind, Node, OrderSpec};
use crate::schema::{SchemaError, SqlType, TableSchema};
use crate::value::{Collation, Decimal, Value};

/// Why a query is not cached. `reason` is written for the person who configured the query.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Refusal {
    /// What is wrong and what to change.
    pub reason: String,
}

fn refuse<T>(reason: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal { reason: reason.into() })
}

/// The base tables queries may read.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    tables: HashMap<String, TableSchema>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Catalog {
        Catalog::default()
    }
    /// Adds or replaces a table after checking its schema.
    pub fn add(&mut self, t: TableSchema) -> Result<(), SchemaError> {
        t.check()?;
        self.tables.insert(t.name.to_ascii_lowercase(), t);
        Ok(())
    }
    /// Removes a table (after DROP TABLE).
    pub fn remove(&mut self, name: &str) {
        self.tables.remove(&name.to_ascii_lowercase());
    }
    /// A table by case-insensitive name.
    pub fn get(&self, name: &str) -> Option<&TableSchema> {
        self.tables.get(&name.to_ascii_lowercase())
    }
    /// All tables.
    pub fn tables(&self) -> impl Iterator<Item = &TableSchema> {
        self.tables.values()
    }
}

/// Type information about one key column, used to coerce lookup parameters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyColumn {
    /// `table.column` of the parameter's column.
    pub name: String,
    pub ty: SqlType,
    pub collation: Option<Collation>,
}

/// A compiled query: the operator tree plus what the reader needs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CompiledQuery {
    /// The text it was compiled from.
    pub sql: String,
    /// Operator tree.
    pub root: Node,
    /// Result column names, in the query's order.
    pub columns: Vec<String>,
    /// Number of result columns (a prefix of the root's output).
    pub visible: usize,
    /// Order of result rows over root output columns (empty = unordered).
    pub order: OrderSpec,
    /// Key columns (one per distinct parameter column), in key order.
    pub key_columns: Vec<KeyColumn>,
    /// For each key column, the indexes of the `?` parameters that feed it (one for `=`,
    /// several for `IN`).
    pub param_slots: Vec<Vec<usize>>,
    /// Total number of `?` parameters.
    pub n_params: usize,
    /// Base tables read, lower-case, without duplicates.
    pub tables: Vec<String>,
    /// The LIMIT, if any (for cost bounds).
    pub limit: Option<usize>,
    /// Range parameters (`col > ?`), applied by the reader at lookup time.
    pub read_filters: Vec<ReadFilter>,
    /// Width of the rows readers keep: the visible columns plus the columns read filters test.
    pub published: usize,
}

/// A `column <op> ?` conjunct evaluated by the reader over a partition's rows.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReadFilter {
    /// Column of the published row it tests.
    pub column: usize,
    /// Comparison, written as `column <op> parameter`.
    pub op: CmpOp,
    /// Index of the `?` parameter.
    pub param: usize,
    /// The column's type, to coerce the parameter.
    pub column_type: KeyColumn,
}

#[derive(Clone, Debug)]
struct ScopeCol {
    qual: String,
    name: String,
    ty: Option<SqlType>,
    /// `Some(None)`: a text column with a collation freshet does not implement.
    coll: Option<Option<Collation>>,
}

#[derive(Clone, Debug, Default)]
struct Scope {
    cols: Vec<ScopeCol>,
}

impl Scope {
    fn find(&self, qual: Option<&str>, name: &str) -> Result<usize, Refusal> {
        let name_l = name.to_ascii_lowercase();
        let hits: Vec<usize> = self
            .cols
            .iter()
            .enumerate()
            .filter(|(_, c)| c.name == name_l && qual.is_none_or(|q| q.eq_ignore_ascii_case(&c.qual)))
            .map(|(i, _)| i)
            .collect();
        match hits.as_slice() {
            [i] => {
                if let Some(Some(None)) = self.cols.get(*i).map(|c| &c.coll) {
                    return refuse(format!(
                        "column `{name}` uses a collation freshet does not implement (supported: binary, utf8mb4_bin, utf8mb4_general_ci, utf8mb4_unicode_ci, utf8mb4_0900_ai_ci); leave it out of the cached query or change its collation"
                    ));
                }
                Ok(*i)
            }
            [] => refuse(format!("unknown column `{}`", qual.map(|q| format!("{q}.{name}")).unwrap_or(name.to_string()))),
            _ => refuse(format!("column `{name}` is ambiguous; qualify it with its table")),
        }
    }
}

/// Aggregates discovered while lowering post-GROUP BY expressions.
struct AggCtx {
    key_w: usize,
    groups: Vec<Expr>,
    aggs: Vec<(AggKind, Option<Expr>)>,
}

enum Mode<'a> {
    Pre,
    Post(&'a mut AggCtx),
}

/// Compiles one SELECT against `catalog`.
pub fn compile(sql: &str, catalog: &Catalog) -> Result<CompiledQuery, Refusal> {
    let stmts = match Parser::parse_sql(&MySqlDialect {}, sql) {
        Ok(s) => s,
        Err(e) => return refuse(format!("cannot parse the query: {e}")),
    };
    let [a::Statement::Query(q)] = stmts.as_slice() else {
        return refuse("only a single SELECT statement can be cached");
    };
    let mut n_params = 0usize;
    let _ = visit_expressions(&stmts, |e| {
        if let a::Expr::Value(v) = e {
            if let a::Value::Placeholder(_) = v.value {
                n_params += 1;
            }
        }
        ControlFlow::<()>::Continue(())
    });
    Compiler { catalog, aliases: Default::default(), occ: 0, n_params, next_param: 0 }.query(sql, q)
}

struct Compiler<'a> {
    catalog: &'a Catalog,
    /// Select-list aliases visible to HAVING and ORDER BY (empty elsewhere, as in MySQL).
    aliases: std::cell::RefCell<Vec<(String, a::Expr)>>,
    occ: usize,
    n_params: usize,
    next_param: usize,
}

struct Select {
    root: Node,
    columns: Vec<String>,
    visible: usize,
    order: OrderSpec,
    key_columns: Vec<KeyColumn>,
    param_slots: Vec<Vec<usize>>,
    tables: Vec<String>,
    limit: Option<usize>,
    read_filters: Vec<ReadFilter>,
    published: usize,
}

fn lit_usize(e: &a::Expr, what: &str) -> Result<usize, Refusal> {
    if let a::Expr::Value(v) = e {
        if let a::Value::Number(n, _) = &v.value {
            if let Ok(x) = n.parse::<usize>() {
                return Ok(x);
            }
        }
    }
    refuse(format!("{what} must be a literal non-negative integer"))
}

fn object_name(n: &a::ObjectName) -> Result<String, Refusal> {
    match n.0.last() {
        Some(a::ObjectNamePart::Identifier(i)) => Ok(i.value.clone()),
        _ => refuse(format!("unsupported table name `{n}`")),
    }
}

fn conjuncts(e: &a::Expr, out: &mut Vec<a::Expr>) {
    match e {
        a::Expr::BinaryOp { left, op: a::BinaryOperator::And, right } => {
            conjuncts(left, out);
            conjuncts(right, out);
        }
        a::Expr::Nested(inner) if matches!(**inner, a::Expr::BinaryOp { op: a::BinaryOperator::And, .. }) => {
            conjuncts(inner, out)
        }
        other => out.push(other.clone()),
    }
}

fn is_placeholder(e: &a::Expr) -> bool {
    matches!(e, a::Expr::Value(v) if matches!(v.value, a::Value::Placeholder(_)))
}

fn range_op(op: &a::BinaryOperator) -> Option<CmpOp> {
    Some(match op {
        a::BinaryOperator::Lt => CmpOp::Lt,
        a::BinaryOperator::LtEq => CmpOp::LtEq,
        a::BinaryOperator::Gt => CmpOp::Gt,
        a::BinaryOperator::GtEq => CmpOp::GtEq,
        _ => return None,
    })
}

fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::LtEq => CmpOp::GtEq,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::GtEq => CmpOp::LtEq,
        o => o,
    }
}

fn and_all(mut preds: Vec<Expr>) -> Option<Expr> {
    let first = preds.pop()?;
    Some(preds.into_iter().rev().fold(first, |acc, p| Expr::And(Box::new(p), Box::new(acc))))
}

fn cols_of(e: &Expr) -> Vec<usize> {
    let mut v = Vec::new();
    e.columns(&mut |c| v.push(c));
    v
}

/// Union-find over global column indexes, for join equivalence classes.
struct Classes(Vec<usize>);
impl Classes {
    fn find(&mut self, x: usize) -> usize {
        let mut r = x;
        while self.0[r] != r {
            r = self.0[r];
        }
        self.0[x] = r;
        r
    }
    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        self.0[ra] = rb;
    }
}

impl Compiler<'_> {
    fn query(mut self, sql: &str, q: &a::Query) -> Result<CompiledQuery, Refusal> {
        if q.with.is_some() {
            return refuse("WITH (common table expressions) is not supported");
        }
        if !q.locks.is_empty() || q.for_clause.is_some() {
            return refuse("locking reads (FOR UPDATE / FOR SHARE) must go to the upstream");
        }
        if q.fetch.is_some() || q.settings.is_some() || q.format_clause.is_some() || !q.pipe_operators.is_empty() {
            return refuse("FETCH/SETTINGS/FORMAT clauses are not MySQL and are not supported");
        }
        let (limit, offset) = match &q.limit_clause {
            None => (None, 0),
            Some(a::LimitClause::LimitOffset { limit, offset, limit_by }) => {
                if !limit_by.is_empty() {
                    return refuse("LIMIT BY is not supported");
                }
                let l = limit.as_ref().map(|l| lit_usize(l, "LIMIT")).transpose()?;
                let o = offset.as_ref().map(|o| lit_usize(&o.value, "OFFSET")).transpose()?.unwrap_or(0);
                (l, o)
            }
            Some(a::LimitClause::OffsetCommaLimit { offset, limit }) => {
                (Some(lit_usize(limit, "LIMIT")?), lit_usize(offset, "OFFSET")?)
            }
        };
        if offset > 0 && limit.is_none() {
            return refuse("OFFSET without LIMIT is not supported");
        }
        let order_by: Vec<a::OrderByExpr> = match &q.order_by {
            None => vec![],
            Some(a::OrderBy { kind: a::OrderByKind::Expressions(v), interpolate: None }) => v.clone(),
            Some(_) => return refuse("ORDER BY ALL / INTERPOLATE are not supported"),
        };
        let s = match q.body.as_ref() {
            a::SetExpr::Select(sel) => self.select(sel, &order_by, limit, offset)?,
            a::SetExpr::SetOperation { op: a::SetOperator::Union, set_quantifier: a::SetQuantifier::All, .. } => {
                if !order_by.is_empty() || limit.is_some() {
                    return refuse("ORDER BY / LIMIT on a UNION ALL is not supported; cache the branches separately");
                }
                self.union(q.body.as_ref())?
            }
            a::SetExpr::SetOperation { .. } => {
                return refuse("only UNION ALL is supported (UNION DISTINCT, INTERSECT and EXCEPT are not)")
            }
            a::SetExpr::Query(_) => return refuse("a parenthesized query is not supported; remove the parentheses"),
            _ => return refuse("only SELECT queries can be cached"),
        };
        let used = s.param_slots.iter().map(Vec::len).sum::<usize>() + s.read_filters.len();
        if used != self.n_params {
            return refuse(
                "`?` parameters are supported only as `column = ?`, `column IN (?, ...)` or `column <, <=, >, >= ?` in the top-level AND of the WHERE clause",
            );
        }
        Ok(CompiledQuery {
            sql: sql.to_string(),
            root: s.root,
            columns: s.columns,
            visible: s.visible,
            order: s.order,
            key_columns: s.key_columns,
            param_slots: s.param_slots,
            n_params: self.n_params,
            tables: s.tables,
            limit: s.limit,
            read_filters: s.read_filters,
            published: s.published,
        })
    }

    fn union(&mut self, body: &a::SetExpr) -> Result<Select, Refusal> {
        let mut branches = Vec::new();
        fn collect<'b>(e: &'b a::SetExpr, out: &mut Vec<&'b a::Select>) -> Result<(), Refusal> {
            match e {
                a::SetExpr::Select(s) => {
                    out.push(s);
                    Ok(())
                }
                a::SetExpr::SetOperation { op: a::SetOperator::Union, set_quantifier: a::SetQuantifier::All, left, right } => {
                    collect(left, out)?;
                    collect(right, out)
                }
                _ => refuse("only UNION ALL of plain SELECTs is supported"),
            }
        }
        collect(body, &mut branches)?;
        let mut compiled = Vec::new();
        for b in branches {
            compiled.push(self.select(b, &[], None, 0)?);
        }
        if self.n_params > 0 {
            return refuse("UNION ALL with `?` parameters is not supported yet; cache each branch as its own query");
        }
        let width = compiled[0].visible;
        if compiled.iter().any(|s| s.visible != width || s.root.width() != width) {
            return refuse("UNION ALL branches must have the same number of columns");
        }
        let mut tables: Vec<String> = compiled.iter().flat_map(|s| s.tables.clone()).collect();
        tables.sort();
        tables.dedup();
        let first = compiled.remove(0);
        let mut inputs = vec![first.root];
        inputs.extend(compiled.into_iter().map(|s| s.root));
        Ok(Select {
            root: Node::Union { inputs },
            columns: first.columns,
            visible: width,
            order: vec![],
            key_columns: vec![],
            param_slots: vec![],
            tables,
            limit: None,
            read_filters: vec![],
            published: width,
        })
    }

    fn select(
        &mut self,
        sel: &a::Select,
        order_by: &[a::OrderByExpr],
        limit: Option<usize>,
        offset: usize,
    ) -> Result<Select, Refusal> {
        if sel.top.is_some() || sel.into.is_some() || !sel.lateral_views.is_empty() || sel.prewhere.is_some()
            || !sel.connect_by.is_empty() || !sel.cluster_by.is_empty() || !sel.distribute_by.is_empty()
            || !sel.sort_by.is_empty() || !sel.named_window.is_empty() || sel.qualify.is_some()
            || sel.exclude.is_some() || sel.value_table_mode.is_some()
        {
            return refuse("the query uses a SELECT clause freshet does not support (INTO, WINDOW, ...)");
        }
        if sel.select_modifiers.is_some() {
            return refuse("SELECT modifiers (SQL_NO_CACHE, HIGH_PRIORITY, ...) are not supported; remove them");
        }
        let distinct = match &sel.distinct {
            None | Some(a::Distinct::All) => false,
            Some(a::Distinct::Distinct) => true,
            Some(_) => return refuse("DISTINCT ON is not MySQL"),
        };
        // FROM: one table followed by joins.
        let [twj] = sel.from.as_slice() else {
            return if sel.from.is_empty() {
                refuse("a query without FROM has nothing to cache")
            } else {
                refuse("comma joins are not supported; write `JOIN ... ON` with an equality")
            };
        };
        let mut rels = vec![(&twj.relation, None)];
        for j in &twj.joins {
            let (kind, c) = match &j.join_operator {
                a::JoinOperator::Join(c) | a::JoinOperator::Inner(c) => (JoinKind::Inner, c),
                a::JoinOperator::Left(c) | a::JoinOperator::LeftOuter(c) => (JoinKind::Left, c),
                _ => return refuse("only INNER JOIN and LEFT JOIN are supported (RIGHT, FULL, CROSS, SEMI, ... are not)"),
            };
            let a::JoinConstraint::On(on) = c else {
                return refuse("joins must use `ON` with column equalities (USING and NATURAL are not supported)");
            };
            rels.push((&j.relation, Some((kind, on))));
        }
        let mut scope = Scope::default();
        let mut offsets = Vec::new();
        let mut schemas: Vec<&TableSchema> = Vec::new();
        let mut tables = Vec::new();
        let mut quals: Vec<String> = Vec::new();
        let occ0 = self.occ;
        for (rel, _) in &rels {
            let a::TableFactor::Table { name, alias, args: None, with_hints, version: None, partitions, .. } = rel else {
                return refuse("only plain tables are supported in FROM (no subqueries or table functions)");
            };
            if !with_hints.is_empty() || !partitions.is_empty() {
                return refuse("table hints and PARTITION selection are not supported");
            }
            let tname = object_name(name)?;
            let Some(schema) = self.catalog.get(&tname) else {
                return refuse(format!("unknown table `{tname}` (not in the schema freshet was given)"));
            };
            let qual = alias.as_ref().map(|al| al.name.value.clone()).unwrap_or(tname.clone()).to_ascii_lowercase();
            if quals.contains(&qual) {
                return refuse(format!("table alias `{qual}` is used twice; give each occurrence its own alias"));
            }
            quals.push(qual.clone());
            offsets.push(scope.cols.len());
            for c in &schema.columns {
                let coll = matches!(c.ty, SqlType::Text).then_some(c.collation);
                scope.cols.push(ScopeCol { qual: qual.clone(), name: c.name.to_ascii_lowercase(), ty: Some(c.ty.clone()), coll });
            }
            schemas.push(schema);
            tables.push(schema.name.to_ascii_lowercase());
        }
        self.occ += rels.len();
        let occ_of = |g: usize| offsets.iter().rposition(|&o| o <= g).unwrap_or(0);
        let n = rels.len();
        // ON clauses.
        let mut classes = Classes((0..scope.cols.len()).collect());
        let mut join_on: Vec<Vec<(usize, usize)>> = vec![vec![]; n];
        let mut kinds = vec![JoinKind::Inner; n];
        let mut base_filters: Vec<Vec<Expr>> = vec![vec![]; n];
        let mut residual: Vec<Expr> = Vec::new();
        for (j, (_, jo)) in rels.iter().enumerate() {
            let Some((kind, on)) = jo else { continue };
            kinds[j] = *kind;
            let visible = Scope { cols: scope.cols[..offsets.get(j + 1).copied().unwrap_or(scope.cols.len())].to_vec() };
            let mut cs = Vec::new();
            conjuncts(on, &mut cs);
            for c in cs {
                let e = self.lower(&c, &visible, &mut Mode::Pre)?;
                if let Expr::Cmp(CmpOp::Eq, x, y) = &e {
                    if let (Expr::Col(p), Expr::Col(q)) = (x.as_ref(), y.as_ref()) {
                        let (p, q) = (*p, *q);
                        let (l, r) = if occ_of(p) == j && occ_of(q) < j { (q, p) } else { (p, q) };
                        if occ_of(r) == j && occ_of(l) < j {
                            join_on[j].push((l, r - offsets[j]));
                            classes.union(l, r);
                            continue;
                        }
                    }
                }
                let cols = cols_of(&e);
                if cols.iter().all(|&c| occ_of(c) == j) {
                    base_filters[j].push(e.remap(&|c| c - offsets[j]));
                } else if *kind == JoinKind::Inner {
                    residual.push(e);
                } else {
                    return refuse("a LEFT JOIN's ON clause may only add conditions on the joined table besides the equalities");
                }
            }
            if join_on[j].is_empty() {
                return refuse("each JOIN needs at least one `left.column = right.column` equality in ON");
            }
        }
        // WHERE: parameters, pushdown, residual.
        let mut key_globals: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut param_not_null: Vec<usize> = Vec::new();
        let mut ranges: Vec<(usize, CmpOp, usize)> = Vec::new();
        if let Some(w) = &sel.selection {
            let mut cs = Vec::new();
            conjuncts(w, &mut cs);
            for c in cs {
                let param = match &c {
                    a::Expr::BinaryOp { left, op: a::BinaryOperator::Eq, right } if is_placeholder(right) => Some((left.as_ref(), 1)),
                    a::Expr::BinaryOp { left, op: a::BinaryOperator::Eq, right } if is_placeholder(left) => Some((right.as_ref(), 1)),
                    a::Expr::InList { expr, list, negated: false } if !list.is_empty() && list.iter().all(is_placeholder) => {
                        Some((expr.as_ref(), list.len()))
                    }
                    _ => None,
                };
                let range = match &c {
                    a::Expr::BinaryOp { left, op, right } if is_placeholder(right) && !is_placeholder(left) => {
                        range_op(op).map(|o| (left.as_ref(), o))
                    }
                    a::Expr::BinaryOp { left, op, right } if is_placeholder(left) && !is_placeholder(right) => {
                        range_op(op).map(|o| (right.as_ref(), flip(o)))
                    }
                    _ => None,
                };
                if let Some((col, op)) = range {
                    let g = match self.lower(col, &scope, &mut Mode::Pre)? {
                        Expr::Col(g) => g,
                        _ => return refuse("a `?` parameter must be compared with a plain column"),
                    };
                    ranges.push((g, op, self.next_param));
                    self.next_param += 1;
                    continue;
                }
                if let Some((col, count)) = param {
                    let g = match self.lower(col, &scope, &mut Mode::Pre)? {
                        Expr::Col(g) => g,
                        _ => return refuse("a `?` parameter must be compared with a plain column"),
                    };
                    if key_globals.iter().any(|(k, _)| *k == g) {
                        return refuse("the same column is compared with `?` twice");
                    }
                    let slots: Vec<usize> = (self.next_param..self.next_param + count).collect();
                    self.next_param += count;
                    key_globals.push((g, slots));
                    if kinds[occ_of(g)] == JoinKind::Left {
                        param_not_null.push(g);
                    }
                    continue;
                }
                let e = self.lower(&c, &scope, &mut Mode::Pre)?;
                let cols = cols_of(&e);
                let occs: Vec<usize> = cols.iter().map(|&c| occ_of(c)).collect();
                match occs.first() {
                    Some(&o) if occs.iter().all(|&x| x == o) && kinds[o] == JoinKind::Inner => {
                        base_filters[o].push(e.remap(&|c| c - offsets[o]))
                    }
                    _ => residual.push(e),
                }
            }
        }
        for g in param_not_null {
            residual.push(Expr::IsNull(Box::new(Expr::Col(g)), true));
        }
        // Partition key per table occurrence.
        let mut occ_keys: Vec<Vec<usize>> = vec![vec![]; n];
        for (kg, _) in &key_globals {
            let root = classes.find(*kg);
            for (o, keys) in occ_keys.iter_mut().enumerate() {
                let end = offsets.get(o + 1).copied().unwrap_or(scope.cols.len());
                let Some(m) = (offsets[o]..end).find(|&c| classes.find(c) == root) else {
                    let pc = &scope.cols[*kg];
                    return refuse(format!(
                        "table `{}` is not joined on the parameter column `{}.{}`; freshet partitions a cached query by its `?` parameters, so every table must be joined by an equality on them (or cache the query without parameters)",
                        schemas[o].name, pc.qual, pc.name
                    ));
                };
                keys.push(m - offsets[o]);
            }
        }
        let key_columns: Vec<KeyColumn> = key_globals
            .iter()
            .map(|(g, _)| {
                let c = &scope.cols[*g];
                KeyColumn {
                    name: format!("{}.{}", c.qual, c.name),
                    ty: c.ty.clone().unwrap_or(SqlType::Text),
                    collation: c.coll.flatten(),
                }
            })
            .collect();
        let multi_key = key_globals.iter().any(|(_, s)| s.len() > 1);
        // Build the join tree.
        let mut tree: Option<Node> = None;
        for o in 0..n {
            let mut base = Node::Base {
                occ: occ0 + o,
                table: schemas[o].name.clone(),
                columns: schemas[o].columns.iter().map(|c| c.name.clone()).collect(),
                key: occ_keys[o].clone(),
            };
            if let Some(p) = and_all(std::mem::take(&mut base_filters[o])) {
                base = Node::Filter { input: Box::new(base), pred: p };
            }
            tree = Some(match tree {
                None => base,
                Some(left) => Node::Join { left: Box::new(left), right: Box::new(base), on: join_on[o].clone(), kind: kinds[o] },
            });
        }
        let Some(mut tree) = tree else { return refuse("empty FROM") };
        if let Some(p) = and_all(residual) {
            tree = Node::Filter { input: Box::new(tree), pred: p };
        }
        // Aggregation.
        let group_exprs: Vec<a::Expr> = match &sel.group_by {
            a::GroupByExpr::Expressions(v, mods) if mods.is_empty() => v.clone(),
            _ => return refuse("GROUP BY ALL / WITH ROLLUP are not supported"),
        };
        let select_items = self.expand_select(&sel.projection, &scope)?;
        let has_agg = !group_exprs.is_empty()
            || select_items.iter().any(|(e, _)| contains_agg(e))
            || sel.having.is_some()
            || order_by.iter().any(|o| contains_agg(&o.expr));
        let key_in_tree = tree.key_positions();
        let mut agg_ctx = AggCtx { key_w: key_in_tree.len(), groups: vec![], aggs: vec![] };
        for g in &group_exprs {
            let g = self.resolve_alias(g, &select_items);
            let e = self.lower(&g, &scope, &mut Mode::Pre)?;
            agg_ctx.groups.push(e);
        }
        if has_agg && multi_key {
            // Per-partition groups equal the query's groups only if the query groups by the key.
            let grouped_by_key = key_globals.iter().all(|(kg, _)| {
                agg_ctx.groups.iter().any(|g| matches!(g, Expr::Col(c) if classes.find(*c) == classes.find(*kg)))
            });
            if !grouped_by_key {
                return refuse("with `IN (?, ...)` an aggregate must GROUP BY the parameter column; use `= ?` or add it to GROUP BY");
            }
        }
        let mut mode = if has_agg { Mode::Post(&mut agg_ctx) } else { Mode::Pre };
        let mut exprs = Vec::new();
        let mut columns = Vec::new();
        for (item, name) in &select_items {
            exprs.push(self.lower(item, &scope, &mut mode)?);
            columns.push(name.clone());
        }
        let visible = exprs.len();
        if !ranges.is_empty() && (has_agg || distinct || limit.is_some()) {
            return refuse("a range parameter (`column > ?`) is supported only without GROUP BY, aggregates, DISTINCT or LIMIT; use `=`/`IN` parameters there");
        }
        let mut read_filters = Vec::new();
        for (g, op, param) in &ranges {
            let column = match exprs.iter().position(|e| *e == Expr::Col(*g)) {
                Some(p) => p,
                None => {
                    exprs.push(Expr::Col(*g));
                    columns.push(format!("_range{g}"));
                    exprs.len() - 1
                }
            };
            let c = &scope.cols[*g];
            let column_type = KeyColumn {
                name: format!("{}.{}", c.qual, c.name),
                ty: c.ty.clone().unwrap_or(SqlType::Text),
                collation: c.coll.flatten(),
            };
            read_filters.push(ReadFilter { column, op: *op, param: *param, column_type });
        }
        let published = exprs.len();
        *self.aliases.borrow_mut() = select_items.iter().map(|(x, n)| (n.clone(), x.clone())).collect();
        let having = match &sel.having {
            Some(h) => {
                let h = self.resolve_alias(h, &select_items);
                Some(self.lower(&h, &scope, &mut mode)?)
            }
            None => None,
        };
        let mut order = Vec::new();
        for ob in order_by {
            if ob.with_fill.is_some() || ob.options.nulls_first.is_some() {
                return refuse("NULLS FIRST/LAST and WITH FILL are not MySQL");
            }
            let desc = match ob.options.sort {
                None | Some(a::OrderBySort::Asc) => false,
                Some(a::OrderBySort::Desc) => true,
                Some(_) => return refuse("ORDER BY ... USING is not MySQL"),
            };
            let pos = if let a::Expr::Value(v) = &ob.expr {
                if let a::Value::Number(s, _) = &v.value {
                    match s.parse::<usize>() {
                        Ok(i) if i >= 1 && i <= visible => i - 1,
                        _ => return refuse(format!("ORDER BY position {s} is out of range")),
                    }
                } else {
                    return refuse("ORDER BY a constant is not supported");
                }
            } else {
                let e = self.resolve_alias(&ob.expr, &select_items);
                let e = self.lower(&e, &scope, &mut mode)?;
                match exprs.iter().position(|x| *x == e) {
                    Some(p) => p,
                    None => {
                        if distinct {
                            return refuse("with DISTINCT, ORDER BY columns must be in the select list");
                        }
                        exprs.push(e);
                        columns.push(format!("_order{}", exprs.len()));
                        exprs.len() - 1
                    }
                }
            };
            order.push((pos, desc));
        }
        drop(mode);
        self.aliases.borrow_mut().clear();
        if multi_key && order.iter().any(|&(p, _)| p >= visible) {
            return refuse("with `IN (?, ...)`, ORDER BY columns must be in the select list");
        }
        columns.truncate(visible);
        if has_agg {
            let mut pre: Vec<Expr> = key_in_tree.iter().map(|&k| Expr::Col(k)).collect();
            pre.extend(agg_ctx.groups.iter().cloned());
            let group = pre.len();
            let mut specs = Vec::new();
            for (kind, arg) in &agg_ctx.aggs {
                match arg {
                    Some(e) => {
                        pre.push(e.clone());
                        specs.push(AggSpec { kind: *kind, arg: pre.len() - 1 });
                    }
                    None => specs.push(AggSpec { kind: *kind, arg: 0 }),
                }
            }
            tree = Node::Aggregate {
                input: Box::new(Node::Project { input: Box::new(tree), exprs: pre }),
                group,
                aggs: specs,
                global: group_exprs.is_empty(),
            };
            if let Some(h) = having {
                tree = Node::Filter { input: Box::new(tree), pred: h };
            }
        }
        // Hidden key columns.
        for k in tree.key_positions() {
            if !exprs.contains(&Expr::Col(k)) {
                exprs.push(Expr::Col(k));
                columns.push(format!("_key{k}"));
            }
        }
        tree = Node::Project { input: Box::new(tree), exprs };
        if distinct {
            if multi_key && tree.key_positions().iter().any(|&p| p >= visible) {
                return refuse("DISTINCT with `IN (?, ...)` needs the parameter column in the select list");
            }
            tree = Node::Distinct { input: Box::new(tree) };
        }
        if let Some(l) = limit {
            if multi_key {
                return refuse("LIMIT with `IN (?, ...)` is not supported; use `= ?`");
            }
            tree = Node::TopK { input: Box::new(tree), order: order.clone(), limit: l, offset };
        }
        tables.sort();
        tables.dedup();
        columns.truncate(visible);
        Ok(Select {
            root: tree,
            columns,
            visible,
            order,
            key_columns,
            param_slots: key_globals.into_iter().map(|(_, s)| s).collect(),
            tables,
            limit,
            read_filters,
            published,
        })
    }

    fn expand_select(&self, items: &[a::SelectItem], scope: &Scope) -> Result<Vec<(a::Expr, String)>, Refusal> {
        let mut out = Vec::new();
        let ident = |c: &ScopeCol| {
            a::Expr::CompoundIdentifier(vec![a::Ident::new(c.qual.clone()), a::Ident::new(c.name.clone())])
        };
        for it in items {
            match it {
                a::SelectItem::UnnamedExpr(e) => out.push((e.clone(), e.to_string())),
                a::SelectItem::ExprWithAlias { expr, alias } => out.push((expr.clone(), alias.value.clone())),
                a::SelectItem::Wildcard(opts) => {
                    if opts.opt_exclude.is_some() || opts.opt_except.is_some() || opts.opt_replace.is_some() || opts.opt_rename.is_some() || opts.opt_ilike.is_some() {
                        return refuse("wildcard options are not MySQL");
                    }
                    for c in &scope.cols {
                        out.push((ident(c), c.name.clone()));
                    }
                }
                a::SelectItem::ExprWithAliases { .. } => return refuse("multiple aliases per select item are not MySQL"),
                a::SelectItem::QualifiedWildcard(kind, _) => {
                    let a::SelectItemQualifiedWildcardKind::ObjectName(n) = kind else {
                        return refuse("unsupported wildcard");
                    };
                    let q = object_name(n)?.to_ascii_lowercase();
                    let cols: Vec<&ScopeCol> = scope.cols.iter().filter(|c| c.qual == q).collect();
                    if cols.is_empty() {
                        return refuse(format!("unknown table `{q}` in `{q}.*`"));
                    }
                    for c in cols {
                        out.push((ident(c), c.name.clone()));
                    }
                }
            }
        }
        Ok(out)
    }

    /// An unqualified identifier that names a select alias (and not a column) stands for the
    /// aliased expression, as MySQL allows in GROUP BY, HAVING and ORDER BY.
    fn resolve_alias(&self, e: &a::Expr, items: &[(a::Expr, String)]) -> a::Expr {
        if let a::Expr::Identifier(id) = e {
            if let Some((x, _)) = items.iter().find(|(x, n)| n.eq_ignore_ascii_case(&id.value) && x != e) {
                return x.clone();
            }
        }
        e.clone()
    }

    fn lower(&self, e: &a::Expr, scope: &Scope, mode: &mut Mode<'_>) -> Result<Expr, Refusal> {
        if let a::Expr::Identifier(id) = e {
            let aliased = self.aliases.borrow().iter().find(|(n, x)| n.eq_ignore_ascii_case(&id.value) && x != e).map(|(_, x)| x.clone());
            if let Some(x) = aliased {
                if scope.find(None, &id.value).is_err() {
                    return self.lower(&x, scope, mode);
                }
            }
        }
        if let Mode::Post(ctx) = mode {
            if let a::Expr::Function(f) = e {
                if let Some(kind) = agg_kind(f)? {
                    let arg = match agg_arg(f)? {
                        None => None,
                        Some(x) => {
                            let x = self.lower(&x, scope, &mut Mode::Pre)?;
                            Some(if kind == AggKind::CountNotNull { Expr::IsNull(Box::new(x), true) } else { x })
                        }
                    };
                    let i = match ctx.aggs.iter().position(|(k, x)| *k == kind && *x == arg) {
                        Some(i) => i,
                        None => {
                            ctx.aggs.push((kind, arg));
                            ctx.aggs.len() - 1
                        }
                    };
                    return Ok(Expr::Col(ctx.key_w + ctx.groups.len() + i));
                }
            }
            if !contains_agg(e) {
                if let Ok(x) = self.lower(e, scope, &mut Mode::Pre) {
                    if let Some(g) = ctx.groups.iter().position(|g| *g == x) {
                        return Ok(Expr::Col(ctx.key_w + g));
                    }
                    if let Expr::Lit(_) = x {
                        return Ok(x);
                    }
                }
                if matches!(e, a::Expr::Identifier(_) | a::Expr::CompoundIdentifier(_)) {
                    return refuse(format!("`{e}` must appear in GROUP BY or inside an aggregate"));
                }
            }
        }
        let mut l = |x: &a::Expr| self.lower(x, scope, mode);
        Ok(match e {
            a::Expr::Identifier(id) => Expr::Col(scope.find(None, &id.value)?),
            a::Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [t, c] | [_, t, c] => Expr::Col(scope.find(Some(&t.value), &c.value)?),
                _ => return refuse(format!("unsupported column reference `{e}`")),
            },
            a::Expr::Value(v) => Expr::lit(literal(&v.value)?),
            a::Expr::Nested(x) => l(x)?,
            a::Expr::IsNull(x) => Expr::IsNull(Box::new(l(x)?), false),
            a::Expr::IsNotNull(x) => Expr::IsNull(Box::new(l(x)?), true),
            a::Expr::UnaryOp { op, expr } => match op {
                a::UnaryOperator::Not => Expr::Not(Box::new(l(expr)?)),
                a::UnaryOperator::Minus => Expr::Neg(Box::new(l(expr)?)),
                a::UnaryOperator::Plus => l(expr)?,
                _ => return refuse(format!("operator `{op}` is not supported")),
            },
            a::Expr::BinaryOp { left, op, right } => {
                let (x, y) = (l(left)?, l(right)?);
                let cmp = |o| {
                    let (x, y) = coerce_pair(x.clone(), y.clone(), scope);
                    Expr::Cmp(o, Box::new(x), Box::new(y))
                };
                let ar = |o| Expr::Arith(o, Box::new(x.clone()), Box::new(y.clone()));
                match op {
                    a::BinaryOperator::Eq => cmp(CmpOp::Eq),
                    a::BinaryOperator::NotEq => cmp(CmpOp::NotEq),
                    a::BinaryOperator::Lt => cmp(CmpOp::Lt),
                    a::BinaryOperator::LtEq => cmp(CmpOp::LtEq),
                    a::BinaryOperator::Gt => cmp(CmpOp::Gt),
                    a::BinaryOperator::GtEq => cmp(CmpOp::GtEq),
                    a::BinaryOperator::Spaceship => cmp(CmpOp::NullSafeEq),
                    a::BinaryOperator::And => Expr::And(Box::new(x), Box::new(y)),
                    a::BinaryOperator::Or => Expr::Or(Box::new(x), Box::new(y)),
                    a::BinaryOperator::Plus => ar(ArithOp::Add),
                    a::BinaryOperator::Minus => ar(ArithOp::Sub),
                    a::BinaryOperator::Multiply => ar(ArithOp::Mul),
                    a::BinaryOperator::Divide => ar(ArithOp::Div),
                    a::BinaryOperator::Modulo => ar(ArithOp::Mod),
                    a::BinaryOperator::MyIntegerDivide => ar(ArithOp::IntDiv),
                    _ => return refuse(format!("operator `{op}` is not supported")),
                }
            }
            a::Expr::InList { expr, list, negated } => {
                let x = l(expr)?;
                let mut items = Vec::new();
                for i in list {
                    let y = l(i)?;
                    items.push(coerce_pair(x.clone(), y, scope).1);
                }
                Expr::InList { expr: Box::new(x), list: items, negated: *negated }
            }
            a::Expr::Between { expr, negated, low, high } => {
                let x = l(expr)?;
                let lo = coerce_pair(x.clone(), l(low)?, scope).1;
                let hi = coerce_pair(x.clone(), l(high)?, scope).1;
                Expr::Between { expr: Box::new(x), low: Box::new(lo), high: Box::new(hi), negated: *negated }
            }
            a::Expr::Like { negated, any: false, expr, pattern, escape_char } => {
                let escape = match escape_char.as_deref() {
                    None => '\\',
                    Some(a::Expr::Value(v)) => match &v.value {
                        a::Value::SingleQuotedString(s) if s.chars().count() == 1 => s.chars().next().unwrap_or('\\'),
                        _ => return refuse("LIKE ... ESCAPE needs a single-character string"),
                    },
                    Some(_) => return refuse("LIKE ... ESCAPE needs a single-character string"),
                };
                let x = l(expr)?;
                let p = coerce_pair(x.clone(), l(pattern)?, scope).1;
                Expr::Like { expr: Box::new(x), pattern: Box::new(p), escape, negated: *negated }
            }
            a::Expr::Case { operand, conditions, else_result, .. } => {
                let operand = match operand {
                    Some(o) => Some(Box::new(l(o)?)),
                    None => None,
                };
                let mut whens = Vec::new();
                for c in conditions {
                    whens.push((l(&c.condition)?, l(&c.result)?));
                }
                let otherwise = match else_result {
                    Some(e) => Some(Box::new(l(e)?)),
                    None => None,
                };
                Expr::Case { operand, whens, otherwise }
            }
            a::Expr::Substring { expr, substring_from, substring_for, .. } => {
                let mut args = vec![l(expr)?];
                match substring_from {
                    Some(f) => args.push(l(f)?),
                    None => args.push(Expr::lit(Value::Int(1))),
                }
                if let Some(f) = substring_for {
                    args.push(l(f)?);
                }
                Expr::Func(Func::Substring, args)
            }
            a::Expr::Trim { expr, trim_where: None, trim_what: None, trim_characters: None } => {
                Expr::Func(Func::Trim, vec![l(expr)?])
            }
            a::Expr::Function(f) => {
                if agg_kind(f)?.is_some() {
                    return refuse(format!("aggregate `{}` is not allowed here", f.name));
                }
                let name = object_name(&f.name)?;
                let Some((func, min, max)) = Func::from_name(&name) else {
                    let upper = name.to_ascii_uppercase();
                    if ["NOW", "CURRENT_TIMESTAMP", "SYSDATE", "CURDATE", "CURRENT_DATE", "CURTIME", "RAND", "UUID", "CONNECTION_ID", "LAST_INSERT_ID", "USER", "DATABASE", "UNIX_TIMESTAMP"].contains(&upper.as_str()) {
                        return refuse(format!("`{upper}()` depends on when or by whom the query runs, so its result cannot be cached"));
                    }
                    return refuse(format!("function `{name}` is not supported"));
                };
                let args = plain_args(f)?;
                if args.len() < min || args.len() > max {
                    return refuse(format!("wrong number of arguments to `{name}`"));
                }
                let mut lowered = Vec::new();
                for x in &args {
                    lowered.push(l(x)?);
                }
                Expr::Func(func, lowered)
            }
            a::Expr::Subquery(_) | a::Expr::InSubquery { .. } | a::Expr::Exists { .. } => {
                return refuse("subqueries are not supported; rewrite them as JOINs")
            }
            a::Expr::Collate { .. } => return refuse("explicit COLLATE is not supported; rely on the column's collation"),
            other => return refuse(format!("expression `{other}` is not supported")),
        })
    }
}

fn plain_args(f: &a::Function) -> Result<Vec<a::Expr>, Refusal> {
    if f.filter.is_some() || f.over.is_some() || !f.within_group.is_empty() {
        return refuse(format!("window functions and FILTER are not supported (`{f}`)"));
    }
    match &f.args {
        a::FunctionArguments::None => Ok(vec![]),
        a::FunctionArguments::List(list) => {
            if !list.clauses.is_empty() {
                return refuse(format!("function clauses are not supported (`{f}`)"));
            }
            list.args
                .iter()
                .map(|x| match x {
                    a::FunctionArg::Unnamed(a::FunctionArgExpr::Expr(e)) => Ok(e.clone()),
                    a::FunctionArg::Unnamed(a::FunctionArgExpr::Wildcard) => {
                        Ok(a::Expr::Wildcard(a::helpers::attached_token::AttachedToken::empty()))
                    }
                    _ => refuse(format!("unsupported function argument in `{f}`")),
                })
                .collect()
        }
        a::FunctionArguments::Subquery(_) => refuse("subqueries are not supported"),
    }
}

fn agg_kind(f: &a::Function) -> Result<Option<AggKind>, Refusal> {
    let name = object_name(&f.name)?.to_ascii_uppercase();
    let distinct = matches!(&f.args, a::FunctionArguments::List(l) if l.duplicate_treatment == Some(a::DuplicateTreatment::Distinct));
    let star = matches!(&f.args, a::FunctionArguments::List(l) if matches!(l.args.as_slice(), [a::FunctionArg::Unnamed(a::FunctionArgExpr::Wildcard)]));
    Ok(Some(match (name.as_str(), distinct) {
        ("COUNT", false) if star => AggKind::CountStar,
        ("COUNT", false) => AggKind::CountNotNull,
        ("COUNT", true) => AggKind::CountDistinct,
        ("SUM", false) => AggKind::Sum,
        ("AVG", false) => AggKind::Avg,
        ("MIN", _) => AggKind::Min,
        ("MAX", _) => AggKind::Max,
        ("SUM" | "AVG", true) => return refuse("SUM(DISTINCT)/AVG(DISTINCT) are not supported"),
        ("GROUP_CONCAT" | "STD" | "STDDEV" | "VARIANCE" | "BIT_AND" | "BIT_OR" | "JSON_ARRAYAGG" | "JSON_OBJECTAGG", _) => {
            return refuse(format!("aggregate `{name}` is not supported (COUNT, SUM, AVG, MIN, MAX are)"))
        }
        _ => return Ok(None),
    }))
}

fn agg_arg(f: &a::Function) -> Result<Option<a::Expr>, Refusal> {
    let args = plain_args(f)?;
    match args.as_slice() {
        [a::Expr::Wildcard(_)] => Ok(None),
        [x] => Ok(Some(x.clone())),
        _ => refuse(format!("`{f}` takes exactly one argument")),
    }
}

fn contains_agg(e: &a::Expr) -> bool {
    let r = visit_expressions(e, |x| {
        if let a::Expr::Function(f) = x {
            if matches!(agg_kind(f), Ok(Some(_)) | Err(_)) {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    r.is_break()
}

fn literal(v: &a::Value) -> Result<Value, Refusal> {
    let text = |s: &str| Value::text(s, Collation::Utf8mb4_0900AiCi);
    Ok(match v {
        a::Value::Number(n, _) => {
            if let Ok(i) = n.parse::<i64>() {
                Value::Int(i)
            } else if let Ok(u) = n.parse::<u64>() {
                Value::UInt(u)
            } else if !n.contains(['e', 'E']) {
                match Decimal::parse(n) {
                    Some(d) => Value::Decimal(d),
                    None => return refuse(format!("number `{n}` has more than 28 digits")),
                }
            } else {
                match n.parse::<f64>() {
                    Ok(f) => Value::Double(f),
                    Err(_) => return refuse(format!("bad number `{n}`")),
                }
            }
        }
        a::Value::SingleQuotedString(s) | a::Value::DoubleQuotedString(s) => text(s),
        a::Value::Boolean(b) => Value::Int(*b as i64),
        a::Value::Null => Value::Null,
        a::Value::HexStringLiteral(h) => {
            let bytes: Option<Vec<u8>> = (0..h.len())
                .step_by(2)
                .map(|i| h.get(i..i + 2).and_then(|x| u8::from_str_radix(x, 16).ok()))
                .collect();
            match bytes {
                Some(b) if h.len() % 2 == 0 => Value::Bytes(b.into()),
                _ => return refuse(format!("bad hex literal X'{h}'")),
            }
        }
        a::Value::Placeholder(_) => {
            return refuse("`?` parameters are supported only as `column = ?`, `column IN (?, ...)` or `column <, <=, >, >= ?` in the top-level AND of the WHERE clause")
        }
        other => return refuse(format!("literal `{other}` is not supported")),
    })
}

/// Gives a literal compared with a column the column's type and collation, as MySQL does
/// (column collation wins over a literal's; a date string compared with a DATE is a date).
fn coerce_pair(x: Expr, y: Expr, scope: &Scope) -> (Expr, Expr) {
    fn fix(col: &Expr, other: Expr, scope: &Scope) -> Expr {
        let (Expr::Col(c), Expr::Lit(LitValue(v))) = (col, &other) else { return other };
        let Some(sc) = scope.cols.get(*c) else { return other };
        match (&sc.ty, v) {
            (Some(SqlType::Text), Value::Text(s, _)) => match sc.coll.flatten() {
                Some(coll) => Expr::lit(Value::Text(s.clone(), coll)),
                None => other,
            },
            (Some(SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. }), Value::Text(s, _)) => {
                match parse_temporal(s) {
                    Some(t) => Expr::lit(t),
                    None => other,
                }
            }
            (Some(SqlType::Enum(labels)), Value::Text(s, _)) => {
                let idx = labels.iter().position(|l| l.eq_ignore_ascii_case(s)).map(|i| i + 1).unwrap_or(0);
                Expr::lit(Value::Enum(idx as u16))
            }
            _ => other,
        }
    }
    let y2 = fix(&x, y, scope);
    let x2 = fix(&y2, x, scope);
    (x2, y2)
}
