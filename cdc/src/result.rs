//! Result-set values (binary protocol) to dataflow [`Value`]s, for fills.
//!
//! Owns: the conversion of what the server returns for a fill's SQL into the same [`Value`]s the
//! binlog decoder produces for the same data (the round-trip test checks both paths against
//! each other for every column type). Columns that copy base columns take the schema's type
//! and collation: a fill's as its plan says ([`fill_columns`]), a read of bare tables as the
//! protocol's `org_table`/`org_name` say ([`result_columns`]); computed columns (COUNT, SUM,
//! CONCAT, ...) take a type from the protocol's column metadata.
//!
//! Requires the fill connection's `time_zone = '+00:00'`: the binlog carries TIMESTAMP in UTC.
//!
//! The protocol reports the *connection's* collation for every text column (MariaDB 10.11 sends
//! 45 = utf8mb4_general_ci even for a `utf8mb4_bin` column or a CONCAT of one), so a computed
//! text column gets the reported one. The dataflow, which knows each column, re-tags what it
//! seeds (`Node::column_collation`).

use std::collections::HashMap;

use freshet_dataflow::{Collation, Date, DateTime, Decimal, SqlType, Value};
use mysql_async::consts::{ColumnFlags, ColumnType};
use mysql_async::{Column, Value as MyValue};

use crate::decode::text;
use crate::schema::{Charset, TableInfo};

/// The type a result column converts with.
#[derive(Clone, Debug)]
pub struct ResultColumn {
    pub ty: SqlType,
    pub collation: Option<Collation>,
    pub binary_width: Option<usize>,
}

/// Types for a result set of base columns read with no derived table (the replica's copy of a
/// table): the schema's for a column the server names as a base column of a known table
/// (`org_table`, `org_name`), else derived from the protocol metadata. Without the schema's
/// type an ENUM, SET or MariaDB JSON column would read as text and not equal the binlog's
/// value of the same row.
pub fn result_columns(columns: &[Column], tables: &HashMap<String, TableInfo>) -> Vec<ResultColumn> {
    columns
        .iter()
        .map(|c| tables.get(&*c.org_table_str()).and_then(|t| base_column(t, &c.org_name_str())).unwrap_or_else(|| derived(c)))
        .collect()
}

/// Types for a fill's answer: the schema's for a column that copies a base column, as the
/// fill's plan says (`origin`: column index -> the base table and column it copies,
/// `Node::origin_column`; `table`: what is known of a table so named), else derived from the
/// protocol metadata. The server's names are not asked: a fill reads through a derived table
/// (all but a bare table scan), whose columns it names `c0`, `c1`, ...; MariaDB names no
/// `org_table` for most such columns, and for a top-k's (`ROW_NUMBER()`) or a grouped fill's
/// (`GROUP BY` over the state query) names the base table with the alias as the column
/// (`org_name` `c1`), which a column of that table may be called too: its type was taken for
/// the copied column's (a signed -2 read as a BIGINT UNSIGNED, a text ordered under another
/// column's collation).
pub fn fill_columns<'a, 't>(
    columns: &[Column],
    table: impl Fn(&str) -> Option<&'t TableInfo>,
    origin: impl Fn(usize) -> Option<(&'a str, &'a str)>,
) -> Vec<ResultColumn> {
    columns
        .iter()
        .enumerate()
        .map(|(i, c)| origin(i).and_then(|(t, column)| base_column(table(t)?, column)).unwrap_or_else(|| derived(c)))
        .collect()
}

/// Base column `column` of table `t`, if its schema has it.
fn base_column(t: &TableInfo, column: &str) -> Option<ResultColumn> {
    let i = t.schema.column_index(column)?;
    Some(ResultColumn {
        ty: t.schema.columns[i].ty.clone(),
        collation: t.schema.columns[i].collation,
        binary_width: t.decode[i].binary_width,
    })
}

