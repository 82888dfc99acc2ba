//! The fenced upstream fill source: answers the dataflow's fill requests from the live server,
//! tied to the binlog position the answer reflects.
//!
//! Owns: running a request's state queries (SQL with the missing keys in IN lists) on a pool of
//! connections, the cap on fills in flight (and each view's share of it, all but one, so that
//! fills waiting on one table's locks leave the others room), converting the answers
//! (`result`), and the fence.
//! Does not own: deciding what to fill, deduplication and buffering (dataflow).
//!
//! # The fence (why no write is counted twice or lost)
//! The dataflow skips every batch at or before a fill's position and applies every later one
//! (ARCHITECTURE.md, "Invariants of partial state"). That is exact only if the fill's rows are
//! the database *at* that position: containing every transaction whose commit ends at or before
//! it and none after.
//! - **MariaDB** ([`FenceKind::SnapshotPosition`]): inside `START TRANSACTION WITH CONSISTENT
//!   SNAPSHOT`, `binlog_snapshot_file`/`binlog_snapshot_position` are meant to be the binlog
//!   coordinates of exactly the snapshot; the position maps like batch positions do (end of
//!   the last included commit), so "batch <= fill" is "included". **Measured, they are not
//!   exact** (MariaDB 10.11, docs/decisions.md, cdc, "A snapshot's binlog position is not
//!   exactly its content"): under concurrent commits about 1% of snapshots lack a few commits
//!   the position includes, or show a few it does not. In about 60,000 snapshots, every such
//!   commit ended after the lower of the position and the binlog's end read just before
//!   `START TRANSACTION`, and at or before the end read just after it. The fill reads both ends
//!   (`SHOW MASTER STATUS`, two more round trips) and reports that range as
//!   [`FillResponse::unsure`]; the dataflow waits until the stream has passed it and installs
//!   only the partitions none of whose commits (nor their joined rows') ended between their
//!   request and its end. The read before START is also a margin, not to be folded into the
//!   START's round trip: without it a snapshot more often lacks a commit the stream had
//!   already delivered before the request (docs/decisions.md).
//! - **MySQL 8** ([`FenceKind::GtidBracket`]): there is no snapshot position. `SHOW MASTER
//!   STATUS` (file, position, executed GTID set) is read before the snapshot starts and again
//!   after the queries; the fill is accepted at the first position only if nothing was written
//!   to the binlog in between and the executed set did not change ([`accept_bracket`]), else
//!   retried a bounded number of times and reported unavailable (the read is relayed).
//!   Residual risk, documented in docs/mysql8.md: a transaction already in the binlog but not
//!   yet committed in InnoDB when the snapshot starts; untested live.
//!
//! If the fence fails, the fill fails ([`FillError::Unavailable`]); it never returns rows at a
//! position it cannot vouch for.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use freshet_dataflow::{FillData, FillError, FillRequest, FillResponse, Position, Row, Value, ViewId};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Params, Pool, PoolConstraints, PoolOpts};
use tokio::sync::Semaphore;

use crate::flavor::{FenceKind, Flavor};
use crate::gtid_set::GtidSet;
use crate::position::BinlogPos;
use crate::result::{convert, fill_columns, param};
use crate::schema::TableInfo;

/// Settings of the fill source.
#[derive(Clone, Debug)]
pub struct FillConfig {
    /// Most fills running at once (each holds one connection).
    pub max_in_flight: usize,
    /// Bound on one fill, queueing included.
    pub timeout: Duration,
    /// MySQL 8: attempts before giving up when writes keep landing inside the bracket.
    pub bracket_attempts: u32,
}

impl Default for FillConfig {
    fn default() -> FillConfig {
        FillConfig { max_in_flight: 8, timeout: Duration::from_secs(5), bracket_attempts: 3 }
    }
}

