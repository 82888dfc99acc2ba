//! Base-table schemas, as the caller (the cdc crate, from information_schema) describes them.
//!
//! Owns: [`TableSchema`], [`ColumnSchema`], [`SqlType`] and the check that a schema is one
//! freshet can cache. Does not own: reading information_schema (cdc), DDL detection (cdc).
//!
//! Invariants: column names are matched case-insensitively (MySQL column names are); every
//! primary-key index is a valid column index; a text column carries a collation, and
//! `collation == None` on a text column means "not implemented by freshet", which makes the
//! compiler refuse queries that compare, group or sort on it.

use crate::collation::same_identifier;
use crate::value::Collation;

/// Column types, at the granularity that changes how values behave.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SqlType {
    /// TINYINT..BIGINT; `unsigned` selects [`crate::Value::UInt`].
    Int { bytes: u8, unsigned: bool },
    /// FLOAT.
    Float,
    /// DOUBLE.
    Double,
    /// DECIMAL(precision, scale); precision above 28 is refused by [`TableSchema::check`].
    Decimal { precision: u8, scale: u8 },
    /// CHAR/VARCHAR/TEXT.
    Text,
    /// BINARY/VARBINARY/BLOB.
    Bytes,
    /// DATE.
    Date,
    /// TIME(fsp).
    Time { fsp: u8 },
    /// DATETIME(fsp).
    DateTime { fsp: u8 },
    /// TIMESTAMP(fsp).
    Timestamp { fsp: u8 },
    /// YEAR.
    Year,
    /// ENUM('a', 'b', ...).
    Enum(Vec<String>),
    /// SET('a', 'b', ...).
    Set(Vec<String>),
    /// BIT(n).
    Bit { bits: u8 },
    /// JSON.
    Json,
}

/// One column of a base table.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ColumnSchema {
    /// Column name as the server reports it.
    pub name: String,
    /// Its type.
    pub ty: SqlType,
    /// Whether NULL is allowed.
    pub nullable: bool,
    /// For text and ENUM columns: the collation if freshet implements it; `None` otherwise
    /// (for an ENUM, its labels then match a string only byte for byte).
    pub collation: Option<Collation>,
    /// For text, bytes and JSON: the most bytes a value may hold (the server's
    /// CHARACTER_OCTET_LENGTH, which cdc always reads); `None` where not known (a catalog
    /// built by hand), taken as short. What ORDER BY may sort by (`compile::sorting`).
    pub max_bytes: Option<u64>,
    /// INVISIBLE (MariaDB 10.3, MySQL 8.0.23): left out of `SELECT *` and `t.*`, read when
    /// named.
    pub invisible: bool,
    /// Why no view may read this column, if so: its values in the binlog are not what the
    /// server's SELECT gives (MariaDB's INET4, INET6 and UUID arrive in their binary form), or
    /// are misread there (a negative TIME(1) or TIME(2)). The table's other columns are read.
    pub unreadable: Option<&'static str>,
    /// CHAR or BINARY: the server pads values to the column's width, and shows a CHAR's
    /// without trailing spaces and a BINARY's with its zero bytes. A VARCHAR made a CHAR of the
    /// same length loses its values' trailing spaces, a VARBINARY made a BINARY gains zero
    /// bytes: the same type and length, other values.
    pub padded: bool,
    /// utf8mb3 text or ENUM: it holds characters of the Basic Multilingual Plane only, and the
    /// server refuses to compare it with a text holding others (1267) where its utf8mb4 twin,
    /// under whose collation the views compare it, would find U+FFFD's partition.
    pub bmp_only: bool,
    /// MariaDB's column compression (`VARCHAR(n) COMPRESSED`, 10.3): the binlog carries the
    /// value compressed, under a column type of its own (140, 141) that the binlog reader
    /// cannot size, so no row of the table can be read from the binlog
    /// ([`SchemaError::Compressed`]).
    pub compressed: bool,
}

