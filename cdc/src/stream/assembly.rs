//! Transaction assembly: the events of one binlog event group (BEGIN/GTID ... XID/COMMIT, a
//! standalone DDL, the XA forms) become one [`Batch`] or [`SchemaChange`]s, with the rows of
//! the tracked tables decoded against their schema.
//!
//! Owns: [`Txn`] (the group being read), statements (BEGIN/COMMIT/ROLLBACK/SAVEPOINT/XA, DDL
//! and its schema refresh), commits (the batch, the resume point, the lag), rows events
//! (table-map checks, decoding, the per-transaction bound). Does not own: the connection,
//! reconnects, continuity and event classification (the parent module), value decoding
//! (`decode`), DDL parsing (`ddl`).
//!
//! Invariants: the resume point (`delivered`) moves only here and in the parent's rotate and
//! heartbeat handling, always to the end of a whole group (see the parent's header); a
//! transaction with more than `max_batch_changes` changes, or whose changes take more than
//! `max_batch_bytes`, holds none of them.

use std::collections::{HashMap, VecDeque};

use freshet_dataflow::{Batch, Change, Position, Row};
use mysql_async::Conn;
use mysql_async::binlog::events::{Event, RowsEventData, TableMapEvent};

use super::{BinlogStream, SchemaChange, StreamEvent, bounded, now_secs, proto};
use crate::cascade::Cascades;
use crate::ddl::{DdlKind, DdlTarget, Savepoint, may_change_rows, parse_ddl, parse_savepoint};
use crate::decode::decode;
use crate::error::CdcError;
use crate::position::{BinlogPos, MariaGtid};
use crate::schema::{TableInfo, check_table_map, load_tables};
use std::time::Duration;

/// XA transactions prepared in what the stream read and not yet ended, by XID as the binlog
/// names it ([`crate::events::xid_key`]): each one's group, whose changes the XA COMMIT
/// delivers, or None if it could not be kept (more than `max_batch_changes` changes or
/// `max_batch_bytes` held in all, a statement with unseen rows), whose commit is then
/// untrusted. At most [`Self::MAX`]:
/// past it the oldest is forgotten (its commit untrusted too; a prepared transaction nobody
/// ends would otherwise be held for good).
#[derive(Default)]
pub(super) struct PreparedXa {
    held: VecDeque<(Box<str>, Option<Txn>)>,
    /// Changes held in all, and their bytes.
    changes: usize,
    bytes: usize,
}

impl PreparedXa {
    const MAX: usize = 1024;

    fn prepare(&mut self, xid: Box<str>, txn: Option<Txn>, max_changes: usize, max_bytes: usize) {
        self.end(&xid);
        if self.held.len() >= Self::MAX
            && let Some((_, Some(oldest))) = self.held.pop_front()
        {
            self.changes -= oldest.changes.len();
            self.bytes -= oldest.bytes;
        }
        let txn = txn.filter(|t| {
            !t.oversized && t.unseen.is_none() && self.changes + t.changes.len() <= max_changes && self.bytes + t.bytes <= max_bytes
        });
        self.changes += txn.as_ref().map_or(0, |t| t.changes.len());
        self.bytes += txn.as_ref().map_or(0, |t| t.bytes);
        self.held.push_back((xid, txn));
    }

    /// The prepared transaction `xid` ended: what was kept of it (None if it was not read).
    fn end(&mut self, xid: &str) -> Option<Option<Txn>> {
        let at = self.held.iter().position(|(x, _)| **x == *xid)?;
        let (_, txn) = self.held.remove(at)?;
        self.changes -= txn.as_ref().map_or(0, |t| t.changes.len());
        self.bytes -= txn.as_ref().map_or(0, |t| t.bytes);
        Some(txn)
    }
}

