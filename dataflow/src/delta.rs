//! Changes to base tables: positions, deltas and batches.
//!
//! Owns: [`Position`], [`Change`], [`Batch`]. Does not own: binlog formats, GTIDs or file:pos
//! (cdc maps those to a [`Position`]), nor grouping events into transactions (cdc).
//!
//! Invariants: positions are totally ordered and strictly increase from one batch to the next
//! (the dataflow rejects a batch whose position is not greater than the last applied one); a
//! batch is one upstream transaction and is applied atomically per reader key; an update is
//! carried as a delete of the old row followed by an insert of the new one.

use crate::value::Row;

/// An opaque, totally ordered replication position. The cdc crate assigns them monotonically
/// (e.g. a counter over binlog transactions); a fill reports the position its rows reflect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position(pub u64);

/// One row change: `+row` (insert) or `-row` (delete).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Base table name, as in its [`crate::TableSchema`].
    pub table: String,
    /// The full base row, in table column order.
    pub row: Row,
    /// true = insert, false = delete.
    pub insert: bool,
}

/// One upstream transaction's changes, at its commit position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// Position of the transaction's commit.
    pub position: Position,
    /// Changes in commit order.
    pub changes: Vec<Change>,
}

impl Batch {
    /// An empty batch at `position`.
    pub fn new(position: Position) -> Batch {
        Batch { position, changes: Vec::new() }
    }
    /// Adds an insert.
    pub fn insert(&mut self, table: &str, row: Row) -> &mut Batch {
        self.changes.push(Change { table: table.to_string(), row, insert: true });
        self
    }
    /// Adds a delete.
    pub fn delete(&mut self, table: &str, row: Row) -> &mut Batch {
        self.changes.push(Change { table: table.to_string(), row, insert: false });
        self
    }
    /// Adds an update as `-old +new`.
    pub fn update(&mut self, table: &str, old: Row, new: Row) -> &mut Batch {
        self.delete(table, old).insert(table, new)
    }
}
