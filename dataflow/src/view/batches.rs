//! Batches: applying upstream transactions in position order (routing each to its
//! partitions: dropped at holes, buffered for pending fills, held for filled partitions) and
//! publishing what held batches changed.
//!
//! Owns: [`Dataflow::apply`], [`Dataflow::apply_held`], [`Dataflow::publish_held`],
//! [`ApplyError`], routing a batch to partitions (`Domain::route`) and running held deltas
//! through a partition's operators ([`flush`]). Does not own: the position rules that a
//! pending partition's buffer serves (fills), the dimension index and borrowing (dims),
//! rebuilding reader entries (publish), operator semantics (ops).
//!
//! Invariants:
//! - **A read of several partitions sees one position.** `publish_held` runs inside
//!   `Shared::publishing` (a count, odd while it runs): a read that saw it odd or changed
//!   looks again, and after a few tries answers `Unsettled` instead of merging entries from
//!   both sides of a step. A fill ahead of the applied position publishes entries marked
//!   `ahead` (remembered in `Domain::ahead`), which a read of several partitions does not
//!   merge either; the first `publish_held` at or past the fill's position republishes them
//!   unmarked. Between two publications every unmarked entry shows the applied position.
//! - **Held batches.** [`Dataflow::apply_held`] routes a batch at once (holes, pending
//!   buffers and the dimension log see it in order, as with `apply`) but only queues its deltas
//!   for a filled partition (`Domain::unprocessed`); the partition's operators run once for all
//!   of its held batches, concatenated in batch order, when it is *flushed*: at
//!   `publish_held`, and before anything reads or changes its state (borrowing reads lender and
//!   borrower at the applied position). That is the same state as batch after batch: every
//!   operator is exact for a multi-change batch (a batch is a multiset of weighted rows; joins
//!   take `ΔL ⋈ R_old` then `L_new ⋈ ΔR`; aggregates and top-k compare before and after the
//!   whole batch); only two choices may differ, both within what the server may answer: the
//!   spelling a case-insensitive group shows, and a top-k prefix that a deletion would have
//!   left short in between is not refilled if later rows fill it again. A partition that needs
//!   a refill after its flush is dropped then; dropped earlier (after the batch that caused
//!   it), it would have dropped the later batches' deltas as a hole, and be a hole now all the
//!   same. Readers see none of it before `publish_held`, so nothing else is observable.

use super::dims::borrow_covers;
use super::publish::{drop_part, publish};
use super::reader::Shared;
use super::{Dataflow, Domain, OccDeltas, View};
use crate::delta::{Batch, Position};
use crate::hash::Map;
use crate::ops::Key;
use crate::value::Value;

/// Most batches buffered for one partition while its fill is in flight.
const MAX_BUFFERED: usize = 100_000;

/// Errors applying a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// Batches must arrive in strictly increasing position order.
    #[error("batch at {got:?} is not after the applied position {applied:?}")]
    OutOfOrder { got: Position, applied: Position },
}

impl Domain {
    /// Splits a batch into base deltas per partition (by occurrence), for the filled and
    /// pending partitions it concerns. Rows of partition-keyed tables go to their partition;
    /// dimension rows go to the filled partitions covering their key (the index), and, when
    /// some partition is pending (its cover is not known until its fill arrives), to the
    /// second result, for the shared log.
    fn route(&self, batch: &Batch) -> (Map<Key, OccDeltas>, Option<OccDeltas>) {
        let domain = self;
        let mut per_key: Map<Key, OccDeltas> = Map::default();
        let mut for_pending: Option<OccDeltas> = None;
        for c in &batch.changes {
            let is = |t: &str| domain.is_table(t, &c.table);
            for (occ, table, key) in &domain.occs {
                if !is(table) {
                    continue;
                }
                let k: Key = key.iter().map(|&i| c.row.get(i).cloned().unwrap_or(Value::Null)).collect();
                if !domain.parts.contains_key(&*k) && !domain.pending.contains_key(&k) {
                    continue;
                }
                let slot = per_key.entry(k).or_insert_with(|| vec![Vec::new(); domain.n_occ]);
                slot[*occ].push((c.row.clone(), if c.insert { 1 } else { -1 }));
            }
            for (d, dim) in domain.dims.iter().enumerate() {
                if !is(&dim.table) {
                    continue;
                }
                let w = if c.insert { 1 } else { -1 };
                for k in domain.dim_index.route(&domain.dims, d, &c.row) {
                    let slot = per_key.entry(k.clone()).or_insert_with(|| vec![Vec::new(); domain.n_occ]);
                    slot[dim.occ].push((c.row.clone(), w));
                }
                if !domain.pending.is_empty() {
                    let log = for_pending.get_or_insert_with(|| vec![Vec::new(); domain.n_occ]);
                    log[dim.occ].push((c.row.clone(), w));
                }
            }
        }
        (per_key, for_pending)
    }
}

impl Dataflow {
    /// Applies one upstream transaction. Deltas to holes are dropped, to pending partitions
    /// buffered, to filled partitions applied; each touched partition is republished once.
    pub fn apply(&mut self, batch: &Batch) -> Result<(), ApplyError> {
        let applied = self.apply_held(batch);
        self.publish_held();
        applied
    }