/// The ENUM value a string is equal to, as the server compares them (as strings): the 1-based
/// index of the label equal to it under the column's collation (`'É'` names `'é'` under
/// utf8mb4_general_ci, `'b '` names `'b'` under PAD SPACE; byte for byte without one); 0, the
/// error value, whose string is empty, for an empty string; and [`NO_LABEL`], which no value
/// has, for a string equal to no label. None for a string equal both to the error value's and
/// to a label the ENUM declares (`''`): the server finds rows of both, no one index does.
pub fn enum_index(labels: &[String], s: &str, collation: Option<Collation>) -> Option<u16> {
    let equal = |l: &str| match collation {
        Some(c) => c.compare(l, s).is_eq(),
        None => l == s,
    };
    let label = labels.iter().position(|l| equal(l)).map(|i| i as u16 + 1);
    match (equal(""), label) {
        (true, Some(_)) => None,
        (true, None) => Some(0),
        (false, label) => Some(label.unwrap_or(NO_LABEL)),
    }
}

/// The ENUM index of a string equal to no label (see [`enum_index`]): no value has it unless
/// the ENUM has all 65,535 labels a server allows, a case left as it is.
pub const NO_LABEL: u16 = u16::MAX;

/// `max_bytes` only when known, `invisible` only when set: a schema's text (the replica's
/// fingerprint of a table) reads as it did before columns had them.
impl std::fmt::Debug for ColumnSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("ColumnSchema");
        d.field("name", &self.name).field("ty", &self.ty).field("nullable", &self.nullable).field("collation", &self.collation);
        if let Some(n) = self.max_bytes {
            d.field("max_bytes", &n);
        }
        if self.invisible {
            d.field("invisible", &true);
        }
        if self.padded {
            d.field("padded", &true);
        }
        if self.compressed {
            d.field("compressed", &true);
        }
        if let Some(why) = self.unreadable {
            d.field("unreadable", &why);
        }
        if self.bmp_only {
            d.field("bmp_only", &true);
        }
        d.finish()
    }
}

impl ColumnSchema {
    /// The same column with no length and visible: what decides how its values read and
    /// compare, which a longer VARCHAR or hiding it from `SELECT *` does not change. (A
    /// shorter one may cut the values; the replica reads such a column anew.)
    pub fn values_only(&self) -> ColumnSchema {
        ColumnSchema { max_bytes: None, invisible: false, ..self.clone() }
    }

    /// A column with the given name and type, nullable, with `utf8mb4_general_ci` for text.
    pub fn new(name: &str, ty: SqlType) -> ColumnSchema {
        let collation = matches!(ty, SqlType::Text).then_some(Collation::Utf8mb4GeneralCi);
        ColumnSchema {
            name: name.to_string(),
            ty,
            nullable: true,
            collation,
            max_bytes: None,
            invisible: false,
            padded: false,
            unreadable: None,
            bmp_only: false,
            compressed: false,
        }
    }
    /// Builder: set nullability.
    pub fn not_null(mut self) -> ColumnSchema {
        self.nullable = false;
        self
    }
    /// Builder: set the collation (`None` = not implemented by freshet).
    pub fn with_collation(mut self, c: Option<Collation>) -> ColumnSchema {
        self.collation = c;
        self
    }
    /// Builder: INVISIBLE, left out of wildcards.
    pub fn invisible(mut self) -> ColumnSchema {
        self.invisible = true;
        self
    }
    /// Builder: set the most bytes a value may hold.
    pub fn with_max_bytes(mut self, bytes: u64) -> ColumnSchema {
        self.max_bytes = Some(bytes);
        self
    }
}

/// A base table: name, columns in table order, primary key column indexes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TableSchema {
    /// Unqualified table name.
    pub name: String,
    /// Columns, in the order rows carry them.
    pub columns: Vec<ColumnSchema>,
    /// Indexes into `columns`; empty if the table has no primary key.
    pub primary_key: Vec<usize>,
    /// The server's storage engine for it (information_schema.TABLES.ENGINE); `None` where
    /// not known (a catalog built by hand). Only InnoDB is accepted ([`TableSchema::check`]).
    pub engine: Option<Box<str>>,
}