/// A computed column's type from its metadata. Text takes the collation the server reports
/// (when freshet implements it).
fn derived(c: &Column) -> ResultColumn {
    use ColumnType::*;
    let unsigned = c.flags().contains(ColumnFlags::UNSIGNED_FLAG);
    let binary = c.character_set() == 63;
    let ty = match c.column_type() {
        MYSQL_TYPE_TINY => SqlType::Int { bytes: 1, unsigned },
        MYSQL_TYPE_SHORT => SqlType::Int { bytes: 2, unsigned },
        MYSQL_TYPE_INT24 => SqlType::Int { bytes: 3, unsigned },
        MYSQL_TYPE_LONG => SqlType::Int { bytes: 4, unsigned },
        MYSQL_TYPE_LONGLONG => SqlType::Int { bytes: 8, unsigned },
        MYSQL_TYPE_FLOAT => SqlType::Float,
        MYSQL_TYPE_DOUBLE => SqlType::Double,
        MYSQL_TYPE_DECIMAL | MYSQL_TYPE_NEWDECIMAL => SqlType::Decimal { precision: 28, scale: c.decimals() },
        MYSQL_TYPE_DATE | MYSQL_TYPE_NEWDATE => SqlType::Date,
        MYSQL_TYPE_TIME | MYSQL_TYPE_TIME2 => SqlType::Time { fsp: c.decimals().min(6) },
        MYSQL_TYPE_DATETIME | MYSQL_TYPE_DATETIME2 => SqlType::DateTime { fsp: c.decimals().min(6) },
        MYSQL_TYPE_TIMESTAMP | MYSQL_TYPE_TIMESTAMP2 => SqlType::Timestamp { fsp: c.decimals().min(6) },
        MYSQL_TYPE_YEAR => SqlType::Year,
        // MariaDB sends a computed BIT flagged BINARY (a choice of BITs, some MAX) as its
        // decimal digits, which a view holds as the number (`Repr::Number`); one not so
        // flagged as its bytes.
        MYSQL_TYPE_BIT if c.flags().contains(ColumnFlags::BINARY_FLAG) => SqlType::Int { bytes: 8, unsigned: true },
        MYSQL_TYPE_BIT => SqlType::Bit { bits: 64 },
        MYSQL_TYPE_JSON => SqlType::Json,
        _ if binary => SqlType::Bytes,
        _ => SqlType::Text,
    };
    let collation = matches!(ty, SqlType::Text).then(|| collation_of_id(c.character_set())).flatten();
    ResultColumn { ty, collation, binary_width: None }
}

/// Collation ids of the collations freshet implements (the protocol reports ids).
pub fn collation_of_id(id: u16) -> Option<Collation> {
    Some(match id {
        63 => Collation::Binary,
        46 | 83 => Collation::Utf8mb4Bin,
        45 | 33 => Collation::Utf8mb4GeneralCi,
        224 | 192 => Collation::Utf8mb4UnicodeCi,
        _ => return None,
    })
}

