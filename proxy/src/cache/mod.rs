//! The cache engine: the configured queries as dataflow views, kept fresh by the binlog, and
//! what sessions ask of them.
//!
//! [`Engine`] is three parts and a writer task:
//! - the [`registry`] (read-mostly): the caches (config and `CREATE CACHE`), their verdicts for
//!   query shapes (via [`matcher`]), the catalog, the column definitions captured from the
//!   upstream per query shape;
//! - the writer's [`handle`]: the control channel, the wake-up for misses, the count of
//!   completed fills a waiting read watches, the read-your-writes progress ([`ryw`]);
//! - the [`freshness`] gate: the applied position, whether the stream is up, the lag;
//! - the writer task ([`writer`]), the dataflow's single writer (batches and DDL from the
//!   [`source`], fills, installs), which holds the other ends of these parts and changes them
//!   only through their methods. With `[fill] source = "replica"` it also applies the local
//!   replica ([`replica`]) before the views.
//!
//! [`Engine::start`] is three steps: connect (the upstream, its checks, the binlog stream),
//! build (the catalog, the dataflow, the engine and every cache), spawn (the writer, its
//! supervisor, the position poll, the freshness check, the warm restart). Does not own: the
//! wire protocol of a hit (`session::cached`), routing a read ([`route`]), admin SQL
//! rendering (`session::admin`).
//!
//! Invariants:
//! - a read is answered from a view only while the gate says caught up: the stream connected
//!   and verified, the server's position read lately, and the oldest change the server has
//!   and the views do not at most `[consistency] max_lag` old — so an answer reflects the
//!   server as of at most `max_lag` + [`FRESHNESS_SLACK`] ago (otherwise relayed,
//!   [`RelayReason::Lag`]);
//! - a miss waits at most `[fill] timeout` for its fill, then is relayed while the fill goes on;
//! - nothing here blocks a session on the writer: lookups read published state, the writer is
//!   reached through a channel and replies to control requests only;
//! - column definitions are the upstream's own packets for that query shape and session
//!   character set, captured from a relayed answer, never built by freshet.

pub mod access;
pub mod freshness;
pub mod handle;
pub mod latency;
pub mod matcher;
mod metrics;
pub mod params;
pub mod registry;
pub mod replica;
pub mod route;
pub mod ryw;
pub mod source;
pub mod warm;
mod writer;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use tokio::task::AbortHandle;
use tracing::{info, warn};

use freshet_cdc::{FillConfig, FollowedTables, LagHandle, StreamConfig, UpstreamFills};
use freshet_config::{CacheSpec, Config};
use freshet_dataflow::{ByteSize, Catalog, Dataflow, Lookup, LookupError, Names, Rows, Value};

pub use self::freshness::{FRESHNESS_CHECK, FRESHNESS_SLACK, Freshness, FreshnessGate};
use self::handle::{WriterEnds, WriterHandle};
pub use self::registry::{Cache, Columns, ColumnsKey, ColumnsMemo, Live, ReadCounts, Registry};
use self::route::Entry;
pub use self::route::RelayReason;
use self::source::BinlogSource;
pub use crate::matching::CacheId;
use crate::matching::{self, Query, SqlMode};
use crate::metrics::Counter;

/// The longest an admin statement that compiles a query waits for the views to apply what the
/// server has logged ([`Engine::caught_up_with_server`]).
const ADMIN_CATCH_UP: Duration = Duration::from_secs(5);

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
    /// The flavor's expression of a session's own last GTID, if it has one.
    pub session_gtid: Option<&'static str>,
    /// The flavor's question of how many temporary tables a session made, if it has one
    /// (asked before a read teaches an account's right: `Session::pass_gate`).
    pub temporary_tables_made: Option<&'static str>,
    /// The flavor's expression of a session's isolation level, which the probe reads.
    pub session_isolation: &'static str,
    /// `[warm] keys_per_cache`.
    pub warm_keys: usize,
}

