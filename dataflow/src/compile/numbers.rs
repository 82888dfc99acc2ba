//! Numbers the dataflow cannot compute as the server does; a query that needs them is refused
//! (relayed).
//!
//! - Floating-point arithmetic: `+`, `-`, `*`, `/` of a float or a string may overflow a DOUBLE,
//!   the server's error 1690 for that row ([`float_arithmetic`]).
//! - Sums of FLOAT and DOUBLE. The server adds a SUM or AVG of floating-point values in its
//!   scan order at every read; a view keeps a running total through inserts and deletions, in
//!   the binlog's order. Float addition is not associative: after `(1e16, 1, -1e16)` loses its
//!   `1`, the server answers 0 and the running total -1. The binary protocol sends a DOUBLE's
//!   bytes as they are. Refused whether the values are a FLOAT or DOUBLE column, computed
//!   from one, or from a floating-point literal (`1e0`).
//! - Sums that may pass 28 digits: a SUM of an argument of more than 19 digits (a partition
//!   adds fewer than 10^9 rows).
//! - DECIMAL arithmetic past 28 digits. A view's DECIMAL holds 28 significant digits
//!   ([`crate::Decimal`]); the server's holds 65 and gives a product of two DECIMAL(20,6)
//!   values all its 40. An expression (in the select list or a filter) whose DECIMAL result
//!   may need more digits than that, by the server's rules for the digits of a result (a
//!   product has the digits of both, a quotient four more decimals), is refused. Integer-only
//!   arithmetic is counted by the next rule instead.
//! - DECIMAL quotients used again. The server's `a / b` keeps more decimals than it shows:
//!   the dividend's and four more, rounded up to a multiple of nine and truncated there
//!   (`2/3 - 0.666666666` is 0), where a view's keeps the four it shows. Compared with an exact
//!   number, grouped, ordered or shown as text, the server uses the value it shows (`1/3 =
//!   0.3333` is true), as a view does. Used as a number again they differ:
//!   `ROUND(2499/20000, 2)` is 0.12 on the server and would be 0.13 here. So a quotient (and an
//!   AVG, which is one) in arithmetic, `ROUND`, a truth test, a SUM, a join's key, compared
//!   with a string or a float, picked by a choice that may pick a float (`IF(c, 10 / 3, 1e0)`
//!   is 3.333333333), or compared at all by BETWEEN, IN or `CASE x WHEN` (which read its
//!   whole value: `(10 / d) BETWEEN -1 AND 0` is false where `10 / d = 0` is true), is
//!   refused.
//! - Integer arithmetic out of its result type's range. The server types `+`, `-`, `*` and
//!   `DIV` of integers as BIGINT, UNSIGNED if either operand is (an UNSIGNED or YEAR or BIT
//!   column, or a value computed from one), and raises an error (1690, "BIGINT UNSIGNED value
//!   is out of range") for a result outside that type: `stock - 1` at stock 0, or `big + 1` at
//!   2^63 - 1. A view has no error to answer with, so an expression whose result may leave its
//!   type's range, by the ranges of the columns and literals it reads, is refused: `stock - 1`
//!   on an UNSIGNED column is, `stock + 1` on an INT column is not. `DIV` is a BIGINT whatever
//!   its operands: of DECIMALs it is bounded by their digits, of a string or a float it cannot
//!   be bounded and is refused.

use super::{Catalog, CompiledQuery, Refusal, refuse};
use crate::expr::{ArithOp, CmpOp, Expr, Func, Repr};
use crate::plan::{AggKind, Node};
use crate::schema::SqlType;
use crate::value::Value;

