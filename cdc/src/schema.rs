//! Table schemas read from information_schema, and what the binlog decoder needs beyond them.
//!
//! Owns: [`TableInfo`] (a dataflow [`TableSchema`] plus per-column decode facts: signedness,
//! character set, fixed BINARY width) and [`load_tables`]. Does not own: decoding values
//! (`decode`), detecting DDL (`ddl`).
//!
//! Why information_schema and not the binlog: `binlog_row_metadata` is usually MINIMAL or
//! NO_LOG, so the table map carries neither names nor signedness nor collations. The cost is
//! that information_schema describes the table *now*, not at the binlog position being decoded;
//! the stream therefore checks every table map against the schema (column count and type
//! family) and reports a mismatch instead of decoding with the wrong shape.

use std::collections::HashMap;

use freshet_dataflow::{Collation, ColumnSchema, SqlType, TableSchema};
use mysql_async::binlog::events::{OptionalMetaExtractor, TableMapEvent};
use mysql_async::consts::ColumnType;
use mysql_async::prelude::Queryable;

use crate::error::CdcError;
use crate::flavor::Flavor;

/// How a text column's bytes become UTF-8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charset {
    /// utf8mb4, utf8mb3: the bytes are UTF-8.
    Utf8,
    /// ascii, which MariaDB lets hold any byte: UTF-8 for bytes up to 0x7F, the others read
    /// with replacement characters (and sent to a SELECT as `?`).
    Ascii,
    /// MySQL's latin1 is Windows-1252.
    Latin1,
    /// ucs2 and utf16: UTF-16, big-endian.
    Utf16Be,
    /// utf16le.
    Utf16Le,
    /// utf32: UTF-32, big-endian.
    Utf32Be,
    /// Any other character set: decoded as UTF-8 with replacement characters (documented
    /// approximation; such columns also have no supported collation).
    Other,
}

impl Charset {
    fn from_name(name: &str) -> Charset {
        match name.to_ascii_lowercase().as_str() {
            "utf8mb4" | "utf8mb3" | "utf8" => Charset::Utf8,
            "ascii" => Charset::Ascii,
            "latin1" => Charset::Latin1,
            "ucs2" | "utf16" => Charset::Utf16Be,
            "utf16le" => Charset::Utf16Le,
            "utf32" => Charset::Utf32Be,
            _ => Charset::Other,
        }
    }

    /// Whether the binlog's text in this character set is read as the character the server
    /// holds (as a SELECT through a utf8mb4 connection shows it), different text as
    /// different strings: not for [`Charset::Other`] (read as UTF-8, lossily) nor for
    /// [`Charset::Ascii`] (a byte past 0x7F is U+FFFD here and `?` to a SELECT). Surrogate
    /// code points, which MariaDB stores in utf8mb3, utf8mb4, ucs2 and utf32, are read as
    /// U+FFFD by both paths and are the one exception left (docs/decisions.md, "replica").
    pub fn exact(self) -> bool {
        !matches!(self, Charset::Ascii | Charset::Other)
    }
}

/// Per-column facts the decoder needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnDecode {
    /// For text columns.
    pub charset: Charset,
    /// BINARY(n): the binlog strips trailing zero bytes, SELECT returns all n.
    pub binary_width: Option<usize>,
}

/// A table as cdc knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableInfo {
    /// The schema handed to the dataflow.
    pub schema: TableSchema,
    /// Decode facts, one per column.
    pub decode: Vec<ColumnDecode>,
}

impl TableInfo {
    /// The first text column whose binlog text is not read exactly ([`Charset::exact`]), if
    /// any: the stream's rows of such a table differ from what a SELECT reads of it.
    pub fn inexact_text(&self) -> Option<&str> {
        self.schema
            .columns
            .iter()
            .zip(&self.decode)
            .find(|(c, d)| c.ty == SqlType::Text && !d.charset.exact())
            .map(|(c, _)| c.name.as_str())
    }
}

const COLUMNS_SQL: &str = "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, \
     NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME, COLLATION_NAME, \
     CHARACTER_OCTET_LENGTH, EXTRA \
     FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION";

const PK_SQL: &str = "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE \
     WHERE TABLE_SCHEMA = ? AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY TABLE_NAME, ORDINAL_POSITION";

const JSON_CHECKS_SQL: &str = "SELECT TABLE_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS \
     WHERE CONSTRAINT_SCHEMA = ?";

