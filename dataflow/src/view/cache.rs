//! The reader cache: every view's published entries in one sharded map, bounded by the global
//! byte budget with CLOCK (second-chance) eviction.
//!
//! Owns: [`ReaderCache`], where readers find entries and the writer puts them, its weight
//! total and the notices of what the budget evicted. Does not own: what an entry holds or
//! weighs (the parent module's `publish`), nor dropping a partition's state (the writer drains
//! the notices).
//!
//! Invariants:
//! - **Readers never wait for the writer's work.** A lookup takes one shard's read lock for a
//!   hash probe and clones the entry (a count of its rows). The writer takes a shard's write
//!   lock only for one probe-sized step: putting or removing one entry, or swapping in a
//!   grown table that it built from a copy under the read lock (a rehash under the write lock
//!   would stall the shard's readers for as long as copying it takes). Old entries are dropped
//!   after the lock is released. It builds entries, processes batches and scans for eviction
//!   outside any write lock.
//! - **The total weight is the weight of the entries in the map**, counted by the writer
//!   (the only one that inserts or removes).
//! - **Eviction is CLOCK over the shards.** A read sets its entry's `referenced` bit (a load
//!   first, so a hot entry is not written again). Over budget, the writer's hand sweeps the
//!   next shard whole: a referenced entry loses its bit, an unreferenced one is evicted, and
//!   the hand moves on until the total is within the budget. So an entry is evicted only if no
//!   read touched it since the hand last passed it, and a sweep may free up to one shard's worth
//!   of unread entries more than it needs (1/64 of the cache), which the next fills take back.
//!   If two turns find nothing unread (readers touch every entry between passes), a third
//!   evicts regardless of the bits until the budget holds, so reads cannot keep the cache over
//!   its budget.
//!   A new entry starts referenced (a fill answers a read that asked for it), and the sweep
//!   right after its fill spares it whatever its bit: when every entry was read, a turn clears
//!   them all and the next evicts in shard order, which would otherwise take a fill before the
//!   read it answers. A republished entry keeps its bit, so the writer's updates do not count as
//!   reads.
//! - **An entry heavier than the whole budget is not kept**: it is evicted as it is inserted,
//!   so it cannot empty the cache on its way out, and its key is remembered for a minute, in
//!   which reads of it are relayed rather than filled again.
//!
//! Why not `moka` (used until session 27): its per-entry bookkeeping (the entry record, the key's
//! `Arc`, the access-order node, the bucket) was 352 bytes, more than the rest of a one-row
//! partition; this map keeps a key and a 40-byte slot per entry (docs/decisions.md, "memory per
//! cached row").

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use super::reader::{Entry, EntryKey};
use crate::hash::{Map, State};
use crate::value::Rows;

/// Shards of the map (a power of two): a reader and the writer meet on one shard's lock only if
/// they touch the same 1/64 of the entries.
const SHARDS: usize = 64;
const _: () = assert!(SHARDS.is_power_of_two());

/// What an entry costs the cache besides its rows and its key's heap: its key and slot in a
/// shard's table and the control byte, at the table's mean load (a hashbrown table is between
/// 7/16 and 7/8 full), a constant so that an entry's weight does not depend on its neighbours.
pub(super) const ENTRY_BYTES: usize = (std::mem::size_of::<(EntryKey, Slot)>() + 1) * 3 / 2;

/// One entry as the map holds it.
pub(super) struct Slot {
    rows: Rows,
    generation: u64,
    weight: u32,
    /// Set by reads, cleared by the eviction hand.
    referenced: AtomicBool,
    /// [`Entry::ahead`].
    ahead: bool,
}

/// An entry the budget evicted, as the writer learns of it: which partition of which view,
/// its generation (a notice about an older incarnation of the partition leaves a newer fill
/// alone) and its weight (the view's statistics count the entries in the map and those noticed
/// but not drained yet).
#[derive(Debug)]
pub(super) struct Evicted {
    pub key: EntryKey,
    pub generation: u64,
    pub weight: u32,
}

/// A shard on a cache line of its own, so that readers of two shards do not share one.
#[repr(align(64))]
struct Shard(RwLock<Map<EntryKey, Slot>>);

