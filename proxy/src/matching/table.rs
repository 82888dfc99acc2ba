//! The verdict table: fingerprint -> what to do with it, with per-fingerprint statistics.
//!
//! Owns the bounded memory of verdicts taken by the full parse (done once per new
//! fingerprint, elsewhere) and the counters behind `SHOW PROXIED QUERIES`. Invariants:
//! - at most `capacity` entries (rounded up to a multiple of the shard count); inserting a new
//!   fingerprint into a full shard evicts that shard's least recently used entry;
//! - at most `budget` bytes of entries (normalized text, verdict, bookkeeping), counted
//!   across shards: past it an insert evicts least recently used entries, its own shard's
//!   first, then other shards' one lock at a time; an entry larger than the whole budget is
//!   returned but not kept (its shape is parsed again when it comes back, which its length
//!   bounds). Without this, 10,000 normalized texts of up to `[limits] max_query` each were
//!   kept outside any limit;
//! - a lookup returns an entry only if its normalized text equals the query's, so a 64-bit
//!   hash collision costs a miss, never a wrong answer; nor an entry whose verdict was
//!   [renewed](VerdictTable::renew): its shape's next verdict replaces it, and carries its
//!   statistics on;
//! - readers take one shard's read lock for a hash-map probe and bump atomics; writers (new
//!   fingerprints, rare after warm-up) take one shard's write lock. No lock is held across
//!   anything slower than a probe or a scan of one shard at eviction.
//!
//! A small sharded map rather than `moka`: the table needs exact LRU by count, a collision
//! check on lookup and atomics on every hit, all of which fit in ~100 lines without adding a
//! dependency to the proxy.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use freshet_dataflow::hash::Map;

use super::fingerprint::Fingerprint;

/// A cached query's id (index in the set of views).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheId(pub u32);

/// What a verdict costs to keep, beyond its own size: the table's byte budget counts it.
/// The verdict itself ([`crate::cache::route::Verdict`] for the proxy) is the routing
/// layer's: this table stores and bounds verdicts without interpreting them.
pub trait Weigh {
    /// Heap bytes the value owns.
    fn heap_bytes(&self) -> usize;
}

/// One fingerprint's verdict and statistics.
#[derive(Debug)]
pub struct Entry<V> {
    pub normalized: Box<str>,
    pub verdict: V,
    count: AtomicU64,
    total_nanos: AtomicU64,
    last_used: AtomicU64,
    /// Why the last relayed execution of a cached shape was relayed: an index the router
    /// defines (`cache::route::RelayReason::index`); `u8::MAX` for none yet.
    last_relay: AtomicU8,
    /// The verdict may be out of date ([`VerdictTable::renew`]): lookups miss it, and the
    /// verdict taken instead takes over its statistics.
    stale: AtomicBool,
}

impl<V> Entry<V> {
    /// Notes why an execution of this shape was relayed (see `last_relay`).
    pub fn note_relay(&self, reason: u8) {
        self.last_relay.store(reason, Ordering::Relaxed);
    }

    pub fn last_relay(&self) -> Option<u8> {
        Some(self.last_relay.load(Ordering::Relaxed)).filter(|r| *r != u8::MAX)
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn total_time(&self) -> Duration {
        Duration::from_nanos(self.total_nanos.load(Ordering::Relaxed))
    }

    /// True once the verdict was [renewed](VerdictTable::renew): it is taken again at the
    /// shape's next read.
    pub fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
    }