const TABLES_SQL: &str = "SELECT TABLE_NAME, ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE'";

/// One row of information_schema.COLUMNS.
#[derive(Clone, Debug, Default)]
pub struct ColumnRow {
    pub table: String,
    pub name: String,
    pub data_type: String,
    pub column_type: String,
    pub nullable: bool,
    pub precision: Option<u64>,
    pub scale: Option<u64>,
    pub datetime_precision: Option<u64>,
    pub charset: Option<String>,
    pub collation: Option<String>,
    pub octet_length: Option<u64>,
    /// EXTRA names INVISIBLE.
    pub invisible: bool,
}

/// Loads every base table of `database` (or only `only`, if given).
pub async fn load_tables(
    conn: &mut mysql_async::Conn,
    flavor: &dyn Flavor,
    database: &str,
    only: Option<&str>,
) -> Result<HashMap<String, TableInfo>, CdcError> {
    type ColTuple = (
        String,
        String,
        String,
        String,
        String,
        Option<u64>,
        Option<u64>,
        Option<u64>,
        Option<String>,
        Option<String>,
        Option<u64>,
        Option<String>,
    );
    let rows: Vec<ColTuple> = conn.exec(COLUMNS_SQL, (database,)).await?;
    let pks: Vec<(String, String)> = conn.exec(PK_SQL, (database,)).await?;
    let tables: Vec<(String, Option<String>)> = conn.exec(TABLES_SQL, (database,)).await?;
    let checks: Vec<(String, String)> = if flavor.json_is_text() { conn.exec(JSON_CHECKS_SQL, (database,)).await? } else { Vec::new() };
    let wanted = |t: &str| only.is_none_or(|o| o.eq_ignore_ascii_case(t)) && tables.iter().any(|(x, _)| x == t);
    let mut cols: HashMap<String, Vec<ColumnRow>> = HashMap::new();
    for r in rows {
        if !wanted(&r.0) {
            continue;
        }
        cols.entry(r.0.clone()).or_default().push(ColumnRow {
            table: r.0,
            name: r.1,
            data_type: r.2,
            column_type: r.3,
            nullable: r.4 == "YES",
            precision: r.5,
            scale: r.6,
            datetime_precision: r.7,
            charset: r.8,
            collation: r.9,
            octet_length: r.10,
            invisible: invisible(r.11.as_deref()),
        });
    }
    let mut out = HashMap::new();
    for (table, rows) in cols {
        let json: Vec<&str> = checks.iter().filter(|(t, _)| *t == table).map(|(_, c)| c.as_str()).collect();
        let pk: Vec<&str> = pks.iter().filter(|(t, _)| *t == table).map(|(_, c)| c.as_str()).collect();
        let mut info = table_info(&table, &rows, &pk, &json);
        info.schema.engine = tables.iter().find(|(t, _)| *t == table).and_then(|(_, e)| e.as_deref().map(Box::from));
        out.insert(table.clone(), info);
    }
    Ok(out)
}

/// Whether information_schema.COLUMNS.EXTRA says INVISIBLE (MariaDB: `INVISIBLE`, also after
/// `VIRTUAL GENERATED`; MySQL: `INVISIBLE`, `DEFAULT_GENERATED INVISIBLE`).
fn invisible(extra: Option<&str>) -> bool {
    extra.is_some_and(|e| e.split_whitespace().any(|w| w.eq_ignore_ascii_case("invisible")))
}

