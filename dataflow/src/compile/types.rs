//! What the server's static type of an expression decides: the compiler gives a view's values
//! that type's representation where they would not have it, and refuses a query whose answer
//! depends on the type in ways a view does not reproduce (it is relayed).
//!
//! The server types every expression before it reads a row. `COALESCE(d, 0)` on a
//! DECIMAL(10,2) is a DECIMAL with two decimals, so the `0` it picks is `0.00`; `ROUND(d, 3)`
//! has three; `IF(c, 5, 'a')` is a string even when it picks 5; `IF(c, f, 0.1)` with a DOUBLE
//! `f` is a DOUBLE. A view computes each value from the values it reads, so without this pass
//! its value has the type and scale of the branch it came from. That matters twice:
//! - a row filled by the server (its typed value) and the same row computed by the view (a
//!   row the binlog changed) must be one row, or a deleted row stays in the answer;
//! - a value used again (as text, in arithmetic) must be the server's.
//!
//! So the choices (`IF`, `CASE`, `COALESCE`, `IFNULL`) and `ROUND` to more decimals than its
//! argument has are wrapped in [`Expr::Typed`], which converts each value to the type's
//! representation: a DECIMAL's scale, or a DOUBLE; a choice of integers with a BIT among them
//! (and `NULLIF` of a BIT) a number, since the server shows it as digits, not bytes. Refused, because the view would need the
//! server's conversions and formatting:
//! - a choice between a string (or a temporal value, or bytes) and another kind of value;
//! - a DOUBLE or FLOAT shown as text (the server's digits), or a temporal value with
//!   fractional seconds (the server shows the column's digits);
//! - arithmetic on a temporal value, bytes, JSON, an ENUM or a SET, and a DECIMAL remainder
//!   (the server's may be a negative zero, which it compares unequal to 0);
//! - `ROUND` of a DECIMAL to a computed number of decimals, `FLOOR` and `CEILING` of a
//!   DOUBLE or a string (an exact integer of any size to the server), `ROUND` of a DOUBLE or
//!   a string (fixed digits to the server, which a DISTINCT or a grouping's temporary table
//!   holds: `ROUND(1e300)` is 1e17 there);
//! - `YEAR`, `MONTH`, `DAY` or `DATE` of a value that is not a date (of a TIME, the server's
//!   is today's date plus the time);
//! - a temporal value compared with a value that is not temporal (a literal compared with a
//!   column was already given the column's type by `lower`);
//! - `BETWEEN` of a string and a number, which the server compares under one type for all
//!   three operands where the view compares two at a time (`IN` compares pairwise on both);
//! - a `UNION ALL` whose inputs give one column values of different kinds;
//! - SUM or AVG of a value that is not an exact number (a date is summed as 20240229);
//! - MIN or MAX of a BIT, which the server shows as its bytes or as its digits by its plan;
//! - a BIT read as a string (a string function, LIKE): the server reads its bytes
//!   (`b'1000001'` is `'A'`), a view its number; bytes there, which the server reads as a
//!   binary string (`UPPER` leaves them, lengths are in bytes, LIKE is case-sensitive);
//! - a join of two columns the server compares by a conversion (a string with a number or a
//!   date, strings of two collations, a DATE with a DATETIME): a view matches join keys by
//!   their values.

use super::numbers::{self, Digits};
use super::{Catalog, CompiledQuery, Refusal, refuse};
use crate::expr::{ArithOp, Expr, Func, Repr};
use crate::plan::{AggKind, Node};
use crate::schema::SqlType;
use crate::value::{Collation, Value};

/// The kind of the server's static type of a value, as far as its representation goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// The NULL literal: takes any other class.
    Null,
    Int,
    /// An exact number with this many decimals.
    Dec(u8),
    /// DOUBLE or FLOAT.
    Real,
    Str,
    Bytes,
    /// A temporal value: which type (by [`SqlType`] discriminant order) and its fractional
    /// digits.
    Time(u8, u8),
    /// JSON, ENUM, SET: compared and shown by rules of their own (`labels.rs`).
    Other,
    /// Not known (a value the pass does not type).
    Unknown,
}

impl Class {
    /// The kind of [`Class::Time`] a TIME is (a time of day or an interval, not a date).
    const TIME_OF_DAY: u8 = 1;

    fn of_type(ty: &SqlType) -> Class {
        match *ty {
            SqlType::Int { .. } | SqlType::Year | SqlType::Bit { .. } => Class::Int,
            SqlType::Decimal { scale, .. } => Class::Dec(scale),
            SqlType::Float | SqlType::Double => Class::Real,
            SqlType::Text => Class::Str,
            SqlType::Bytes => Class::Bytes,
            SqlType::Date => Class::Time(0, 0),
            SqlType::Time { fsp } => Class::Time(Class::TIME_OF_DAY, fsp),
            SqlType::DateTime { fsp } => Class::Time(2, fsp),
            SqlType::Timestamp { fsp } => Class::Time(3, fsp),
            SqlType::Enum(_) | SqlType::Set(_) | SqlType::Json => Class::Other,
        }
    }