    /// Adds `older`'s statistics (an entry of the same text this one replaces) to its own.
    fn take_over(&self, older: &Entry<V>) {
        self.count.fetch_add(older.count(), Ordering::Relaxed);
        self.total_nanos.fetch_add(older.total_nanos.load(Ordering::Relaxed), Ordering::Relaxed);
        if self.last_relay().is_none() {
            self.last_relay.store(older.last_relay.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }
}

impl<V: Weigh> Entry<V> {
    /// What the entry holds, in bytes: itself, its text, its verdict, and a map slot.
    fn bytes(&self) -> usize {
        std::mem::size_of::<Entry<V>>() + self.normalized.len() + self.verdict.heap_bytes() + MAP_SLOT
    }
}

const SHARDS: usize = 16;
/// A hash map slot's key, value and control bytes, roughly.
const MAP_SLOT: usize = 8 + 8 + 8;
/// The budget of [`VerdictTable::new`] (`[memory] query_shapes`' default).
pub const DEFAULT_BUDGET: usize = 16 << 20;

/// A shard's map, keyed by the fingerprint's hash. The fingerprint is an unkeyed FNV hash of the
/// text, which a client can steer, so the map hashes it again with the process's seeded
/// hasher (`freshet_dataflow::hash`, as the views' maps) rather than using it as it is; std's
/// SipHash did the same at several times the cost on every classified text.
type Shard<V> = RwLock<Map<u64, Arc<Entry<V>>>>;

/// The bounded, sharded verdict table.
pub struct VerdictTable<V> {
    shards: [Shard<V>; SHARDS],
    per_shard: usize,
    clock: AtomicU64,
    /// Bytes of the entries kept ([`Entry::bytes`]), and the most allowed.
    bytes: AtomicUsize,
    budget: usize,
}

impl<V: Weigh> VerdictTable<V> {
    pub fn new(capacity: usize) -> VerdictTable<V> {
        VerdictTable::with_budget(capacity, DEFAULT_BUDGET)
    }

    /// At most `capacity` entries and `budget` bytes.
    pub fn with_budget(capacity: usize, budget: usize) -> VerdictTable<V> {
        VerdictTable {
            shards: std::array::from_fn(|_| RwLock::new(Map::default())),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            clock: AtomicU64::new(0),
            bytes: AtomicUsize::new(0),
            budget,
        }
    }

    /// Bytes of the entries kept.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    fn shard(&self, hash: u64) -> &Shard<V> {
        // The top bits: the low ones feed the map's own buckets.
        &self.shards[self.shard_index(hash)]
    }

    /// The entry for this fingerprint, marked as just used; None if it has no verdict yet.
    pub fn get(&self, fingerprint: &Fingerprint) -> Option<Arc<Entry<V>>> {
        // A poisoned lock means a panic while holding it; the map itself is still consistent
        // (every write is a single insert or remove), so use it.
        let shard = self.shard(fingerprint.hash).read().unwrap_or_else(|e| e.into_inner());
        let entry = shard.get(&fingerprint.hash).filter(|e| *e.normalized == *fingerprint.normalized && !e.is_stale())?.clone();
        drop(shard);
        entry.last_used.store(self.clock.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        Some(entry)
    }

    /// Records the verdict for a fingerprint (replacing an older one, or a colliding one),
    /// evicting least recently used entries while its shard is full or the table is over its
    /// byte budget.
    pub fn insert(&self, fingerprint: &Fingerprint, verdict: V) -> Arc<Entry<V>> {
        let entry = Arc::new(Entry {
            normalized: fingerprint.normalized.as_str().into(),
            verdict,
            count: AtomicU64::new(0),
            total_nanos: AtomicU64::new(0),
            last_used: AtomicU64::new(self.clock.fetch_add(1, Ordering::Relaxed)),
            last_relay: AtomicU8::new(u8::MAX),
            stale: AtomicBool::new(false),
        });
        let size = entry.bytes();
        if size > self.budget {
            return entry;
        }
        let home = self.shard_index(fingerprint.hash);
        {
            let mut shard = self.shards[home].write().unwrap_or_else(|e| e.into_inner());
            if let Some(old) = shard.remove(&fingerprint.hash) {
                self.bytes.fetch_sub(old.bytes(), Ordering::Relaxed);
                if old.normalized == entry.normalized {
                    entry.take_over(&old);
                }
            }
            while shard.len() >= self.per_shard && self.evict_oldest(&mut shard) {}
            shard.insert(fingerprint.hash, entry.clone());
            self.bytes.fetch_add(size, Ordering::Relaxed);
            // Make room in this shard first: no other lock is taken while holding it.
            while self.bytes() > self.budget && shard.len() > 1 && self.evict_oldest_except(&mut shard, fingerprint.hash) {}
        }
        for other in (0..SHARDS).filter(|&i| i != home) {
            if self.bytes() <= self.budget {
                break;
            }
            let mut shard = self.shards[other].write().unwrap_or_else(|e| e.into_inner());
            while self.bytes() > self.budget && self.evict_oldest(&mut shard) {}
        }
        entry
    }

    fn shard_index(&self, hash: u64) -> usize {
        (hash >> 60) as usize % SHARDS
    }

    /// Removes the shard's least recently used entry; false if it is empty.
    fn evict_oldest(&self, shard: &mut Map<u64, Arc<Entry<V>>>) -> bool {
        self.evict_oldest_except(shard, None)
    }

    fn evict_oldest_except(&self, shard: &mut Map<u64, Arc<Entry<V>>>, keep: impl Into<Option<u64>>) -> bool {
        let keep = keep.into();
        let oldest =
            shard.iter().filter(|(k, _)| Some(**k) != keep).min_by_key(|(_, e)| e.last_used.load(Ordering::Relaxed)).map(|(&k, _)| k);
        match oldest.and_then(|k| shard.remove(&k)) {
            Some(e) => {
                self.bytes.fetch_sub(e.bytes(), Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Counts one execution of the entry's query and the time it took.
    pub fn record(entry: &Entry<V>, elapsed: Duration) {
        entry.count.fetch_add(1, Ordering::Relaxed);
        entry.total_nanos.fetch_add(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Keeps only the entries `keep` accepts (a cache was created or dropped: verdicts that
    /// may have changed are taken anew on next use; the others keep their statistics).
    pub fn retain(&self, keep: impl Fn(&Entry<V>) -> bool) {
        for shard in &self.shards {
            shard.write().unwrap_or_else(|e| e.into_inner()).retain(|_, e| {
                let kept = keep(e);
                if !kept {
                    self.bytes.fetch_sub(e.bytes(), Ordering::Relaxed);
                }
                kept
            });
        }
    }

    /// Marks the entries `stale` accepts as out of date (a cache was created: any verdict may
    /// list it now). Each is taken anew at its shape's next read, as if forgotten, but its
    /// statistics go on in the verdict that replaces it; one not read again stays until the
    /// least recently used are evicted.
    pub fn renew(&self, stale: impl Fn(&Entry<V>) -> bool) {
        for shard in &self.shards {
            for e in shard.read().unwrap_or_else(|e| e.into_inner()).values() {
                if stale(e) {
                    e.stale.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().unwrap_or_else(|e| e.into_inner()).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `n` most executed fingerprints, most first (for `SHOW PROXIED QUERIES`).
    pub fn top(&self, n: usize) -> Vec<Arc<Entry<V>>> {
        let mut all: Vec<Arc<Entry<V>>> =
            self.shards.iter().flat_map(|s| s.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect::<Vec<_>>()).collect();
        all.sort_by_key(|e| std::cmp::Reverse(e.count()));
        all.truncate(n);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verdict for the table's own tests: the table does not interpret it.
    type V = Box<str>;

    impl Weigh for Box<str> {
        fn heap_bytes(&self) -> usize {
            self.len()
        }
    }

    fn v(s: &str) -> V {
        s.into()
    }

    fn fp(hash: u64, text: &str) -> Fingerprint {
        Fingerprint { hash, normalized: text.to_string(), slots: Vec::new() }
    }

    #[test]
    fn get_after_insert_and_collision_is_a_miss() {
        let table = VerdictTable::<V>::new(100);
        table.insert(&fp(1, "SELECT a FROM t"), v("x"));
        assert_eq!(table.get(&fp(1, "SELECT a FROM t")).map(|e| e.verdict.clone()), Some(v("x")));
        assert!(table.get(&fp(1, "SELECT b FROM t")).is_none());
        assert!(table.get(&fp(2, "SELECT a FROM t")).is_none());
    }

    #[test]
    fn bounded_with_lru_eviction() {
        let table = VerdictTable::<V>::new(SHARDS * 2);
        // Same shard (top bits 0): capacity 2 there.
        table.insert(&fp(1, "a"), v("a"));
        table.insert(&fp(2, "b"), v("b"));
        assert!(table.get(&fp(1, "a")).is_some()); // a is now more recent than b
        table.insert(&fp(3, "c"), v("c"));
        assert!(table.get(&fp(2, "b")).is_none(), "b was least recently used");
        assert!(table.get(&fp(1, "a")).is_some());
        assert!(table.get(&fp(3, "c")).is_some());
        for h in 0..1000u64 {
            table.insert(&fp(h.rotate_right(4) ^ h, &h.to_string()), v("n"));
        }
        assert!(table.len() <= SHARDS * 2);
    }

    /// A renewed verdict is missed, and the verdict taken instead goes on counting where it
    /// left off; other entries are untouched.
    #[test]
    fn a_renewed_verdict_is_taken_anew_and_keeps_its_statistics() {
        let table = VerdictTable::<V>::new(100);
        let (a, b) = (fp(1, "SELECT a FROM t"), fp(2, "SELECT b FROM t"));
        for f in [&a, &b] {
            let e = table.insert(f, v("old"));
            VerdictTable::record(&e, Duration::from_micros(5));
            e.note_relay(3);
        }
        table.renew(|e| *e.normalized == *"SELECT a FROM t");
        assert!(table.get(&a).is_none());
        assert!(table.top(10).iter().any(|e| e.is_stale() && e.count() == 1), "still shown, counts and all");
        assert_eq!(table.get(&b).map(|e| (e.count(), e.is_stale())), Some((1, false)));
        let e = table.insert(&a, v("new"));
        assert_eq!((e.count(), e.total_time(), e.last_relay(), e.is_stale()), (1, Duration::from_micros(5), Some(3), false));
        assert_eq!(table.get(&a).map(|e| e.verdict.clone()), Some(v("new")));
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn bounded_in_bytes() {
        let budget = 1 << 20;
        let table = VerdictTable::<V>::with_budget(10_000, budget);
        // Forty shapes of 100 KB each, spread over the shards.
        for i in 0..40u64 {
            table.insert(&fp(i << 58 | i, &format!("{i}{}", "x".repeat(100_000))), v("long"));
            assert!(table.bytes() <= budget, "{} bytes after {i}", table.bytes());
        }
        assert!(table.len() >= 5, "it still keeps what fits: {}", table.len());
        // An entry bigger than the whole budget is not kept, and evicts nothing.
        let kept = table.len();
        let huge = fp(7, &"y".repeat(2 << 20));
        table.insert(&huge, v("huge"));
        assert!(table.get(&huge).is_none());
        assert_eq!(table.len(), kept);
        table.retain(|_| false);
        assert_eq!((table.len(), table.bytes()), (0, 0));
    }

    #[test]
    fn records_counts_and_time_and_ranks() {
        let table = VerdictTable::<V>::new(10);
        let a = table.insert(&fp(1, "a"), v("cached as 3"));
        let b = table.insert(&fp(2, "b"), v("no"));
        VerdictTable::<V>::record(&a, Duration::from_micros(5));
        VerdictTable::<V>::record(&b, Duration::from_micros(1));
        VerdictTable::<V>::record(&b, Duration::from_micros(1));
        assert_eq!((b.count(), b.total_time()), (2, Duration::from_micros(2)));
        let top = table.top(1);
        assert_eq!(&*top[0].normalized, "b");
    }
}