/// Builds a [`TableInfo`] from information_schema rows (pure; unit-tested).
pub fn table_info(table: &str, rows: &[ColumnRow], pk: &[&str], json_checks: &[&str]) -> TableInfo {
    let mut columns = Vec::new();
    let mut decode = Vec::new();
    for r in rows {
        let is_json_text = json_checks.iter().any(|c| is_json_valid_check(c, &r.name));
        let ty = sql_type(r, is_json_text);
        // An ENUM's labels compare under its collation, as text does.
        let collation = match ty {
            SqlType::Text | SqlType::Enum(_) => r.collation.as_deref().and_then(Collation::from_name),
            _ => None,
        };
        let mut c = ColumnSchema::new(&r.name, ty.clone()).with_collation(collation);
        c.nullable = r.nullable;
        c.invisible = r.invisible;
        c.padded = r.data_type.eq_ignore_ascii_case("char") || r.data_type.eq_ignore_ascii_case("binary");
        c.unreadable = unreadable(r, &ty);
        c.compressed = compressed(&r.column_type);
        c.bmp_only = matches!(ty, SqlType::Text | SqlType::Enum(_))
            && r.collation.as_deref().is_some_and(|n| {
                let n = n.to_ascii_lowercase();
                n.starts_with("utf8mb3_") || n.starts_with("utf8_")
            });
        if matches!(ty, SqlType::Text | SqlType::Bytes | SqlType::Json) {
            c.max_bytes = r.octet_length;
        }
        columns.push(c);
        let binary_width = (r.data_type.eq_ignore_ascii_case("binary")).then(|| r.octet_length.unwrap_or(0) as usize);
        decode.push(ColumnDecode { charset: r.charset.as_deref().map(Charset::from_name).unwrap_or(Charset::Other), binary_width });
    }
    let primary_key = pk.iter().filter_map(|p| columns.iter().position(|c: &ColumnSchema| c.name.eq_ignore_ascii_case(p))).collect();
    TableInfo { schema: TableSchema::new(table, columns, primary_key), decode }
}

/// MariaDB's column compression, which information_schema writes as a comment after the type
/// (`varchar(200) /*M!100301 COMPRESSED*/`): looked for outside the quoted labels of an ENUM
/// or SET.
fn compressed(column_type: &str) -> bool {
    let unquoted = match column_type.rfind('\'') {
        Some(last) => &column_type[last + 1..],
        None => column_type,
    };
    unquoted.to_ascii_lowercase().contains("compressed")
}

/// True if `clause` is MariaDB's JSON alias check for `column`: `json_valid(`col`)`.
fn is_json_valid_check(clause: &str, column: &str) -> bool {
    let c: String = clause.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_lowercase();
    c == format!("json_valid(`{}`)", column.to_ascii_lowercase())
}

/// Why no view may read a column of this type, if so ([`ColumnSchema::unreadable`]).
fn unreadable(r: &ColumnRow, ty: &SqlType) -> Option<&'static str> {
    match (r.data_type.to_ascii_lowercase().as_str(), ty) {
        ("inet4" | "inet6" | "uuid", _) => Some("MariaDB's INET4, INET6 and UUID are text to a SELECT and their binary form in the binlog"),
        // mysql_common 0.37 reads a negative TIME(1) or TIME(2) with a fraction wrongly
        // (`my_time_packed_from_binary`: an unsigned fraction underflows).
        (_, SqlType::Time { fsp: 1 | 2 }) => Some("a TIME(1) or TIME(2) is misread from the binlog when it is negative"),
        // The server shows the label `''` as it shows the error value (the empty set): a fill,
        // which reads its text, cannot tell them apart; the binlog gives their indexes.
        (_, SqlType::Enum(labels) | SqlType::Set(labels)) if labels.iter().any(String::is_empty) => {
            Some("an ENUM or SET that declares '' shows it as the error value (or the empty set)")
        }
        // information_schema is utf8mb3 and shows a character past U+FFFF as `?`: the label
        // read may not be the label, and a row the binlog gives by its index would be
        // answered with the `?`.
        (_, SqlType::Enum(labels) | SqlType::Set(labels)) if labels.iter().any(|l| l.contains('?')) => {
            Some("an ENUM or SET label with a character past U+FFFF (or a '?') is read from information_schema as '?'")
        }
        _ => None,
    }
}

