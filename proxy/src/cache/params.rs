//! Lookup parameters: literals of a text query and bound parameters of COM_STMT_EXECUTE,
//! converted to the dataflow's [`Value`]s.
//!
//! Owns the one place where client bytes become view keys. Invariant: a conversion either
//! yields the value the server would compare with, or fails and the read is relayed; it never
//! guesses. So: strings must be UTF-8 in a UTF-8 session (the caller checks the session's
//! character set), introducers other than UTF-8 ones, hex and bit literals are relayed, and a
//! binary parameter of a type freshet does not decode is relayed. The dataflow then coerces a
//! value to the key column's type and collation, and refuses (relay) what it cannot compare
//! the server's way, e.g. a number against a text column.

use freshet_dataflow::{Collation, Date, DateTime, Decimal, Value};

use crate::matching::Literal;
use crate::protocol::column::types as ty;
use crate::protocol::cursor::Cursor;

/// Why a parameter cannot become a lookup key; the read is relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamError {
    /// Not representable as a key freshet can compare exactly (hex/bit literal, non-UTF-8
    /// string, foreign introducer, unsupported binary type).
    Unsupported,
    /// The execute packet is shorter than its parameters say.
    Malformed,
}

/// The value of a text-query literal. `Placeholder`s are not values: the caller binds them.
pub fn literal_value(lit: &Literal<'_>) -> Result<Value, ParamError> {
    Ok(match lit {
        Literal::Null => Value::Null,
        Literal::Int(v) => Value::Int(*v),
        Literal::UInt(v) => Value::UInt(*v),
        Literal::Decimal(text) => Value::Decimal(Decimal::parse(text).ok_or(ParamError::Unsupported)?),
        Literal::Float(v) => Value::Double(*v),
        Literal::String { bytes, introducer, national } => {
            let utf8_introducer = introducer
                .is_none_or(|i| i.eq_ignore_ascii_case("utf8mb4") || i.eq_ignore_ascii_case("utf8") || i.eq_ignore_ascii_case("utf8mb3"));
            if !utf8_introducer || *national {
                return Err(ParamError::Unsupported);
            }
            let s = std::str::from_utf8(bytes).map_err(|_| ParamError::Unsupported)?;
            // The collation is replaced by the key column's when the dataflow coerces it.
            Value::text(s, Collation::Utf8mb4Bin)
        }
        Literal::HexNumber(_) | Literal::HexString(_) | Literal::BitNumber(_) | Literal::BitString(_) | Literal::Placeholder(_) => {
            return Err(ParamError::Unsupported);
        }
    })
}

/// The bound parameters of a COM_STMT_EXECUTE payload (after the command byte, statement id,
/// flags and iteration count, i.e. starting at the NULL bitmap), for a statement with
/// `count` parameters. `types` holds the (type, flags) pairs of the previous execute: a client
/// sends them only when they change (new-params-bound flag). On success `types` is updated.
///
/// Read as the server reads it, so that whatever the server would refuse is relayed for the
/// server to refuse: the new-params-bound flag must be 0 or 1 (a 10 KB bitmap of 0xff bytes
/// was read as "same types as before, every value NULL" and answered with no rows where the
/// server says ER_MALFORMED_PACKET), every type must be one freshet decodes, NULL
/// parameters included, and a parameter of type NULL must have its NULL bit set (the server
/// refuses it otherwise, 1210).
pub fn execute_params(body: &[u8], count: usize, types: &mut Vec<(u8, u8)>) -> Result<Vec<Value>, ParamError> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let mut c = Cursor::new(body);
    let bitmap = c.bytes(count.div_ceil(8)).map_err(|_| ParamError::Malformed)?;
    let bound = c.u8().map_err(|_| ParamError::Malformed)?;
    if bound > 1 {
        return Err(ParamError::Malformed);
    }
    // The server reads a type as 15 bits and the unsigned flag: any other bit of the flag
    // byte makes a type it does not know (1210), a NULL's too.
    let unsupported = |t: u8, flags: u8| !decodable(t) || flags & 0x7f != 0;
    if bound == 1 {
        // Replaced only when all of them are there and decoded here (in place: most clients
        // send them with every execute). Types the server may refuse are not kept: it keeps
        // the ones it had when it refuses an execute.
        let sent = c.bytes(2 * count).map_err(|_| ParamError::Malformed)?;
        if sent.chunks_exact(2).any(|tf| unsupported(tf[0], tf[1])) {
            return Err(ParamError::Unsupported);
        }
        types.clear();
        types.extend(sent.chunks_exact(2).map(|tf| (tf[0], tf[1])));
    }
    if types.len() != count {
        return Err(ParamError::Malformed);
    }
    if types.iter().any(|&(t, flags)| unsupported(t, flags)) {
        return Err(ParamError::Unsupported);
    }
    let mut out = Vec::with_capacity(count);
    for (i, &(t, flags)) in types.iter().enumerate() {
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            out.push(Value::Null);
            continue;
        }
        // A NULL type is a NULL only by its bit: without it the server refuses the execute
        // (1210).
        if t == ty::NULL {
            return Err(ParamError::Malformed);
        }
        out.push(binary_value(&mut c, t, flags & 0x80 != 0)?);
    }
    Ok(out)
}

