//! The writer task: the dataflow's single writer.
//!
//! One task owns the [`Dataflow`] and does everything that changes it, in one order: batches
//! and schema changes from its [`ChangeSource`] (in stream order), fills (started when readers
//! record misses, installed when the upstream answers), and cache installs and drops from
//! admin statements. What it shows sessions it publishes through the engine's parts it was
//! given ([`Outputs`]: the registry, the freshness gate, the signals), each through its own
//! methods; it holds no reference to the engine itself.
//! Sessions never wait for it except for the reply to an admin statement. Stream events
//! already queued are taken together, up to `STEP_EVENTS` and `STEP_TIME` per step; the
//! partitions the step's transactions changed are republished to readers once, at its end,
//! and then the applied position (which the freshness gate and read-your-writes compare with
//! the server's) is published, so it never runs ahead of what readers see; a batch enters the
//! dataflow in one place, `Writer::apply`.
//!
//! **Every event taken off the stream's queue is handled.** The stream delivers each
//! transaction once; a filled partition that misses one keeps the old rows for good (no later
//! batch or fill repairs a partition that is not evicted). So a step bounds itself *before*
//! it receives: `Step::take` returns a queued event only when the step has room to handle it,
//! and the caller handles whatever it returns. (The loop this replaced received the next event
//! and then found its count exhausted, dropping one transaction whenever 64 queued events met
//! within a millisecond: under concurrent writers, views diverged from the server with no
//! error, RYW on or off; proxy/tests/ryw.rs caught it.)
//!
//! Why a fill is never stale (see cdc's fill module for the fence): its answer carries the
//! binlog position of its snapshot, and the dataflow skips batches at or before it and applies
//! later ones. Two events break the premise that every batch after the position will be
//! applied: a transaction the stream could not deliver (`Untrusted`) and a reconnect that
//! resumes at the server's current position (a gap). Both evict everything, and move to a new
//! *epoch*: answers of fills started in an older epoch are dropped unread (their partitions
//! were evicted with the rest; any new miss started a new fill). After a reconnect the applied
//! position is moved to the new start before evicting, so that no fill older than the gap can
//! be installed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use freshet_cdc::{CdcError, DdlKind, SchemaChange, StreamEvent, UpstreamFills};
use freshet_config::CacheSpec;
use freshet_dataflow::{Batch, Dataflow, FillError, FillOutcome, FillRequest, FillResponse, TableSchema, ViewId};

use super::EngineCounters;
use super::access::Access;
use super::freshness::FreshnessGate;
use super::handle::Signals;
use super::registry::{Cache, Live, Registry};
use super::replica::Replica;
use super::source::{ChangeSource, Events};

mod follow;

/// Requests from sessions (admin statements).
pub(super) enum Control {
    Create {
        spec: CacheSpec,
        reply: oneshot::Sender<Result<Arc<Cache>, String>>,
    },
    Drop {
        view: ViewId,
        reply: oneshot::Sender<()>,
    },
    Explain {
        sql: String,
        view: Option<ViewId>,
        reply: oneshot::Sender<Result<Vec<(String, String)>, String>>,
    },
    /// freshet is shutting down: the writer returns, dropping the binlog stream and fills.
    Stop,
    /// A write bypassed the binlog: evict everything (a new epoch), and copy the replica anew.
    EvictAll {
        reply: oneshot::Sender<()>,
    },
}

type FillDone = (u64, FillRequest, Result<FillResponse, FillError>);

/// How often the writer looks for misses even without a wake-up (a wake-up can coincide with
/// a fill already being started and be consumed early).
const FILL_TICK: Duration = Duration::from_millis(20);
/// Most stream events the writer takes in one step of its loop, and the longest it spends on
/// them before giving fills (which readers wait for) and admin requests their turn. Only a
/// queue that is behind fills a step: one transaction at a time arrives alone. A step's
/// partitions run their operators and are republished once for all of its transactions, so
/// catching up gets cheaper per transaction as steps grow; the bound in time is what a write
/// waits, at most, to become visible behind a backlog, and what a fill waits to be installed
/// (docs/decisions.md, "keep-up figures").
const STEP_EVENTS: usize = 256;
const STEP_TIME: Duration = Duration::from_millis(4);
/// The reconnect loop's backoff: the first attempt at once, then from this, doubling.
const RESTART_BACKOFF: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(10));

