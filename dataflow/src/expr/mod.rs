//! Compiled scalar expressions: evaluation over a row, and rendering back to MySQL SQL.
//!
//! Owns: [`Expr`], MySQL's three-valued logic, arithmetic typing (integer, exact DECIMAL with
//! `div_precision_increment = 4`, DOUBLE), LIKE under a collation, and the scalar functions
//! freshet evaluates. Does not own: name resolution (compile), aggregates (ops).
//!
//! Invariants: evaluation never panics; an error MySQL would raise at run time (BIGINT overflow)
//! evaluates to NULL here, so the compiler refuses integer arithmetic that may leave its type's
//! range (`compile/numbers.rs`). The compiler only accepts expressions whose columns it
//! resolved, so `Col(i)` is always in range of the rows it sees
//! (checked again defensively: an out-of-range column reads as NULL). `to_sql` renders an
//! expression the upstream evaluates to the same value.
//!
//! Arithmetic and ROUND are in `arith`, the scalar functions and LIKE in `funcs`.

use std::cmp::Ordering;

use crate::value::{Collation, Date, DateTime, Decimal, Value};

mod arith;
mod funcs;

use arith::round;
pub use arith::{arith, div_dec};
use funcs::{func, like};

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    /// `<=>`, NULL-safe equality.
    NullSafeEq,
}

/// Arithmetic operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    /// `/`: DECIMAL or DOUBLE division.
    Div,
    /// `DIV`: integer division.
    IntDiv,
    Mod,
}

/// Scalar functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    Concat,
    Coalesce,
    IfNull,
    NullIf,
    If,
    Lower,
    Upper,
    Length,
    CharLength,
    Substring,
    Trim,
    Abs,
    Year,
    Month,
    Day,
    Date,
    Round,
    Floor,
    Ceil,
    Left,
    Right,
    Replace,
}

impl Func {
    /// Looks a function up by its SQL name, with its accepted argument counts.
    pub fn from_name(name: &str) -> Option<(Func, usize, usize)> {
        Some(match name.to_ascii_uppercase().as_str() {
            "CONCAT" => (Func::Concat, 1, usize::MAX),
            "COALESCE" => (Func::Coalesce, 1, usize::MAX),
            "IFNULL" => (Func::IfNull, 2, 2),
            "NULLIF" => (Func::NullIf, 2, 2),
            "IF" => (Func::If, 3, 3),
            "LOWER" | "LCASE" => (Func::Lower, 1, 1),
            "UPPER" | "UCASE" => (Func::Upper, 1, 1),
            "LENGTH" | "OCTET_LENGTH" => (Func::Length, 1, 1),
            "CHAR_LENGTH" | "CHARACTER_LENGTH" => (Func::CharLength, 1, 1),
            "SUBSTRING" | "SUBSTR" => (Func::Substring, 2, 3),
            "TRIM" => (Func::Trim, 1, 1),
            "ABS" => (Func::Abs, 1, 1),
            "YEAR" => (Func::Year, 1, 1),
            "MONTH" => (Func::Month, 1, 1),
            "DAY" | "DAYOFMONTH" => (Func::Day, 1, 1),
            "DATE" => (Func::Date, 1, 1),
            "ROUND" => (Func::Round, 1, 2),
            "FLOOR" => (Func::Floor, 1, 1),
            "CEIL" | "CEILING" => (Func::Ceil, 1, 1),
            "LEFT" => (Func::Left, 2, 2),
            "RIGHT" => (Func::Right, 2, 2),
            "REPLACE" => (Func::Replace, 3, 3),
            _ => return None,
        })
    }
    fn sql_name(self) -> &'static str {
        match self {
            Func::Concat => "CONCAT",
            Func::Coalesce => "COALESCE",
            Func::IfNull => "IFNULL",
            Func::NullIf => "NULLIF",
            Func::If => "IF",
            Func::Lower => "LOWER",
            Func::Upper => "UPPER",
            Func::Length => "LENGTH",
            Func::CharLength => "CHAR_LENGTH",
            Func::Substring => "SUBSTRING",
            Func::Trim => "TRIM",
            Func::Abs => "ABS",
            Func::Year => "YEAR",
            Func::Month => "MONTH",
            Func::Day => "DAYOFMONTH",
            Func::Date => "DATE",
            Func::Round => "ROUND",
            Func::Floor => "FLOOR",
            Func::Ceil => "CEILING",
            Func::Left => "LEFT",
            Func::Right => "RIGHT",
            Func::Replace => "REPLACE",
        }
    }
}