/// The parameter types [`binary_value`] decodes. Not YEAR nor INT24: MariaDB binds such a
/// parameter as NULL, where its bytes say a number. Not TIMESTAMP: the server makes it a
/// TIMESTAMP in the session's zone before an index lookup of a DATETIME or DATE key, and
/// finds nothing for a value outside TIMESTAMP's range (`9999-12-31`) where the view has the
/// row.
/// What MariaDB does with the types of an execute it refuses with 1210, by the types sent
/// (type, flags byte), in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusedTypes {
    /// The first is one it does not know (a type code it has no type for, or flag bits besides
    /// unsigned's, which it reads as part of a 15-bit type): it stops there and keeps the
    /// types it had.
    Kept,
    /// Every one is a type it knows and takes before reading the values: the refusal was of
    /// a value (shorter than its type, a NULL type without its NULL bit), and the sent types
    /// are its own from then on.
    Taken,
    /// Neither is certain (a later type unknown after known ones, or a type it knows that
    /// freshet does not decode).
    Unsure,
}

/// [`RefusedTypes`] for the types `sent` with a refused execute.
pub fn refused_types(sent: &[(u8, u8)]) -> RefusedTypes {
    let unknown = |&(t, flags): &(u8, u8)| flags & 0x7f != 0 || (20..=139).contains(&t) || (142..=244).contains(&t);
    if sent.first().is_some_and(unknown) {
        RefusedTypes::Kept
    } else if sent.iter().all(|&(t, flags)| decodable(t) && flags & 0x7f == 0) {
        RefusedTypes::Taken
    } else {
        RefusedTypes::Unsure
    }
}

fn decodable(t: u8) -> bool {
    matches!(
        t,
        ty::NULL
            | ty::TINY
            | ty::SHORT
            | ty::LONG
            | ty::LONGLONG
            | ty::FLOAT
            | ty::DOUBLE
            | ty::DECIMAL
            | ty::NEWDECIMAL
            | ty::VARCHAR
            | ty::VAR_STRING
            | ty::STRING
            | ty::TINY_BLOB
            | ty::MEDIUM_BLOB
            | ty::LONG_BLOB
            | ty::BLOB
            | ty::DATE
            | ty::DATETIME
    )
}