/// A transaction being read.
pub(super) struct Txn {
    /// Opened by BEGIN or a non-standalone MariaDB GTID: ends at XID/COMMIT. Otherwise the
    /// next statement is the whole group.
    pub(super) explicit: bool,
    pub(super) changes: Vec<Change>,
    /// MariaDB: the group's GTID.
    pub(super) gtid: Option<MariaGtid>,
    /// The bytes of `changes` as read (a rollback to a savepoint does not take them back).
    pub(super) bytes: usize,
    /// More changes than `max_batch_changes`, or more bytes than `max_batch_bytes`: dropped,
    /// the commit is untrusted.
    pub(super) oversized: bool,
    /// A statement of the group that may have changed rows no row event carries (see
    /// [`may_change_rows`]): the commit is untrusted.
    pub(super) unseen: Option<String>,
    /// Tables of the tracked database whose rows a foreign key's action changed in this group
    /// with no row event (see `cascade`): reported after its batch.
    pub(super) cascaded: Vec<String>,
    /// The group's savepoints, in order: name, and how many changes came before it.
    pub(super) savepoints: Vec<(String, usize)>,
    /// A savepoint statement of the group named one the stream could not read (see
    /// [`Txn::savepoint`]).
    unreadable_savepoint: bool,
}

/// Whether two savepoint names are one to the server: it compares them under its system
/// collation, utf8mb3_general_ci, without padding (`SAVEPOINT \`é\`` moves `e`; `a ` is not `a`).
fn same_savepoint(a: &str, b: &str) -> bool {
    let trailing = |s: &str| s.len() - s.trim_end_matches(' ').len();
    freshet_dataflow::Collation::Utf8mb4GeneralCi.compare(a, b) == std::cmp::Ordering::Equal && trailing(a) == trailing(b)
}

impl Txn {
    pub(super) fn new(explicit: bool, gtid: Option<MariaGtid>) -> Txn {
        Txn {
            explicit,
            changes: Vec::new(),
            gtid,
            bytes: 0,
            oversized: false,
            unseen: None,
            cascaded: Vec::new(),
            savepoints: Vec::new(),
            unreadable_savepoint: false,
        }
    }

    /// A savepoint statement of the group. `ROLLBACK TO` takes back the changes since its
    /// savepoint (MariaDB logs them where a non-transactional table was written since, and
    /// the statement that undoes them after), and forgets the savepoints set after it, as the
    /// server does; `SAVEPOINT` of a name already set moves it; `RELEASE` forgets it and those
    /// after it. Names compare as the server compares them ([`same_savepoint`]). A rollback
    /// to a savepoint the group does not know, of changes already dropped (oversized), or to
    /// a name the stream could not read (U+FFFD: non-ASCII from a client whose character set
    /// is not UTF-8, where `é` and `ü` read alike) leaves the group untrusted.
    fn savepoint(&mut self, statement: Savepoint, sql: &str) {
        let at = |points: &[(String, usize)], name: &str| points.iter().rposition(|(n, _)| same_savepoint(n, name));
        // Which savepoint such a name is, or moved, is unknown from then on: any rollback of
        // the group may be to it.
        let (Savepoint::Set(name) | Savepoint::RollbackTo(name) | Savepoint::Release(name)) = &statement;
        self.unreadable_savepoint |= name.contains(char::REPLACEMENT_CHARACTER);
        match statement {
            Savepoint::Set(name) => {
                if let Some(i) = at(&self.savepoints, &name) {
                    self.savepoints.remove(i);
                }
                self.savepoints.push((name, self.changes.len()));
            }
            Savepoint::RollbackTo(name) => match at(&self.savepoints, &name) {
                Some(i) if !self.oversized && !self.unreadable_savepoint => {
                    self.changes.truncate(self.savepoints[i].1);
                    self.savepoints.truncate(i + 1);
                }
                _ => self.unseen = self.unseen.take().or_else(|| Some(sql.chars().take(200).collect())),
            },
            Savepoint::Release(name) => {
                if let Some(i) = at(&self.savepoints, &name) {
                    self.savepoints.truncate(i);
                }
            }
        }
    }
}

