//! The cache engine: the configured queries as dataflow views, kept fresh by the binlog, and
//! what sessions ask of them.
//!
//! Owns: the set of caches (config and `CREATE CACHE`), their verdicts for query shapes (via
//! [`matcher`]), the column definitions captured from the upstream per query shape, the wait
//! for a fill, the lag gate, and the writer task ([`writer`]) that is the dataflow's single
//! writer (binlog batches, DDL, fills, installs), and with `[fill] source = "replica"` the
//! local replica ([`replica`]: applied by the writer before the views, answering the fills of
//! copied tables). Does not own: the wire protocol of a hit
//! (`session::cached`), admin SQL rendering (`session::admin`).
//!
//! Invariants:
//! - a read is answered from a view only while [`Engine::freshness`] says caught up: the
//!   stream connected and verified, the server's position read lately, and the oldest change
//!   the server has and the views do not at most `[consistency] max_lag` old — so an answer
//!   reflects the server as of at most `max_lag` + [`FRESHNESS_SLACK`] ago (otherwise
//!   relayed, [`RelayReason::Lag`]);
//! - a miss waits at most `[fill] timeout` for its fill, then is relayed while the fill goes on;
//! - nothing here blocks a session on the writer: lookups read published state, the writer is
//!   reached through a channel and replies to control requests only;
//! - column definitions are the upstream's own packets for that query shape and session
//!   character set, captured from a relayed answer, never built by freshet.

pub mod access;
pub mod latency;
pub mod matcher;
mod metrics;
pub mod params;
pub mod replica;
pub mod route;
pub mod ryw;
pub mod warm;
mod writer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tracing::{info, warn};

use freshet_cdc::{FillConfig, FollowedTables, LagHandle, StreamConfig, UpstreamFills};
use freshet_config::{CacheSpec, Config};
use freshet_dataflow::{ByteSize, Catalog, Dataflow, Lookup, LookupError, Reader, Row, Value, ViewId, ViewStats};

pub use self::route::RelayReason;
use self::route::{Entry, Verdict, VerdictTable};
use crate::encode::text::Column;
pub use crate::matching::CacheId;
use crate::matching::{self, Query, SqlMode};
use crate::metrics::{Counter, Histogram};
use crate::protocol::column::ColumnDef;

use self::latency::LatencySketch;
use self::matcher::Pattern;

/// How often the lag gate is re-evaluated for the hit path.
pub const FRESHNESS_CHECK: Duration = Duration::from_millis(50);

/// How many query shapes the verdict table remembers.
const VERDICTS: usize = 10_000;

/// The view behind a cache while it can be served.
pub struct Live {
    pub view: ViewId,
    pub reader: Reader,
    pub cost_class: &'static str,
}

/// One cached query.
pub struct Cache {
    pub id: CacheId,
    pub name: String,
    pub sql: String,
    /// Created with CREATE CACHE (gone at restart).
    pub runtime: bool,
    pattern: Pattern,
    live: RwLock<Result<Arc<Live>, String>>,
    pub hit_latency: LatencySketch,
    /// The same, for Prometheus.
    pub hit_histogram: Histogram,
    /// Reads, counted once each (the view's own counters count every lookup, and a read
    /// waiting for its fill looks up again after each completed fill).
    pub reads: ReadCounts,
    /// The recently read keys, for the warm restart ([`warm`]).
    pub hot: warm::HotKeys,
}

/// What became of the reads routed to one cache.
#[derive(Default)]
pub struct ReadCounts {
    /// Answered from memory at the first look.
    pub hit: Counter,
    /// Found a hole: answered after waiting for the fill, or relayed when it was late.
    pub missed: Counter,
    /// Of the missed, answered from memory after the fill arrived.
    pub filled: Counter,
}

impl ReadCounts {
    /// Reads answered at the first look, over all reads that looked (None before any).
    pub fn hit_ratio(&self) -> Option<f64> {
        let (hit, missed) = (self.hit.get(), self.missed.get());
        (hit + missed > 0).then(|| hit as f64 / (hit + missed) as f64)
    }
}

impl Cache {
    /// The view, or why there is none.
    pub fn live(&self) -> Result<Arc<Live>, String> {
        self.live.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn stats(&self) -> ViewStats {
        self.live().map(|l| l.reader.stats()).unwrap_or_default()
    }
}

/// Column definitions captured from the upstream for one query shape.
pub struct Columns {
    /// The definition packets' payloads, verbatim.
    pub packets: Vec<Bytes>,
    /// How each column renders.
    pub render: Vec<Column>,
    /// Cleared when a value of this shape could not be encoded: its reads are relayed without
    /// looking up the view again.
    pub encodable: AtomicBool,
}

/// What captured column definitions are keyed by: the query shape, the session's character
/// set state, and the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ColumnsKey {
    /// The cache the shape matched (its definitions are forgotten when its tables change).
    pub cache: CacheId,
    pub fingerprint: u64,
    pub charset: u64,
    pub binary: bool,
    /// The session negotiated MariaDB's extended type information (another definition
    /// layout).
    pub extended: bool,
}