fn binary_value(c: &mut Cursor<'_>, t: u8, unsigned: bool) -> Result<Value, ParamError> {
    let m = |_| ParamError::Malformed;
    Ok(match t {
        ty::NULL => Value::Null,
        ty::TINY => {
            let b = c.u8().map_err(m)?;
            if unsigned { Value::UInt(u64::from(b)) } else { Value::Int(i64::from(b as i8)) }
        }
        ty::SHORT => {
            let v = c.u16().map_err(m)?;
            if unsigned { Value::UInt(u64::from(v)) } else { Value::Int(i64::from(v as i16)) }
        }
        ty::LONG | ty::INT24 => {
            let v = c.u32().map_err(m)?;
            if unsigned { Value::UInt(u64::from(v)) } else { Value::Int(i64::from(v as i32)) }
        }
        ty::LONGLONG => {
            let v = c.u64().map_err(m)?;
            if unsigned { Value::UInt(v) } else { Value::Int(v as i64) }
        }
        ty::FLOAT => Value::Double(f64::from(f32::from_bits(c.u32().map_err(m)?))),
        ty::DOUBLE => Value::Double(f64::from_bits(c.u64().map_err(m)?)),
        ty::DECIMAL | ty::NEWDECIMAL => {
            let text = c.lenenc_bytes().map_err(m)?;
            let s = std::str::from_utf8(text).map_err(|_| ParamError::Unsupported)?;
            Value::Decimal(Decimal::parse(s).ok_or(ParamError::Unsupported)?)
        }
        ty::VARCHAR | ty::VAR_STRING | ty::STRING | ty::TINY_BLOB | ty::MEDIUM_BLOB | ty::LONG_BLOB | ty::BLOB => {
            let bytes = c.lenenc_bytes().map_err(m)?;
            // Drivers send strings as VAR_STRING or BLOB alike; in a UTF-8 session both are
            // the client's text, compared with the column's collation by the server.
            match std::str::from_utf8(bytes) {
                Ok(s) => Value::text(s, Collation::Utf8mb4Bin),
                Err(_) => Value::Bytes(bytes.into()),
            }
        }
        ty::DATE | ty::DATETIME | ty::TIMESTAMP => {
            let len = c.u8().map_err(m)?;
            let raw = c.bytes(usize::from(len)).map_err(m)?;
            // The protocol's lengths. The server reads the time past a length over 4 and the
            // microseconds past one over 7, beyond what the length declares: relayed.
            if !matches!(len, 0 | 4 | 7 | 11) {
                return Err(ParamError::Unsupported);
            }
            let mut parts = [0u32; 7];
            if len >= 4 {
                parts[0] = u32::from(u16::from_le_bytes([raw[0], raw[1]]));
                parts[1] = u32::from(raw[2]);
                parts[2] = u32::from(raw[3]);
            }
            if len >= 7 {
                parts[3] = u32::from(raw[4]);
                parts[4] = u32::from(raw[5]);
                parts[5] = u32::from(raw[6]);
            }
            if len >= 11 {
                parts[6] = u32::from_le_bytes([raw[7], raw[8], raw[9], raw[10]]);
            }
            // The server makes an invalid date or time a zero date, with a warning; and keeps
            // only the date of a DATE sent with a time: relayed, both.
            if !valid_date_time(&parts) || (t == ty::DATE && len > 4) {
                return Err(ParamError::Unsupported);
            }
            let date = Date::new(parts[0] as u16, parts[1] as u8, parts[2] as u8);
            if t == ty::DATE {
                Value::Date(date)
            } else {
                // A DATETIME parameter; the dataflow coerces it to a DATE or TIMESTAMP key.
                Value::DateTime(DateTime::new(date, parts[3] as u8, parts[4] as u8, parts[5] as u8, parts[6]))
            }
        }
        _ => return Err(ParamError::Unsupported),
    })
}