/// The upstream fill source. Cheap to clone; clones share the pool and the cap.
#[derive(Clone)]
pub struct UpstreamFills {
    /// Replaced at a gap ([`UpstreamFills::reconnect`]).
    pool: Arc<std::sync::RwLock<Pool>>,
    opts: Opts,
    fence: FenceKind,
    flavor_sql: &'static str,
    tables: Arc<RwLock<HashMap<String, TableInfo>>>,
    permits: Arc<Semaphore>,
    /// Each view's share of `permits` ([`UpstreamFills::view_permits`]).
    view_permits: Arc<std::sync::Mutex<HashMap<ViewId, Arc<Semaphore>>>>,
    cfg: FillConfig,
    /// The stream's lag handle and the flavor's identity query: each fill checks that it reads
    /// the server the stream reads ([`UpstreamFills::watch_server`]).
    server: Option<(crate::lag::LagHandle, &'static str)>,
    /// Whether the server compares table names as they are ([`UpstreamFills::names_case_sensitive`]).
    names_case_sensitive: bool,
}

/// (file:offset, executed GTID set) as `SHOW MASTER STATUS` reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterStatus {
    pub pos: BinlogPos,
    pub executed: GtidSet,
}

/// MySQL 8 fence decision: the fill taken between `before` and `after` reflects exactly
/// `before.pos` if nothing reached the binlog or the executed set in between.
pub fn accept_bracket(before: &MasterStatus, after: &MasterStatus) -> Option<BinlogPos> {
    (before == after).then(|| before.pos.clone())
}

impl UpstreamFills {
    /// A fill source over `opts` (its database must be the one the cached queries read).
    /// Each pooled connection runs with [`crate::OWN_SESSION`]: `time_zone = '+00:00'`
    /// (TIMESTAMPs as the binlog carries them), no `sql_select_limit` (a global one would cut a
    /// fill short) and `sql_mode = NO_ENGINE_SUBSTITUTION` alone (the server's global may pad
    /// CHAR values, read `''` as NULL or parse the rendered SQL otherwise:
    /// PAD_CHAR_TO_FULL_LENGTH, EMPTY_STRING_IS_NULL, ANSI_QUOTES, NO_BACKSLASH_ESCAPES,
    /// PIPES_AS_CONCAT, ORACLE...; sessions under such flags are relayed, and the flag kept
    /// changes no SELECT); then `div_precision_increment = 4` (quotients as a view computes
    /// them, whatever the server's default) and REPEATABLE READ (what a consistent snapshot
    /// needs). The pool does not reset connections
    /// when they come back: COM_RESET_CONNECTION would give them the server's globals again,
    /// and a fill runs only its own read-only transaction, which leaves nothing behind.
    pub fn new(opts: Opts, database: &str, flavor: &dyn Flavor, tables: HashMap<String, TableInfo>, cfg: FillConfig) -> UpstreamFills {
        let n = cfg.max_in_flight.max(1);
        let constraints = PoolConstraints::new(1, n).unwrap_or_default();
        let opts: Opts = OptsBuilder::from_opts(opts)
            .db_name(Some(database.to_string()))
            .init(vec![
                crate::OWN_SESSION.to_string(),
                "SET div_precision_increment = 4".to_string(),
                "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ".to_string(),
                format!("SET SESSION lock_wait_timeout = {}", cfg.timeout.as_secs().max(1)),
            ])
            .pool_opts(PoolOpts::default().with_constraints(constraints).with_reset_connection(false))
            .into();
        UpstreamFills {
            pool: Arc::new(std::sync::RwLock::new(Pool::new(opts.clone()))),
            opts,
            fence: flavor.fence(),
            flavor_sql: flavor.current_position_sql(),
            tables: Arc::new(RwLock::new(tables)),
            permits: Arc::new(Semaphore::new(n)),
            view_permits: Arc::default(),
            cfg,
            server: None,
            names_case_sensitive: true,
        }
    }