/// How fresh the caches are ([`Engine::freshness`]).
///
/// The bound it gives: while `caught_up`, every cached answer reflects the server as it was at
/// most `max_lag` + [`FRESHNESS_SLACK`] ago (the lag is measured from when the server's
/// position was first seen, at most one poll after it was written; the hit path's gate is
/// re-evaluated every [`FRESHNESS_CHECK`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Freshness {
    /// What the views have applied (binlog file seq << 32 | offset).
    pub applied: freshet_dataflow::Position,
    /// The server's binlog position as last observed.
    pub server: Option<freshet_cdc::BinlogPos>,
    /// Age of the oldest change the server has and the views do not (events queued inside
    /// freshet included); None when unknown: the stream is down or re-establishing, or the
    /// server's position could not be read for [`freshet_cdc::lag::POLL_STALE`].
    pub lag: Option<Duration>,
    /// `lag` is known and at most `[consistency] max_lag`: cached reads are served.
    pub caught_up: bool,
    /// The binlog stream is connected, verified to continue what was applied, and its writer
    /// alive.
    pub stream_up: bool,
    /// The server's position was read within [`freshet_cdc::lag::POLL_STALE`].
    pub server_polled: bool,
}

/// What [`Freshness`] adds to `max_lag` for the age of a cached answer: one poll of the
/// server's position plus one re-evaluation of the gate.
pub const FRESHNESS_SLACK: Duration = Duration::from_millis(150);

/// Settings from the config that sessions consult.
#[derive(Clone, Debug)]
pub struct Settings {
    pub database: String,
    pub fill_timeout: Duration,
    pub max_lag: Duration,
    pub memory_limit: u64,
    pub server_id: u32,
    /// What classifying one query may cost (`[limits] max_query`, `max_in_list`).
    pub bounds: matching::Bounds,
    /// `[consistency] read_your_writes` and `ryw_timeout` (see [`ryw`]).
    pub read_your_writes: bool,
    pub ryw_timeout: Duration,
    /// The flavor's SELECT of a session's own last GTID, if it has one.
    pub session_gtid_sql: Option<&'static str>,
    /// `[warm] keys_per_cache`.
    pub warm_keys: usize,
}

/// Counters the engine keeps for /metrics and SHOW FRESHET STATUS.
#[derive(Default)]
pub struct EngineCounters {
    pub relayed: [Counter; RelayReason::ALL.len()],
    pub hits: Counter,
    pub batches: Counter,
    pub fills_started: Counter,
    pub fills_failed: Counter,
    pub fill_waits: Counter,
    pub restarts: Counter,
    /// Writes of sessions whose binlogging may be off, each followed by evicting every cache.
    pub unlogged_writes: Counter,
    /// Captured column definitions refused (not the cache's own tables and columns).
    pub captures_refused: Counter,
}

impl EngineCounters {
    pub fn relayed(&self, reason: RelayReason) {
        self.relayed[reason.index()].inc();
    }
}

/// The cache engine; one per process, shared by all sessions.
pub struct Engine {
    pub settings: Settings,
    caches: RwLock<Vec<Arc<Cache>>>,
    next_id: AtomicU64,
    pub verdicts: VerdictTable,
    catalog: RwLock<Arc<Catalog>>,
    columns: RwLock<HashMap<ColumnsKey, Arc<Columns>>>,
    control: mpsc::UnboundedSender<writer::Control>,
    /// Readers recorded misses: the writer should start fills.
    wake: Notify,
    /// Bumped by the writer after every completed fill; waiting reads look again.
    filled: watch::Sender<u64>,
    /// The binlog's lag, one handle for the engine's life (each new stream reports into it).
    lag: LagHandle,
    /// The dataflow's applied position (binlog file seq << 32 | offset).
    pub applied: AtomicU64,
    /// False while the binlog stream is being re-established.
    pub stream_up: AtomicBool,
    /// [`Engine::caught_up`] as of the last check (every [`FRESHNESS_CHECK`]): the hit path
    /// reads this instead of the lag's mutex.
    fresh: AtomicBool,
    /// Set if the writer task died: nothing will be fresh again.
    writer_dead: AtomicBool,
    pub started: Instant,
    pub counters: EngineCounters,
    /// `[fill] source = "replica"`: the local replica, once started.
    pub replica: std::sync::OnceLock<Arc<replica::Replica>>,
    /// What accounts may read which caches, as the server answered.
    pub access: access::Access,
    /// What the writer has processed, for read-your-writes waits.
    pub ryw: ryw::Progress,
    /// The warm restart, with `[warm] dir`.
    pub warm: Option<Arc<warm::Warm>>,
}

