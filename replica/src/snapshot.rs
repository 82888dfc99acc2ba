//! The snapshot: copies the replicated tables from the upstream into the store, resumably.
//!
//! Owns: reading each table in primary-key batches inside consistent-snapshot transactions
//! (placed in the binlog by `crate::fence`; one is kept at most
//! [`SnapshotConfig::max_snapshot_age`], so DDL on a table being copied waits for at most that,
//! not for the whole copy: a snapshot transaction holds the metadata lock of every table it
//! read), handing each batch to
//! [`ReplicaStore::write_copy_batch`] (rows and progress in one write), and the progress
//! figures ([`CopyStats`]) and log lines. Does not own: applying the stream (the engine's
//! writer calls [`ReplicaStore::apply`] meanwhile), deciding which tables (the caller passes the
//! tables the cached queries read).
//!
//! # Why resuming is exact
//! A batch is read in a snapshot placed at P (`crate::fence`: it holds every commit up to P's
//! `from` and none after its `to`, a few between may be missing; every one of those is after
//! the store's position, so the stream applies it, before the batch is written, marking its
//! key, or after) and written with the table's progress (the last
//! primary key) in one RocksDB write, so after a crash the store holds exactly the batches that
//! were committed. A restart opens a new snapshot at P' >= P and continues after the stored
//! key; the rows it copies reflect P', the earlier ones P plus whatever the stream applied
//! since. The store's position is never moved forward by a copy: the stream replays from it,
//! and since binlog images are applied idempotently by primary key, replaying events already
//! contained in a copied row converges to the same row; a key the stream wrote while the table
//! was being copied is left to the stream (store header). The table is answered from once the
//! stream has passed the newest P's `to`. A copy that replaces its snapshot between batches (every
//! `max_snapshot_age`) is the same case without the restart. DDL may now commit between two
//! batches: a batch is written only if the table is still registered with the schema it was
//! read with (`ReplicaError::SchemaChanged` otherwise, and the copy is retried with the new
//! one), and the DDL itself, applied by the writer in stream order, drops or rewrites what was
//! copied (`crate::store` `reshape`). A gap may reset a table between two batches too (its rows
//! and progress dropped): a batch is written only for the generation of the table's rows that
//! the copy read its progress with, in a snapshot opened after that read
//! ([`ReplicaStore::copy_progress`]), else the table is started again from its new progress in
//! a new snapshot, which is after the reset and so after the changes the gap skipped.
//!
//! A new store (position 0) takes the first snapshot's `from` as its own: that is where the
//! stream must start for the copied rows to be kept current (the snapshot may already hold
//! some commits after it, which the stream applies again, idempotently); a table is answered
//! from once the stream has passed the newest snapshot's `to`. How the snapshot is placed in the
//! binlog depends on the server (`crate::fence`: MariaDB's snapshot position, MySQL 8's GTID
//! bracket around the snapshot's opening).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use freshet_cdc::LagHandle;
use freshet_cdc::continuity::ServerIdentity;
use freshet_cdc::result::{convert, param, result_columns};
use freshet_cdc::schema::TableInfo;
use freshet_dataflow::{Position, Row, TableSchema, Value};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Params};

use crate::error::ReplicaError;
use crate::fence::Placed;
use crate::rowcode::decode_row;
use crate::store::{CopyState, ReplicaStore};

/// How the copy runs.
#[derive(Clone, Debug)]
pub struct SnapshotConfig {
    /// Rows read and written per batch (one RocksDB write each), at most.
    pub batch_rows: usize,
    /// Bytes of rows per batch, about (a batch stops after the row that reaches it, and holds
    /// at least one row): a batch of `batch_rows` wide rows (BLOBs) is otherwise held whole,
    /// several times over. The next batch of the table asks for as many rows as fit, by the
    /// widest row read so far ([`ReplicaStore::batch_bytes`] in the engine).
    pub batch_bytes: usize,
    /// Stop after this many batches in total (`None`: copy everything). A throttled copy and
    /// the tests use it; progress is kept, so the next call continues.
    pub max_batches: Option<u64>,
    /// How often progress is logged.
    pub log_every: Duration,
    /// The longest one consistent snapshot is kept open: between batches an older one is
    /// ended and a new one opened. A snapshot transaction holds the metadata lock of every
    /// table it read, which DDL needs (and every later statement on the table queues behind
    /// a waiting DDL), so this bounds how long a migration waits for the copy.
    pub max_snapshot_age: Duration,
    /// The binlog stream whose server the copy must read (`None`: any, for tests of the copy
    /// alone). A copy connects anew each time it starts (at start-up, after DDL, after a gap):
    /// behind an address that led to another server for a moment (a failover flipped and
    /// back, a proxy that keeps old connections) it would store that server's rows at that
    /// server's position, which the stream's would overtake and serve. Each snapshot is opened
    /// only while the copy's connection reaches the server the stream last connected to
    /// ([`LagHandle::stream_server`]); otherwise the copy fails, and is retried on a new
    /// connection. The position poll, not the copy, decides that the primary moved.
    pub stream: Option<LagHandle>,
}