fn sql_type(r: &ColumnRow, json_text: bool) -> SqlType {
    let unsigned = r.column_type.to_ascii_lowercase().contains("unsigned");
    let fsp = r.datetime_precision.unwrap_or(0).min(6) as u8;
    match r.data_type.to_ascii_lowercase().as_str() {
        "tinyint" => SqlType::Int { bytes: 1, unsigned },
        "smallint" => SqlType::Int { bytes: 2, unsigned },
        "mediumint" => SqlType::Int { bytes: 3, unsigned },
        "int" | "integer" => SqlType::Int { bytes: 4, unsigned },
        "bigint" => SqlType::Int { bytes: 8, unsigned },
        "float" => SqlType::Float,
        "double" | "real" | "double precision" => SqlType::Double,
        "decimal" | "numeric" => {
            SqlType::Decimal { precision: r.precision.unwrap_or(10).min(255) as u8, scale: r.scale.unwrap_or(0).min(255) as u8 }
        }
        "date" => SqlType::Date,
        "time" => SqlType::Time { fsp },
        "datetime" => SqlType::DateTime { fsp },
        "timestamp" => SqlType::Timestamp { fsp },
        "year" => SqlType::Year,
        "enum" => SqlType::Enum(labels(&r.column_type)),
        "set" => SqlType::Set(labels(&r.column_type)),
        "bit" => SqlType::Bit { bits: r.precision.unwrap_or(1).min(64) as u8 },
        "json" => SqlType::Json,
        "longtext" if json_text => SqlType::Json,
        "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" => {
            if r.charset.as_deref().is_some_and(|c| c.eq_ignore_ascii_case("binary")) { SqlType::Bytes } else { SqlType::Text }
        }
        // binary, varbinary, blobs, and types freshet carries as opaque bytes (geometry;
        // MariaDB's inet4/inet6/uuid, which no view may read: `unreadable`).
        _ => SqlType::Bytes,
    }
}

/// The labels of `enum('a','b''c')` / `set(...)`, unescaped.
pub fn labels(column_type: &str) -> Vec<String> {
    let Some(open) = column_type.find('(') else { return Vec::new() };
    let body = &column_type[open + 1..column_type.rfind(')').unwrap_or(column_type.len())];
    let mut out = Vec::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\'' {
            continue;
        }
        let mut label = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\'' if chars.peek() == Some(&'\'') => {
                    chars.next();
                    label.push('\'');
                }
                '\'' => break,
                '\\' => {
                    if let Some(n) = chars.next() {
                        label.push(n);
                    }
                }
                c => label.push(c),
            }
        }
        out.push(label);
    }
    out
}

/// Checks a table map against the schema: same column count, each binlog type in the family
/// the schema's type decodes from.
pub fn check_table_map(tme: &TableMapEvent<'_>, schema: &TableSchema) -> Result<(), String> {
    let n = tme.columns_count() as usize;
    if n != schema.columns.len() {
        return Err(format!("the binlog has {n} columns, information_schema {}", schema.columns.len()));
    }
    for (i, c) in schema.columns.iter().enumerate() {
        let ct = tme.get_column_type(i).ok().flatten().ok_or_else(|| format!("column {i}: unknown binlog type"))?;
        if !compatible(ct, &c.ty) {
            return Err(format!("column `{}` is {:?} in the binlog but {:?} in information_schema", c.name, ct, c.ty));
        }
    }
    // With binlog_row_metadata = FULL the table map also names the columns: a rename or a
    // reorder of same-typed columns is then caught too.
    if let Ok(meta) = OptionalMetaExtractor::new(tme.iter_optional_meta()) {
        let names: Vec<String> = meta.iter_column_name().filter_map(Result::ok).map(|c| c.name().into_owned()).collect();
        if names.len() == n {
            for (name, c) in names.iter().zip(&schema.columns) {
                if !name.eq_ignore_ascii_case(&c.name) {
                    return Err(format!("column `{name}` in the binlog is `{}` in information_schema", c.name));
                }
            }
        }
    }
    Ok(())
}

