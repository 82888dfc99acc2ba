//! Name resolution and expression lowering: from sqlparser expressions to [`Expr`] over a
//! scope of columns, with aggregates and GROUP BY expressions resolved after aggregation.
//!
//! Owns: [`Scope`], lowering of every supported expression form, literals, MySQL's literal
//! coercion rules (column collation and temporal type win over a literal's), aggregate
//! recognition. Does not own: clause structure (select), plans (plan).
//!
//! Invariant: a lowered `Expr::Col(i)` always indexes the scope it was lowered against; a
//! reference to a text column whose collation freshet does not implement is refused here, so
//! no later stage can compare such strings.

use std::ops::ControlFlow;

use sqlparser::ast::{self as a, visit_expressions};

use super::{Compiler, Refusal, object_name, refuse, table_name};
use crate::collation::{identifiers_unsure, same_identifier};
use crate::expr::{ArithOp, CmpOp, Expr, Func, LitValue, parse_temporal};
use crate::plan::AggKind;
use crate::schema::{SqlType, enum_index};
use crate::value::{Collation, Decimal, Value};

#[derive(Clone, Debug)]
pub(super) struct ScopeCol {
    /// The occurrence's alias, or its table's name as written, as [`Catalog::key`] keys it.
    ///
    /// [`Catalog::key`]: super::Catalog::key
    pub(super) qual: String,
    /// The column's name in ASCII lower case; a name a query writes matches it as the server
    /// matches names ([`same_identifier`]), never by `==`.
    pub(super) name: String,
    pub(super) ty: Option<SqlType>,
    /// `Some(None)`: a text column with a collation freshet does not implement.
    pub(super) coll: Option<Option<Collation>>,
    /// An INVISIBLE column: not in a wildcard's expansion.
    pub(super) invisible: bool,
    /// Why no view may read it (`ColumnSchema::unreadable`).
    pub(super) unreadable: Option<&'static str>,
    /// `ColumnSchema::bmp_only`.
    pub(super) bmp_only: bool,
}

impl ScopeCol {
    /// Refuses a read of a column no view may read.
    pub(super) fn readable(&self) -> Result<(), Refusal> {
        match self.unreadable {
            Some(why) => refuse(format!("column `{}` cannot be cached: {why}; leave it out of the cached query", self.name)),
            None => Ok(()),
        }
    }
}

/// Refuses a query naming `a` where the server may or may not read `b`
/// ([`identifiers_unsure`]): it is relayed, whichever the server takes.
pub(super) fn names_sure(a: &str, b: &str) -> Result<(), Refusal> {
    if identifiers_unsure(a, b) {
        return refuse(format!("`{a}` and `{b}` may or may not be one name to the server (one in lower case, not as long in bytes)"));
    }
    Ok(())
}

#[derive(Clone, Debug, Default)]
pub(super) struct Scope {
    pub(super) cols: Vec<ScopeCol>,
}

impl Scope {
    pub(super) fn find(&self, qual: Option<&str>, name: &str) -> Result<usize, Refusal> {
        for c in &self.cols {
            names_sure(&c.name, name)?;
        }
        let hits: Vec<usize> = self
            .cols
            .iter()
            .enumerate()
            .filter(|(_, c)| same_identifier(&c.name, name) && qual.is_none_or(|q| q == c.qual))
            .map(|(i, _)| i)
            .collect();
        match hits.as_slice() {
            [i] => {
                if let Some(c) = self.cols.get(*i) {
                    c.readable()?;
                }
                if let Some(Some(None)) = self.cols.get(*i).map(|c| &c.coll) {
                    return refuse(format!(
                        "column `{name}` uses a collation freshet does not implement (supported: binary, utf8mb4_bin, utf8mb4_general_ci, utf8mb4_unicode_ci); leave it out of the cached query or change its collation"
                    ));
                }
                Ok(*i)
            }
            [] => refuse(format!("unknown column `{}`", qual.map(|q| format!("{q}.{name}")).unwrap_or(name.to_string()))),
            _ => refuse(format!("column `{name}` is ambiguous; qualify it with its table")),
        }
    }
}

/// Select-list items: each expression with the name other clauses may refer to it by.
pub(super) type SelectItems = Vec<(a::Expr, String)>;

/// Aggregates discovered while lowering post-GROUP BY expressions.
pub(super) struct AggCtx {
    pub(super) key_w: usize,
    pub(super) groups: Vec<Expr>,
    pub(super) aggs: Vec<(AggKind, Option<Expr>)>,
}