/// Why a schema cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SchemaError {
    /// A primary key index is out of range.
    #[error("table `{table}`: primary key column {index} does not exist")]
    BadPrimaryKey { table: String, index: usize },
    /// Two columns share a name.
    #[error("table `{table}`: duplicate column `{column}`")]
    DuplicateColumn { table: String, column: String },
    /// DECIMAL wider than freshet's exact type.
    #[error("table `{table}`: column `{column}` is DECIMAL({precision}); freshet handles up to 28 digits")]
    DecimalTooWide { table: String, column: String, precision: u8 },
    /// An engine without consistent snapshots (MyISAM, Aria, MEMORY, ...): a fill reads such a
    /// table as it is when the read runs, not at the snapshot's binlog position, so the
    /// changes after that position would be applied to rows that already hold some of them.
    #[error("table `{table}` uses engine {engine}: fills need consistent snapshots (InnoDB)")]
    NoSnapshots { table: String, engine: String },
    /// A COMPRESSED column ([`ColumnSchema::compressed`]): the table's row events cannot be
    /// read, so no view may read the table.
    #[error("table `{table}`: column `{column}` is COMPRESSED; freshet cannot read such a table's rows from the binlog")]
    Compressed { table: String, column: String },
}

impl TableSchema {
    /// A table with the given columns and primary key.
    pub fn new(name: &str, columns: Vec<ColumnSchema>, primary_key: Vec<usize>) -> TableSchema {
        TableSchema { name: name.to_string(), columns, primary_key, engine: None }
    }
    /// True if a column of the primary key is one no view may read
    /// ([`ColumnSchema::unreadable`]): its rows copied and its binlog images would not match.
    pub fn key_unreadable(&self) -> bool {
        self.primary_key.iter().any(|&k| self.columns.get(k).is_some_and(|c| c.unreadable.is_some()))
    }
    /// Index of a column by name, compared as the server compares column names
    /// ([`same_identifier`]).
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| same_identifier(&c.name, name))
    }
    /// Validates the schema; reports the first problem.
    pub fn check(&self) -> Result<(), SchemaError> {
        if let Some(engine) = &self.engine
            && !engine.eq_ignore_ascii_case("InnoDB")
        {
            return Err(SchemaError::NoSnapshots { table: self.name.clone(), engine: engine.to_string() });
        }
        for &i in &self.primary_key {
            if i >= self.columns.len() {
                return Err(SchemaError::BadPrimaryKey { table: self.name.clone(), index: i });
            }
        }
        for (i, c) in self.columns.iter().enumerate() {
            if c.compressed {
                return Err(SchemaError::Compressed { table: self.name.clone(), column: c.name.clone() });
            }
            if self.columns[..i].iter().any(|o| same_identifier(&o.name, &c.name)) {
                return Err(SchemaError::DuplicateColumn { table: self.name.clone(), column: c.name.clone() });
            }
            if let SqlType::Decimal { precision, .. } = c.ty
                && precision > 28
            {
                return Err(SchemaError::DecimalTooWide { table: self.name.clone(), column: c.name.clone(), precision });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_names_the_enum_value_it_equals() {
        let labels = vec!["é".to_string(), "b".to_string()];
        let ci = Some(Collation::Utf8mb4GeneralCi);
        assert_eq!(enum_index(&labels, "É", ci), Some(1));
        assert_eq!(enum_index(&labels, "b ", ci), Some(2), "PAD SPACE");
        assert_eq!(enum_index(&labels, "", ci), Some(0), "the error value's string is empty");
        assert_eq!(enum_index(&labels, "zzz", ci), Some(NO_LABEL));
        assert_eq!(enum_index(&labels, "É", None), Some(NO_LABEL), "byte for byte without a collation");
        let declared = ["a".to_string(), String::new()];
        assert_eq!(enum_index(&declared, "", ci), None, "the error value and the label '' both");
        assert_eq!(enum_index(&declared, " ", ci), None, "PAD SPACE: ' ' is ''");
        assert_eq!(enum_index(&declared, "a", ci), Some(1));
    }
}