impl Settings {
    fn new(config: &Config, database: &str, server_id: u32, flavor: &dyn freshet_cdc::flavor::Flavor, warm_keys: usize) -> Settings {
        Settings {
            database: database.to_string(),
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
            session_gtid: flavor.session_gtid(),
            temporary_tables_made: flavor.temporary_tables_made_sql(),
            session_isolation: flavor.session_isolation(),
            warm_keys,
        }
    }
}

/// Counters the engine keeps for /metrics and SHOW FRESHET STATUS.
#[derive(Default)]
pub struct EngineCounters {
    pub relayed: [Counter; RelayReason::ALL.len()],
    pub hits: Counter,
    pub batches: Counter,
    pub fills_started: Counter,
    pub fills_failed: Counter,
    /// Partitions a fill could not be installed for: a commit to them ended where the
    /// server's snapshot may disagree with its binlog position (asked again).
    pub fills_unsure: Counter,
    pub fill_waits: Counter,
    pub restarts: Counter,
    /// Tables whose rows a foreign key's action changed unlogged, their views evicted.
    pub cascades: Counter,
    /// Transactions the stream could not follow (a write logged as a statement, an XA COMMIT
    /// whose prepare it did not read, one over the size bound), each followed by evicting
    /// every cache.
    pub untrusted: Counter,
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

/// The cache engine; one per process, shared by all sessions. Three parts: the
/// [`Registry`] (what is cached), the [`WriterHandle`] (how sessions reach the writer), the
/// [`FreshnessGate`] (whether cached reads may be served); the writer task holds the other
/// ends and owns the dataflow.
pub struct Engine {
    pub settings: Settings,
    /// The caches, their verdicts, the catalog and the captured column definitions.
    pub registry: Arc<Registry>,
    writer: WriterHandle,
    /// Whether cached reads may be served.
    pub gate: Arc<FreshnessGate>,
    pub started: Instant,
    pub counters: Arc<EngineCounters>,
    /// `[fill] source = "replica"`: the local replica, once started.
    pub replica: OnceLock<Arc<replica::Replica>>,
    /// What accounts may read which caches, as the server answered.
    pub access: Arc<access::Access>,
    /// The warm restart, with `[warm] dir`.
    pub warm: Option<Arc<warm::Warm>>,
    /// The server's views as far as freshet knows them (those information_schema showed its
    /// account at the start, and those the binlog's DDL made since): a relayed text that names
    /// one may have run stored code (`Session::dispatch`).
    pub views: freshet_cdc::ViewNames,
    /// The engine's background tasks besides the writer (the server's position poll, the
    /// freshness check, the warm restart's), ended by [`Engine::stop`].
    tasks: Mutex<Vec<AbortHandle>>,
}

/// What [`Engine::build_caches`] made: the engine with its caches, the dataflow they live
/// in (the writer's from then on), the writer's end of the control channel, and the tables
/// the caches read (sorted, once each).
struct Built {
    engine: Arc<Engine>,
    dataflow: Dataflow,
    ends: WriterEnds,
    tables: Vec<String>,
}

/// What [`Engine::connect`] opened: the upstream connection (kept for the tables' checks),
/// the binlog stream, and the replica's store when fills come from it.
struct Connected {
    database: String,
    /// How the server compares the names of tables and databases.
    names: Names,
    conn: mysql_async::Conn,
    opts: mysql_async::Opts,
    server_id: u32,
    stream_config: StreamConfig,
    /// The tables the stream decodes (those the caches read, added once they are built).
    followed: FollowedTables,
    store: Option<Arc<freshet_replica::ReplicaStore>>,
    stream: freshet_cdc::BinlogStream,
    resume: Option<replica::Resume>,
    views: freshet_cdc::ViewNames,
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
        // With 0 (Linux's default) names are case-sensitive: `stories` and `Stories` are two
        // tables. With 2 they are kept as created and compared without case, so a row event's
        // name may differ in case from the catalog's: only 0 compares them as they are.
        let (lower, canonical): (Option<u8>, Option<String>) =
            mysql_async::prelude::Queryable::query_first(&mut conn, "SELECT @@lower_case_table_names, DATABASE()")
                .await
                .context("reading lower_case_table_names")?
                .unwrap_or_default();
        // The database as the server names it: where names are folded, `Folded_Db` in the url
        // is `folded_db` in the binlog and in information_schema.
        let database = canonical.unwrap_or(database);
        let names = Names { case_sensitive: lower == Some(0), database: Some(database.clone()) };
        let server_id = replica_server_id(config);
        let mut stream_config = StreamConfig::new(&database, server_id);
        stream_config.names_case_sensitive = names.case_sensitive;
        // A transaction is held until its commit: at most a quarter of the views' budget of
        // it (at least 16 MiB); a larger one empties every cache at its commit instead.
        stream_config.max_batch_bytes = usize::try_from(config.memory.limit.bytes() / 4).unwrap_or(usize::MAX).max(16 << 20);
        // Only the tables caches read are decoded; the writer adds those of later caches.
        let followed = FollowedTables::default();
        stream_config.tables = Some(followed.clone());
        // `[fill] source = "replica"`: the stream resumes at the replica's position (replica.rs).
        let store = match (&config.fill.source, &config.replica.path) {
            (freshet_config::FillSourceKind::Replica, Some(path)) => {
                let memory = freshet_dataflow::ByteSize(config.replica.memory.bytes());
                Some(replica::open(path, &database, names.case_sensitive, memory)?)
            }
            _ => None,
        };
        // Views made from the stream's start on are the stream's to add; those made before, the
        // server's list (read after the start, so that none falls between the two).
        let views = freshet_cdc::ViewNames::default();
        stream_config.views = Some(views.clone());
        let (stream, resume) = replica::connect_stream(store.as_deref(), opts.clone(), stream_config.clone(), &mut conn)
            .await
            .context("starting the binlog stream")?;
        let known: Vec<String> = mysql_async::prelude::Queryable::query(
            &mut conn,
            format!("SELECT TABLE_NAME FROM information_schema.VIEWS LIMIT {}", freshet_cdc::views::MAX_NAMES + 1),
        )
        .await
        .context("reading the server's views")?;
        for name in &known {
            views.add(name);
        }
        Ok(Connected { database, names, conn, opts, server_id, stream_config, followed, store, stream, resume, views })
    }