impl Default for SnapshotConfig {
    fn default() -> SnapshotConfig {
        SnapshotConfig {
            batch_rows: 5_000,
            batch_bytes: crate::ReplicaMemory::within(crate::ReplicaMemory::DEFAULT_TOTAL).batch.0 as usize,
            max_batches: None,
            log_every: Duration::from_secs(5),
            max_snapshot_age: Duration::from_secs(1),
            stream: None,
        }
    }
}

/// Progress figures, shared with whoever renders metrics (plain atomics; see
/// [`CopyStats::snapshot`]).
#[derive(Debug, Default)]
pub struct CopyStats {
    rows_copied: AtomicU64,
    rows_rewritten: AtomicU64,
    bytes_copied: AtomicU64,
    rows_estimated: AtomicU64,
    tables_done: AtomicU64,
    tables_total: AtomicU64,
    micros: AtomicU64,
    failures: AtomicU64,
}

/// A reading of [`CopyStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CopyFigures {
    /// Rows copied by this process (not counting rows a previous run copied).
    pub rows_copied: u64,
    /// Rows rewritten in place after DDL changed their table's columns (not copied again).
    pub rows_rewritten: u64,
    /// Bytes of those rows as stored.
    pub bytes_copied: u64,
    /// What [`CopyFigures::rows_copied`] counts up to, about: the rows this process had copied
    /// when the latest copy started, plus the server's estimate of the rows of the tables that
    /// copy had to copy (whole tables, so a copy resumed part way is over-counted).
    pub rows_estimated: u64,
    pub tables_done: u64,
    pub tables_total: u64,
    /// Rows per second over the time spent copying.
    pub rows_per_sec: f64,
    /// Copies that failed (and were retried) in this process ([`CopyStats::failed`]).
    pub failures: u64,
}

impl CopyStats {
    /// The current figures.
    pub fn snapshot(&self) -> CopyFigures {
        let rows = self.rows_copied.load(Ordering::Relaxed);
        let secs = self.micros.load(Ordering::Relaxed) as f64 / 1e6;
        CopyFigures {
            rows_copied: rows,
            rows_rewritten: self.rows_rewritten.load(Ordering::Relaxed),
            bytes_copied: self.bytes_copied.load(Ordering::Relaxed),
            rows_estimated: self.rows_estimated.load(Ordering::Relaxed),
            tables_done: self.tables_done.load(Ordering::Relaxed),
            tables_total: self.tables_total.load(Ordering::Relaxed),
            rows_per_sec: if secs > 0.0 { rows as f64 / secs } else { 0.0 },
            failures: self.failures.load(Ordering::Relaxed),
        }
    }

    /// Counts a copy that failed (the caller retries it).
    pub fn failed(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }
}

fn upstream(e: impl std::fmt::Display) -> ReplicaError {
    ReplicaError::Upstream(e.to_string())
}

fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// Copies every table of `tables` (registered in `store`) that is not copied yet, from the
/// database `database` at `opts`. Returns true when every table is done, false when
/// `max_batches` stopped it first.
pub async fn copy_tables(
    opts: Opts,
    database: &str,
    store: &ReplicaStore,
    tables: &HashMap<String, TableInfo>,
    cfg: &SnapshotConfig,
    stats: &CopyStats,
) -> Result<bool, ReplicaError> {
    let opts: Opts = OptsBuilder::from_opts(opts)
        .db_name(Some(database.to_string()))
        // As the fill connections: UTC, no select limit, a harmless sql_mode (a global
        // PAD_CHAR_TO_FULL_LENGTH would copy CHAR values padded, unlike the binlog's).
        .init(vec![freshet_cdc::OWN_SESSION, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"])
        .into();
    let mut conn = Conn::new(opts).await.map_err(upstream)?;
    let mut todo: Vec<&TableInfo> =
        tables.values().filter(|t| !matches!(store.copy_state(&t.schema.name), Some(CopyState::Done { .. }))).collect();
    todo.sort_by(|a, b| a.schema.name.cmp(&b.schema.name));
    stats.tables_total.store(tables.len() as u64, Ordering::Relaxed);
    stats.tables_done.store((tables.len() - todo.len()) as u64, Ordering::Relaxed);
    let mut estimated = stats.rows_copied.load(Ordering::Relaxed);
    for t in &todo {
        let est: Option<u64> = conn
            .exec_first(
                "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (database, &t.schema.name),
            )
            .await
            .map_err(upstream)?;
        estimated += est.unwrap_or(0);
    }
    stats.rows_estimated.store(estimated, Ordering::Relaxed);
    if todo.is_empty() {
        return Ok(true);
    }
    let version: Option<String> = conn.query_first("SELECT VERSION()").await.map_err(upstream)?;
    let flavor = freshet_cdc::flavor::detect(version.as_deref().unwrap_or(""));
    let server = match &cfg.stream {
        Some(stream) => Some((stream, ServerIdentity::read(&mut conn, flavor.as_ref()).await.map_err(upstream)?)),
        None => None,
    };
    let mut snap = Snapshot { flavor: flavor.as_ref(), server, open: None, max_age: cfg.max_snapshot_age, expired: false };
    let result = copy_in_snapshots(&mut conn, &mut snap, store, tables, &todo, cfg, stats).await;
    // Read-only: ending it either way is the same; a failure here only loses the connection.
    let _ = conn.query_drop("COMMIT").await;
    // Said goodbye to (dropped, the server logs an aborted connection).
    let _ = conn.disconnect().await;
    result
}

/// The consistent snapshot batches are read in, replaced by a new one once older than
/// `max_age` (see [`SnapshotConfig::max_snapshot_age`]). Reading a table's batches under
/// successive snapshots is the resume case of the module header: each batch is exact at the
/// snapshot it was read in, and the table is ready once the stream passes the newest.
struct Snapshot<'a> {
    flavor: &'a dyn freshet_cdc::Flavor,
    /// The stream whose server the copy must read, and the server the copy's connection
    /// reaches ([`SnapshotConfig::stream`]).
    server: Option<(&'a LagHandle, ServerIdentity)>,
    open: Option<(Placed, Instant)>,
    max_age: Duration,
    /// Set by [`Snapshot::expire`].
    expired: bool,
}

impl Snapshot<'_> {
    /// Where the snapshot the next batch is read in is (opening a new one if needed).
    async fn at(&mut self, conn: &mut Conn) -> Result<Placed, ReplicaError> {
        if let Some((at, opened)) = self.open
            && !self.expired
            && opened.elapsed() < self.max_age
        {
            return Ok(at);
        }
        if self.open.take().is_some() {
            conn.query_drop("COMMIT").await.map_err(upstream)?;
        }
        self.check_server()?;
        let at = crate::fence::open_snapshot(conn, self.flavor).await?;
        self.open = Some((at, Instant::now()));
        self.expired = false;
        Ok(at)
    }

    /// An error unless the copy's connection reaches the server the stream reads. A stream that
    /// moves to another server afterwards has a gap, which resets the tables and so refuses
    /// the batches read here ([`ReplicaError::Reset`]); the next snapshot is checked again.
    fn check_server(&self) -> Result<(), ReplicaError> {
        let Some((stream, mine)) = &self.server else { return Ok(()) };
        match stream.stream_server() {
            None => Err(ReplicaError::Upstream("the binlog stream has not connected yet; the copy waits to read its server".into())),
            Some(theirs) => match theirs.differs(mine) {
                Some(why) => {
                    Err(ReplicaError::Upstream(format!("the copy's connection reaches another server than the binlog stream: {why}")))
                }
                None => Ok(()),
            },
        }
    }

    /// The next batch is read in a new snapshot, opened after this call.
    fn expire(&mut self) {
        self.expired = true;
    }
}

async fn copy_in_snapshots(
    conn: &mut Conn,
    snap: &mut Snapshot<'_>,
    store: &ReplicaStore,
    tables: &HashMap<String, TableInfo>,
    todo: &[&TableInfo],
    cfg: &SnapshotConfig,
    stats: &CopyStats,
) -> Result<bool, ReplicaError> {
    let at = snap.at(conn).await?;
    if store.position()? == Position(0) {
        // The stream replays from where the snapshot lacks no commit (`crate::fence`).
        store.set_position(at.from)?;
    }
    tracing::info!(tables = todo.len(), position = at.from.0, "replica: copying tables");
    let mut batches = 0u64;
    let mut last_log = Instant::now();
    for t in todo {
        if let Some(keep) = store.reshape_plan(&t.schema.name) {
            reshape_table(conn, snap, store, tables, t, &keep, cfg, stats).await?;
            continue;
        }
        let name = &t.schema.name;
        // Restarted from the store's progress whenever a gap resets the table meanwhile.
        'table: loop {
            let (state, generation) = store.copy_progress(name).ok_or_else(|| ReplicaError::UnknownTable(name.clone()))?;
            let mut after = match state {
                CopyState::Copying { after: Some(a), .. } => Some(decode_row(&a)?),
                _ => None,
            };
            // The batches are read in a snapshot opened after that progress was read: one opened
            // before may predate a reset, and lack the changes the gap skipped.
            snap.expire();
            let mut limit = cfg.batch_rows;
            loop {
                if cfg.max_batches.is_some_and(|m| batches >= m) {
                    return Ok(false);
                }
                let started = Instant::now();
                let all: Vec<usize> = (0..t.schema.columns.len()).collect();
                let at = snap.at(conn).await?;
                let read = read_batch(conn, tables, t, &all, after.as_deref(), limit, cfg.batch_bytes).await?;
                limit = read.next_limit(cfg);
                let (rows, done) = (read.rows, read.last);
                match store.write_copy_batch(&t.schema, generation, at.to, &rows, done) {
                    Err(ReplicaError::Reset(_)) => {
                        tracing::info!(table = %name, "replica: table reset during its copy; copying it again");
                        continue 'table;
                    }
                    r => r?,
                };
                batches += 1;
                let bytes: usize = rows.iter().map(|r| crate::rowcode::encode_row(r).len()).sum();
                stats.rows_copied.fetch_add(rows.len() as u64, Ordering::Relaxed);
                stats.bytes_copied.fetch_add(bytes as u64, Ordering::Relaxed);
                stats.micros.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                if last_log.elapsed() >= cfg.log_every {
                    let f = stats.snapshot();
                    tracing::info!(table = %name, copied = f.rows_copied, estimated = f.rows_estimated, rows_per_sec = f.rows_per_sec as u64, "replica: copy progress");
                    last_log = Instant::now();
                }
                if done {
                    stats.tables_done.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(table = %name, "replica: table copied");
                    break 'table;
                }
                after = rows.last().map(|r| t.schema.primary_key.iter().map(|&i| r[i].clone()).collect());
            }
        }
    }
    Ok(true)
}

