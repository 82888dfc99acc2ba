//! How sessions reach the writer, and what the writer tells them back.
//!
//! Owns: the control channel (admin statements, eviction, stop), the wake-up for recorded
//! misses, the count of completed fills that waiting reads watch, and the read-your-writes
//! progress ([`ryw::Progress`]). Sessions hold the [`WriterHandle`]; the writer holds the
//! other ends ([`Signals`] shared, the control channel's receiver). Does not own: what the
//! writer does with a request ([`super::writer`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use freshet_dataflow::ViewId;

use tokio::sync::{Notify, mpsc, oneshot, watch};

use super::ryw;
use super::writer::Control;

/// What the writer signals and sessions wait on.
pub(super) struct Signals {
    /// Readers recorded misses: the writer should start fills.
    wake: Notify,
    /// Bumped by the writer after every completed fill and every eviction; waiting reads look
    /// again.
    filled: watch::Sender<u64>,
    /// What the writer has processed, for read-your-writes waits.
    pub(super) ryw: ryw::Progress,
    /// Views whose domain's last fill failed (and none of its fills completed since): the
    /// writer waits before asking the server again for them, and a read of one that misses is
    /// relayed at once rather than waiting for it. Other views fill as usual: a failure is
    /// often one table's (freshet's account lost its right to it, a type it cannot read).
    failing: Mutex<Vec<ViewId>>,
    /// Whether `failing` holds any view, read without its lock.
    any_failing: AtomicBool,
}

impl Signals {
    /// The writer: a fill completed (or everything was evicted): waiting reads look again.
    pub(super) fn fills_changed(&self) {
        self.filled.send_modify(|g| *g += 1);
    }

    /// The writer: whether the fills of `views` (one domain's) are failing
    /// ([`WriterHandle::fills_failing`]).
    pub(super) fn set_failing(&self, views: &[ViewId], failing: bool) {
        let mut all = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|v| !views.contains(v));
        if failing {
            all.extend_from_slice(views);
        }
        self.any_failing.store(!all.is_empty(), Ordering::Relaxed);
    }

    /// The writer: completes when a reader recorded a miss.
    pub(super) async fn misses_recorded(&self) {
        self.wake.notified().await;
    }
}

/// The sessions' end of the writer.
pub struct WriterHandle {
    control: mpsc::UnboundedSender<Control>,
    signals: Arc<Signals>,
}

/// The writer's ends: the shared [`Signals`] and the control channel's receiver.
pub(super) struct WriterEnds {
    pub(super) signals: Arc<Signals>,
    pub(super) control: mpsc::UnboundedReceiver<Control>,
}

/// A new writer handle and the writer's ends, the writer having processed up to `at`.
pub(super) fn channel(at: freshet_dataflow::Position) -> (WriterHandle, WriterEnds) {
    let (control, control_rx) = mpsc::unbounded_channel();
    let signals = Arc::new(Signals {
        wake: Notify::new(),
        filled: watch::Sender::new(0),
        ryw: ryw::Progress::new(at),
        failing: Mutex::new(Vec::new()),
        any_failing: AtomicBool::new(false),
    });
    (WriterHandle { control, signals: signals.clone() }, WriterEnds { signals, control: control_rx })
}

/// The writer is gone (shutdown, or it died).
#[derive(Debug)]
pub struct Stopped;

impl WriterHandle {
    /// Wakes the writer to start fills for recorded misses.
    pub fn wake(&self) {
        self.signals.wake.notify_one();
    }

    /// Changes with every completed fill and eviction; subscribe before looking.
    pub fn fills(&self) -> watch::Receiver<u64> {
        self.signals.filled.subscribe()
    }

    /// True while the fills of `view`'s domain fail (its last one failed, none completed
    /// since): a read that misses is relayed at once.
    pub fn fills_failing(&self, view: ViewId) -> bool {
        self.signals.any_failing.load(Ordering::Relaxed)
            && self.signals.failing.lock().unwrap_or_else(PoisonError::into_inner).contains(&view)
    }

    /// What the writer has processed, for read-your-writes.
    pub fn ryw(&self) -> &ryw::Progress {
        &self.signals.ryw
    }

    /// Sends a request without waiting (e.g. [`Control::Stop`]).
    pub(super) fn send(&self, request: Control) -> Result<(), Stopped> {
        self.control.send(request).map_err(|_| Stopped)
    }

    /// Sends the request `make` builds around a reply channel, and waits for the reply.
    pub(super) async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Control) -> Result<T, Stopped> {
        let (reply, rx) = oneshot::channel();
        self.send(make(reply))?;
        rx.await.map_err(|_| Stopped)
    }
}