    fn of_value(v: &Value) -> Class {
        match v {
            Value::Null => Class::Null,
            Value::Int(_) | Value::UInt(_) | Value::Year(_) | Value::Bit(_) => Class::Int,
            Value::Decimal(d) => Class::Dec(d.scale()),
            Value::Float(_) | Value::Double(_) => Class::Real,
            Value::Text(..) => Class::Str,
            Value::Bytes(_) => Class::Bytes,
            Value::Date(_) => Class::Time(0, 0),
            Value::Time(_) => Class::Time(Class::TIME_OF_DAY, 0),
            Value::DateTime(_) => Class::Time(2, 0),
            Value::Timestamp(_) => Class::Time(3, 0),
            Value::Enum(_) | Value::Set(_) | Value::Json(_) => Class::Other,
        }
    }

    fn numeric(self) -> bool {
        matches!(self, Class::Int | Class::Dec(_) | Class::Real)
    }

    /// Text or bytes: read as a number where a number is needed, with a warning for each one
    /// that is not a number.
    fn string(self) -> bool {
        matches!(self, Class::Str | Class::Bytes)
    }

    /// A string-like class: the server converts a choice that has one to a string.
    fn stringy(self) -> bool {
        matches!(self, Class::Str | Class::Bytes | Class::Time(..) | Class::Other)
    }

    /// The decimals of an exact number.
    fn scale(self) -> u8 {
        match self {
            Class::Dec(s) => s,
            _ => 0,
        }
    }
}

/// Types every expression of `q`'s plan, wrapping what needs the server's representation in
/// [`Expr::Typed`]; refuses what a view cannot answer as the server does (the module header).
pub(super) fn apply(q: &mut CompiledQuery, catalog: &Catalog) -> Result<(), Refusal> {
    node_classes(&mut q.root, catalog)?;
    Ok(())
}

/// What an expression's columns are: their classes, and the digits of those that copy an
/// exact numeric column (to bound a rescaled DECIMAL).
struct Inputs<'a> {
    classes: &'a [Class],
    digits: Vec<Option<Digits>>,
    /// Per column: a copy of a BIT column (a number to arithmetic and comparisons, its bytes
    /// to string functions and LIKE).
    bits: Vec<bool>,
    /// Per column: a copy of an integer column, UNSIGNED (YEAR and BIT count as UNSIGNED, as
    /// the server computes with them) or not; `None` for any other column.
    unsigned: Vec<Option<bool>>,
}

impl Inputs<'_> {
    fn of<'a>(input: &Node, classes: &'a [Class], catalog: &Catalog) -> Inputs<'a> {
        let bits = (0..classes.len())
            .map(|c| {
                input.origin_column(c).and_then(|(t, n)| catalog.column(t, n)).is_some_and(|col| matches!(col.ty, SqlType::Bit { .. }))
            })
            .collect();
        let unsigned = (0..classes.len())
            .map(|c| {
                input.origin_column(c).and_then(|(t, n)| catalog.column(t, n)).and_then(|col| match col.ty {
                    SqlType::Int { unsigned, .. } => Some(unsigned),
                    SqlType::Year | SqlType::Bit { .. } => Some(true),
                    _ => None,
                })
            })
            .collect();
        Inputs {
            classes,
            digits: numbers::column_digits(input, &|table, column| Some(catalog.column(table, column)?.ty.clone())),
            bits,
            unsigned,
        }
    }

    /// Whether the server types integer `e` UNSIGNED: `Some(true)` or `Some(false)` where this
    /// can tell (a column, a literal, `+ - * DIV` of them, a negation, a truth value), `None`
    /// elsewhere.
    fn unsigned(&self, e: &Expr) -> Option<bool> {
        match e {
            Expr::Col(c) => self.unsigned.get(*c).copied().flatten(),
            Expr::Lit(l) => match l.0 {
                Value::Int(_) => Some(false),
                Value::UInt(_) => Some(true),
                _ => None,
            },
            Expr::Arith(ArithOp::Add | ArithOp::Sub | ArithOp::Mul | ArithOp::IntDiv, a, b) => match (self.unsigned(a), self.unsigned(b)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            Expr::Neg(_) => Some(false),
            e if e.is_truth() => Some(false),
            _ => None,
        }
    }

    /// True if `e`'s value may be a BIT as the server types it: a BIT column, or a choice
    /// that may pick one.
    fn bit(&self, e: &Expr) -> bool {
        match e {
            Expr::Col(c) => self.bits.get(*c).copied().unwrap_or(false),
            Expr::Func(Func::Coalesce | Func::IfNull, args) => args.iter().any(|a| self.bit(a)),
            Expr::Func(Func::If, args) => args.iter().skip(1).any(|a| self.bit(a)),
            Expr::Func(Func::NullIf, args) => args.first().is_some_and(|a| self.bit(a)),
            // A choice of BITs the server shows as digits: still a BIT to string functions.
            Expr::Typed(inner, Repr::Number) => self.bit(inner),
            Expr::Case { whens, otherwise, .. } => whens.iter().map(|(_, then)| then).chain(otherwise.as_deref()).any(|a| self.bit(a)),
            _ => false,
        }
    }

    /// Refuses a BIT among `parts` where the server reads a string (its bytes), and bytes
    /// (`classes`, the parts' classes), which the server reads as a binary string (no case,
    /// lengths in bytes, a binary result) and a view as text under a collation.
    fn no_bits_or_bytes(&self, parts: &[&Expr], classes: &[Class]) -> Result<(), Refusal> {
        if parts.iter().any(|p| self.bit(p)) {
            return refuse("a BIT read as a string (a string function, LIKE): the server reads its bytes, a view its number");
        }
        if classes.contains(&Class::Bytes) {
            return refuse(
                "bytes (BINARY, VARBINARY, BLOB) in a string function or LIKE: the server reads a binary string (no case, lengths in bytes), a view text under a collation",
            );
        }
        Ok(())
    }

    /// The digits `e` may need; `None` if not known.
    fn digits(&self, e: &Expr) -> Result<Option<Digits>, Refusal> {
        numbers::digits(e, &|c| self.digits.get(c).copied().flatten())
    }
}

