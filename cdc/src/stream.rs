//! The binlog stream: the upstream's committed transactions, in commit order, as dataflow
//! [`Batch`]es, with schema changes in order between them.
//!
//! Owns: the replica connection (register, dump from a file:offset), grouping events into
//! transactions, decoding row events with the schema, DDL refreshes, reconnect/resume with
//! exponential backoff, the "position gone" report, and the lag it observes.
//! Does not own: the layout of row events (mysql_common), value conversion (`decode`), DDL
//! parsing (`ddl`), applying batches (the caller feeds `Dataflow::apply`).
//!
//! # Invariants
//! - **Complete and ordered.** Every transaction committed after the start position is
//!   delivered exactly once, in binlog (= commit) order, as one [`Batch`] whose position is the
//!   end offset of its commit event (mapped by `position`). Transactions on other databases
//!   are delivered too, as empty batches, so positions keep advancing and lag stays exact.
//! - **Resume point = last delivered boundary.** `delivered` only moves when a whole
//!   transaction (or a standalone DDL) has been handed to the caller. A reconnect re-requests
//!   the dump from `delivered`, and the half-read transaction, discarded, is read again whole:
//!   nothing lost, nothing duplicated. Binlog offsets inside a file are byte offsets of event
//!   boundaries, so resuming at a commit's end offset starts exactly at the next transaction.
//! - **Schema before rows.** A DDL event refreshes the table's schema from information_schema
//!   before the next event is read; every rows event is checked against its table map (column
//!   count and type family) and a mismatch is an error, never a wrongly shaped row.
//! - **Bounded waits.** Every read has a timeout (heartbeats keep an idle stream talking);
//!   reconnects back off exponentially and give up after `max_retries` consecutive attempts
//!   without progress (a commit or a heartbeat), whether the attempts failed or the same error
//!   came back after each.
//! - **Bounded memory.** A transaction is held whole until its commit, up to
//!   `max_batch_changes` changes; a larger one is reported `Untrusted` instead.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use freshet_dataflow::{Batch, Change, Position, Row, TableSchema};
use mysql_async::binlog::events::{Event, RowsEventData, TableMapEvent};
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStreamRequest, Conn, Opts};

use crate::ddl::{parse_ddl, DdlKind};
use crate::decode::decode;
use crate::error::CdcError;
use crate::flavor::{self, Flavor};
use crate::events::{classify, EventKind};
use crate::lag::LagHandle;
use crate::schema::check_table_map;
use crate::position::{split_file_name, BinlogPos, MariaGtid};
use crate::schema::{load_tables, TableInfo};

/// Where a new stream starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartAt {
    /// The server's current end of binlog (`SHOW MASTER STATUS`).
    Current,
    /// A position previously delivered (a commit boundary).
    At(BinlogPos),
}

/// Settings of a binlog stream. `Default` values are what production should use.
#[derive(Clone, Debug)]
pub struct StreamConfig {
    /// Replica server id; must be unique among the server's replicas (a duplicate kicks the
    /// other connection off).
    pub server_id: u32,
    /// The database whose tables are decoded; row events of other databases are skipped.
    pub database: String,
    /// Heartbeat period requested from the server when the stream is idle.
    pub heartbeat: Duration,
    /// A read that waits longer than this reconnects (should exceed `heartbeat`).
    pub read_timeout: Duration,
    /// First reconnect delay; doubles per consecutive failure up to `backoff_max`.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Consecutive failed reconnects before the error is returned to the caller.
    pub max_retries: u32,
    /// Bound on connecting and on each information_schema query.
    pub query_timeout: Duration,
    /// If set, only these tables' rows are decoded (the tables cached queries read); others
    /// still delimit transactions.
    pub tables: Option<Vec<String>>,
    /// Most row changes one transaction may carry. A larger transaction is not held in
    /// memory: its changes are dropped and its commit is reported as [`CdcError::Untrusted`]
    /// (evict all; the stream goes on).
    pub max_batch_changes: usize,
}

impl StreamConfig {
    /// Defaults for `database` and `server_id`.
    pub fn new(database: &str, server_id: u32) -> StreamConfig {
        StreamConfig {
            server_id,
            database: database.to_string(),
            heartbeat: Duration::from_secs(1),
            read_timeout: Duration::from_secs(5),
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            max_retries: 8,
            query_timeout: Duration::from_secs(10),
            tables: None,
            max_batch_changes: 1_000_000,
        }
    }
}