pub(super) enum Mode<'a> {
    Pre,
    Post(&'a mut AggCtx),
}

impl Compiler<'_> {
    /// The select list with wildcards expanded: each item with the name HAVING, GROUP BY and
    /// ORDER BY may refer to it by (its alias, or its text), and, separately, the result
    /// column names. MySQL names a bare column reference by the column as written, without
    /// its qualifier or quotes (`s.id`, `stories.id` and `` `id` `` are all `id`), so the result names, and with
    /// them the plan, do not depend on how a column was qualified.
    pub(super) fn expand_select(&self, items: &[a::SelectItem], scope: &Scope) -> Result<(SelectItems, Vec<String>), Refusal> {
        let mut names = Vec::new();
        let out = self.expand_items(items, scope, &mut names)?;
        Ok((out, names))
    }

    fn expand_items(&self, items: &[a::SelectItem], scope: &Scope, names: &mut Vec<String>) -> Result<SelectItems, Refusal> {
        let mut out = Vec::new();
        let ident = |c: &ScopeCol| a::Expr::CompoundIdentifier(vec![a::Ident::new(c.qual.clone()), a::Ident::new(c.name.clone())]);
        for it in items {
            match it {
                a::SelectItem::UnnamedExpr(e) => {
                    names.push(match e {
                        a::Expr::Identifier(i) => i.value.clone(),
                        a::Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.clone()).unwrap_or_default(),
                        other => other.to_string(),
                    });
                    out.push((e.clone(), e.to_string()))
                }
                a::SelectItem::ExprWithAlias { expr, alias } => {
                    names.push(alias.value.clone());
                    out.push((expr.clone(), alias.value.clone()))
                }
                a::SelectItem::Wildcard(opts) => {
                    if opts.opt_exclude.is_some()
                        || opts.opt_except.is_some()
                        || opts.opt_replace.is_some()
                        || opts.opt_rename.is_some()
                        || opts.opt_ilike.is_some()
                    {
                        return refuse("wildcard options are not MySQL");
                    }
                    for c in scope.cols.iter().filter(|c| !c.invisible) {
                        c.readable()?;
                        names.push(c.name.clone());
                        out.push((ident(c), c.name.clone()));
                    }
                }
                a::SelectItem::ExprWithAliases { .. } => return refuse("multiple aliases per select item are not MySQL"),
                a::SelectItem::QualifiedWildcard(kind, _) => {
                    let a::SelectItemQualifiedWildcardKind::ObjectName(n) = kind else {
                        return refuse("unsupported wildcard");
                    };
                    let q = self.catalog.key(&table_name(n, self.catalog)?);
                    let cols: Vec<&ScopeCol> = scope.cols.iter().filter(|c| c.qual == q && !c.invisible).collect();
                    if cols.is_empty() {
                        return refuse(format!("unknown table `{q}` in `{q}.*`"));
                    }
                    for c in cols {
                        c.readable()?;
                        names.push(c.name.clone());
                        out.push((ident(c), c.name.clone()));
                    }
                }
            }
        }
        Ok(out)
    }

    /// An unqualified identifier that names a select alias (and not a column) stands for the
    /// aliased expression, as MySQL allows in GROUP BY, HAVING and ORDER BY.
    pub(super) fn resolve_alias(&self, e: &a::Expr, items: &[(a::Expr, String)]) -> Result<a::Expr, Refusal> {
        if let a::Expr::Identifier(id) = e {
            for (_, n) in items {
                names_sure(n, &id.value)?;
            }
            if let Some((x, _)) = items.iter().find(|(x, n)| same_identifier(n, &id.value) && x != e) {
                return Ok(x.clone());
            }
        }
        Ok(e.clone())
    }

    pub(super) fn lower(&self, e: &a::Expr, scope: &Scope, mode: &mut Mode<'_>) -> Result<Expr, Refusal> {
        if let a::Expr::Identifier(id) = e {
            for (n, _) in self.aliases.borrow().iter() {
                names_sure(n, &id.value)?;
            }
            let aliased = self.aliases.borrow().iter().find(|(n, x)| same_identifier(n, &id.value) && x != e).map(|(_, x)| x.clone());
            if let Some(x) = aliased
                && scope.find(None, &id.value).is_err()
            {
                return self.lower(&x, scope, mode);
            }
        }
        if let Mode::Post(ctx) = mode {
            if let a::Expr::Function(f) = e
                && let Some(kind) = agg_kind(f)?
            {
                if kind == AggKind::Avg {
                    self.divides.set(true);
                }
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
        let column = |qual: Option<&str>, name: &str| {
            let i = scope.find(qual, name)?;
            if matches!(scope.cols[i].ty, Some(SqlType::Timestamp { .. })) {
                self.timestamps.set(true);
            }
            Ok::<_, Refusal>(Expr::Col(i))
        };
        let mut l = |x: &a::Expr| self.lower(x, scope, mode);
        Ok(match e {
            a::Expr::Identifier(id) => column(None, &id.value)?,
            a::Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                // A qualifier is an alias or a table's name (as the catalog keys it), and a
                // database's name must be the catalog's: as the server compares them.
                [t, c] => column(Some(&self.catalog.key(&t.value)), &c.value)?,
                [db, t, c] if self.catalog.in_database(&db.value) => column(Some(&self.catalog.key(&t.value)), &c.value)?,
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
                    a::BinaryOperator::Divide => {
                        self.divides.set(true);
                        ar(ArithOp::Div)
                    }
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
            a::Expr::Ceil { expr, field: a::CeilFloorKind::DateTimeField(a::DateTimeField::NoDateTime) } => {
                Expr::Func(Func::Ceil, vec![l(expr)?])
            }
            a::Expr::Floor { expr, field: a::CeilFloorKind::DateTimeField(a::DateTimeField::NoDateTime) } => {
                Expr::Func(Func::Floor, vec![l(expr)?])
            }
            a::Expr::Trim { expr, trim_where: None, trim_what: None, trim_characters: None } => Expr::Func(Func::Trim, vec![l(expr)?]),
            a::Expr::Function(f) => {
                if agg_kind(f)?.is_some() {
                    return refuse(format!("aggregate `{}` is not allowed here", f.name));
                }
                let name = object_name(&f.name)?;
                let Some((func, min, max)) = Func::from_name(&name) else {
                    let upper = name.to_ascii_uppercase();
                    if [
                        "NOW",
                        "CURRENT_TIMESTAMP",
                        "SYSDATE",
                        "CURDATE",
                        "CURRENT_DATE",
                        "CURTIME",
                        "RAND",
                        "UUID",
                        "CONNECTION_ID",
                        "LAST_INSERT_ID",
                        "USER",
                        "DATABASE",
                        "UNIX_TIMESTAMP",
                    ]
                    .contains(&upper.as_str())
                    {
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
                return refuse("subqueries are not supported; rewrite them as JOINs");
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
            return refuse(format!("aggregate `{name}` is not supported (COUNT, SUM, AVG, MIN, MAX are)"));
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

pub(super) fn contains_agg(e: &a::Expr) -> bool {
    let r = visit_expressions(e, |x| {
        if let a::Expr::Function(f) = x
            && matches!(agg_kind(f), Ok(Some(_)) | Err(_))
        {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    r.is_break()
}

fn literal(v: &a::Value) -> Result<Value, Refusal> {
    // A literal compared with a column takes the column's collation (`coerce_pair`); on its
    // own it has the connection's, utf8mb4_general_ci unless the session chose another UTF-8
    // collation.
    let text = |s: &str| Value::text(s, Collation::Utf8mb4GeneralCi);
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
            let bytes: Option<Vec<u8>> =
                (0..h.len()).step_by(2).map(|i| h.get(i..i + 2).and_then(|x| u8::from_str_radix(x, 16).ok())).collect();
            match bytes {
                Some(b) if h.len() % 2 == 0 => Value::Bytes(b.into()),
                _ => return refuse(format!("bad hex literal X'{h}'")),
            }
        }
        a::Value::Placeholder(_) => {
            return refuse(
                "`?` parameters are supported only as `column = ?`, `column IN (?, ...)` or `column <, <=, >, >= ?` in the top-level AND of the WHERE clause",
            );
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
            (Some(SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. }), Value::Text(s, _)) => match parse_temporal(s) {
                Some(t) => Expr::lit(t),
                None => other,
            },
            // A string naming no one index stays a string, which `labels::check` refuses.
            (Some(SqlType::Enum(labels)), Value::Text(s, _)) => match enum_index(labels, s, sc.coll.flatten()) {
                Some(index) => Expr::lit(Value::Enum(index)),
                None => other,
            },
            // A YEAR takes the other side as a YEAR (`y > 50` is `y > 2050`).
            (Some(SqlType::Year), v) => match crate::value::year_operand(v) {
                Some(y) => Expr::lit(y),
                None => other,
            },
            _ => other,
        }
    }
    let y2 = fix(&x, y, scope);
    let x2 = fix(&y2, x, scope);
    (x2, y2)
}
