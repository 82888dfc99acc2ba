//! An in-memory base-table store: the stand-in for the upstream server and for the local
//! replica in this crate's tests and benches.
//!
//! Owns: [`MemStore`], a multiset of rows per table at a [`Position`]. Does not own: anything
//! persistent (the RocksDB replica is the `replica` crate), nor indexes (scans are linear; it is a test
//! and reference implementation, not a database).
//!
//! Invariant: `position` is the position of the last batch applied; rows reflect exactly the
//! batches up to it.

use std::collections::HashMap;

use crate::delta::{Batch, Position};
use crate::value::{ExactRow, Row};

/// Base tables in memory.
#[derive(Clone, Debug, Default)]
pub struct MemStore {
    tables: HashMap<String, Vec<Row>>,
    position: Position,
}

impl MemStore {
    /// An empty store at position 0.
    pub fn new() -> MemStore {
        MemStore::default()
    }
    /// Applies one batch: inserts append, deletes remove one exactly equal row (a delete of a
    /// row that is not there is ignored, as a replica would after a lost event).
    pub fn apply(&mut self, batch: &Batch) {
        for c in &batch.changes {
            let rows = self.tables.entry(c.table.to_ascii_lowercase()).or_default();
            if c.insert {
                rows.push(c.row.clone());
            } else {
                let target = ExactRow(c.row.clone());
                if let Some(i) = rows.iter().position(|r| ExactRow(r.clone()) == target) {
                    rows.swap_remove(i);
                }
            }
        }
        self.position = self.position.max(batch.position);
    }
    /// Rows of a table (case-insensitive name).
    pub fn rows(&self, table: &str) -> &[Row] {
        self.tables.get(&table.to_ascii_lowercase()).map(Vec::as_slice).unwrap_or(&[])
    }
    /// Position of the last applied batch.
    pub fn position(&self) -> Position {
        self.position
    }
    /// The server's binlog history starts again at `p` (RESET MASTER, another server): the
    /// rows stay as they are, the position is `p` however low.
    pub fn restart_at(&mut self, p: Position) {
        self.position = p;
    }
}