/// A DDL statement's effect on one table of the tracked database; or, with
/// [`DdlKind::Privileges`] and an empty `table`, a statement that may have changed the
/// server's accounts or privileges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaChange {
    /// End of the DDL event (between the batches before and after it).
    pub position: Position,
    pub table: String,
    pub kind: DdlKind,
    /// The table's schema after the statement, `None` if it no longer exists. Give it to
    /// `Dataflow::alter_table` (which also clears views of a truncated table).
    pub schema: Option<TableSchema>,
    /// The same with decode facts, for `UpstreamFills::set_table`.
    pub info: Option<TableInfo>,
}

/// What the stream yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    /// One committed transaction (possibly empty if it touched only other databases).
    Batch(Batch),
    /// A schema change, in order with the batches.
    Schema(SchemaChange),
}

/// A transaction being read.
struct Txn {
    /// Opened by BEGIN or a non-standalone MariaDB GTID: ends at XID/COMMIT. Otherwise the
    /// next statement is the whole group.
    explicit: bool,
    changes: Vec<Change>,
    /// MariaDB: the group's GTID.
    gtid: Option<MariaGtid>,
    /// More changes than `max_batch_changes`: dropped, the commit is untrusted.
    oversized: bool,
}

/// The binlog stream. See the module header for its guarantees.
pub struct BinlogStream {
    cfg: StreamConfig,
    opts: Opts,
    flavor: Box<dyn Flavor>,
    meta: Option<Conn>,
    inner: Option<mysql_async::BinlogStream>,
    conn_id: u32,
    /// File the current connection is reading.
    file: String,
    delivered: BinlogPos,
    tables: HashMap<String, TableInfo>,
    out: VecDeque<StreamEvent>,
    txn: Option<Txn>,
    failures: u32,
    lag: LagHandle,
    /// MariaDB: GTID of the last delivered group.
    last_gtid: Option<MariaGtid>,
    /// The error behind the current run of reconnects.
    last_error: Option<String>,
    /// End of the current MySQL TRANSACTION_PAYLOAD event: the events inside it carry no
    /// positions of their own, the commit takes this one.
    payload_end: Option<u32>,
}

