//! The binlog stream: the upstream's committed transactions, in commit order, as dataflow
//! [`Batch`]es, with schema changes in order between them.
//!
//! Owns: the replica connection (register, dump from a file:offset), classifying events,
//! reconnect/resume with exponential backoff, continuity checks (`continuity`), the "position
//! gone" and gap reports, and the lag it observes. Grouping events into transactions, decoding
//! row events with the schema and DDL refreshes are in [`assembly`].
//! Does not own: the layout of row events (mysql_common), value conversion (`decode`), DDL
//! parsing (`ddl`), applying batches (the caller feeds `Dataflow::apply`).
//!
//! # Invariants
//! - **Complete and ordered.** Every transaction committed after the start position is
//!   delivered exactly once, in binlog (= commit) order, as one [`Batch`] whose position is the
//!   end offset of its commit event (mapped by `position`). Transactions on other databases
//!   are delivered too, as empty batches, so positions keep advancing and lag stays exact.
//! - **Positions name the file the stream named.** A position's file is the one the
//!   connection's first ROTATE named (the one asked for) or a ROTATE event announced, never
//!   one taken from elsewhere; a reconnect that cannot prove it continues what was delivered
//!   (another or a restarted server, another history, a file no ROTATE announced) is
//!   [`CdcError::Gap`] before any of its events is delivered (see `continuity`).
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
//!   `max_batch_changes` changes or `max_batch_bytes` of them; a larger one is reported
//!   `Untrusted` instead.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use freshet_dataflow::{Batch, Position, TableSchema};
use mysql_async::binlog::events::Event;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStreamRequest, Conn, Opts};

mod assembly;
mod scope;

use self::assembly::{PreparedXa, Txn};
use crate::backoff::Backoff;
use crate::cascade::Cascades;
use crate::continuity::{ServerIdentity, history_differs, names_file};
use crate::ddl::DdlKind;
use crate::error::CdcError;
use crate::events::{EventKind, classify};
use crate::flavor::{self, Flavor};
use crate::follow::FollowedTables;
use crate::lag::LagHandle;
use crate::mariadb_events;
use crate::position::{BinlogPos, MariaGtid, split_file_name};
use crate::schema::{TableInfo, load_tables};

/// MySQL's PREVIOUS_GTIDS event, after a file's format description.
const PREVIOUS_GTIDS: u8 = 35;

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
    /// If set, only these tables' rows are decoded (the tables cached queries read); others'
    /// row events are skipped before their cells are read, and still delimit transactions.
    /// The set may grow while the stream runs: see [`FollowedTables`] and
    /// [`StreamEvent::Following`].
    pub tables: Option<FollowedTables>,
    /// Most row changes one transaction may carry. A larger transaction is not held in
    /// memory: its changes are dropped and its commit is reported as [`CdcError::Untrusted`]
    /// (evict all; the stream goes on).
    pub max_batch_changes: usize,
    /// Most bytes the row changes of one transaction may take in memory, as decoded (every
    /// column of the followed tables' rows, read or not by a view): a larger transaction is
    /// treated as one of more than `max_batch_changes`. Without it, one transaction of large
    /// rows (a backfill of 20 MB texts) was held whole until its commit.
    pub max_batch_bytes: usize,
    /// Whether the server compares database and table names as they are
    /// (`lower_case_table_names = 0`, Linux's default); otherwise without case, as a
    /// statement's names (`ALTER TABLE APP.Items`) may be spelled otherwise than the server
    /// keeps them.
    pub names_case_sensitive: bool,
    /// If set, the views the binlog's DDL creates, renames or changes, in any database, are
    /// added to it (see [`crate::views`]).
    pub views: Option<crate::ViewNames>,
}

/// Whether `a` and `b` name one database or table on a server that compares such names as they
/// are (`case_sensitive`, `lower_case_table_names = 0`) or without case.
pub fn same_name(case_sensitive: bool, a: &str, b: &str) -> bool {
    // Past ASCII too: `AUD_É` is `aud_é` under lower_case_table_names.
    // Folded only when a name is past ASCII: this runs for every rows event.
    if case_sensitive {
        a == b
    } else {
        a.eq_ignore_ascii_case(b) || (!(a.is_ascii() && b.is_ascii()) && a.to_lowercase() == b.to_lowercase())
    }
}

impl StreamConfig {
    /// Whether `a` and `b` name one database or table, as the server compares names.
    pub fn same_name(&self, a: &str, b: &str) -> bool {
        same_name(self.names_case_sensitive, a, b)
    }

