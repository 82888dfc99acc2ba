//! Deterministic randomness for the generator, the workload and the load harness
//! (`freshet-load` uses these too): a xorshift64* generator and a Zipf sampler over `1..=n`.

/// xorshift64*: cheap, seeded, good enough for picking keys (not for anything secret).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; zero is mapped to a non-zero state).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `1..=n` (`n >= 1`; `n == 0` yields 1).
    pub fn uniform(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1) + 1
    }

    /// True with probability `pct` percent.
    pub fn percent(&mut self, pct: u32) -> bool {
        self.next_u64() % 100 < u64::from(pct)
    }
}

/// Zipf-distributed ids in `1..=n` with exponent `skew` (0 = uniform; 1 = classic Zipf, id 1
/// the most popular), by inverse transform over a precomputed CDF.
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution over `1..=n` (`n == 0` behaves as `n == 1`).
    pub fn new(n: u64, skew: f64) -> Zipf {
        let weights: Vec<f64> = (1..=n.max(1)).map(|k| 1.0 / (k as f64).powf(skew)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        Zipf {
            cdf: weights
                .iter()
                .map(|w| {
                    acc += w / total;
                    acc
                })
                .collect(),
        }
    }

    /// One id.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        // The last CDF entry is 1.0 up to rounding; clamp so that rounding never yields n + 1.
        (self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)) as u64 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_stays_in_range_and_favours_small_ids() {
        let z = Zipf::new(100, 1.0);
        let mut rng = Rng::new(7);
        let mut counts = [0u32; 101];
        for _ in 0..20_000 {
            let k = z.sample(&mut rng);
            assert!((1..=100).contains(&k));
            counts[k as usize] += 1;
        }
        assert!(counts[1] > 4 * counts[50], "{} vs {}", counts[1], counts[50]);
    }

    #[test]
    fn same_seed_same_sequence() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
    }
}
