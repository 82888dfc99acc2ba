//! Eviction: dropping partitions on demand (one partition, every partition, every view that
//! reads a table, a domain whose layout changes) and after the budget's sweep (draining the
//! reader cache's notices of what it evicted).
//!
//! Owns: [`Dataflow::evict`], [`Dataflow::evict_all`], [`Dataflow::evict_reading`],
//! [`Dataflow::evict_domain`], [`Dataflow::drain_evictions`]. Does not own: removing a
//! partition's state and entries (publish's `drop_part`, the only place parts are removed),
//! which entries the budget evicts first (cache), when a partition must be dropped to be
//! refilled (batches, fills).
//!
//! Invariants:
//! - **Descendant eviction.** All state derived from a partition lives in its `KeyState`
//!   (see `plan`), dimension rows included; evicting removes the `KeyState`, its reader entry
//!   and its dimension-index entries together (`drop_part`, the only place parts are removed).
//! - **Budget.** One reader cache holds every view's entries, weighted by the partition's
//!   total bytes (operator state + reader rows), with CLOCK eviction at the global byte
//!   budget (`cache` says which entries go first and which are spared). The cache notes what it
//!   evicted; the writer sweeps and drains those notices after every operation that
//!   publishes, and drops the matching `KeyState` (matched by generation, so a notice about an
//!   old incarnation never evicts a newer fill). Until drained, a `KeyState` may outlive its
//!   reader entry by one operation; it can never serve a stale read, because reads go only to
//!   the cache. The budget can be exceeded by one operation's inserts until that sweep. A
//!   view's bytes are its entries' weights as the cache holds them: counted in when an entry
//!   is put, out when it is replaced or removed, or, for an entry the budget evicted, when the
//!   writer drains its notice (the weight travels with it), so each weight leaves once.

use std::sync::atomic::Ordering as AtOrd;

use super::Dataflow;
use super::cache::Evicted;
use super::publish::drop_part;
use crate::fill::ViewId;
use crate::ops::Key;

impl Dataflow {
    /// Evicts one partition (and everything derived from it, in every view of the domain).
    /// Returns true if it was filled or pending.
    pub fn evict(&mut self, v: ViewId, key: &Key) -> bool {
        self.publish_held();
        let Some(di) = self.view(v).map(|x| x.domain) else { return false };
        let Some(domain) = self.domains.get_mut(di).and_then(Option::as_mut) else { return false };
        let was_pending = domain.pending.remove(key).is_some();
        let was_filled = drop_part(&self.shared, &self.views, domain, key);
        was_pending || was_filled
    }

    pub(super) fn evict_domain(&mut self, di: usize) {
        let Some(domain) = self.domains.get_mut(di).and_then(Option::as_mut) else { return };
        domain.pending.clear();
        domain.ahead.clear();
        let keys: Vec<Key> = domain.parts.keys().map(|k| Key::from(&**k)).collect();
        for k in keys {
            drop_part(&self.shared, &self.views, domain, &k);
        }
    }

    /// Evicts every partition of every view (e.g. when the replication stream cannot be
    /// trusted): always correct, since partitions refill on demand.
    pub fn evict_all(&mut self) {
        self.publish_held();
        self.waiting.clear();
        for di in 0..self.domains.len() {
            self.evict_domain(di);
        }
    }

    /// Evicts every partition of every view that reads `table` (its rows changed in ways no
    /// batch carried: a foreign key's action). Views and their schema stay; partitions refill
    /// on demand at or after the applied position.
    pub fn evict_reading(&mut self, table: &str) {
        self.publish_held();
        let lower = self.catalog.key(table);
        let domains: Vec<usize> = self.views.iter().flatten().filter(|v| v.q.tables.contains(&lower)).map(|v| v.domain).collect();
        for di in domains {
            self.evict_domain(di);
        }
    }

    pub(super) fn drain_evictions(&mut self) {
        let fresh_from = std::mem::replace(&mut self.swept_at, self.next_generation);
        for Evicted { key: ek, generation, weight } in self.shared.cache.evict_to_budget(fresh_from) {
            let Some(view) = self.views.get(ek.view() as usize).and_then(Option::as_ref) else { continue };
            view.counters.bytes.fetch_sub(u64::from(weight), AtOrd::Relaxed);
            let Some(domain) = self.domains.get_mut(view.domain).and_then(Option::as_mut) else { continue };
            let key = ek.into_key();
            if domain.parts.get(&*key).is_some_and(|p| p.generation == generation) {
                drop_part(&self.shared, &self.views, domain, &key);
            }
        }
    }
}
