//! Read-your-writes, the session's side: notice that the session may have written, and
//! before its next cached read ask the server where that write is, then wait for the views
//! (`cache::ryw`) or relay.
//!
//! What counts as a write: every relayed statement not known to only read (the same words as
//! the eviction after an unlogged write: anything but SELECT, SHOW, SET, USE, DESCRIBE,
//! EXPLAIN, HELP, and any text with a `;`; MariaDB's `SET STATEMENT ... FOR` counts whatever
//! follows FOR), every prepared statement executed whose text is
//! not known, COMMIT, and any command too long to route. A statement freshet cannot classify
//! counts as one, and so does one that may run stored code (`glance::writes_or_sets`, `glance::calls_a_routine`: a
//! function that is not built in, called by a SELECT, SET, SHOW or DO; a view that may call one).
//!
//! Where the write is: MariaDB names the GTID of the session's own last commit in
//! `@@last_gtid`, read with a one-row SELECT on the session's own connection right before the
//! cached read, with the server's last GTID per domain (`@@gtid_binlog_pos`: a domain
//! numbered again since the stream delivered its numbers makes the read wait by position,
//! `Asked::numbered_again`) (never right after the write: the client may still ask for the write's
//! warnings or ROW_COUNT()). When the read probes the session too (a write may have run stored
//! code that changed its settings, `glance::writes_or_sets`, `glance::calls_a_routine`), the probe's SELECT reads it
//! as one more column: one round trip, not two. Like the probe, that SELECT sets `FOUND_ROWS()` to 1,
//! `ROW_COUNT()` to -1 and clears the warnings, as the client's own SELECT would have done in
//! its place. A server without such a variable (MySQL 8), or an empty answer, makes the
//! session wait for the server's position as polled after now instead (at most one poll, 100
//! ms, later). Nothing is asked while the session has not written since it last asked.
//!
//! A GTID equal to the one the session last waited for successfully needs no wait (the
//! statements since then did not commit anything: a ROLLBACK, an UPDATE that matched no row).
//! Nor does an empty `@@last_gtid`: MariaDB keeps it empty while the session has logged
//! nothing (its writes matched no row, or only read) — unless the server forgot the session's
//! last GTID since the write (COM_RESET_CONNECTION, COM_CHANGE_USER): then the empty answer
//! proves nothing and the session waits as for a write whose position is unknown.

use std::time::Instant;

use crate::cache::Engine;
use crate::cache::route::RelayReason;
use crate::cache::ryw::{Asked, Target};

use super::{Session, SessionError};

/// The reply to the GTID SELECT is one short value; anything larger is not the server's.
const LIMIT: usize = 4 * 1024;

/// A session's read-your-writes state.
#[derive(Debug, Default)]
pub struct OwnWrites {
    /// A statement that may have written was relayed since the server was last asked.
    wrote: bool,
    /// What the next cached read waits for, until the views have processed it, and the era
    /// (`cache::ryw`) it was learnt in.
    target: Option<(Target, u64)>,
    /// The GTID text `target` came from, if it did.
    target_gtid: Option<String>,
    /// The GTID text of the session's last commit that the views are known to have applied,
    /// and the era (`cache::ryw`) they applied it in.
    applied_gtid: Option<(String, u64)>,
    /// What the stream had delivered in each domain right before the session was asked for
    /// its GTID (`Asked::numbered_again`).
    delivered_before: Vec<(u32, u64)>,
    /// The server may have forgotten the session's last GTID since it was last asked.
    forgotten: bool,
    /// The session's GTID as the probe of the read being routed read it (`Session::probe`),
    /// so that the read asks the server once; None if the probe did not ask.
    asked: Option<Option<String>>,
    /// A write chose its GTID's sequence number, maybe lower than the domain's last: its
    /// number says nothing of where it is in the binlog, so the read waits for the server's
    /// position after it instead.
    chose_gtid: bool,
}

impl OwnWrites {
    /// The session relayed a statement that may have written.
    pub fn wrote(&mut self) {
        self.wrote = true;
        self.asked = None;
    }

    /// The write just relayed chose its GTID's sequence number.
    pub fn chose_gtid(&mut self) {
        self.chose_gtid = true;
    }

