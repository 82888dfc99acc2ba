//! Fills answered from the store: every scan of a [`FillRequest`] read through one RocksDB
//! snapshot, so the rows are exactly the state at the position the answer reports.

use super::*;

/// Fills.
impl ReplicaStore {
    /// Answers a base-row fill at the applied position (see the module header).
    pub fn fill_request(&self, req: &FillRequest) -> Result<FillResponse, ReplicaError> {
        let mut needed: Vec<(String, Vec<usize>)> = Vec::new();
        for s in &req.scans {
            needed.push((self.key(&s.table), s.key_columns.clone()));
        }
        for d in &req.dim_scans {
            needed.push((self.key(&d.table), d.columns.clone()));
        }
        for (table, cols) in &needed {
            if !self.is_ready(table)? {
                return Err(ReplicaError::NotReady(table.clone()));
            }
            self.ensure_index(table, cols)?;
        }
        let snap = self.db.snapshot();
        let position = read_position(snap.get(b"pos")?)?;
        if position < req.min_position {
            return Err(ReplicaError::Behind { have: position, need: req.min_position });
        }
        let mut answers: Vec<Vec<Row>> = Vec::with_capacity(needed.len());
        for (i, (table, cols)) in needed.iter().enumerate() {
            let keys: Vec<Key> = if i < req.scans.len() {
                req.keys.clone()
            } else {
                let d = &req.dim_scans[i - req.scans.len()];
                let from = answers.get(d.from).map(Vec::as_slice).unwrap_or(&[]);
                let mut ks: Vec<Key> = from.iter().filter_map(|r| freshet_dataflow::fill::key_of(r, &d.from_columns)).collect();
                ks.sort();
                ks.dedup();
                ks
            };
            answers.push(self.scan(&snap, table, cols, &keys)?);
        }
        Ok(FillResponse::answer(req, position, FillData::BaseRows(answers)))
    }

    /// Every row of `table` whose `cols` equal one of `keys`, read through `snap`.
    fn scan(
        &self,
        snap: &rocksdb::SnapshotWithThreadMode<'_, Db>,
        table: &str,
        cols: &[usize],
        keys: &[Key],
    ) -> Result<Vec<Row>, ReplicaError> {
        let is_pk = {
            let tables = self.tables.read().unwrap_or_else(|e| e.into_inner());
            tables.get(table).is_some_and(|t| t.schema.primary_key.as_slice() == cols)
        };
        let cf = if is_pk { self.cf(&primary_cf(table))? } else { self.cf(&index_cf(table, cols))? };
        let mut out = Vec::new();
        for key in keys {
            if key.iter().any(Value::is_null) {
                continue;
            }
            let prefix = encode_key(key.iter());
            let mut ro = ReadOptions::default();
            ro.set_snapshot(snap);
            let upper = next_prefix(&prefix);
            if !upper.is_empty() {
                ro.set_iterate_upper_bound(upper);
            }
            for item in self.db.iterator_cf_opt(&cf, ro, IteratorMode::From(&prefix, rocksdb::Direction::Forward)) {
                let (k, v) = item?;
                if !k.starts_with(&prefix) {
                    break;
                }
                let row = decode_row(&v)?;
                // Equal encodings are not proof of equal values (see keycode).
                if cols.iter().zip(key.iter()).all(|(&c, kv)| row.get(c) == Some(kv)) {
                    out.push(row);
                }
            }
        }
        Ok(out)
    }
}

/// The smallest byte string greater than every string starting with `prefix` (its upper
/// bound), or empty if there is none (all 0xFF).
fn next_prefix(prefix: &[u8]) -> Vec<u8> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xFF {
            p.push(last + 1);
            return p;
        }
    }
    p
}

impl ReplicaStore {
    /// [`ReplicaStore::fill_request`] with the dataflow's fill errors (both retry-safe).
    pub fn answer(&self, req: &FillRequest) -> Result<FillResponse, FillError> {
        self.fill_request(req).map_err(|e| match e {
            ReplicaError::Behind { have, need } => FillError::Behind { have, need },
            other => FillError::Unavailable(other.to_string()),
        })
    }
}

impl FillSource for &ReplicaStore {
    fn fill(&mut self, req: &FillRequest) -> Result<FillResponse, FillError> {
        self.answer(req)
    }
}