/// Refuses `q` if it sums or averages floating-point values, computes a DECIMAL that may
/// need more than [`MAX_DIGITS`], or integer arithmetic that may leave its type's range.
pub(super) fn check(q: &CompiledQuery, catalog: &Catalog) -> Result<(), Refusal> {
    let column_type = |table: &str, column: &str| Some(catalog.column(table, column)?.ty.clone());
    output_ranges(&q.root, &column_type)?;
    quotients(&q.root, &column_type)?;
    let float_column = |table: &str, column: &str| matches!(column_type(table, column), Some(SqlType::Float | SqlType::Double));
    // A column whose value is a DOUBLE in arithmetic: a float, or any type but the exact
    // numbers (a string is read as a DOUBLE).
    let inexact_column = |table: &str, column: &str| {
        !matches!(column_type(table, column), Some(SqlType::Int { .. } | SqlType::Decimal { .. } | SqlType::Year | SqlType::Bit { .. }))
    };
    for node in q.root.post_order() {
        match node {
            Node::Aggregate { input, aggs, .. }
                if aggs.iter().any(|a| matches!(a.kind, AggKind::Sum | AggKind::Avg) && floating(input, a.arg, &float_column)) =>
            {
                return refuse(
                    "SUM and AVG of FLOAT or DOUBLE values depend on the order they are added in, which a view cannot keep as the server does",
                );
            }
            Node::Aggregate { input, aggs, .. } => {
                for a in aggs.iter().filter(|a| a.kind == AggKind::Sum) {
                    if let Some(d) = input_digits(input, a.arg, &column_type)?
                        && d.int + d.scale + ROWS_DIGITS > MAX_DIGITS
                    {
                        return refuse(format!(
                            "a SUM of a number of {} digits may pass the {MAX_DIGITS} a view's DECIMAL holds",
                            d.int + d.scale
                        ));
                    }
                }
                for a in aggs.iter().filter(|a| a.kind == AggKind::Avg) {
                    if let Some(d) = input_digits(input, a.arg, &column_type)? {
                        // The server's AVG has four more decimals than its argument.
                        if d.int + d.scale + 4 > MAX_DIGITS {
                            return refuse(format!(
                                "an AVG of a number of {} digits has {} with its four more decimals, more than the {MAX_DIGITS} a view's DECIMAL holds",
                                d.int + d.scale,
                                d.int + d.scale + 4
                            ));
                        }
                    }
                }
            }
            Node::Project { input, exprs } => {
                let columns = column_digits(input, &column_type);
                for e in exprs {
                    float_arithmetic(e, input, &inexact_column)?;
                    digits(e, &|c| columns.get(c).copied().flatten())?;
                }
            }
            Node::Filter { input, pred } => {
                let columns = column_digits(input, &column_type);
                float_arithmetic(pred, input, &inexact_column)?;
                digits(pred, &|c| columns.get(c).copied().flatten())?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The significant digits a view's DECIMAL holds exactly (a 96-bit mantissa).
pub(super) const MAX_DIGITS: u32 = 28;

/// The digits of the number of rows a SUM adds in one partition (fewer than 10^9): a SUM has
/// as many more integer digits than its argument.
const ROWS_DIGITS: u32 = 9;

/// Digits of an exact number: before the point, after it, and whether it is a DECIMAL (not an
/// integer).
#[derive(Clone, Copy)]
pub(super) struct Digits {
    pub(super) int: u32,
    scale: u32,
    decimal: bool,
}

/// The digits a column of type `ty` holds, for the exact numeric types.
fn exact_digits(ty: SqlType) -> Option<Digits> {
    let int = |int| Some(Digits { int, scale: 0, decimal: false });
    match ty {
        SqlType::Int { bytes, unsigned } => int(match bytes {
            1 => 3,
            2 => 5,
            3 => 8,
            4 => 10,
            _ if unsigned => 20,
            _ => 19,
        }),
        SqlType::Year => int(4),
        SqlType::Decimal { precision, scale } => {
            Some(Digits { int: u32::from(precision).saturating_sub(u32::from(scale)), scale: u32::from(scale), decimal: true })
        }
        _ => None,
    }
}

/// The number of decimal digits of `n` (1 for 0).
fn width(n: u128) -> u32 {
    n.checked_ilog10().map_or(1, |d| d + 1)
}

/// The digits `e`'s value may need, `None` if it is not an exact number; refuses a DECIMAL
/// result (of `e` or a part of it) that may need more than [`MAX_DIGITS`].
pub(super) fn digits(e: &Expr, column: &dyn Fn(usize) -> Option<Digits>) -> Result<Option<Digits>, Refusal> {
    let parts: Vec<Option<Digits>> = e.children().into_iter().map(|x| digits(x, column)).collect::<Result<_, _>>()?;
    let both = |f: fn(Digits, Digits) -> (u32, u32)| match (parts.first().copied().flatten(), parts.get(1).copied().flatten()) {
        (Some(a), Some(b)) => {
            let (int, scale) = f(a, b);
            Some(Digits { int, scale, decimal: a.decimal || b.decimal })
        }
        _ => None,
    };
    let d = match e {
        Expr::Col(c) => column(*c),
        Expr::Lit(l) => match &l.0 {
            Value::Int(i) => Some(Digits { int: width(u128::from(i.unsigned_abs())), scale: 0, decimal: false }),
            Value::UInt(u) => Some(Digits { int: width(u128::from(*u)), scale: 0, decimal: false }),
            Value::Decimal(x) => {
                let scale = u32::from(x.scale());
                Some(Digits { int: width(x.mantissa().unsigned_abs()).saturating_sub(scale).max(1), scale, decimal: true })
            }
            _ => None,
        },
        Expr::Arith(op, ..) => match op {
            ArithOp::Add | ArithOp::Sub => both(|a, b| (a.int.max(b.int) + 1, a.scale.max(b.scale))),
            ArithOp::Mul => both(|a, b| (a.int + b.int, a.scale + b.scale)),
            // MySQL's quotient has div_precision_increment (4) more decimals than the dividend;
            // dividing by a number as small as the divisor's last decimal moves digits left.
            ArithOp::Div => both(|a, b| (a.int + b.scale, a.scale + 4)).map(|d| Digits { decimal: true, ..d }),
            // The server's quotient is a BIGINT, its error past that: one of integers is
            // counted by its range (`int_range`), one of DECIMALs by its digits here, and one
            // of anything else (a string, a float) cannot be bounded.
            ArithOp::IntDiv => match both(|a, b| (a.int + b.scale, 0)) {
                Some(d) if !d.decimal || d.int <= 18 => Some(Digits { decimal: false, ..d }),
                Some(d) => {
                    return refuse(format!(
                        "a DIV here may need {} digits, past BIGINT: the server's error, which a view cannot give",
                        d.int
                    ));
                }
                None => {
                    return refuse(
                        "a DIV of a value that is not an exact number may be past BIGINT: the server's error, which a view cannot give",
                    );
                }
            },
            ArithOp::Mod => both(|a, b| (a.int.max(b.int), a.scale.max(b.scale))),
        },
        Expr::Neg(_) => parts.first().copied().flatten(),
        // The server's representation (`compile/types.rs`): a DECIMAL with these decimals.
        Expr::Typed(_, Repr::Decimal(s)) => {
            parts.first().copied().flatten().map(|d| Digits { scale: d.scale.max(u32::from(*s)), decimal: true, ..d })
        }
        // ROUND, FLOOR and CEILING may carry into one more digit.
        Expr::Func(Func::Round | Func::Floor | Func::Ceil | Func::Abs, _) => {
            parts.first().copied().flatten().map(|d| Digits { int: d.int + 1, ..d })
        }
        // Integers of known width: lengths (a string holds at most 2^32 bytes), date parts,
        // truth values.
        Expr::Func(Func::Length | Func::CharLength, _) => Some(Digits { int: 10, scale: 0, decimal: false }),
        Expr::Func(Func::Year, _) => Some(Digits { int: 4, scale: 0, decimal: false }),
        Expr::Func(Func::Month | Func::Day, _) => Some(Digits { int: 2, scale: 0, decimal: false }),
        e if e.is_truth() => Some(Digits { int: 1, scale: 0, decimal: false }),
        // A value chosen among its arguments': exact only if every value it may take is (a
        // NULL takes no digits). NULLIF takes its first argument's value or NULL; IF and
        // CASE their branches', not their conditions'.
        Expr::Func(Func::Coalesce | Func::IfNull | Func::NullIf | Func::If, _) | Expr::Case { .. } => {
            let values: Vec<&Expr> = match e {
                Expr::Func(Func::NullIf, args) => args.iter().take(1).collect(),
                Expr::Func(Func::If, args) => args.iter().skip(1).collect(),
                Expr::Case { whens, otherwise, .. } => whens.iter().map(|(_, then)| then).chain(otherwise.as_deref()).collect(),
                Expr::Func(_, args) => args.iter().collect(),
                _ => Vec::new(),
            };
            let mut chosen: Option<Digits> = None;
            let mut exact = true;
            for v in values {
                if matches!(v, Expr::Lit(l) if l.0 == Value::Null) {
                    continue;
                }
                match digits(v, column)? {
                    Some(d) => {
                        chosen = Some(chosen.map_or(d, |c| Digits {
                            int: c.int.max(d.int),
                            scale: c.scale.max(d.scale),
                            decimal: c.decimal || d.decimal,
                        }))
                    }
                    None => exact = false,
                }
            }
            chosen.filter(|_| exact)
        }
        _ => None,
    };
    if let Some(d) = d
        && d.decimal
        && d.int + d.scale > MAX_DIGITS
    {
        return refuse(format!(
            "a DECIMAL computed here may need {} digits, more than the {MAX_DIGITS} a view's DECIMAL holds (the server's holds 65)",
            d.int + d.scale
        ));
    }
    Ok(d)
}

/// True if output column `col` of `node` may hold floating-point values: a copy of a FLOAT or
/// DOUBLE column, or computed from one or from a floating-point literal.
fn floating(node: &Node, col: usize, float_column: &dyn Fn(&str, &str) -> bool) -> bool {
    if let Some((table, column)) = node.origin_column(col) {
        return float_column(table, column);
    }
    match node {
        Node::Project { input, exprs } => exprs.get(col).is_some_and(|e| {
            let mut any = has_float_literal(e);
            e.columns(&mut |c| any |= floating(input, c, float_column));
            any
        }),
        Node::Filter { input, .. } | Node::Distinct { input } | Node::TopK { input, .. } => floating(input, col, float_column),
        Node::Join { left, right, .. } => {
            let lw = left.width();
            if col < lw { floating(left, col, float_column) } else { floating(right, col - lw, float_column) }
        }
        Node::Aggregate { input, group, aggs, .. } => match col.checked_sub(*group) {
            None => floating(input, col, float_column),
            Some(a) => aggs.get(a).is_some_and(|a| {
                !matches!(a.kind, AggKind::CountStar | AggKind::CountNotNull | AggKind::CountDistinct)
                    && floating(input, a.arg, float_column)
            }),
        },
        Node::Union { inputs } => inputs.iter().any(|i| floating(i, col, float_column)),
        Node::Base { .. } => false,
    }
}

/// Refuses `e` (over the columns of `input`) if it has floating-point arithmetic: `+`, `-`,
/// `*` or `/` with an operand that reads a float literal or a column `inexact` says is not an
/// exact number. Its result may overflow a DOUBLE, which is the server's error 1690 for that
/// row, and a view has no error to answer with (it would show NULL, or filter the row out).
fn float_arithmetic(e: &Expr, input: &Node, inexact: &dyn Fn(&str, &str) -> bool) -> Result<(), Refusal> {
    let floating_operand = |x: &Expr| {
        let mut any = has_float_literal(x);
        x.columns(&mut |c| any |= floating(input, c, inexact));
        any
    };
    if let Expr::Arith(ArithOp::Add | ArithOp::Sub | ArithOp::Mul | ArithOp::Div, a, b) = e
        && (floating_operand(a) || floating_operand(b))
    {
        return refuse(
            "floating-point arithmetic may overflow a DOUBLE, which is the server's error for that row; a view has no error to answer with",
        );
    }
    e.children().into_iter().try_for_each(|c| float_arithmetic(c, input, inexact))
}

fn has_float_literal(e: &Expr) -> bool {
    matches!(e, Expr::Lit(l) if matches!(l.0, Value::Float(_) | Value::Double(_))) || e.children().into_iter().any(has_float_literal)
}

/// The values an integer may take, and whether the server types it UNSIGNED.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    lo: i128,
    hi: i128,
    unsigned: bool,
}

impl Range {
    fn new(lo: i128, hi: i128, unsigned: bool) -> Range {
        Range { lo, hi, unsigned }
    }

    /// The smallest range holding both; UNSIGNED only if both are (`IF(c, u, -1) - 5` is
    /// signed on the server, `COALESCE(u) - 5` unsigned).
    fn union(self, o: Range) -> Range {
        Range::new(self.lo.min(o.lo), self.hi.max(o.hi), self.unsigned && o.unsigned)
    }

    /// The range an integer column of type `ty` holds; `None` for other types.
    fn of_type(ty: &SqlType) -> Option<Range> {
        Some(match *ty {
            SqlType::Int { bytes, unsigned: true } => Range::new(0, (1i128 << (8 * u32::from(bytes))) - 1, true),
            SqlType::Int { bytes, unsigned: false } => {
                let half = 1i128 << (8 * u32::from(bytes) - 1);
                Range::new(-half, half - 1, false)
            }
            // The server computes with YEAR and BIT as UNSIGNED (`year - 3000` is its error).
            SqlType::Year => Range::new(0, 2155, true),
            SqlType::Bit { bits } => Range::new(0, (1i128 << u32::from(bits)) - 1, true),
            _ => return None,
        })
    }

    /// Refuses a result the server would answer with an out-of-range error: outside BIGINT
    /// UNSIGNED for an UNSIGNED result, outside BIGINT otherwise.
    fn checked(self) -> Result<Range, Refusal> {
        let (min, max) = if self.unsigned { (0, i128::from(u64::MAX)) } else { (i128::from(i64::MIN), i128::from(i64::MAX)) };
        if self.lo < min || self.hi > max {
            return refuse(format!(
                "integer arithmetic here may leave the range of BIGINT{} (from {} to {}), which the server answers with an error a view cannot give",
                if self.unsigned { " UNSIGNED" } else { "" },
                self.lo,
                self.hi
            ));
        }
        Ok(self)
    }
}

/// The least integer of 19 digits.
const NINETEEN_DIGITS: i128 = 1_000_000_000_000_000_000;

/// A bound on what COUNT answers: a partition would have to hold, or join to, 2^48 rows to
/// pass it. Bounding it lets `COUNT(*) + 1` compile, while `stock - COUNT(*)` on an UNSIGNED
/// column is refused.
const MAX_COUNT: i128 = 1 << 48;

/// The integer range of each output column of `node` (`None` for a column that is not an
/// integer, or whose range is not known), refusing integer arithmetic in its projections and
/// filters that may leave its type's range. Each node is visited once.
fn output_ranges(node: &Node, column_type: &dyn Fn(&str, &str) -> Option<SqlType>) -> Result<Vec<Option<Range>>, Refusal> {
    Ok(match node {
        Node::Base { table, columns, .. } => columns.iter().map(|c| column_type(table, c).as_ref().and_then(Range::of_type)).collect(),
        Node::Filter { input, pred } => {
            let mut ranges = output_ranges(input, column_type)?;
            let digits = column_digits(input, column_type);
            int_range(pred, &ranges, &digits)?;
            narrow(pred, &mut ranges, &digits)?;
            ranges
        }
        Node::Distinct { input } | Node::TopK { input, .. } => output_ranges(input, column_type)?,
        Node::Project { input, exprs } => {
            let ranges = output_ranges(input, column_type)?;
            let digits = column_digits(input, column_type);
            exprs.iter().map(|e| int_range(e, &ranges, &digits)).collect::<Result<_, _>>()?
        }
        Node::Join { left, right, .. } => {
            let mut ranges = output_ranges(left, column_type)?;
            ranges.extend(output_ranges(right, column_type)?);
            ranges
        }
        Node::Aggregate { input, group, aggs, .. } => {
            let ranges = output_ranges(input, column_type)?;
            let mut out: Vec<Option<Range>> = ranges.iter().take(*group).copied().collect();
            out.extend(aggs.iter().map(|a| match a.kind {
                AggKind::CountStar | AggKind::CountNotNull | AggKind::CountDistinct => Some(Range::new(0, MAX_COUNT, false)),
                AggKind::Min | AggKind::Max => ranges.get(a.arg).copied().flatten(),
                // A SUM or AVG of integers is a DECIMAL.
                AggKind::Sum | AggKind::Avg => None,
            }));
            out
        }
        Node::Union { inputs } => {
            let arms: Vec<Vec<Option<Range>>> = inputs.iter().map(|i| output_ranges(i, column_type)).collect::<Result<_, _>>()?;
            let width = arms.first().map_or(0, Vec::len);
            let mut out = Vec::with_capacity(width);
            for c in 0..width {
                let column: Option<Vec<Range>> = arms.iter().map(|a| a.get(c).copied().flatten()).collect();
                let Some(column) = column else {
                    out.push(None);
                    continue;
                };
                let range = column.iter().copied().reduce(Range::union);
                // Signed and UNSIGNED integers make the server's column a DECIMAL whose
                // digits it takes from the inputs' display widths, which may be fewer than a
                // value's: `1 * u UNION ALL ROUND(9223372036854775807)` answers 18 nines.
                let mixed = column.iter().any(|r| r.unsigned) && column.iter().any(|r| !r.unsigned);
                if mixed && range.is_some_and(|r| r.lo <= -NINETEEN_DIGITS || r.hi >= NINETEEN_DIGITS) {
                    return refuse(
                        "a UNION ALL column of signed and UNSIGNED integers that may have 19 digits or more: the server's column is a DECIMAL that may hold fewer",
                    );
                }
                out.push(range);
            }
            out
        }
    })
}

/// The range of `e`'s value if it is an integer whose range is known (`columns` gives its
/// input's); refuses arithmetic in `e` whose result may leave its type's range.
fn int_range(e: &Expr, columns: &[Option<Range>], digits_of: &[Option<Digits>]) -> Result<Option<Range>, Refusal> {
    let parts: Vec<Option<Range>> = e.children().into_iter().map(|x| int_range(x, columns, digits_of)).collect::<Result<_, _>>()?;
    // An integer made of an exact number (FLOOR of a DECIMAL): as wide as its digits, and one
    // more for the carry.
    let made_integer = |x: &Expr| -> Result<Option<Range>, Refusal> {
        let d = digits(x, &|c| digits_of.get(c).copied().flatten())?;
        Ok(d.map(|d| {
            let m = 10i128.saturating_pow(d.int + 1);
            Range::new(-m, m, false)
        }))
    };
    let part = |i: usize| parts.get(i).copied().flatten();
    // The union of the given parts, if each is a known integer; a NULL literal picks nothing.
    let children = e.children();
    let null = |i: usize| matches!(children.get(i), Some(Expr::Lit(l)) if l.0.is_null());
    let union_of = |is: &mut dyn Iterator<Item = usize>| is.filter(|i| !null(*i)).map(part).reduce(|a, b| Some(a?.union(b?))).flatten();
    let r = match e {
        Expr::Col(c) => columns.get(*c).copied().flatten(),
        Expr::Lit(l) => match l.0 {
            Value::Int(i) => Some(Range::new(i.into(), i.into(), false)),
            Value::UInt(u) => Some(Range::new(u.into(), u.into(), true)),
            _ => None,
        },
        Expr::Arith(op, ..) => {
            // A quotient with an UNSIGNED integer operand is UNSIGNED, whatever the other
            // (`u DIV -0.5` is the server's error).
            if *op == ArithOp::IntDiv
                && (part(0).is_some_and(|a| a.unsigned) || part(1).is_some_and(|b| b.unsigned))
                && (part(0).is_none() || part(1).is_none())
            {
                return refuse(
                    "a DIV of an UNSIGNED integer by a value that is not an integer may be negative: the server's error, which a view cannot give",
                );
            }
            let (Some(a), Some(b)) = (part(0), part(1)) else { return Ok(None) };
            let unsigned = a.unsigned || b.unsigned;
            let r = match op {
                ArithOp::Add => Range::new(a.lo + b.lo, a.hi + b.hi, unsigned),
                ArithOp::Sub => Range::new(a.lo - b.hi, a.hi - b.lo, unsigned),
                ArithOp::Mul => {
                    let products =
                        [a.lo.saturating_mul(b.lo), a.lo.saturating_mul(b.hi), a.hi.saturating_mul(b.lo), a.hi.saturating_mul(b.hi)];
                    Range::new(*products.iter().min().unwrap_or(&0), *products.iter().max().unwrap_or(&0), unsigned)
                }
                // A quotient is no larger than its dividend, and takes its sign unless the
                // divisor may be negative (a divisor of 0 answers NULL).
                ArithOp::IntDiv if b.lo >= 0 => Range::new(a.lo.min(0), a.hi.max(0), unsigned),
                ArithOp::IntDiv => {
                    let m = a.lo.abs().max(a.hi.abs());
                    Range::new(-m, m, unsigned)
                }
                // A remainder takes the dividend's sign and is no larger: never out of range.
                ArithOp::Mod => Range::new(a.lo.min(0), a.hi.max(0), a.unsigned),
                // A quotient of integers is a DECIMAL (counted by `digits`).
                ArithOp::Div => return Ok(None),
            };
            Some(r.checked()?)
        }
        // The server answers the negation of a value past BIGINT as a DECIMAL, which a view's
        // integers do not hold.
        Expr::Neg(_) => match part(0) {
            Some(a) => Some(Range::new(-a.hi, -a.lo, false).checked()?),
            None => None,
        },
        Expr::Func(Func::Abs, _) => match part(0) {
            Some(a) if a.lo >= 0 => Some(a),
            Some(a) => Some(Range::new(0, a.lo.abs().max(a.hi.abs()), a.unsigned).checked()?),
            None => None,
        },
        Expr::Func(Func::Floor | Func::Ceil, args) => match part(0) {
            Some(a) => Some(a),
            None => made_integer(&args[0])?,
        },
        // Rounding an integer to tens or more may carry past either end.
        Expr::Func(Func::Round, args) => match (part(0), args.get(1).map(|_| part(1))) {
            // Rounded to no decimals, an exact number is an integer.
            (None, None) => made_integer(&args[0])?,
            (None, Some(Some(n))) if n.hi <= 0 => made_integer(&args[0])?,
            (None, _) => None,
            (Some(a), None) => Some(a),
            (Some(a), Some(d)) => match d {
                Some(d) if d.lo >= 0 => Some(a),
                d => {
                    let tens = d.map_or(20, |d| d.lo.unsigned_abs().min(20));
                    let carry = 10i128.pow(tens as u32);
                    Some(Range::new(a.lo - carry, a.hi + carry, a.unsigned).checked()?)
                }
            },
        },
        Expr::Func(Func::Length | Func::CharLength, _) => Some(Range::new(0, 1 << 32, false)),
        Expr::Func(Func::Year, _) => Some(Range::new(0, 9999, false)),
        Expr::Func(Func::Month, _) => Some(Range::new(0, 12, false)),
        Expr::Func(Func::Day, _) => Some(Range::new(0, 31, false)),
        // A value chosen among its arguments'.
        Expr::Func(Func::Coalesce | Func::IfNull, args) => union_of(&mut (0..args.len())),
        Expr::Func(Func::If, _) => union_of(&mut (1..3)),
        Expr::Func(Func::NullIf, _) => part(0),
        Expr::Case { operand, whens, otherwise } => {
            // Children: the operand, then each WHEN and THEN, then ELSE.
            let first = usize::from(operand.is_some());
            let thens = (0..whens.len()).map(|i| first + 2 * i + 1);
            let otherwise = otherwise.as_ref().map(|_| first + 2 * whens.len());
            union_of(&mut thens.chain(otherwise))
        }
        e if e.is_truth() => Some(Range::new(0, 1, false)),
        _ => None,
    };
    Ok(r)
}

/// Narrows the ranges of the columns `pred` bounds, for the rows that pass it: a filter's
/// rows are the only ones the expressions above it see, so `stock - 1` above `stock > 0`
/// stays in range. Only conjuncts comparing a column with an integer of known range narrow.
fn narrow(pred: &Expr, ranges: &mut [Option<Range>], digits: &[Option<Digits>]) -> Result<(), Refusal> {
    let bound = |ranges: &[Option<Range>], e: &Expr| int_range(e, ranges, digits);
    match pred {
        Expr::And(a, b) => {
            narrow(a, ranges, digits)?;
            narrow(b, ranges, digits)?;
        }
        Expr::Cmp(op, a, b) => {
            let (c, op, other) = match (&**a, &**b) {
                (Expr::Col(c), other) => (*c, *op, other),
                // `1 < c` is `c > 1`.
                (other, Expr::Col(c)) => (
                    *c,
                    match op {
                        CmpOp::Lt => CmpOp::Gt,
                        CmpOp::LtEq => CmpOp::GtEq,
                        CmpOp::Gt => CmpOp::Lt,
                        CmpOp::GtEq => CmpOp::LtEq,
                        op => *op,
                    },
                    other,
                ),
                _ => return Ok(()),
            };
            let (Some(x), Some(Some(r))) = (bound(ranges, other)?, ranges.get_mut(c)) else { return Ok(()) };
            match op {
                CmpOp::Gt => r.lo = r.lo.max(x.lo + 1),
                CmpOp::GtEq => r.lo = r.lo.max(x.lo),
                CmpOp::Lt => r.hi = r.hi.min(x.hi - 1),
                CmpOp::LtEq => r.hi = r.hi.min(x.hi),
                CmpOp::Eq | CmpOp::NullSafeEq => {
                    r.lo = r.lo.max(x.lo);
                    r.hi = r.hi.min(x.hi);
                }
                CmpOp::NotEq => {}
            }
        }
        Expr::Between { expr, low, high, negated: false } => {
            let Expr::Col(c) = **expr else { return Ok(()) };
            let (low, high) = (bound(ranges, low)?, bound(ranges, high)?);
            if let Some(Some(r)) = ranges.get_mut(c) {
                if let Some(low) = low {
                    r.lo = r.lo.max(low.lo);
                }
                if let Some(high) = high {
                    r.hi = r.hi.min(high.hi);
                }
            }
        }
        _ => {}
    }
    Ok(())
}

const QUOTIENT: &str = "a DECIMAL quotient (a / b, AVG) used again: the server keeps more decimals than it shows, a view the ones it shows";

/// Which output columns of `node` are DECIMAL quotients (`/`, AVG), refusing a quotient used
/// as a number again: in arithmetic or tested for truth ([`quotient`]), a join's key, a SUM or
/// AVG.
fn quotients(node: &Node, column_type: &dyn Fn(&str, &str) -> Option<SqlType>) -> Result<Vec<bool>, Refusal> {
    fn used(q: &[bool], mut columns: impl Iterator<Item = usize>) -> Result<(), Refusal> {
        if columns.any(|c| q.get(c) == Some(&true)) { refuse(QUOTIENT) } else { Ok(()) }
    }
    Ok(match node {
        Node::Base { columns, .. } => vec![false; columns.len()],
        Node::Filter { input, pred } => {
            let q = quotients(input, column_type)?;
            if quotient(pred, &q, &column_digits(input, column_type))? {
                return refuse(QUOTIENT);
            }
            q
        }
        Node::TopK { input, .. } => quotients(input, column_type)?,
        Node::Distinct { input } => quotients(input, column_type)?,
        Node::Union { inputs } => {
            let mut out: Vec<bool> = Vec::new();
            for i in inputs {
                let q = quotients(i, column_type)?;
                out = if out.is_empty() { q } else { out.iter().zip(q).map(|(a, b)| *a || b).collect() };
            }
            out
        }
        Node::Project { input, exprs } => {
            let q = quotients(input, column_type)?;
            let digits = column_digits(input, column_type);
            exprs.iter().map(|e| quotient(e, &q, &digits)).collect::<Result<_, _>>()?
        }
        Node::Join { left, right, on, .. } => {
            let (l, r) = (quotients(left, column_type)?, quotients(right, column_type)?);
            used(&l, on.iter().map(|(c, _)| *c))?;
            used(&r, on.iter().map(|(_, c)| *c))?;
            l.into_iter().chain(r).collect()
        }
        Node::Aggregate { input, group, aggs, .. } => {
            let q = quotients(input, column_type)?;
            used(&q, aggs.iter().filter(|a| matches!(a.kind, AggKind::Sum | AggKind::Avg)).map(|a| a.arg))?;
            let mut out = vec![false; *group];
            out.extend(aggs.iter().map(|a| a.kind == AggKind::Avg));
            out
        }
    })
}

/// True if `e`'s value is a quotient: a `/`, or a choice that may pick one. Refuses a
/// quotient used as a number again (arithmetic, `ROUND`, `ABS`, ...). Compared with an exact
/// number, shown as text or picked, a quotient is what the server uses there: its value
/// rounded to the decimals it shows (`1/3 = 0.3333` is true on the server).
fn quotient(e: &Expr, columns: &[bool], digits_of: &[Option<Digits>]) -> Result<bool, Refusal> {
    let children = e.children();
    let parts: Vec<bool> = children.iter().map(|x| quotient(x, columns, digits_of)).collect::<Result<_, _>>()?;
    // Compared with a string or a float, the server converts a quotient to a DOUBLE from its
    // whole value (`0 <> 3 / 99999999.99` is true there, false by the shown 0.000000): the
    // values it is compared with must be exact numbers (or NULL).
    let compared: Vec<usize> = match e {
        Expr::Cmp(..) | Expr::InList { .. } | Expr::Between { .. } | Expr::Func(Func::NullIf, _) => (0..children.len()).collect(),
        Expr::Case { operand: Some(_), whens, .. } => std::iter::once(0).chain((0..whens.len()).map(|i| 1 + 2 * i)).collect(),
        _ => Vec::new(),
    };
    // Where a quotient is among `places` (of `e`'s parts), every other value there must be an
    // exact number (or NULL).
    let beside_exact = |places: &[usize]| -> Result<(), Refusal> {
        if !places.iter().any(|i| parts.get(*i) == Some(&true)) {
            return Ok(());
        }
        for i in places.iter().filter(|i| parts.get(**i) != Some(&true)) {
            let exact = match children.get(*i) {
                Some(Expr::Lit(l)) if l.0.is_null() => true,
                Some(x) => digits(x, &|c| digits_of.get(c).copied().flatten())?.is_some(),
                None => true,
            };
            if !exact {
                return refuse(QUOTIENT);
            }
        }
        Ok(())
    };
    // BETWEEN, IN and CASE x WHEN compare a quotient by its whole value even with exact
    // numbers (`(10 / d) BETWEEN -1 AND 0` is false at 10 / 99999999.99, `= 0` true).
    let whole = matches!(e, Expr::InList { .. } | Expr::Between { .. } | Expr::Case { operand: Some(_), .. });
    if whole && compared.iter().any(|i| parts.get(*i) == Some(&true)) {
        return refuse(QUOTIENT);
    }
    beside_exact(&compared)?;
    // Tested for truth (AND, OR, NOT, IF's condition, CASE's WHEN), a quotient is its whole
    // value too: `(3 / 2147483647) AND 1` is true on the server.
    let condition = match e {
        Expr::And(..) | Expr::Or(..) | Expr::Not(_) => parts.contains(&true),
        Expr::Func(Func::If, _) => parts.first() == Some(&true),
        Expr::Case { operand: None, whens, .. } => (0..whens.len()).any(|i| parts.get(2 * i) == Some(&true)),
        _ => false,
    };
    if condition {
        return refuse(QUOTIENT);
    }
    // Picked by a choice that may pick a value that is not an exact number (a float: the
    // server's choice is then a DOUBLE, a string being refused elsewhere), a quotient is
    // converted from its whole value: `IF(c, 10 / 3, 1e0)` is 3.333333333 on the server.
    let picks: Vec<usize> = match e {
        Expr::Func(Func::Coalesce | Func::IfNull, _) => (0..children.len()).collect(),
        Expr::Func(Func::NullIf, _) => vec![0],
        Expr::Func(Func::If, _) => vec![1, 2],
        Expr::Case { operand, whens, .. } => {
            let first = usize::from(operand.is_some());
            (0..whens.len())
                .map(|i| first + 2 * i + 1)
                .chain((children.len() > first + 2 * whens.len()).then_some(children.len() - 1))
                .collect()
        }
        _ => Vec::new(),
    };
    beside_exact(&picks)?;
    Ok(match e {
        Expr::Col(c) => columns.get(*c) == Some(&true),
        Expr::Func(Func::Coalesce | Func::IfNull | Func::NullIf | Func::If, _) | Expr::Case { .. } | Expr::Typed(..) => {
            parts.contains(&true)
        }
        Expr::Arith(..) | Expr::Neg(_) | Expr::Func(Func::Round | Func::Floor | Func::Ceil | Func::Abs, _) if parts.contains(&true) => {
            return refuse(QUOTIENT);
        }
        Expr::Arith(ArithOp::Div, ..) => true,
        _ => false,
    })
}

/// The digits of each output column of `node` that copies an exact numeric column.
/// The digits of `node`'s column `col`: a base column's type's, or a projected expression's.
fn input_digits(node: &Node, col: usize, column_type: &dyn Fn(&str, &str) -> Option<SqlType>) -> Result<Option<Digits>, Refusal> {
    if let Some((t, n)) = node.origin_column(col) {
        return Ok(column_type(t, n).and_then(exact_digits));
    }
    match node {
        Node::Project { input, exprs } => match exprs.get(col) {
            Some(e) => {
                let columns = column_digits(input, column_type);
                digits(e, &|c| columns.get(c).copied().flatten())
            }
            None => Ok(None),
        },
        Node::Filter { input, .. } => input_digits(input, col, column_type),
        _ => Ok(None),
    }
}

pub(super) fn column_digits(node: &Node, column_type: &dyn Fn(&str, &str) -> Option<SqlType>) -> Vec<Option<Digits>> {
    (0..node.width()).map(|c| node.origin_column(c).and_then(|(t, n)| column_type(t, n)).and_then(exact_digits)).collect()
}