/// The class of each output column of `node`, typing the expressions below it.
fn node_classes(node: &mut Node, catalog: &Catalog) -> Result<Vec<Class>, Refusal> {
    Ok(match node {
        Node::Base { table, columns, .. } => {
            columns.iter().map(|c| catalog.column(table, c).map_or(Class::Unknown, |c| Class::of_type(&c.ty))).collect()
        }
        Node::Filter { input, pred } => {
            let classes = node_classes(input, catalog)?;
            let c = class(pred, &Inputs::of(input, &classes, catalog))?;
            read_as_number(pred, c)?;
            classes
        }
        Node::Distinct { input } | Node::TopK { input, .. } => node_classes(input, catalog)?,
        Node::Project { input, exprs } => {
            let classes = node_classes(input, catalog)?;
            let inputs = Inputs::of(input, &classes, catalog);
            exprs.iter_mut().map(|e| class(e, &inputs)).collect::<Result<_, _>>()?
        }
        Node::Join { left, right, on, .. } => {
            let mut classes = node_classes(left, catalog)?;
            let right_classes = node_classes(right, catalog)?;
            let class = |classes: &[Class], c: usize| classes.get(c).copied().unwrap_or(Class::Unknown);
            let collation = |side: &Node, c: usize| side.origin_column(c).and_then(|(t, n)| catalog.column(t, n)?.collation);
            for &(l, r) in on.iter() {
                joinable((class(&classes, l), collation(left, l)), (class(&right_classes, r), collation(right, r)))?;
            }
            classes.extend(right_classes);
            classes
        }
        Node::Aggregate { input, group, aggs, .. } => {
            let classes = node_classes(input, catalog)?;
            let arg = |a: usize| classes.get(a).copied().unwrap_or(Class::Unknown);
            // The server sums a date as its number (20240229), a string as a DOUBLE (in scan
            // order); a view's running total holds exact numbers only.
            if aggs
                .iter()
                .any(|a| matches!(a.kind, AggKind::Sum | AggKind::Avg) && !matches!(arg(a.arg), Class::Int | Class::Dec(_) | Class::Null))
            {
                return refuse("SUM or AVG of a value that is not an exact number: the server converts it by rules of its own");
            }
            // The server shows a BIT's MIN or MAX as its bytes or as its digits, by how it
            // groups the rows (`GROUP BY bt` and `GROUP BY k` differ).
            let bits = Inputs::of(input, &classes, catalog);
            if aggs.iter().any(|a| matches!(a.kind, AggKind::Min | AggKind::Max) && bits.bit(&Expr::Col(a.arg))) {
                return refuse("MIN or MAX of a BIT: the server shows its bytes or its digits, by how it groups the rows");
            }
            let mut out: Vec<Class> = classes.iter().take(*group).copied().collect();
            out.extend(aggs.iter().map(|a| match a.kind {
                AggKind::CountStar | AggKind::CountNotNull | AggKind::CountDistinct => Class::Int,
                AggKind::Min | AggKind::Max => arg(a.arg),
                // The view's running totals keep the inputs' decimals (`ops/agg.rs`), as the
                // server's SUM does; an average has four more.
                AggKind::Sum => match arg(a.arg) {
                    c @ (Class::Int | Class::Dec(_)) => Class::Dec(c.scale()),
                    _ => Class::Unknown,
                },
                AggKind::Avg => match arg(a.arg) {
                    c @ (Class::Int | Class::Dec(_)) => Class::Dec(c.scale() + 4),
                    _ => Class::Unknown,
                },
            }));
            out
        }
        Node::Union { inputs } => {
            let mut all = Vec::new();
            for i in inputs.iter_mut() {
                all.push(node_classes(i, catalog)?);
            }
            let width = all.first().map_or(0, Vec::len);
            let mut out = Vec::with_capacity(width);
            for c in 0..width {
                let mut column = all.iter().filter_map(|cs| cs.get(c).copied()).filter(|c| *c != Class::Null);
                let first = column.next().unwrap_or(Class::Null);
                if column.any(|c| c != first) {
                    return refuse(
                        "the inputs of this UNION ALL give a column values of different types, which the server converts to one type a view does not",
                    );
                }
                out.push(first);
            }
            out
        }
    })
}

