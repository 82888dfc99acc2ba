//! The replica's errors.

use freshet_dataflow::Position;

use crate::rowcode::RowCodeError;

/// Why the replica could not do what was asked. None of them corrupts the store: a failed
/// write leaves the previous state (every write is one RocksDB batch).
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// RocksDB failed (I/O, a full disk, a lock held by another process).
    #[error("replica store: {0}")]
    Rocks(#[from] rocksdb::Error),
    /// A stored value could not be read back.
    #[error("replica store is corrupt: {0}")]
    Corrupt(&'static str),
    #[error("replica store: {0}")]
    Row(#[from] RowCodeError),
    /// A table without a primary key cannot be replicated (its rows have no identity to
    /// apply binlog images by); caches reading it fill from the upstream.
    #[error("table `{0}` has no primary key; it cannot be replicated")]
    NoPrimaryKey(String),
    /// Its primary key holds a column whose binlog form is not its value (MariaDB's UUID,
    /// INET4, INET6): a copied row and its binlog images would be two rows.
    #[error("table `{0}`'s primary key has a column the binlog gives otherwise than a SELECT; it cannot be replicated")]
    KeyUnreadable(String),
    #[error("table `{0}` is not replicated")]
    UnknownTable(String),
    #[error("replica store: column family `{0}` is missing")]
    MissingColumnFamily(String),
    /// The table is still being copied (or the stream has not reached the copy's position);
    /// the fill should go to the upstream. Retrying later is safe.
    #[error("table `{0}` is not copied yet")]
    NotReady(String),
    /// The store has not applied the position the fill needs; retrying later is safe.
    #[error("replica is behind: at {have:?}, need {need:?}")]
    Behind { have: Position, need: Position },
    /// DDL changed the table while a batch was read with its old schema: the batch is not
    /// written; the copy is retried with the new schema.
    #[error("table `{0}` changed while it was copied; the copy is retried")]
    SchemaChanged(String),
    /// The table was reset (a stream gap) after the copy read the progress it goes on from:
    /// the batch is not written; the copy starts the table again in a new snapshot.
    #[error("table `{0}` was reset while it was copied; its copy starts again")]
    Reset(String),
    /// A durable step refused by the test hook `ReplicaStore::crash_after_steps` (a simulated
    /// kill); never returned otherwise.
    #[error("replica store: simulated crash (test hook)")]
    SimulatedCrash,
    /// Reading the upstream for the snapshot failed; the copy resumes from its last batch.
    #[error("snapshot: {0}")]
    Upstream(String),
}
