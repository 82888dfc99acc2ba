//! Fills: turning the misses readers recorded into fill requests, giving up on a request, and
//! installing an answer under the position rules (or holding it until the stream has passed
//! its unsure range).
//!
//! Owns: [`Dataflow::fill_requests`], [`Dataflow::request_fill`], [`Dataflow::abandon_fill`],
//! [`Dataflow::complete_fill`], [`Dataflow::settle_fills`], [`Dataflow::run_fills`] and
//! [`FillOutcome`]. Does not own: what a request asks and how an answer becomes a state
//! (seeding), buffering the deltas of pending partitions (batches), the shared dimension log
//! and its replay (dims), publishing an installed partition (publish), fill transport (fill
//! sources).
//!
//! Invariants (the position rules; the parent module names them with the others):
//! - **Fills are idempotent.** A fill is accepted only for partitions that are pending; a
//!   partition that is already filled (several readers asked) or was evicted meanwhile ignores
//!   it. Requests are deduplicated by the same pending set.
//! - **No double counting.** A pending partition records `since`, the writer's applied
//!   position when it became pending; every later delta for it is buffered. A fill at position
//!   P is accepted only if `P >= since` (otherwise deltas in `(P, since]` were dropped and
//!   would be lost); buffered deltas at or before P are discarded, later ones applied in order;
//!   the partition remembers `filled_at = P` and skips any delta at or before it that arrives
//!   later (a fill may be ahead of the binlog). Each committed write is thus counted once.
//! - **Fills unsure of their position** ([`FillResponse::unsure`]: MariaDB's snapshot position
//!   is off by a few commits now and then). Such a fill waits in `Dataflow::waiting`, its
//!   partitions pending, until the applied position has passed its unsure range
//!   ([`Dataflow::settle_fills`]); then every commit that ended in the range is known, and a
//!   partition is installed only if the range does not begin before its `since` (commits
//!   before it were dropped unseen) and no commit from `since` to the range's end is in its
//!   buffer or is a dimension row its filled state covers (the shared log): the range checked
//!   starts at `since` for a margin. Outside the range the fill's data agrees with
//!   its position, so the rules above apply unchanged. A partition refused this way is a hole
//!   again, and its reads are relayed for a moment (`ReaderCache::note_raced`).

use std::collections::HashMap;
use std::sync::atomic::Ordering as AtOrd;

use super::publish::publish;
use super::reader::{EntryKey, Shared};
use super::seeding::{build_request, build_state};
use super::{Dataflow, Domain, Part, PartKey, Pending};
use crate::fill::{FillError, FillRequest, FillResponse, FillSource, FillTicket, ViewId};
use crate::ops::Key;

/// Outcome of installing a fill.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FillOutcome {
    /// Partitions filled.
    pub filled: usize,
    /// Partitions ignored: already filled, evicted meanwhile, or never requested.
    pub ignored: usize,
    /// Partitions rejected because the fill was older than the position they became holes
    /// at; they are holes again and will be requested anew.
    pub stale: usize,
    /// Partitions rejected because a commit to them ended where the fill's data may disagree
    /// with its position ([`FillResponse::unsure`]); they are holes again.
    pub unsure: usize,
    /// Partitions whose fill waits for the stream to pass its unsure range
    /// ([`Dataflow::settle_fills`] installs it).
    pub waiting: usize,
}

impl FillOutcome {
    fn add(&mut self, o: FillOutcome) {
        self.filled += o.filled;
        self.ignored += o.ignored;
        self.stale += o.stale;
        self.unsure += o.unsure;
        self.waiting += o.waiting;
    }
}

/// Most fills held for the stream to pass their unsure range; the oldest gives way (its
/// partitions become holes). They are as many as the fills in flight unless a gap or
/// evictions ask again for partitions whose fills still wait.
const MAX_WAITING: usize = 1024;