    /// The catalog of the stream's tables, the dataflow, the engine, and every `[[cache]]`
    /// built into them; also the writer's ends (for the writer) and the tables the caches
    /// read, sorted.
    fn build_caches(config: &Config, connected: &Connected) -> anyhow::Result<Built> {
        let Connected { database, server_id, stream, names, views, .. } = connected;
        let mut catalog = Catalog::with_names(names.clone());
        for table in stream.tables() {
            // A table whose schema the dataflow refuses (e.g. DECIMAL(65)) is simply not
            // available to cached queries; compiling one that reads it says so.
            let _ = catalog.add(table.clone());
        }
        let mut dataflow = Dataflow::new(catalog.clone(), ByteSize(config.memory.limit.bytes()));
        dataflow.set_applied(stream.delivered().position()?);
        let (writer, ends) = handle::channel(dataflow.applied());
        // Without `[warm] dir` nothing would read the record of hot keys: keep none.
        let warm_keys = if config.warm.dir.is_some() { config.warm.keys_per_cache as usize } else { 0 };
        let verdict_bytes = usize::try_from(config.memory.query_shapes.bytes()).unwrap_or(usize::MAX);
        let engine = Arc::new(Engine {
            settings: Settings::new(config, database, *server_id, stream.flavor(), warm_keys),
            registry: Arc::new(Registry::new(database.clone(), warm_keys, verdict_bytes, catalog)),
            writer,
            gate: Arc::new(FreshnessGate::new(config.consistency.max_lag, dataflow.applied())),
            started: Instant::now(),
            counters: Arc::default(),
            replica: OnceLock::new(),
            access: Arc::new(access::Access::new(config.consistency.max_privilege_age)),
            warm: warm::Warm::new(&config.warm, database),
            views: views.clone(),
            tasks: Mutex::new(Vec::new()),
        });
        let registry = &engine.registry;
        let mut problems = Vec::new();
        let mut tables: Vec<String> = Vec::new();
        for spec in &config.caches {
            match registry.build(&mut dataflow, spec, false) {
                Ok(cache) => {
                    if let Ok(live) = cache.live()
                        && let Some(q) = dataflow.query(live.view)
                    {
                        tables.extend(q.tables.iter().cloned());
                    }
                    registry.add(cache);
                }
                Err(reason) if config.cache_policy.strict => problems.push(format!("[[cache]] {}: {reason}", spec.name)),
                Err(reason) => {
                    warn!(cache = %spec.name, %reason, "cache cannot be built; its queries are relayed ([caches] strict = false)");
                    registry.add(registry.unavailable(spec, reason));
                }
            }
        }
        if !problems.is_empty() {
            bail!("freshet cannot cache these queries ([caches] strict = true):\n  {}", problems.join("\n  "));
        }
        tables.sort();
        tables.dedup();
        Ok(Built { engine, dataflow, ends, tables })
    }

