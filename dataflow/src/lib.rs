//! freshet-dataflow: partially-stateful views compiled from SQL.
//!
//! (Full API overview below is completed as modules land.)

pub mod delta;
pub mod expr;
pub mod ops;
pub mod plan;
pub mod schema;
pub mod value;

pub use delta::{Batch, Change, Position};
pub use schema::{ColumnSchema, SchemaError, SqlType, TableSchema};
pub use value::{Collation, Date, DateTime, Decimal, Row, Value};
