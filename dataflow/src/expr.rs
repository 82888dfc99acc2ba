//! Compiled scalar expressions: evaluation over a row, and rendering back to MySQL SQL.
//!
//! Owns: [`Expr`], MySQL's three-valued logic, arithmetic typing (integer, exact DECIMAL with
//! `div_precision_increment = 4`, DOUBLE), LIKE under a collation, and the scalar functions
//! freshet evaluates. Does not own: name resolution (compile), aggregates (ops).
//!
//! Invariants: evaluation never panics; an error MySQL would raise at run time (BIGINT overflow)
//! evaluates to NULL here, which is a documented divergence — the compiler only accepts
//! expressions whose columns it resolved, so `Col(i)` is always in range of the rows it sees
//! (checked again defensively: an out-of-range column reads as NULL). `to_sql` renders an
//! expression the upstream evaluates to the same value.

use std::cmp::Ordering;

use crate::value::{Collation, Date, DateTime, Decimal, Value};

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
    InList { expr: Box<Expr>, list: Vec<Expr>, negated: bool },
    Between { expr: Box<Expr>, low: Box<Expr>, high: Box<Expr>, negated: bool },
    Like { expr: Box<Expr>, pattern: Box<Expr>, escape: char, negated: bool },
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
    Case { operand: Option<Box<Expr>>, whens: Vec<(Expr, Expr)>, otherwise: Option<Box<Expr>> },
    Func(Func, Vec<Expr>),
}

/// A literal inside an expression. Wraps [`Value`] so that plans can be hashed and compared
/// structurally (`Value`'s own equality is SQL equality, under which `1 = 1.0`); structural
/// identity is what operator reuse needs.
#[derive(Clone, Debug)]
pub struct LitValue(pub Value);

impl PartialEq for LitValue {
    fn eq(&self, o: &LitValue) -> bool {
        format!("{:?}", self.0) == format!("{:?}", o.0)
            && std::mem::discriminant(&self.0) == std::mem::discriminant(&o.0)
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

/// SQL truthiness: NULL is unknown, numbers are true when non-zero, strings are converted.
pub fn is_true(v: &Value) -> Option<bool> {
    match v {
        Value::Null => None,
        Value::Int(i) => Some(*i != 0),
        Value::UInt(u) => Some(*u != 0),
        other => Some(other.to_f64().unwrap_or(1.0) != 0.0),
    }
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
            Expr::InList { expr, list, negated } => format!(
                "({} {}IN ({}))",
                r(expr),
                if *negated { "NOT " } else { "" },
                list.iter().map(r).collect::<Vec<_>>().join(", ")
            ),
            Expr::Between { expr, low, high, negated } => format!(
                "({} {}BETWEEN {} AND {})",
                r(expr),
                if *negated { "NOT " } else { "" },
                r(low),
                r(high)
            ),
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
            Expr::Func(f, args) => format!(
                "{}({})",
                f.sql_name(),
                args.iter().map(r).collect::<Vec<_>>().join(", ")
            ),
        }
    }