impl BinlogStream {
    pub(super) async fn query(&mut self, sql: &str, default_db: &str, log_pos: u32, ts: u32) -> Result<(), CdcError> {
        let head = sql.trim_start();
        let word = head.split_whitespace().next().unwrap_or("").to_ascii_uppercase();
        match word.as_str() {
            "BEGIN" => {
                self.open_explicit();
                return Ok(());
            }
            "SAVEPOINT" | "ROLLBACK" | "RELEASE" if let Some(statement) = parse_savepoint(head) => {
                match self.txn.as_mut() {
                    Some(t) if t.explicit => t.savepoint(statement, head),
                    // Outside a transaction a savepoint statement changes nothing.
                    _ => {}
                }
                return Ok(());
            }
            "COMMIT" if self.txn.as_ref().is_some_and(|t| t.explicit) => {
                return self.commit(log_pos, ts);
            }
            // MariaDB logs a rolled-back transaction with its rows where it cannot drop them
            // (a temporary table or a non-transactional table written in it): they were
            // undone, on every table a view may read (InnoDB), so the group delivers nothing.
            // A statement it could not follow still makes it untrusted (the safe side).
            "ROLLBACK" if self.txn.as_ref().is_some_and(|t| t.explicit) => {
                if let Some(t) = self.txn.as_mut() {
                    t.changes.clear();
                    t.cascaded.clear();
                    t.oversized = false;
                }
                return self.commit(log_pos, ts);
            }
            "XA" => return self.xa(head, log_pos, ts),
            _ => {}
        }
        // A view created, changed or renamed, in any database (a comment may come first).
        if let Some(views) = &self.cfg.views {
            for name in crate::ddl::view_names(sql, |n| views.contains(n.as_bytes())) {
                views.add(&name);
            }
        }
        // DDL refreshes schemas. Usually it is its own group (standalone); CREATE TABLE ...
        // SELECT is the exception: inside a transaction, before the rows it creates, so its
        // schema change goes out first and the batch follows at the commit.
        let in_txn = self.txn.as_ref().is_some_and(|t| t.explicit);
        let position = BinlogPos::new(self.file.clone(), log_pos).position()?;
        let queued = self.out.len();
        let writes = may_change_rows(sql);
        self.ddl(sql, default_db, position).await?;
        // A write logged as a statement; another database's is spared if nothing of the
        // server's can carry it into the tracked one (`scope`).
        let unseen = match writes {
            true if self.may_reach_tracked(sql, default_db, position).await => Some(sql.chars().take(200).collect::<String>()),
            true => {
                self.lag.update(|l| l.statement_writes_spared += 1);
                None
            }
            false => None,
        };
        if in_txn {
            if let Some(t) = self.txn.as_mut() {
                t.unseen = t.unseen.take().or(unseen);
            }
        } else {
            // A standalone statement is a group of its own. If it changed nothing this stream
            // reports (another database's DDL, CREATE DATABASE, a statement it does not parse),
            // an empty batch still moves the applied position past it; without one, the
            // writer stays behind a position the stream counts as delivered, and a heartbeat
            // (which compares with the delivered position) never repairs it.
            if self.out.len() == queued {
                self.out.push_back(StreamEvent::Batch(Batch { position, changes: Vec::new() }));
            }
            let gtid = self.txn.take().and_then(|t| t.gtid);
            self.deliver_to(BinlogPos::new(self.file.clone(), log_pos), gtid);
            self.lag.update(|l| l.delivered = Some(BinlogPos::new(self.file.clone(), log_pos)));
            self.backoff.reset();
            if let Some(statement) = unseen {
                return Err(unseen_rows(&self.delivered, &statement));
            }
        }
        Ok(())
    }