/// Rewrites a table's stored rows to its new schema after DDL (`crate::store::reshape`): from
/// the stored rows alone when the plan reads no column, else with the columns it reads taken
/// from the upstream in primary-key batches.
#[allow(clippy::too_many_arguments)]
async fn reshape_table(
    conn: &mut Conn,
    snap: &mut Snapshot<'_>,
    store: &ReplicaStore,
    tables: &HashMap<String, TableInfo>,
    t: &TableInfo,
    keep: &[Option<usize>],
    cfg: &SnapshotConfig,
    stats: &CopyStats,
) -> Result<(), ReplicaError> {
    let name = &t.schema.name;
    let started = Instant::now();
    let read: Vec<usize> = keep.iter().enumerate().filter(|(_, k)| k.is_none()).map(|(i, _)| i).collect();
    tracing::info!(table = %name, columns_read = read.len(), "replica: rewriting the table's rows in place after DDL");
    let mut cols = t.schema.primary_key.clone();
    cols.extend(&read);
    // A rewrite that failed part way in this run goes on after its last batch.
    let mut after: Option<Vec<Value>> = match store.copy_state(name) {
        Some(CopyState::Reshaping { after: Some(a), .. }) if !read.is_empty() => Some(decode_row(&a)?.into_vec()),
        _ => None,
    };
    let mut limit = cfg.batch_rows;
    loop {
        let (state, n) = if read.is_empty() {
            store.reshape_local(name, cfg.batch_rows.max(1))?
        } else {
            let at = snap.at(conn).await?;
            let batch = read_batch(conn, tables, t, &cols, after.as_deref(), limit, cfg.batch_bytes).await?;
            limit = batch.next_limit(cfg);
            after = batch.rows.last().map(|r| r[..t.schema.primary_key.len()].to_vec());
            store.reshape_batch(&t.schema, at.to, &batch.rows, batch.last)?
        };
        stats.rows_rewritten.fetch_add(n as u64, Ordering::Relaxed);
        if !matches!(state, CopyState::Reshaping { .. }) {
            break;
        }
    }
    stats.tables_done.fetch_add(1, Ordering::Relaxed);
    tracing::info!(table = %name, elapsed = ?started.elapsed(), "replica: table rewritten in place");
    Ok(())
}

