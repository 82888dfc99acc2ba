//! The local replica as the engine's second fill source (`[fill] source = "replica"`).
//!
//! Owns: opening the store, choosing where the binlog stream starts (the store's position, so a
//! restart resumes instead of re-copying), registering the tables cached queries read, running
//! the copy in the background (retried with backoff), and deciding per fill whether the replica
//! can answer it. Does not own: the store's layout and invariants (`freshet_replica::store`),
//! the order of applying (the writer applies each batch here *before* the views).
//!
//! Rules that keep answers exact:
//! - A fill goes to the replica only if every table it scans is copied and the store has
//!   applied past the copy's snapshot; otherwise it goes to the upstream (the store answers
//!   "not ready" itself too, so a race costs a retry, never a wrong row).
//! - A gap in the stream (resumed at the server's current position, or an untrusted
//!   transaction) leaves the store without some changes: every table is reset and copied again.
//! - DDL that changes a replicated table's columns rewrites its stored rows in place when the
//!   primary key is kept (`freshet_replica::store` `reshape`: unchanged columns kept, the others
//!   read from the upstream), else drops them and copies the table again; its fills go to the
//!   upstream until that is done, so rows of the old shape are never served. A column counts as
//!   unchanged only with the same name, type, nullability, collation and decode facts. TRUNCATE
//!   (no row events) drops the rows; a dropped table is forgotten, and copied again if it is
//!   created again.
//! - A table a runtime `CREATE CACHE` reads is registered when the writer handles the stream's
//!   announcement that it carries the table (`Replica::follow`), so the store applies every
//!   later transaction to it, and copied in the background like the others; the copy's
//!   snapshot is opened after that point, so the usual copy rules make it exact. At start, tables
//!   stored by an earlier run and not replicated by this one are dropped (the stream skipped
//!   them).
//! - A table with a text column in a character set the binlog decoder reads lossily
//!   (`TableInfo::inexact_text`: ascii, and every one but utf8mb4, utf8mb3, latin1, ucs2,
//!   utf16 and utf32) is not replicated: the copy reads the server's conversion of its text,
//!   the stream the bytes as UTF-8, so the stream's images would neither find the copied rows
//!   by key nor hold what the server holds (keys merged: several rows read as one string).
//! - An error applying a batch stops the replica for this run (fills go upstream) rather than
//!   let it drift from the views.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use freshet_cdc::{BinlogPos, BinlogStream, DdlKind, LagHandle, StartAt, StreamConfig, TableInfo};
use freshet_dataflow::{Batch, ByteSize, FillError, FillRequest, FillResponse, Position};
use freshet_replica::store::Altered;
use freshet_replica::{CopyFigures, CopyState, CopyStats, ReplicaMemory, ReplicaStore, SnapshotConfig, copy_tables};
use mysql_async::Opts;
use tokio::sync::Notify;
use tracing::{info, warn};

/// The engine's replica (see the module header).
pub struct Replica {
    store: Arc<ReplicaStore>,
    opts: Opts,
    database: String,
    /// The tables cached queries read (those replicated when they exist and have a key); grows
    /// when `CREATE CACHE` reads a new one ([`Replica::follow`]).
    wanted: std::sync::Mutex<Vec<String>>,
    /// Every table of the database as last known (the stream's at start, then each DDL's), so
    /// that a table a new cache reads can be registered.
    known: std::sync::Mutex<HashMap<String, TableInfo>>,
    /// What the copy needs of each replicated table, by the server's name for it.
    infos: std::sync::Mutex<HashMap<String, TableInfo>>,
    cfg: SnapshotConfig,
    stats: Arc<CopyStats>,
    /// Set after a failed apply: the store no longer follows the stream.
    broken: AtomicBool,
    /// Wakes the copy task (tables to copy again).
    recopy: Arc<Notify>,
    /// Fills answered from the store.
    fills: AtomicU64,
    /// The copy task, ended by [`Replica::stop`].
    copy_task: std::sync::OnceLock<tokio::task::AbortHandle>,
    /// The stream's lag, which names the binlog file being read and when the server began it.
    lag: LagHandle,
    /// The file (sequence number, begun at) last recorded in the store with a position in it.
    noted_file: std::sync::Mutex<Option<(u32, u32)>>,
}