/// A compiled scalar expression over the columns of one input row.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// Input column by index.
    Col(usize),
    /// A literal.
    Lit(LitValue),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    /// `IS [NOT] NULL`; the bool is `negated`.
    IsNull(Box<Expr>, bool),
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        escape: char,
        negated: bool,
    },
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
    Case {
        operand: Option<Box<Expr>>,
        whens: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
    },
    Func(Func, Vec<Expr>),
    /// The value of the expression in the representation of the server's static type of it,
    /// where the values the view computes may not have it: the server types `COALESCE(d, 0)`
    /// on a DECIMAL(10,2) as a DECIMAL with two decimals, so its `0` is `0.00`. Put in by the
    /// compiler (`compile/types.rs`); rendered as the expression alone, which the server types
    /// itself.
    Typed(Box<Expr>, Repr),
}

/// A representation a [`Expr::Typed`] value is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Repr {
    /// An exact number with this many decimals (an integer or a DECIMAL of fewer decimals is
    /// rescaled; NULL if that needs more digits than a view's DECIMAL holds).
    Decimal(u8),
    /// A DOUBLE (an exact number is converted).
    Double,
    /// An integer: a BIT as the number it is. The server sends a BIT column as its bytes, and a
    /// BIT that a choice picks (`COALESCE(bt)`, `NULLIF(bt, n)`) as its decimal digits, under
    /// a BIT column definition either way; other values are left as they are.
    Number,
}

impl Repr {
    /// `v` in this representation; values of other kinds (NULL, text) as they are. A YEAR and
    /// a BIT are integers to the server's typing (`Class::Int` in `compile::types`).
    pub fn apply(self, v: Value) -> Value {
        if let Repr::Number = self {
            return match v {
                Value::Bit(b) => Value::UInt(b),
                v => v,
            };
        }
        let v = match v {
            Value::Year(y) => Value::Int(i64::from(y)),
            Value::Bit(b) => Value::UInt(b),
            v => v,
        };
        match (self, v) {
            (Repr::Decimal(s), Value::Int(i)) => arith::dec_value(arith::pow10(s).and_then(|p| i128::from(i).checked_mul(p)), s),
            (Repr::Decimal(s), Value::UInt(u)) => arith::dec_value(arith::pow10(s).and_then(|p| i128::from(u).checked_mul(p)), s),
            (Repr::Decimal(s), Value::Decimal(d)) if d.scale() != s => {
                Decimal::round_to(d.mantissa(), d.scale(), s).map(Value::Decimal).unwrap_or(Value::Null)
            }
            (Repr::Double, v @ (Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Float(_))) => {
                v.to_f64().map(Value::Double).unwrap_or(Value::Null)
            }
            (_, v) => v,
        }
    }
}

/// A literal inside an expression. Wraps [`Value`] so that plans can be hashed and compared
/// structurally (`Value`'s own equality is SQL equality, under which `1 = 1.0`); structural
/// identity is what operator reuse needs.
#[derive(Clone, Debug)]
pub struct LitValue(pub Value);

impl PartialEq for LitValue {
    fn eq(&self, o: &LitValue) -> bool {
        format!("{:?}", self.0) == format!("{:?}", o.0) && std::mem::discriminant(&self.0) == std::mem::discriminant(&o.0)
    }
}
impl Eq for LitValue {}
impl std::hash::Hash for LitValue {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        format!("{:?}", self.0).hash(h)
    }
}

fn truth(b: Option<bool>) -> Value {
    match b {
        None => Value::Null,
        Some(true) => Value::Int(1),
        Some(false) => Value::Int(0),
    }
}

/// SQL truthiness: NULL is unknown, anything else is true when its number is non-zero, as the
/// server reads it: strings and bytes are converted, a temporal value is its digits
/// (`00:00:00` and a zero date are false), a YEAR, ENUM, SET or BIT its integer.
pub fn is_true(v: &Value) -> Option<bool> {
    Some(match v {
        Value::Null => return None,
        Value::Int(i) => *i != 0,
        Value::UInt(u) | Value::Set(u) | Value::Bit(u) => *u != 0,
        Value::Time(t) => *t != 0,
        Value::Year(y) => *y != 0,
        Value::Enum(i) => *i != 0,
        Value::Date(d) => d.parts() != (0, 0, 0),
        Value::DateTime(dt) | Value::Timestamp(dt) => dt.date().parts() != (0, 0, 0) || dt.time() != (0, 0, 0, 0),
        Value::Bytes(b) => crate::value::parse_leading_f64(&String::from_utf8_lossy(b)) != 0.0,
        other => other.to_f64().unwrap_or(1.0) != 0.0,
    })
}