    /// A group reported untrusted ends at `position`: an empty batch there follows the report,
    /// so that the consumer, having evicted, is applied up to the group's end. Without it a
    /// consumer whose last group was untrusted stays behind until the next write.
    fn untrusted_end(&mut self, position: Position) {
        self.out.push_back(StreamEvent::Batch(Batch { position, changes: Vec::new() }));
    }

    /// BEGIN or XA START: the group opened by a GTID (or none) is explicit from here.
    fn open_explicit(&mut self) {
        let mut t = self.txn.take().unwrap_or_else(|| Txn::new(false, None));
        t.explicit = true;
        self.txn = Some(t);
    }

    /// Schema changes of one statement, for the tracked database.
    async fn ddl(&mut self, sql: &str, default_db: &str, position: Position) -> Result<(), CdcError> {
        let dropped = crate::ddl::parse_drop_database(sql);
        if dropped.as_deref().is_some_and(|d| self.cfg.same_name(d, &self.cfg.database)) {
            let mut names: Vec<String> = self.tables.keys().cloned().collect();
            names.sort();
            for table in names {
                self.out.push_back(StreamEvent::Schema(Box::new(SchemaChange {
                    position,
                    table,
                    kind: DdlKind::DatabaseDropped,
                    schema: None,
                    info: None,
                })));
            }
            self.tables.clear();
        }
        if crate::ddl::privileges_may_change(sql, Some(default_db).filter(|d| !d.is_empty()), &self.cfg.database) {
            self.privileges_changed(position);
        }
        // A text that cannot be read may have changed any table (its rows too: the group is
        // reported untrusted, `may_change_rows`): every schema is read again, as a new
        // stream would, and each table's goes out.
        let readable = crate::ddl::readable(sql);
        let targets = if readable { parse_ddl(sql) } else { self.read_every_table_again().await? };
        // Anything but a plain write of one table (`ddl::write_target`: DDL, a text one reading
        // takes for a write, one that cannot be read, a CALL) may have made a trigger, view or
        // function of any database: what was known of them is forgotten. So does a plain write
        // of the `mysql` schema (`mysql.proc` holds the routines).
        match crate::ddl::write_target(sql) {
            None => {
                let dbs: Vec<String> = targets.iter().map(|t| t.database.clone().unwrap_or_else(|| default_db.to_string())).collect();
                self.scope.after_ddl(sql, &dbs, dropped.as_deref(), self.cfg.names_case_sensitive);
            }
            Some((db, _)) if db.as_deref().unwrap_or(default_db).eq_ignore_ascii_case("mysql") => self.scope.mysql_changed(),
            Some(_) => {}
        }
        // A foreign key may have come or gone with the DDL of a table it reaches the tracked
        // database from: one of its own (a child, or one moved in or out by a rename), or a
        // parent of a known key, in any database (a rename the key follows, a key of its own
        // on a path into this database). DDL of other tables cannot reach it: keys are
        // declared by the child. Each read is a query of every foreign key on the server.
        let reaches = |db: &str, table: &str| self.cfg.same_name(db, &self.cfg.database) || self.cascades.is_parent(db, table);
        if targets.iter().any(|t| reaches(t.database.as_deref().unwrap_or(default_db), &t.table))
            || dropped.is_some_and(|d| self.cascades.holds_parent(&d))
        {
            self.reload_cascades().await?;
        }
        for t in targets {
            let db = t.database.clone().unwrap_or_else(|| default_db.to_string());
            if !self.cfg.same_name(&db, &self.cfg.database) {
                continue;
            }
            if readable {
                self.refresh(&t.table).await?;
            }
            // The table as the server names it (`ALTER TABLE ITEMS` of `items`, where names
            // are folded), so that its schema is found and the change reaches its views.
            let table = self.tables.keys().find(|k| self.cfg.same_name(k, &t.table)).cloned().unwrap_or(t.table);
            let info = self.tables.get(&table).cloned();
            let schema = info.as_ref().map(|i| i.schema.clone());
            // A column dropped and there again: added anew (by this ALTER or a later one),
            // with new values under the old name and type.
            let readded = t.kind == DdlKind::Alter
                && schema.as_ref().is_some_and(|s| {
                    crate::ddl::alter_dropped_columns(sql)
                        .iter()
                        .any(|d| s.columns.iter().any(|c| crate::ddl::same_column_name(&c.name, d)))
                });
            let kind = if readded { DdlKind::Truncate } else { t.kind };
            self.out.push_back(StreamEvent::Schema(Box::new(SchemaChange { position, table, kind, schema, info })));
        }
        Ok(())
    }

