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
//! No polling: sessions wait on their [`Subscription`] beside their client's socket, and the
//! server waits for the last session by taking back every connection permit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Set once, never reset: freshet is stopping.
///
/// Each session waits on its own [`Notify`] (a [`Subscription`]), not on a shared one: a
/// session polls its wait once per command, and a shared waiter list would be one lock that
/// every session's every command takes.
#[derive(Default)]
pub struct Stop {
    stopped: AtomicBool,
    next: AtomicU64,
    subscribers: Mutex<HashMap<u64, Arc<Notify>>>,
    /// For waiters that are not sessions (a few, not per command).
    notify: Notify,
}

impl Stop {
    /// Tells every subscriber and everyone waiting in [`Stop::cancelled`], now and later.
    pub fn cancel(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        for notify in self.subscribers.lock().unwrap_or_else(|e| e.into_inner()).values() {
            // A permit: a subscriber not waiting right now finds it on its next wait.
            notify.notify_one();
        }
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

    /// A waiter of its own, for a session's life.
    pub fn subscribe(self: &Arc<Self>) -> Subscription {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let notify = Arc::new(Notify::new());
        self.subscribers.lock().unwrap_or_else(|e| e.into_inner()).insert(id, notify.clone());
        Subscription { stop: self.clone(), id, notify }
    }
}

/// One session's wait for [`Stop::cancel`]; unsubscribes when dropped.
pub struct Subscription {
    stop: Arc<Stop>,
    id: u64,
    notify: Arc<Notify>,
}

impl Subscription {
    /// Completes once freshet is stopping.
    pub async fn cancelled(&self) {
        // The flag covers a cancel before subscribing; the permit one between the check and
        // the wait.
        if self.stop.is_cancelled() {
            return;
        }
        self.notify.notified().await;
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.stop.subscribers.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
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

    #[tokio::test]
    async fn subscribers_are_told_whenever_they_wait() {
        let stop = Arc::new(Stop::default());
        let (early, idle) = (stop.subscribe(), stop.subscribe());
        let waiting = tokio::spawn(async move { early.cancelled().await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        stop.cancel();
        waiting.await.unwrap();
        // Not waiting at the cancel, and subscribed after it: both complete.
        idle.cancelled().await;
        stop.subscribe().cancelled().await;
        drop(idle);
        assert!(stop.subscribers.lock().unwrap().is_empty(), "dropped subscriptions are removed");
    }
}