impl Expr {
    /// Builds a column reference.
    pub fn col(i: usize) -> Expr {
        Expr::Col(i)
    }
    /// Builds a literal.
    pub fn lit(v: Value) -> Expr {
        Expr::Lit(LitValue(v))
    }

    /// Evaluates over `row`.
    pub fn eval(&self, row: &[Value]) -> Value {
        match self {
            Expr::Col(i) => row.get(*i).cloned().unwrap_or(Value::Null),
            Expr::Lit(v) => v.0.clone(),
            Expr::Cmp(op, a, b) => {
                let (a, b) = (a.eval(row), b.eval(row));
                if *op == CmpOp::NullSafeEq {
                    return truth(Some(match (a.is_null(), b.is_null()) {
                        (true, true) => true,
                        (false, false) => a.sql_cmp(&b) == Some(Ordering::Equal),
                        _ => false,
                    }));
                }
                truth(a.sql_cmp(&b).map(|o| match op {
                    CmpOp::Eq | CmpOp::NullSafeEq => o == Ordering::Equal,
                    CmpOp::NotEq => o != Ordering::Equal,
                    CmpOp::Lt => o == Ordering::Less,
                    CmpOp::LtEq => o != Ordering::Greater,
                    CmpOp::Gt => o == Ordering::Greater,
                    CmpOp::GtEq => o != Ordering::Less,
                }))
            }
            Expr::And(a, b) => match is_true(&a.eval(row)) {
                Some(false) => truth(Some(false)),
                l => match (l, is_true(&b.eval(row))) {
                    (_, Some(false)) => truth(Some(false)),
                    (Some(true), Some(true)) => truth(Some(true)),
                    _ => Value::Null,
                },
            },
            Expr::Or(a, b) => match is_true(&a.eval(row)) {
                Some(true) => truth(Some(true)),
                l => match (l, is_true(&b.eval(row))) {
                    (_, Some(true)) => truth(Some(true)),
                    (Some(false), Some(false)) => truth(Some(false)),
                    _ => Value::Null,
                },
            },
            Expr::Not(a) => truth(is_true(&a.eval(row)).map(|b| !b)),
            Expr::IsNull(a, negated) => truth(Some(a.eval(row).is_null() != *negated)),
            Expr::InList { expr, list, negated } => {
                let v = expr.eval(row);
                if v.is_null() {
                    return Value::Null;
                }
                let mut saw_null = false;
                for e in list {
                    match v.sql_cmp(&e.eval(row)) {
                        Some(Ordering::Equal) => return truth(Some(!negated)),
                        None => saw_null = true,
                        _ => {}
                    }
                }
                if saw_null { Value::Null } else { truth(Some(*negated)) }
            }
            Expr::Between { expr, low, high, negated } => {
                let v = expr.eval(row);
                let ge = v.sql_cmp(&low.eval(row)).map(|o| o != Ordering::Less);
                let le = v.sql_cmp(&high.eval(row)).map(|o| o != Ordering::Greater);
                let r = match (ge, le) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                };
                truth(r.map(|b| b != *negated))
            }
            Expr::Like { expr, pattern, escape, negated } => {
                let (v, p) = (expr.eval(row), pattern.eval(row));
                match (text_of(&v), text_of(&p)) {
                    (Some(s), Some(pat)) => {
                        let coll = match (&v, &p) {
                            (Value::Text(_, c), _) | (_, Value::Text(_, c)) => *c,
                            _ => Collation::Binary,
                        };
                        truth(Some(like(&s, &pat, *escape, coll) != *negated))
                    }
                    _ => Value::Null,
                }
            }
            Expr::Arith(op, a, b) => arith(*op, &a.eval(row), &b.eval(row)),
            Expr::Neg(a) => arith(ArithOp::Sub, &Value::Int(0), &a.eval(row)),
            Expr::Case { operand, whens, otherwise } => {
                let op = operand.as_ref().map(|o| o.eval(row));
                for (w, t) in whens {
                    let hit = match &op {
                        Some(v) => v.sql_cmp(&w.eval(row)) == Some(Ordering::Equal),
                        None => is_true(&w.eval(row)) == Some(true),
                    };
                    if hit {
                        return t.eval(row);
                    }
                }
                otherwise.as_ref().map(|e| e.eval(row)).unwrap_or(Value::Null)
            }
            Expr::Func(f, args) => func(*f, args, row),
            Expr::Typed(e, repr) => repr.apply(e.eval(row)),
        }
    }

    /// Renders as MySQL SQL, naming input column `i` as `cols[i]`.
    pub fn to_sql(&self, cols: &[String]) -> String {
        let r = |e: &Expr| e.to_sql(cols);
        match self {
            Expr::Col(i) => cols.get(*i).cloned().unwrap_or_else(|| "NULL".into()),
            Expr::Lit(v) => literal_sql(&v.0),
            Expr::Cmp(op, a, b) => {
                let o = match op {
                    CmpOp::Eq => "=",
                    CmpOp::NotEq => "<>",
                    CmpOp::Lt => "<",
                    CmpOp::LtEq => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::GtEq => ">=",
                    CmpOp::NullSafeEq => "<=>",
                };
                format!("({} {o} {})", r(a), r(b))
            }
            Expr::And(a, b) => format!("({} AND {})", r(a), r(b)),
            Expr::Or(a, b) => format!("({} OR {})", r(a), r(b)),
            Expr::Not(a) => format!("(NOT {})", r(a)),
            Expr::IsNull(a, n) => format!("({} IS {}NULL)", r(a), if *n { "NOT " } else { "" }),
            Expr::InList { expr, list, negated } => {
                format!("({} {}IN ({}))", r(expr), if *negated { "NOT " } else { "" }, list.iter().map(r).collect::<Vec<_>>().join(", "))
            }
            Expr::Between { expr, low, high, negated } => {
                format!("({} {}BETWEEN {} AND {})", r(expr), if *negated { "NOT " } else { "" }, r(low), r(high))
            }
            Expr::Like { expr, pattern, escape, negated } => format!(
                "({} {}LIKE {} ESCAPE {})",
                r(expr),
                if *negated { "NOT " } else { "" },
                r(pattern),
                literal_sql(&Value::text(&escape.to_string(), Collation::Binary))
            ),
            Expr::Arith(op, a, b) => {
                let o = match op {
                    ArithOp::Add => "+",
                    ArithOp::Sub => "-",
                    ArithOp::Mul => "*",
                    ArithOp::Div => "/",
                    ArithOp::IntDiv => "DIV",
                    ArithOp::Mod => "%",
                };
                format!("({} {o} {})", r(a), r(b))
            }
            Expr::Neg(a) => format!("(-{})", r(a)),
            Expr::Case { operand, whens, otherwise } => {
                let mut s = String::from("(CASE");
                if let Some(o) = operand {
                    s += &format!(" {}", r(o));
                }
                for (w, t) in whens {
                    s += &format!(" WHEN {} THEN {}", r(w), r(t));
                }
                if let Some(e) = otherwise {
                    s += &format!(" ELSE {}", r(e));
                }
                s + " END)"
            }
            Expr::Func(f, args) => format!("{}({})", f.sql_name(), args.iter().map(r).collect::<Vec<_>>().join(", ")),
            Expr::Typed(e, _) => r(e),
        }
    }

    /// True if this expression's value is text, given which input columns hold text: a
    /// string function's result, a text literal, or a choice among values one of which is text
    /// (the server's `COALESCE(n, 'x')` is a string). A number computed from text
    /// (`CHAR_LENGTH(name)`) is not.
    pub fn yields_text(&self, column: &dyn Fn(usize) -> bool) -> bool {
        fn any<'a>(mut es: impl Iterator<Item = &'a Expr>, column: &dyn Fn(usize) -> bool) -> bool {
            es.any(|e| e.yields_text(column))
        }
        match self {
            Expr::Col(c) => column(*c),
            Expr::Lit(l) => matches!(l.0, Value::Text(..)),
            Expr::Func(
                Func::Concat | Func::Lower | Func::Upper | Func::Substring | Func::Trim | Func::Left | Func::Right | Func::Replace,
                _,
            ) => true,
            Expr::Func(Func::Coalesce | Func::IfNull, args) => any(args.iter(), column),
            Expr::Func(Func::If, args) => any(args.iter().skip(1), column),
            Expr::Func(Func::NullIf, args) => any(args.iter().take(1), column),
            Expr::Case { whens, otherwise, .. } => any(whens.iter().map(|(_, then)| then).chain(otherwise.as_deref()), column),
            Expr::Typed(e, _) => e.yields_text(column),
            _ => false,
        }
    }

    /// Adds to `out` the collations of the text columns this expression's string value is made
    /// of (`collation` of an input column; none for a number, a truth value or a literal): the
    /// arguments of a string function, the values a choice picks from, never a condition
    /// (`IF(a = 'q', 'z', c)` is made of `c`) or a number computed from text (`CHAR_LENGTH(c)`).
    pub fn text_collations(&self, collation: &dyn Fn(usize) -> Option<Collation>, out: &mut Vec<Collation>) {
        let mut add = |parts: &mut dyn Iterator<Item = &Expr>| {
            for p in parts {
                p.text_collations(collation, out);
            }
        };
        match self {
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
            Expr::Typed(x, _) => x.text_collations(collation, out),
            _ => {}
        }
    }

    /// True if the value is a truth value (1, 0 or NULL): a comparison, a logical operator, a
    /// test.
    pub fn is_truth(&self) -> bool {
        matches!(
            self,
            Expr::Cmp(..)
                | Expr::And(..)
                | Expr::Or(..)
                | Expr::Not(_)
                | Expr::IsNull(..)
                | Expr::InList { .. }
                | Expr::Between { .. }
                | Expr::Like { .. }
        )
    }

    /// The expressions this one is made of, in the order they are written.
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::Col(_) | Expr::Lit(_) => Vec::new(),
            Expr::Cmp(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) | Expr::Arith(_, a, b) => vec![a, b],
            Expr::Not(a) | Expr::IsNull(a, _) | Expr::Neg(a) | Expr::Typed(a, _) => vec![a],
            Expr::InList { expr, list, .. } => std::iter::once(&**expr).chain(list).collect(),
            Expr::Between { expr, low, high, .. } => vec![expr, low, high],
            Expr::Like { expr, pattern, .. } => vec![expr, pattern],
            Expr::Case { operand, whens, otherwise } => {
                operand.as_deref().into_iter().chain(whens.iter().flat_map(|(a, b)| [a, b])).chain(otherwise.as_deref()).collect()
            }
            Expr::Func(_, args) => args.iter().collect(),
        }
    }

    /// Calls `f` on every column index this expression reads, in the order they are written.
    pub fn columns(&self, f: &mut dyn FnMut(usize)) {
        match self {
            Expr::Col(i) => f(*i),
            other => other.children().into_iter().for_each(|c| c.columns(f)),
        }
    }

    /// Rewrites column indexes through `map`.
    pub fn remap(&self, map: &dyn Fn(usize) -> usize) -> Expr {
        let b = |e: &Expr| Box::new(e.remap(map));
        match self {
            Expr::Col(i) => Expr::Col(map(*i)),
            Expr::Lit(v) => Expr::Lit(v.clone()),
            Expr::Cmp(o, x, y) => Expr::Cmp(*o, b(x), b(y)),
            Expr::And(x, y) => Expr::And(b(x), b(y)),
            Expr::Or(x, y) => Expr::Or(b(x), b(y)),
            Expr::Arith(o, x, y) => Expr::Arith(*o, b(x), b(y)),
            Expr::Not(x) => Expr::Not(b(x)),
            Expr::Neg(x) => Expr::Neg(b(x)),
            Expr::IsNull(x, n) => Expr::IsNull(b(x), *n),
            Expr::InList { expr, list, negated } => {
                Expr::InList { expr: b(expr), list: list.iter().map(|e| e.remap(map)).collect(), negated: *negated }
            }
            Expr::Between { expr, low, high, negated } => Expr::Between { expr: b(expr), low: b(low), high: b(high), negated: *negated },
            Expr::Like { expr, pattern, escape, negated } => {
                Expr::Like { expr: b(expr), pattern: b(pattern), escape: *escape, negated: *negated }
            }
            Expr::Case { operand, whens, otherwise } => Expr::Case {
                operand: operand.as_ref().map(|e| b(e)),
                whens: whens.iter().map(|(x, y)| (x.remap(map), y.remap(map))).collect(),
                otherwise: otherwise.as_ref().map(|e| b(e)),
            },
            Expr::Func(f, args) => Expr::Func(*f, args.iter().map(|e| e.remap(map)).collect()),
            Expr::Typed(x, repr) => Expr::Typed(b(x), *repr),
        }
    }

    /// The expressions this one is made of, mutably, in the order [`Expr::children`] gives.
    pub fn children_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Expr::Col(_) | Expr::Lit(_) => Vec::new(),
            Expr::Cmp(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) | Expr::Arith(_, a, b) => vec![a, b],
            Expr::Not(a) | Expr::IsNull(a, _) | Expr::Neg(a) | Expr::Typed(a, _) => vec![a],
            Expr::InList { expr, list, .. } => std::iter::once(&mut **expr).chain(list).collect(),
            Expr::Between { expr, low, high, .. } => vec![expr, low, high],
            Expr::Like { expr, pattern, .. } => vec![expr, pattern],
            Expr::Case { operand, whens, otherwise } => operand
                .as_deref_mut()
                .into_iter()
                .chain(whens.iter_mut().flat_map(|(a, b)| [a, b]))
                .chain(otherwise.as_deref_mut())
                .collect(),
            Expr::Func(_, args) => args.iter_mut().collect(),
        }
    }
}

