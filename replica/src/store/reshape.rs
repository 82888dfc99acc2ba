//! DDL applied to a replicated table's stored rows in place, instead of copying it again.
//!
//! Owns: deciding whether a new schema can be reached from the stored rows
//! ([`ReplicaStore::alter`]), and rewriting them: from the stored rows alone when every new
//! column is an unchanged old one (DROP COLUMN, a reorder), or with the columns it lacks read
//! from the upstream (ADD COLUMN, a changed type: whatever value the server gave existing rows,
//! a DEFAULT expression, CURRENT_TIMESTAMP, a stored generated column, is read, never guessed).
//! Does not own: reading the upstream (`crate::snapshot`), deciding which columns are unchanged
//! (the caller, which also knows the decode facts the store does not keep).
//!
//! # Why the rewritten rows are exact
//! At the DDL (in stream order) the table's schema becomes the new one, its secondary indexes
//! are dropped (their keys were computed from old column positions; they are built again on
//! first use) and it leaves `Done`, so fills go to the upstream and every key the stream writes
//! from then on is marked, exactly as during a copy: the stream writes whole new-shape images.
//! The rewrite skips marked rows and marks each row it rewrites, so a row is rewritten at most
//! once and never over a newer image:
//! - from stored rows alone (under the write lock, per chunk): an unmarked row is the row as of
//!   the applied position in the old shape; dropping and reordering columns gives the same row
//!   in the new shape.
//! - with columns read from the upstream at snapshot position P (at or after the DDL, since the
//!   snapshot is opened after the writer handled it): an unmarked stored row has not changed
//!   since the DDL up to the applied position Q. If P <= Q its new columns at P are its new
//!   columns at Q; if Q < P, any change to it in (Q, P] is still to be applied by the stream,
//!   which replaces the whole row. A row at P that the store lacks is inserted in (Q, P] (the
//!   stream will write it); a stored row absent at P is deleted in (DDL, P] (the stream will
//!   delete it). So once the rewrite is done and the applied position passes the newest P, every
//!   row is the server's row in the new shape, and only then is the table answered from again.
//!
//! Index builds (`ReplicaStore::build_index`) start only on a ready table and stop when the
//! table's generation changes, both checked under the write lock that `alter` holds while it
//! reads the table's indexes and starts the rewrite: no index of the old shape is built, or
//! marked built on disk, once the rewrite has begun.
//!
//! The rewrite starts from `since` = the later of the applied position and the position the
//! table was ready at: a copy that read ahead of the stream (ready at P2 > Q) holds rows with
//! changes up to P2, and a rewrite from stored rows alone reads nothing newer, so the table may
//! be answered from only once the stream passes P2 as well.
//!
//! A table being copied or rewritten when another DDL arrives is copied again (its rows are of
//! mixed shapes); so is one whose primary key changes (the stored keys would not be the new
//! ones). The rewrite's plan and progress are stored with every batch (like a copy's), so a
//! restart goes on with it: the rows, marks and position on disk are one consistent state, and
//! the argument above does not depend on which process wrote them. If the table's schema
//! changed again meanwhile, registering it drops the rows and it is copied again.

use freshet_dataflow::{Position, Row, TableSchema, Value};
use rocksdb::{IteratorMode, WriteBatch};

use super::{CopyState, ReplicaStore, Table, copy_key, fingerprint, index_marker_prefix, primary_cf, schema_key, touched_prefix};
use crate::error::ReplicaError;
use crate::keycode::encode_key;
use crate::rowcode::{decode_row, encode_row};

/// What [`ReplicaStore::alter`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Altered {
    /// The stored schema is the new one: nothing to do.
    Unchanged,
    /// The rows are to be rewritten in place ([`CopyState::Reshaping`]).
    InPlace,
    /// The rows were dropped: the table must be copied again.
    Recopy,
}

