//! Shutdown by cancellation: one [`Stop`] that every session and the engine are told about.
//!
//! After SIGTERM, [`crate::Server::run`] goes through these steps, within `[shutdown] grace`
//! of the signal:
//!
//! 1. **drain** (`[shutdown] drain`, default 0): /ready answers 503, everything else goes on:
//!    new connections are accepted and served, for an application stopped at the same time that
//!    still drains its own requests through freshet (the classic sidecar form).
//! 2. **stop**: the MySQL listener closes (new clients are refused), [`Stop::cancel`] tells
//!    every session: a session waiting for its client's next command closes at once (its
//!    client gets ERR 1053, like a server shutting down); a session in the middle of a command
//!    finishes relaying it and closes after.
//! 3. **exit**: once every session has ended (or the grace is over), the cache engine's tasks
//!    are stopped and `run` returns; the binary exits 0.
//!
//! No polling: sessions wait on [`Stop::cancelled`] beside their client's socket, and the
//! server waits for the last session by taking back every connection permit.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Set once, never reset: freshet is stopping.
#[derive(Default)]
pub struct Stop {
    stopped: AtomicBool,
    notify: Notify,
}

impl Stop {
    /// Tells everyone waiting in [`Stop::cancelled`], now and later.
    pub fn cancel(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_cancelled(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Completes once [`Stop::cancel`] has been called (at once if it already was).
    pub async fn cancelled(&self) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        // Registered before the flag is read: a cancel between the two cannot be missed.
        notified.as_mut().enable();
        if self.is_cancelled() {
            return;
        }
        notified.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn waiters_before_and_after_the_cancel_complete() {
        let stop = Arc::new(Stop::default());
        let waiting = tokio::spawn({
            let stop = stop.clone();
            async move { stop.cancelled().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        stop.cancel();
        waiting.await.unwrap();
        // A late waiter does not wait.
        stop.cancelled().await;
        assert!(stop.is_cancelled());
    }
}
