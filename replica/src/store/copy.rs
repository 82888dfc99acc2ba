//! Copying a table into the store and building the indexes fills scan: the writes that
//! run beside the stream's (see the invariants of [`super`]: copy versus stream, and how an
//! index is filled from `t/<table>` holding writers only per chunk).

use super::*;

/// Copying and index building.
impl ReplicaStore {
    /// Writes one batch of copied rows of the table `schema` describes (read with that schema
    /// at snapshot position `at`, in primary-key order) and the table's new progress in one
    /// write. `generation` is the one [`ReplicaStore::copy_progress`] gave with the state the
    /// copy goes on from, and the batch must have been read in a snapshot opened after that
    /// call. Refused with [`ReplicaError::SchemaChanged`] if the table is registered with
    /// another schema by now (DDL was applied since the caller looked), and with
    /// [`ReplicaError::Reset`] if its rows are of another generation (a gap reset the table:
    /// the batch may predate changes the stream skipped, and the progress it continues was
    /// dropped; the copy starts the table again in a new snapshot). Rows whose key the stream
    /// has touched since the copy began are skipped: the store already has a newer image of
    /// them.
    pub fn write_copy_batch(
        &self,
        schema: &TableSchema,
        generation: Generation,
        at: Position,
        rows: &[Row],
        done: bool,
    ) -> Result<CopyState, ReplicaError> {
        let name = self.key(&schema.name);
        let _w = self.lock();
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        let t = registered_as(&mut tables, &name, schema)?;
        if t.generation != generation {
            return Err(ReplicaError::Reset(name));
        }
        let since = match &t.copy {
            CopyState::Copying { since, .. } => (*since).max(at),
            _ => at,
        };
        let mut wb = WriteBatch::default();
        for row in rows {
            let pk = encode_key(t.schema.primary_key.iter().map(|&i| row.get(i).unwrap_or(&Value::Null)));
            let mut touched = touched_prefix(&name);
            touched.extend_from_slice(&pk);
            if self.db.get_pinned(&touched)?.is_none() {
                if let Some(old) = self.get_row(&name, &pk)? {
                    self.delete_entries(&mut wb, &name, t, &pk, &old)?;
                }
                self.put_entries(&mut wb, &name, t, &pk, row)?;
            }
        }
        let last = rows.last().map(|r| {
            let pk: Vec<Value> = t.schema.primary_key.iter().map(|&i| r.get(i).cloned().unwrap_or(Value::Null)).collect();
            encode_row(&pk)
        });
        let state = if done {
            let mut start = touched_prefix(&name);
            let mut end = start.clone();
            end.push(0xFF);
            wb.delete_range(std::mem::take(&mut start), end);
            CopyState::Done { ready_at: since }
        } else {
            let after = last.or(match &t.copy {
                CopyState::Copying { after, .. } => after.clone(),
                _ => None,
            });
            CopyState::Copying { since, after }
        };
        wb.put(copy_key(&name), state.encode());
        self.write(wb)?;
        t.copy = state.clone();
        Ok(state)
    }

    /// Whether fills can read an index on `cols` of `table`: `Some(true)` built (or the
    /// primary key), `Some(false)` being built, `None` absent.
    fn index_state(&self, table: &str, cols: &[usize]) -> Result<Option<bool>, ReplicaError> {
        let tables = self.tables.read().unwrap_or_else(|e| e.into_inner());
        let t = tables.get(table).ok_or_else(|| ReplicaError::UnknownTable(table.to_string()))?;
        Ok(if cols == t.schema.primary_key.as_slice() {
            Some(true)
        } else if t.building.iter().any(|i| i == cols) {
            Some(false)
        } else if t.indexes.iter().any(|i| i == cols) {
            Some(true)
        } else {
            None
        })
    }