    /// Calls `f` on every column index this expression reads.
    pub fn columns(&self, f: &mut dyn FnMut(usize)) {
        match self {
            Expr::Col(i) => f(*i),
            Expr::Lit(_) => {}
            Expr::Cmp(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) | Expr::Arith(_, a, b) => {
                a.columns(f);
                b.columns(f)
            }
            Expr::Not(a) | Expr::IsNull(a, _) | Expr::Neg(a) => a.columns(f),
            Expr::InList { expr, list, .. } => {
                expr.columns(f);
                list.iter().for_each(|e| e.columns(f))
            }
            Expr::Between { expr, low, high, .. } => {
                expr.columns(f);
                low.columns(f);
                high.columns(f)
            }
            Expr::Like { expr, pattern, .. } => {
                expr.columns(f);
                pattern.columns(f)
            }
            Expr::Case { operand, whens, otherwise } => {
                operand.iter().for_each(|e| e.columns(f));
                whens.iter().for_each(|(a, b)| {
                    a.columns(f);
                    b.columns(f)
                });
                otherwise.iter().for_each(|e| e.columns(f));
            }
            Expr::Func(_, args) => args.iter().for_each(|e| e.columns(f)),
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
            Expr::InList { expr, list, negated } => Expr::InList {
                expr: b(expr),
                list: list.iter().map(|e| e.remap(map)).collect(),
                negated: *negated,
            },
            Expr::Between { expr, low, high, negated } => {
                Expr::Between { expr: b(expr), low: b(low), high: b(high), negated: *negated }
            }
            Expr::Like { expr, pattern, escape, negated } => {
                Expr::Like { expr: b(expr), pattern: b(pattern), escape: *escape, negated: *negated }
            }
            Expr::Case { operand, whens, otherwise } => Expr::Case {
                operand: operand.as_ref().map(|e| b(e)),
                whens: whens.iter().map(|(x, y)| (x.remap(map), y.remap(map))).collect(),
                otherwise: otherwise.as_ref().map(|e| b(e)),
            },
            Expr::Func(f, args) => Expr::Func(*f, args.iter().map(|e| e.remap(map)).collect()),
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
    let s = s.trim();
    let (date, time) = match s.split_once([' ', 'T']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let mut dp = date.split('-');
    let y: u16 = dp.next()?.parse().ok()?;
    let m: u8 = dp.next()?.parse().ok()?;
    let d: u8 = dp.next()?.parse().ok()?;
    if dp.next().is_some() || m > 12 || d > 31 {
        return None;
    }
    let date = Date::new(y, m, d);
    let Some(t) = time else { return Some(Value::Date(date)) };
    let (hms, frac) = t.split_once('.').unwrap_or((t, ""));
    let mut tp = hms.split(':');
    let h: u8 = tp.next()?.parse().ok()?;
    let mi: u8 = tp.next()?.parse().ok()?;
    let sec: u8 = tp.next().unwrap_or("0").parse().ok()?;
    if h > 23 || mi > 59 || sec > 59 || frac.len() > 6 {
        return None;
    }
    let us: u32 = if frac.is_empty() { 0 } else { format!("{frac:0<6}").parse().ok()? };
    Some(Value::DateTime(DateTime::new(date, h, mi, sec, us)))
}

fn like(s: &str, pat: &str, escape: char, coll: Collation) -> bool {
    let s: Vec<char> = s.chars().collect();
    let mut p: Vec<(char, bool)> = Vec::new(); // (char, is_literal)
    let mut it = pat.chars();
    while let Some(c) = it.next() {
        if c == escape {
            match it.next() {
                Some(n) => p.push((n, true)),
                None => p.push((c, true)),
            }
        } else {
            p.push((c, false));
        }
    }
    // Iterative wildcard matching with backtracking to the last '%'.
    let (mut si, mut pi) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && !p[pi].1 && p[pi].0 == '%' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len()
            && ((!p[pi].1 && p[pi].0 == '_') || coll.char_eq(p[pi].0, s[si]))
        {
            pi += 1;
            si += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && !p[pi].1 && p[pi].0 == '%' {
        pi += 1;
    }
    pi == p.len()
}

enum Num {
    I(i128),
    D(i128, u8),
    F(f64),
}

fn as_num(v: &Value) -> Option<Num> {
    Some(match v {
        Value::Null => return None,
        Value::Int(i) => Num::I(*i as i128),
        Value::UInt(u) => Num::I(*u as i128),
        Value::Year(y) => Num::I(*y as i128),
        Value::Bit(b) => Num::I(*b as i128),
        Value::Decimal(d) => Num::D(d.mantissa(), d.scale()),
        other => Num::F(other.to_f64().unwrap_or(0.0)),
    })
}

fn int_value(i: i128) -> Value {
    if let Ok(v) = i64::try_from(i) {
        Value::Int(v)
    } else if let Ok(v) = u64::try_from(i) {
        Value::UInt(v)
    } else {
        Value::Null
    }
}

fn dec_value(m: Option<i128>, scale: u8) -> Value {
    m.and_then(|m| Decimal::new(m, scale)).map(Value::Decimal).unwrap_or(Value::Null)
}

fn pow10(n: u8) -> Option<i128> {
    10i128.checked_pow(n as u32)
}

/// MySQL arithmetic with its result typing.
pub fn arith(op: ArithOp, a: &Value, b: &Value) -> Value {
    let (Some(x), Some(y)) = (as_num(a), as_num(b)) else { return Value::Null };
    let to_dec = |n: &Num| match n {
        Num::I(i) => Some((*i, 0u8)),
        Num::D(m, s) => Some((*m, *s)),
        Num::F(_) => None,
    };
    let to_f = |n: &Num| match n {
        Num::I(i) => *i as f64,
        Num::D(m, s) => *m as f64 / 10f64.powi(*s as i32),
        Num::F(f) => *f,
    };
    if let (Num::I(i), Num::I(j)) = (&x, &y) {
        let (i, j) = (*i, *j);
        return match op {
            ArithOp::Add => int_value(i + j),
            ArithOp::Sub => int_value(i - j),
            ArithOp::Mul => i.checked_mul(j).map(int_value).unwrap_or(Value::Null),
            ArithOp::IntDiv => if j == 0 { Value::Null } else { int_value(i / j) },
            ArithOp::Mod => if j == 0 { Value::Null } else { int_value(i % j) },
            ArithOp::Div => div_dec(i, 0, j, 0),
        };
    }
    if let (Some((m1, s1)), Some((m2, s2))) = (to_dec(&x), to_dec(&y)) {
        let s = s1.max(s2);
        let r1 = pow10(s - s1).and_then(|p| m1.checked_mul(p));
        let r2 = pow10(s - s2).and_then(|p| m2.checked_mul(p));
        return match op {
            ArithOp::Add => dec_value(r1.zip(r2).and_then(|(a, b)| a.checked_add(b)), s),
            ArithOp::Sub => dec_value(r1.zip(r2).and_then(|(a, b)| a.checked_sub(b)), s),
            ArithOp::Mul => dec_value(m1.checked_mul(m2), s1 + s2),
            ArithOp::Div => div_dec(m1, s1, m2, s2),
            ArithOp::IntDiv => match r1.zip(r2) {
                Some((_, 0)) | None => Value::Null,
                Some((a, b)) => int_value(a / b),
            },
            ArithOp::Mod => match r1.zip(r2) {
                Some((_, 0)) | None => Value::Null,
                Some((a, b)) => dec_value(Some(a % b), s),
            },
        };
    }
    let (f, g) = (to_f(&x), to_f(&y));
    let r = match op {
        ArithOp::Add => f + g,
        ArithOp::Sub => f - g,
        ArithOp::Mul => f * g,
        ArithOp::Div if g == 0.0 => return Value::Null,
        ArithOp::Div => f / g,
        ArithOp::IntDiv if g == 0.0 => return Value::Null,
        ArithOp::IntDiv => return int_value((f / g).trunc() as i128),
        ArithOp::Mod if g == 0.0 => return Value::Null,
        ArithOp::Mod => f % g,
    };
    if r.is_finite() { Value::Double(r) } else { Value::Null }
}

/// `a / b` for exact operands: scale of `a` plus 4, rounded half away from zero.
pub fn div_dec(m1: i128, s1: u8, m2: i128, s2: u8) -> Value {
    if m2 == 0 {
        return Value::Null;
    }
    let rs = s1 + 4;
    // mantissa at scale rs+1 = m1 * 10^(s2 + 5) / m2, then round off the extra digit.
    let num = pow10(s2 + 5).and_then(|p| m1.checked_mul(p));
    match num {
        Some(n) => {
            let q = n / m2;
            dec_value(Decimal::round_to(q, rs + 1, rs).map(|d| d.mantissa()), rs)
        }
        None => Value::Null,
    }
}

fn func(f: Func, args: &[Expr], row: &[Value]) -> Value {
    let v: Vec<Value> = args.iter().map(|a| a.eval(row)).collect();
    let coll = v
        .iter()
        .find_map(|x| if let Value::Text(_, c) = x { Some(*c) } else { None })
        .unwrap_or(Collation::Utf8mb4_0900AiCi);
    let arg = |i: usize| v.get(i).cloned().unwrap_or(Value::Null);
    match f {
        Func::Concat => {
            let mut s = String::new();
            for x in &v {
                match text_of(x) {
                    Some(t) => s.push_str(&t),
                    None => return Value::Null,
                }
            }
            Value::text(&s, coll)
        }
        Func::Coalesce | Func::IfNull => v.into_iter().find(|x| !x.is_null()).unwrap_or(Value::Null),
        Func::NullIf => {
            if arg(0).sql_cmp(&arg(1)) == Some(Ordering::Equal) { Value::Null } else { arg(0) }
        }
        Func::If => if is_true(&arg(0)) == Some(true) { arg(1) } else { arg(2) },
        Func::Lower | Func::Upper | Func::Trim => match text_of(&arg(0)) {
            None => Value::Null,
            Some(t) => {
                let out = match f {
                    Func::Lower => t.to_lowercase(),
                    Func::Upper => t.to_uppercase(),
                    _ => t.trim_matches(' ').to_string(),
                };
                Value::text(&out, coll)
            }
        },
        Func::Length => text_of(&arg(0)).map(|t| Value::Int(t.len() as i64)).unwrap_or(Value::Null),
        Func::CharLength => text_of(&arg(0))
            .map(|t| Value::Int(t.chars().count() as i64))
            .unwrap_or(Value::Null),
        Func::Substring => {
            let (Some(t), Some(pos)) = (text_of(&arg(0)), arg(1).to_f64()) else {
                return Value::Null;
            };
            let chars: Vec<char> = t.chars().collect();
            let n = chars.len() as i64;
            let pos = pos.round() as i64;
            let start = if pos > 0 { pos - 1 } else if pos < 0 { n.saturating_add(pos) } else { return Value::text("", coll) };
            if start < 0 || start >= n {
                return Value::text("", coll);
            }
            let len = match v.get(2) {
                Some(l) => match l.to_f64() {
                    Some(l) => (l.round() as i64).max(0),
                    None => return Value::Null,
                },
                None => n,
            };
            let end = start.saturating_add(len).min(n);
            Value::text(&chars[start as usize..end as usize].iter().collect::<String>(), coll)
        }
        Func::Abs => match arg(0) {
            Value::Int(i) => int_value((i as i128).abs()),
            Value::Decimal(d) => dec_value(Some(d.mantissa().abs()), d.scale()),
            Value::Null => Value::Null,
            x @ Value::UInt(_) => x,
            other => other.to_f64().map(|f| Value::Double(f.abs())).unwrap_or(Value::Null),
        },
        Func::Round => {
            let d = match v.get(1) {
                None => 0,
                Some(x) => match x.to_f64() {
                    Some(f) => f.round().clamp(-30.0, 30.0) as i32,
                    None => return Value::Null,
                },
            };
            round(&arg(0), d)
        }
        Func::Floor | Func::Ceil => {
            let up = f == Func::Ceil;
            match arg(0) {
                x @ (Value::Int(_) | Value::UInt(_)) => x,
                Value::Decimal(dec) => {
                    let p = 10i128.pow(dec.scale() as u32);
                    let (q, r) = (dec.mantissa() / p, dec.mantissa() % p);
                    let q = if up && r > 0 { q + 1 } else if !up && r < 0 { q - 1 } else { q };
                    int_value(q)
                }
                Value::Null => Value::Null,
                other => match other.to_f64() {
                    Some(x) => Value::Double(if up { x.ceil() } else { x.floor() }),
                    None => Value::Null,
                },
            }
        }
        Func::Left | Func::Right => {
            let (Some(t), Some(n)) = (text_of(&arg(0)), arg(1).to_f64()) else { return Value::Null };
            let n = n.round().max(0.0) as usize;
            let chars: Vec<char> = t.chars().collect();
            let n = n.min(chars.len());
            let part: String = if f == Func::Left { chars[..n].iter().collect() } else { chars[chars.len() - n..].iter().collect() };
            Value::text(&part, coll)
        }
        Func::Replace => match (text_of(&arg(0)), text_of(&arg(1)), text_of(&arg(2))) {
            (Some(s), Some(from), Some(to)) => {
                // REPLACE is case-sensitive in MySQL whatever the collation.
                let out = if from.is_empty() { s } else { s.replace(&from, &to) };
                Value::text(&out, coll)
            }
            _ => Value::Null,
        },
        Func::Year | Func::Month | Func::Day | Func::Date => {
            let date = match arg(0) {
                Value::Date(d) => d,
                Value::DateTime(t) | Value::Timestamp(t) => t.date(),
                Value::Text(s, _) => match parse_temporal(&s) {
                    Some(Value::Date(d)) => d,
                    Some(Value::DateTime(t)) => t.date(),
                    _ => return Value::Null,
                },
                _ => return Value::Null,
            };
            let (y, m, d) = date.parts();
            match f {
                Func::Year => Value::Int(y as i64),
                Func::Month => Value::Int(m as i64),
                Func::Day => Value::Int(d as i64),
                _ => Value::Date(date),
            }
        }
    }
}

/// MySQL ROUND: exact values round half away from zero (a negative `d` rounds left of the
/// point); approximate values round half to even.
fn round(v: &Value, d: i32) -> Value {
    let exact = match v {
        Value::Null => return Value::Null,
        Value::Int(i) => Some((*i as i128, 0u8)),
        Value::UInt(u) => Some((*u as i128, 0u8)),
        Value::Decimal(x) => Some((x.mantissa(), x.scale())),
        _ => None,
    };
    match exact {
        Some((m, s)) if d >= 0 => {
            let to = (d as u8).min(s);
            let r = Decimal::round_to(m, s, to).map(|x| x.mantissa());
            if matches!(v, Value::Int(_) | Value::UInt(_)) { int_value(m) } else { dec_value(r, to) }
        }
        Some((m, s)) => {
            // Round to 10^-d units: drop the fraction, then the digits left of the point.
            let Some(whole) = Decimal::round_to(m, s, 0) else { return Value::Null };
            let Some(p) = 10i128.checked_pow((-d) as u32) else { return int_value(0) };
            let mm = whole.mantissa();
            let q = mm / p;
            let r = mm % p;
            let q = if r.abs() * 2 >= p { q + mm.signum() } else { q };
            match q.checked_mul(p) {
                Some(x) if matches!(v, Value::Decimal(_)) => dec_value(Some(x), 0),
                Some(x) => int_value(x),
                None => Value::Null,
            }
        }
        None => match v.to_f64() {
            Some(x) => {
                let p = 10f64.powi(d);
                Value::Double((x * p).round_ties_even() / p)
            }
            None => Value::Null,
        },
    }
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
    }

    #[test]
    fn sql_rendering_escapes() {
        let e = Expr::Cmp(CmpOp::Eq, Box::new(Expr::Col(0)), Box::new(Expr::lit(t("it's \\"))));
        assert_eq!(e.to_sql(&["`c0`".into()]), "(`c0` = 'it''s \\\\')");
    }
}