pub(super) struct ReaderCache {
    shards: Box<[Shard]>,
    /// Picks the shard; each shard's map hashes with its own seed.
    hasher: State,
    budget: u64,
    total: AtomicU64,
    /// The shard the eviction hand sweeps next.
    hand: AtomicUsize,
    /// Entries evicted for the budget, until the writer drains them.
    evicted: Mutex<Vec<Evicted>>,
    /// Keys whose entry weighed more than the whole budget, when it was last refused: a read
    /// of one is relayed for a minute (its partition may shrink meanwhile) instead of asking
    /// for a fill that cannot be kept (each fill woke the read, which found a miss and asked
    /// again, until its timeout: 81 fills of a 210 KB partition in one read).
    heavy: Lately,
    /// Keys whose fill was not installed because commits to them raced it (the server's
    /// snapshot may disagree with its position on them: `FillResponse::unsure`): such a key
    /// is written as often as it is filled, and a read of it waited for fill after fill until
    /// its timeout. Relayed for a moment instead, then filled again.
    raced: Lately,
}

/// Keys a read is relayed for, for a while after the writer noted them; at most
/// [`Lately::MOST`] (past it they are all forgotten, and each is filled once more).
struct Lately {
    keys: Mutex<Map<EntryKey, Instant>>,
    lasts: Duration,
}

impl Lately {
    const MOST: usize = 1024;

    fn new(lasts: Duration) -> Lately {
        Lately { keys: Mutex::new(Map::default()), lasts }
    }

    fn holds(&self, key: &EntryKey) -> bool {
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        keys.get(key).is_some_and(|at| at.elapsed() < self.lasts)
    }

    fn note(&self, key: EntryKey) {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if keys.len() >= Lately::MOST {
            keys.clear();
        }
        keys.insert(key, Instant::now());
    }
}

/// How long a read of a key whose fill raced commits to it is relayed: a few fills' time.
const RACED_FOR: Duration = Duration::from_millis(50);

impl ReaderCache {
    pub(super) fn new(budget: u64) -> ReaderCache {
        ReaderCache {
            shards: (0..SHARDS).map(|_| Shard(RwLock::new(Map::default()))).collect(),
            hasher: State::default(),
            budget,
            total: AtomicU64::new(0),
            hand: AtomicUsize::new(0),
            evicted: Mutex::new(Vec::new()),
            heavy: Lately::new(Duration::from_secs(60)),
            raced: Lately::new(RACED_FOR),
        }
    }

    /// True if `key`'s entry was refused as heavier than the whole budget lately.
    pub(super) fn too_heavy(&self, key: &EntryKey) -> bool {
        self.heavy.holds(key)
    }

    /// True if `key`'s fill raced commits to it lately ([`ReaderCache::note_raced`]).
    pub(super) fn raced(&self, key: &EntryKey) -> bool {
        self.raced.holds(key)
    }

    /// A fill of `key` was not installed: commits to it raced the fill. Writer only.
    pub(super) fn note_raced(&self, key: EntryKey) {
        self.raced.note(key);
    }

    fn shard(&self, key: &EntryKey) -> &RwLock<Map<EntryKey, Slot>> {
        // The top bits (the shard's own map buckets by the low bits of another seed's hash).
        const SHIFT: u32 = u64::BITS - SHARDS.trailing_zeros();
        let i = (self.hasher.hash_one(key) >> SHIFT) as usize;
        &self.shards[i].0
    }

    /// The entry under `key`, marked as read.
    pub(super) fn get(&self, key: &EntryKey) -> Option<Entry> {
        let map = read(self.shard(key));
        let slot = map.get(key)?;
        if !slot.referenced.load(Ordering::Relaxed) {
            slot.referenced.store(true, Ordering::Relaxed);
        }
        Some(Entry { rows: slot.rows.clone(), weight: slot.weight, generation: slot.generation, ahead: slot.ahead })
    }

    /// True if `key` has an entry (not marked as read).
    pub(super) fn contains_key(&self, key: &EntryKey) -> bool {
        read(self.shard(key)).contains_key(key)
    }