    /// Checks the upstream feeds the tables the caches read, then starts the fill source
    /// (and the replica's copy), the binlog stream's task, the writer and its supervisor, and
    /// the freshness check.
    async fn spawn_tasks(config: &Config, built: Built, connected: Connected) -> anyhow::Result<()> {
        let Built { engine, dataflow, ends, tables } = built;
        let engine = &engine;
        let Connected { database, mut conn, opts, server_id, stream_config, followed, store, stream, resume, .. } = connected;
        // Before the stream has read anything: it takes these at its first group boundary,
        // ahead of every batch (cdc's `follow`; the writer waits for that announcement).
        for t in &tables {
            followed.add(t);
        }
        let table_refs: Vec<&str> = tables.iter().map(String::as_str).collect();
        freshet_cdc::check_upstream(&mut conn, &database, &table_refs).await.context("the upstream cannot feed freshet's caches")?;
        let _ = conn.disconnect().await;
        let fills = UpstreamFills::new(opts.clone(), &database, stream.flavor(), stream.table_infos(), FillConfig::default())
            .names_case_sensitive(stream_config.names_case_sensitive)
            .watch_server(engine.gate.lag_handle(), stream.flavor().identity_sql());
        let unknown_until = match &resume {
            Some(replica::Resume::Resumed(end)) => Some(*end),
            _ => None,
        };
        let replica = match (store, resume) {
            (Some(store), Some(resume)) => {
                let batch = config.replica.copy_batch_rows;
                let r =
                    replica::Replica::start(store, opts.clone(), stream.table_infos(), &tables, batch, resume, engine.gate.lag_handle())?;
                let _ = engine.replica.set(r.clone());
                Some(r)
            }
            _ => None,
        };
        let flavor = stream.flavor();
        let poll = freshet_cdc::spawn_position_poll(
            opts.clone(),
            flavor.current_position_sql(),
            flavor.identity_sql(),
            flavor.binlog_session_setup(stream_config.heartbeat),
            engine.gate.lag_handle(),
        );
        engine.task(poll.abort_handle());
        let source = BinlogSource::new(opts, stream_config, engine.gate.lag_handle());
        let events = source.run_behind(stream, unknown_until);
        info!(caches = config.caches.len(), server_id, database = %database, "cache engine started");
        let outputs = writer::Outputs {
            registry: engine.registry.clone(),
            gate: engine.gate.clone(),
            signals: ends.signals,
            counters: engine.counters.clone(),
            access: engine.access.clone(),
        };
        let task = writer::Writer::new(dataflow, source, fills, replica, outputs);
        let writer = tokio::spawn(task.run(events, ends.control));
        let gate = engine.gate.clone();
        tokio::spawn(async move {
            // The writer returns at shutdown (or when the engine is dropped). If it panicked
            // (a bug), the views are frozen: stop serving them rather than serve stale answers.
            if let Err(e) = writer.await
                && e.is_panic()
            {
                tracing::error!("the cache writer stopped with a panic; every cached read is relayed from now on");
                gate.close();
            }
        });
        engine.gate.recheck();
        if let Some(w) = &engine.warm {
            engine.task(w.start(engine));
        }
        let gate = engine.gate.clone();
        let check = tokio::spawn(async move {
            let mut tick = tokio::time::interval(FRESHNESS_CHECK);
            loop {
                tick.tick().await;
                gate.recheck();
            }
        });
        engine.task(check.abort_handle());
        Ok(())
    }

