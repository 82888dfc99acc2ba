//! From a SELECT to an operator tree: parsing (sqlparser, MySQL dialect), name resolution,
//! parameter extraction, join planning, aggregate planning and the reasons for refusing.
//!
//! Owns: [`Catalog`], [`compile`], [`CompiledQuery`], [`Refusal`], statement-level checks
//! (LIMIT, ORDER BY, UNION ALL); `select` compiles one SELECT block, `lower` its expressions.
//! Does not own: running the tree (ops, view), cost bounds (cost), SQL rendering (render).
//!
//! Invariants:
//! - `compile` never panics; anything outside the supported set is a [`Refusal`] whose reason
//!   says what to change.
//! - `compile` never recurses deeper than its input allows: `depth` refuses, from the tokens
//!   and before parsing, a query whose expressions may nest past a bound (sqlparser's own
//!   recursion limit covers parentheses while it parses, not flat operator chains, which
//!   parse into trees as deep as they are long).
//! - `?` parameters are accepted only as top-level WHERE conjuncts: `column = ?` /
//!   `column IN (?, ...)` define the partition key; `column <, <=, >, >= ?` become read-time
//!   filters. A table occurrence with a column equal to each key column (through JOIN ... ON
//!   equalities) is partition-keyed; any other is a dimension, joined by equalities onto one
//!   earlier occurrence (see `plan`); the join tree starts with a partition-keyed table (inner
//!   joins are re-placed so that it does; with LEFT joins the first FROM table must be).
//! - The tree's root output is `[select list..., range-filter columns..., hidden ORDER BY
//!   columns..., hidden key columns...]`; the first `visible` columns are the query's result
//!   columns, in its order; readers keep the first `published`.

mod depth;
mod labels;
mod lower;
mod mixing;
mod numbers;
mod prune;
mod select;
mod sorting;
mod types;

use std::collections::HashMap;
use std::ops::ControlFlow;

use sqlparser::ast::{self as a, visit_expressions};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use crate::expr::{CmpOp, Expr, Func};
use crate::plan::{Node, OrderSpec};
use crate::schema::{ColumnSchema, SchemaError, SqlType, TableSchema};
use crate::value::Collation;

/// Why a query is not cached. `reason` is written for the person who configured the query.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Refusal {
    /// What is wrong and what to change.
    pub reason: String,
}

pub(crate) fn refuse<T>(reason: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal { reason: reason.into() })
}

/// The base tables queries may read.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    /// By [`Catalog::key`] of their names.
    tables: HashMap<String, TableSchema>,
    names: Names,
    /// Tables whose schema [`Catalog::add`] refused last, by key, with why: a query reading
    /// one is refused with that reason rather than as an unknown table.
    refused: HashMap<String, String>,
}

/// How the server compares the names of tables, their aliases and databases
/// (`lower_case_table_names`): with 0, Linux's default, `stories` and `Stories` are two tables
/// and a query must spell a name as it was created; otherwise names are one table whatever
/// their case. Column names and select aliases are never case-sensitive, and are compared as
/// [`same_identifier`](crate::collation::same_identifier) says, beyond ASCII too; a query
/// naming a pair the server may or may not take for one
/// ([`identifiers_unsure`](crate::collation::identifiers_unsure)) is refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    pub case_sensitive: bool,
    /// The database the tables are in; a query's name qualified by another is another table.
    /// `None` (a catalog built by hand) takes any qualifier for this database.
    pub database: Option<String>,
}