    /// Applies one upstream transaction like [`Dataflow::apply`] but holds back the
    /// republication of the partitions it changed until [`Dataflow::publish_held`], so that a
    /// partition touched by many transactions in a row (a global top-k, a popular story) is
    /// rebuilt and swapped once for all of them; its operators too run once for all of them,
    /// when it is flushed (see "Held batches" in the module header). A reader sees a held partition as it was before
    /// the held batches or, if applying one evicted it (a budget eviction, a refill that a
    /// bounded state needs), as a miss; never part of a batch: a partition's entry is only
    /// ever rebuilt from its state between whole batches. Every other operation that changes
    /// what readers see (fills, evictions, installs, drops, DDL that drops a view) publishes
    /// what is held first, so the order of operations readers observe is unchanged. [`Dataflow::applied`] counts held batches; a caller that
    /// announces a position as visible publishes first.
    pub fn apply_held(&mut self, batch: &Batch) -> Result<(), ApplyError> {
        if batch.position <= self.applied {
            return Err(ApplyError::OutOfOrder { got: batch.position, applied: self.applied });
        }
        self.drain_evictions();
        let pos = batch.position;
        for di in 0..self.domains.len() {
            let Some(domain) = self.domains[di].as_mut() else { continue };
            // Log entries at or before the oldest pending `since` can never be replayed.
            domain.dim_log.trim(domain.pending.values().map(|p| p.since).min());
            borrow_covers(&self.shared, &self.views, domain, batch, pos);
            let (per_key, for_pending) = domain.route(batch);
            if let Some(d) = for_pending {
                if domain.dim_log.len() >= MAX_BUFFERED {
                    // As for one partition's buffer below: these fills are as good as lost.
                    domain.pending.clear();
                    domain.dim_log.trim(None);
                } else {
                    domain.dim_log.push(pos, d);
                }
            }
            for (k, deltas) in per_key {
                if let Some(p) = domain.parts.get(&*k) {
                    if pos > p.ks.filled_at {
                        hold(&mut domain.unprocessed, k, deltas);
                    }
                } else if let Some(p) = domain.pending.get_mut(&k) {
                    if p.buffer.len() >= MAX_BUFFERED {
                        // A fill this late is as good as lost: make the partition a hole again
                        // (its fill will be ignored) rather than buffer without bound.
                        domain.pending.remove(&k);
                    } else {
                        p.buffer.push((pos, deltas));
                    }
                }
            }
        }
        self.applied = pos;
        Ok(())
    }

    /// Republishes every partition changed by batches applied with
    /// [`Dataflow::apply_held`]: from here on readers see all of them.
    /// Reads of several partitions see all of it or none ([`Shared::publishing`]): never some
    /// partitions before a transaction and others after it.
    pub fn publish_held(&mut self) {
        let applied = self.applied;
        // Nothing to publish (most callers ask in passing): no count that reads would retry on.
        let idle = |d: &Domain| d.held.is_empty() && d.unprocessed.is_empty() && d.ahead.iter().all(|(p, _)| *p > applied);
        if self.domains.iter().flatten().all(idle) {
            self.drain_evictions();
            return;
        }
        let (shared, views) = (&self.shared, &self.views);
        shared.publishing(|| {
            for domain in self.domains.iter_mut().flatten() {
                flush_all(shared, views, domain);
                // Fills ahead of the stream that it has now reached: their rows are the
                // applied state's too, which their republication says.
                if !domain.ahead.is_empty() {
                    let (passed, still): (Vec<_>, Vec<_>) = std::mem::take(&mut domain.ahead).into_iter().partition(|(p, _)| *p <= applied);
                    domain.ahead = still;
                    domain.held.extend(passed.into_iter().map(|(_, k)| k).filter(|k| domain.parts.contains_key(&**k)));
                }
                if domain.held.is_empty() {
                    continue;
                }
                for k in std::mem::take(&mut domain.held) {
                    publish(shared, views, domain, &k, applied);
                }
            }
        });
        self.drain_evictions();
    }
}

/// Adds one held batch's deltas for a filled partition to those not yet processed.
fn hold(unprocessed: &mut Map<Key, OccDeltas>, k: Key, deltas: OccDeltas) {
    match unprocessed.get_mut(&k) {
        Some(earlier) => {
            for (e, d) in earlier.iter_mut().zip(deltas) {
                e.extend(d);
            }
        }
        None => {
            unprocessed.insert(k, deltas);
        }
    }
}

/// Pushes the held deltas of partition `k` through its operators (all of its held batches in
/// one pass, in batch order), then marks it for republication, or drops it if a bounded state
/// or a dimension join now needs a refill (as if it had been dropped after the batch that
/// caused it: see "Held batches" in the module header). Call before reading or changing the
/// partition's state in any other way.
pub(super) fn flush(shared: &Shared, views: &[Option<View>], domain: &mut Domain, k: &Key) {
    let Some(mut deltas) = domain.unprocessed.remove(k) else { return };
    let Some(p) = domain.parts.get_mut(&**k) else { return };
    p.ks.process(&domain.graph, k, &mut deltas);
    if p.ks.needs_refill {
        drop_part(shared, views, domain, k);
    } else {
        domain.held.insert(k.clone());
    }
}

/// [`flush`] for every partition with held deltas.
fn flush_all(shared: &Shared, views: &[Option<View>], domain: &mut Domain) {
    let keys: Vec<Key> = domain.unprocessed.keys().cloned().collect();
    for k in keys {
        flush(shared, views, domain, &k);
    }
}