    /// Tells the consumer that the server's privileges may have changed (a
    /// [`DdlKind::Privileges`] change with no table).
    pub(super) fn privileges_changed(&mut self, position: Position) {
        self.out.push_back(StreamEvent::Schema(Box::new(SchemaChange {
            position,
            table: String::new(),
            kind: DdlKind::Privileges,
            schema: None,
            info: None,
        })));
    }

    /// XA transactions: their rows are logged at XA PREPARE and take effect at a later
    /// XA COMMIT that carries no rows (or never, at XA ROLLBACK). Prepared rows are not
    /// delivered (not committed yet) but kept ([`PreparedXa`]) and delivered as the commit's
    /// batch: until then the prepared transaction holds its rows' locks, so no write between
    /// the two touched them. A commit whose prepare was not read (before the stream's start,
    /// or not kept) makes the stream untrustworthy for its rows, so it is reported as such
    /// (the caller evicts all state, which is always correct, and may call `next` again).
    /// `XA COMMIT ... ONE PHASE` is an ordinary commit of the rows before it.
    fn xa(&mut self, sql: &str, log_pos: u32, ts: u32) -> Result<(), CdcError> {
        let mut words = sql.split_whitespace();
        let up: Vec<String> = words.by_ref().take(2).map(str::to_ascii_uppercase).collect();
        let xid = crate::events::xid_key(&words.collect::<String>());
        let one_phase = sql.to_ascii_uppercase().contains("ONE PHASE");
        match up.get(1).map(String::as_str) {
            Some("START") | Some("BEGIN") => {
                self.open_explicit();
                Ok(())
            }
            Some("COMMIT") if one_phase => self.commit(log_pos, ts),
            Some("PREPARE") => self.xa_prepared(Some(xid), log_pos, ts),
            Some("ROLLBACK") => {
                self.xa.end(&xid);
                let gtid = self.txn.take().and_then(|t| t.gtid);
                self.txn = Some(Txn::new(false, gtid));
                self.commit(log_pos, ts)
            }
            Some("COMMIT") => {
                let gtid = self.txn.take().and_then(|t| t.gtid);
                if let Some(Some(mut prepared)) = self.xa.end(&xid) {
                    prepared.gtid = gtid;
                    self.txn = Some(prepared);
                    return self.commit(log_pos, ts);
                }
                let end = BinlogPos::new(self.file.clone(), log_pos);
                self.untrusted_end(end.position()?);
                self.deliver_to(end, gtid);
                Err(CdcError::Untrusted(format!("XA COMMIT at {}: its rows were logged at an XA PREPARE not read", self.delivered)))
            }
            _ => Ok(()),
        }
    }

    /// An XA PREPARE at `log_pos` of the group being read: its changes are kept for the
    /// commit (none if `xid` could not be read: the commit is then untrusted), and the group
    /// ends as one that changed nothing (an empty batch: positions and lag move on).
    pub(super) fn xa_prepared(&mut self, xid: Option<Box<str>>, log_pos: u32, ts: u32) -> Result<(), CdcError> {
        let mut txn = self.txn.take();
        let gtid = txn.as_mut().and_then(|t| t.gtid.take());
        if let Some(xid) = xid {
            self.xa.prepare(xid, txn, self.cfg.max_batch_changes, self.cfg.max_batch_bytes);
        }
        self.txn = Some(Txn::new(false, gtid));
        self.commit(log_pos, ts)
    }