/// What [`Engine::build_caches`] made: the engine with its caches, the dataflow they live
/// in (the writer's from then on), the writer's end of the control channel, and the tables
/// the caches read (sorted, once each).
struct Built {
    engine: Arc<Engine>,
    dataflow: Dataflow,
    control_rx: mpsc::UnboundedReceiver<writer::Control>,
    tables: Vec<String>,
}

/// What [`Engine::connect`] opened: the upstream connection (kept for the tables' checks),
/// the binlog stream, and the replica's store when fills come from it.
struct Connected {
    database: String,
    conn: mysql_async::Conn,
    opts: mysql_async::Opts,
    server_id: u32,
    stream_config: StreamConfig,
    /// The tables the stream decodes (those the caches read, added once they are built).
    followed: FollowedTables,
    store: Option<Arc<freshet_replica::ReplicaStore>>,
    stream: freshet_cdc::BinlogStream,
    resume: Option<replica::Resume>,
}

impl Engine {
    /// Connects to the upstream's binlog, builds every `[[cache]]` and starts the writer.
    /// With `[caches] strict`, any cache that cannot be built fails the start with every
    /// reason; otherwise such caches are kept as unavailable (relayed) with a warning.
    ///
    /// Three steps: [`connect`](Self::connect) (the upstream, its checks, the binlog
    /// stream), [`build_caches`](Self::build_caches) (the catalog, the dataflow, the engine
    /// and every cache), [`spawn_tasks`](Self::spawn_tasks) (the fill source, the writer and
    /// its supervisor, the freshness check).
    pub async fn start(config: &Config) -> anyhow::Result<Arc<Engine>> {
        let connected = Self::connect(config).await?;
        let built = Self::build_caches(config, &connected)?;
        let engine = built.engine.clone();
        Self::spawn_tasks(config, built, connected).await?;
        Ok(engine)
    }

    /// Connects to the upstream, checks it can feed caches, and starts the binlog stream
    /// (at the replica's position with `[fill] source = "replica"`).
    async fn connect(config: &Config) -> anyhow::Result<Connected> {
        let database = config.upstream.url.database.clone().ok_or_else(|| {
            anyhow!("[upstream] url must name the database the cached queries read (mysql://user:pass@host:port/DATABASE)")
        })?;
        let (mut conn, opts) = tokio::time::timeout(config.upstream.connect_timeout, crate::upstream::connect_own(&config.upstream))
            .await
            .map_err(|_| anyhow!("connecting to the upstream for the cache engine timed out"))?
            .context("connecting to the upstream for the cache engine")?;
        freshet_cdc::check_upstream(&mut conn, &database, &[]).await.context("the upstream cannot feed freshet's caches")?;
        let server_id = replica_server_id(config);
        let mut stream_config = StreamConfig::new(&database, server_id);
        // Only the tables caches read are decoded; the writer adds those of later caches.
        let followed = FollowedTables::default();
        stream_config.tables = Some(followed.clone());
        // `[fill] source = "replica"`: the stream resumes at the replica's position (replica.rs).
        let store = match (&config.fill.source, &config.replica.path) {
            (freshet_config::FillSourceKind::Replica, Some(path)) => Some(replica::open(path)?),
            _ => None,
        };
        let (stream, resume) = replica::connect_stream(store.as_deref(), opts.clone(), stream_config.clone(), &mut conn)
            .await
            .context("starting the binlog stream")?;
        Ok(Connected { database, conn, opts, server_id, stream_config, followed, store, stream, resume })
    }