async fn bounded<T>(d: Duration, what: &str, f: impl std::future::Future<Output = Result<T, mysql_async::Error>>) -> Result<T, CdcError> {
    match tokio::time::timeout(d, f).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(CdcError::Timeout(what.to_string())),
    }
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl BinlogStream {
    /// Connects (schema connection + binlog connection) and positions the stream.
    pub async fn connect(opts: Opts, cfg: StreamConfig, start: StartAt) -> Result<BinlogStream, CdcError> {
        let mut meta = bounded(cfg.query_timeout, "connect", Conn::new(opts.clone())).await?;
        let version: Option<String> = bounded(cfg.query_timeout, "version", meta.query_first("SELECT VERSION()")).await?;
        let flavor = flavor::detect(version.as_deref().unwrap_or(""));
        // Position first, schema second: the schema then describes the tables at or after the
        // start position, which is what the table-map check assumes (a DDL between the two
        // reads arrives later in the stream and refreshes again).
        let delivered = match start {
            StartAt::At(p) => p,
            StartAt::Current => current_position(&mut meta, flavor.as_ref(), cfg.query_timeout).await?,
        };
        let tables = bounded(cfg.query_timeout, "schema", async {
            load_tables(&mut meta, flavor.as_ref(), &cfg.database, None).await.map_err(|e| match e {
                CdcError::Upstream(u) => u,
                other => mysql_async::Error::Other(Box::new(other)),
            })
        })
        .await?;
        split_file_name(&delivered.file).ok_or_else(|| CdcError::BadPosition(delivered.to_string()))?;
        let lag = LagHandle::default();
        lag.update(|l| l.delivered = Some(delivered.clone()));
        let mut s = BinlogStream {
            file: delivered.file.clone(),
            cfg,
            opts,
            flavor,
            meta: Some(meta),
            inner: None,
            conn_id: 0,
            delivered,
            tables,
            out: VecDeque::new(),
            txn: None,
            failures: 0,
            lag,
            payload_end: None,
            last_gtid: None,
            last_error: None,
        };
        s.open().await?;
        Ok(s)
    }

    /// The flavor detected from the server's version.
    pub fn flavor(&self) -> &dyn Flavor {
        self.flavor.as_ref()
    }

    /// The last delivered commit boundary (where a restart would resume).
    pub fn delivered(&self) -> &BinlogPos {
        &self.delivered
    }

    /// MariaDB: the GTID of the last delivered transaction (for resuming by GTID after a
    /// failover, which is not implemented yet; resume is by file:offset).
    pub fn last_gtid(&self) -> Option<MariaGtid> {
        self.last_gtid
    }

    /// The server's connection id of the binlog connection (for tests and diagnostics).
    pub fn connection_id(&self) -> u32 {
        self.conn_id
    }

    /// Schemas of the tracked database's tables, as currently known.
    pub fn tables(&self) -> impl Iterator<Item = &TableSchema> {
        self.tables.values().map(|t| &t.schema)
    }

    /// Table infos (schema + decode facts) of the tracked database, for the fill source.
    pub fn table_infos(&self) -> HashMap<String, TableInfo> {
        self.tables.clone()
    }

    /// Runs the stream in its own task and hands its events over a bounded channel. This is
    /// how to combine it with other work: [`BinlogStream::next`] is not cancel-safe (a
    /// dropped read can lose part of a packet), a channel receive is. The task ends after
    /// sending an error other than [`CdcError::Untrusted`], or when the receiver is dropped.
    pub fn spawn(mut self, capacity: usize) -> (tokio::sync::mpsc::Receiver<Result<StreamEvent, CdcError>>, LagHandle) {
        let (tx, rx) = tokio::sync::mpsc::channel(capacity.max(1));
        let lag = self.lag();
        tokio::spawn(async move {
            loop {
                let r = self.next().await;
                // After `Untrusted` the stream itself is intact and goes on.
                let stop = matches!(r, Err(ref e) if !matches!(e, CdcError::Untrusted(_)));
                if tx.send(r).await.is_err() || stop {
                    break;
                }
                let queued = (tx.max_capacity() - tx.capacity()) as u64;
                self.lag.update(|l| l.queued = queued);
            }
        });
        (rx, lag)
    }

    /// A handle to the lag, readable from other tasks.
    pub fn lag(&self) -> LagHandle {
        self.lag.clone()
    }

    async fn open(&mut self) -> Result<(), CdcError> {
        let mut conn = bounded(self.cfg.query_timeout, "connect", Conn::new(self.opts.clone())).await?;
        for s in self.flavor.binlog_session_setup(self.cfg.heartbeat) {
            bounded(self.cfg.query_timeout, "session setup", conn.query_drop(s)).await?;
        }
        self.conn_id = conn.id();
        let file = self.delivered.file.clone();
        let req = BinlogStreamRequest::new(self.cfg.server_id)
            .with_filename(file.as_bytes())
            .with_pos(self.delivered.offset as u64);
        let stream = bounded(self.cfg.query_timeout, "binlog dump", conn.get_binlog_stream(req)).await?;
        self.inner = Some(stream);
        self.file = file;
        self.txn = None;
        Ok(())
    }

    /// The next batch or schema change. Reconnects by itself on connection errors; returns
    /// [`CdcError::PositionGone`] if the resume position no longer exists, and other errors
    /// when the stream cannot be trusted (evict all state, reconnect at the current position).
    pub async fn next(&mut self) -> Result<StreamEvent, CdcError> {
        loop {
            if let Some(e) = self.out.pop_front() {
                return Ok(e);
            }
            let step = match self.inner.as_mut() {
                // Giving up after `max_retries` is returned as is (it is retry-safe, so the
                // arm below would otherwise swallow it and loop forever).
                None => {
                    self.reopen().await?;
                    continue;
                }
                Some(inner) => match tokio::time::timeout(self.cfg.read_timeout, next_event(inner)).await {
                    Err(_) => Err(CdcError::Timeout(format!("no binlog event for {:?}", self.cfg.read_timeout))),
                    Ok(None) => Err(CdcError::Protocol("the server ended the binlog stream".into())),
                    Ok(Some(Err(e))) => Err(CdcError::from(e)),
                    Ok(Some(Ok(ev))) => self.handle(ev).await,
                },
            };
            match step {
                Ok(()) => {}
                Err(e @ CdcError::Upstream(mysql_async::Error::Server(_))) if !e.retry_safe() => {
                    self.inner = None;
                    return Err(self.position_gone(e));
                }
                Err(e) if e.retry_safe() => {
                    tracing::warn!(error = %e, resume = %self.delivered, "binlog connection lost; reconnecting");
                    self.last_error = Some(e.to_string());
                    self.inner = None;
                    self.txn = None;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn reopen(&mut self) -> Result<(), CdcError> {
        if self.failures > 0 {
            let exp = self.failures.saturating_sub(1).min(20);
            let delay = self.cfg.backoff_initial.saturating_mul(1 << exp).min(self.cfg.backoff_max);
            tokio::time::sleep(delay).await;
        }
        if self.failures >= self.cfg.max_retries {
            // Reconnecting kept "working" but the stream made no progress (no commit, no
            // heartbeat) since: the same error at the same place, again and again.
            self.failures = 0;
            return Err(CdcError::Protocol(format!(
                "{} reconnects without progress at {}; last error: {}",
                self.cfg.max_retries,
                self.delivered,
                self.last_error.as_deref().unwrap_or("none")
            )));
        }
        self.failures += 1;
        self.lag.update(|l| l.reconnects += 1);
        match self.open().await {
            Ok(()) => Ok(()),
            Err(e) if e.retry_safe() && self.failures <= self.cfg.max_retries => {
                tracing::warn!(error = %e, attempt = self.failures, "binlog reconnect failed");
                Ok(())
            }
            Err(e) => Err(self.position_gone(e)),
        }
    }

    /// The server's "cannot read from this position" (1236) as [`CdcError::PositionGone`].
    fn position_gone(&self, e: CdcError) -> CdcError {
        match e {
            CdcError::Upstream(mysql_async::Error::Server(s)) if s.code == 1236 => {
                CdcError::PositionGone { position: self.delivered.clone(), reason: s.message }
            }
            other => other,
        }
    }

    async fn handle(&mut self, ev: Event) -> Result<(), CdcError> {
        let hdr = ev.header();
        let kind = classify(&ev)?;
        if kind == EventKind::Payload {
            // mysql_async yields the payload event, then the events it carries.
            self.payload_end = Some(hdr.log_pos());
            return Ok(());
        }
        let log_pos = effective_pos(hdr.log_pos(), self.payload_end);
        match kind {
            EventKind::FakeRotate { name } => self.check_fake_rotate(&name)?,
            EventKind::Rotate { name, next } => {
                if !same_series(&self.file, &name) {
                    return Err(CdcError::PositionGone {
                        position: self.delivered.clone(),
                        reason: format!("binlog rotated from {} to an unrelated file {name}", self.file),
                    });
                }
                self.file = name;
                if self.txn.is_none() {
                    self.delivered = BinlogPos::new(self.file.clone(), next);
                }
            }
            EventKind::Heartbeat => self.heartbeat(log_pos),
            EventKind::MariaGtid(g) => self.txn = Some(Txn { explicit: !g.standalone, changes: Vec::new(), gtid: Some(g.gtid), oversized: false }),
            EventKind::MysqlGtid => self.txn = Some(Txn { explicit: false, changes: Vec::new(), gtid: None, oversized: false }),
            EventKind::Query { sql, schema } => self.query(&sql, &schema, log_pos, hdr.timestamp()).await?,
            EventKind::Xid => self.commit(log_pos, hdr.timestamp())?,
            EventKind::XaPrepare => {
                // Prepared, not committed: see `xa`.
                self.txn = None;
                self.delivered = BinlogPos::new(self.file.clone(), log_pos);
            }
            EventKind::Rows { table_id } => {
                let ours = self.inner.as_ref().and_then(|i| i.get_tme(table_id)).map(|t| t.database_name() == self.cfg.database.as_str());
                match ours {
                    None => return Err(CdcError::Protocol(format!("rows event for unknown table id {table_id}"))),
                    Some(false) => {
                        // A row of the privilege tables (a plain write to `mysql.*`).
                        let privileges = self.inner.as_ref().and_then(|i| i.get_tme(table_id)).is_some_and(|t| t.database_name() == "mysql");
                        if privileges {
                            self.privileges_changed(BinlogPos::new(self.file.clone(), log_pos).position()?);
                        }
                    }
                    Some(true) => {
                        let tme = self.inner.as_ref().and_then(|i| i.get_tme(table_id)).cloned();
                        if let Some(tme) = tme {
                            self.rows(&ev, &tme).await?;
                        }
                    }
                }
            }
            // Skipping compressed events would silently lose changes.
            EventKind::Compressed => {
                return Err(CdcError::SchemaMismatch {
                    table: "*".into(),
                    reason: "compressed binlog events (log_bin_compress = ON) are not supported; set log_bin_compress = OFF".into(),
                });
            }
            EventKind::Payload | EventKind::Other => {}
        }
        self.server_seen(log_pos);
        Ok(())
    }

    fn heartbeat(&mut self, log_pos: u32) {
        let server = BinlogPos::new(self.file.clone(), log_pos);
        let at_end = self.txn.is_none() && self.delivered == server;
        self.lag.update(|l| {
            l.heartbeats += 1;
            l.bytes_behind = server.offset.saturating_sub(l.delivered.as_ref().map(|d| d.offset).unwrap_or(0)) as u64;
            l.server = Some(server);
            if at_end {
                l.behind = Duration::ZERO;
                l.bytes_behind = 0;
            }
        });
        self.failures = 0;
    }

    fn server_seen(&self, log_pos: u32) {
        if log_pos > 0 {
            let server = BinlogPos::new(self.file.clone(), log_pos);
            self.lag.update(|l| {
                if l.server.as_ref().is_none_or(|s| s.file != server.file || s.offset < server.offset) {
                    l.server = Some(server);
                }
            });
        }
    }

    /// The first (fake) ROTATE names the file we asked for; before the format description it
    /// is read without knowing that events carry checksums, so its name may end in the 4
    /// checksum bytes. Never take a position from it; only check it.
    fn check_fake_rotate(&self, name: &str) -> Result<(), CdcError> {
        // The name arrives decoded lossily: each checksum byte that is not UTF-8 became one
        // replacement character, so compare by characters, not bytes.
        if name.strip_prefix(self.file.as_str()).is_some_and(|rest| rest.chars().count() <= 4) {
            Ok(())
        } else {
            tracing::warn!(requested = %self.file, got = %name, "server starts the binlog stream elsewhere");
            Ok(())
        }
    }

    async fn query(&mut self, sql: &str, default_db: &str, log_pos: u32, ts: u32) -> Result<(), CdcError> {
        let head = sql.trim_start();
        let word = head.split_whitespace().next().unwrap_or("").to_ascii_uppercase();
        match word.as_str() {
            "BEGIN" => {
                let t = self.txn.take();
                let oversized = t.as_ref().is_some_and(|t| t.oversized);
                let (changes, gtid) = t.map(|t| (t.changes, t.gtid)).unwrap_or_default();
                self.txn = Some(Txn { explicit: true, changes, gtid, oversized });
                return Ok(());
            }
            "COMMIT" | "ROLLBACK" if self.txn.as_ref().is_some_and(|t| t.explicit) => {
                return self.commit(log_pos, ts);
            }
            "SAVEPOINT" => return Ok(()),
            "XA" => return self.xa(head, log_pos, ts),
            _ => {}
        }
        // DDL refreshes schemas. Usually it is its own group (standalone); CREATE TABLE ...
        // SELECT is the exception: inside a transaction, before the rows it creates, so its
        // schema change goes out first and the batch follows at the commit.
        let in_txn = self.txn.as_ref().is_some_and(|t| t.explicit);
        let position = BinlogPos::new(self.file.clone(), log_pos).position()?;
        self.ddl(sql, default_db, position).await?;
        if !in_txn {
            self.txn = None;
            self.delivered = BinlogPos::new(self.file.clone(), log_pos);
            self.lag.update(|l| l.delivered = Some(BinlogPos::new(self.file.clone(), log_pos)));
            self.failures = 0;
        }
        Ok(())
    }

    /// Schema changes of one statement, for the tracked database.
    async fn ddl(&mut self, sql: &str, default_db: &str, position: Position) -> Result<(), CdcError> {
        if crate::ddl::parse_drop_database(sql).is_some_and(|d| d == self.cfg.database) {
            let mut names: Vec<String> = self.tables.keys().cloned().collect();
            names.sort();
            for table in names {
                self.out.push_back(StreamEvent::Schema(SchemaChange {
                    position,
                    table,
                    kind: DdlKind::DatabaseDropped,
                    schema: None,
                    info: None,
                }));
            }
            self.tables.clear();
        }
        if crate::ddl::privileges_may_change(sql, default_db) {
            self.privileges_changed(position);
        }
        for t in parse_ddl(sql) {
            let db = t.database.clone().unwrap_or_else(|| default_db.to_string());
            if db != self.cfg.database {
                continue;
            }
            self.refresh(&t.table).await?;
            let info = self.tables.get(&t.table).cloned();
            let schema = info.as_ref().map(|i| i.schema.clone());
            self.out.push_back(StreamEvent::Schema(SchemaChange { position, table: t.table, kind: t.kind, schema, info }));
        }
        Ok(())
    }

    /// Tells the consumer that the server's privileges may have changed (a
    /// [`DdlKind::Privileges`] change with no table).
    fn privileges_changed(&mut self, position: Position) {
        self.out.push_back(StreamEvent::Schema(SchemaChange { position, table: String::new(), kind: DdlKind::Privileges, schema: None, info: None }));
    }

    /// XA transactions: their rows are logged at XA PREPARE and take effect at a later
    /// XA COMMIT that carries no rows. Prepared rows are not delivered (not committed yet);
    /// the later commit makes the stream untrustworthy for them, so it is reported as such
    /// (the caller evicts all state, which is always correct, and may call `next` again).
    /// `XA COMMIT ... ONE PHASE` is an ordinary commit of the rows before it.
    fn xa(&mut self, sql: &str, log_pos: u32, ts: u32) -> Result<(), CdcError> {
        let up: Vec<String> = sql.split_whitespace().take(2).map(str::to_ascii_uppercase).collect();
        let one_phase = sql.to_ascii_uppercase().contains("ONE PHASE");
        match up.get(1).map(String::as_str) {
            Some("START") | Some("BEGIN") => {
                let t = self.txn.take();
                let oversized = t.as_ref().is_some_and(|t| t.oversized);
                let (changes, gtid) = t.map(|t| (t.changes, t.gtid)).unwrap_or_default();
                self.txn = Some(Txn { explicit: true, changes, gtid, oversized });
                Ok(())
            }
            Some("COMMIT") if one_phase => self.commit(log_pos, ts),
            Some("PREPARE") | Some("ROLLBACK") => {
                self.txn = None;
                self.delivered = BinlogPos::new(self.file.clone(), log_pos);
                Ok(())
            }
            Some("COMMIT") => {
                self.txn = None;
                self.delivered = BinlogPos::new(self.file.clone(), log_pos);
                Err(CdcError::Untrusted(format!("XA COMMIT at {}: its rows were logged at XA PREPARE", self.delivered)))
            }
            _ => Ok(()),
        }
    }

    fn commit(&mut self, log_pos: u32, ts: u32) -> Result<(), CdcError> {
        self.payload_end = None;
        let txn = self.txn.take().unwrap_or(Txn { explicit: false, changes: Vec::new(), gtid: None, oversized: false });
        let end = BinlogPos::new(self.file.clone(), log_pos);
        let position = end.position()?;
        if txn.oversized {
            self.delivered = end.clone();
            self.lag.update(|l| l.delivered = Some(end));
            return Err(CdcError::Untrusted(format!(
                "a transaction ending at {} has more than {} row changes",
                self.delivered, self.cfg.max_batch_changes
            )));
        }
        self.out.push_back(StreamEvent::Batch(Batch { position, changes: txn.changes }));
        self.last_gtid = txn.gtid.or(self.last_gtid);
        self.delivered = end.clone();
        self.failures = 0;
        let behind = Duration::from_secs(now_secs().saturating_sub(ts as u64));
        self.lag.update(|l| {
            l.delivered = Some(end);
            l.behind = behind;
            l.transactions += 1;
        });
        Ok(())
    }

    /// Re-reads `table`'s schema from information_schema (absent if it no longer exists).
    async fn refresh(&mut self, table: &str) -> Result<(), CdcError> {
        if self.meta.is_none() {
            self.meta = Some(bounded(self.cfg.query_timeout, "connect", Conn::new(self.opts.clone())).await?);
        }
        let Some(meta) = self.meta.as_mut() else { unreachable!("meta was set just above") };
        let loaded = tokio::time::timeout(
            self.cfg.query_timeout,
            load_tables(meta, self.flavor.as_ref(), &self.cfg.database, Some(table)),
        )
        .await;
        let fresh = match loaded {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                self.meta = None;
                return Err(e);
            }
            Err(_) => {
                self.meta = None;
                return Err(CdcError::Timeout(format!("reading the schema of `{table}`")));
            }
        };
        self.tables.retain(|k, _| !k.eq_ignore_ascii_case(table));
        self.tables.extend(fresh);
        Ok(())
    }

    async fn rows(&mut self, ev: &Event, tme: &TableMapEvent<'static>) -> Result<(), CdcError> {
        let table = tme.table_name().into_owned();
        if self.cfg.tables.as_ref().is_some_and(|only| !only.iter().any(|t| t.eq_ignore_ascii_case(&table))) {
            return Ok(());
        }
        let known = self.tables.contains_key(&table);
        if self.tables.get(&table).is_none_or(|t| check_table_map(tme, &t.schema).is_err()) {
            // A table created or altered by DDL the stream has not seen yet (or started
            // after): read its schema once more before giving up.
            self.refresh(&table).await?;
        }
        let Some(info) = self.tables.get(&table) else {
            if !known {
                // Never known and gone now (created and dropped ahead of us): no view can
                // read it, since the caller's catalog never had it.
                tracing::debug!(table, "skipping rows of a table that no longer exists");
                return Ok(());
            }
            return Err(CdcError::SchemaMismatch { table, reason: "row event for a table information_schema does not list".into() });
        };
        if info.schema.check().is_err() {
            // A table freshet cannot cache (e.g. DECIMAL wider than 28 digits): the dataflow
            // refuses it in its catalog, so its changes have no reader.
            return Ok(());
        }
        check_table_map(tme, &info.schema).map_err(|reason| CdcError::SchemaMismatch { table: table.clone(), reason })?;
        let Some(mysql_async::binlog::events::EventData::RowsEvent(data)) = ev.read_data().map_err(proto)? else {
            return Err(CdcError::Protocol("unreadable rows event".into()));
        };
        let txn = self.txn.get_or_insert(Txn { explicit: false, changes: Vec::new(), gtid: None, oversized: false });
        let max = self.cfg.max_batch_changes;
        for r in rows_of(&data, tme) {
            if txn.oversized {
                break;
            }
            let (before, after) = r.map_err(|e| CdcError::Decode { table: table.clone(), column: "?".into(), reason: e.to_string() })?;
            if let Some(b) = before {
                txn.changes.push(Change { table: table.clone(), row: to_row(info, b)?, insert: false });
            }
            if let Some(a) = after {
                txn.changes.push(Change { table: table.clone(), row: to_row(info, a)?, insert: true });
            }
            if txn.changes.len() > max {
                txn.oversized = true;
                txn.changes = Vec::new();
            }
        }
        Ok(())
    }
}

fn rows_of<'a>(
    data: &'a RowsEventData<'a>,
    tme: &'a TableMapEvent<'a>,
) -> mysql_async::binlog::events::RowsEventRows<'a> {
    data.rows(tme)
}

fn to_row(info: &TableInfo, row: mysql_async::binlog::row::BinlogRow) -> Result<Row, CdcError> {
    let cols = &info.schema.columns;
    if row.len() != cols.len() {
        return Err(CdcError::SchemaMismatch {
            table: info.schema.name.clone(),
            reason: format!("row image has {} of {} columns; set binlog_row_image = FULL", row.len(), cols.len()),
        });
    }
    let cells = row.unwrap();
    let mut out = Vec::with_capacity(cells.len());
    for ((cell, c), facts) in cells.into_iter().zip(cols).zip(&info.decode) {
        out.push(decode(&c.ty, c.collation, facts, cell).map_err(|reason| CdcError::Decode {
            table: info.schema.name.clone(),
            column: c.name.clone(),
            reason,
        })?);
    }
    Ok(out.into_boxed_slice())
}

/// The position an event ends at: its own, or, for events inside a MySQL transaction payload
/// (which carry 0), the payload's end.
pub fn effective_pos(log_pos: u32, payload_end: Option<u32>) -> u32 {
    match (log_pos, payload_end) {
        (0, Some(end)) => end,
        (p, _) => p,
    }
}

/// True if both files are `base.N` of the same base.
fn same_series(a: &str, b: &str) -> bool {
    match (split_file_name(a), split_file_name(b)) {
        (Some((x, _)), Some((y, _))) => x == y,
        _ => false,
    }
}

fn proto(e: std::io::Error) -> CdcError {
    CdcError::Protocol(e.to_string())
}

async fn next_event(s: &mut mysql_async::BinlogStream) -> Option<Result<Event, mysql_async::Error>> {
    use futures_core::Stream;
    std::future::poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
}

/// The server's current end of binlog.
pub async fn current_position(conn: &mut Conn, flavor: &dyn Flavor, limit: Duration) -> Result<BinlogPos, CdcError> {
    let row: Option<mysql_async::Row> = bounded(limit, "current position", conn.query_first(flavor.current_position_sql())).await?;
    let row = row.ok_or_else(|| CdcError::Checks(vec!["binary logging is off: start the server with log_bin".into()]))?;
    let file: Option<String> = row.get(0);
    let pos: Option<u64> = row.get(1);
    match (file, pos) {
        (Some(f), Some(p)) => Ok(BinlogPos::new(f, p as u32)),
        _ => Err(CdcError::Protocol(format!("unexpected answer to {}", flavor.current_position_sql()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_inside_a_transaction_payload_take_its_end_position() {
        assert_eq!(effective_pos(0, Some(900)), 900);
        assert_eq!(effective_pos(120, Some(900)), 120);
        assert_eq!(effective_pos(0, None), 0);
    }

    #[test]
    fn file_series() {
        assert!(same_series("mariadb-bin.000004", "mariadb-bin.000005"));
        assert!(!same_series("a.000004", "b.000005"));
    }

}

/// MySQL 8's row format, decoded from constructed bytes (no MySQL 8 server here): a table map
/// and a v2 WRITE_ROWS event with binary JSON, TIMESTAMP2, DATETIME2(6) and an unsigned BIGINT
/// without signedness metadata, through the same path the stream uses.
#[cfg(test)]
mod mysql8_bytes {
    use super::*;
    use crate::schema::{table_info, ColumnRow};
    use freshet_dataflow::Value;
    use mysql_async::binlog::events::{EventData, FormatDescriptionEvent};
    use mysql_async::binlog::BinlogVersion;

    fn event(ty: u8, body: &[u8]) -> Event {
        let mut b = Vec::new();
        b.extend(0u32.to_le_bytes());
        b.push(ty);
        b.extend(1u32.to_le_bytes());
        b.extend((19 + body.len() as u32).to_le_bytes());
        b.extend(1000u32.to_le_bytes());
        b.extend(0u16.to_le_bytes());
        b.extend(body);
        Event::read(&FormatDescriptionEvent::new(BinlogVersion::Version4), &b[..]).unwrap()
    }

    fn col(name: &str, data_type: &str, column_type: &str) -> ColumnRow {
        ColumnRow { table: "t".into(), name: name.into(), data_type: data_type.into(), column_type: column_type.into(), nullable: true, ..Default::default() }
    }

    #[test]
    fn v2_rows_with_binary_json_decode() {
        // Table map: id INT, j JSON, ts TIMESTAMP(0), dt DATETIME(6), u BIGINT UNSIGNED.
        let mut tm = vec![7, 0, 0, 0, 0, 0, 1, 0];
        tm.extend([3]);
        tm.extend(b"app\0");
        tm.extend([1]);
        tm.extend(b"t\0");
        tm.push(5);
        tm.extend([3, 245, 17, 18, 8]);
        tm.extend([3, 4, 0, 6]); // metadata: JSON length bytes, TIMESTAMP2 fsp, DATETIME2 fsp
        tm.push(0b11110);
        let tm_event = event(19, &tm);
        let tme: TableMapEvent<'_> = tm_event.read_event().unwrap();

        let mut rows = vec![7, 0, 0, 0, 0, 0, 1, 0, 2, 0, 5, 0b11111];
        rows.push(0); // no NULLs
        rows.extend(42i32.to_le_bytes());
        // Binary JSON: a small object {"a": true}: type 0, count 1, size, key entry, value entry, key.
        let json = [0x00u8, 1, 0, 12, 0, 11, 0, 1, 0, 0x04, 1, 0, b'a'];
        rows.extend((json.len() as u32).to_le_bytes());
        rows.extend(json);
        rows.extend(1_700_000_000u32.to_be_bytes());
        // DATETIME2(6) 2024-02-29 12:34:56.000007: packed big-endian, sign bit set, + 3 bytes of micros.
        let ym = 2024u64 * 13 + 2;
        let packed: u64 = (1 << 39) | (ym << 22) | (29 << 17) | (12 << 12) | (34 << 6) | 56;
        rows.extend(&packed.to_be_bytes()[3..]);
        rows.extend(&7u32.to_be_bytes()[1..]);
        rows.extend(u64::MAX.to_le_bytes());
        let ev = event(30, &rows);
        let Some(EventData::RowsEvent(data)) = ev.read_data().unwrap() else { panic!("rows event") };

        let info = table_info(
            "t",
            &[
                col("id", "int", "int(11)"),
                col("j", "json", "json"),
                col("ts", "timestamp", "timestamp"),
                ColumnRow { datetime_precision: Some(6), ..col("dt", "datetime", "datetime(6)") },
                col("u", "bigint", "bigint(20) unsigned"),
            ],
            &["id"],
            &[],
        );
        check_table_map(&tme, &info.schema).unwrap();
        let mut got = Vec::new();
        for r in rows_of(&data, &tme) {
            let (before, after) = r.unwrap();
            assert!(before.is_none());
            got.push(to_row(&info, after.unwrap()).unwrap());
        }
        assert_eq!(got.len(), 1);
        let row = &got[0];
        assert!(matches!(row[0], Value::Int(42)));
        assert!(matches!(&row[1], Value::Json(s) if &**s == r#"{"a":true}"#), "{:?}", row[1]);
        assert_eq!(freshet_dataflow::expr::text_of(&row[2]).unwrap(), "2023-11-14 22:13:20");
        assert_eq!(freshet_dataflow::expr::text_of(&row[3]).unwrap(), "2024-02-29 12:34:56.000007");
        assert!(matches!(row[4], Value::UInt(u64::MAX)));
    }

    /// With binlog_row_metadata = FULL (COLUMN_NAME optional metadata), a column renamed
    /// behind the stream's back is a mismatch even though its type still fits.
    #[test]
    fn column_names_in_the_table_map_are_checked() {
        let mut tm = vec![7, 0, 0, 0, 0, 0, 1, 0, 3];
        tm.extend(b"app\0");
        tm.push(1);
        tm.extend(b"t\0");
        tm.extend([2, 3, 3, 0, 0]); // two INT columns, no metadata, null bitmap
        let names: Vec<u8> = [&b"id"[..], &b"x"[..]].iter().flat_map(|n| std::iter::once(n.len() as u8).chain(n.iter().copied())).collect();
        tm.push(4); // COLUMN_NAME
        tm.push(names.len() as u8);
        tm.extend(&names);
        let ev = event(19, &tm);
        let tme: TableMapEvent<'_> = ev.read_event().unwrap();
        let same = table_info("t", &[col("id", "int", "int"), col("x", "int", "int")], &["id"], &[]);
        check_table_map(&tme, &same.schema).unwrap();
        let renamed = table_info("t", &[col("id", "int", "int"), col("y", "int", "int")], &["id"], &[]);
        let e = check_table_map(&tme, &renamed.schema).unwrap_err();
        assert!(e.contains("`x`") && e.contains("`y`"), "{e}");
    }
}