/// What the replica has done, for status and tests.
#[derive(Clone, Copy, Debug)]
pub struct ReplicaFigures {
    /// The copy's progress in this process (rows a previous run copied are not counted).
    pub copy: CopyFigures,
    /// Fills answered from the store.
    pub fills: u64,
    /// False after an error applying a batch (fills go upstream until restart).
    pub following: bool,
}

/// Whether `table`'s text is read exactly from the binlog (`TableInfo::inexact_text`); if not,
/// says so: the table is not replicated, its fills go to the upstream.
fn replicable_text(table: &str, info: &TableInfo) -> bool {
    let Some(column) = info.inexact_text() else { return true };
    warn!(
        table,
        column, "replica: table not replicated (the binlog's text of this column is not read exactly); its fills go to the upstream"
    );
    false
}

/// Opens the store at `path` for the tables of `database`, where tables whose names differ in
/// case are two tables if `case_sensitive` (the catalog's [`freshet_dataflow::Names`]), within
/// `memory` (`[replica] memory`).
pub(super) fn open(path: &Path, database: &str, case_sensitive: bool, memory: ByteSize) -> anyhow::Result<Arc<ReplicaStore>> {
    let store = ReplicaStore::open_within(path, ReplicaMemory::within(memory))
        .map_err(|e| anyhow::anyhow!("opening the replica at {}: {e}", path.display()))?;
    Ok(Arc::new(store.case_sensitive(case_sensitive).of_database(database)))
}

impl Replica {
    /// Registers the replicated tables (those of `tables` with a primary key) and starts the
    /// copy task; `resume` is how the stream started ([`connect_stream`]).
    pub(super) fn start(
        store: Arc<ReplicaStore>,
        opts: Opts,
        infos: HashMap<String, TableInfo>,
        tables: &[String],
        batch_rows: u32,
        resume: Resume,
        lag: LagHandle,
    ) -> anyhow::Result<Arc<Replica>> {
        let known = infos.clone();
        let mut replicated = HashMap::new();
        for t in tables {
            let Some((_, info)) = infos.iter().find(|(n, _)| store.same_table(n, t)) else { continue };
            if !replicable_text(t, info) {
                continue;
            }
            match store.register(&info.schema) {
                Ok(kept) => {
                    info!(table = %t, kept, "replica: table registered");
                    replicated.insert(info.schema.name.clone(), info.clone());
                }
                Err(e) => warn!(table = %t, error = %e, "replica: table not replicated; its fills go to the upstream"),
            }
        }
        // Tables of earlier runs that this one does not replicate: the stream is not applied
        // to them from here on, so their rows would be stale if a cache read them again.
        for gone in store.forget_unregistered()? {
            info!(table = %gone, "replica: table no longer replicated; its rows are dropped");
        }
        match resume {
            Resume::Fresh(p) => store.set_position(p)?,
            // The new position and the reset of every table in one write: stored alone first,
            // a kill before the reset would let the next start resume there and keep rows
            // that lack the changes in the gap.
            Resume::Gap(p) => {
                let schemas: Vec<&freshet_dataflow::TableSchema> = replicated.values().map(|i| &i.schema).collect();
                store.reset_tables(&schemas, Some(p))?;
                info!("replica: the stream has a gap; copying every table again");
            }
            // The backlog's age: the stream's (`BinlogSource::run_behind`).
            Resume::Resumed(_) => {}
        }
        let cfg = SnapshotConfig {
            batch_rows: batch_rows as usize,
            batch_bytes: store.batch_bytes(),
            stream: Some(lag.clone()),
            ..SnapshotConfig::default()
        };
        let replica = Arc::new(Replica {
            database: store.database().to_string(),
            store,
            opts,
            wanted: std::sync::Mutex::new(tables.to_vec()),
            known: std::sync::Mutex::new(known),
            infos: std::sync::Mutex::new(replicated),
            cfg,
            stats: Arc::new(CopyStats::default()),
            broken: AtomicBool::new(false),
            recopy: Arc::new(Notify::new()),
            fills: AtomicU64::new(0),
            copy_task: std::sync::OnceLock::new(),
            lag,
            noted_file: std::sync::Mutex::new(None),
        });
        let copy = tokio::spawn(copy_loop(Arc::downgrade(&replica)));
        let _ = replica.copy_task.set(copy.abort_handle());
        Ok(replica)
    }