/// Refuses a join of two columns a view would find unequal where the server finds them equal:
/// a view matches join keys by their values (`Value`'s equality and hash), the server by its
/// comparison of the two types. A string and a number are compared as numbers (`'42' = 42`,
/// `'x' = 0`), a string and a date as dates, two strings under one collation the server picks
/// from the two, a DATE and a DATETIME as DATETIMEs. So the keys must be exact numbers both,
/// DOUBLEs both, strings of one collation, byte strings, or temporal values of one type.
fn joinable(a: (Class, Option<Collation>), b: (Class, Option<Collation>)) -> Result<(), Refusal> {
    let ok = match (a.0, b.0) {
        (Class::Int | Class::Dec(_), Class::Int | Class::Dec(_)) | (Class::Real, Class::Real) | (Class::Bytes, Class::Bytes) => true,
        (Class::Str, Class::Str) => a.1 == b.1,
        (Class::Time(x, _), Class::Time(y, _)) => x == y,
        _ => false,
    };
    if ok {
        return Ok(());
    }
    refuse(
        "a join of columns the server compares by a conversion (a string with a number or a date, strings of two collations, a DATE with a DATETIME, a computed key): a view matches join keys by their values",
    )
}

/// The class of `e`, given its input's column classes; types its parts first, and wraps `e`
/// in [`Expr::Typed`] where its values need the server's representation.
fn class(e: &mut Expr, inputs: &Inputs<'_>) -> Result<Class, Refusal> {
    let parts: Vec<Class> = e.children_mut().into_iter().map(|x| class(x, inputs)).collect::<Result<_, _>>()?;
    quiet(e, &parts)?;
    let part = |i: usize| parts.get(i).copied().unwrap_or(Class::Unknown);
    let c = match e {
        Expr::Col(c) => inputs.classes.get(*c).copied().unwrap_or(Class::Unknown),
        Expr::Lit(l) => Class::of_value(&l.0),
        Expr::Typed(_, Repr::Decimal(s)) => Class::Dec(*s),
        Expr::Typed(_, Repr::Double) => Class::Real,
        Expr::Typed(_, Repr::Number) => Class::Int,
        Expr::Arith(op, ..) => {
            let (a, b) = (number(part(0))?, number(part(1))?);
            match (a, b) {
                // A string in arithmetic is converted to a DOUBLE.
                (Class::Real | Class::Str, _) | (_, Class::Real | Class::Str) => Class::Real,
                // NULL's arithmetic has a type of the server's own choosing.
                (Class::Null | Class::Unknown, _) | (_, Class::Null | Class::Unknown) => Class::Unknown,
                // A DECIMAL remainder of zero and a negative dividend is -0 to the server, which
                // it compares unequal to 0 (`-5 % -2.5 = 0` is false); a view's DECIMAL has no -0.
                (Class::Dec(_), _) | (_, Class::Dec(_)) if *op == ArithOp::Mod => {
                    return refuse(
                        "a DECIMAL remainder: the server's may be a negative zero, unequal to 0, which a view's DECIMAL does not hold",
                    );
                }
                _ => match op {
                    ArithOp::IntDiv => Class::Int,
                    ArithOp::Div => Class::Dec(a.scale() + 4),
                    ArithOp::Mul if a == Class::Int && b == Class::Int => Class::Int,
                    ArithOp::Mul => Class::Dec(a.scale() + b.scale()),
                    _ if a == Class::Int && b == Class::Int => Class::Int,
                    _ => Class::Dec(a.scale().max(b.scale())),
                },
            }
        }
        // Of NULL, these are DOUBLEs to the server (FLOOR(NULL) is a DOUBLE(17,0)).
        Expr::Neg(_) | Expr::Func(Func::Abs, _) => match number(part(0))? {
            Class::Str | Class::Null => Class::Real,
            c => c,
        },
        Expr::Func(Func::Floor | Func::Ceil, _) => match number(part(0))? {
            Class::Int | Class::Dec(_) => Class::Int,
            // The server's is an integer (a BIGINT, or an exact number past it: FLOOR(1e30) is
            // 31 digits), the view's a DOUBLE.
            Class::Str | Class::Real => {
                return refuse(
                    "FLOOR or CEILING of a FLOAT, DOUBLE or string: the server's is an exact integer of any size, a view's a DOUBLE",
                );
            }
            Class::Null => Class::Real,
            c => c,
        },
        Expr::Func(Func::Round, args) => {
            let x = number(part(0))?;
            match (x, args.get(1)) {
                (Class::Str | Class::Real, _) => {
                    return refuse(
                        "ROUND of a FLOAT, DOUBLE or string: the server types it with fixed digits and holds it so where it keeps values (DISTINCT ROUND(1e300) is 1e17)",
                    );
                }
                (Class::Dec(s), Some(n)) => match literal_int(n) {
                    // The server's result has the decimals asked for; the view's rounding
                    // keeps the argument's when it has fewer.
                    Some(n) if n > i64::from(s) => {
                        let n = u8::try_from(n).unwrap_or(u8::MAX);
                        rescalable(inputs, &args[0], s, n)?;
                        return Ok(wrap(e, Repr::Decimal(n)));
                    }
                    Some(n) => Class::Dec(u8::try_from(n.max(0)).unwrap_or(0)),
                    None => return refuse("ROUND of a DECIMAL to a computed number of decimals: the server's type keeps the argument's"),
                },
                // A DECIMAL of no decimals, not an integer: ROUND(ROUND(d), 2) has two.
                (Class::Dec(_), None) => Class::Dec(0),
                (Class::Null, _) => Class::Real,
                (c, _) => c,
            }
        }
        Expr::Func(Func::Length | Func::CharLength, args) => {
            inputs.no_bits_or_bytes(&args.iter().collect::<Vec<_>>(), &parts)?;
            text(part(0))?;
            Class::Int
        }
        // Of a number or a string, the server reads a date by rules of its own (0 is
        // 0000-00-00, 20240229 is a date).
        // Of a TIME, the server's is today's date plus the time.
        Expr::Func(f @ (Func::Year | Func::Month | Func::Day | Func::Date), _) => {
            let date = match part(0) {
                Class::Time(kind, _) => kind != Class::TIME_OF_DAY,
                c => c == Class::Null,
            };
            if !date {
                return refuse(
                    "YEAR, MONTH, DAY or DATE of a value that is not a date: the server reads one from it by rules a view does not follow (of a TIME, today's date plus the time)",
                );
            }
            if *f == Func::Date { Class::Time(0, 0) } else { Class::Int }
        }
        Expr::Func(Func::Concat | Func::Lower | Func::Upper | Func::Trim | Func::Replace, args) => {
            inputs.no_bits_or_bytes(&args.iter().collect::<Vec<_>>(), &parts)?;
            for p in &parts {
                text(*p)?;
            }
            Class::Str
        }
        Expr::Func(Func::Substring | Func::Left | Func::Right, args) => {
            inputs.no_bits_or_bytes(&args.iter().take(1).collect::<Vec<_>>(), &parts[..1.min(parts.len())])?;
            text(part(0))?;
            for p in parts.iter().skip(1) {
                number(*p)?;
            }
            Class::Str
        }
        Expr::Like { expr, pattern, .. } => {
            inputs.no_bits_or_bytes(&[expr, pattern], &parts)?;
            text(part(0))?;
            text(part(1))?;
            Class::Int
        }
        Expr::Cmp(..) => {
            comparable(&[part(0), part(1)])?;
            Class::Int
        }
        Expr::InList { .. } => {
            for p in parts.iter().skip(1) {
                comparable(&[part(0), *p])?;
            }
            Class::Int
        }
        Expr::Between { .. } => {
            comparable(&parts)?;
            let known: Vec<Class> = parts.iter().copied().filter(|c| *c != Class::Null).collect();
            // Bytes with text: the server compares all three as bytes, a view text with text
            // under its collation.
            let mixed = known.iter().any(|c| c.stringy()) && known.iter().any(|c| c.numeric())
                || known.contains(&Class::Bytes) && known.contains(&Class::Str);
            if known.contains(&Class::Unknown) || mixed {
                return refuse(
                    "BETWEEN of a string and a number, or of bytes and text (or of a value whose type is not known here): the server compares all three under one type, a view two at a time",
                );
            }
            Class::Int
        }
        Expr::And(..) | Expr::Or(..) | Expr::Not(_) | Expr::IsNull(..) => Class::Int,
        // NULLIF compares its two arguments, CASE its operand with each WHEN.
        Expr::Func(Func::NullIf, _) => {
            comparable(&[part(0), part(1)])?;
            // NULLIF is its first argument's type: a BIT shown as its digits.
            if inputs.bit(e) {
                return Ok(wrap(e, Repr::Number));
            }
            part(0)
        }
        Expr::Func(Func::If, _) => return choice(e, &[1, 2], &parts, inputs),
        Expr::Func(Func::Coalesce | Func::IfNull, _) => return choice(e, &(0..parts.len()).collect::<Vec<_>>(), &parts, inputs),
        Expr::Case { operand, whens, otherwise } => {
            // Parts: the operand, then each WHEN and THEN, then ELSE (no ELSE is a NULL).
            let first = usize::from(operand.is_some());
            if operand.is_some() {
                for i in 0..whens.len() {
                    comparable(&[part(0), part(1 + 2 * i)])?;
                }
            }
            let mut picks: Vec<usize> = (0..whens.len()).map(|i| first + 2 * i + 1).collect();
            picks.extend(otherwise.as_ref().map(|_| first + 2 * whens.len()));
            return choice(e, &picks, &parts, inputs);
        }
    };
    Ok(c)
}

