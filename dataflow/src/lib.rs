//! freshet-dataflow: partially-stateful views compiled from SQL.

pub mod compile;
pub mod cost;
pub mod delta;
pub mod eval;
pub mod expr;
pub mod fill;
pub mod ops;
pub mod plan;
pub mod render;
pub mod schema;
pub mod store;
pub mod value;
pub mod view;

pub use compile::{compile, Catalog, CompiledQuery, KeyColumn, Refusal};
pub use cost::{Bound, CostBounds, StateInfo, TableCost};
pub use delta::{Batch, Change, Position};
pub use fill::{BaseScan, FillData, FillError, FillRequest, FillResponse, FillSource, MemReplica, MemUpstream, StateQuery, ViewId};
pub use ops::Key;
pub use schema::{ColumnSchema, SchemaError, SqlType, TableSchema};
pub use store::MemStore;
pub use value::{Collation, Date, DateTime, Decimal, Row, Value};
pub use view::{ApplyError, ByteSize, Dataflow, FillOutcome, Lookup, LookupError, Reader, ViewStats};