    /// Ends the copy task (the engine's stop): nothing is copied from the upstream after
    /// shutdown; a copy cut short resumes from its last batch at the next start.
    pub(super) fn stop(&self) {
        if let Some(copy) = self.copy_task.get() {
            copy.abort();
        }
        let _ = self.note_stored_file();
    }

    /// [`Replica::note_file`] for the store's own position: the file a store that applied
    /// nothing since its copy would resume in. True once that file is recorded.
    fn note_stored_file(&self) -> bool {
        self.store.position().is_ok_and(|at| self.note_file(at))
    }

    /// Progress and use so far.
    pub fn figures(&self) -> ReplicaFigures {
        ReplicaFigures {
            copy: self.stats.snapshot(),
            fills: self.fills.load(Ordering::Relaxed),
            following: !self.broken.load(Ordering::Relaxed),
        }
    }

    /// Appends the replica's metrics (`freshet_replica_`) to `out`.
    pub fn render_metrics(&self, out: &mut String) {
        let f = self.figures();
        let gauges: [(&str, &str, &str, String); 10] = [
            ("freshet_replica_copy_rows_total", "counter", "Rows copied into the replica by this process.", f.copy.rows_copied.to_string()),
            (
                "freshet_replica_copy_bytes_total",
                "counter",
                "Bytes of rows copied into the replica by this process.",
                f.copy.bytes_copied.to_string(),
            ),
            (
                "freshet_replica_rewrite_rows_total",
                "counter",
                "Rows rewritten in place after DDL changed their table's columns (instead of copied again).",
                f.copy.rows_rewritten.to_string(),
            ),
            (
                "freshet_replica_copy_failures_total",
                "counter",
                "Copies that failed and were retried (the upstream unreachable, or reaching another server than the binlog stream).",
                f.copy.failures.to_string(),
            ),
            (
                "freshet_replica_copy_rows_estimated",
                "gauge",
                "What freshet_replica_copy_rows_total counts up to, about: rows copied when the latest copy started plus the server's estimate of the rows it has to copy.",
                f.copy.rows_estimated.to_string(),
            ),
            (
                "freshet_replica_copy_rows_per_second",
                "gauge",
                "Copy rate over the time spent copying.",
                format!("{:.0}", f.copy.rows_per_sec),
            ),
            ("freshet_replica_tables", "gauge", "Tables the replica keeps.", f.copy.tables_total.to_string()),
            ("freshet_replica_tables_copied", "gauge", "Tables whose copy is complete.", f.copy.tables_done.to_string()),
            (
                "freshet_replica_fills_total",
                "counter",
                "Fills answered from the replica (the others go to the upstream).",
                f.fills.to_string(),
            ),
            (
                "freshet_replica_following",
                "gauge",
                "1 while the replica applies the binlog; 0 after an error (fills go upstream).",
                u8::from(f.following).to_string(),
            ),
        ];
        for (name, kind, help, value) in gauges {
            crate::metrics::family(out, name, kind, help);
            crate::metrics::sample(out, name, &[], value);
        }
    }