impl Dataflow {
    /// Turns the misses readers recorded into fill requests: partitions already filled are
    /// republished, partitions already pending are skipped (deduplication), the rest become
    /// pending and are batched, at most `max_fill_keys` per request.
    pub fn fill_requests(&mut self) -> Vec<FillRequest> {
        self.publish_held();
        let misses = match self.shared.misses.lock() {
            Ok(mut m) => std::mem::take(&mut *m),
            Err(_) => HashMap::new(),
        };
        let mut out = Vec::new();
        let mut sorted: Vec<_> = misses.into_iter().collect();
        sorted.sort_by_key(|(v, _)| *v);
        for (v, keys) in sorted {
            let mut keys: Vec<Key> = keys.into_iter().collect();
            keys.sort();
            out.extend(self.request_fill(ViewId(v), keys));
        }
        out
    }

    /// Requests a fill of `keys` of view `v` (and of the views sharing its domain) directly,
    /// e.g. to warm a view.
    pub fn request_fill(&mut self, v: ViewId, keys: Vec<Key>) -> Vec<FillRequest> {
        self.publish_held();
        let applied = self.applied;
        let max = self.max_fill_keys;
        let Some(di) = self.view(v).map(|x| x.domain) else { return vec![] };
        let Some(domain) = self.domains.get_mut(di).and_then(Option::as_mut) else { return vec![] };
        let mut fresh = Vec::new();
        let mut deferred = Vec::new();
        for k in keys {
            if domain.parts.contains_key(&*k) {
                publish(&self.shared, &self.views, domain, &k, applied);
            } else if domain.pending.contains_key(&k) {
                continue;
            } else if domain.pending.len() >= self.max_pending {
                deferred.push(k);
            } else {
                domain.pending.insert(k.clone(), Pending { since: applied, buffer: Vec::new() });
                fresh.push(k);
            }
        }
        if !deferred.is_empty()
            && let Ok(mut m) = self.shared.misses.lock()
        {
            m.entry(v.0).or_default().extend(deferred);
        }
        let ticket = FillTicket { domain: di as u32, epoch: domain.epoch };
        fresh.chunks(max).map(|chunk| build_request(domain, v, ticket, chunk.to_vec(), applied)).collect()
    }

    /// The domain a ticket names, if it still has the ticket's layout.
    fn domain_for(&mut self, t: FillTicket) -> Option<&mut Domain> {
        self.domains.get_mut(t.domain as usize).and_then(Option::as_mut).filter(|d| d.epoch == t.epoch)
    }

    /// Gives up on a fill (the source failed or timed out): its partitions become holes
    /// again, and the next read asks anew. Callers must do this for every request they will
    /// not answer, or its partitions stay pending.
    pub fn abandon_fill(&mut self, req: &FillRequest) {
        if let Some(domain) = self.domain_for(req.ticket) {
            for k in &req.keys {
                domain.pending.remove(k);
            }
        }
    }