    /// Defaults for `database` and `server_id`.
    pub fn new(database: &str, server_id: u32) -> StreamConfig {
        StreamConfig {
            server_id,
            database: database.to_string(),
            heartbeat: Duration::from_secs(1),
            read_timeout: Duration::from_secs(5),
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(2),
            max_retries: 8,
            query_timeout: Duration::from_secs(10),
            tables: None,
            max_batch_changes: 1_000_000,
            max_batch_bytes: 64 << 20,
            names_case_sensitive: true,
            views: None,
        }
    }
}

/// A DDL statement's effect on one table of the tracked database; or, with
/// [`DdlKind::Privileges`] and an empty `table`, a statement that may have changed the
/// server's accounts or privileges; or, with [`DdlKind::Cascaded`], a table whose rows a
/// foreign key's action changed in the batch just before (at the same position).
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
    /// A schema change, in order with the batches (boxed: it carries the table's schema twice,
    /// and batches, the common event, are small).
    Schema(Box<SchemaChange>),
    /// With [`StreamConfig::tables`]: the stream decodes these tables' rows from here on (they
    /// were added to the set since the stream took it). Every later batch carries their rows;
    /// earlier ones may lack them. See [`crate::follow`].
    Following(Vec<String>),
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
    /// The server's foreign keys with actions, read at connect and after DDL that may change
    /// where they reach the tracked database (`assembly`, `ddl`).
    pub(super) cascades: Cascades,
    out: VecDeque<StreamEvent>,
    txn: Option<Txn>,
    /// XA transactions prepared in what this stream read, to deliver at their commit.
    xa: PreparedXa,
    /// Times the foreign keys were read again after DDL ([`BinlogStream::foreign_key_reads`]).
    foreign_key_reads: u64,
    /// What is known of other databases for their writes logged as statements (`scope`).
    scope: scope::Scope,
    /// Reconnect attempts without progress (a commit or a heartbeat) since the last one.
    backoff: Backoff,
    lag: LagHandle,
    /// MariaDB: GTID of the group that ends at `delivered` (None if unknown), which a
    /// reconnect checks against the server's history at `delivered` (see `continuity`).
    last_gtid: Option<MariaGtid>,
    /// MariaDB, a stream started at the server's current position: the last GTID the server
    /// had logged in each domain, all at or before that position. They count as delivered
    /// there, so that read-your-writes does not wait for a group the stream will never read
    /// (a session's write made before a gap's new start).
    start_gtids: Vec<MariaGtid>,
    /// The server as of the first connection; every reconnect must find the same one.
    identity: Option<ServerIdentity>,
    /// The file the resume position was taken in, and when the server began it: checked
    /// against the file's FORMAT_DESCRIPTION on the next connection (`file_described`).
    expected_file: Option<(String, u32)>,
    /// The file this stream read last, as its FORMAT_DESCRIPTION described it: a reconnect
    /// into that file expects the same ([`Self::expected_file`]).
    described: Option<(String, u32)>,
    /// The current connection's first ROTATE has named the file asked for: from here on its
    /// events continue what was delivered.
    verified: bool,
    /// The error behind the current run of reconnects.
    last_error: Option<String>,
    /// End of the current MySQL TRANSACTION_PAYLOAD event: the events inside it carry no
    /// positions of their own, the commit takes this one.
    payload_end: Option<u32>,
    /// With `cfg.tables`: the tables whose rows this stream decodes, and the set's generation
    /// when it took them (taken at connect, and again only between groups: `sync_followed`).
    followed: Option<(u64, Vec<String>)>,
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
        let (delivered, start_gtids) = match start {
            StartAt::At(p) => (p, Vec::new()),
            StartAt::Current => {
                // Read first: every group they name is then at or before the position.
                let gtids = last_gtids(&mut meta, flavor.as_ref(), cfg.query_timeout).await?;
                (current_position(&mut meta, flavor.as_ref(), cfg.query_timeout).await?, gtids)
            }
        };
        let tables = bounded(cfg.query_timeout, "schema", async {
            load_tables(&mut meta, flavor.as_ref(), &cfg.database, None).await.map_err(|e| match e {
                CdcError::Upstream(u) => u,
                other => mysql_async::Error::Other(Box::new(other)),
            })
        })
        .await?;
        let cascades = bounded(cfg.query_timeout, "foreign keys", async {
            Cascades::load(&mut meta).await.map_err(|e| match e {
                CdcError::Upstream(u) => u,
                other => mysql_async::Error::Other(Box::new(other)),
            })
        })
        .await?;
        split_file_name(&delivered.file).ok_or_else(|| CdcError::BadPosition(delivered.to_string()))?;
        let lag = LagHandle::default();
        lag.update(|l| l.delivered = Some(delivered.clone()));
        let backoff = Backoff::new(cfg.backoff_initial, cfg.backoff_max);
        let followed = cfg.tables.as_ref().map(FollowedTables::snapshot);
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
            cascades,
            out: VecDeque::new(),
            txn: None,
            backoff,
            lag,
            payload_end: None,
            xa: PreparedXa::default(),
            foreign_key_reads: 0,
            scope: scope::Scope::default(),
            last_gtid: None,
            start_gtids,
            identity: None,
            expected_file: None,
            described: None,
            verified: false,
            last_error: None,
            followed,
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

    /// MariaDB: the GTID of the transaction that ends at [`BinlogStream::delivered`], if known
    /// (a reconnect checks it against the server's history; resume is by file:offset).
    pub fn last_gtid(&self) -> Option<MariaGtid> {
        self.last_gtid
    }

    /// How many times the server's foreign keys were read again after DDL (each a query of
    /// information_schema, which on a server of many tables takes a while).
    pub fn foreign_key_reads(&self) -> u64 {
        self.foreign_key_reads
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

    /// Reports into `lag` from now on (the caller keeps one handle across streams; the
    /// server positions it remembers start again at this stream's start).
    pub fn use_lag(&mut self, lag: LagHandle) {
        self.use_lag_behind(lag, None);
    }

    /// [`BinlogStream::use_lag`] for a stream resumed at a position stored by an earlier run,
    /// behind what the server wrote up to `unknown_until` meanwhile ([`LagHandle::restart_behind`]).
    pub fn use_lag_behind(&mut self, lag: LagHandle, unknown_until: Option<freshet_dataflow::Position>) {
        let (delivered, verified) = (self.delivered.clone(), self.verified);
        // With the server this stream connected to, read before the handle was handed over.
        lag.restart_behind(&delivered, unknown_until, self.identity.clone());
        if let Ok(at) = delivered.position() {
            for gtid in &self.start_gtids {
                lag.delivered_gtid(*gtid, at);
            }
        }
        lag.update(|l| {
            l.delivered = Some(delivered);
            l.connected = verified;
        });
        self.lag = lag;
    }

    /// A handle to the lag, readable from other tasks.
    pub fn lag(&self) -> LagHandle {
        self.lag.clone()
    }

    async fn open(&mut self) -> Result<(), CdcError> {
        // A binlog event may be larger than the server's max_allowed_packet (an UPDATE's row
        // holds the value before and after, each up to it): the server sends events up to
        // slave_max_allowed_packet (1 GiB by default), and so may the connection read them.
        let opts: Opts = mysql_async::OptsBuilder::from_opts(self.opts.clone()).max_allowed_packet(Some(1 << 30)).into();
        let mut conn = bounded(self.cfg.query_timeout, "connect", Conn::new(opts)).await?;
        for s in self.flavor.binlog_session_setup(self.cfg.heartbeat) {
            bounded(self.cfg.query_timeout, "session setup", conn.query_drop(s)).await?;
        }
        self.conn_id = conn.id();
        self.verified = false;
        self.check_continuity(&mut conn).await?;
        let file = self.delivered.file.clone();
        // Resuming in the file read before: it must be that file, not a later one of its name.
        if let Some(described) = self.described.clone().filter(|(f, _)| *f == file) {
            self.expected_file = Some(described);
        }
        let req = BinlogStreamRequest::new(self.cfg.server_id).with_filename(file.as_bytes()).with_pos(self.delivered.offset as u64);
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
            // The poll found the server's binlog started again: what this connection reads
            // (an unlinked file, say) is not the server's history.
            if let Some(reason) = self.lag.went_back() {
                self.inner = None;
                self.lag.update(|l| l.connected = false);
                return Err(CdcError::Gap { position: self.delivered.clone(), reason });
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
                    self.lag.update(|l| l.connected = false);
                    return Err(self.position_gone(e));
                }
                Err(e) if e.retry_safe() => {
                    tracing::warn!(error = %e, resume = %self.delivered, "binlog connection lost; reconnecting");
                    self.lag.update(|l| l.connected = false);
                    self.last_error = Some(e.to_string());
                    self.inner = None;
                    self.txn = None;
                }
                Err(e) => {
                    if !matches!(e, CdcError::Untrusted(_)) {
                        self.lag.update(|l| l.connected = false);
                    }
                    return Err(e);
                }
            }
        }
    }

    async fn reopen(&mut self) -> Result<(), CdcError> {
        self.backoff.wait().await;
        if self.backoff.failures() > self.cfg.max_retries {
            // Reconnecting kept "working" but the stream made no progress (no commit, no
            // heartbeat) since: the same error at the same place, again and again.
            self.backoff.reset();
            return Err(CdcError::Protocol(format!(
                "{} reconnects without progress at {}; last error: {}",
                self.cfg.max_retries,
                self.delivered,
                self.last_error.as_deref().unwrap_or("none")
            )));
        }
        self.lag.update(|l| l.reconnects += 1);
        match self.open().await {
            Ok(()) => Ok(()),
            Err(e) if e.retry_safe() => {
                tracing::warn!(error = %e, attempt = self.backoff.failures(), "binlog reconnect failed");
                Ok(())
            }
            Err(e) => Err(self.position_gone(e)),
        }
    }

    /// Before a dump on a new connection: the same server, and (MariaDB) the same history at
    /// the resume position, or [`CdcError::Gap`]. See `continuity`.
    async fn check_continuity(&mut self, conn: &mut Conn) -> Result<(), CdcError> {
        let now = bounded(self.cfg.query_timeout, "server identity", async {
            ServerIdentity::read(conn, self.flavor.as_ref()).await.map_err(|e| match e {
                CdcError::Upstream(u) => u,
                other => mysql_async::Error::Other(Box::new(other)),
            })
        })
        .await?;
        let gap = |reason| CdcError::Gap { position: self.delivered.clone(), reason };
        match &self.identity {
            None => self.identity = Some(now.clone()),
            Some(known) => {
                if let Some(why) = known.differs(&now) {
                    return Err(gap(why));
                }
            }
        }
        self.lag.stream_server_is(now);
        if let Some(gtid) = self.last_gtid
            && let Some(why) = history_differs(conn, self.flavor.as_ref(), &self.delivered, gtid, self.cfg.query_timeout).await?
        {
            return Err(gap(why));
        }
        Ok(())
    }

    /// Moves the resume point to `end`, where the group with `gtid` (if known) ends.
    fn deliver_to(&mut self, end: BinlogPos, gtid: Option<MariaGtid>) {
        if let (Some(g), Ok(p)) = (gtid, end.position()) {
            self.lag.delivered_gtid(g, p);
        }
        self.delivered = end;
        self.last_gtid = gtid;
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
        if self.txn.is_none() {
            // Between groups: the only place the set of decoded tables may change.
            self.sync_followed();
        }
        // A file's first events (its format description, MariaDB's GTID list, checkpoint and
        // encryption start, MySQL's previous GTIDs), or a checkpoint later in it.
        let preamble = self.txn.is_none()
            && (matches!(kind, EventKind::FormatDescription { .. })
                || matches!(
                    hdr.event_type_raw(),
                    mariadb_events::BINLOG_CHECKPOINT | mariadb_events::GTID_LIST | mariadb_events::START_ENCRYPTION | PREVIOUS_GTIDS
                ));
        match kind {
            EventKind::FakeRotate { name } => self.check_fake_rotate(&name)?,
            // Nothing before the first ROTATE has said where this connection reads.
            _ if !self.verified => return Err(CdcError::Protocol("the server sent events before naming the binlog file".into())),
            EventKind::Rotate { name, next } => {
                if !same_series(&self.file, &name) {
                    return Err(CdcError::PositionGone {
                        position: self.delivered.clone(),
                        reason: format!("binlog rotated from {} to an unrelated file {name}", self.file),
                    });
                }
                // Its position is where it ends in the file it leaves: the server's end there,
                // never a position in the file it names (which put the end far ahead of the
                // stream after every rotation).
                self.server_seen(log_pos);
                self.file = name;
                if self.txn.is_none() {
                    self.delivered = BinlogPos::new(self.file.clone(), next);
                }
                return Ok(());
            }
            EventKind::Heartbeat => self.heartbeat(log_pos)?,
            EventKind::FormatDescription { created } => self.file_described(created)?,
            EventKind::MariaGtid(g) => self.txn = Some(Txn::new(!g.standalone, Some(g.gtid))),
            EventKind::MysqlGtid => self.txn = Some(Txn::new(false, None)),
            EventKind::Query { sql, schema } => self.query(&sql, &schema, log_pos, hdr.timestamp()).await?,
            // Its rows are in no event: a statement the group cannot be trusted with.
            EventKind::LoadData => self.query("LOAD DATA (an EXECUTE_LOAD_QUERY event)", "", log_pos, hdr.timestamp()).await?,
            // The server lost events here: whatever they changed is in no event.
            EventKind::Incident => self.query("an INCIDENT event (the server's binlog lost events)", "", log_pos, hdr.timestamp()).await?,
            EventKind::Xid => self.commit(log_pos, hdr.timestamp())?,
            EventKind::XaPrepare { one_phase: true, .. } => self.commit(log_pos, hdr.timestamp())?,
            // Prepared, not committed: see `xa`.
            EventKind::XaPrepare { one_phase: false, xid } => self.xa_prepared(xid, log_pos, hdr.timestamp())?,
            EventKind::Rows { table_id, changes_existing } => {
                if changes_existing && !self.cascades.is_empty() {
                    self.cascade_from(table_id);
                }
                let ours = self
                    .inner
                    .as_ref()
                    .and_then(|i| i.get_tme(table_id))
                    .map(|t| self.cfg.same_name(&t.database_name(), &self.cfg.database));
                match ours {
                    None => return Err(CdcError::Protocol(format!("rows event for unknown table id {table_id}"))),
                    Some(false) => {
                        // A row of the privilege tables (a plain write to `mysql.*`).
                        let privileges =
                            self.inner.as_ref().and_then(|i| i.get_tme(table_id)).is_some_and(|t| t.database_name() == "mysql");
                        if privileges {
                            self.privileges_changed(BinlogPos::new(self.file.clone(), log_pos).position()?);
                            // `mysql.proc` among them: the server's routines may have changed.
                            self.scope.mysql_changed();
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
        if preamble {
            self.between_groups(log_pos)?;
        }
        self.server_seen(log_pos);
        Ok(())
    }

    /// An event that is no transaction's, outside one, ending at `log_pos` in the file being
    /// read: an empty batch moves the applied position past it. After a rotation the new
    /// file starts with such events, and a heartbeat (which does the same) comes only when
    /// the server has had nothing to send for its period: rotations with nothing written
    /// between them (FLUSH BINARY LOGS in a loop, a tiny `max_binlog_size`) would otherwise
    /// leave the stream behind the server's end for as long as they go on.
    fn between_groups(&mut self, log_pos: u32) -> Result<(), CdcError> {
        if log_pos == 0 || self.delivered.file != self.file || self.delivered.offset >= log_pos {
            return Ok(());
        }
        let at = BinlogPos::new(self.file.clone(), log_pos);
        self.out.push_back(StreamEvent::Batch(Batch { position: at.position()?, changes: Vec::new() }));
        self.delivered = at.clone();
        self.lag.update(|l| l.delivered = Some(at));
        Ok(())
    }

    /// A heartbeat: the server has nothing more to send, its binlog ends at `log_pos` (an
    /// event boundary). Outside a transaction, whatever lies between the last delivered
    /// boundary and there is not a transaction (a new file's format description and GTID list,
    /// a checkpoint): an empty batch moves the applied position to the server's end, so that an
    /// idle stream after a rotation is caught up, not behind forever.
    fn heartbeat(&mut self, log_pos: u32) -> Result<(), CdcError> {
        let server = BinlogPos::new(self.file.clone(), log_pos);
        if self.txn.is_none() && self.delivered.file == server.file && self.delivered.offset < log_pos {
            self.out.push_back(StreamEvent::Batch(Batch { position: server.position()?, changes: Vec::new() }));
            self.delivered = server.clone();
            let delivered = server.clone();
            self.lag.update(|l| l.delivered = Some(delivered));
        }
        let at_end = self.txn.is_none() && self.delivered == server;
        self.lag.update(|l| {
            l.heartbeats += 1;
            // Across files the poll tells it (`lag::bytes_behind`).
            if let Some(d) = l.delivered.as_ref().filter(|d| d.file == server.file) {
                l.bytes_behind = u64::from(server.offset.saturating_sub(d.offset));
            }
            if at_end {
                l.behind = Duration::ZERO;
                l.bytes_behind = 0;
            }
        });
        self.lag.observe_server(&server);
        self.backoff.reset();
        Ok(())
    }

    /// Takes tables added to `cfg.tables` since the last look, announcing them with
    /// [`StreamEvent::Following`] before any batch that carries their rows. Called between
    /// groups only, so no transaction is delivered with some of a new table's rows skipped
    /// and others not (see `follow`).
    fn sync_followed(&mut self) {
        let (Some(wanted), Some((generation, names))) = (&self.cfg.tables, &mut self.followed) else { return };
        if wanted.generation() == *generation {
            return;
        }
        let (now, all) = wanted.snapshot();
        let new: Vec<String> = all.iter().filter(|t| !names.iter().any(|n| n.eq_ignore_ascii_case(t))).cloned().collect();
        *generation = now;
        *names = all;
        if !new.is_empty() {
            self.out.push_back(StreamEvent::Following(new));
        }
    }

    /// True if rows of `table` are decoded (no set, or in the stream's copy of it).
    pub(super) fn decodes(&self, table: &str) -> bool {
        self.followed.as_ref().is_none_or(|(_, names)| names.iter().any(|n| n.eq_ignore_ascii_case(table)))
    }

    fn server_seen(&self, log_pos: u32) {
        if log_pos > 0 {
            self.lag.observe_server(&BinlogPos::new(self.file.clone(), log_pos));
        }
    }

    /// The FORMAT_DESCRIPTION of the file being read, begun at `created`. If a position in a
    /// file of this name was taken from a file begun at another time ([`Self::expect_file`]),
    /// the server's binlog started again (RESET MASTER) and the position names nothing that was
    /// read: a gap, whatever the offset and the GTIDs say (both repeat after a RESET MASTER).
    fn file_described(&mut self, created: u32) -> Result<(), CdcError> {
        if let Some((file, was)) = self.expected_file.take_if(|(f, _)| *f == self.file)
            && was != created
        {
            return Err(CdcError::Gap {
                position: self.delivered.clone(),
                reason: format!("binlog file {file} was begun at {created}, not at {was} as the one read before (RESET MASTER?)"),
            });
        }
        self.described = Some((self.file.clone(), created));
        let file = self.file.clone();
        self.lag.update(|l| l.file_created = Some((file, created)));
        Ok(())
    }

    /// The position the stream resumes at was taken in `file` as begun at `created` (a
    /// FORMAT_DESCRIPTION's timestamp, `Lag::file_created`): checked when the server describes
    /// the file, before any of its events is delivered.
    pub fn expect_file(&mut self, file: &str, created: u32) {
        self.expected_file = Some((file.to_string(), created));
    }

    /// An artificial ROTATE (not in the binlog; the server sends one first on every
    /// connection, naming the file asked for, and one when it moves on to another file). It must
    /// name the file being read: the one asked for, or the one a ROTATE event announced. Any
    /// other file is a gap: the server starts elsewhere, or the file being read ended without a
    /// ROTATE (the server stopped or crashed there) and a new one began. Never take a position
    /// from it (the first one's name may carry checksum bytes, see `continuity::names_file`).
    fn check_fake_rotate(&mut self, name: &str) -> Result<(), CdcError> {
        if names_file(name, &self.file) {
            if !self.verified {
                self.verified = true;
                self.lag.update(|l| l.connected = true);
            }
            return Ok(());
        }
        Err(CdcError::Gap {
            position: self.delivered.clone(),
            reason: format!("the server went on in {name} while the stream was reading {} (no ROTATE announced it)", self.file),
        })
    }
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

pub(crate) async fn next_event(s: &mut mysql_async::BinlogStream) -> Option<Result<Event, mysql_async::Error>> {
    use futures_core::Stream;
    std::future::poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
}

/// The last GTID the server logged in each domain ([`Flavor::last_gtids_sql`]); none where
/// the flavor has no such list.
async fn last_gtids(conn: &mut Conn, flavor: &dyn Flavor, limit: Duration) -> Result<Vec<MariaGtid>, CdcError> {
    let Some(sql) = flavor.last_gtids_sql() else { return Ok(Vec::new()) };
    let list: Option<String> = bounded(limit, "last GTIDs", conn.query_first(sql)).await?;
    Ok(list.unwrap_or_default().split(',').filter_map(MariaGtid::parse).collect())
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