impl ReplicaStore {
    /// A registered table's schema changed to `schema`; `keep[i]` is the old position of new
    /// column `i` if that column is unchanged (same name, type and decoding), else `None`.
    /// Rewrites in place when it can (see the module header), else drops the rows for a copy.
    /// An unregistered table is registered (see [`ReplicaStore::register`]).
    pub fn alter(&self, schema: &TableSchema, keep: &[Option<usize>]) -> Result<Altered, ReplicaError> {
        let name = self.key(&schema.name);
        // The table (its indexes included) is read under the write lock that index builds take,
        // so no index is built or completed between this read and the rewrite's start.
        let w = self.lock();
        let old = self.tables.read().unwrap_or_else(|e| e.into_inner()).get(&name).cloned();
        let Some(old) = old else {
            drop(w);
            return self.register(schema).map(|kept| if kept { Altered::Unchanged } else { Altered::Recopy });
        };
        if old.schema == *schema {
            return Ok(Altered::Unchanged);
        }
        // The same identity may still hold other values: a shorter VARCHAR cut some (the
        // caller then keeps that column from none of the old ones).
        let same = fingerprint(&self.database, &old.schema) == fingerprint(&self.database, schema);
        let every_column_kept = keep.len() == schema.columns.len() && keep.iter().enumerate().all(|(i, k)| *k == Some(i));
        if same && every_column_kept {
            // A longer VARCHAR, a column hidden from `SELECT *`: the rows stay; the schema is
            // the new one, so that a later change is compared with it.
            if let Some(t) = self.tables.write().unwrap_or_else(|e| e.into_inner()).get_mut(&name) {
                t.schema = schema.clone();
            }
            return Ok(Altered::Unchanged);
        }
        let key_kept = schema.primary_key.iter().map(|&i| keep.get(i).copied().flatten()).collect::<Option<Vec<usize>>>();
        let in_place = matches!(old.copy, CopyState::Done { .. })
            && keep.len() == schema.columns.len()
            && !schema.primary_key.is_empty()
            && key_kept.as_deref() == Some(old.schema.primary_key.as_slice());
        if !in_place {
            drop(w);
            if same {
                // Registering would keep the rows (the identity is unchanged): drop them.
                return self.reset(schema).map(|_| Altered::Recopy);
            }
            return self.register(schema).map(|kept| if kept { Altered::Unchanged } else { Altered::Recopy });
        }
        // Not before the copy's own readiness: a copy that read ahead of the stream left rows
        // holding writes after the applied position (the DDL's), which the stream has yet to
        // reach, and a column reorder rewrites them without reading anything newer.
        let copied_at = match old.copy {
            CopyState::Done { ready_at } => ready_at,
            _ => Position(0),
        };
        let pos = self.position()?.max(copied_at);
        let mut wb = WriteBatch::default();
        let idx = index_marker_prefix(&name).into_bytes();
        let mut end = idx.clone();
        end.push(0xFF);
        wb.delete_range(idx, end);
        let state = CopyState::Reshaping { since: pos, after: None, keep: keep.to_vec() };
        wb.put(copy_key(&name), state.encode());
        wb.put(schema_key(&name), fingerprint(&self.database, schema).as_bytes());
        // Durable before the index families go (their drop is): lost after it, the markers
        // would name families that are gone.
        self.write_durable(wb)?;
        for cols in &old.indexes {
            let cf = super::index_cf(&name, cols);
            if self.db.cf_handle(&cf).is_some() {
                self.drop_cf(&cf)?;
            }
        }
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        let generation = self.new_generation();
        tables.insert(name, Table { schema: schema.clone(), indexes: Vec::new(), building: Vec::new(), copy: state, generation });
        Ok(Altered::InPlace)
    }

    /// The rewrite's plan for `table`, if it is being rewritten.
    pub fn reshape_plan(&self, table: &str) -> Option<Vec<Option<usize>>> {
        match self.copy_state(table) {
            Some(CopyState::Reshaping { keep, .. }) => Some(keep),
            _ => None,
        }
    }

