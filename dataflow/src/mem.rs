//! What memory accounting counts: the blocks the allocator hands out and the tables hash maps
//! allocate, so that `[memory] limit` follows what the process grows by, not the lengths the
//! code asked for (docs/decisions.md, "memory per cached row", has the measurements).

/// The bytes an allocation of `n` bytes takes from the allocator, which is what the process
/// grows by: glibc's malloc adds an 8-byte header, rounds up to 16 and hands out at least 32
/// bytes (musl and jemalloc round differently, by a few bytes per block). A 40-byte title is a
/// 48-byte block; a small value's header is a large share of it.
pub const fn heap_block(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let b = (n + 8 + 15) & !15;
    if b < 32 { 32 } else { b }
}

/// The block of a hash table (hashbrown, which std's maps and sets are) whose usable capacity
/// is `capacity`, for entries of `entry` bytes: a power of two of buckets (at least 4, at most
/// 7/8 usable from 8 on), each with its entry and one control byte, plus one group of control
/// bytes.
pub const fn table_bytes(capacity: usize, entry: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 4 {
        4
    } else if capacity < 8 {
        8
    } else {
        (capacity * 8 / 7).next_power_of_two()
    };
    heap_block(buckets * (entry + 1) + 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_tables() {
        assert_eq!(heap_block(0), 0);
        assert_eq!(heap_block(1), 32);
        assert_eq!(heap_block(24), 32);
        assert_eq!(heap_block(25), 48);
        assert_eq!(heap_block(40), 48);
        assert_eq!(heap_block(72), 80);
        // hashbrown: capacity 3 is 4 buckets, 7 is 8, 14 is 16, 28 is 32.
        assert_eq!(table_bytes(0, 24), 0);
        assert_eq!(table_bytes(3, 24), heap_block(4 * 25 + 16));
        assert_eq!(table_bytes(7, 24), heap_block(8 * 25 + 16));
        assert_eq!(table_bytes(14, 24), heap_block(16 * 25 + 16));
        assert_eq!(table_bytes(28, 24), heap_block(32 * 25 + 16));
    }
}
