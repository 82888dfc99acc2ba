//! Replication lag as the stream observes it, readable from other tasks.
//!
//! Owns: [`Lag`] (plain numbers the proxy renders as `freshet_cdc_*` metrics and uses for
//! readiness and `max_lag`) and [`LagHandle`]. The stream updates it; nothing here talks to
//! the server.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::position::BinlogPos;

/// Replication lag as last observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lag {
    /// Last delivered commit boundary.
    pub delivered: Option<BinlogPos>,
    /// The server's end of binlog as last reported (heartbeat or event).
    pub server: Option<BinlogPos>,
    /// Seconds between the last delivered transaction's commit and when it was delivered
    /// (zero once a heartbeat says we are at the server's end).
    pub behind: Duration,
    /// Bytes of binlog between `delivered` and `server` when both are in the same file.
    pub bytes_behind: u64,
    /// Transactions delivered since the stream started.
    pub transactions: u64,
    /// Reconnects since the stream started.
    pub reconnects: u64,
    /// Heartbeats received (the server sends them only when it has nothing else to send).
    pub heartbeats: u64,
    /// Lag in events: transactions and schema changes read from the binlog but not yet taken
    /// by the applier (the channel of [`crate::BinlogStream::spawn`]).
    pub queued: u64,
    /// The binlog connection is up and has been verified to continue what was delivered (its
    /// first ROTATE named the file asked for, the server is the same; see `continuity`).
    pub connected: bool,
    /// When the lag was last updated.
    pub updated: Option<Instant>,
}

/// A cheap handle to read a stream's lag from elsewhere (metrics, readiness).
#[derive(Clone, Debug, Default)]
pub struct LagHandle(Arc<Mutex<Lag>>);

impl LagHandle {
    /// The last observed lag.
    pub fn get(&self) -> Lag {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
    pub(crate) fn update(&self, f: impl FnOnce(&mut Lag)) {
        if let Ok(mut l) = self.0.lock() {
            f(&mut l);
            l.updated = Some(Instant::now());
        }
    }
}