/// The class of a choice among its parts `picks` (`IF`'s branches, `COALESCE`'s arguments,
/// `CASE`'s results; `parts` are the classes of all of `e`'s parts), wrapping `e` when the
/// server's type of it is not every pick's.
fn choice(e: &mut Expr, picks: &[usize], parts: &[Class], inputs: &Inputs<'_>) -> Result<Class, Refusal> {
    let class_of = |i: usize| parts.get(i).copied().unwrap_or(Class::Unknown);
    // An integer and a DECIMAL of no decimals are one representation (`Value::exact_cmp`).
    let known: Vec<Class> = picks
        .iter()
        .map(|i| match class_of(*i) {
            Class::Dec(0) => Class::Int,
            c => c,
        })
        .filter(|c| *c != Class::Null)
        .collect();
    let Some(&first) = known.first() else { return Ok(Class::Null) };
    let mixed_signs = mixed_signs(e, picks, parts, inputs)?;
    if known.iter().all(|c| *c == first) {
        // Integers and DECIMALs of no decimals make a DECIMAL, shown alike.
        let dec = picks.iter().any(|i| class_of(*i) == Class::Dec(0));
        if first == Class::Int && !dec && inputs.bit(e) {
            // Integers, a BIT among them: the server shows the BIT picked as its digits.
            return Ok(wrap(e, Repr::Number));
        }
        let decimal = first == Class::Int && (dec || mixed_signs) || matches!(first, Class::Dec(_));
        if decimal {
            narrow_picks(e, picks)?;
        }
        return Ok(if first == Class::Int && (dec || mixed_signs) { Class::Dec(0) } else { first });
    }
    if known.contains(&Class::Unknown) {
        return refuse("IF, CASE or COALESCE picks among values of types not all known here");
    }
    if known.iter().any(|c| c.stringy()) {
        return refuse(
            "IF, CASE or COALESCE picks between a string (or a date, bytes, JSON) and another kind of value: the server's answer is a string either way, a view's the value picked",
        );
    }
    if known.contains(&Class::Real) {
        return Ok(wrap(e, Repr::Double));
    }
    let scale = known.iter().map(|c| c.scale()).max().unwrap_or(0);
    narrow_picks(e, picks)?;
    let children = e.children();
    for &i in picks {
        if let (Some(pick), c @ (Class::Int | Class::Dec(_))) = (children.get(i), class_of(i)) {
            rescalable(inputs, pick, c.scale(), scale)?;
        }
    }
    Ok(wrap(e, Repr::Decimal(scale)))
}