    /// Puts `entry` under `key`, replacing what was there; returns the weight of what it
    /// replaced (0 if nothing). An entry heavier than the budget is noticed as evicted at once.
    /// Writer only.
    pub(super) fn insert(&self, key: EntryKey, entry: Entry) -> u32 {
        let weight = u64::from(entry.weight);
        if weight > self.budget {
            let old = self.remove(&key);
            self.heavy.note(key.clone());
            self.note_evicted(vec![Evicted { key, generation: entry.generation, weight: entry.weight }]);
            return old;
        }
        let shard = self.shard(&key);
        let referenced = {
            let map = read(shard);
            match map.get(&key) {
                Some(old) => old.referenced.load(Ordering::Relaxed),
                None => {
                    let full = map.len() == map.capacity();
                    drop(map);
                    if full {
                        grow(shard);
                    }
                    true
                }
            }
        };
        let slot = Slot {
            rows: entry.rows,
            generation: entry.generation,
            weight: entry.weight,
            referenced: AtomicBool::new(referenced),
            ahead: entry.ahead,
        };
        // The guard goes at the end of the statement; the old slot is dropped after it.
        let old = write(shard).insert(key, slot).map_or(0, |old| old.weight);
        self.total.fetch_add(weight, Ordering::Relaxed);
        self.total.fetch_sub(u64::from(old), Ordering::Relaxed);
        old
    }

    /// Removes `key`'s entry, if any; returns its weight (0 if none). Writer only.
    pub(super) fn remove(&self, key: &EntryKey) -> u32 {
        let old = write(self.shard(key)).remove(key).map_or(0, |old| old.weight);
        self.total.fetch_sub(u64::from(old), Ordering::Relaxed);
        old
    }