    pub(super) fn commit(&mut self, log_pos: u32, ts: u32) -> Result<(), CdcError> {
        self.payload_end = None;
        let txn = self.txn.take().unwrap_or_else(|| Txn::new(false, None));
        let end = BinlogPos::new(self.file.clone(), log_pos);
        let position = end.position()?;
        if txn.oversized || txn.unseen.is_some() {
            self.deliver_to(end.clone(), txn.gtid);
            self.lag.update(|l| l.delivered = Some(end));
            self.untrusted_end(position);
            return Err(match txn.unseen {
                Some(statement) => unseen_rows(&self.delivered, &statement),
                None => CdcError::Untrusted(format!(
                    "a transaction ending at {} has more than {} row changes or more than {} bytes of them",
                    self.delivered, self.cfg.max_batch_changes, self.cfg.max_batch_bytes
                )),
            });
        }
        self.out.push_back(StreamEvent::Batch(Batch { position, changes: txn.changes }));
        for table in txn.cascaded {
            let info = self.tables.get(&table).cloned();
            let schema = info.as_ref().map(|i| i.schema.clone());
            self.out.push_back(StreamEvent::Schema(Box::new(SchemaChange { position, table, kind: DdlKind::Cascaded, schema, info })));
        }
        self.deliver_to(end.clone(), txn.gtid);
        self.backoff.reset();
        let behind = Duration::from_secs(now_secs().saturating_sub(ts as u64));
        self.lag.update(|l| {
            l.delivered = Some(end);
            l.behind = behind;
            l.transactions += 1;
        });
        Ok(())
    }

    /// A delete or update of rows of the table `table_id` maps: the tables of the tracked
    /// database its foreign keys' actions may have changed join the group's `cascaded`.
    pub(super) fn cascade_from(&mut self, table_id: u64) {
        let Some(tme) = self.inner.as_ref().and_then(|i| i.get_tme(table_id)) else { return };
        let changed = self.cascades.changed_by(&tme.database_name(), &tme.table_name(), &self.cfg.database);
        if changed.is_empty() {
            return;
        }
        let txn = self.txn.get_or_insert_with(|| Txn::new(false, None));
        for t in changed {
            if !txn.cascaded.iter().any(|c| c.eq_ignore_ascii_case(&t)) {
                txn.cascaded.push(t);
            }
        }
    }

    /// Re-reads the server's foreign keys with actions.
    async fn reload_cascades(&mut self) -> Result<(), CdcError> {
        if self.meta.is_none() {
            self.meta = Some(bounded(self.cfg.query_timeout, "connect", Conn::new(self.opts.clone())).await?);
        }
        let Some(meta) = self.meta.as_mut() else { unreachable!("meta was set just above") };
        self.foreign_key_reads += 1;
        match tokio::time::timeout(self.cfg.query_timeout, Cascades::load(meta)).await {
            Ok(Ok(c)) => {
                self.cascades = c;
                Ok(())
            }
            Ok(Err(e)) => {
                self.meta = None;
                Err(e)
            }
            Err(_) => {
                self.meta = None;
                Err(CdcError::Timeout("reading the foreign keys".into()))
            }
        }
    }

    /// Re-reads `table`'s schema from information_schema (absent if it no longer exists).
    pub(super) async fn refresh(&mut self, table: &str) -> Result<(), CdcError> {
        let fresh = self.load(Some(table)).await?;
        self.tables.retain(|k, _| !k.eq_ignore_ascii_case(table));
        self.tables.extend(fresh);
        Ok(())
    }