/// Refuses a DECIMAL choice `e` one of whose `picks` holds FLOOR, CEILING, ROUND or ABS of a
/// literal, or a DIV of one. MariaDB declares such a value a digit narrower than the literal,
/// and the choice as narrow (`IF(c, 0.25, ABS(10))` is a DECIMAL(3,2)); a plan that keeps
/// the choice's value in a temporary table of that type (DISTINCT, GROUP BY of it, MIN and MAX
/// grouped without the key's index) clips 10.00 to 9.99, and one that does not shows 10.00.
/// A view cannot tell which plan the server takes.
fn narrow_picks(e: &Expr, picks: &[usize]) -> Result<(), Refusal> {
    fn narrowed(e: &Expr) -> bool {
        let literal = |a: Option<&Expr>| matches!(a, Some(Expr::Lit(_)));
        match e {
            Expr::Func(Func::Floor | Func::Ceil | Func::Round | Func::Abs, args) if literal(args.first()) => true,
            Expr::Arith(crate::expr::ArithOp::IntDiv, a, _) if literal(Some(a)) => true,
            other => other.children().into_iter().any(narrowed),
        }
    }
    let children = e.children();
    if picks.iter().filter_map(|i| children.get(*i)).any(|p| narrowed(p)) {
        return refuse(
            "IF, CASE or COALESCE of a DECIMAL over FLOOR, CEILING, ROUND or ABS of a literal, or a DIV of one: the server declares it a digit narrower and clips its values where its plan keeps them in a temporary table",
        );
    }
    Ok(())
}

