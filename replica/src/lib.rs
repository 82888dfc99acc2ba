//! freshet-replica: the local RocksDB replica, the second fill source (ARCHITECTURE.md, "Fill
//! sources"; the thesis in shared/seeds/001, section 5).
//!
//! Owns: the store on disk ([`store`]: base rows per table, one column family per index the
//! fills use, the applied position written atomically with every transaction) and its fill
//! source; the resumable snapshot of the cached tables from the upstream ([`snapshot`]); the
//! encodings ([`keycode`]: order-preserving index keys; [`rowcode`]: exact stored rows).
//! Does not own: the binlog stream and the upstream fill source (cdc), when fills go here
//! (the proxy's engine). It is its own crate so that only what needs RocksDB links it.

pub mod error;
pub mod fence;
pub mod keycode;
pub mod rowcode;
pub mod snapshot;
pub mod store;

pub use error::ReplicaError;
pub use snapshot::{CopyFigures, CopyStats, SnapshotConfig, batch_params, batch_sql, copy_tables};
pub use store::{CopyState, Generation, ReplicaMemory, ReplicaStore};
