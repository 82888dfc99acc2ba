//! One SELECT block to an operator tree, in stages: FROM and JOIN ... ON (the join tree and
//! its column equivalences), WHERE (parameters, filter pushdown, residual), the partition key
//! of every table occurrence, then the output: aggregation, HAVING, the select list, ORDER BY,
//! hidden columns, DISTINCT and LIMIT.
//!
//! Owns: [`Compiler::select`] and its stages. Does not own: expression lowering (lower),
//! statement-level checks (the parent module).
//!
//! Invariants: filters are pushed below a join only onto a table that join does not
//! NULL-extend; a `?` on a LEFT-joined table keeps an `IS NOT NULL` above the join (the
//! partition alone would admit NULL-extended rows); every table occurrence gets a key column
//! in each parameter's join-equivalence class (partition-keyed) or none (a dimension, joined by
//! equalities onto one earlier occurrence); the join tree starts with a partition-keyed
//! occurrence (inner joins are re-placed to achieve that, with every ON equality kept as a
//! residual filter and a projection restoring FROM column order).

use sqlparser::ast as a;

use super::lower::{AggCtx, Mode, Scope, ScopeCol, contains_agg, names_sure};
use super::{Compiler, KeyColumn, ReadFilter, Refusal, Select, refuse, table_name};
use crate::collation::same_identifier;
use crate::expr::{CmpOp, Expr};
use crate::plan::{AggSpec, JoinKind, Node, OrderSpec};
use crate::schema::{SqlType, TableSchema};

/// Union-find over global column indexes, for join equivalence classes.
struct Classes(Vec<usize>);

impl Classes {
    fn find(&mut self, x: usize) -> usize {
        let mut r = x;
        while self.0.get(r).is_some_and(|&p| p != r) {
            r = self.0[r];
        }
        if let Some(slot) = self.0.get_mut(x) {
            *slot = r;
        }
        r
    }
    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if let Some(slot) = self.0.get_mut(ra) {
            *slot = rb;
        }
    }
}

/// What FROM, ON and WHERE compile to. Column indexes are "global": into `scope`, which lists
/// every table occurrence's columns in FROM order (the join tree's output layout).
struct Source<'c> {
    scope: Scope,
    offsets: Vec<usize>,
    schemas: Vec<&'c TableSchema>,
    tables: Vec<String>,
    kinds: Vec<JoinKind>,
    occ0: usize,
    classes: Classes,
    join_on: Vec<Vec<(usize, usize)>>,
    base_filters: Vec<Vec<Expr>>,
    residual: Vec<Expr>,
    /// Key parameter columns with the `?` indexes that feed them.
    key_globals: Vec<(usize, Vec<usize>)>,
    /// Range parameters: (column, operator, `?` index).
    ranges: Vec<(usize, CmpOp, usize)>,
}

impl Source<'_> {
    /// Which table occurrence a global column belongs to.
    fn occ_of(&self, g: usize) -> usize {
        self.offsets.iter().rposition(|&o| o <= g).unwrap_or(0)
    }
    fn end_of(&self, o: usize) -> usize {
        self.offsets.get(o + 1).copied().unwrap_or(self.scope.cols.len())
    }
    fn multi_key(&self) -> bool {
        self.key_globals.iter().any(|(_, s)| s.len() > 1)
    }
    fn column_type(&self, g: usize) -> KeyColumn {
        let c = &self.scope.cols[g];
        // Named by table, not by alias, so that `s.id = ?` and `stories.id = ?` compile alike.
        let table = self.tables.get(self.occ_of(g)).map(String::as_str).unwrap_or(&c.qual);
        KeyColumn {
            name: format!("{table}.{}", c.name),
            ty: c.ty.clone().unwrap_or(SqlType::Text),
            collation: c.coll.flatten(),
            bmp_only: c.bmp_only,
        }
    }
}