    /// Builds an index on `cols` of `table` from its rows. Writers are held only per chunk of
    /// rows: the index is maintained by every write from the moment the build starts, and each
    /// chunk is read and indexed under the write lock, so an entry the build writes is always
    /// for the row as it is then (a row changed later in an indexed chunk is maintained by the
    /// write; one deleted in a chunk not yet reached is simply not found). Fills read the index
    /// only once it is complete.
    fn build_index(&self, table: &str, cols: &[usize]) -> Result<(), ReplicaError> {
        let cf_name = index_cf(table, cols);
        let generation = {
            let _w = self.lock();
            if self.index_state(table, cols)?.is_some() {
                return Ok(());
            }
            // Checked under the write lock DDL takes (`alter`, `reset`): the fill saw the table
            // ready, but DDL may have moved it to a rewrite since, and its rows are then of mixed
            // shapes.
            if !self.is_ready(table)? {
                return Err(ReplicaError::NotReady(table.to_string()));
            }
            if self.db.cf_handle(&cf_name).is_some() {
                self.drop_cf(&cf_name)?;
            }
            self.create_cf(&cf_name)?;
            let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
            let t = tables.get_mut(table).ok_or_else(|| ReplicaError::UnknownTable(table.to_string()))?;
            t.indexes.push(cols.to_vec());
            t.building.push(cols.to_vec());
            t.generation
        };
        let started = std::time::Instant::now();
        let mut after: Option<Vec<u8>> = None;
        loop {
            if after.is_some() {
                let hook = self.chunk_hook.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if let Some(hook) = hook {
                    hook();
                }
            }
            let _w = self.lock();
            // DDL or a reset between two chunks dropped the index with the table's rows: the
            // build stops, and never marks it built.
            if self.copy_progress(table).map(|(_, g)| g) != Some(generation) {
                return Err(ReplicaError::NotReady(format!("{table} (changed while its index was built)")));
            }
            let (cf, pcf) = (self.cf(&cf_name)?, self.cf(&primary_cf(table))?);
            let mode = match &after {
                Some(k) => IteratorMode::From(k, rocksdb::Direction::Forward),
                None => IteratorMode::Start,
            };
            let mut wb = WriteBatch::default();
            let mut last = None;
            let mut full = false;
            for item in self.db.iterator_cf(&pcf, mode) {
                let (pk, bytes) = item?;
                if after.as_deref() == Some(&pk[..]) {
                    continue;
                }
                let row = decode_row(&bytes)?;
                wb.put_cf(&cf, index_key(&row, cols, &pk), &bytes);
                last = Some(pk.to_vec());
                if wb.len() >= INDEX_BUILD_BATCH || wb.size_in_bytes() >= self.batch_bytes {
                    full = true;
                    break;
                }
            }
            let done = !full;
            if done {
                wb.put(format!("{}{}", index_marker_prefix(table), column_list(cols)), []);
            }
            self.write(wb)?;
            if done {
                let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
                if let Some(t) = tables.get_mut(table) {
                    t.building.retain(|i| i != cols);
                }
                tracing::info!(table, ?cols, elapsed = ?started.elapsed(), "replica: index built");
                return Ok(());
            }
            after = last;
        }
    }

    /// True if a fill of `req` can be answered now without waiting: every table it scans is
    /// ready and no index it reads is being built (a missing one is built by the fill).
    pub fn can_answer(&self, req: &FillRequest) -> bool {
        let scans = req.scans.iter().map(|s| (&s.table, &s.key_columns)).chain(req.dim_scans.iter().map(|d| (&d.table, &d.columns)));
        for (table, cols) in scans {
            let table = self.key(table);
            if !self.is_ready(&table).unwrap_or(false) || matches!(self.index_state(&table, cols), Ok(Some(false)) | Err(_)) {
                return false;
            }
        }
        true
    }

    /// Makes sure fills can read an index on `cols` of `table`, building it if absent.
    pub(super) fn ensure_index(&self, table: &str, cols: &[usize]) -> Result<(), ReplicaError> {
        match self.index_state(table, cols)? {
            Some(true) => Ok(()),
            Some(false) => Err(ReplicaError::NotReady(format!("{table} (index being built)"))),
            None => {
                self.build_index(table, cols)?;
                match self.index_state(table, cols)? {
                    Some(true) => Ok(()),
                    _ => Err(ReplicaError::NotReady(format!("{table} (index being built)"))),
                }
            }
        }
    }
}