/// Renders a value as a MySQL literal.
pub fn literal_sql(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => format!("{:e}", *f as f64),
        Value::Double(f) => format!("{f:e}"),
        Value::Decimal(d) => d.to_string(),
        Value::Text(s, _) | Value::Json(s) => {
            let mut out = String::with_capacity(s.len() + 2);
            out.push('\'');
            for c in s.chars() {
                match c {
                    '\'' => out.push_str("''"),
                    '\\' => out.push_str("\\\\"),
                    '\0' => out.push_str("\\0"),
                    c => out.push(c),
                }
            }
            out.push('\'');
            out
        }
        Value::Bytes(b) => {
            format!("X'{}'", b.iter().map(|x| format!("{x:02X}")).collect::<String>())
        }
        Value::Date(_) => format!("DATE'{}'", text_of(v).unwrap_or_default()),
        Value::DateTime(_) | Value::Timestamp(_) => {
            format!("TIMESTAMP'{}'", text_of(v).unwrap_or_default())
        }
        Value::Time(_) => format!("TIME'{}'", text_of(v).unwrap_or_default()),
        Value::Year(y) => y.to_string(),
        Value::Enum(e) => e.to_string(),
        Value::Set(s) | Value::Bit(s) => s.to_string(),
    }
}

/// The text form MySQL gives a value when it needs a string (CONCAT, LIKE on numbers).
pub fn text_of(v: &Value) -> Option<String> {
    Some(match v {
        Value::Null => return None,
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Double(f) => f.to_string(),
        Value::Decimal(d) => d.to_string(),
        Value::Text(s, _) | Value::Json(s) => s.to_string(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Date(d) => {
            let (y, m, dd) = d.parts();
            format!("{y:04}-{m:02}-{dd:02}")
        }
        Value::DateTime(t) | Value::Timestamp(t) => {
            let (y, m, dd) = t.date().parts();
            let (h, mi, s, us) = t.time();
            let frac = if us > 0 { format!(".{us:06}") } else { String::new() };
            format!("{y:04}-{m:02}-{dd:02} {h:02}:{mi:02}:{s:02}{frac}")
        }
        Value::Time(us) => {
            let sign = if *us < 0 { "-" } else { "" };
            let a = us.unsigned_abs();
            let (s, frac) = (a / 1_000_000, a % 1_000_000);
            let f = if frac > 0 { format!(".{frac:06}") } else { String::new() };
            format!("{sign}{:02}:{:02}:{:02}{f}", s / 3600, s / 60 % 60, s % 60)
        }
        Value::Year(y) => y.to_string(),
        Value::Enum(e) => e.to_string(),
        Value::Set(s) | Value::Bit(s) => s.to_string(),
    })
}

/// Parses `YYYY-MM-DD` or `YYYY-MM-DD HH:MM:SS[.ffffff]` into a DATE or DATETIME value.
pub fn parse_temporal(s: &str) -> Option<Value> {
    // The server's white space only, at either end (`' 2024-01-01 '` is the date to it, with
    // no warning; `'\u{3000}2024-01-01'` is not).
    let s = s.trim_matches(crate::value::SQL_SPACE);
    let (date, time) = match s.split_once([' ', 'T']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    // Parts are ASCII digits only (`parse` would take a sign). A year of two digits is
    // 1970-2069 to the server (`'24-01-01'` is 2024-01-01) unless every part is zero
    // (`'00-00-00'` is the zero date); of one, three or four, as written.
    fn digits<T: std::str::FromStr>(part: &str, most: usize) -> Option<T> {
        (!part.is_empty() && part.len() <= most && part.bytes().all(|b| b.is_ascii_digit())).then(|| part.parse().ok())?
    }
    let mut dp = date.split('-');
    let year = dp.next()?;
    let y: u16 = digits(year, 4)?;
    let m: u8 = digits(dp.next()?, 2)?;
    let d: u8 = digits(dp.next()?, 2)?;
    if dp.next().is_some() || m > 12 || d > 31 {
        return None;
    }
    let (mut h, mut mi, mut sec, mut us) = (0u8, 0u8, 0u8, 0u32);
    if let Some(t) = time {
        let (hms, frac) = t.split_once('.').unwrap_or((t, ""));
        let mut tp = hms.split(':');
        h = digits(tp.next()?, 2)?;
        mi = digits(tp.next()?, 2)?;
        sec = digits(tp.next().unwrap_or("0"), 2)?;
        if h > 23 || mi > 59 || sec > 59 || tp.next().is_some() {
            return None;
        }
        us = if frac.is_empty() { 0 } else { digits(&format!("{frac:0<6}"), 6)? };
    }
    let zero = y == 0 && m == 0 && d == 0 && h == 0 && mi == 0 && sec == 0 && us == 0;
    let y = match y {
        y if year.len() == 2 && !zero && y < 70 => 2000 + y,
        y if year.len() == 2 && !zero => 1900 + y,
        y => y,
    };
    let date = Date::new(y, m, d);
    Some(match time {
        None => Value::Date(date),
        Some(_) => Value::DateTime(DateTime::new(date, h, mi, sec, us)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Value {
        Value::Decimal(Decimal::parse(s).unwrap())
    }
    fn t(s: &str) -> Value {
        Value::text(s, Collation::Utf8mb4GeneralCi)
    }

    #[test]
    fn arithmetic_typing() {
        assert_eq!(format!("{:?}", arith(ArithOp::Div, &Value::Int(7), &Value::Int(2))), "3.5000");
        assert_eq!(format!("{:?}", arith(ArithOp::Div, &Value::Int(2), &Value::Int(3))), "0.6667");
        assert_eq!(format!("{:?}", arith(ArithOp::Add, &d("1.10"), &Value::Int(2))), "3.10");
        assert_eq!(format!("{:?}", arith(ArithOp::Mul, &d("1.5"), &d("1.5"))), "2.25");
        assert!(arith(ArithOp::Div, &Value::Int(1), &Value::Int(0)).is_null());
        assert!(matches!(arith(ArithOp::Add, &Value::Double(1.5), &Value::Int(1)), Value::Double(f) if f == 2.5));
        assert!(arith(ArithOp::Mul, &Value::Int(i64::MAX), &Value::Int(i64::MAX)).is_null());
        assert!(arith(ArithOp::Add, &Value::Null, &Value::Int(1)).is_null());
    }

    /// A value's truth is its number's, as the server reads it: a TIME of zero, a YEAR 0000,
    /// an ENUM's empty label (index 0) and a zero date are false; the string '0' in bytes too.
    /// A YEAR or a BIT is an integer to the server's typing: `CASE WHEN c THEN 2.5 ELSE yr END`
    /// is a DECIMAL(5,1), and its `2024` is `2024.0`, the value a fill of the row has.
    #[test]
    fn typed_values_of_years_and_bits_take_the_representation() {
        let exact = |v: Value| format!("{v:?}");
        assert_eq!(exact(Repr::Decimal(1).apply(Value::Year(2024))), exact(d("2024.0")));
        assert_eq!(exact(Repr::Decimal(1).apply(Value::Bit(7))), exact(d("7.0")));
        assert_eq!(exact(Repr::Decimal(0).apply(Value::Year(1901))), exact(d("1901")));
        assert_eq!(exact(Repr::Double.apply(Value::Year(2024))), exact(Value::Double(2024.0)));
        assert_eq!(exact(Repr::Double.apply(Value::Bit(255))), exact(Value::Double(255.0)));
        assert_eq!(exact(Repr::Number.apply(Value::Bit(255))), exact(Value::UInt(255)));
        assert_eq!(exact(Repr::Number.apply(Value::Year(2024))), exact(Value::Year(2024)));
    }

    #[test]
    fn truth_of_temporal_values_is_their_number() {
        assert_eq!(is_true(&Value::Time(0)), Some(false));
        assert_eq!(is_true(&Value::Time(-1_000_000)), Some(true));
        assert_eq!(is_true(&Value::Year(0)), Some(false));
        assert_eq!(is_true(&Value::Year(1999)), Some(true));
        assert_eq!(is_true(&Value::Enum(0)), Some(false));
        assert_eq!(is_true(&Value::Enum(2)), Some(true));
        assert_eq!(is_true(&Value::Date(Date::new(0, 0, 0))), Some(false));
        assert_eq!(is_true(&Value::Date(Date::new(1, 1, 1))), Some(true));
        assert_eq!(is_true(&Value::DateTime(DateTime::new(Date::new(0, 0, 0), 0, 0, 1, 0))), Some(true));
        assert_eq!(is_true(&Value::DateTime(DateTime::new(Date::new(0, 0, 0), 0, 0, 0, 0))), Some(false));
        assert_eq!(is_true(&Value::Bytes(b"0".to_vec().into())), Some(false));
        assert_eq!(is_true(&Value::Bytes(b"2x".to_vec().into())), Some(true));
    }

    /// ROUND to tens or more rounds once, from the whole value, as the server does (MariaDB:
    /// `ROUND(4.5, -1)` is 0, `ROUND(15.5, -1)` 20, `ROUND(-4.5, -1)` 0, `ROUND(5, -1)` 10).
    #[test]
    fn round_to_tens_rounds_once() {
        let round = |v: Value, n: i64| text_of(&Expr::Func(Func::Round, vec![Expr::lit(v), Expr::lit(Value::Int(n))]).eval(&[]));
        assert_eq!(round(d("4.5"), -1).unwrap(), "0");
        assert_eq!(round(d("-4.5"), -1).unwrap(), "0");
        assert_eq!(round(d("15.5"), -1).unwrap(), "20");
        assert_eq!(round(d("14.99"), -1).unwrap(), "10");
        assert_eq!(round(d("449.5"), -2).unwrap(), "400");
        assert_eq!(round(Value::Int(5), -1).unwrap(), "10");
        assert_eq!(round(Value::Int(-5), -1).unwrap(), "-10");
        assert_eq!(round(d("5.5"), -40).unwrap(), "0");
    }

    #[test]
    fn three_valued_logic() {
        let null = Expr::lit(Value::Null);
        let one = Expr::lit(Value::Int(1));
        let zero = Expr::lit(Value::Int(0));
        let and = |a: &Expr, b: &Expr| Expr::And(Box::new(a.clone()), Box::new(b.clone())).eval(&[]);
        let or = |a: &Expr, b: &Expr| Expr::Or(Box::new(a.clone()), Box::new(b.clone())).eval(&[]);
        assert_eq!(and(&null, &zero), Value::Int(0));
        assert!(and(&null, &one).is_null());
        assert_eq!(or(&null, &one), Value::Int(1));
        assert!(or(&null, &zero).is_null());
        let inl = Expr::InList { expr: Box::new(one.clone()), list: vec![zero.clone(), null.clone()], negated: false };
        assert!(inl.eval(&[]).is_null());
    }

    #[test]
    fn like_under_collation() {
        assert!(like("Hello", "h%o", '\\', Collation::Utf8mb4GeneralCi));
        assert!(!like("Hello", "h%o", '\\', Collation::Utf8mb4Bin));
        assert!(like("a_b", "a\\_b", '\\', Collation::Binary));
        assert!(!like("axb", "a\\_b", '\\', Collation::Binary));
        assert!(like("abcabc", "%b_a%", '\\', Collation::Binary));
        assert!(like("", "%", '\\', Collation::Binary));
        assert!(!like("ab", "a", '\\', Collation::Binary));
    }

    #[test]
    fn functions() {
        let e = Expr::Func(Func::Concat, vec![Expr::lit(t("a")), Expr::lit(Value::Int(1))]);
        assert_eq!(e.eval(&[]), t("a1"));
        let e = Expr::Func(Func::Substring, vec![Expr::lit(t("hello")), Expr::lit(Value::Int(-3)), Expr::lit(Value::Int(2))]);
        assert_eq!(text_of(&e.eval(&[])).unwrap(), "ll");
        let e = Expr::Func(Func::Year, vec![Expr::lit(parse_temporal("2024-05-06 07:08:09.5").unwrap())]);
        assert_eq!(e.eval(&[]), Value::Int(2024));
        assert_eq!(text_of(&parse_temporal("2024-05-06 07:08:09.5").unwrap()).unwrap(), "2024-05-06 07:08:09.500000");
        assert!(parse_temporal(" 2024-05-06\n").is_some());
        assert!(parse_temporal("\u{3000}2024-05-06").is_none());
        let date = |s: &str| parse_temporal(s).map(|v| text_of(&v).unwrap());
        assert_eq!(date("24-01-01").as_deref(), Some("2024-01-01"));
        assert_eq!(date("70-01-01").as_deref(), Some("1970-01-01"));
        assert_eq!(date("024-01-01").as_deref(), Some("0024-01-01"));
        assert_eq!(date("+2024-01-01"), None);
        assert_eq!(date("2024-+1-01"), None);
        // A two-digit year is a year of this century or the last only in a value that is not
        // all zeros (an audit: `dd = '00-00-00'` found no zero dates).
        assert_eq!(date("00-00-00").as_deref(), Some("0000-00-00"));
        assert_eq!(date("00-0-0").as_deref(), Some("0000-00-00"));
        assert_eq!(date("00-00-00 00:00:00.000").as_deref(), Some("0000-00-00 00:00:00"));
        assert_eq!(date("00-00-00 01:00:00").as_deref(), Some("2000-00-00 01:00:00"));
        assert_eq!(date("00-01-00").as_deref(), Some("2000-01-00"));
    }

    #[test]
    fn sql_rendering_escapes() {
        let e = Expr::Cmp(CmpOp::Eq, Box::new(Expr::Col(0)), Box::new(Expr::lit(t("it's \\"))));
        assert_eq!(e.to_sql(&["`c0`".into()]), "(`c0` = 'it''s \\\\')");
    }
}