    /// The catalog of the stream's tables, the dataflow, the engine, and every `[[cache]]`
    /// built into them; also the control channel's receiving end (for the writer) and the
    /// tables the caches read, sorted.
    fn build_caches(config: &Config, connected: &Connected) -> anyhow::Result<Built> {
        let Connected { database, server_id, stream, .. } = connected;
        let server_id = *server_id;
        let mut catalog = Catalog::new();
        for table in stream.tables() {
            // A table whose schema the dataflow refuses (e.g. DECIMAL(65)) is simply not
            // available to cached queries; compiling one that reads it says so.
            let _ = catalog.add(table.clone());
        }
        let mut dataflow = Dataflow::new(catalog.clone(), ByteSize(config.memory.limit.bytes()));
        dataflow.set_applied(stream.delivered().position()?);
        let (control, control_rx) = mpsc::unbounded_channel();
        let engine = Arc::new(Engine {
            settings: Settings {
                database: database.clone(),
                fill_timeout: config.fill.timeout,
                max_lag: config.consistency.max_lag,
                memory_limit: config.memory.limit.bytes(),
                server_id,
                bounds: matching::Bounds {
                    max_statement: usize::try_from(config.limits.max_query.bytes()).unwrap_or(usize::MAX),
                    max_in_list: config.limits.max_in_list as usize,
                },
                read_your_writes: config.consistency.read_your_writes,
                ryw_timeout: config.consistency.ryw_timeout,
                session_gtid_sql: stream.flavor().session_gtid_sql(),
                // Without `[warm] dir` nothing would read the record: keep none.
                warm_keys: if config.warm.dir.is_some() { config.warm.keys_per_cache as usize } else { 0 },
            },
            caches: RwLock::new(Vec::new()),
            next_id: AtomicU64::new(0),
            verdicts: VerdictTable::with_budget(VERDICTS, usize::try_from(config.memory.query_shapes.bytes()).unwrap_or(usize::MAX)),
            catalog: RwLock::new(Arc::new(catalog)),
            columns: RwLock::new(HashMap::new()),
            control,
            wake: Notify::new(),
            filled: watch::Sender::new(0),
            lag: LagHandle::default(),
            applied: AtomicU64::new(dataflow.applied().0),
            stream_up: AtomicBool::new(true),
            fresh: AtomicBool::new(false),
            writer_dead: AtomicBool::new(false),
            started: Instant::now(),
            counters: EngineCounters::default(),
            replica: std::sync::OnceLock::new(),
            access: access::Access::new(config.consistency.max_privilege_age),
            ryw: ryw::Progress::new(dataflow.applied()),
            warm: warm::Warm::new(&config.warm, database),
        });
        let mut problems = Vec::new();
        let mut tables: Vec<String> = Vec::new();
        for spec in &config.caches {
            match engine.build(&mut dataflow, spec, false) {
                Ok(cache) => {
                    if let Ok(live) = cache.live()
                        && let Some(q) = dataflow.query(live.view)
                    {
                        tables.extend(q.tables.iter().cloned());
                    }
                    engine.push(cache);
                }
                Err(reason) if config.cache_policy.strict => problems.push(format!("[[cache]] {}: {reason}", spec.name)),
                Err(reason) => {
                    warn!(cache = %spec.name, %reason, "cache cannot be built; its queries are relayed ([caches] strict = false)");
                    let cache = engine.unavailable(spec, reason);
                    engine.push(cache);
                }
            }
        }
        if !problems.is_empty() {
            bail!("freshet cannot cache these queries ([caches] strict = true):\n  {}", problems.join("\n  "));
        }
        tables.sort();
        tables.dedup();
        Ok(Built { engine, dataflow, control_rx, tables })
    }

