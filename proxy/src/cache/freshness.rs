//! The freshness gate: may cached reads be served now?
//!
//! Owns: what the writer has applied (published once per step), whether the change stream is
//! up, whether the writer is alive, the lag handle the stream and the position poll report
//! into, and the hit path's answer ([`FreshnessGate::fresh`]), re-evaluated every
//! [`FRESHNESS_CHECK`]. Does not own: measuring the lag (cdc's [`LagHandle`]), deciding to
//! relay (the routing layer reads [`FreshnessGate::fresh`]).
//!
//! Who writes what: the writer publishes its applied position and the stream's ups and downs
//! ([`FreshnessGate::applied_to`], [`FreshnessGate::stream_down`],
//! [`FreshnessGate::stream_resumed`]); the engine's supervisor marks a dead writer; the
//! engine's check task re-evaluates ([`FreshnessGate::recheck`]); [`FreshnessGate::close`]
//! ends serving for good at shutdown. Everyone else only reads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use freshet_cdc::LagHandle;
use freshet_dataflow::Position;

/// How often the lag gate is re-evaluated for the hit path.
pub const FRESHNESS_CHECK: Duration = Duration::from_millis(50);

/// What [`Freshness`] adds to `max_lag` for the age of a cached answer: one poll of the
/// server's position plus one re-evaluation of the gate.
pub const FRESHNESS_SLACK: Duration = Duration::from_millis(150);

// The slack covers one poll of the server's position and one re-evaluation of the gate.
const _: () = assert!(FRESHNESS_SLACK.as_millis() >= freshet_cdc::lag::POLL.as_millis() + FRESHNESS_CHECK.as_millis());

/// How fresh the caches are ([`FreshnessGate::freshness`]).
///
/// The bound it gives: while `caught_up`, every cached answer reflects the server as it was at
/// most `max_lag` + [`FRESHNESS_SLACK`] ago (the lag is measured from when the server's
/// position was first seen, at most one poll after it was written; the hit path's gate is
/// re-evaluated every [`FRESHNESS_CHECK`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Freshness {
    /// What the views have applied (binlog file seq << 32 | offset).
    pub applied: Position,
    /// The server's binlog position as last observed.
    pub server: Option<freshet_cdc::BinlogPos>,
    /// Age of the oldest change the server has and the views do not (events queued inside
    /// freshet included); None when unknown: the stream is down or re-establishing, the
    /// server's position could not be read for [`freshet_cdc::lag::POLL_STALE`], or the views
    /// are behind a backlog written while no freshet ran (a restart resumed at the replica's
    /// position), whose age no one saw.
    pub lag: Option<Duration>,
    /// `lag` is known and at most `[consistency] max_lag`: cached reads are served.
    pub caught_up: bool,
    /// The binlog stream is connected, verified to continue what was applied, and its writer
    /// alive.
    pub stream_up: bool,
    /// The server's position was read within [`freshet_cdc::lag::POLL_STALE`].
    pub server_polled: bool,
}

/// Whether cached reads may be served; one per engine, shared with its writer.
pub struct FreshnessGate {
    max_lag: Duration,
    /// The stream's lag, one handle for the engine's life (each new stream reports into it).
    lag: LagHandle,
    /// The dataflow's applied position (binlog file seq << 32 | offset).
    applied: AtomicU64,
    /// False while the change stream is being re-established.
    stream_up: AtomicBool,
    /// [`FreshnessGate::freshness`]'s `caught_up` as of the last check (every
    /// [`FRESHNESS_CHECK`]): the hit path reads this instead of the lag's mutex.
    fresh: AtomicBool,
    /// Set if the writer task died, or the engine stopped: nothing will be fresh again.
    closed: AtomicBool,
}

impl FreshnessGate {
    /// A gate for a stream starting at `applied`; not fresh until the first check.
    pub fn new(max_lag: Duration, applied: Position) -> FreshnessGate {
        FreshnessGate {
            max_lag,
            lag: LagHandle::default(),
            applied: AtomicU64::new(applied.0),
            stream_up: AtomicBool::new(true),
            fresh: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    /// How fresh the caches are, computed now from what the writer has applied against the
    /// server's position (see [`Freshness`]).
    pub fn freshness(&self) -> Freshness {
        let lag = self.lag.get();
        let applied = self.applied();
        let behind = self.lag.behind(applied);
        let stream_up = self.stream_up.load(Ordering::Relaxed) && !self.closed.load(Ordering::Relaxed) && lag.connected;
        let polled = behind.polled_ago.is_some_and(|a| a <= freshet_cdc::lag::POLL_STALE);
        let known = (stream_up && polled && !behind.unknown_age).then_some(behind.lag);
        Freshness {
            applied,
            server: lag.server,
            lag: known,
            caught_up: known.is_some_and(|l| l <= self.max_lag),
            stream_up,
            server_polled: polled,
        }
    }

    /// The hit path's view of [`Freshness::caught_up`], at most [`FRESHNESS_CHECK`] old.
    pub fn fresh(&self) -> bool {
        self.fresh.load(Ordering::Relaxed)
    }

    /// What the writer has applied, as of its last step.
    pub fn applied(&self) -> Position {
        Position(self.applied.load(Ordering::Relaxed))
    }

    /// The handle the stream and the server's position poll report into.
    pub fn lag_handle(&self) -> LagHandle {
        self.lag.clone()
    }

    /// The writer applied everything up to `at` (once per step).
    pub(super) fn applied_to(&self, at: Position) {
        self.applied.store(at.0, Ordering::Relaxed);
    }

    /// The change stream is down (being re-established): freshet cannot vouch for anything
    /// until [`FreshnessGate::stream_resumed`]. Public so that tests can stage an outage.
    pub fn stream_down(&self) {
        self.stream_up.store(false, Ordering::Relaxed);
    }

    /// The change stream is connected and verified again.
    pub fn stream_resumed(&self) {
        self.stream_up.store(true, Ordering::Relaxed);
    }

    /// Re-evaluates [`FreshnessGate::fresh`] (the engine's check task, every
    /// [`FRESHNESS_CHECK`]).
    pub(super) fn recheck(&self) {
        let caught_up = self.freshness().caught_up;
        self.fresh.store(caught_up && !self.closed.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Nothing will be fresh again (the writer died, or the engine stopped): every cached read
    /// is relayed from now on.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.stream_up.store(false, Ordering::Relaxed);
        self.fresh.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A closed gate stays closed: a check racing the close cannot reopen it.
    #[test]
    fn a_closed_gate_is_never_fresh_again() {
        let gate = FreshnessGate::new(Duration::from_secs(1), Position(0));
        gate.close();
        gate.stream_resumed();
        gate.recheck();
        assert!(!gate.fresh());
        assert!(!gate.freshness().stream_up);
    }
}