/// Which binlog column types a schema type may arrive as.
pub fn compatible(ct: ColumnType, ty: &SqlType) -> bool {
    use ColumnType::*;
    match ty {
        SqlType::Int { bytes: 1, .. } => ct == MYSQL_TYPE_TINY,
        SqlType::Int { bytes: 2, .. } => ct == MYSQL_TYPE_SHORT,
        SqlType::Int { bytes: 3, .. } => ct == MYSQL_TYPE_INT24,
        SqlType::Int { bytes: 4, .. } => ct == MYSQL_TYPE_LONG,
        SqlType::Int { .. } => ct == MYSQL_TYPE_LONGLONG,
        SqlType::Float => ct == MYSQL_TYPE_FLOAT,
        SqlType::Double => ct == MYSQL_TYPE_DOUBLE,
        SqlType::Decimal { .. } => ct == MYSQL_TYPE_NEWDECIMAL,
        SqlType::Text | SqlType::Bytes | SqlType::Json => matches!(
            ct,
            MYSQL_TYPE_VARCHAR
                | MYSQL_TYPE_VAR_STRING
                | MYSQL_TYPE_STRING
                | MYSQL_TYPE_BLOB
                | MYSQL_TYPE_TINY_BLOB
                | MYSQL_TYPE_MEDIUM_BLOB
                | MYSQL_TYPE_LONG_BLOB
                | MYSQL_TYPE_JSON
                | MYSQL_TYPE_GEOMETRY
        ),
        SqlType::Date => matches!(ct, MYSQL_TYPE_DATE | MYSQL_TYPE_NEWDATE),
        SqlType::Time { .. } => matches!(ct, MYSQL_TYPE_TIME | MYSQL_TYPE_TIME2),
        SqlType::DateTime { .. } => matches!(ct, MYSQL_TYPE_DATETIME | MYSQL_TYPE_DATETIME2),
        SqlType::Timestamp { .. } => matches!(ct, MYSQL_TYPE_TIMESTAMP | MYSQL_TYPE_TIMESTAMP2),
        SqlType::Year => ct == MYSQL_TYPE_YEAR,
        SqlType::Enum(_) => ct == MYSQL_TYPE_ENUM,
        SqlType::Set(_) => ct == MYSQL_TYPE_SET,
        SqlType::Bit { .. } => ct == MYSQL_TYPE_BIT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, data_type: &str, column_type: &str) -> ColumnRow {
        ColumnRow { name: name.into(), data_type: data_type.into(), column_type: column_type.into(), ..Default::default() }
    }

    /// Which columns of a table of `rows` (keyed by `id`) no view reads.
    fn unreadable(rows: &[ColumnRow]) -> Vec<bool> {
        table_info("x", rows, &["id"], &[]).schema.columns.iter().map(|c| c.unreadable.is_some()).collect()
    }

    #[test]
    fn columns_whose_binlog_form_is_not_their_value_are_unreadable() {
        let time = |fsp: u64| ColumnRow { datetime_precision: Some(fsp), ..row("t", "time", "time") };
        let rows = [row("id", "int", "int(11)"), row("u", "uuid", "uuid"), row("ip", "inet6", "inet6"), time(1), time(2), time(3)];
        assert_eq!(unreadable(&rows), [false, true, true, true, true, false]);
    }

    /// Text the binlog decoder reads lossily (ascii past 0x7F, any character set without a
    /// decoder of its own) is named by `inexact_text`; text of the others, bytes and numbers are not.
    #[test]
    fn text_the_binlog_reads_lossily_is_known() {
        let text = |name: &str, charset: &str| ColumnRow { charset: Some(charset.into()), ..row(name, "varchar", "varchar(5)") };
        let info = |rows: &[ColumnRow]| table_info("x", rows, &["id"], &[]);
        let exact = ["utf8mb4", "utf8mb3", "utf8", "latin1", "ucs2", "utf16", "utf16le", "utf32"];
        for cs in exact {
            assert_eq!(info(&[row("id", "int", "int(11)"), text("s", cs)]).inexact_text(), None, "{cs}");
        }
        for cs in ["ascii", "cp1251", "latin2", "gbk", "sjis", "greek"] {
            assert_eq!(info(&[row("id", "int", "int(11)"), text("s", cs)]).inexact_text(), Some("s"), "{cs}");
        }
        let bytes = ColumnRow { charset: Some("binary".into()), ..row("b", "varchar", "varbinary(5)") };
        assert_eq!(info(&[row("id", "int", "int(11)"), bytes]).inexact_text(), None);
    }

    /// An ENUM that declares the label `''` (or a SET the member `''`) shows it as it shows
    /// the error value (the empty set): a fill, which reads the server's text, cannot tell
    /// them apart, where the binlog gives their indexes (an audit: `e = 1` naming the label
    /// `''` answered no rows from the cache).
    #[test]
    fn an_enum_that_declares_the_empty_label_is_unreadable() {
        let rows = [
            row("id", "int", "int(11)"),
            row("e", "enum", "enum('','a','b')"),
            row("f", "enum", "enum('a','b')"),
            row("s", "set", "set('','x')"),
        ];
        assert_eq!(unreadable(&rows), [false, true, false, true]);
    }

    /// information_schema is utf8mb3: it shows a label with a character past U+FFFF (`😀`) as
    /// `?`, so a label read with a `?` may not be the label (an audit: a row the binlog set to
    /// `😀` was served as `?`).
    #[test]
    fn an_enum_label_that_may_not_be_what_the_schema_shows_is_unreadable() {
        let rows = [row("id", "int", "int(11)"), row("e", "enum", "enum('a','?','b')"), row("s", "set", "set('x','y?')")];
        assert_eq!(unreadable(&rows), [false, true, true]);
    }

    /// information_schema writes the attribute as a comment after the type; a label of an
    /// ENUM or SET spelled "compressed" is no such column (an audit: the table was refused).
    #[test]
    fn a_compressed_column_is_known_from_its_type() {
        let rows = [
            row("id", "int", "int(11)"),
            row("v", "varchar", "varchar(200) /*M!100301 COMPRESSED*/"),
            row("e", "enum", "enum('compressed','raw')"),
            row("s", "set", "set('a','COMPRESSED')"),
            row("b", "blob", "blob /*M!100301 COMPRESSED*/"),
        ];
        let info = table_info("x", &rows, &["id"], &[]);
        let compressed: Vec<bool> = info.schema.columns.iter().map(|c| c.compressed).collect();
        assert_eq!(compressed, [false, true, false, false, true]);
    }

    #[test]
    fn an_invisible_column_is_known_from_extra() {
        for (extra, hidden) in [
            (None, false),
            (Some(""), false),
            (Some("auto_increment"), false),
            (Some("INVISIBLE"), true),
            (Some("VIRTUAL GENERATED INVISIBLE"), true),
            (Some("DEFAULT_GENERATED INVISIBLE"), true),
        ] {
            assert_eq!(invisible(extra), hidden, "{extra:?}");
        }
        let mut secret = row("s", "int", "int(11)");
        secret.invisible = true;
        let info = table_info("x", &[row("id", "int", "int(11)"), secret], &["id"], &[]);
        assert_eq!(info.schema.columns.iter().map(|c| c.invisible).collect::<Vec<_>>(), [false, true]);
    }

    #[test]
    fn enum_labels_unescape() {
        assert_eq!(labels("enum('a','b''c','d,e')"), vec!["a", "b'c", "d,e"]);
        assert_eq!(labels("set('x')"), vec!["x"]);
        assert!(labels("int").is_empty());
    }

    #[test]
    fn types_from_information_schema() {
        let mut text = row("t", "varchar", "varchar(10)");
        text.charset = Some("utf8mb4".into());
        text.collation = Some("utf8mb4_general_ci".into());
        text.octet_length = Some(40);
        let mut bin = row("b", "binary", "binary(4)");
        bin.octet_length = Some(4);
        let rows =
            vec![row("u", "int", "int(10) unsigned"), row("j", "longtext", "longtext"), text, bin, row("d", "decimal", "decimal(10,2)")];
        let info = table_info("x", &rows, &["u"], &["json_valid(`j`)"]);
        let ty: Vec<&SqlType> = info.schema.columns.iter().map(|c| &c.ty).collect();
        assert_eq!(ty[0], &SqlType::Int { bytes: 4, unsigned: true });
        assert_eq!(ty[1], &SqlType::Json);
        assert_eq!(ty[2], &SqlType::Text);
        assert_eq!(info.schema.columns[2].collation, Some(Collation::Utf8mb4GeneralCi));
        assert_eq!(ty[3], &SqlType::Bytes);
        assert_eq!(info.decode[3].binary_width, Some(4));
        // What ORDER BY may sort by: the longest value of text and bytes.
        let max_bytes: Vec<Option<u64>> = info.schema.columns.iter().map(|c| c.max_bytes).collect();
        assert_eq!(max_bytes, vec![None, None, Some(40), Some(4), None]);
        assert_eq!(info.schema.primary_key, vec![0]);
    }

    #[test]
    fn table_map_type_families() {
        use ColumnType::*;
        assert!(compatible(MYSQL_TYPE_INT24, &SqlType::Int { bytes: 3, unsigned: true }));
        assert!(!compatible(MYSQL_TYPE_LONG, &SqlType::Int { bytes: 8, unsigned: false }));
        assert!(compatible(MYSQL_TYPE_BLOB, &SqlType::Json));
        assert!(compatible(MYSQL_TYPE_JSON, &SqlType::Json));
        assert!(compatible(MYSQL_TYPE_TIMESTAMP2, &SqlType::Timestamp { fsp: 6 }));
        assert!(!compatible(MYSQL_TYPE_DATETIME2, &SqlType::Timestamp { fsp: 0 }));
    }
}