    /// Keeps a background task's handle, for [`Engine::stop`].
    fn task(&self, task: AbortHandle) {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner()).push(task);
    }

    /// Every cache, in creation order.
    pub fn caches(&self) -> Vec<Arc<Cache>> {
        self.registry.caches()
    }

    pub fn by_name(&self, name: &str) -> Option<Arc<Cache>> {
        self.registry.by_name(name)
    }

    pub fn by_id(&self, id: CacheId) -> Option<Arc<Cache>> {
        self.registry.by_id(id)
    }

    /// [`Registry::caches_changed`](registry::Registry::caches_changed).
    pub fn caches_changed(&self) -> u64 {
        self.registry.caches_changed()
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.registry.catalog()
    }

    /// Classifies a query's text within the configured bounds.
    pub fn classify<'q>(&self, sql: &'q [u8]) -> Query<'q> {
        matching::classify_bounded(sql, SqlMode::default(), self.settings.bounds)
    }

    /// [`Engine::classify`], with the token of each literal (for a session to learn the text's
    /// shape, `matching::shape`).
    pub fn classify_with_tokens<'q>(&self, sql: &'q [u8]) -> (Query<'q>, Vec<matching::lexer::Token>) {
        matching::classify_with_tokens(sql, self.settings.bounds)
    }

    /// The verdict entry for a classified query: remembered, or taken now (the full parse).
    pub fn verdict(&self, query: &Query<'_>) -> Arc<Entry> {
        self.registry.verdict(query)
    }

    /// How fresh the caches are, computed now (see [`Freshness`]).
    pub fn freshness(&self) -> Freshness {
        self.gate.freshness()
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
        self.gate.fresh()
    }

    pub fn lag_handle(&self) -> LagHandle {
        self.gate.lag_handle()
    }

    /// What the writer has processed, for read-your-writes.
    pub fn ryw(&self) -> &ryw::Progress {
        self.writer.ryw()
    }

    /// Looks `params` up in `cache`, waiting up to the fill timeout for missing partitions.
    /// `slots`: which params feed each key column, for IN lists (None: the view's own).
    pub async fn lookup(&self, cache: &Cache, params: &[Value], slots: Option<&[Vec<usize>]>) -> Result<Rows, RelayReason> {
        let live = cache.live().map_err(|_| RelayReason::Unavailable)?;
        let look = || match slots {
            None => live.reader.lookup(params),
            Some(slots) => live.reader.lookup_in(slots, params),
        };
        // The common case, a hit, touches nothing of the fill machinery.
        let mut filled = self.writer.fills();
        // A read is counted a miss (and its keys remembered as missed) at its first hole.
        let mut missed = false;
        match look() {
            Ok(Lookup::Hit(rows)) => {
                cache.reads.hit.inc();
                cache.hot.sample_hit(&live.reader, slots, params);
                return Ok(rows);
            }
            Ok(Lookup::Miss(keys)) => self.first_miss(cache, &mut missed, &keys),
            Err(LookupError::Unsettled) => {}
            Err(e) => return Err(refused(e)),
        }
        let deadline = tokio::time::Instant::now() + self.settings.fill_timeout;
        loop {
            self.writer.wake();
            // Subscribed before this look: a fill completing after it wakes the wait below.
            match look() {
                // Answered after a fill, or (no hole met) after partitions settled: a hit then.
                Ok(Lookup::Hit(rows)) if missed => {
                    cache.reads.filled.inc();
                    return Ok(rows);
                }
                Ok(Lookup::Hit(rows)) => {
                    cache.reads.hit.inc();
                    return Ok(rows);
                }
                // Fills are failing: the miss is recorded for when they come back; this read
                // is the server's meanwhile.
                Ok(Lookup::Miss(keys)) if self.writer.fills_failing(live.view) => {
                    self.first_miss(cache, &mut missed, &keys);
                    return Err(RelayReason::FillFailing);
                }
                Ok(Lookup::Miss(keys)) => {
                    self.first_miss(cache, &mut missed, &keys);
                    if !matches!(tokio::time::timeout_at(deadline, filled.changed()).await, Ok(Ok(()))) {
                        return Err(RelayReason::FillTimeout);
                    }
                }
                // Partitions of the read show different states: the writer republishes them
                // within its step, or the stream reaches a fill's position within a few.
                Err(LookupError::Unsettled) if tokio::time::Instant::now() + UNSETTLED_PAUSE < deadline => {
                    tokio::time::sleep(UNSETTLED_PAUSE).await
                }
                Err(LookupError::Unsettled) => return Err(RelayReason::Unsettled),
                Err(e) => return Err(refused(e)),
            }
        }
    }

    /// A read met a hole: counted a miss (and its keys remembered as missed) the first time.
    fn first_miss(&self, cache: &Cache, missed: &mut bool, keys: &[freshet_dataflow::Key]) {
        if !std::mem::replace(missed, true) {
            cache.hot.missed(keys);
            self.counters.fill_waits.inc();
            cache.reads.missed.inc();
        }
    }

    /// Ends the engine's tasks at shutdown: the writer (with it the binlog stream and the
    /// fills), the server's position poll, the freshness check, the replica's copy and the
    /// warm restart's (after one last save); cached reads are relayed from then on.
    pub fn stop(&self) {
        if let Some(w) = &self.warm {
            w.save(self);
        }
        self.gate.close();
        let _ = self.writer.send(writer::Control::Stop);
        if let Some(r) = self.replica.get() {
            r.stop();
        }
        for task in self.tasks.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            task.abort();
        }
    }

    /// Wakes the writer to start fills for recorded misses.
    pub fn wake_writer(&self) {
        self.writer.wake();
    }

    /// Changes with every completed fill and eviction (subscribe before looking).
    pub fn fills(&self) -> tokio::sync::watch::Receiver<u64> {
        self.writer.fills()
    }

    pub fn columns(&self, key: &ColumnsKey) -> Option<Arc<Columns>> {
        self.registry.columns(key)
    }

    /// [`Registry::columns_forgotten`]: what a capture notes before its query goes upstream.
    pub fn columns_forgotten(&self) -> u64 {
        self.registry.columns_forgotten()
    }

    /// [`Engine::columns`] through a session's memo ([`Registry::columns_memo`]).
    pub fn columns_memo(&self, memo: &mut ColumnsMemo, key: &ColumnsKey) -> Option<Arc<Columns>> {
        self.registry.columns_memo(memo, key)
    }

    /// Keeps the column definitions the upstream sent for a shape, if they are the cache's
    /// own (see [`Registry::store_columns`]; refused ones are counted and dropped), with the
    /// status flags of the reply they came in (`Columns::plan`).
    pub fn store_columns(&self, key: ColumnsKey, packets: Vec<Bytes>, status: u16, noted: u64) {
        if let Err(why) = self.registry.store_columns(key, packets, status, noted) {
            self.counters.captures_refused.inc();
            tracing::debug!(reason = %why, "captured column definitions are not the cache's own; not kept");
        }
    }

    /// Evicts every cache (a write that bypassed the binlog may have changed anything) and
    /// returns once the writer has done it.
    pub async fn evict_all(&self) {
        let _ = self.writer.ask(|reply| writer::Control::EvictAll { reply }).await;
    }

    /// CREATE CACHE: compiles and installs `sql` under `name` (generated if None).
    pub async fn create(&self, name: Option<String>, sql: String) -> Result<Arc<Cache>, String> {
        let name = name.unwrap_or_else(|| format!("q_{:016x}", matching::classify(sql.as_bytes(), SqlMode::default()).fingerprint.hash));
        let spec = CacheSpec { name, query: sql };
        self.caught_up_with_server().await;
        self.writer.ask(|reply| writer::Control::Create { spec, reply }).await.map_err(|_| STOPPED.to_string())?
    }

    /// Waits until the views have applied what the server had logged when it was called, at
    /// most [`ADMIN_CATCH_UP`]: CREATE CACHE and EXPLAIN CACHE then compile against the schema
    /// the session's own DDL just gave the server (a migration creates a table, then its cache),
    /// not against a catalog the stream has not brought up to it. Past the wait they compile
    /// against what is applied, as before.
    async fn caught_up_with_server(&self) {
        let mut target = ryw::Target::ServerAt(Instant::now());
        let _ = self.await_own_write(&mut target, self.ryw().era(), ADMIN_CATCH_UP).await;
    }

    /// DROP CACHE: removes a cache and its view.
    pub async fn drop_cache(&self, name: &str) -> Result<(), String> {
        let cache = self.by_name(name).ok_or_else(|| format!("no cache named {name}"))?;
        self.registry.remove(cache.id);
        if let Ok(live) = cache.live() {
            let _ = self.writer.ask(|reply| writer::Control::Drop { view: live.view, reply }).await;
        }
        Ok(())
    }

    /// EXPLAIN CACHE: which cache answers the read, if any (the `cache` line), then the plan
    /// of that cache, or of the read as it would be cached. The cache is the one whose binding
    /// would answer the read (`route::answering`), not the first of its shape: a read with none
    /// of its caches' constants is relayed, and so said.
    pub async fn explain(&self, sql: String) -> Result<Vec<(String, String)>, String> {
        self.caught_up_with_server().await;
        let query = matching::classify(sql.as_bytes(), SqlMode::default());
        let answering = route::answering(&self.verdict(&query).verdict, &query).and_then(|id| self.by_id(id));
        let (said, view) = match answering {
            Some(cache) => match cache.live() {
                Ok(live) => (format!("{} answers this read", cache.name), Some(live.view)),
                Err(why) => (format!("no cache answers this read: {} matches it but has no view ({why})", cache.name), None),
            },
            None => ("no cache answers this read: the plan below is the one it would have as a cache".to_string(), None),
        };
        let explained = self.writer.ask(|reply| writer::Control::Explain { sql, view, reply }).await.map_err(|_| STOPPED.to_string())?;
        explained.map(|lines| std::iter::once(("cache".to_string(), said)).chain(lines).collect())
    }

    /// Bytes held by all views.
    pub fn memory_used(&self) -> u64 {
        self.registry.memory_used()
    }
}

/// How long a read whose partitions show different states of the server
/// ([`LookupError::Unsettled`]) waits before it looks again: about one of the writer's steps.
const UNSETTLED_PAUSE: Duration = Duration::from_millis(1);

/// What an admin statement answers once the writer is gone.
const STOPPED: &str = "the cache engine has stopped";

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
        LookupError::TooLarge => RelayReason::TooLarge,
        LookupError::Backlog => RelayReason::FillBacklog,
        LookupError::Raced => RelayReason::FillRaced,
        _ => RelayReason::Parameter,
    }
}