    /// Checks the upstream feeds the tables the caches read, then starts the fill source
    /// (and the replica's copy), the binlog stream's task, the writer and its supervisor, and
    /// the freshness check.
    async fn spawn_tasks(config: &Config, built: Built, connected: Connected) -> anyhow::Result<()> {
        let Built { engine, dataflow, control_rx, tables } = built;
        let engine = &engine;
        let Connected { database, mut conn, opts, server_id, stream_config, followed, store, mut stream, resume } = connected;
        // Before the stream has read anything: it takes these at its first group boundary,
        // ahead of every batch (cdc's `follow`; the writer waits for that announcement).
        for t in &tables {
            followed.add(t);
        }
        let table_refs: Vec<&str> = tables.iter().map(String::as_str).collect();
        freshet_cdc::check_upstream(&mut conn, &database, &table_refs).await.context("the upstream cannot feed freshet's caches")?;
        let _ = conn.disconnect().await;
        let fills = UpstreamFills::new(opts.clone(), &database, stream.flavor(), stream.table_infos(), FillConfig::default());
        let replica = match (store, resume) {
            (Some(store), Some(resume)) => {
                let batch = config.replica.copy_batch_rows;
                let r = replica::Replica::start(store, opts.clone(), &database, stream.table_infos(), &tables, batch, resume)?;
                let _ = engine.replica.set(r.clone());
                Some(r)
            }
            _ => None,
        };
        stream.use_lag(engine.lag_handle());
        freshet_cdc::spawn_position_poll(opts.clone(), stream.flavor().current_position_sql(), engine.lag_handle());
        let (events, _) = stream.spawn(4096);
        info!(caches = config.caches.len(), server_id, database = %database, "cache engine started");
        let task = writer::Writer::new(engine.clone(), dataflow, fills, replica, opts, stream_config);
        let writer = tokio::spawn(task.run(events, control_rx));
        let supervised = engine.clone();
        tokio::spawn(async move {
            // The writer only returns when the engine is dropped. If it panicked (a bug), the
            // views are frozen: stop serving them rather than serve stale answers.
            if let Err(e) = writer.await
                && e.is_panic()
            {
                tracing::error!("the cache writer stopped with a panic; every cached read is relayed from now on");
                supervised.stream_up.store(false, Ordering::Relaxed);
                supervised.fresh.store(false, Ordering::Relaxed);
                supervised.writer_dead.store(true, Ordering::Relaxed);
            }
        });
        engine.fresh.store(engine.caught_up(), Ordering::Relaxed);
        if let Some(w) = &engine.warm {
            w.start(engine);
        }
        let weak = Arc::downgrade(engine);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(FRESHNESS_CHECK);
            loop {
                tick.tick().await;
                let Some(engine) = weak.upgrade() else { return };
                engine.fresh.store(engine.caught_up(), Ordering::Relaxed);
            }
        });
        Ok(())
    }

    /// Compiles and installs one cache into the dataflow (start-up, or in the writer for
    /// CREATE CACHE).
    fn build(&self, dataflow: &mut Dataflow, spec: &CacheSpec, runtime: bool) -> Result<Arc<Cache>, String> {
        if self.by_name(&spec.name).is_some() {
            return Err(format!("a cache named {} exists already", spec.name));
        }
        let query = matching::classify(spec.query.as_bytes(), SqlMode::default());
        let pattern = Pattern::new(&query, dataflow.catalog())?;
        let view = dataflow.install_sql(&spec.query).map_err(|r| r.reason)?;
        let live = live_of(dataflow, view).ok_or("the view vanished while being installed")?;
        Ok(Arc::new(Cache {
            id: CacheId(self.next_id.fetch_add(1, Ordering::Relaxed) as u32),
            name: spec.name.clone(),
            sql: spec.query.clone(),
            runtime,
            pattern,
            live: RwLock::new(Ok(live)),
            hit_latency: LatencySketch::default(),
            hit_histogram: Histogram::default(),
            reads: ReadCounts::default(),
            hot: warm::HotKeys::new(self.settings.warm_keys),
        }))
    }

    fn unavailable(&self, spec: &CacheSpec, reason: String) -> Arc<Cache> {
        let query = matching::classify(spec.query.as_bytes(), SqlMode::default());
        let catalog = self.catalog();
        let pattern = Pattern::new(&query, &catalog).unwrap_or_else(|_| Pattern::never(&spec.query));
        Arc::new(Cache {
            id: CacheId(self.next_id.fetch_add(1, Ordering::Relaxed) as u32),
            name: spec.name.clone(),
            sql: spec.query.clone(),
            runtime: false,
            pattern,
            live: RwLock::new(Err(reason)),
            hit_latency: LatencySketch::default(),
            hit_histogram: Histogram::default(),
            reads: ReadCounts::default(),
            hot: warm::HotKeys::new(self.settings.warm_keys),
        })
    }

    fn push(&self, cache: Arc<Cache>) {
        self.caches.write().unwrap_or_else(|e| e.into_inner()).push(cache);
        // A shape relayed for want of a cache may match now.
        self.verdicts.retain(|e| matches!(e.verdict, Verdict::Cache { .. }));
    }

    /// Every cache, in creation order.
    pub fn caches(&self) -> Vec<Arc<Cache>> {
        self.caches.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn by_name(&self, name: &str) -> Option<Arc<Cache>> {
        self.caches.read().unwrap_or_else(|e| e.into_inner()).iter().find(|c| c.name.eq_ignore_ascii_case(name)).cloned()
    }

    pub fn by_id(&self, id: CacheId) -> Option<Arc<Cache>> {
        self.caches.read().unwrap_or_else(|e| e.into_inner()).iter().find(|c| c.id == id).cloned()
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Classifies a query's text within the configured bounds.
    pub fn classify<'q>(&self, sql: &'q [u8]) -> Query<'q> {
        matching::classify_bounded(sql, SqlMode::default(), self.settings.bounds)
    }

    /// The verdict entry for a classified query: remembered, or taken now (the full parse).
    pub fn verdict(&self, query: &Query<'_>) -> Arc<Entry> {
        if let Some(entry) = self.verdicts.get(&query.fingerprint) {
            return entry;
        }
        let caches = self.caches();
        let patterns: Vec<(CacheId, &Pattern)> = caches.iter().filter(|c| c.live().is_ok()).map(|c| (c.id, &c.pattern)).collect();
        let verdict = matcher::verdict(query, &patterns, &self.catalog());
        self.verdicts.insert(&query.fingerprint, verdict)
    }

    /// How fresh the caches are, computed now from what the writer has applied against the
    /// server's position (see [`Freshness`]).
    pub fn freshness(&self) -> Freshness {
        let lag = self.lag.get();
        let applied = freshet_dataflow::Position(self.applied.load(Ordering::Relaxed));
        let behind = self.lag.behind(applied);
        let stream_up = self.stream_up.load(Ordering::Relaxed) && !self.writer_dead.load(Ordering::Relaxed) && lag.connected;
        let polled = behind.polled_ago.is_some_and(|a| a <= freshet_cdc::lag::POLL_STALE);
        let known = (stream_up && polled).then_some(behind.lag);
        Freshness {
            applied,
            server: lag.server,
            lag: known,
            caught_up: known.is_some_and(|l| l <= self.settings.max_lag),
            stream_up,
            server_polled: polled,
        }
    }

    /// Replication lag as the gate sees it; None when the stream is down or re-establishing,
    /// or the server's position could not be read lately (then freshet cannot vouch for any
    /// freshness).
    pub fn lag(&self) -> Option<Duration> {
        self.freshness().lag
    }

    /// True when cached reads may be served: the binlog is caught up to within `max_lag`.
    pub fn caught_up(&self) -> bool {
        self.freshness().caught_up
    }

    /// The hit path's view of [`caught_up`](Engine::caught_up), at most
    /// [`FRESHNESS_CHECK`] old.
    pub fn fresh(&self) -> bool {
        self.fresh.load(Ordering::Relaxed)
    }

    pub fn lag_handle(&self) -> LagHandle {
        self.lag.clone()
    }

    /// Looks `params` up in `cache`, waiting up to the fill timeout for missing partitions.
    /// `slots`: which params feed each key column, for IN lists (None: the view's own).
    pub async fn lookup(&self, cache: &Cache, params: &[Value], slots: Option<&[Vec<usize>]>) -> Result<Arc<[Row]>, RelayReason> {
        let live = cache.live().map_err(|_| RelayReason::Unavailable)?;
        let look = || match slots {
            None => live.reader.lookup(params),
            Some(slots) => live.reader.lookup_in(slots, params),
        };
        // The common case, a hit, touches nothing of the fill machinery.
        match look().map_err(refused)? {
            Lookup::Hit(rows) => {
                cache.reads.hit.inc();
                cache.hot.sample_hit(&live.reader, slots, params);
                return Ok(rows);
            }
            Lookup::Miss(keys) => cache.hot.missed(&keys),
        }
        self.counters.fill_waits.inc();
        cache.reads.missed.inc();
        let mut filled = self.filled.subscribe();
        let deadline = tokio::time::Instant::now() + self.settings.fill_timeout;
        loop {
            self.wake.notify_one();
            // Subscribed before this look: a fill completing after it wakes the wait below.
            if let Lookup::Hit(rows) = look().map_err(refused)? {
                cache.reads.filled.inc();
                return Ok(rows);
            }
            match tokio::time::timeout_at(deadline, filled.changed()).await {
                Ok(Ok(())) => continue,
                _ => return Err(RelayReason::FillTimeout),
            }
        }
    }

    /// Ends the engine's tasks (the writer, with it the binlog stream and the fills) at
    /// shutdown; cached reads are relayed from then on.
    pub fn stop(&self) {
        if let Some(w) = &self.warm {
            w.save(self);
        }
        self.stream_up.store(false, Ordering::Relaxed);
        self.fresh.store(false, Ordering::Relaxed);
        let _ = self.control.send(writer::Control::Stop);
    }

    /// Wakes the writer to start fills for recorded misses.
    pub fn wake_writer(&self) {
        self.wake.notify_one();
    }

    pub fn columns(&self, key: &ColumnsKey) -> Option<Arc<Columns>> {
        self.columns.read().unwrap_or_else(|e| e.into_inner()).get(key).cloned()
    }

    /// Keeps the column definitions the upstream sent for a shape, if they are the cache's
    /// own (see [`Engine::check_capture`]; refused ones are counted and dropped, so one bad
    /// capture poisons nothing). Labels of ENUM and SET columns come from the catalog (the
    /// view holds their indexes).
    pub fn store_columns(&self, key: ColumnsKey, packets: Vec<Bytes>) {
        if let Err(why) = self.check_capture(&key, &packets) {
            self.counters.captures_refused.inc();
            tracing::debug!(reason = %why, "captured column definitions are not the cache's own; not kept");
            return;
        }
        let catalog = self.catalog();
        let mut render = Vec::with_capacity(packets.len());
        for p in &packets {
            let Ok(def) = ColumnDef::parse_with(p, key.extended) else { return };
            let labels = enum_labels(p, &def, &catalog);
            render.push(Column { def, labels });
        }
        let columns = Arc::new(Columns { packets, render, encodable: AtomicBool::new(true) });
        let mut map = self.columns.write().unwrap_or_else(|e| e.into_inner());
        // Bounded like the verdicts: shapes x charsets x protocols stay few in practice;
        // past the bound, start over rather than grow.
        if map.len() >= VERDICTS {
            map.clear();
        }
        map.insert(key, columns);
    }

    /// Column definitions describe the cache's own result only if there is one per result
    /// column and each column with an origin comes from the caches' database, from one of
    /// the cache's tables, and names a column the catalog has. A session whose names resolve
    /// elsewhere (another default database, a temporary table) is not let through to a
    /// capture by the routing checks; this is the second line.
    fn check_capture(&self, key: &ColumnsKey, packets: &[Bytes]) -> Result<(), String> {
        let cache = self.by_id(key.cache).ok_or("the cache is gone")?;
        let live = cache.live()?;
        let query = live.reader.query();
        if packets.len() != query.visible {
            return Err(format!("{} columns where the cache has {}", packets.len(), query.visible));
        }
        let catalog = self.catalog();
        let database = &self.settings.database;
        for p in packets {
            let (schema, org_table, org_name) = column_origin(p).ok_or("a column definition too short to read")?;
            if org_table.is_empty() && org_name.is_empty() {
                // An expression (COUNT(*), ...): no origin to check; its type is the plan's.
                continue;
            }
            if schema != *database && schema != database.to_lowercase() {
                return Err(format!("column {org_name} comes from database {schema}"));
            }
            if !query.tables.iter().any(|t| t.eq_ignore_ascii_case(&org_table)) {
                return Err(format!("column {org_name} comes from table {org_table}, which the cache does not read"));
            }
            if catalog.get(&org_table).and_then(|t| t.column_index(&org_name)).is_none() {
                return Err(format!("column {org_table}.{org_name} is not in the table freshet knows"));
            }
        }
        Ok(())
    }

    /// Evicts every cache (a write that bypassed the binlog may have changed anything) and
    /// returns once the writer has done it.
    pub async fn evict_all(&self) {
        let (reply, rx) = oneshot::channel();
        if self.control.send(writer::Control::EvictAll { reply }).is_ok() {
            let _ = rx.await;
        }
    }

    /// After DDL on `table` (None: on anything, e.g. after a reconnect): verdicts and column
    /// definitions that may depend on it are forgotten and taken anew on next use. Relay
    /// verdicts always go (a new table or column can make a query cacheable); cache verdicts
    /// and definitions only for the caches that read the table.
    fn forget_for_table(&self, table: Option<&str>) {
        let affected: Vec<CacheId> = self
            .caches()
            .iter()
            .filter(|c| match (table, c.live()) {
                (None, _) | (_, Err(_)) => true,
                (Some(t), Ok(live)) => live.reader.query().tables.iter().any(|x| x.eq_ignore_ascii_case(t)),
            })
            .map(|c| c.id)
            .collect();
        self.verdicts.retain(|e| matches!(e.verdict, Verdict::Cache { id, .. } if !affected.contains(&id)));
        self.columns.write().unwrap_or_else(|e| e.into_inner()).retain(|k, _| !affected.contains(&k.cache));
    }

    /// CREATE CACHE: compiles and installs `sql` under `name` (generated if None).
    pub async fn create(&self, name: Option<String>, sql: String) -> Result<Arc<Cache>, String> {
        let name = name.unwrap_or_else(|| format!("q_{:016x}", matching::classify(sql.as_bytes(), SqlMode::default()).fingerprint.hash));
        let (reply, rx) = oneshot::channel();
        let spec = CacheSpec { name, query: sql };
        self.control.send(writer::Control::Create { spec, reply }).map_err(|_| "the cache engine has stopped".to_string())?;
        rx.await.map_err(|_| "the cache engine has stopped".to_string())?
    }

    /// DROP CACHE: removes a cache and its view.
    pub async fn drop_cache(&self, name: &str) -> Result<(), String> {
        let cache = self.by_name(name).ok_or_else(|| format!("no cache named {name}"))?;
        self.caches.write().unwrap_or_else(|e| e.into_inner()).retain(|c| c.id != cache.id);
        let id = cache.id;
        self.verdicts.retain(|e| !matches!(e.verdict, Verdict::Cache { id: i, .. } if i == id));
        if let Ok(live) = cache.live() {
            let (reply, rx) = oneshot::channel();
            if self.control.send(writer::Control::Drop { view: live.view, reply }).is_ok() {
                let _ = rx.await;
            }
        }
        Ok(())
    }

    /// EXPLAIN CACHE: the plan of a cached query (by its text), or of any SELECT.
    pub async fn explain(&self, sql: String) -> Result<Vec<(String, String)>, String> {
        let query = matching::classify(sql.as_bytes(), SqlMode::default());
        let view = match &self.verdict(&query).verdict {
            Verdict::Cache { id, .. } => self.by_id(*id).and_then(|c| c.live().ok()).map(|l| l.view),
            Verdict::Relay { .. } => None,
        };
        let (reply, rx) = oneshot::channel();
        self.control.send(writer::Control::Explain { sql, view, reply }).map_err(|_| "the cache engine has stopped".to_string())?;
        rx.await.map_err(|_| "the cache engine has stopped".to_string())?
    }

    /// Bytes held by all views.
    pub fn memory_used(&self) -> u64 {
        let mut seen = std::collections::HashSet::new();
        self.caches().iter().filter_map(|c| c.live().ok()).filter(|l| seen.insert(l.view)).map(|l| l.reader.stats().bytes).sum()
    }
}