/// The bounds of one step of the writer over the stream's queue: the event the step started
/// with, then queued ones while fewer than [`STEP_EVENTS`] were taken and [`STEP_TIME`] has
/// not passed. An event is taken off the queue only when the step has room to handle it: an
/// event received and not handled is a transaction lost for good (its partitions keep the old
/// rows, and nothing later repairs them).
struct Step {
    taken: usize,
    started: std::time::Instant,
}

impl Step {
    fn new() -> Step {
        Step { taken: 1, started: std::time::Instant::now() }
    }

    /// The next queued event, if this step has room for it; the caller must handle it.
    fn take<T>(&mut self, events: &mut mpsc::Receiver<T>) -> Option<T> {
        if self.taken >= STEP_EVENTS || self.started.elapsed() > STEP_TIME {
            return None;
        }
        let event = events.try_recv().ok()?;
        self.taken += 1;
        Some(event)
    }
}

/// What the writer publishes to: shared with the engine and its sessions, written (of the
/// engine's state) only by the writer, through each part's own methods.
pub(super) struct Outputs {
    /// Views installed, recompiled and revived; the catalog after DDL.
    pub(super) registry: Arc<Registry>,
    /// The applied position and the stream's ups and downs.
    pub(super) gate: Arc<FreshnessGate>,
    /// Completed fills, the read-your-writes progress; misses recorded by readers.
    pub(super) signals: Arc<Signals>,
    pub(super) counters: Arc<EngineCounters>,
    /// Forgotten when the stream shows privileges may have changed.
    pub(super) access: Arc<Access>,
}

pub(super) struct Writer<S> {
    dataflow: Dataflow,
    /// Where batches and schema changes come from (restarted here after a failure).
    source: S,
    fills: UpstreamFills,
    /// `[fill] source = "replica"`: applied before the views, answers the fills it can.
    replica: Option<Arc<Replica>>,
    out: Outputs,
    in_flight: JoinSet<FillDone>,
    epoch: u64,
    /// Tables every batch from here on carries, and caches waiting for theirs (`follow`).
    followed: Vec<String>,
    waiting: Vec<follow::Waiting>,
    /// Views whose domain's fills failed in a row (none completed since): how many, and until
    /// when none of the domain's fills is asked for.
    failing: HashMap<ViewId, Failing>,
}

/// A domain's fills failing, as each of its views records it.
#[derive(Clone, Copy)]
struct Failing {
    failures: u32,
    until: tokio::time::Instant,
}

/// After a failed fill the writer waits before asking the server again for that domain: 10
/// ms, doubled per failure in a row, at most a second. A fill that fails at once (the account
/// at its `MAX_USER_CONNECTIONS`, a privilege gone) was asked again as soon as its waiting
/// read looked again, a thousand times a second. The wait is the domain's: one table's
/// refused fills paused every cache's, and relayed every miss, until session 53.
const FILL_RETRY_FIRST: Duration = Duration::from_millis(10);
const FILL_RETRY_MAX: Duration = Duration::from_secs(1);

impl<S: ChangeSource> Writer<S> {
    pub(super) fn new(dataflow: Dataflow, source: S, fills: UpstreamFills, replica: Option<Arc<Replica>>, out: Outputs) -> Writer<S> {
        let (followed, waiting) = (Vec::new(), Vec::new());
        Writer { dataflow, source, fills, replica, out, in_flight: JoinSet::new(), epoch: 0, followed, waiting, failing: HashMap::new() }
    }