    /// Re-reads the schema of every table of the tracked database: each one known before or
    /// now, as created, dropped or altered.
    async fn read_every_table_again(&mut self) -> Result<Vec<DdlTarget>, CdcError> {
        let fresh = self.load(None).await?;
        let mut targets: Vec<DdlTarget> = self
            .tables
            .keys()
            .map(|table| DdlTarget {
                database: Some(self.cfg.database.clone()),
                table: table.clone(),
                kind: if fresh.contains_key(table) { DdlKind::Alter } else { DdlKind::Drop },
            })
            .collect();
        targets.extend(fresh.keys().filter(|t| !self.tables.contains_key(*t)).map(|table| DdlTarget {
            database: Some(self.cfg.database.clone()),
            table: table.clone(),
            kind: DdlKind::Create,
        }));
        targets.sort_by(|a, b| a.table.cmp(&b.table));
        self.tables = fresh;
        Ok(targets)
    }

    /// The schemas of `only` (or of every table) of the tracked database, from
    /// information_schema.
    async fn load(&mut self, only: Option<&str>) -> Result<HashMap<String, TableInfo>, CdcError> {
        if self.meta.is_none() {
            self.meta = Some(bounded(self.cfg.query_timeout, "connect", Conn::new(self.opts.clone())).await?);
        }
        let Some(meta) = self.meta.as_mut() else { unreachable!("meta was set just above") };
        let loaded = tokio::time::timeout(self.cfg.query_timeout, load_tables(meta, self.flavor.as_ref(), &self.cfg.database, only)).await;
        match loaded {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(e)) => {
                self.meta = None;
                Err(e)
            }
            Err(_) => {
                self.meta = None;
                Err(CdcError::Timeout(only.map_or_else(|| "reading the schemas".into(), |t| format!("reading the schema of `{t}`"))))
            }
        }
    }

    pub(super) async fn rows(&mut self, ev: &Event, tme: &TableMapEvent<'static>) -> Result<(), CdcError> {
        if !self.decodes(&tme.table_name()) {
            // No cache reads it: skipped before its cells are read (see `follow`).
            return Ok(());
        }
        let table = tme.table_name().into_owned();
        let known = self.tables.contains_key(&table);
        // (A table freshet cannot cache is not read again at each event: below.)
        if self.tables.get(&table).is_none_or(|t| t.schema.check().is_ok() && check_table_map(tme, &t.schema).is_err()) {
            // A table created or altered by DDL the stream has not seen yet (or started
            // after): read its schema once more before giving up.
            let before = self.tables.get(&table).map(|t| t.schema.clone());
            self.refresh(&table).await?;
            // A known table whose schema changed with no DDL in the binlog (an ALTER run with
            // binlogging off): the views' catalog has the old schema, and may still serve what
            // it held. The stream's restart gives the catalog the new one.
            if let Some(old) = before
                && self.tables.get(&table).is_some_and(|t| t.schema != old)
            {
                return Err(CdcError::SchemaMismatch { table, reason: "its schema changed with no DDL in the binlog".into() });
            }
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
        let txn = self.txn.get_or_insert_with(|| Txn::new(false, None));
        let (max, max_bytes) = (self.cfg.max_batch_changes, self.cfg.max_batch_bytes);
        for r in rows_of(&data, tme) {
            if txn.oversized {
                break;
            }
            let (before, after) = r.map_err(|e| CdcError::Decode { table: table.clone(), column: "?".into(), reason: e.to_string() })?;
            for (image, insert) in [(before, false), (after, true)] {
                if let Some(image) = image {
                    let row = to_row(info, image)?;
                    txn.bytes += change_bytes(&table, &row);
                    txn.changes.push(Change { table: table.clone(), row, insert });
                }
            }
            if txn.changes.len() > max || txn.bytes > max_bytes {
                txn.oversized = true;
                txn.changes = Vec::new();
                txn.bytes = 0;
            }
        }
        Ok(())
    }
}

