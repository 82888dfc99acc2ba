//! MySQL arithmetic with its result typing: integers, exact DECIMAL (division at the scale of
//! the dividend plus `div_precision_increment` = 4), DOUBLE; ROUND. Overflow is NULL; the
//! compiler refuses the arithmetic that may overflow (`compile/numbers.rs`).

use super::*;

pub(super) enum Num {
    I(i128),
    D(i128, u8),
    F(f64),
}

pub(super) fn as_num(v: &Value) -> Option<Num> {
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

pub(super) fn int_value(i: i128) -> Value {
    if let Ok(v) = i64::try_from(i) {
        Value::Int(v)
    } else if let Ok(v) = u64::try_from(i) {
        Value::UInt(v)
    } else {
        Value::Null
    }
}

pub(super) fn dec_value(m: Option<i128>, scale: u8) -> Value {
    m.and_then(|m| Decimal::new(m, scale)).map(Value::Decimal).unwrap_or(Value::Null)
}

pub(super) fn pow10(n: u8) -> Option<i128> {
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
            ArithOp::IntDiv => {
                if j == 0 {
                    Value::Null
                } else {
                    int_value(i / j)
                }
            }
            ArithOp::Mod => {
                if j == 0 {
                    Value::Null
                } else {
                    int_value(i % j)
                }
            }
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

/// MySQL ROUND: exact values round half away from zero (a negative `d` rounds left of the
/// point); approximate values round half to even.
pub(super) fn round(v: &Value, d: i32) -> Value {
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
            // Round to 10^-d units in one step: rounding the fraction away first would round
            // twice (4.5 to 5, then to 10, where ROUND(4.5, -1) is 0).
            let Some(p) = 10i128.checked_pow((-d) as u32) else { return int_value(0) };
            let Some(unit) = pow10(s).and_then(|f| f.checked_mul(p)) else { return int_value(0) };
            let q = m / unit;
            let r = m % unit;
            let q = if r.abs() * 2 >= unit { q + m.signum() } else { q };
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