    /// The session was reset or changed user: the server's `@@last_gtid` starts empty again.
    pub fn server_forgot(&mut self) {
        self.forgotten = true;
        self.asked = None;
    }

    /// The expression the probe of a cached read should select as well: the session's GTID,
    /// if the read will ask for it (the session wrote since it last asked).
    pub fn gtid_to_ask(&self, settings: &crate::cache::Settings) -> Option<&'static str> {
        settings.session_gtid.filter(|_| self.wrote && settings.read_your_writes)
    }

    /// Right before the session is asked for its GTID (by the probe or alone): notes what
    /// the stream has delivered.
    pub fn before_asking(&mut self, engine: &Engine) {
        self.delivered_before = engine.lag_handle().delivered_gtids();
    }

    /// What the probe read of [`gtid_to_ask`](Self::gtid_to_ask)'s expression.
    pub fn probe_asked(&mut self, gtid: Option<String>) {
        self.asked = Some(gtid);
    }

    /// The routed read is done: an answer the probe read for it is not the server's later.
    pub fn routed(&mut self) {
        self.asked = None;
    }
}

impl Session {
    /// Before a cached read: None to answer it, or relay it because the views may not have
    /// applied the session's own write yet.
    pub(super) async fn own_writes(&mut self, engine: &Engine) -> Result<Option<RelayReason>, SessionError> {
        if !engine.settings.read_your_writes {
            return Ok(None);
        }
        if std::mem::take(&mut self.own.wrote) {
            let answer = match (self.own.asked.take(), engine.settings.session_gtid) {
                (Some(asked), _) => asked,
                (None, Some(expression)) => {
                    self.own.before_asking(engine);
                    self.session_gtid(expression).await?
                }
                (None, None) => None,
            };
            engine.ryw().asked.inc();
            let forgotten = std::mem::take(&mut self.own.forgotten);
            let answer = answer.filter(|_| !std::mem::take(&mut self.own.chose_gtid));
            let asked = answer.as_deref().map(Asked::parse);
            let gtid = asked.map(|a| a.last.to_string());
            let era = engine.ryw().era();
            match gtid.as_deref().and_then(Target::from_gtid) {
                // The domain was numbered again since the stream delivered its numbers: the
                // write is past whatever the server had written by now.
                Some(Target::Gtid { domain, .. }) if asked.is_some_and(|a| a.numbered_again(domain, &self.own.delivered_before)) => {
                    self.own.target = Some((Target::ServerAt(Instant::now()), era));
                    self.own.target_gtid = None;
                }
                // Nothing committed since the last wait that succeeded.
                Some(_) if gtid.as_ref().is_some_and(|g| self.own.applied_gtid == Some((g.clone(), era))) => {}
                Some(target) => {
                    self.own.target = Some((target, era));
                    self.own.target_gtid = gtid;
                }
                // The session has logged nothing: nothing to wait for.
                None if gtid.as_deref().is_some_and(|g| g.trim().is_empty()) && !forgotten => {}
                // Unknown: past whatever the server had written by now (after the reply).
                None => {
                    self.own.target = Some((Target::ServerAt(Instant::now()), engine.ryw().era()));
                    self.own.target_gtid = None;
                }
            }
        }
        let Some((mut target, era)) = self.own.target else { return Ok(None) };
        let reached = match target {
            Target::Position(p) if engine.ryw().reached(p, era) => true,
            _ => {
                engine.ryw().waits.inc();
                engine.await_own_write(&mut target, era, engine.settings.ryw_timeout).await
            }
        };
        if reached {
            self.own.target = None;
            self.own.applied_gtid = self.own.target_gtid.take().map(|g| (g, engine.ryw().era()));
            Ok(None)
        } else {
            self.own.target = Some((target, era));
            Ok(Some(RelayReason::OwnWrite))
        }
    }

    /// Selects `expression` on the session's connection: its value, or None if the server
    /// answered otherwise (an error, NULL).
    async fn session_gtid(&mut self, expression: &str) -> Result<Option<String>, SessionError> {
        let sql = format!("SELECT {expression}");
        let row = self.one_row(sql.as_bytes(), 1, LIMIT, "reading the session's GTID").await?;
        Ok(row.and_then(|mut values| values.pop().flatten()))
    }
}