    /// Sweeps shards until the entries weigh at most the budget, then hands over every entry
    /// evicted for the budget since the last call. Entries of generation
    /// `fresh_from` or later (filled since the last sweep) are spared: their reads have not come
    /// yet. Writer only.
    pub(super) fn evict_to_budget(&self, fresh_from: u64) -> Vec<Evicted> {
        // Two turns clear every bit not set again meanwhile, and evict what was unread. If
        // readers set them again as fast (every entry hot), a third turn evicts whatever is not
        // fresh until the budget holds: reads cannot keep the cache over its budget.
        let mut turns = 0;
        while self.total.load(Ordering::Relaxed) > self.budget && turns < 3 * SHARDS {
            let i = self.hand.load(Ordering::Relaxed);
            self.hand.store((i + 1) % SHARDS, Ordering::Relaxed);
            self.sweep(&self.shards[i].0, fresh_from, turns >= 2 * SHARDS);
            turns += 1;
        }
        std::mem::take(&mut *self.evicted.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// One pass of the hand over a shard: bits cleared under the read lock (readers go on
    /// reading), then each unread entry removed under a write lock of its own. Fresh entries
    /// (`fresh_from`) keep their bits. `force`: every entry that is not fresh counts as
    /// unread, and removing stops once the budget holds.
    fn sweep(&self, shard: &RwLock<Map<EntryKey, Slot>>, fresh_from: u64, force: bool) {
        let unread: Vec<EntryKey> = read(shard)
            .iter()
            .filter(|(_, slot)| slot.generation < fresh_from && (!slot.referenced.swap(false, Ordering::Relaxed) || force))
            .map(|(k, _)| k.clone())
            .collect();
        let mut notes = Vec::with_capacity(unread.len());
        for key in unread {
            if force && self.total.load(Ordering::Relaxed) <= self.budget {
                break;
            }
            let removed = {
                let mut map = write(shard);
                // A read between the two locks saves the entry (unless forced).
                if map.get(&key).is_some_and(|slot| force || !slot.referenced.load(Ordering::Relaxed)) { map.remove(&key) } else { None }
            };
            if let Some(slot) = removed {
                self.total.fetch_sub(u64::from(slot.weight), Ordering::Relaxed);
                notes.push(Evicted { key, generation: slot.generation, weight: slot.weight });
            }
        }
        self.note_evicted(notes);
    }

    fn note_evicted(&self, notes: Vec<Evicted>) {
        self.evicted.lock().unwrap_or_else(PoisonError::into_inner).extend(notes);
    }

    /// The entries' total weight.
    #[cfg(test)]
    pub(super) fn weight(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

fn read(shard: &RwLock<Map<EntryKey, Slot>>) -> RwLockReadGuard<'_, Map<EntryKey, Slot>> {
    shard.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(shard: &RwLock<Map<EntryKey, Slot>>) -> RwLockWriteGuard<'_, Map<EntryKey, Slot>> {
    shard.write().unwrap_or_else(PoisonError::into_inner)
}

/// Replaces a full shard's table with one twice as large, built from a copy under the read
/// lock: the write lock is held only to swap the tables, never for a rehash (which, for a
/// shard of a large cache, would stall its readers for as long as copying it takes). Only the
/// writer changes a shard, so the copy is its current state; a read bit set while copying is
/// lost, which costs that entry one turn of the hand.
fn grow(shard: &RwLock<Map<EntryKey, Slot>>) {
    let grown = {
        let map = read(shard);
        let mut grown = Map::with_capacity_and_hasher((map.capacity() * 2).max(4), State::default());
        for (k, slot) in map.iter() {
            let referenced = AtomicBool::new(slot.referenced.load(Ordering::Relaxed));
            grown.insert(
                k.clone(),
                Slot { rows: slot.rows.clone(), generation: slot.generation, weight: slot.weight, referenced, ahead: slot.ahead },
            );
        }
        grown
    };
    let old = std::mem::replace(&mut *write(shard), grown);
    drop(old);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    fn key(n: i64) -> EntryKey {
        EntryKey::One(0, Value::Int(n))
    }

    fn entry(weight: u32, generation: u64) -> Entry {
        Entry { rows: Rows::Empty, weight, generation, ahead: false }
    }

    /// Evicted keys, sorted.
    fn evicted(c: &ReaderCache) -> Vec<i64> {
        let mut keys: Vec<i64> = c
            .evict_to_budget(u64::MAX)
            .into_iter()
            .map(|e| match e.key {
                EntryKey::One(_, Value::Int(n)) => n,
                other => panic!("{other:?}"),
            })
            .collect();
        keys.sort();
        keys
    }

    #[test]
    fn the_total_is_what_the_map_holds() {
        let c = ReaderCache::new(1_000);
        assert_eq!(c.insert(key(1), entry(100, 1)), 0);
        assert_eq!(c.insert(key(2), entry(200, 2)), 0);
        assert_eq!(c.insert(key(1), entry(50, 1)), 100, "what the entry replaced weighed");
        assert_eq!(c.weight(), 250);
        assert_eq!(c.remove(&key(2)), 200);
        assert_eq!(c.remove(&key(3)), 0);
        assert_eq!(c.weight(), 50);
        assert!(evicted(&c).is_empty());
        assert!(c.contains_key(&key(1)) && !c.contains_key(&key(2)));
    }

    /// One turn of the hand over every shard (what an eviction does when every entry is read).
    fn turn(c: &ReaderCache) {
        for shard in c.shards.iter() {
            c.sweep(&shard.0, u64::MAX, false);
        }
    }

    #[test]
    fn the_budget_evicts_what_was_not_read_since_the_hand_passed() {
        let c = ReaderCache::new(1_000);
        for n in 0..10 {
            c.insert(key(n), entry(100, n as u64));
        }
        assert!(evicted(&c).is_empty(), "at the budget, nothing goes");
        // New entries start read: a turn clears their bits and evicts none.
        turn(&c);
        assert!(evicted(&c).is_empty() && c.weight() == 1_000);
        for n in [2, 5, 7] {
            assert!(c.get(&key(n)).is_some());
        }
        c.insert(key(10), entry(100, 10));
        let gone = evicted(&c);
        assert!(!gone.is_empty() && c.weight() <= 1_000, "{gone:?}");
        assert!(gone.iter().all(|n| ![2, 5, 7, 10].contains(n)), "{gone:?}: a read or new entry went before an unread one");
        // Unread since the hand passed: the next turn takes them.
        turn(&c);
        turn(&c);
        assert_eq!(c.weight(), 0);
    }

    /// Every entry read (here: all new), a turn clears them all and the next evicts in shard
    /// order; the fill that went over the budget is spared all the same, until its read.
    #[test]
    fn the_sweep_after_a_fill_spares_it() {
        let c = ReaderCache::new(100);
        for n in 0..20 {
            c.insert(key(n), entry(100, n as u64));
        }
        c.insert(key(20), entry(100, 20));
        let gone: Vec<u64> = c.evict_to_budget(20).into_iter().map(|e| e.generation).collect();
        assert_eq!(gone.len(), 20, "{gone:?}");
        assert!(c.contains_key(&key(20)) && c.weight() == 100);
        // From the next sweep on it is an entry like any other.
        c.insert(key(21), entry(100, 21));
        let gone: Vec<u64> = c.evict_to_budget(21).into_iter().map(|e| e.generation).collect();
        assert_eq!(gone, vec![20]);
    }

    #[test]
    fn an_entry_heavier_than_the_budget_is_not_kept() {
        let c = ReaderCache::new(1_000);
        c.insert(key(1), entry(100, 1));
        c.insert(key(2), entry(1_001, 7));
        assert!(!c.contains_key(&key(2)));
        assert_eq!(c.weight(), 100);
        let gone = c.evict_to_budget(u64::MAX);
        assert_eq!(gone.len(), 1);
        assert_eq!((gone[0].generation, gone[0].weight), (7, 1_001));
        assert!(c.contains_key(&key(1)));
    }

    #[test]
    fn a_republished_entry_keeps_its_read_bit() {
        let c = ReaderCache::new(250);
        c.insert(key(1), entry(100, 1));
        c.insert(key(2), entry(100, 2));
        turn(&c);
        assert_eq!(c.weight(), 200, "new entries count as read once");
        assert!(c.get(&key(2)).is_some());
        // The writer republishes key 1 (unread) and key 2 (read); going over budget takes 1.
        c.insert(key(1), entry(100, 1));
        c.insert(key(2), entry(100, 2));
        c.insert(key(3), entry(100, 3));
        assert_eq!(evicted(&c), vec![1]);
        assert_eq!(c.weight(), 200);
    }

    /// Readers on other threads while the writer inserts, republishes and evicts: every entry a
    /// read finds is whole (its rows and its generation come from one insert, each insert's
    /// different) and under the key it was put under, and the total stays the weight of what
    /// the map holds. The writer goes on until the readers have found entries a thousand times,
    /// so a slow start of their threads cannot leave the test checking nothing.
    #[test]
    fn reads_beside_the_writer_see_whole_entries() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;

        let c = Arc::new(ReaderCache::new(3_000));
        let done = Arc::new(AtomicBool::new(false));
        let found = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..2)
            .map(|t| {
                let (c, done, found) = (c.clone(), done.clone(), found.clone());
                std::thread::spawn(move || {
                    let mut n = t;
                    while !done.load(Ordering::Relaxed) {
                        n = (n + 7) % 100;
                        if let Some(e) = c.get(&key(n)) {
                            let generation = i64::try_from(e.generation).expect("a small generation");
                            assert_eq!(e.rows[0], [Value::Int(n), Value::Int(generation)]);
                            found.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        let mut round: i64 = 0;
        while round < 2_000 || (found.load(Ordering::Relaxed) < 1_000 && round < 10_000_000) {
            let n = round % 100;
            let rows = Rows::One(vec![Value::Int(n), Value::Int(round)].into());
            c.insert(key(n), Entry { rows, weight: 100 + (round % 3) as u32, generation: round as u64, ahead: false });
            if round % 10 == 0 {
                c.remove(&key((n + 50) % 100));
            }
            for Evicted { key: k, generation, .. } in c.evict_to_budget(u64::MAX) {
                assert!(matches!(k, EntryKey::One(_, Value::Int(n)) if n as u64 == generation % 100));
            }
            assert!(c.weight() <= 3_000);
            round += 1;
        }
        done.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().expect("a reader panicked");
        }
        let held: u64 = c.shards.iter().map(|s| s.0.read().unwrap().values().map(|v| u64::from(v.weight)).sum::<u64>()).sum();
        assert_eq!(held, c.weight());
        assert!(found.load(Ordering::Relaxed) >= 1_000, "the readers found {} entries", found.load(Ordering::Relaxed));
    }
}
