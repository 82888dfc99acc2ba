//! Hit latency per cache, for the p50/p99 columns of `SHOW CACHES`.
//!
//! A fixed log-scale histogram of atomics (four buckets per power of two, 64 ns to ~17 s):
//! recording is one `fetch_add`, a quantile is a scan of 128 counters, and the relative error
//! of a reported quantile is below 19% (one bucket's width), which is what p50/p99 of a
//! microsecond-scale path needs. The Prometheus histogram is the coarser shared one.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

const SUB: u32 = 4;
const MIN_SHIFT: u32 = 6; // 64 ns
const BUCKETS: usize = 128;

pub struct LatencySketch {
    buckets: [AtomicU64; BUCKETS],
}

impl Default for LatencySketch {
    fn default() -> Self {
        LatencySketch { buckets: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

fn bucket_of(nanos: u64) -> usize {
    let n = nanos.max(1 << MIN_SHIFT);
    let exp = 63 - n.leading_zeros();
    let frac = ((n >> (exp - 2)) & 0b11) as u32; // two bits below the leading one
    (((exp - MIN_SHIFT) * SUB + frac) as usize).min(BUCKETS - 1)
}

/// The upper bound of bucket `i`, in nanoseconds.
fn upper_of(i: usize) -> f64 {
    let exp = i as u32 / SUB + MIN_SHIFT;
    let frac = i as u32 % SUB;
    (1u64 << exp) as f64 * (1.0 + f64::from(frac + 1) / f64::from(SUB))
}

impl LatencySketch {
    pub fn record(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(nanos)].fetch_add(1, Relaxed);
    }

    /// The `q`-quantile (0..=1) as an upper bound, or None if nothing was recorded.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Duration::from_nanos(upper_of(i) as u64));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_a_bucket() {
        let s = LatencySketch::default();
        assert_eq!(s.quantile(0.5), None);
        for us in 1..=100u64 {
            s.record(Duration::from_micros(us));
        }
        let p50 = s.quantile(0.5).unwrap().as_nanos() as f64;
        let p99 = s.quantile(0.99).unwrap().as_nanos() as f64;
        assert!((50_000.0..=50_000.0 * 1.25).contains(&p50), "{p50}");
        assert!((99_000.0..=99_000.0 * 1.25).contains(&p99), "{p99}");
        // Extremes land in the first and last buckets without panicking.
        s.record(Duration::ZERO);
        s.record(Duration::from_secs(1 << 40));
        assert!(s.quantile(1.0).is_some());
    }

    #[test]
    fn buckets_are_monotonic() {
        let mut last = 0;
        for n in (64..1u64 << 34).step_by(997_331) {
            let b = bucket_of(n);
            assert!(b >= last);
            assert!(upper_of(b) >= n as f64);
            last = b;
        }
    }
}