    /// Lines for SHOW FRESHET STATUS.
    pub fn status_rows(&self) -> Vec<(&'static str, String)> {
        let f = self.figures();
        vec![
            ("fill_source", "replica".to_string()),
            ("replica_tables_copied", format!("{} of {}", f.copy.tables_done, f.copy.tables_total)),
            ("replica_rows_copied", format!("{} of about {}", f.copy.rows_copied, f.copy.rows_estimated)),
            ("replica_rows_rewritten", f.copy.rows_rewritten.to_string()),
            ("replica_copy_failures", f.copy.failures.to_string()),
            ("replica_copy_rows_per_second", format!("{:.0}", f.copy.rows_per_sec)),
            ("replica_fills", f.fills.to_string()),
            ("replica_following", if f.following { "yes" } else { "no" }.to_string()),
        ]
    }

    /// Applies one binlog transaction (before the views apply it).
    pub(super) fn apply(&self, batch: &Batch) {
        if self.broken.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = self.store.apply(batch) {
            warn!(error = %e, "replica: applying a transaction failed; fills go to the upstream until restart");
            self.broken.store(true, Ordering::Relaxed);
            return;
        }
        self.note_file(batch.position);
    }

    /// Records in the store the binlog file `at` is in and when the server began it, once per
    /// file, if the stream is reading that file still (it may have read on into the next: then
    /// a later position records its own). A resume checks it (`connect_stream`).
    fn note_file(&self, at: Position) -> bool {
        let Some((file, created)) = self.lag.file_created() else { return false };
        let Ok(read) = BinlogPos::new(file, 0).position() else { return false };
        let seq = |p: Position| (p.0 >> 32) as u32;
        if seq(read) != seq(at) {
            return false;
        }
        let mut noted = self.noted_file.lock().unwrap_or_else(|e| e.into_inner());
        if *noted == Some((seq(at), created)) {
            return true;
        }
        match self.store.set_file_created(seq(at), created) {
            Ok(()) => {
                *noted = Some((seq(at), created));
                true
            }
            Err(e) => {
                warn!(error = %e, "replica: recording the binlog file failed; a restart copies again");
                false
            }
        }
    }

    /// The stream's events up to `at` are applied, none of them a row change after the last
    /// batch (a schema change or a privilege statement ended the step): the store is as of
    /// `at`, so that fills dated there are answered.
    pub(super) fn passed(&self, at: Position) {
        if self.broken.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = self.store.advance_position(at) {
            warn!(error = %e, "replica: moving past a schema change failed; fills go to the upstream until restart");
            self.broken.store(true, Ordering::Relaxed);
            return;
        }
        self.note_file(at);
    }

    /// True if the replica can answer `req` now.
    pub(super) fn serves(&self, req: &FillRequest) -> bool {
        if self.broken.load(Ordering::Relaxed) || (req.scans.is_empty() && req.dim_scans.is_empty()) {
            return false;
        }
        self.store.can_answer(req)
    }

    /// Answers `req` from the store (RocksDB reads run off the async threads).
    pub(super) async fn fill(self: Arc<Self>, req: FillRequest) -> Result<FillResponse, FillError> {
        let store = self.store.clone();
        self.fills.fetch_add(1, Ordering::Relaxed);
        tokio::task::spawn_blocking(move || store.answer(&req))
            .await
            .unwrap_or_else(|e| Err(FillError::Unavailable(format!("replica fill task: {e}"))))
    }

    /// A new run of the stream starts at `start`, which may be lower than anything applied (a
    /// new binlog history: RESET MASTER, another server; see `Dataflow::restart_at`): the
    /// store's position moves there, so that a fill it answers before the next transaction is
    /// not dated in the old history, and every table is copied again.
    /// The position and the reset are one write: stored apart, a kill in between left the new
    /// start with every table still marked copied, rows of the old history that the next run
    /// would resume with.
    pub(super) fn restart_at(&self, start: Position) {
        self.reset_all(Some(start));
    }

    /// The stream skipped changes: every table is copied again.
    pub(super) fn gap(&self) {
        self.reset_all(None);
    }