    pub(super) async fn run(mut self, mut events: Events, mut control: mpsc::UnboundedReceiver<Control>) {
        let mut tick = tokio::time::interval(FILL_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = events.recv() => self.on_events(event, &mut events).await,
                Some(done) = self.in_flight.join_next(), if !self.in_flight.is_empty() => match done {
                    Ok(done) => self.finish(done),
                    Err(e) => warn!(error = %e, "a fill task failed"),
                },
                _ = self.out.signals.misses_recorded() => self.start_fills(),
                _ = tick.tick() => self.start_fills(),
                request = control.recv() => match request {
                    Some(Control::Stop) | None => return,
                    Some(request) => self.control(request),
                },
            }
        }
    }

    /// `first` and whatever else the stream has queued already, up to [`STEP_EVENTS`] and
    /// [`STEP_TIME`] (so that fills and admin requests still get their turn): many small transactions cost one
    /// trip through the loop and one publication of the applied position.
    async fn on_events(&mut self, first: Option<Result<StreamEvent, CdcError>>, events: &mut Events) {
        let mut next = first;
        let mut step = Step::new();
        // Read-your-writes: schema changes count as processed too (a DDL is a session's write).
        let mut schema_at = None;
        loop {
            match next {
                Some(Ok(StreamEvent::Batch(batch))) => self.apply(&batch),
                Some(Ok(StreamEvent::Schema(change))) if change.kind == DdlKind::Privileges => {
                    schema_at = Some(change.position);
                    self.out.access.forget_all()
                }
                Some(Ok(StreamEvent::Schema(change))) => {
                    schema_at = Some(change.position);
                    self.schema_change(*change)
                }
                Some(Ok(StreamEvent::Following(tables))) => self.now_following(tables),
                Some(Err(CdcError::Untrusted(why))) => {
                    info!(reason = %why, "a transaction could not be followed; evicting every cache");
                    self.out.counters.untrusted.inc();
                    if let Some(r) = &self.replica {
                        r.gap();
                    }
                    self.new_epoch();
                }
                Some(Err(e)) => {
                    warn!(error = %e, "binlog stream failed; evicting every cache and resuming at the server's position");
                    self.dataflow.publish_held();
                    *events = self.reconnect().await;
                    return;
                }
                None => {
                    warn!("binlog stream ended; resuming at the server's position");
                    self.dataflow.publish_held();
                    *events = self.reconnect().await;
                    return;
                }
            }
            // Only an event this step will handle is taken off the queue.
            match step.take(events) {
                Some(event) => next = Some(event),
                None => break,
            }
        }
        // Readers see the step's transactions from here, and only then is their position
        // announced (the freshness gate, read-your-writes). A schema change is applied once
        // its views are rebuilt, which is done: without this, a DDL that no write follows
        // left the applied position before it, and the lag grew until every read relayed.
        self.dataflow.publish_held();
        if let Some(at) = schema_at {
            self.dataflow.set_applied(at);
            // The replica too: else its fills are behind the views until the next write.
            if let Some(r) = &self.replica {
                r.passed(at);
            }
        }
        // Fills that waited for the stream to pass the commits they may disagree on.
        let settled = self.dataflow.settle_fills();
        if settled != FillOutcome::default() {
            debug!(filled = settled.filled, unsure = settled.unsure, stale = settled.stale, "waiting fills settled");
            self.out.counters.fills_unsure.add(settled.unsure as u64);
            self.out.signals.fills_changed();
        }
        self.out.gate.applied_to(self.dataflow.applied());
        self.out.signals.ryw.publish(self.dataflow.applied());
    }

    /// One transaction applied, in stream order: to the replica of the base tables first (so
    /// that a fill it answers reflects this batch), then to the views. The one place a batch
    /// enters the dataflow. The views' reader entries are republished once per step, at its
    /// end (`Dataflow::apply_held`): a partition every transaction touches is rebuilt once.
    fn apply(&mut self, batch: &Batch) {
        if let Some(r) = &self.replica {
            r.apply(batch);
        }
        if let Err(e) = self.dataflow.apply_held(batch) {
            warn!(error = %e, "binlog batch out of order; evicting every cache");
            self.new_epoch();
        }
        self.out.counters.batches.inc();
    }

    fn new_epoch(&mut self) {
        self.epoch += 1;
        self.dataflow.evict_all();
        self.out.signals.fills_changed();
    }

    fn start_fills(&mut self) {
        let now = tokio::time::Instant::now();
        for req in self.dataflow.fill_requests() {
            if self.failing.get(&req.view).is_some_and(|f| now < f.until) {
                // The domain waits out its pause. Its reads are relayed meanwhile, and each
                // records its miss again for after it.
                self.dataflow.abandon_fill(&req);
                continue;
            }
            self.out.counters.fills_started.inc();
            let fills = self.fills.clone();
            let epoch = self.epoch;
            let replica = self.replica.clone().filter(|r| r.serves(&req));
            self.in_flight.spawn(async move {
                let result = match replica {
                    Some(r) => r.fill(req.clone()).await,
                    None => fills.fill(&req).await,
                };
                (epoch, req, result)
            });
        }
    }

    fn finish(&mut self, (epoch, req, result): FillDone) {
        if epoch != self.epoch {
            // Evicted with everything else when the epoch changed; see the module header.
            return;
        }
        match result {
            Ok(response) => {
                let outcome = self.dataflow.complete_fill(response);
                debug!(
                    filled = outcome.filled,
                    ignored = outcome.ignored,
                    stale = outcome.stale,
                    unsure = outcome.unsure,
                    waiting = outcome.waiting,
                    "fill answered"
                );
                self.out.counters.fills_unsure.add(outcome.unsure as u64);
                if self.failing.contains_key(&req.view) {
                    let views = self.dataflow.domain_of(req.view);
                    for v in &views {
                        self.failing.remove(v);
                    }
                    self.out.signals.set_failing(&views, false);
                }
            }
            Err(FillError::Behind { have, need }) => {
                // The snapshot predates what the views have applied (the server's snapshot
                // position trails its binlog for a moment): routine, the next read asks again.
                debug!(?have, ?need, "fill snapshot behind the applied position; retried on the next read");
                self.dataflow.abandon_fill(&req);
            }
            Err(e) => {
                self.out.counters.fills_failed.inc();
                let failures = self.failing.get(&req.view).map_or(0, |f| f.failures).saturating_add(1);
                let pause = FILL_RETRY_FIRST.saturating_mul(1 << failures.min(8).saturating_sub(1)).min(FILL_RETRY_MAX);
                let failing = Failing { failures, until: tokio::time::Instant::now() + pause };
                let views = self.dataflow.domain_of(req.view);
                for v in &views {
                    self.failing.insert(*v, failing);
                }
                self.out.signals.set_failing(&views, true);
                warn!(error = %e, view = req.view.0, keys = req.keys.len(), failures, ?pause, "fill failed; the view's reads that miss are relayed until one of its fills completes");
                self.dataflow.abandon_fill(&req);
            }
        }
        // Waiting reads look again: hit, or a stale fill's hole to request anew.
        self.out.signals.fills_changed();
    }

    fn schema_change(&mut self, change: SchemaChange) {
        self.fills.set_table(&change.table, change.info.clone());
        if let Some(r) = &self.replica {
            r.schema_changed(&change.table, change.kind, change.info.as_ref());
        }
        if change.kind == DdlKind::Cascaded {
            // Rows changed by a foreign key's action, schema as it was: the views reading the
            // table refill (the replica copies it again, above).
            debug!(table = %change.table, "rows changed by a foreign key's action");
            self.out.counters.cascades.inc();
            self.dataflow.evict_reading(&change.table);
            return;
        }
        let unchanged = matches!(change.kind, DdlKind::Create | DdlKind::Alter)
            && change.schema.is_some()
            && self.dataflow.catalog().get(&change.table) == change.schema.as_ref();
        if unchanged {
            // `ALTER TABLE ... ADD INDEX`, a table comment, a no-op CREATE: the rows and their
            // shape are what the views hold; evicting them would only cost refills. The column
            // definitions sent with answers are taken anew: a wider VARCHAR or a new index
            // changes their lengths and flags.
            debug!(table = %change.table, kind = ?change.kind, "DDL without a schema change");
            self.out.registry.forget_columns(&change.table);
            return;
        }
        info!(table = %change.table, kind = ?change.kind, "schema change");
        let rebuilt = self.replace_schema(&change.table, change.schema);
        let revived = self.revive();
        // What accounts may read was learned for the caches' columns of the time: an added
        // column is read by `SELECT *`, and an account granted the old columns only may not.
        if rebuilt || revived {
            self.out.access.forget_all();
        }
        self.publish_catalog(Some(&change.table));
    }

    /// `table`'s schema becomes `schema` (None: the table is gone). Every view reading it is
    /// dropped, and each cache that served one gets its recompiled view, or relays saying why
    /// (caches whose queries compiled to the same plan share a view, and all get the new one).
    /// True if a cache's view read the table.
    fn replace_schema(&mut self, table: &str, schema: Option<TableSchema>) -> bool {
        let mut rebuilt = false;
        for (old, new) in self.dataflow.alter_table(table, schema) {
            let caches: Vec<_> = self.out.registry.caches().into_iter().filter(|c| c.live().is_ok_and(|l| l.view == old)).collect();
            if caches.is_empty() {
                continue;
            }
            let live = match new {
                Ok(view) => Live::of(&self.dataflow, view).ok_or_else(|| "the recompiled view vanished".to_string()),
                Err(refusal) => Err(format!("after DDL on {table}: {}", refusal.reason)),
            };
            for cache in caches {
                if let Err(reason) = &live {
                    warn!(cache = %cache.name, %reason, "cache is no longer cacheable after DDL; relaying its queries");
                }
                cache.set_live(live.clone());
            }
            rebuilt = true;
        }
        rebuilt
    }

    /// Caches left without a view by earlier DDL (a dropped table, a column gone) are tried
    /// again: a migration that drops and re-creates a table gets its caches back. True if one
    /// was.
    fn revive(&mut self) -> bool {
        let mut revived = false;
        for cache in self.out.registry.caches() {
            if cache.live().is_ok() || !self.reads_followed(&cache.sql) {
                continue;
            }
            if let Ok(view) = self.dataflow.install_sql(&cache.sql)
                && let Some(live) = Live::of(&self.dataflow, view)
            {
                info!(cache = %cache.name, "cache is served again after DDL");
                cache.set_live(Ok(live));
                revived = true;
            }
        }
        revived
    }

    /// The catalog sessions match against follows the dataflow's; verdicts and column
    /// definitions that may depend on `table`'s old schema are forgotten.
    fn publish_catalog(&self, table: Option<&str>) {
        self.out.registry.publish_catalog(self.dataflow.catalog().clone(), table);
    }

    /// Re-establishes the change source at the server's current position, retrying with
    /// backoff until it succeeds. Cached reads are relayed meanwhile.
    async fn reconnect(&mut self) -> Events {
        self.out.gate.stream_down();
        // The next stream may follow another history, whose positions its GTIDs resolve to
        // before `resumed`: none may be compared with this one's.
        self.out.signals.ryw.stall();
        let mut backoff = freshet_cdc::Backoff::new(RESTART_BACKOFF.0, RESTART_BACKOFF.1);
        loop {
            backoff.wait().await;
            match self.source.restart().await {
                Ok(restarted) => return self.resumed(restarted),
                Err(e) => warn!(error = %e, retry_in = ?backoff.delay(), "binlog stream cannot be resumed yet"),
            }
        }
    }

    /// A new run of the source starts at `start`, after a gap: the views take the tables as
    /// they are now, everything is evicted, and the run's events are the writer's from here.
    fn resumed(&mut self, super::source::Restarted { start, tables, infos, events }: super::source::Restarted) -> Events {
        // Counted when re-established, as the metric says (not when lost: a stream that never
        // comes back is not a restart).
        self.out.counters.restarts.inc();
        // Tables may have changed, or gone, while the stream was away.
        let gone: Vec<String> = (self.dataflow.catalog().tables())
            .filter(|known| !tables.iter().any(|t| t.name == known.name))
            .map(|t| t.name.clone())
            .collect();
        for name in &gone {
            info!(table = %name, "table dropped while the stream was away");
            self.replace_schema(name, None);
        }
        let mut changed = Vec::new();
        for table in tables {
            if self.dataflow.catalog().get(&table.name) != Some(&table) {
                info!(table = %table.name, "schema changed while the stream was away");
                changed.push(table.name.clone());
                self.replace_schema(&table.name.clone(), Some(table));
            }
        }
        self.revive();
        // The replica copies every table again at the new start (`restart_at`), under the
        // schemas it holds: one altered while the stream was away (or unlogged) takes its new
        // schema first, or it would be copied and indexed under its old one. Only those: the
        // others' copies start at `restart_at`, as before.
        if let Some(r) = &self.replica {
            for name in &gone {
                r.schema_changed(name, DdlKind::Drop, None);
            }
            for (name, info) in infos.iter().filter(|(n, _)| changed.contains(n)) {
                r.schema_changed(name, DdlKind::Truncate, Some(info));
            }
        }
        for (name, info) in infos {
            self.fills.set_table(&name, Some(info));
        }
        // The server behind the address may be another one now.
        self.fills.reconnect();
        // First the new start, then the eviction: holes are made at `start`,
        // so no fill older than the gap can be installed. The start may be lower than what was
        // applied (RESET MASTER, another server behind the address): a new history.
        self.dataflow.restart_at(start);
        if let Some(r) = &self.replica {
            r.restart_at(start);
        }
        self.new_epoch();
        // The gap may have hidden a GRANT or REVOKE.
        self.out.access.forget_all();
        self.publish_catalog(None);
        self.stream_replaced();
        self.out.gate.applied_to(self.dataflow.applied());
        // Everything was evicted after the start was set: a read refills from
        // the server as of now, past any write a session waits for (an era of its own).
        self.out.signals.ryw.restart(start);
        self.out.gate.stream_resumed();
        info!("binlog stream resumed");
        events
    }

    fn create(&mut self, spec: CacheSpec, reply: oneshot::Sender<Result<Arc<Cache>, String>>) {
        let result = self.out.registry.build(&mut self.dataflow, &spec, true);
        if let Ok(cache) = &result {
            info!(cache = %cache.name, "cache created");
            self.out.registry.add(cache.clone());
        }
        let _ = reply.send(result);
    }

    fn control(&mut self, request: Control) {
        match request {
            Control::Create { spec, reply } => self.create_when_followed(spec, reply),
            Control::Drop { view, reply } => {
                // Another cache may share the view (identical plans share one).
                let shared = self.out.registry.caches().iter().any(|c| c.live().is_ok_and(|l| l.view == view));
                if !shared {
                    self.dataflow.drop_view(view);
                    self.failing.remove(&view);
                    self.out.signals.set_failing(&[view], false);
                }
                let _ = reply.send(());
            }
            Control::EvictAll { reply } => {
                self.new_epoch();
                // The replica's rows are as stale as the views': the write is in no binlog.
                if let Some(r) = &self.replica {
                    r.gap();
                }
                let _ = reply.send(());
            }
            Control::Explain { sql, view, reply } => {
                let explained = match view.and_then(|v| self.dataflow.explain(v)) {
                    Some(lines) => Ok(lines),
                    None => freshet_dataflow::explain_sql(&sql, self.dataflow.catalog()).map_err(|r| r.reason),
                };
                let _ = reply.send(explained);
            }
            Control::Stop => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every queued event is handed out exactly once and in order, over as many steps as it
    /// takes, and no step takes more than [`STEP_EVENTS`]. (The loop this replaced received
    /// one event more than it handled whenever a step ended on its event count: a transaction
    /// lost, the views diverging from the server for good.)
    #[tokio::test]
    async fn steps_hand_out_every_queued_event_once() {
        let (tx, mut rx) = mpsc::channel(4096);
        for i in 0..1000u32 {
            tx.send(i).await.unwrap();
        }
        let mut handled = Vec::new();
        let mut steps = 0;
        while let Ok(first) = rx.try_recv() {
            steps += 1;
            let mut step = Step::new();
            let mut in_step = vec![first];
            while let Some(e) = step.take(&mut rx) {
                in_step.push(e);
            }
            assert!(in_step.len() <= STEP_EVENTS, "a step took {} events", in_step.len());
            handled.extend(in_step);
        }
        assert_eq!(handled, (0..1000).collect::<Vec<_>>());
        assert!(steps >= 1000 / STEP_EVENTS, "{steps} steps");
    }
}