    /// Rewrites up to `chunk` stored rows of `table` from the stored rows alone (every new
    /// column is an old one), under the write lock. Returns the new state and the rows
    /// rewritten; the state is `Done` when every row is.
    pub fn reshape_local(&self, table: &str, chunk: usize) -> Result<(CopyState, usize), ReplicaError> {
        let name = self.key(table);
        let _w = self.lock();
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        let t = tables.get_mut(&name).ok_or_else(|| ReplicaError::UnknownTable(name.clone()))?;
        let CopyState::Reshaping { since, after, keep } = t.copy.clone() else {
            return Ok((t.copy.clone(), 0));
        };
        let keep: Vec<usize> =
            keep.iter().copied().collect::<Option<_>>().ok_or(ReplicaError::Corrupt("a local rewrite that reads columns"))?;
        let pcf = self.cf(&primary_cf(&name))?;
        let mode = match &after {
            Some(k) => IteratorMode::From(k, rocksdb::Direction::Forward),
            None => IteratorMode::Start,
        };
        let mut wb = WriteBatch::default();
        let (mut seen, mut rewritten, mut last) = (0usize, 0usize, None);
        for item in self.db.iterator_cf(&pcf, mode) {
            let (pk, bytes) = item?;
            if after.as_deref() == Some(&pk[..]) {
                continue;
            }
            seen += 1;
            last = Some(pk.to_vec());
            if !self.marked(&name, &pk)? {
                let old = decode_row(&bytes)?;
                let row: Vec<Value> = keep.iter().map(|&o| old.get(o).cloned().unwrap_or(Value::Null)).collect();
                self.rewrite(&mut wb, &name, &pk, &row)?;
                rewritten += 1;
            }
            if seen >= chunk {
                break;
            }
        }
        let state = if seen < chunk {
            finish(&mut wb, &name, since)
        } else {
            let state = CopyState::Reshaping { since, after: last.or(after), keep: keep.into_iter().map(Some).collect() };
            wb.put(copy_key(&name), state.encode());
            state
        };
        self.write(wb)?;
        t.copy = state.clone();
        Ok((state, rewritten))
    }

    /// Rewrites the rows of the table `schema` describes (refused if it is no longer its
    /// schema, as for a copy batch) given by `fetched`, read from the upstream at snapshot
    /// position `at` in primary-key order: each is the primary key's values then the values of
    /// the new columns the plan reads (`keep[i] == None`), in column order. Returns the new
    /// state (`Done` when `done`) and the rows rewritten.
    pub fn reshape_batch(
        &self,
        schema: &TableSchema,
        at: Position,
        fetched: &[Row],
        done: bool,
    ) -> Result<(CopyState, usize), ReplicaError> {
        let name = self.key(&schema.name);
        let _w = self.lock();
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        let t = super::registered_as(&mut tables, &name, schema)?;
        let CopyState::Reshaping { since, after, keep } = t.copy.clone() else {
            return Ok((t.copy.clone(), 0));
        };
        let since = since.max(at);
        let key_len = t.schema.primary_key.len();
        let mut wb = WriteBatch::default();
        let mut rewritten = 0;
        for f in fetched {
            let pk = encode_key(f.iter().take(key_len));
            if self.marked(&name, &pk)? {
                continue;
            }
            // Absent: inserted after the applied position; the stream will write it whole.
            let Some(old) = self.get_row(&name, &pk)? else { continue };
            let mut read = f.iter().skip(key_len);
            let row: Vec<Value> = keep
                .iter()
                .map(|k| match k {
                    Some(o) => old.get(*o).cloned().unwrap_or(Value::Null),
                    None => read.next().cloned().unwrap_or(Value::Null),
                })
                .collect();
            self.rewrite(&mut wb, &name, &pk, &row)?;
            rewritten += 1;
        }
        let state = if done {
            finish(&mut wb, &name, since)
        } else {
            let last = fetched.last().map(|f| encode_row(&f[..key_len.min(f.len())]));
            let state = CopyState::Reshaping { since, after: last.or(after), keep };
            wb.put(copy_key(&name), state.encode());
            state
        };
        self.write(wb)?;
        t.copy = state.clone();
        Ok((state, rewritten))
    }

    fn marked(&self, name: &str, pk: &[u8]) -> Result<bool, ReplicaError> {
        let mut k = touched_prefix(name);
        k.extend_from_slice(pk);
        Ok(self.db.get_pinned(&k)?.is_some())
    }

    /// Puts the rewritten `row` (no secondary index exists during a rewrite) and marks it.
    fn rewrite(&self, wb: &mut WriteBatch, name: &str, pk: &[u8], row: &[Value]) -> Result<(), ReplicaError> {
        wb.put_cf(&self.cf(&primary_cf(name))?, pk, encode_row(row));
        let mut k = touched_prefix(name);
        k.extend_from_slice(pk);
        wb.put(k, []);
        Ok(())
    }
}

/// The rewrite is complete: marks cleared, `Done` stored (in `wb`).
fn finish(wb: &mut WriteBatch, name: &str, since: Position) -> CopyState {
    let start = touched_prefix(name);
    let mut end = start.clone();
    end.push(0xFF);
    wb.delete_range(start, end);
    let state = CopyState::Done { ready_at: since };
    wb.put(copy_key(name), state.encode());
    state
}
