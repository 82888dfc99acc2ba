//! The hasher of the writer's hash maps (operator state, partitions, routing): foldhash seeded
//! once per process from the operating system's randomness.
//!
//! Owns: [`Map`], [`Set`] and their [`State`]. Why: every applied row hashes its join, group and
//! reader keys several times, and std's SipHash-1-3 was a tenth of the apply path
//! (docs/decisions.md, "keep-up figures"); foldhash hashes the short keys of rows (a few
//! integers, a folded title) several times faster.
//!
//! HashDoS: the keys are column values of the upstream's rows, which whoever can write to the
//! database controls. A fixed or weakly seeded hash would let them pick values that all land
//! in one bucket of a partition's state and make every write to it linear. foldhash's mixing
//! (a folded 64x64->128-bit multiply with seed-dependent operands) does not keep low-bit
//! patterns of the input, so colliding keys cannot be chosen without the seed; the seed here
//! comes from std's `RandomState` (the OS's random source) rather than foldhash's own default
//! (addresses and the clock), and it never leaves the process (no hash value is exposed, and
//! readers publish rows sorted and fill SQL lists keys in sorted order; what iteration order
//! can still reach a client is which spelling a case-insensitive group shows and the order in
//! which a floating-point SUM adds, as with any hash map, and neither reveals the seed).
//! What foldhash does not promise is resistance to an attacker who recovers the seed by
//! timing a long-running process; reaching that needs timing of writer steps from outside,
//! across a network, and would cost slower applying (the lag that `max_lag` already bounds),
//! not wrong answers.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use foldhash::SharedSeed;
use foldhash::fast::{FoldHasher, SeedableRandomState};

/// A hash map of the writer's state, with [`State`] hashing.
pub type Map<K, V> = HashMap<K, V, State>;
/// A hash set of the writer's state, with [`State`] hashing.
pub type Set<K> = HashSet<K, State>;

/// foldhash with the process's seed; each map gets its own per-map seed as well.
#[derive(Clone, Debug)]
pub struct State(SeedableRandomState);

struct Seeds {
    shared: SharedSeed,
    per_map: u64,
}

static SEEDS: OnceLock<Seeds> = OnceLock::new();
static MAPS: AtomicU64 = AtomicU64::new(0);

fn seeds() -> &'static Seeds {
    SEEDS.get_or_init(|| {
        // std's RandomState keys come from the OS's random source.
        let os = std::collections::hash_map::RandomState::new();
        let mut a = os.build_hasher();
        a.write_u64(1);
        let mut b = os.build_hasher();
        b.write_u64(2);
        Seeds { shared: SharedSeed::from_u64(a.finish()), per_map: b.finish() }
    })
}

impl Default for State {
    fn default() -> State {
        let s = seeds();
        let n = MAPS.fetch_add(1, Ordering::Relaxed);
        State(SeedableRandomState::with_seed(s.per_map ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15), &s.shared))
    }
}

impl BuildHasher for State {
    type Hasher = FoldHasher<'static>;
    fn build_hasher(&self) -> FoldHasher<'static> {
        self.0.build_hasher()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn maps_hash_equal_keys_alike_and_differ_between_maps() {
        let (a, b) = (State::default(), State::default());
        assert_eq!(a.hash_one(42u64), a.hash_one(42u64));
        // Per-map seeds: two maps disagree (with overwhelming probability) on some key.
        assert!((0u64..8).any(|k| a.hash_one(k) != b.hash_one(k)));
        let mut m: Map<u64, u64> = Map::default();
        m.insert(1, 2);
        assert_eq!(m.get(&1), Some(&2));
    }
}