/// Whether the integer picks of choice `e` are signed and UNSIGNED both, which makes the
/// choice a DECIMAL on the server (`IF(c, i, u)` is a DECIMAL(10,0): `ROUND(IF(c, i, u), 2)`
/// shows `1.00`), shown as the integers are; refuses a choice of an UNSIGNED integer and one
/// whose sign is not known here.
fn mixed_signs(e: &Expr, picks: &[usize], parts: &[Class], inputs: &Inputs<'_>) -> Result<bool, Refusal> {
    let children = e.children();
    let signs: Vec<Option<bool>> =
        picks.iter().filter(|i| parts.get(**i) == Some(&Class::Int)).map(|i| children.get(*i).and_then(|p| inputs.unsigned(p))).collect();
    let mixed = signs.contains(&Some(true)) && signs.iter().any(|u| *u != Some(true));
    if mixed && signs.contains(&None) {
        return refuse("IF, CASE or COALESCE picks an UNSIGNED integer and one whose sign the server's typing does not show here");
    }
    Ok(mixed)
}

/// Refuses rescaling `e`'s values from `from` decimals to `to` when that may need more digits
/// than a view's DECIMAL holds (its value would be NULL, the server's is not).
fn rescalable(inputs: &Inputs<'_>, e: &Expr, from: u8, to: u8) -> Result<(), Refusal> {
    if to <= from {
        return Ok(());
    }
    // Not known: as many as a view's DECIMAL holds.
    let int = inputs.digits(e)?.map_or(numbers::MAX_DIGITS, |d| d.int);
    if int + u32::from(to) > numbers::MAX_DIGITS {
        return refuse(format!(
            "a DECIMAL shown with {to} decimals here may need more than the {} digits a view's DECIMAL holds",
            numbers::MAX_DIGITS
        ));
    }
    Ok(())
}

/// Wraps `e` in [`Expr::Typed`] with `repr`; its class.
fn wrap(e: &mut Expr, repr: Repr) -> Class {
    let inner = std::mem::replace(e, Expr::Col(0));
    *e = Expr::Typed(Box::new(inner), repr);
    match repr {
        Repr::Decimal(s) => Class::Dec(s),
        Repr::Double => Class::Real,
        Repr::Number => Class::Int,
    }
}