/// A calendar date (or the zero date) and a time of day: what the server binds as it is.
fn valid_date_time(&[year, month, day, hour, minute, second, micros]: &[u32; 7]) -> bool {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    };
    let date = (year, month, day) == (0, 0, 0) || (year <= 9999 && (1..=days).contains(&day));
    date && hour < 24 && minute < 60 && second < 60 && micros < 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_server_keeps_of_refused_types() {
        use RefusedTypes::*;
        let cases: [(&[(u8, u8)], RefusedTypes); 7] = [
            (&[(ty::LONGLONG, 0)], Taken),
            (&[(ty::DOUBLE, 0x80), (ty::VAR_STRING, 0)], Taken),
            (&[(100, 0)], Kept),
            (&[(ty::LONGLONG, 0x01)], Kept),
            (&[(ty::LONGLONG, 0), (100, 0)], Unsure),
            (&[(ty::YEAR, 0)], Unsure),
            (&[(245, 0)], Unsure),
        ];
        for (sent, want) in cases {
            assert_eq!(refused_types(sent), want, "{sent:?}");
        }
    }

    #[test]
    fn literals() {
        assert!(matches!(literal_value(&Literal::Int(-5)), Ok(Value::Int(-5))));
        assert!(matches!(literal_value(&Literal::Null), Ok(Value::Null)));
        let s = Literal::String { bytes: b"h\xc3\xa9".as_slice().into(), introducer: None, national: false };
        assert!(matches!(literal_value(&s), Ok(Value::Text(t, _)) if &*t == "hé"));
        let bad = Literal::String { bytes: b"\xff".as_slice().into(), introducer: None, national: false };
        assert_eq!(literal_value(&bad).err(), Some(ParamError::Unsupported));
        let latin1 = Literal::String { bytes: b"a".as_slice().into(), introducer: Some("latin1"), national: false };
        assert_eq!(literal_value(&latin1).err(), Some(ParamError::Unsupported));
        assert_eq!(literal_value(&Literal::HexNumber("41")).err(), Some(ParamError::Unsupported));
    }

    #[test]
    fn execute_parameters_with_and_without_types() {
        // Two params: LONGLONG 7 and VAR_STRING "ab"; then a second execute without types,
        // the first param NULL.
        let mut types = Vec::new();
        let first = [0x00, 0x01, 0x08, 0x00, 0xfd, 0x00, 7, 0, 0, 0, 0, 0, 0, 0, 2, b'a', b'b'];
        let v = execute_params(&first, 2, &mut types).unwrap();
        assert!(matches!(v.as_slice(), [Value::Int(7), Value::Text(s, _)] if &**s == "ab"));
        let second = [0x01, 0x00, 1, b'c'];
        let v = execute_params(&second, 2, &mut types).unwrap();
        assert!(matches!(v.as_slice(), [Value::Null, Value::Text(s, _)] if &**s == "c"));
        assert_eq!(execute_params(&[0x00, 0x00], 2, &mut Vec::new()).err(), Some(ParamError::Malformed));
        assert_eq!(execute_params(&first[..10], 2, &mut Vec::new()).err(), Some(ParamError::Malformed));
    }

    /// MariaDB binds a parameter sent as INT24 as NULL, whatever its bytes (an audit: `id = ?`
    /// with INT24 1 answered row 1 from the cache, no rows from the server): relayed, as YEAR.
    #[test]
    fn an_int24_parameter_is_relayed() {
        assert_eq!(execute_params(&[0x00, 0x01, 0x09, 0x00, 1, 0, 0, 0], 1, &mut Vec::new()).err(), Some(ParamError::Unsupported));
        assert_eq!(execute_params(&[0x00, 0x01, 0x09, 0x80, 1, 0, 0, 0], 1, &mut Vec::new()).err(), Some(ParamError::Unsupported));
    }

    /// A parameter of type NULL whose bit in the NULL bitmap is clear is refused by the server
    /// (1210, "Incorrect arguments to mysqld_stmt_execute"); an audit had it answered from the
    /// cache as a NULL key (no rows). Relayed; with its bit set it is a NULL as before.
    #[test]
    fn a_null_type_without_its_null_bit_is_relayed() {
        assert_eq!(execute_params(&[0x00, 0x01, 0x06, 0x00], 1, &mut Vec::new()).err(), Some(ParamError::Malformed));
        assert_eq!(execute_params(&[0x00, 0x01, 0x06, 0x80, 1, 2, 3], 1, &mut Vec::new()).err(), Some(ParamError::Malformed));
        assert!(matches!(execute_params(&[0x01, 0x01, 0x06, 0x00], 1, &mut Vec::new()).as_deref(), Ok([Value::Null])));
    }

    #[test]
    fn read_as_the_server_reads_it() {
        // A long bitmap of 0xff: the byte after the bitmap (0xff) is no new-params-bound flag.
        let mut types = vec![(0x08, 0)];
        assert_eq!(execute_params(&[0xff; 10 * 1024], 1, &mut types).err(), Some(ParamError::Malformed));
        // A NULL parameter of an unknown type is not a NULL key.
        assert_eq!(execute_params(&[0x01, 0x01, 0x99, 0x00], 1, &mut Vec::new()).err(), Some(ParamError::Unsupported));
        // Neither is 2.
        assert_eq!(execute_params(&[0x00, 0x02, 0x08, 0x00, 6, 0, 0, 0, 0, 0, 0, 0], 1, &mut types).err(), Some(ParamError::Malformed));
        let v = execute_params(&[0x00, 0x01, 0x08, 0x00, 6, 0, 0, 0, 0, 0, 0, 0], 1, &mut types).unwrap();
        assert!(matches!(v.as_slice(), [Value::Int(6)]));
        // A DATETIME of a length other than 0, 4, 7 or 11: the server reads the time past a
        // length over 4 and the microseconds past one over 7, beyond the value's own bytes
        // (an audit: `[e8 07 01 02 0a]` is 10:00 to it, with a warning; midnight here).
        for len in [5u8, 6, 8, 9, 10] {
            let mut body = vec![0x00, 0x01, 0x0c, 0x00, len];
            body.extend([0xe8, 0x07, 0x01, 0x02, 0x0a, 0x1e, 0x0f, 0x05, 0, 0, 0].iter().take(usize::from(len)));
            assert_eq!(execute_params(&body, 1, &mut Vec::new()).err(), Some(ParamError::Unsupported), "length {len}");
        }
    }
}