impl Catalog {
    /// An empty catalog, whose names are compared without case and in no particular database.
    pub fn new() -> Catalog {
        Catalog::default()
    }
    /// An empty catalog of the tables of a server that compares names as `names` says.
    pub fn with_names(names: Names) -> Catalog {
        Catalog { tables: HashMap::new(), names, refused: HashMap::new() }
    }
    /// How names are compared.
    pub fn names(&self) -> &Names {
        &self.names
    }
    /// A table's name as its identity: the name as it is, where names are case-sensitive, or
    /// in lower case. Every map or list of tables of the dataflow holds names in this form,
    /// so that a row event of `Stories` never reaches a view of `stories` when the server has
    /// two tables.
    pub fn key(&self, name: &str) -> String {
        if self.names.case_sensitive { name.to_owned() } else { name.to_ascii_lowercase() }
    }
    /// Whether `a` and `b` name one table, alias or database.
    pub fn same_name(&self, a: &str, b: &str) -> bool {
        if self.names.case_sensitive { a == b } else { a.eq_ignore_ascii_case(b) }
    }
    /// Whether a name qualified by `database` is in the catalog's database.
    pub fn in_database(&self, database: &str) -> bool {
        self.names.database.as_deref().is_none_or(|d| self.same_name(d, database))
    }
    /// Adds or replaces a table after checking its schema. A schema refused removes the table
    /// (its rows have that shape now) and is remembered ([`Catalog::refused`]).
    pub fn add(&mut self, t: TableSchema) -> Result<(), SchemaError> {
        let key = self.key(&t.name);
        if let Err(e) = t.check() {
            self.tables.remove(&key);
            self.refused.insert(key, e.to_string());
            return Err(e);
        }
        self.refused.remove(&key);
        self.tables.insert(key, t);
        Ok(())
    }
    /// Removes a table (after DROP TABLE).
    pub fn remove(&mut self, name: &str) {
        let key = self.key(name);
        self.refused.remove(&key);
        self.tables.remove(&key);
    }
    /// Why the last schema of a table not in the catalog was refused, if it was.
    pub fn refused(&self, name: &str) -> Option<&str> {
        self.refused.get(&self.key(name)).map(String::as_str)
    }
    /// A table by name, compared as the server compares it.
    pub fn get(&self, name: &str) -> Option<&TableSchema> {
        self.tables.get(&self.key(name))
    }
    /// A column of a table, by the table's name and the column's name, each compared as the
    /// server compares it.
    pub fn column(&self, table: &str, column: &str) -> Option<&ColumnSchema> {
        let t = self.get(table)?;
        t.columns.get(t.column_index(column)?)
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
    /// `ColumnSchema::bmp_only`: a parameter holding a character past U+FFFF is relayed.
    pub bmp_only: bool,
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
    /// True when the result for several partition keys is exactly the concatenation of each
    /// key's result (re-sorted by `order`), i.e. what `key IN (?, ...)` returns in MySQL: no
    /// LIMIT (per-key top-k merged is not a LIMIT over the whole result), every aggregate
    /// grouped by the key columns (`COUNT(*)` without GROUP BY over an IN list is one row, not
    /// one per key), ORDER BY only on result columns (hidden sort columns are not published,
    /// so merged rows could not be sorted) and, with DISTINCT, the key among the result
    /// columns (else equal rows of two keys would both be returned). A query compiled with an
    /// `IN` list of more than one `?` is always mergeable (compile refuses the other shapes).
    /// [`Reader::lookup_in`](crate::Reader::lookup_in) refuses several keys when false.
    pub mergeable: bool,
    /// The query reads a TIMESTAMP column (anywhere: select list, WHERE, a join, GROUP BY,
    /// ORDER BY). The server reads a TIMESTAMP in the session's time zone and a view holds UTC
    /// (the binlog's zone, and the fill connections'), so the view answers as the server does
    /// only for a session whose time zone is UTC; the proxy relays the others.
    pub reads_timestamp: bool,
    /// The query divides (`/`, AVG): the server gives a quotient its dividend's decimals plus
    /// the session's `div_precision_increment`, and a view computes it with 4, the default; the
    /// proxy relays sessions with another setting.
    pub divides: bool,
    /// The query compares, groups, orders or deduplicates text made of literals alone (no
    /// column decides its collation): the server gives it the session's
    /// `collation_connection`, a view utf8mb4_general_ci; the proxy relays sessions on
    /// another.
    pub literal_text: bool,
    /// The query calls `DATE()`, or reads a date and has a choice (COALESCE, IFNULL, IF, NULLIF,
    /// CASE) or a temporary table (GROUP BY, DISTINCT, UNION): the server makes such a value
    /// NULL (or 0000-00-00 in a temporary table) under NO_ZERO_DATE (a zero date) and
    /// NO_ZERO_IN_DATE (a zero month or day), where a view gives the date; the proxy relays
    /// sessions with either mode.
    pub converts_dates: bool,
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

impl CompiledQuery {
    /// True when `self` and `other` compile to the same view and read it the same way: every
    /// field but the SQL text is equal. Compiling is deterministic up to how the text names
    /// things: `stories.id`, `s.id` (alias `s`) and `id` are the same column, `? = id` is
    /// `id = ?`, result columns are named as MySQL names them (a bare column by its name as
    /// written, without qualifier; anything else by its text, or its `AS` alias). So two
    /// texts that differ only in literals, once each literal is replaced by `?`, have the same
    /// plan. Not normalized (the plans differ, so this answers false): reordered select-list
    /// items, conjuncts or joins, and different result column names.
    pub fn same_plan(&self, other: &CompiledQuery) -> bool {
        self.same_view(other)
            && self.param_slots == other.param_slots
            && self.n_params == other.n_params
            && self.read_filters == other.read_filters
    }

    /// True when `self` and `other` are the same view except for how many `?` feed each key
    /// column: `id = ?` against `id IN (?, ?, ?)`. Then [`Reader::lookup_in`](crate::Reader::lookup_in) on a view of
    /// either, given the other's `param_slots` and parameters, answers what the other would.
    ///
    /// Everything but `sql`, `param_slots` and `n_params` must be equal; the key columns must
    /// be the same, in the same order, each fed by at least one parameter; the read filters
    /// (`col > ?`) must be equal once their parameter indexes are renumbered to their rank
    /// among the parameters that feed no key column (the `IN` list shifts them). When either
    /// side has more than one parameter on a key column, the view must also be
    /// [`mergeable`](CompiledQuery::mergeable): false for ORDER BY ... LIMIT (each key keeps its
    /// own top rows, MySQL limits the whole IN result), for aggregates not grouped by the key
    /// (`COUNT(*)` over an IN list is one row, not one per key), for ORDER BY on columns not
    /// selected, and for DISTINCT without the key selected. (Compile already refuses those
    /// shapes with an `IN` list of several `?`, so in practice the proxy sees a `Refusal` for
    /// the IN text first; this check does not rely on that.)
    pub fn same_plan_except_arity(&self, other: &CompiledQuery) -> bool {
        if !self.same_view(other) || self.param_slots.len() != other.param_slots.len() {
            return false;
        }
        let slots = || self.param_slots.iter().chain(&other.param_slots);
        if slots().any(Vec::is_empty) {
            return false;
        }
        if slots().any(|s| s.len() > 1) && !self.mergeable {
            return false;
        }
        self.renumbered_filters() == other.renumbered_filters()
    }

    /// Every field equal except `sql`, `param_slots`, `n_params` and `read_filters`.
    fn same_view(&self, o: &CompiledQuery) -> bool {
        // Destructured so that a new field cannot be forgotten here.
        let CompiledQuery {
            sql: _,
            root: _,
            columns: _,
            visible: _,
            order: _,
            key_columns: _,
            param_slots: _,
            n_params: _,
            tables: _,
            limit: _,
            read_filters: _,
            published: _,
            mergeable: _,
            reads_timestamp: _,
            divides: _,
            literal_text: _,
            converts_dates: _,
        } = self;
        self.root == o.root
            && self.columns == o.columns
            && self.visible == o.visible
            && self.order == o.order
            && self.key_columns == o.key_columns
            && self.tables == o.tables
            && self.limit == o.limit
            && self.published == o.published
            && self.mergeable == o.mergeable
            && self.reads_timestamp == o.reads_timestamp
            && self.divides == o.divides
            && self.literal_text == o.literal_text
            && self.converts_dates == o.converts_dates
    }

    /// The read filters with each parameter index replaced by its rank among the read
    /// filters' parameters (which are exactly the parameters feeding no key column).
    pub(crate) fn renumbered_filters(&self) -> Vec<ReadFilter> {
        let mut ps: Vec<usize> = self.read_filters.iter().map(|f| f.param).collect();
        ps.sort_unstable();
        self.read_filters.iter().map(|f| ReadFilter { param: ps.binary_search(&f.param).unwrap_or(usize::MAX), ..f.clone() }).collect()
    }
}

/// Compiles one SELECT against `catalog`.
pub fn compile(sql: &str, catalog: &Catalog) -> Result<CompiledQuery, Refusal> {
    depth::check(sql)?;
    depth::with_stack(|| compile_checked(sql, catalog, true))
}

/// [`compile`] without its last pass, projection pushdown (`prune`): the same answers from a
/// plan whose joins keep whole rows. The reference that tests evaluate from scratch, so that
/// they check the pass rather than share it.
pub fn compile_unpruned(sql: &str, catalog: &Catalog) -> Result<CompiledQuery, Refusal> {
    depth::check(sql)?;
    depth::with_stack(|| compile_checked(sql, catalog, false))
}

fn compile_checked(sql: &str, catalog: &Catalog, prune: bool) -> Result<CompiledQuery, Refusal> {
    let stmts = match Parser::parse_sql(&MySqlDialect {}, sql) {
        Ok(s) => s,
        Err(e) => return refuse(format!("cannot parse the query: {e}")),
    };
    let [a::Statement::Query(q)] = stmts.as_slice() else {
        return refuse("only a single SELECT statement can be cached");
    };
    let mut n_params = 0usize;
    let _ = visit_expressions(&stmts, |e| {
        if let a::Expr::Value(v) = e
            && let a::Value::Placeholder(_) = v.value
        {
            n_params += 1;
        }
        ControlFlow::<()>::Continue(())
    });
    let compiler = Compiler {
        catalog,
        aliases: Default::default(),
        timestamps: Default::default(),
        divides: Default::default(),
        occ: 0,
        n_params,
        next_param: 0,
        prune,
    };
    let mut compiled = compiler.query(sql, q)?;
    labels::check(&compiled, catalog)?;
    numbers::check(&compiled, catalog)?;
    sorting::check(&compiled.root, &compiled.order, catalog)?;
    sorting::check_lengths(&compiled.root, catalog)?;
    types::apply(&mut compiled, catalog)?;
    compiled.literal_text = mixing::check(&compiled.root, &compiled.order, catalog)?;
    // DATE(), or a choice (COALESCE, IFNULL, IF, NULLIF, CASE) of a query that reads a
    // date: the server's choice converts its value as DATE() does.
    let temporal = |t: &String| {
        catalog
            .get(t)
            .is_some_and(|s| s.columns.iter().any(|c| matches!(c.ty, SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. })))
    };
    // So does a temporary table: a date grouped, deduplicated or put together by UNION.
    let through_temporary =
        compiled.root.post_order().into_iter().any(|n| matches!(n, Node::Aggregate { .. } | Node::Distinct { .. } | Node::Union { .. }));
    compiled.converts_dates = calls(&compiled.root, &|e| matches!(e, Expr::Func(Func::Date, _)))
        || (compiled.tables.iter().any(temporal)
            && (through_temporary
                || calls(&compiled.root, &|e| {
                    matches!(e, Expr::Case { .. } | Expr::Func(Func::Coalesce | Func::IfNull | Func::If | Func::NullIf, _))
                })));
    Ok(compiled)
}

/// Whether an expression of the plan, or one inside it, is one `f` says.
fn calls(root: &Node, f: &dyn Fn(&Expr) -> bool) -> bool {
    fn in_expr(e: &Expr, f: &dyn Fn(&Expr) -> bool) -> bool {
        f(e) || e.children().into_iter().any(|c| in_expr(c, f))
    }
    root.post_order().into_iter().any(|n| match n {
        Node::Filter { pred, .. } => in_expr(pred, f),
        Node::Project { exprs, .. } => exprs.iter().any(|e| in_expr(e, f)),
        _ => false,
    })
}

struct Compiler<'a> {
    catalog: &'a Catalog,
    /// Select-list aliases visible to HAVING and ORDER BY (empty elsewhere, as in MySQL).
    aliases: std::cell::RefCell<Vec<(String, a::Expr)>>,
    /// Set when a column reference resolves to a TIMESTAMP column (every reference, wildcards
    /// included, is lowered through [`Compiler::lower`]).
    timestamps: std::cell::Cell<bool>,
    /// Set when a `/` or an AVG is lowered.
    divides: std::cell::Cell<bool>,
    occ: usize,
    n_params: usize,
    next_param: usize,
    /// Run projection pushdown on the finished tree.
    prune: bool,
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
    mergeable: bool,
}