/// Refuses what makes the server warn as it evaluates `e` (whose parts have the classes
/// `parts`): a cached answer's EOF counts no warnings, where the server counts one for each
/// string it reads as a number that is not one (`'a' + 1`, `WHERE s`, `s = 0` with a text `s`,
/// even `'5 '`, a note) and for each division by zero (`a / b`, `a % b`, `a DIV b`). So a
/// string read as a number must be a literal that is a number, and a divisor a literal that is
/// not zero. (A text key parameter compared with a number is the reader's: it relays one that
/// is not a number.)
fn quiet(e: &Expr, parts: &[Class]) -> Result<(), Refusal> {
    let part = |i: usize| parts.get(i).copied().unwrap_or(Class::Unknown);
    let kids = e.children();
    let number = |i: usize| kids.get(i).map_or(Ok(()), |k| read_as_number(k, part(i)));
    // Compared, a string (or bytes) and a number are both read as numbers.
    let compared = |a: usize, b: usize| {
        if part(a).string() && part(b).numeric() {
            number(a)
        } else if part(b).string() && part(a).numeric() {
            number(b)
        } else {
            Ok(())
        }
    };
    match e {
        Expr::Arith(op, _, divisor) => {
            if matches!(op, ArithOp::Div | ArithOp::Mod | ArithOp::IntDiv) && !nonzero_literal(divisor) {
                return refuse(
                    "a division by a value that may be zero: the server answers NULL with a warning for each, and a cached answer counts no warnings",
                );
            }
            number(0)?;
            number(1)?;
        }
        // Their arguments (and ROUND's decimals, a substring's positions) are numbers; a
        // boolean's operands are read as numbers too.
        Expr::Neg(_) | Expr::Not(_) | Expr::And(..) | Expr::Or(..) | Expr::Func(Func::Abs | Func::Floor | Func::Ceil | Func::Round, _) => {
            (0..kids.len()).try_for_each(number)?
        }
        // A position is read as an integer, with a warning past 64 bits: an integer, or a
        // literal one.
        Expr::Func(Func::Substring | Func::Left | Func::Right, _) => {
            for (i, kid) in kids.iter().enumerate().skip(1) {
                if !(part(i) == Class::Int || integer_literal(kid)) {
                    return refuse(
                        "a string position that is not an integer: the server warns where it does not fit 64 bits, and a cached answer counts no warnings",
                    );
                }
            }
        }
        // IF's condition.
        Expr::Func(Func::If, _) => number(0)?,
        Expr::Cmp(..) | Expr::Func(Func::NullIf, _) => compared(0, 1)?,
        Expr::InList { .. } => (1..kids.len()).try_for_each(|i| compared(0, i))?,
        Expr::Case { operand, whens, .. } => {
            for i in 0..whens.len() {
                match operand {
                    Some(_) => compared(0, 1 + 2 * i)?,
                    // A searched CASE's conditions.
                    None => number(2 * i)?,
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Refuses a string or bytes read as a number (or a truth value) unless it is a text literal
/// the server reads without a warning. A bytes literal is refused: the parser writes `0x31`
/// (the number 49 to MariaDB) and `X'31'` (the string '1') alike.
fn read_as_number(e: &Expr, c: Class) -> Result<(), Refusal> {
    let clean = match e {
        Expr::Lit(l) => match &l.0 {
            Value::Text(s, _) => plain_number(s),
            Value::Bytes(_) => false,
            _ => true,
        },
        _ => !c.string(),
    };
    if clean {
        return Ok(());
    }
    refuse("a string read as a number: the server warns for each one that is not a number, and a cached answer counts no warnings")
}

/// A number written with nothing else around it (an optional sign, digits with an optional
/// point), which the server reads as a number without a warning. No exponent, and at most 28
/// digits: the server reads such a string as a DECIMAL when it meets an exact number, and
/// warns where it overflows (`n = '1e100'`).
fn plain_number(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let mut n = digits(&mut i);
    if b.get(i) == Some(&b'.') {
        i += 1;
        n += digits(&mut i);
    }
    (1..=28).contains(&n) && i == b.len()
}

/// An integer literal the server reads as a 64-bit integer without a warning: one written as
/// such ([`literal_int`]; from -2^63 down, or past 2^63 - 1, it may be a DECIMAL to the server)
/// or a string of at most 18 digits.
fn integer_literal(e: &Expr) -> bool {
    match e {
        Expr::Lit(l) if let Value::Text(s, _) = &l.0 => {
            let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
            (1..=18).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
        }
        _ => literal_int(e).is_some(),
    }
}

/// A numeric literal other than zero (written as one or negated).
fn nonzero_literal(e: &Expr) -> bool {
    match e {
        Expr::Lit(l) => match &l.0 {
            Value::Int(i) => *i != 0,
            Value::UInt(u) => *u != 0,
            Value::Decimal(d) => d.mantissa() != 0,
            Value::Double(f) => *f != 0.0,
            _ => false,
        },
        Expr::Neg(x) => nonzero_literal(x),
        _ => false,
    }
}

/// Refuses a value the view does not convert to a number as the server does.
fn number(c: Class) -> Result<Class, Refusal> {
    if matches!(c, Class::Time(..) | Class::Bytes | Class::Other) {
        return refuse("arithmetic on a date, time, bytes, JSON, ENUM or SET value: the server converts it to a number a view does not");
    }
    Ok(c)
}

/// Refuses a value the view does not convert to text as the server does.
fn text(c: Class) -> Result<(), Refusal> {
    match c {
        Class::Real => refuse("a FLOAT or DOUBLE used as text: the server writes its digits its own way"),
        Class::Time(_, fsp) if fsp > 0 => {
            refuse("a temporal value with fractional seconds used as text: the server writes every digit of its type")
        }
        _ => Ok(()),
    }
}

/// Refuses a comparison of a temporal value with a value that is not temporal (the server
/// converts the other to the temporal type), and of a TIME with a date (the server makes the
/// TIME a DATETIME on today's date).
fn comparable(classes: &[Class]) -> Result<(), Refusal> {
    let known: Vec<Class> = classes.iter().copied().filter(|c| !matches!(c, Class::Null | Class::Unknown)).collect();
    let temporal = known.iter().filter(|c| matches!(c, Class::Time(..))).count();
    if temporal > 0 && temporal < known.len() {
        return refuse("a date or time compared with a value that is not one: the server converts it by rules a view does not follow");
    }
    let time_of_day = known.iter().filter(|c| matches!(c, Class::Time(Class::TIME_OF_DAY, _))).count();
    if time_of_day > 0 && time_of_day < known.len() {
        return refuse("a TIME compared with a date: the server reads the TIME as a DATETIME on today's date");
    }
    Ok(())
}

/// An integer literal, written as one or negated (`-2` is parsed as a negation).
fn literal_int(e: &Expr) -> Option<i64> {
    match e {
        Expr::Lit(l) => match l.0 {
            Value::Int(i) => Some(i),
            Value::UInt(u) => i64::try_from(u).ok(),
            _ => None,
        },
        Expr::Neg(x) => literal_int(x)?.checked_neg(),
        _ => None,
    }
}
