//! The scalar functions freshet evaluates, and LIKE under a collation. Each follows MySQL's
//! result for the same arguments (NULL in, NULL out unless MySQL says otherwise).

use super::arith::{dec_value, int_value};
use super::*;

/// An argument the server reads as an integer (a position or a length), as it reads it: a
/// DECIMAL rounded half away from zero (2.5 is 3), a DOUBLE half to even (2.5 is 2, 3.5 is 4,
/// `rint`), text by its integer prefix after the server's white space (`'2.7'` and `'2e1'` are
/// 2, `'.9'` 0; past the unsigned range it is `u64::MAX`, which the server then takes as -1),
/// an unsigned integer saturated (it stays large). `None` for NULL.
fn int_arg(v: &Value) -> Option<i64> {
    let saturate = |f: f64| f as i64;
    Some(match v {
        Value::Null => return None,
        Value::Int(i) => *i,
        Value::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
        Value::Double(d) => saturate(d.round_ties_even()),
        Value::Float(f) => saturate(f64::from(*f).round_ties_even()),
        Value::Text(s, _) => {
            let t = s.trim_start_matches(crate::value::SQL_SPACE);
            let (negative, digits) = match t.as_bytes().first() {
                Some(b'-') => (true, &t[1..]),
                Some(b'+') => (false, &t[1..]),
                _ => (false, t),
            };
            let magnitude = digits
                .bytes()
                .take_while(u8::is_ascii_digit)
                .fold(0u128, |m, d| (m * 10 + u128::from(d - b'0')).min(u128::from(u64::MAX) + 1));
            if negative {
                i64::try_from(magnitude).map_or(i64::MIN, |m| -m)
            } else {
                // Wrapped as the server's signed reading of its unsigned result.
                u64::try_from(magnitude).unwrap_or(u64::MAX) as i64
            }
        }
        other => saturate(other.to_f64()?.round()),
    })
}

pub(super) fn func(f: Func, args: &[Expr], row: &[Value]) -> Value {
    let v: Vec<Value> = args.iter().map(|a| a.eval(row)).collect();
    let coll = v.iter().find_map(|x| if let Value::Text(_, c) = x { Some(*c) } else { None }).unwrap_or(Collation::Utf8mb4GeneralCi);
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
            if arg(0).sql_cmp(&arg(1)) == Some(Ordering::Equal) {
                Value::Null
            } else {
                arg(0)
            }
        }
        Func::If => {
            if is_true(&arg(0)) == Some(true) {
                arg(1)
            } else {
                arg(2)
            }
        }
        Func::Lower | Func::Upper | Func::Trim => match text_of(&arg(0)) {
            None => Value::Null,
            Some(t) => {
                let out = match f {
                    Func::Lower => coll.lower(&t),
                    Func::Upper => coll.upper(&t),
                    _ => t.trim_matches(' ').to_string(),
                };
                Value::text(&out, coll)
            }
        },
        Func::Length => text_of(&arg(0)).map(|t| Value::Int(t.len() as i64)).unwrap_or(Value::Null),
        Func::CharLength => text_of(&arg(0)).map(|t| Value::Int(t.chars().count() as i64)).unwrap_or(Value::Null),
        Func::Substring => {
            let (Some(t), Some(pos)) = (text_of(&arg(0)), int_arg(&arg(1))) else {
                return Value::Null;
            };
            let chars: Vec<char> = t.chars().collect();
            let n = chars.len() as i64;
            let start = if pos > 0 {
                pos - 1
            } else if pos < 0 {
                n.saturating_add(pos)
            } else {
                return Value::text("", coll);
            };
            if start < 0 || start >= n {
                return Value::text("", coll);
            }
            let len = match v.get(2) {
                Some(l) => match int_arg(l) {
                    Some(l) => l.max(0),
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
                Some(x) => match int_arg(x) {
                    Some(d) => d.clamp(-30, 30) as i32,
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
                    let q = if up && r > 0 {
                        q + 1
                    } else if !up && r < 0 {
                        q - 1
                    } else {
                        q
                    };
                    // The server's FLOOR and CEILING of a DECIMAL too wide for a BIGINT are a
                    // DECIMAL without decimals.
                    match i64::try_from(q) {
                        Ok(i) => Value::Int(i),
                        Err(_) => dec_value(Some(q), 0),
                    }
                }
                Value::Null => Value::Null,
                other => match other.to_f64() {
                    Some(x) => Value::Double(if up { x.ceil() } else { x.floor() }),
                    None => Value::Null,
                },
            }
        }
        Func::Left | Func::Right => {
            let (Some(t), Some(n)) = (text_of(&arg(0)), int_arg(&arg(1))) else { return Value::Null };
            let n = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
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

pub(super) fn like(s: &str, pat: &str, escape: char, coll: Collation) -> bool {
    // Under `binary` a string is bytes and `_` matches one byte: each byte as a char of its
    // own value.
    let units =
        |t: &str| -> Vec<char> { if coll == Collation::Binary { t.bytes().map(char::from).collect() } else { t.chars().collect() } };
    let s = units(s);
    let mut p: Vec<(char, bool)> = Vec::new(); // (char, is_literal)
    let mut it = units(pat).into_iter();
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
        } else if pi < p.len() && ((!p[pi].1 && p[pi].0 == '_') || coll.char_eq(p[pi].0, s[si])) {
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