/// What a change held in a transaction takes: its slot, its table's name and its row.
fn change_bytes(table: &str, row: &Row) -> usize {
    use freshet_dataflow::mem::heap_block;
    std::mem::size_of::<Change>()
        + heap_block(table.len())
        + heap_block(std::mem::size_of_val::<[freshet_dataflow::Value]>(row))
        + row.iter().map(|v| v.heap_bytes()).sum::<usize>()
}

/// A group with a statement that may have changed rows unseen, ending at `end`.
fn unseen_rows(end: &BinlogPos, statement: &str) -> CdcError {
    CdcError::Untrusted(format!(
        "the group ending at {end} changed rows by a statement logged as a statement, not as rows \
         (its session's binlog_format was not ROW): `{statement}`"
    ))
}

fn rows_of<'a>(data: &'a RowsEventData<'a>, tme: &'a TableMapEvent<'a>) -> mysql_async::binlog::events::RowsEventRows<'a> {
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

/// MySQL 8's row format, decoded from constructed bytes (no MySQL 8 server here): a table map
/// and a v2 WRITE_ROWS event with binary JSON, TIMESTAMP2, DATETIME2(6) and an unsigned BIGINT
/// without signedness metadata, through the same path the stream uses.
#[cfg(test)]
mod mysql8_bytes {
    use super::*;
    use crate::schema::{ColumnRow, table_info};
    use freshet_dataflow::Value;
    use mysql_async::binlog::BinlogVersion;
    use mysql_async::binlog::events::{EventData, FormatDescriptionEvent};

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
        ColumnRow {
            table: "t".into(),
            name: name.into(),
            data_type: data_type.into(),
            column_type: column_type.into(),
            nullable: true,
            ..Default::default()
        }
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

#[cfg(test)]
mod tests {
    #[test]
    fn savepoint_names_compare_as_the_servers() {
        assert!(super::same_savepoint("e", "é"));
        assert!(super::same_savepoint("B", "b"));
        assert!(!super::same_savepoint("a ", "a"), "no padding");
        assert!(!super::same_savepoint("a", "b"));
    }

    /// A savepoint name the stream cannot read (non-ASCII from a client whose character set
    /// is not UTF-8 arrives as U+FFFD) may be any name: `é` and `ü` both read as U+FFFD, so
    /// `SAVEPOINT ü` seemed to move `é`, and `ROLLBACK TO é` kept the changes made between
    /// them (an audit: a rolled-back update served for good). A rollback to such a name leaves
    /// the group untrusted.
    #[test]
    fn a_rollback_to_a_savepoint_name_that_cannot_be_read_is_untrusted() {
        use crate::ddl::Savepoint;
        let unreadable_name = || "\u{FFFD}".to_string();
        let unreadable = unreadable_name();
        let mut txn = super::Txn::new(true, None);
        txn.savepoint(Savepoint::Set(unreadable.clone()), "SAVEPOINT ?");
        txn.savepoint(Savepoint::Set(unreadable.clone()), "SAVEPOINT ?");
        txn.savepoint(Savepoint::RollbackTo(unreadable), "ROLLBACK TO SAVEPOINT ?");
        assert!(txn.unseen.is_some(), "the group is untrusted");
        let mut txn = super::Txn::new(true, None);
        txn.savepoint(Savepoint::Set("a".into()), "SAVEPOINT a");
        txn.savepoint(Savepoint::RollbackTo("A".into()), "ROLLBACK TO SAVEPOINT A");
        assert!(txn.unseen.is_none(), "a name read is followed");
        // `é` moves `e` on the server; read as U+FFFD it seemed another savepoint.
        txn.savepoint(Savepoint::Set("e".into()), "SAVEPOINT e");
        txn.savepoint(Savepoint::Set(unreadable_name()), "SAVEPOINT ?");
        txn.savepoint(Savepoint::RollbackTo("e".into()), "ROLLBACK TO SAVEPOINT e");
        assert!(txn.unseen.is_some(), "a rollback after an unreadable name is untrusted");
    }
}
