//! Exponential backoff, the one used by every reconnect loop: the binlog stream's resume, the
//! cache writer's restart at the server's position, the server's position poll, the replica's
//! copy.
//!
//! Owns: the delay before attempt `n` of a run of failures: nothing before the first, then
//! `initial`, doubling, at most `max`. Does not own: when to give up (the caller counts).

use std::time::Duration;

/// A run of reconnect attempts.
#[derive(Clone, Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff { initial, max, failures: 0 }
    }

    /// Failures since the last [`Backoff::reset`].
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The delay before the next attempt, given the failures so far.
    pub fn delay(&self) -> Duration {
        match self.failures {
            0 => Duration::ZERO,
            n => self.initial.saturating_mul(1 << (n - 1).min(20)).min(self.max),
        }
    }

    /// Waits [`Backoff::delay`], then counts the attempt about to be made as a failure until
    /// [`Backoff::reset`] says otherwise.
    pub async fn wait(&mut self) {
        let d = self.delay();
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
        self.failures = self.failures.saturating_add(1);
    }

    /// Progress was made: the next failure starts a new run.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(350));
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(b.delay());
            b.failures += 1;
        }
        let ms: Vec<u128> = seen.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [0, 100, 200, 350, 350]);
        b.reset();
        assert_eq!(b.delay(), Duration::ZERO);
        b.failures = u32::MAX;
        assert_eq!(b.delay(), Duration::from_millis(350), "no overflow");
    }
}