    /// Every table copied again, and the store moved to `position` if given, in one durable
    /// write (`ReplicaStore::reset_tables`).
    fn reset_all(&self, position: Option<Position>) {
        let infos = self.infos.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let schemas: Vec<&freshet_dataflow::TableSchema> = infos.values().map(|i| &i.schema).collect();
        if let Err(e) = self.store.reset_tables(&schemas, position) {
            warn!(error = %e, "replica: reset failed");
            self.broken.store(true, Ordering::Relaxed);
        }
        info!("replica: the stream has a gap; copying every table again");
        self.recopy.notify_one();
    }

    /// Tables the stream now carries in every later batch (`StreamEvent::Following`, in stream
    /// order): those not replicated yet (a `CREATE CACHE` on a table no cache read) are
    /// registered here, so every later transaction is applied to them, and copied in the
    /// background; their fills go to the upstream until the copy is done and caught up.
    pub(super) fn follow(&self, tables: &[String]) {
        let mut infos = self.infos.lock().unwrap_or_else(|e| e.into_inner());
        let mut wanted = self.wanted.lock().unwrap_or_else(|e| e.into_inner());
        let mut added = false;
        for t in tables {
            if infos.keys().any(|k| self.store.same_table(k, t)) {
                continue;
            }
            if !wanted.iter().any(|w| self.store.same_table(w, t)) {
                wanted.push(t.clone());
            }
            let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            // Not there yet: a CREATE TABLE registers it (`schema_changed`).
            let Some(info) = known.iter().find(|(n, _)| self.store.same_table(n, t)).map(|(_, i)| i.clone()) else { continue };
            drop(known);
            if !replicable_text(t, &info) {
                continue;
            }
            // Rows kept from an earlier registration were not kept current since: copy again.
            let registered = self.store.register(&info.schema).and_then(|kept| if kept { self.store.reset(&info.schema) } else { Ok(()) });
            match registered {
                Ok(()) => {
                    info!(table = %t, "replica: table registered for a new cache; copying it");
                    infos.insert(info.schema.name.clone(), info);
                    added = true;
                }
                Err(e) => warn!(table = %t, error = %e, "replica: table not replicated; its fills go to the upstream"),
            }
        }
        if added {
            self.recopy.notify_one();
        }
    }