/// The SELECT of one batch: the columns `cols` of the next `limit` rows of `schema` in
/// primary-key order, after the primary key its parameters give when `after`
/// ([`batch_params`]). Public for the test that asks the server how it runs it.
///
/// "After" is written out column by column, `a > ? OR (a = ? AND b > ?)`, not as the row
/// comparison `(a, b) > (?, ?)` it means: MariaDB makes a range of the primary key of the
/// first, and scans the key from its start for the second, so each batch of a composite key's
/// copy read every row before it.
pub fn batch_sql(schema: &TableSchema, cols: &[usize], after: bool, limit: usize) -> String {
    let cols: Vec<String> = cols.iter().map(|&i| quote(&schema.columns[i].name)).collect();
    let pk: Vec<String> = schema.primary_key.iter().map(|&i| quote(&schema.columns[i].name)).collect();
    let mut sql = format!("SELECT {} FROM {}", cols.join(", "), quote(&schema.name));
    if after && let Some((last, before)) = pk.split_last() {
        let condition = before.iter().rev().fold(format!("{last} > ?"), |inner, k| format!("{k} > ? OR ({k} = ? AND ({inner}))"));
        sql.push_str(&format!(" WHERE {condition}"));
    }
    sql.push_str(&format!(" ORDER BY {} LIMIT {limit}", pk.join(", ")));
    sql
}

/// The parameters of [`batch_sql`] after the primary key `after`: each key column's value
/// twice (greater than, or equal and then the next column), the last one once.
pub fn batch_params<T: Clone>(after: &[T]) -> Vec<T> {
    let Some((last, before)) = after.split_last() else { return Vec::new() };
    before.iter().flat_map(|v| [v.clone(), v.clone()]).chain(std::iter::once(last.clone())).collect()
}

/// One batch read by [`read_batch`].
struct ReadBatch {
    rows: Vec<Row>,
    /// No row of the table follows these.
    last: bool,
    /// The bytes of the widest row read.
    widest: usize,
}

impl ReadBatch {
    /// How many rows the next batch of the table asks for: as many of the widest row read as
    /// fit in `batch_bytes`, between 1 and `batch_rows`.
    fn next_limit(&self, cfg: &SnapshotConfig) -> usize {
        let rows = cfg.batch_bytes.checked_div(self.widest).unwrap_or(cfg.batch_rows);
        rows.clamp(1, cfg.batch_rows.max(1))
    }
}

/// The bytes a row read from the server holds, about.
fn row_bytes(row: &mysql_async::Row) -> usize {
    (0..row.len()).map(|i| 8 + row.as_ref(i).map_or(0, |v| if let mysql_async::Value::Bytes(b) = v { b.len() } else { 0 })).sum()
}

/// The columns `cols` of the next `limit` rows of `t` after primary key `after`, in
/// primary-key order, read one by one until they hold `max_bytes` (the rest of the answer is
/// read and dropped: only the first batch of a table of wide rows asks for more than fit).
async fn read_batch(
    conn: &mut Conn,
    tables: &HashMap<String, TableInfo>,
    t: &TableInfo,
    cols: &[usize],
    after: Option<&[Value]>,
    limit: usize,
    max_bytes: usize,
) -> Result<ReadBatch, ReplicaError> {
    let sql = batch_sql(&t.schema, cols, after.is_some(), limit);
    let params: Vec<mysql_async::Value> = batch_params(after.unwrap_or_default()).iter().map(param).collect();
    let params = if params.is_empty() { Params::Empty } else { Params::Positional(params) };
    let mut result = conn.exec_iter(sql, params).await.map_err(upstream)?;
    let (mut out, mut bytes, mut widest, mut cut) = (Vec::new(), 0usize, 0usize, false);
    let mut types = None;
    while let Some(row) = result.next().await.map_err(upstream)? {
        let size = row_bytes(&row);
        (bytes, widest) = (bytes + size, widest.max(size));
        let types = types.get_or_insert_with(|| result_columns(row.columns_ref(), tables));
        let mut vals = Vec::with_capacity(types.len());
        for (v, c) in row.unwrap().into_iter().zip(types.iter()) {
            vals.push(convert(c, v).map_err(ReplicaError::Upstream)?);
        }
        out.push(vals.into_boxed_slice());
        if bytes >= max_bytes && out.len() < limit {
            cut = true;
            break;
        }
    }
    result.drop_result().await.map_err(upstream)?;
    let last = !cut && out.len() < limit;
    Ok(ReadBatch { rows: out, last, widest })
}