/// Converts one binary-protocol value. Errors name the unexpected value.
pub fn convert(col: &ResultColumn, v: MyValue) -> Result<Value, String> {
    if let MyValue::NULL = v {
        return Ok(Value::Null);
    }
    let bad = |v: &MyValue| format!("unexpected {v:?} for {:?}", col.ty);
    let utf8 = |b: &[u8]| -> Result<String, String> { std::str::from_utf8(b).map(str::to_string).map_err(|e| e.to_string()) };
    Ok(match &col.ty {
        SqlType::Int { unsigned, .. } => match v {
            MyValue::Int(i) if *unsigned => Value::UInt(i as u64),
            MyValue::Int(i) => Value::Int(i),
            MyValue::UInt(u) if *unsigned => Value::UInt(u),
            MyValue::UInt(u) => i64::try_from(u).map(Value::Int).unwrap_or(Value::UInt(u)),
            MyValue::Bytes(ref b) => {
                let s = utf8(b)?;
                if *unsigned { Value::UInt(s.parse().map_err(|_| bad(&v))?) } else { Value::Int(s.parse().map_err(|_| bad(&v))?) }
            }
            ref v => return Err(bad(v)),
        },
        SqlType::Float => match v {
            MyValue::Float(f) => Value::Float(f),
            MyValue::Double(d) => Value::Float(d as f32),
            ref v => return Err(bad(v)),
        },
        SqlType::Double => match v {
            MyValue::Double(d) => Value::Double(d),
            MyValue::Float(f) => Value::Double(f as f64),
            ref v => return Err(bad(v)),
        },
        SqlType::Decimal { .. } => match v {
            MyValue::Bytes(ref b) => Value::Decimal(Decimal::parse(&utf8(b)?).ok_or_else(|| bad(&v))?),
            MyValue::Int(i) => Value::Int(i),
            MyValue::UInt(u) => Value::UInt(u),
            MyValue::Double(d) => Value::Double(d),
            ref v => return Err(bad(v)),
        },
        SqlType::Text => match v {
            MyValue::Bytes(b) => Value::Text(text(&b, Charset::Utf8).into(), col.collation.unwrap_or(Collation::Binary)),
            MyValue::Int(i) => Value::Text(i.to_string().into(), col.collation.unwrap_or(Collation::Binary)),
            ref v => return Err(bad(v)),
        },
        SqlType::Bytes => match v {
            MyValue::Bytes(mut b) => {
                if let Some(w) = col.binary_width {
                    b.resize(b.len().max(w), 0);
                }
                Value::Bytes(b.into())
            }
            ref v => return Err(bad(v)),
        },
        SqlType::Json => match v {
            MyValue::Bytes(b) => Value::Json(utf8(&b)?.into()),
            ref v => return Err(bad(v)),
        },
        SqlType::Date => match v {
            MyValue::Date(y, m, d, ..) => Value::Date(Date::new(y, m, d)),
            ref v => return Err(bad(v)),
        },
        SqlType::DateTime { .. } | SqlType::Timestamp { .. } => match v {
            MyValue::Date(y, mo, d, h, mi, s, us) => {
                let t = DateTime::new(Date::new(y, mo, d), h, mi, s, us);
                if matches!(col.ty, SqlType::Timestamp { .. }) { Value::Timestamp(t) } else { Value::DateTime(t) }
            }
            ref v => return Err(bad(v)),
        },
        SqlType::Time { .. } => match v {
            MyValue::Time(neg, days, h, m, s, us) => {
                let micros = (((days as i64 * 24 + h as i64) * 60 + m as i64) * 60 + s as i64) * 1_000_000 + us as i64;
                Value::Time(if neg { -micros } else { micros })
            }
            ref v => return Err(bad(v)),
        },
        SqlType::Year => match v {
            MyValue::Int(y) => Value::Year(y as u16),
            MyValue::UInt(y) => Value::Year(y as u16),
            ref v => return Err(bad(v)),
        },
        // The protocol sends ENUM/SET as their labels; the dataflow carries index / bitmask.
        SqlType::Enum(labels) => match v {
            MyValue::Bytes(ref b) => {
                let s = utf8(b)?;
                if s.is_empty() {
                    Value::Enum(0)
                } else {
                    // The server sends the label as defined.
                    let i = labels.iter().position(|l| *l == s).ok_or_else(|| bad(&v))?;
                    Value::Enum(i as u16 + 1)
                }
            }
            ref v => return Err(bad(v)),
        },
        SqlType::Set(labels) => match v {
            MyValue::Bytes(ref b) => {
                let s = utf8(b)?;
                let mut mask = 0u64;
                for part in s.split(',').filter(|p| !p.is_empty()) {
                    let i = labels.iter().position(|l| l == part).ok_or_else(|| bad(&v))?;
                    mask |= 1 << i;
                }
                Value::Set(mask)
            }
            ref v => return Err(bad(v)),
        },
        SqlType::Bit { .. } => match v {
            MyValue::Bytes(ref b) if b.len() <= 8 => Value::Bit(b.iter().fold(0u64, |a, &x| (a << 8) | x as u64)),
            MyValue::Int(i) => Value::Bit(i as u64),
            MyValue::UInt(u) => Value::Bit(u),
            ref v => return Err(bad(v)),
        },
    })
}