    /// DDL on a table cached queries read: a changed schema is applied to the stored rows in
    /// place when the store can (`ReplicaStore::alter`: columns dropped, added or changed, the
    /// primary key kept) or the table is copied again; a TRUNCATE (no row events: the rows are
    /// dropped here), a table renamed to or from the name (another table's rows may be under it
    /// now) or a table created again is copied again; a dropped table, or one the views refuse
    /// (an engine without snapshots), is forgotten until it is created again or can be cached.
    /// Either way it is not answered from until that is done.
    pub(super) fn schema_changed(&self, table: &str, kind: DdlKind, info: Option<&TableInfo>) {
        {
            let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            known.retain(|k, _| !self.store.same_table(k, table));
            if let Some(i) = info {
                known.insert(i.schema.name.clone(), i.clone());
            }
        }
        if !self.wanted.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|w| self.store.same_table(w, table)) {
            return;
        }
        let mut infos = self.infos.lock().unwrap_or_else(|e| e.into_inner());
        let old = infos.keys().find(|k| self.store.same_table(k, table)).cloned().and_then(|k| infos.remove(&k));
        // A table whose schema the views refuse (an engine without snapshots, whose copy could
        // not be consistent) is held as a dropped one is: its rows go, and it is copied again
        // once it can be (a copy under way would go on reading it without a snapshot).
        // Nor a table whose primary key the binlog gives otherwise than a SELECT, nor one
        // without a primary key (the store keys rows by it: one dropped by ALTER left the
        // table registered under its old key, rows of one old key merged), nor one with text
        // the binlog does not read exactly (`TableInfo::inexact_text`).
        let Some(info) = info.filter(|i| {
            i.schema.check().is_ok() && !i.schema.key_unreadable() && !i.schema.primary_key.is_empty() && i.inexact_text().is_none()
        }) else {
            if let Some(old) = old
                && let Err(e) = self.store.reset(&old.schema)
            {
                warn!(table, error = %e, "replica: dropping a table's rows failed");
                self.broken.store(true, Ordering::Relaxed);
            }
            return;
        };
        let altered = match (&old, kind) {
            // Rows removed without row events, or another table's under the name: also a DROP
            // whose name holds a table again when the stream reads its schema (created anew
            // after it, maybe with the same columns).
            (
                _,
                DdlKind::Truncate
                | DdlKind::RenamedFrom
                | DdlKind::RenamedTo
                | DdlKind::Cascaded
                | DdlKind::Drop
                | DdlKind::DatabaseDropped,
            ) => self.store.register(&info.schema).and_then(|_| self.store.reset(&info.schema)).map(|_| Altered::Recopy),
            (Some(old), _) => self.store.alter(&info.schema, &unchanged_columns(old, info)),
            (None, _) => self.store.register(&info.schema).map(|kept| if kept { Altered::Unchanged } else { Altered::Recopy }),
        };
        match altered {
            Ok(Altered::InPlace) => info!(table, ?kind, "replica: rewriting the table's rows to its new schema"),
            Ok(Altered::Recopy) => info!(table, ?kind, "replica: copying the table again"),
            Ok(Altered::Unchanged) => {}
            Err(e) => {
                // Its old rows and registration go too: fills must not read them.
                if let Some(old) = old
                    && let Err(e) = self.store.reset(&old.schema)
                {
                    warn!(table, error = %e, "replica: dropping a table's rows failed");
                    self.broken.store(true, Ordering::Relaxed);
                }
                warn!(table, error = %e, "replica: table no longer replicated; its fills go to the upstream");
                return;
            }
        }
        infos.insert(info.schema.name.clone(), info.clone());
        if !matches!(self.store.copy_state(table), Some(CopyState::Done { .. })) {
            self.recopy.notify_one();
        }
    }
}

/// For each column of `new`, its position in `old` if it is the same column: same name, type,
/// nullability, collation, padding and decoding, and not shorter (so its stored values are the
/// server's values for it: a longer VARCHAR changes none, a shorter one cuts those that do not
/// fit where the ALTER ran without strict mode, with no row event).
fn unchanged_columns(old: &TableInfo, new: &TableInfo) -> Vec<Option<usize>> {
    new.schema
        .columns
        .iter()
        .zip(&new.decode)
        .map(|(c, d)| {
            let o = old.schema.column_index(&c.name)?;
            let was = &old.schema.columns[o];
            let shorter = matches!((was.max_bytes, c.max_bytes), (Some(before), Some(now)) if now < before);
            (was.values_only() == c.values_only() && old.decode.get(o) == Some(d) && !shorter).then_some(o)
        })
        .collect()
}