/// The configured replica id, or, for 0, the derived one plus the number of engines started
/// before in this process (tests run several in one process; each needs its own id).
fn replica_server_id(config: &Config) -> u32 {
    static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    if config.binlog.server_id != 0 {
        return config.binlog.server_id;
    }
    let n = STARTED.fetch_add(1, Ordering::Relaxed);
    config.binlog.effective_server_id().checked_add(n).unwrap_or(1_000_000 + n)
}

/// Why a lookup the view refuses is relayed: the view is gone, or the parameters cannot be
/// answered from it (types, NULL keys of a global aggregate, unmergeable lists).
fn refused(e: LookupError) -> RelayReason {
    match e {
        LookupError::NoView => RelayReason::Unavailable,
        _ => RelayReason::Parameter,
    }
}

fn live_of(dataflow: &Dataflow, view: ViewId) -> Option<Arc<Live>> {
    let reader = dataflow.reader(view)?;
    let cost_class = dataflow.cost(view).map_or("unknown", |c| c.class());
    Some(Arc::new(Live { view, reader, cost_class }))
}

/// (schema, org_table, org_name) of a column definition packet.
fn column_origin(packet: &[u8]) -> Option<(String, String, String)> {
    let mut c = crate::protocol::cursor::Cursor::new(packet);
    let mut field = || c.lenenc_bytes().ok().map(|b| String::from_utf8_lossy(b).into_owned());
    let (_catalog, schema, _table, org_table, _name, org_name) = (field()?, field()?, field()?, field()?, field()?, field()?);
    Some((schema, org_table, org_name))
}

/// ENUM/SET labels of a result column, from its origin table and column in the catalog.
fn enum_labels(packet: &[u8], def: &ColumnDef, catalog: &Catalog) -> Vec<String> {
    use crate::protocol::column::flags;
    if !def.has(flags::ENUM) && !def.has(flags::SET) {
        return Vec::new();
    }
    let mut c = crate::protocol::cursor::Cursor::new(packet);
    let mut field = || c.lenenc_bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
    let (_catalog, _schema, _table, org_table, _name, org_name) = (field(), field(), field(), field(), field(), field());
    let Some(table) = catalog.get(&org_table) else { return Vec::new() };
    let Some(i) = table.column_index(&org_name) else { return Vec::new() };
    match &table.columns[i].ty {
        freshet_dataflow::SqlType::Enum(labels) | freshet_dataflow::SqlType::Set(labels) => labels.clone(),
        _ => Vec::new(),
    }
}

// The slack covers one poll of the server's position and one re-evaluation of the gate.
const _: () = assert!(FRESHNESS_SLACK.as_millis() >= freshet_cdc::lag::POLL.as_millis() + FRESHNESS_CHECK.as_millis());