type Rel<'q> = (&'q a::TableFactor, Option<(JoinKind, &'q a::Expr)>);

fn conjuncts(e: &a::Expr, out: &mut Vec<a::Expr>) {
    match e {
        a::Expr::BinaryOp { left, op: a::BinaryOperator::And, right } => {
            conjuncts(left, out);
            conjuncts(right, out);
        }
        a::Expr::Nested(inner) if matches!(**inner, a::Expr::BinaryOp { op: a::BinaryOperator::And, .. }) => conjuncts(inner, out),
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

/// The select list, HAVING and ORDER BY, lowered.
struct Outputs {
    exprs: Vec<Expr>,
    visible: usize,
    published: usize,
    read_filters: Vec<ReadFilter>,
    having: Option<Expr>,
    order: OrderSpec,
}

/// The most rows a LIMIT (with its OFFSET) may ask a top-k state to keep per partition.
const MAX_WINDOW: usize = 1 << 30;

impl<'c> Compiler<'c> {
    pub(super) fn select(
        &mut self,
        sel: &a::Select,
        order_by: &[a::OrderByExpr],
        limit: Option<usize>,
        offset: usize,
    ) -> Result<Select, Refusal> {
        check_clauses(sel)?;
        let distinct = match &sel.distinct {
            None | Some(a::Distinct::All) => false,
            Some(a::Distinct::Distinct) => true,
            Some(_) => return refuse("DISTINCT ON is not MySQL"),
        };
        let rels = relations(sel)?;
        let mut src = self.tables_in_from(&rels)?;
        self.on_clauses(&mut src, &rels)?;
        self.where_clause(&mut src, sel)?;
        let occ_keys = partition_keys(&mut src);
        let order = placement(&mut src, &occ_keys)?;
        let mut tree = join_tree(&mut src, &occ_keys, &order);
        let key_columns: Vec<KeyColumn> = src.key_globals.iter().map(|(g, _)| src.column_type(*g)).collect();
        let multi_key = src.multi_key();

        let group_exprs: Vec<a::Expr> = match &sel.group_by {
            a::GroupByExpr::Expressions(v, mods) if mods.is_empty() => v.clone(),
            _ => return refuse("GROUP BY ALL / WITH ROLLUP are not supported"),
        };
        let (select_items, result_names) = self.expand_select(&sel.projection, &src.scope)?;
        // A GROUP BY name is a column of FROM's tables before it is an alias of the select
        // list (ORDER BY's is the alias first): such a name is written with its table, so that
        // it stays that column below and in the ORDER BY it implies. A name that is both is
        // refused: the server answers with a warning (1052, ambiguous), which a view does not
        // keep.
        let mut grouped = Vec::with_capacity(group_exprs.len());
        for g in group_exprs {
            let a::Expr::Identifier(id) = &g else {
                grouped.push(g);
                continue;
            };
            for name in src.scope.cols.iter().map(|c| &c.name).chain(select_items.iter().map(|(_, n)| n)) {
                names_sure(name, &id.value)?;
            }
            let columns: Vec<&super::lower::ScopeCol> = src.scope.cols.iter().filter(|c| same_identifier(&c.name, &id.value)).collect();
            match columns.as_slice() {
                [] => grouped.push(g),
                [c] => {
                    if select_items.iter().any(|(x, n)| same_identifier(n, &id.value) && *x != g) {
                        return refuse(format!(
                            "GROUP BY `{}` names both a column and an alias of the select list (the server warns)",
                            id.value
                        ));
                    }
                    grouped.push(a::Expr::CompoundIdentifier(vec![a::Ident::new(c.qual.clone()), a::Ident::new(c.name.clone())]));
                }
                _ => return refuse(format!("GROUP BY `{}` names a column of several tables; qualify it", id.value)),
            }
        }
        let group_exprs = grouped;
        // MariaDB sorts a GROUP BY's groups by its expressions, under their collations, as if
        // ORDER BY named them (MySQL 8 leaves them unordered, which this order is one of): with
        // no ORDER BY, the grouping expressions order the rows, and a LIMIT takes the first.
        let implied_order: Vec<a::OrderByExpr>;
        let order_by = if order_by.is_empty() && !group_exprs.is_empty() {
            let ascending = |expr: &a::Expr| a::OrderByExpr {
                expr: expr.clone(),
                options: a::OrderByOptions { sort: None, nulls_first: None },
                with_fill: None,
            };
            implied_order = group_exprs.iter().map(ascending).collect();
            &implied_order[..]
        } else {
            order_by
        };
        let has_agg = !group_exprs.is_empty()
            || select_items.iter().any(|(e, _)| contains_agg(e))
            || sel.having.is_some()
            || order_by.iter().any(|o| contains_agg(&o.expr));
        if !src.ranges.is_empty() && (has_agg || distinct || limit.is_some()) {
            return refuse(
                "a range parameter (`column > ?`) is supported only without GROUP BY, aggregates, DISTINCT or LIMIT; use `=`/`IN` parameters there",
            );
        }
        let key_in_tree = tree.key_positions();
        let mut agg = AggCtx { key_w: key_in_tree.len(), groups: vec![], aggs: vec![] };
        for g in &group_exprs {
            let g = match position(g) {
                Some(p) => {
                    let (item, _) = &select_items[item_index(&p, select_items.len(), "GROUP BY")?];
                    if contains_agg(item) {
                        return refuse(format!("GROUP BY {p} names an aggregate, which the server refuses to group on"));
                    }
                    item.clone()
                }
                None => self.resolve_alias(g, &select_items)?,
            };
            agg.groups.push(self.lower(&g, &src.scope, &mut Mode::Pre)?);
        }
        // Whether the result for several keys is the concatenation of each key's result (what
        // `IN (?, ...)` needs, and `CompiledQuery::merges_across_keys` reports): every check
        // below that refuses with `IN` also clears it for `=`.
        let mut mergeable = true;
        if has_agg {
            // Per-partition groups equal the query's groups only if the query groups by the key.
            let grouped_by_key = src.key_globals.clone().iter().all(|(kg, _)| {
                let root = src.classes.find(*kg);
                agg.groups.iter().any(|g| matches!(g, Expr::Col(c) if src.classes.find(*c) == root))
            });
            mergeable &= grouped_by_key;
            if !grouped_by_key && multi_key {
                return refuse("with `IN (?, ...)` an aggregate must GROUP BY the parameter column; use `= ?` or add it to GROUP BY");
            }
        }
        let out = {
            let mut mode = if has_agg { Mode::Post(&mut agg) } else { Mode::Pre };
            self.outputs(sel, &src, &select_items, order_by, distinct, &mut mode)?
        };
        let hidden_order = out.order.iter().any(|&(p, _)| p >= out.visible);
        mergeable &= !hidden_order;
        if multi_key && hidden_order {
            return refuse("with `IN (?, ...)`, ORDER BY columns must be in the select list");
        }
        if has_agg {
            tree = aggregate(tree, &key_in_tree, &agg, group_exprs.is_empty());
            if let Some(h) = out.having {
                tree = Node::Filter { input: Box::new(tree), pred: h };
            }
        }
        let Outputs { mut exprs, visible, published, read_filters, order, .. } = out;
        let mut columns = result_names;
        // Hidden key columns: every node carries the partition key (see `plan`).
        for k in tree.key_positions() {
            if !exprs.contains(&Expr::Col(k)) {
                exprs.push(Expr::Col(k));
            }
        }
        tree = Node::Project { input: Box::new(tree), exprs };
        if distinct {
            let hidden_key = tree.key_positions().iter().any(|&p| p >= visible);
            mergeable &= !hidden_key;
            if multi_key && hidden_key {
                return refuse("DISTINCT with `IN (?, ...)` needs the parameter column in the select list");
            }
            tree = Node::Distinct { input: Box::new(tree) };
        }
        if let Some(l) = limit {
            // Without ORDER BY, which rows the server returns is its plan's (the index it
            // reads, a scan, a descending key). Unless one row is all a partition can have:
            // one table whose key parameters cover its primary key (`find_by`'s `LIMIT 1`).
            let one_row = src.schemas.len() == 1
                && !src.schemas[0].primary_key.is_empty()
                && src.schemas[0].primary_key.iter().all(|&c| src.key_globals.iter().any(|(g, _)| *g == src.offsets[0] + c));
            if order.is_empty() && !one_row {
                return refuse("LIMIT without ORDER BY: which rows the server returns is its plan's (an index, a scan), not a view's");
            }
            // Per-key top-k rows merged are not MySQL's LIMIT over the whole IN result.
            mergeable = false;
            if multi_key {
                return refuse("LIMIT with `IN (?, ...)` is not supported; use `= ?`");
            }
            // A top-k state holds `offset + limit` rows per partition, plus slack: a window past
            // MAX_WINDOW (e.g. `LIMIT 18446744073709551615`, MySQL's "all rows") is not one to
            // keep, and its size would overflow.
            if l.checked_add(offset).is_none_or(|w| w > MAX_WINDOW) {
                return refuse(format!("LIMIT plus OFFSET over {MAX_WINDOW} rows is not cached"));
            }
            tree = Node::TopK { input: Box::new(tree), order: order.clone(), limit: l, offset };
        }
        let mut tables = src.tables;
        tables.sort();
        tables.dedup();
        columns.truncate(visible);
        Ok(Select {
            root: tree,
            columns,
            visible,
            order,
            key_columns,
            param_slots: src.key_globals.into_iter().map(|(_, s)| s).collect(),
            tables,
            limit,
            read_filters,
            published,
            mergeable,
        })
    }

    /// Resolves the FROM tables into a scope.
    fn tables_in_from(&mut self, rels: &[Rel<'_>]) -> Result<Source<'c>, Refusal> {
        let mut scope = Scope::default();
        let (mut offsets, mut schemas, mut tables, mut quals) = (Vec::new(), Vec::new(), Vec::new(), Vec::<String>::new());
        for (rel, _) in rels {
            let a::TableFactor::Table { name, alias, args: None, with_hints, version: None, partitions, .. } = rel else {
                return refuse("only plain tables are supported in FROM (no subqueries or table functions)");
            };
            if !with_hints.is_empty() || !partitions.is_empty() {
                return refuse("table hints and PARTITION selection are not supported");
            }
            let tname = table_name(name, self.catalog)?;
            let Some(schema) = self.catalog.get(&tname) else {
                return refuse(match self.catalog.refused(&tname) {
                    Some(why) => format!("table `{tname}` cannot be cached: {why}"),
                    None => format!("unknown table `{tname}` (not in the schema freshet was given)"),
                });
            };
            // An alias, or the table's name as written, compared as the server compares them.
            let qual = self.catalog.key(&alias.as_ref().map(|al| al.name.value.clone()).unwrap_or(tname.clone()));
            if quals.contains(&qual) {
                return refuse(format!("table alias `{qual}` is used twice; give each occurrence its own alias"));
            }
            quals.push(qual.clone());
            offsets.push(scope.cols.len());
            for c in &schema.columns {
                let coll = matches!(c.ty, SqlType::Text | SqlType::Enum(_)).then_some(c.collation);
                scope.cols.push(ScopeCol {
                    qual: qual.clone(),
                    name: c.name.to_ascii_lowercase(),
                    ty: Some(c.ty.clone()),
                    coll,
                    invisible: c.invisible,
                    unreadable: c.unreadable,
                    bmp_only: c.bmp_only,
                });
            }
            schemas.push(schema);
            tables.push(self.catalog.key(&schema.name));
        }
        let occ0 = self.occ;
        self.occ += rels.len();
        let n = rels.len();
        Ok(Source {
            classes: Classes((0..scope.cols.len()).collect()),
            scope,
            offsets,
            schemas,
            tables,
            kinds: vec![JoinKind::Inner; n],
            occ0,
            join_on: vec![vec![]; n],
            base_filters: vec![vec![]; n],
            residual: Vec::new(),
            key_globals: Vec::new(),
            ranges: Vec::new(),
        })
    }

    /// Splits each ON clause into equi-join pairs, filters on the joined table, and (inner
    /// joins only) residual conditions.
    fn on_clauses(&self, src: &mut Source<'_>, rels: &[Rel<'_>]) -> Result<(), Refusal> {
        for (j, (_, jo)) in rels.iter().enumerate() {
            let Some((kind, on)) = jo else { continue };
            src.kinds[j] = *kind;
            let visible = Scope { cols: src.scope.cols[..src.end_of(j)].to_vec() };
            let mut cs = Vec::new();
            conjuncts(on, &mut cs);
            for c in cs {
                let e = self.lower(&c, &visible, &mut Mode::Pre)?;
                if let Expr::Cmp(CmpOp::Eq, x, y) = &e
                    && let (Expr::Col(p), Expr::Col(q)) = (x.as_ref(), y.as_ref())
                {
                    let (p, q) = (*p, *q);
                    let (l, r) = if src.occ_of(p) == j && src.occ_of(q) < j { (q, p) } else { (p, q) };
                    if src.occ_of(r) == j && src.occ_of(l) < j {
                        src.join_on[j].push((l, r - src.offsets[j]));
                        src.classes.union(l, r);
                        continue;
                    }
                }
                let off = src.offsets[j];
                if cols_of(&e).iter().all(|&c| src.occ_of(c) == j) {
                    src.base_filters[j].push(e.remap(&|c| c - off));
                } else if *kind == JoinKind::Inner {
                    src.residual.push(e);
                } else {
                    return refuse("a LEFT JOIN's ON clause may only add conditions on the joined table besides the equalities");
                }
            }
            if src.join_on[j].is_empty() {
                return refuse("each JOIN needs at least one `left.column = right.column` equality in ON");
            }
        }
        Ok(())
    }

    /// Extracts parameters and pushes single-table conjuncts below the joins.
    fn where_clause(&mut self, src: &mut Source<'_>, sel: &a::Select) -> Result<(), Refusal> {
        let Some(w) = &sel.selection else { return Ok(()) };
        let mut cs = Vec::new();
        conjuncts(w, &mut cs);
        let mut not_null = Vec::new();
        for c in cs {
            let key = match &c {
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
                let g = self.param_column(col, &src.scope)?;
                src.ranges.push((g, op, self.next_param));
                self.next_param += 1;
            } else if let Some((col, count)) = key {
                let g = self.param_column(col, &src.scope)?;
                if src.key_globals.iter().any(|(k, _)| *k == g) {
                    return refuse("the same column is compared with `?` twice");
                }
                src.key_globals.push((g, (self.next_param..self.next_param + count).collect()));
                self.next_param += count;
                if src.kinds[src.occ_of(g)] == JoinKind::Left {
                    not_null.push(g);
                }
            } else {
                let e = self.lower(&c, &src.scope, &mut Mode::Pre)?;
                let occs: Vec<usize> = cols_of(&e).iter().map(|&c| src.occ_of(c)).collect();
                match occs.first() {
                    Some(&o) if occs.iter().all(|&x| x == o) && src.kinds[o] == JoinKind::Inner => {
                        let off = src.offsets[o];
                        src.base_filters[o].push(e.remap(&|c| c - off))
                    }
                    _ => src.residual.push(e),
                }
            }
        }
        for g in not_null {
            src.residual.push(Expr::IsNull(Box::new(Expr::Col(g)), true));
        }
        Ok(())
    }

    fn param_column(&self, col: &a::Expr, scope: &Scope) -> Result<usize, Refusal> {
        match self.lower(col, scope, &mut Mode::Pre)? {
            Expr::Col(g) => Ok(g),
            _ => refuse("a `?` parameter must be compared with a plain column"),
        }
    }

    /// Lowers the select list (adding range-filter columns), HAVING and ORDER BY.
    fn outputs(
        &self,
        sel: &a::Select,
        src: &Source<'_>,
        items: &[(a::Expr, String)],
        order_by: &[a::OrderByExpr],
        distinct: bool,
        mode: &mut Mode<'_>,
    ) -> Result<Outputs, Refusal> {
        let mut exprs = Vec::new();
        for (item, _) in items {
            exprs.push(self.lower(item, &src.scope, mode)?);
        }
        let visible = exprs.len();
        let mut read_filters = Vec::new();
        for (g, op, param) in &src.ranges {
            let column = match exprs.iter().position(|e| *e == Expr::Col(*g)) {
                Some(p) => p,
                None => {
                    exprs.push(Expr::Col(*g));
                    exprs.len() - 1
                }
            };
            read_filters.push(ReadFilter { column, op: *op, param: *param, column_type: src.column_type(*g) });
        }
        let published = exprs.len();
        *self.aliases.borrow_mut() = items.iter().map(|(x, n)| (n.clone(), x.clone())).collect();
        let result = self.having_and_order(sel, src, items, order_by, distinct, mode, &mut exprs, visible);
        self.aliases.borrow_mut().clear();
        let (having, order) = result?;
        Ok(Outputs { exprs, visible, published, read_filters, having, order })
    }

    #[allow(clippy::too_many_arguments)]
    fn having_and_order(
        &self,
        sel: &a::Select,
        src: &Source<'_>,
        items: &[(a::Expr, String)],
        order_by: &[a::OrderByExpr],
        distinct: bool,
        mode: &mut Mode<'_>,
        exprs: &mut Vec<Expr>,
        visible: usize,
    ) -> Result<(Option<Expr>, OrderSpec), Refusal> {
        let having = match &sel.having {
            Some(h) => Some(self.lower(&self.resolve_alias(h, items)?, &src.scope, mode)?),
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
            let pos = if let Some(p) = position(&ob.expr) {
                item_index(&p, visible, "ORDER BY")?
            } else if matches!(ob.expr, a::Expr::Value(_)) {
                return refuse("ORDER BY a constant is not supported");
            } else {
                let e = self.lower(&self.resolve_alias(&ob.expr, items)?, &src.scope, mode)?;
                match exprs.iter().position(|x| *x == e) {
                    Some(p) => p,
                    None if distinct => return refuse("with DISTINCT, ORDER BY columns must be in the select list"),
                    None => {
                        exprs.push(e);
                        exprs.len() - 1
                    }
                }
            };
            order.push((pos, desc));
        }
        Ok((having, order))
    }
}

fn check_clauses(sel: &a::Select) -> Result<(), Refusal> {
    if sel.top.is_some()
        || sel.into.is_some()
        || !sel.lateral_views.is_empty()
        || sel.prewhere.is_some()
        || !sel.connect_by.is_empty()
        || !sel.cluster_by.is_empty()
        || !sel.distribute_by.is_empty()
        || !sel.sort_by.is_empty()
        || !sel.named_window.is_empty()
        || sel.qualify.is_some()
        || sel.exclude.is_some()
        || sel.value_table_mode.is_some()
    {
        return refuse("the query uses a SELECT clause freshet does not support (INTO, WINDOW, ...)");
    }
    if sel.select_modifiers.is_some() {
        return refuse("SELECT modifiers (SQL_NO_CACHE, HIGH_PRIORITY, ...) are not supported; remove them");
    }
    Ok(())
}

/// FROM as a list of relations: the first table, then each joined table with its join.
fn relations(sel: &a::Select) -> Result<Vec<Rel<'_>>, Refusal> {
    let [twj] = sel.from.as_slice() else {
        return if sel.from.is_empty() {
            refuse("a query without FROM has nothing to cache")
        } else {
            refuse("comma joins are not supported; write `JOIN ... ON` with an equality")
        };
    };
    let mut rels: Vec<Rel<'_>> = vec![(&twj.relation, None)];
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
    Ok(rels)
}

/// Join pairs `(global column of an earlier-placed occurrence, local column)`.
type JoinPairs = Vec<(usize, usize)>;
/// Occurrences in join-tree order, each with its join pairs.
type Placement = Vec<(usize, JoinPairs)>;

/// For every table occurrence, its columns equal to each key parameter, in key order; empty
/// for a dimension occurrence (one not joined on every parameter column).
fn partition_keys(src: &mut Source<'_>) -> Vec<Vec<usize>> {
    let n = src.offsets.len();
    let mut occ_keys: Vec<Vec<usize>> = vec![vec![]; n];
    if src.key_globals.is_empty() {
        return occ_keys;
    }
    for (o, keys) in occ_keys.iter_mut().enumerate() {
        let mut found = Vec::new();
        for (kg, _) in src.key_globals.clone() {
            let root = src.classes.find(kg);
            if let Some(m) = (src.offsets[o]..src.end_of(o)).find(|&c| src.classes.find(c) == root) {
                found.push(m - src.offsets[o]);
            }
        }
        if found.len() == src.key_globals.len() {
            *keys = found;
        }
    }
    occ_keys
}

/// The order in which occurrences enter the left-deep join tree, each with its join pairs
/// `(global column of an earlier-placed occurrence, local column)`. FROM order when the first
/// table is partition-keyed and every dimension is joined by ON equalities onto a single
/// earlier occurrence (or there are no parameters). Otherwise, if all joins are INNER, the
/// tables are re-placed: the first partition-keyed table, then repeatedly the first table with
/// join-equivalent columns in placed tables (a dimension: those of the one placed table that
/// shares most). The pairs are implied by the ON equalities (inner joins: equality classes
/// hold on every result row), and the caller keeps every ON equality as a residual filter.
fn placement(src: &mut Source<'_>, occ_keys: &[Vec<usize>]) -> Result<Placement, Refusal> {
    let n = src.offsets.len();
    let keyed = |o: usize| occ_keys.get(o).is_some_and(|k| !k.is_empty());
    let multi_source = |o: usize| {
        let from: Vec<usize> = src.join_on[o].iter().map(|&(l, _)| src.occ_of(l)).collect();
        from.iter().any(|&f| Some(&f) != from.first())
    };
    let split_dim = (1..n).find(|&o| !keyed(o) && multi_source(o));
    let all_inner = src.kinds.iter().all(|k| *k == JoinKind::Inner);
    if src.key_globals.is_empty() || (keyed(0) && (split_dim.is_none() || !all_inner)) {
        if let (false, Some(o)) = (src.key_globals.is_empty(), split_dim) {
            return refuse(format!(
                "table `{}` is joined on columns of several tables; freshet looks up a table not joined on the `?` parameters by the columns of one earlier table (with LEFT JOINs in the query)",
                src.schemas[o].name
            ));
        }
        return Ok((0..n).map(|o| (o, src.join_on[o].clone())).collect());
    }
    let (kg, _) = src.key_globals[0];
    let pc = src.scope.cols[kg].clone();
    let first = match (0..n).find(|&o| keyed(o)) {
        Some(f) if all_inner => f,
        _ => {
            return refuse(format!(
                "the first table in FROM, `{}`, is not joined on the parameter column `{}.{}`; list a table compared with the `?` parameters first and join the others onto it",
                src.schemas[0].name, pc.qual, pc.name
            ));
        }
    };
    let mut order: Placement = vec![(first, vec![])];
    while order.len() < n {
        let next = (0..n).filter(|o| !order.iter().any(|(p, _)| p == o)).find_map(|o| {
            let mut by: Vec<Vec<(usize, usize)>> = Vec::new();
            for &(q, _) in &order {
                let pairs: Vec<(usize, usize)> = (src.offsets[o]..src.end_of(o))
                    .filter_map(|c| {
                        let root = src.classes.find(c);
                        let p = (src.offsets[q]..src.end_of(q)).find(|&p| src.classes.find(p) == root)?;
                        Some((p, c - src.offsets[o]))
                    })
                    .collect();
                by.push(pairs);
            }
            let on: Vec<(usize, usize)> = if keyed(o) { by.concat() } else { by.into_iter().max_by_key(Vec::len).unwrap_or_default() };
            (!on.is_empty()).then_some((o, on))
        });
        match next {
            Some(p) => order.push(p),
            None => return refuse("every table must be reachable by JOIN ... ON equalities from a table compared with the `?` parameters"),
        }
    }
    for j in 0..n {
        for &(l, r) in &src.join_on[j] {
            let r = r + src.offsets[j];
            src.residual.push(Expr::Cmp(CmpOp::Eq, Box::new(Expr::Col(l)), Box::new(Expr::Col(r))));
        }
    }
    Ok(order)
}

/// The left-deep join tree (in `order`, see [`placement`]) with pushed-down filters, its
/// columns in FROM order, and the residual filter above it.
fn join_tree(src: &mut Source<'_>, occ_keys: &[Vec<usize>], order: &[(usize, JoinPairs)]) -> Node {
    let n = src.offsets.len();
    // Where each occurrence's columns start in the tree's output.
    let mut placed_at = vec![0; n];
    let mut width = 0;
    let mut tree: Option<Node> = None;
    for (o, on) in order {
        let o = *o;
        let schema = src.schemas[o];
        let mut base = Node::Base {
            occ: src.occ0 + o,
            table: schema.name.clone(),
            columns: schema.columns.iter().map(|c| c.name.clone()).collect(),
            key: occ_keys.get(o).cloned().unwrap_or_default(),
        };
        if let Some(p) = and_all(std::mem::take(&mut src.base_filters[o])) {
            base = Node::Filter { input: Box::new(base), pred: p };
        }
        let on: Vec<(usize, usize)> = on
            .iter()
            .map(|&(l, r)| {
                let q = src.occ_of(l);
                (placed_at[q] + l - src.offsets[q], r)
            })
            .collect();
        placed_at[o] = width;
        width += schema.columns.len();
        tree = Some(match tree {
            None => base,
            Some(left) => Node::Join { left: Box::new(left), right: Box::new(base), on, kind: src.kinds[o] },
        });
    }
    // `relations` always yields at least the FROM table, so the tree exists.
    let mut tree = tree.unwrap_or(Node::Union { inputs: vec![] });
    if order.iter().enumerate().any(|(i, (o, _))| i != *o) {
        let exprs = (0..src.scope.cols.len())
            .map(|g| {
                let q = src.occ_of(g);
                Expr::Col(placed_at[q] + g - src.offsets[q])
            })
            .collect();
        tree = Node::Project { input: Box::new(tree), exprs };
    }
    if let Some(p) = and_all(std::mem::take(&mut src.residual)) {
        tree = Node::Filter { input: Box::new(tree), pred: p };
    }
    tree
}

/// The aggregate over its pre-projection `[key columns, GROUP BY expressions, arguments]`.
fn aggregate(tree: Node, key_in_tree: &[usize], agg: &AggCtx, global: bool) -> Node {
    let mut pre: Vec<Expr> = key_in_tree.iter().map(|&k| Expr::Col(k)).collect();
    pre.extend(agg.groups.iter().cloned());
    let group = pre.len();
    let mut specs = Vec::new();
    for (kind, arg) in &agg.aggs {
        match arg {
            Some(e) => {
                pre.push(e.clone());
                specs.push(AggSpec { kind: *kind, arg: pre.len() - 1 });
            }
            None => specs.push(AggSpec { kind: *kind, arg: 0 }),
        }
    }
    Node::Aggregate { input: Box::new(Node::Project { input: Box::new(tree), exprs: pre }), group, aggs: specs, global }
}

/// The literal of a GROUP BY or ORDER BY item the server reads as a select-list position: a
/// number, parenthesised or not, or its negation (`ORDER BY 2`, `GROUP BY (1)`, `ORDER BY -1`,
/// the last the server's error `Unknown column '-1'`). `None` for anything else.
fn position(e: &a::Expr) -> Option<String> {
    match e {
        a::Expr::Nested(inner) => position(inner),
        a::Expr::Value(v) => match &v.value {
            a::Value::Number(s, _) => Some(s.clone()),
            _ => None,
        },
        a::Expr::UnaryOp { op: a::UnaryOperator::Minus, expr } => position(expr).map(|p| format!("-{p}")),
        _ => None,
    }
}

/// The index of the select item at 1-based position `p` among `n`; refused when `p` is not
/// one (the server errs on an integer out of range, and reads a decimal as a constant).
fn item_index(p: &str, n: usize, clause: &str) -> Result<usize, Refusal> {
    match p.parse::<usize>() {
        Ok(i) if (1..=n).contains(&i) => Ok(i - 1),
        _ => refuse(format!("{clause} position {p} is not a column of the select list")),
    }
}