/// A dataflow value as a statement parameter.
pub fn param(v: &Value) -> MyValue {
    match v {
        Value::Null => MyValue::NULL,
        Value::Int(i) => MyValue::Int(*i),
        Value::UInt(u) => MyValue::UInt(*u),
        Value::Float(f) => MyValue::Float(*f),
        Value::Double(d) => MyValue::Double(*d),
        Value::Decimal(d) => MyValue::Bytes(d.to_string().into_bytes()),
        Value::Text(s, _) | Value::Json(s) => MyValue::Bytes(s.as_bytes().to_vec()),
        Value::Bytes(b) => MyValue::Bytes(b.to_vec()),
        Value::Date(d) => {
            let (y, m, dd) = d.parts();
            MyValue::Date(y, m, dd, 0, 0, 0, 0)
        }
        Value::DateTime(t) | Value::Timestamp(t) => {
            let (y, m, d) = t.date().parts();
            let (h, mi, s, us) = t.time();
            MyValue::Date(y, m, d, h, mi, s, us)
        }
        Value::Time(us) => {
            let a = us.unsigned_abs();
            let secs = a / 1_000_000;
            let days = secs / 86_400;
            let rem = secs % 86_400;
            MyValue::Time(*us < 0, days as u32, (rem / 3600) as u8, (rem / 60 % 60) as u8, (rem % 60) as u8, (a % 1_000_000) as u32)
        }
        Value::Year(y) => MyValue::UInt(*y as u64),
        Value::Enum(e) => MyValue::UInt(*e as u64),
        Value::Set(s) | Value::Bit(s) => MyValue::UInt(*s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(ty: SqlType) -> ResultColumn {
        ResultColumn { ty, collation: None, binary_width: None }
    }

    #[test]
    fn labels_to_index_and_mask() {
        let e = col(SqlType::Enum(vec!["a".into(), "b".into()]));
        assert!(matches!(convert(&e, MyValue::Bytes(b"b".to_vec())), Ok(Value::Enum(2))));
        assert!(matches!(convert(&e, MyValue::Bytes(b"".to_vec())), Ok(Value::Enum(0))));
        let s = col(SqlType::Set(vec!["x".into(), "y".into(), "z".into()]));
        assert!(matches!(convert(&s, MyValue::Bytes(b"x,z".to_vec())), Ok(Value::Set(5))));
    }

    /// MariaDB flags a computed BIT BINARY when it sends the BIT's decimal digits (a choice of
    /// BITs, some MAX), and a view holds that value as the number.
    #[test]
    fn a_computed_bit_flagged_binary_is_its_digits() {
        let digits = Column::new(ColumnType::MYSQL_TYPE_BIT).with_flags(ColumnFlags::UNSIGNED_FLAG | ColumnFlags::BINARY_FLAG);
        let bytes = Column::new(ColumnType::MYSQL_TYPE_BIT).with_flags(ColumnFlags::UNSIGNED_FLAG);
        let cols = result_columns(&[digits, bytes], &HashMap::new());
        assert!(matches!(convert(&cols[0], MyValue::Bytes(b"255".to_vec())), Ok(Value::UInt(255))));
        assert!(matches!(convert(&cols[1], MyValue::Bytes(vec![0xff])), Ok(Value::Bit(255))));
    }

    #[test]
    fn params_round_trip_time() {
        let t = Value::Time(-((838 * 3600 + 59 * 60 + 59) * 1_000_000 + 1));
        let back = convert(&col(SqlType::Time { fsp: 6 }), param(&t)).unwrap();
        assert_eq!(format!("{back:?}"), format!("{t:?}"));
    }
}