    /// Installs a fill's answer (see the module header for the position rules). An answer
    /// whose data may disagree with its position ([`FillResponse::unsure`]) waits, its
    /// partitions pending, until the applied position has passed the unsure range
    /// ([`Dataflow::settle_fills`]).
    pub fn complete_fill(&mut self, resp: FillResponse) -> FillOutcome {
        self.publish_held();
        if resp.unsure.is_some_and(|u| u.to > self.applied) {
            if self.waiting.len() >= MAX_WAITING {
                let oldest = self.waiting.remove(0);
                if let Some(domain) = self.domain_for(oldest.ticket) {
                    for k in &oldest.keys {
                        domain.pending.remove(k);
                    }
                }
            }
            let waiting = resp.keys.len();
            self.waiting.push(resp);
            return FillOutcome { waiting, ..FillOutcome::default() };
        }
        let mut outcome = FillOutcome::default();
        let ticket = resp.ticket;
        let Some(domain) = self.domains.get_mut(ticket.domain as usize).and_then(Option::as_mut).filter(|d| d.epoch == ticket.epoch) else {
            outcome.ignored = resp.keys.len();
            return outcome;
        };
        let p = resp.position;
        for k in &resp.keys {
            let Some(pending) = domain.pending.get(k) else {
                outcome.ignored += 1;
                continue;
            };
            // Commits before `since` reached the hole and were dropped: a fill must reflect
            // them, and its unsure range must not reach back to them (nothing was kept to
            // tell whether they touched the partition).
            if p < pending.since || resp.unsure.is_some_and(|u| u.from < pending.since) {
                domain.pending.remove(k);
                outcome.stale += 1;
                continue;
            }
            let Some(pending) = domain.pending.remove(k) else { continue };
            // The partition's own commits in the unsure range are in its buffer: the fill may
            // show any of them or not, so it cannot be told which to apply. The range checked
            // starts at `since`, not at the later `from`: every commit since the request, for
            // a margin (once, under load, a snapshot lacked a commit logged before `from`).
            if let Some(u) = resp.unsure
                && pending.buffer.iter().any(|(q, _)| *q <= u.to)
            {
                raced(&self.shared, domain, k);
                outcome.unsure += 1;
                continue;
            }
            let Some(mut ks) = build_state(domain, k, &resp) else {
                outcome.stale += 1;
                continue;
            };
            // So are the dimension rows it joins with (the keys its filled state covers).
            if let Some(u) = resp.unsure
                && domain.dim_log.touches(&domain.dims, &ks, pending.since, u.to)
            {
                raced(&self.shared, domain, k);
                outcome.unsure += 1;
                continue;
            }
            for (_, mut deltas) in domain.dim_log.merged_after(p, pending.buffer) {
                ks.process(&domain.graph, k, &mut deltas);
            }
            if ks.needs_refill {
                // Buffered deletions emptied a top-k prefix: ask again later.
                outcome.stale += 1;
                continue;
            }
            ks.filled_at = p;
            domain.dim_index.add(&domain.dims, k, &ks);
            let generation = self.next_generation;
            self.next_generation += 1;
            domain.parts.insert(PartKey::from(&**k), Part { ks, generation });
            for v in domain.views.iter().flatten() {
                if let Some(view) = self.views.get(v.0 as usize).and_then(Option::as_ref) {
                    view.counters.keys.fetch_add(1, AtOrd::Relaxed);
                    view.counters.fills.fetch_add(1, AtOrd::Relaxed);
                }
            }
            publish(&self.shared, &self.views, domain, k, self.applied);
            outcome.filled += 1;
        }
        self.drain_evictions();
        outcome
    }

    /// Installs the fills that waited for the stream to pass their unsure range and it has
    /// (see [`Dataflow::complete_fill`]). The caller runs it after applying batches.
    pub fn settle_fills(&mut self) -> FillOutcome {
        let applied = self.applied;
        let passed = |r: &FillResponse| r.unsure.is_none_or(|u| u.to <= applied);
        let mut outcome = FillOutcome::default();
        if !self.waiting.iter().any(passed) {
            return outcome;
        }
        let (ready, still): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting).into_iter().partition(passed);
        self.waiting = still;
        for resp in ready {
            outcome.add(self.complete_fill(resp));
        }
        outcome
    }

    /// Convenience for synchronous callers and tests: turns pending misses into requests and
    /// answers them from `source` right away. Returns the partitions filled.
    pub fn run_fills(&mut self, source: &mut dyn FillSource) -> Result<usize, FillError> {
        let mut filled = 0;
        for req in self.fill_requests() {
            match source.fill(&req) {
                Ok(resp) => filled += self.complete_fill(resp).filled,
                Err(e) => {
                    self.abandon_fill(&req);
                    return Err(e);
                }
            }
        }
        Ok(filled)
    }
}

/// Reads of `k` in each of the domain's views are relayed for a moment: commits to it raced
/// its fill (`ReaderCache::note_raced`).
fn raced(shared: &Shared, domain: &Domain, k: &Key) {
    for v in domain.views.iter().flatten() {
        shared.cache.note_raced(EntryKey::new(v.0, k.clone()));
    }
}