/// Copies what is not copied, then waits for [`Replica::gap`] or a schema change to ask again.
async fn copy_loop(replica: std::sync::Weak<Replica>) {
    // Nothing before the first attempt of a run of failures, then 500 ms, doubling, at most 30 s.
    let mut backoff = freshet_cdc::Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
    // The stream describes its file within moments of connecting: noted before the copy, a
    // copy killed half way resumes (a position whose file has no record is copied again).
    for _ in 0..50 {
        match replica.upgrade() {
            Some(r) if !r.note_stored_file() => {}
            _ => break,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    loop {
        backoff.wait().await;
        let Some(r) = replica.upgrade() else { return };
        let infos: HashMap<String, TableInfo> = r.infos.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match copy_tables(r.opts.clone(), &r.database, &r.store, &infos, &r.cfg, &r.stats).await {
            Ok(_) => {
                let f = r.stats.snapshot();
                info!(rows = f.rows_copied, tables = f.tables_done, rows_per_sec = f.rows_per_sec as u64, "replica: tables copied");
                let _ = r.note_stored_file();
                backoff.reset();
                let recopy = r.recopy.clone();
                drop(r);
                recopy.notified().await;
            }
            Err(e) => {
                r.stats.failed();
                warn!(error = %e, retry_in = ?backoff.delay(), "replica: copy failed; it resumes from its last batch")
            }
        }
    }
}

/// How the stream started relative to the store.
pub(super) enum Resume {
    /// The store was new: it starts at the stream's start.
    Fresh(Position),
    /// The stream continues from the store's position: nothing is copied again. What the
    /// server wrote since, up to this position (its end at the resume), was written while no
    /// freshet ran, at instants no one saw.
    Resumed(Position),
    /// The store's position is no longer in the server's binlog (purged): every table is
    /// copied again, the stream starts at the server's current position.
    Gap(Position),
}

/// Connects the binlog stream: at the store's position when it has one (a restart resumes),
/// else at the server's current position.
pub(super) async fn connect_stream(
    store: Option<&ReplicaStore>,
    opts: Opts,
    cfg: StreamConfig,
    conn: &mut mysql_async::Conn,
) -> anyhow::Result<(BinlogStream, Option<Resume>)> {
    use mysql_async::prelude::Queryable;
    let Some(store) = store else {
        return Ok((BinlogStream::connect(opts, cfg, StartAt::Current).await?, None));
    };
    let stored = store.position()?;
    if stored > Position(0) {
        let version: Option<String> = conn.query_first("SELECT VERSION()").await?;
        let flavor = freshet_cdc::flavor::detect(version.as_deref().unwrap_or(""));
        let now = freshet_cdc::stream::current_position(conn, flavor.as_ref(), Duration::from_secs(10)).await?;
        let at = BinlogPos::from_position(stored, &now.file)?;
        // The file as the server had begun it when the position was applied: a file of that
        // name begun since (RESET MASTER) is a gap, which the stream finds at its first event.
        // With no record of it (a store that stopped before noting it, or one from before
        // files were noted) the position proves nothing: copied again.
        match store.file_created()?.filter(|&(seq, _)| u64::from(seq) == stored.0 >> 32) {
            Some((_, created)) => match BinlogStream::connect(opts.clone(), cfg.clone(), StartAt::At(at.clone())).await {
                Ok(mut s) => {
                    s.expect_file(&at.file, created);
                    info!(position = %at, "replica: resuming the binlog at the replica's position");
                    return Ok((s, Some(Resume::Resumed(now.position()?))));
                }
                Err(e) => warn!(position = %at, error = %e, "replica: cannot resume at the replica's position; copying again"),
            },
            None => warn!(position = %at, "replica: no record of when the position's binlog file was begun; copying again"),
        }
        let s = BinlogStream::connect(opts, cfg, StartAt::Current).await?;
        let start = s.delivered().position()?;
        return Ok((s, Some(Resume::Gap(start))));
    }
    let s = BinlogStream::connect(opts, cfg, StartAt::Current).await?;
    let start = s.delivered().position()?;
    Ok((s, Some(Resume::Fresh(start))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use freshet_cdc::schema::{Charset, ColumnDecode};
    use freshet_dataflow::{ColumnSchema, Row, SqlType, TableSchema, Value};

    fn info() -> TableInfo {
        let int = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 4, unsigned: false });
        let schema = TableSchema::new("t", vec![int("id"), int("k")], vec![0]);
        TableInfo { schema, decode: vec![ColumnDecode { charset: Charset::Utf8, binary_width: None }; 2] }
    }

    /// A start whose stored position was purged (`Resume::Gap`), killed at any instant (the
    /// store's crash hook refuses every durable step after the first `n`): the store never holds
    /// the new position with a table still marked copied at the old one. Its rows lack the
    /// changes in the gap, and the next start would resume at the new position and keep them.
    #[tokio::test]
    async fn a_start_after_a_gap_killed_at_any_instant_never_keeps_rows_from_before_the_gap() {
        let dir = std::env::temp_dir().join(format!("freshet-proxy-replica-gap-start-{}", std::process::id()));
        let opts = Opts::from_url("mysql://nobody@127.0.0.1:1/none").unwrap();
        let row: Row = vec![Value::Int(1), Value::Int(10)].into();
        let mut completed = false;
        for n in 0..16 {
            let _ = std::fs::remove_dir_all(&dir);
            {
                let store = open(&dir, "db", false, ReplicaMemory::DEFAULT_TOTAL).unwrap();
                store.register(&info().schema).unwrap();
                store
                    .write_copy_batch(&info().schema, store.copy_progress("t").unwrap().1, Position(5), std::slice::from_ref(&row), true)
                    .unwrap();
                store.apply(&Batch::new(Position(5))).unwrap();
                store.crash_after_steps(n);
                let infos = HashMap::from([("t".to_string(), info())]);
                if let Ok(r) = Replica::start(
                    store.clone(),
                    opts.clone(),
                    infos,
                    &["t".to_string()],
                    10,
                    Resume::Gap(Position(9)),
                    LagHandle::default(),
                ) {
                    r.stop();
                    completed = !r.broken.load(Ordering::Relaxed);
                }
            }
            // Reopened for the same database, or every table is new to it.
            let store = open(&dir, "db", false, ReplicaMemory::DEFAULT_TOTAL).unwrap();
            store.register(&info().schema).unwrap();
            let (pos, state) = (store.position().unwrap(), store.copy_state("t"));
            assert!(pos == Position(5) || pos == Position(9), "{pos:?}");
            if pos == Position(9) {
                assert_eq!(state, Some(CopyState::NotStarted), "killed after {n} steps");
            }
            if completed {
                break;
            }
        }
        assert!(completed, "the start never completed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A new binlog history (`restart_at`: RESET MASTER, another server) moves the store to the
    /// new stream's start, lower than anything applied, and copies every table again. Killed at
    /// any instant, the store never holds the new start with a table still marked copied: the
    /// next run would resume there and keep rows of the old history.
    #[tokio::test]
    async fn a_new_history_killed_at_any_instant_never_keeps_rows_of_the_old_one() {
        let dir = std::env::temp_dir().join(format!("freshet-proxy-replica-restart-at-{}", std::process::id()));
        let opts = Opts::from_url("mysql://nobody@127.0.0.1:1/none").unwrap();
        let row: Row = vec![Value::Int(1), Value::Int(10)].into();
        let mut completed = false;
        for n in 0..16 {
            let _ = std::fs::remove_dir_all(&dir);
            {
                let store = open(&dir, "db", false, ReplicaMemory::DEFAULT_TOTAL).unwrap();
                store.register(&info().schema).unwrap();
                store
                    .write_copy_batch(&info().schema, store.copy_progress("t").unwrap().1, Position(50), std::slice::from_ref(&row), true)
                    .unwrap();
                store.apply(&Batch::new(Position(50))).unwrap();
                let infos = HashMap::from([("t".to_string(), info())]);
                let r = Replica::start(
                    store.clone(),
                    opts.clone(),
                    infos,
                    &["t".to_string()],
                    10,
                    Resume::Resumed(Position(50)),
                    LagHandle::default(),
                )
                .unwrap();
                store.crash_after_steps(n);
                r.restart_at(Position(3));
                r.stop();
                completed = !r.broken.load(Ordering::Relaxed);
            }
            // Reopened for the same database, or every table is new to it.
            let store = open(&dir, "db", false, ReplicaMemory::DEFAULT_TOTAL).unwrap();
            store.register(&info().schema).unwrap();
            let (pos, state) = (store.position().unwrap(), store.copy_state("t"));
            assert!(pos == Position(50) || pos == Position(3), "{pos:?}");
            if pos == Position(3) {
                assert_eq!(state, Some(CopyState::NotStarted), "killed after {n} steps");
            }
            if completed {
                break;
            }
        }
        assert!(completed, "restart_at never completed");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