    /// How the server compares table names (`lower_case_table_names`; as they are, the
    /// default, on 0): what DDL of a table replaces ([`UpstreamFills::set_table`]) and which
    /// table a fill's plan names. Compared without case on a server with names as they are,
    /// `CREATE TABLE ev` dropped what the source knew of `Ev`, whose fills then read an ENUM
    /// as text and matched no row of its views.
    pub fn names_case_sensitive(mut self, yes: bool) -> UpstreamFills {
        self.names_case_sensitive = yes;
        self
    }

    /// What the source knows of the table `name`, found as the server compares names.
    fn table<'t>(&self, tables: &'t HashMap<String, TableInfo>, name: &str) -> Option<&'t TableInfo> {
        tables.get(name).or_else(|| {
            let folded = !self.names_case_sensitive;
            tables.iter().find(|(k, _)| folded && crate::stream::same_name(false, k, name)).map(|(_, t)| t)
        })
    }

    /// Each fill first reads who the server behind its connection is, and refuses (the read
    /// is relayed) unless it is the server the stream reads (`lag`'s
    /// [`LagHandle::stream_server`](crate::lag::LagHandle::stream_server)): a pool's
    /// connection made while the address led elsewhere (a failover flipped and back, a proxy
    /// that keeps old connections) would fill a view with another server's rows at that
    /// server's position, which the stream's would never overtake. Another server also ends the
    /// stream with a gap (`LagHandle::server_changed`). One more query per fill.
    pub fn watch_server(mut self, lag: crate::lag::LagHandle, identity_sql: &'static str) -> UpstreamFills {
        self.server = Some((lag, identity_sql));
        self
    }

    /// After a gap: fills connect anew, so that none reads from a server the stream no longer
    /// follows (a failover that left existing connections on the old primary, which the pool's
    /// may be). Fills in flight finish on their old connections; the writer's new start keeps
    /// what they answer out of the views.
    pub fn reconnect(&self) {
        let old = std::mem::replace(&mut *self.pool.write().unwrap_or_else(|e| e.into_inner()), Pool::new(self.opts.clone()));
        tokio::spawn(async move {
            let _ = old.disconnect().await;
        });
    }

    /// Replaces (or with `None` removes) what the source knows of a table, after DDL.
    pub fn set_table(&self, name: &str, info: Option<TableInfo>) {
        if let Ok(mut t) = self.tables.write() {
            t.retain(|k, _| !crate::stream::same_name(self.names_case_sensitive, k, name));
            if let Some(i) = info {
                t.insert(name.to_string(), i);
            }
        }
    }

    /// Answers `req` (state queries only; base scans are for the replica source).
    pub async fn fill(&self, req: &FillRequest) -> Result<FillResponse, FillError> {
        match tokio::time::timeout(self.cfg.timeout, self.fill_unbounded(req)).await {
            Ok(r) => r,
            Err(_) => Err(FillError::Unavailable(format!("fill of {} keys timed out after {:?}", req.keys.len(), self.cfg.timeout))),
        }
    }

    /// The permits one view's fills may hold at once: all but one (at least one). A table
    /// whose reads wait (a metadata lock queued behind a long transaction, an ALTER waiting
    /// for it) holds its fills until the bound; the other views' fills keep the last one
    /// (each fill takes up to 64 keys and a few milliseconds), and one view alone still fills
    /// nearly as many at once as before.
    fn view_permits(&self, view: ViewId) -> Arc<Semaphore> {
        let share = self.cfg.max_in_flight.saturating_sub(1).max(1);
        let mut m = self.view_permits.lock().unwrap_or_else(|e| e.into_inner());
        // Views come and go with DDL: the idle shares of gone ones are dropped now and then.
        if m.len() >= 1024 {
            m.retain(|_, s| s.available_permits() < share);
        }
        m.entry(view).or_insert_with(|| Arc::new(Semaphore::new(share))).clone()
    }

    async fn fill_unbounded(&self, req: &FillRequest) -> Result<FillResponse, FillError> {
        let view = self.view_permits(req.view);
        let _view_permit = view.acquire().await.map_err(|e| FillError::Unavailable(e.to_string()))?;
        let _permit = self.permits.acquire().await.map_err(|e| FillError::Unavailable(e.to_string()))?;
        let pool = self.pool.read().unwrap_or_else(|e| e.into_inner()).clone();
        let mut conn = pool.get_conn().await.map_err(unavailable)?;
        if let Some((lag, identity_sql)) = &self.server {
            let now = crate::continuity::ServerIdentity::read_with(&mut conn, identity_sql)
                .await
                .map_err(|e| FillError::Unavailable(e.to_string()))?;
            if let Some(why) = lag.stream_server().and_then(|stream| stream.differs(&now)) {
                // Not given back to the pool.
                let _ = conn.disconnect().await;
                lag.server_changed(format!("a fill's connection reached another server than the stream's: {why}"));
                return Err(FillError::Unavailable(format!("the fill's connection reaches another server than the stream: {why}")));
            }
        }
        let (position, answers, unsure) = match self.fence {
            FenceKind::SnapshotPosition => self.fill_snapshot(&mut conn, req).await?,
            FenceKind::GtidBracket => self.fill_bracketed(&mut conn, req).await?,
        };
        if position < req.min_position {
            return Err(FillError::Behind { have: position, need: req.min_position });
        }
        let answer = FillResponse::answer(req, position, FillData::States(answers));
        Ok(match unsure {
            Some((from, to)) => answer.unsure_within(from, to),
            None => answer,
        })
    }

    /// MariaDB: the snapshot's position, and the range of commits its content may disagree
    /// with it on (module header, "The fence"): after the lower of the position and the
    /// binlog's end read just before `START TRANSACTION`, up to the end read just after.
    async fn fill_snapshot(
        &self,
        conn: &mut Conn,
        req: &FillRequest,
    ) -> Result<(Position, Vec<Vec<(Row, i64)>>, Option<(Position, Position)>), FillError> {
        let before = self.master_status(conn).await?.pos.position().map_err(|e| FillError::Unavailable(e.to_string()))?;
        conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY").await.map_err(unavailable)?;
        let r = async {
            let status: Vec<(String, String)> = conn.query("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'").await.map_err(unavailable)?;
            let after = self.master_status(conn).await?.pos.position().map_err(|e| FillError::Unavailable(e.to_string()))?;
            let get = |name: &str| status.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
            let (Some(file), Some(offset)) = (get("binlog_snapshot_file"), get("binlog_snapshot_position")) else {
                return Err(FillError::Unavailable("the server reports no binlog snapshot position (is log_bin on?)".into()));
            };
            let offset: u32 = offset.parse().map_err(|_| FillError::Unavailable(format!("bad binlog_snapshot_position {offset}")))?;
            let position = BinlogPos::new(file, offset).position().map_err(|e| FillError::Unavailable(e.to_string()))?;
            let answers = self.run_queries(conn, req).await?;
            Ok((position, answers, Some((position.min(before), after))))
        }
        .await;
        // Read-only: COMMIT and ROLLBACK are equivalent; a failure here drops the connection.
        let end = conn.query_drop("COMMIT").await;
        let out = r?;
        end.map_err(unavailable)?;
        Ok(out)
    }

    async fn fill_bracketed(
        &self,
        conn: &mut Conn,
        req: &FillRequest,
    ) -> Result<(Position, Vec<Vec<(Row, i64)>>, Option<(Position, Position)>), FillError> {
        for _ in 0..self.cfg.bracket_attempts.max(1) {
            let before = self.master_status(conn).await?;
            conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY").await.map_err(unavailable)?;
            let answers = self.run_queries(conn, req).await;
            let end = conn.query_drop("COMMIT").await;
            let answers = answers?;
            end.map_err(unavailable)?;
            let after = self.master_status(conn).await?;
            if let Some(pos) = accept_bracket(&before, &after) {
                let p = pos.position().map_err(|e| FillError::Unavailable(e.to_string()))?;
                return Ok((p, answers, None));
            }
        }
        Err(FillError::Unavailable("writes kept committing during the fill (GTID bracket); relay the read".into()))
    }

    async fn master_status(&self, conn: &mut Conn) -> Result<MasterStatus, FillError> {
        let row: Option<mysql_async::Row> = conn.query_first(self.flavor_sql).await.map_err(unavailable)?;
        let row = row.ok_or_else(|| FillError::Unavailable("binary logging is off".into()))?;
        let file: Option<String> = row.get(0);
        let pos: Option<u64> = row.get(1);
        let gtids: Option<String> = row.get(4);
        match (file, pos) {
            (Some(f), Some(p)) => Ok(MasterStatus {
                pos: BinlogPos::new(f, p as u32),
                executed: GtidSet::parse(gtids.as_deref().unwrap_or("")).unwrap_or_default(),
            }),
            _ => Err(FillError::Unavailable("unexpected SHOW MASTER STATUS answer".into())),
        }
    }

    async fn run_queries(&self, conn: &mut Conn, req: &FillRequest) -> Result<Vec<Vec<(Row, i64)>>, FillError> {
        let mut answers = Vec::with_capacity(req.queries.len());
        for q in &req.queries {
            let params = Params::Positional(q.params.iter().map(param).collect());
            let rows: Vec<mysql_async::Row> = conn.exec(q.sql.as_str(), params).await.map_err(unavailable)?;
            let mut answer = Vec::with_capacity(rows.len());
            let mut cols = None;
            for row in rows {
                let cols = match &cols {
                    Some(c) => c,
                    None => {
                        let tables = self.tables.read().map_err(|e| FillError::Unavailable(e.to_string()))?;
                        cols.insert(fill_columns(row.columns_ref(), |t| self.table(&tables, t), |i| q.plan.origin_column(i)))
                    }
                };
                let mut vals: Vec<Value> = Vec::with_capacity(cols.len());
                for (v, c) in row.unwrap().into_iter().zip(cols.iter()) {
                    vals.push(convert(c, v).map_err(FillError::Unavailable)?);
                }
                let weight = if q.grouped {
                    match vals.pop() {
                        Some(Value::Int(n)) => n,
                        Some(Value::UInt(n)) => n as i64,
                        other => return Err(FillError::Unavailable(format!("grouped fill without a count: {other:?}"))),
                    }
                } else {
                    1
                };
                answer.push((vals.into_boxed_slice(), weight));
            }
            answers.push(answer);
        }
        Ok(answers)
    }
}

fn unavailable(e: mysql_async::Error) -> FillError {
    FillError::Unavailable(format!("upstream: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(file: &str, off: u32, gtids: &str) -> MasterStatus {
        MasterStatus { pos: BinlogPos::new(file, off), executed: GtidSet::parse(gtids).unwrap() }
    }

    const U: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    #[test]
    fn bracket_accepts_only_a_quiet_window() {
        let a = status("b.000001", 100, &format!("{U}:1-10"));
        assert_eq!(accept_bracket(&a, &a.clone()), Some(BinlogPos::new("b.000001", 100)));
        // A commit in between moved the binlog.
        assert_eq!(accept_bracket(&a, &status("b.000001", 300, &format!("{U}:1-11"))), None);
        // A transaction already logged before the window committed in the engine during it.
        assert_eq!(accept_bracket(&a, &status("b.000001", 100, &format!("{U}:1-11"))), None);
        // A rotation with no commits still moves the coordinates: retry (safe, just slower).
        assert_eq!(accept_bracket(&a, &status("b.000002", 4, &format!("{U}:1-10"))), None);
    }
}