fn lit_usize(e: &a::Expr, what: &str) -> Result<usize, Refusal> {
    if let a::Expr::Value(v) = e
        && let a::Value::Number(n, _) = &v.value
        && let Ok(x) = n.parse::<usize>()
    {
        return Ok(x);
    }
    refuse(format!("{what} must be a literal non-negative integer"))
}

pub(crate) fn object_name(n: &a::ObjectName) -> Result<String, Refusal> {
    match n.0.last() {
        Some(a::ObjectNamePart::Identifier(i)) => Ok(i.value.clone()),
        _ => refuse(format!("unsupported table name `{n}`")),
    }
}

/// The name of a table a query reads (`t` or `db.t`), which must be in the catalog's database:
/// a table of another database of the same name is another table.
pub(crate) fn table_name(n: &a::ObjectName, catalog: &Catalog) -> Result<String, Refusal> {
    match n.0.as_slice() {
        [a::ObjectNamePart::Identifier(t)] => Ok(t.value.clone()),
        [a::ObjectNamePart::Identifier(db), a::ObjectNamePart::Identifier(t)] if catalog.in_database(&db.value) => Ok(t.value.clone()),
        [a::ObjectNamePart::Identifier(_), a::ObjectNamePart::Identifier(_)] => {
            refuse(format!("`{n}` is a table of another database than the one freshet caches"))
        }
        _ => refuse(format!("unsupported table name `{n}`")),
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
            Some(a::LimitClause::OffsetCommaLimit { offset, limit }) => (Some(lit_usize(limit, "LIMIT")?), lit_usize(offset, "OFFSET")?),
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
            a::SetExpr::SetOperation { .. } => return refuse("only UNION ALL is supported (UNION DISTINCT, INTERSECT and EXCEPT are not)"),
            a::SetExpr::Query(_) => return refuse("a parenthesized query is not supported; remove the parentheses"),
            _ => return refuse("only SELECT queries can be cached"),
        };
        let used = s.param_slots.iter().map(Vec::len).sum::<usize>() + s.read_filters.len();
        if used != self.n_params {
            return refuse(
                "`?` parameters are supported only as `column = ?`, `column IN (?, ...)` or `column <, <=, >, >= ?` in the top-level AND of the WHERE clause",
            );
        }
        let root = if self.prune { prune::prune(s.root, self.catalog) } else { s.root };
        Ok(CompiledQuery {
            sql: sql.to_string(),
            root,
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
            mergeable: s.mergeable,
            reads_timestamp: self.timestamps.get(),
            divides: self.divides.get(),
            literal_text: false,
            converts_dates: false,
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
            mergeable: true,
        })
    }
}
