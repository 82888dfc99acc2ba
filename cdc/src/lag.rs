//! Replication lag: how far what the caller has applied trails what the server has written, in
//! time, readable from other tasks.
//!
//! Owns: [`Lag`] (plain numbers the proxy renders as `freshet_cdc_*` metrics and shows in
//! status), [`LagHandle`], the record of *when each server position was first seen*, and
//! [`spawn_position_poll`], the task that reads the server's position every [`POLL`].
//! Does not own: the applied position (the caller's, passed to [`LagHandle::behind`]).
//!
//! Also kept here for read-your-writes (the proxy's `cache::ryw`): per MariaDB GTID domain,
//! the sequence number of the last delivered group and the position where it ends
//! ([`LagHandle::gtid_delivered_at`]), and whether the poll has read the server's position
//! since a given instant ([`LagHandle::polled_since`]). Within a domain, sequence numbers
//! grow in binlog order, so a group with a later sequence number ends at or after the
//! group of an earlier one. One entry per domain (a handful), forgotten when the stream
//! restarts at another position.
//!
//! # How lag is measured, and what it bounds
//! The server's binlog position is observed by polling `SHOW MASTER STATUS` every [`POLL`] and
//! from the stream itself (every event's end, heartbeats). Each observation that moves past the
//! last one is kept with the instant the server may have written it at the earliest: the last
//! poll before it was seen (the instant its question was sent, since the server read its end
//! somewhere between that and the answer; the instant it was seen if no poll answered yet). The lag for an applied position `A` is
//! `now - (that instant of the oldest observed position after A)`, zero if none is: at least
//! the age of the oldest change the server has and the caller has not applied, counting events
//! still queued inside freshet and a large transaction from the moment the server committed it
//! (it enters the binlog, and the position moves, at its commit). So an answer computed at `A`
//! is at most `lag` older than the server's state, including a backlog the server wrote while
//! the poll and the stream could not reach it (timed from the last answer before, not from the
//! reconnect). That holds while the poll succeeds; when it is
//! late (the server does not answer it), a change written since the last poll may not have
//! been seen at all, so the lag is at least the poll's age less one [`POLL`]: the same bound
//! holds until the poll is [`POLL_STALE`] and readers call the lag unknown. Positions are not
//! timestamps of the binlog (one-second resolution, written when a transaction *started*
//! committing on the server that originated it), so clock skew and replication delay upstream
//! do not enter.
//!
//! Memory is bounded: at most [`SEEN_MAX`] observations are kept; observations closer than
//! [`SEEN_GRAIN`] in time share one entry (the earlier instant, the later position), and when
//! full the two oldest merge the same way. Both only ever overstate the lag.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use freshet_dataflow::Position;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};

use crate::backoff::Backoff;
use crate::position::{BinlogPos, MariaGtid};

/// How often the server's position is polled.
pub const POLL: Duration = Duration::from_millis(100);
/// A poll older than this means the server's position is unknown (and so is the lag).
pub const POLL_STALE: Duration = Duration::from_millis(1000);
/// How often the poll reads the server's binlog settings again ([`Lag::settings`]), and asks
/// on a new connection who the server behind the address is.
pub const SETTINGS_EVERY: Duration = Duration::from_secs(5);
/// Observations kept at most (about a minute and a half of a busy server at one per
/// [`SEEN_GRAIN`]).
pub const SEEN_MAX: usize = 8192;
/// Observations closer than this share one entry.
pub const SEEN_GRAIN: Duration = Duration::from_millis(10);

/// Replication lag as last observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lag {
    /// Last delivered commit boundary.
    pub delivered: Option<BinlogPos>,
    /// The server's end of binlog as last observed (poll, heartbeat or event).
    pub server: Option<BinlogPos>,
    /// Seconds between the last delivered transaction's commit (binlog timestamp, one-second
    /// resolution) and its delivery; zero once a heartbeat says the stream is at the server's
    /// end. A diagnostic only: [`LagHandle::behind`] is the lag freshness is judged by.
    pub behind: Duration,
    /// Bytes of binlog between `delivered` and the server's end, as the position poll (every
    /// [`POLL`]; across files by the server's list of its binary logs) or a heartbeat last
    /// told it.
    pub bytes_behind: u64,
    /// Transactions delivered since the stream started.
    pub transactions: u64,
    /// Reconnects since the stream started.
    pub reconnects: u64,
    /// Writes of other databases logged as statements that the stream spared, having ruled out
    /// every way into the tracked database (`stream::scope`); the others are untrusted groups.
    pub statement_writes_spared: u64,
    /// Heartbeats received (the server sends them only when it has nothing else to send).
    pub heartbeats: u64,
    /// Lag in events: transactions and schema changes read from the binlog but not yet taken
    /// by the applier (the channel of [`crate::BinlogStream::spawn`]).
    pub queued: u64,
    /// The binlog connection is up and has been verified to continue what was delivered (its
    /// first ROTATE named the file asked for, the server is the same; see `continuity`).
    pub connected: bool,
    /// When the lag was last updated.
    pub updated: Option<Instant>,
    /// When the server's position was last read successfully by the poll.
    pub polled: Option<Instant>,
    /// What is wrong with the server's global binlog settings, one line naming the fix each
    /// (`checks::binlog_settings`), as the poll last read them every [`SETTINGS_EVERY`]; empty
    /// when they are as freshet needs or were not read yet. An operator may change them while
    /// freshet runs, long after the start-up check.
    pub settings: Vec<String>,
    /// When the poll last read the binlog settings.
    pub settings_read: Option<Instant>,
    /// The binlog file being read and when the server began it (its FORMAT_DESCRIPTION's
    /// timestamp): with a position, what tells that file from a later one of the same name.
    pub file_created: Option<(String, u32)>,
}

impl Lag {
    /// The binlog settings' problems as last read ([`Lag::settings`]), or None if the poll has
    /// not read them within three [`SETTINGS_EVERY`] (it is not connected): not known.
    pub fn settings_known(&self) -> Option<&[String]> {
        self.settings_read.filter(|t| t.elapsed() < 3 * SETTINGS_EVERY).map(|_| &self.settings[..])
    }
}

/// The lag of an applied position, see [`LagHandle::behind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Behind {
    /// Age of the oldest change the server has and the applied position does not, or, if the
    /// poll is late, at least the poll's age less one [`POLL`] (see the module header).
    pub lag: Duration,
    /// The server's position as last observed.
    pub server: Option<Position>,
    /// How long ago the poll last read the server's position.
    pub polled_ago: Option<Duration>,
    /// The applied position is behind a backlog whose age no one saw (written while no freshet
    /// ran: [`LagHandle::restart_behind`]): `lag` says nothing, the lag is not known.
    pub unknown_age: bool,
}

#[derive(Debug, Default)]
struct Inner {
    lag: Lag,
    /// (server position, first seen), strictly increasing in both.
    seen: VecDeque<(Position, Instant)>,
    /// MariaDB: (domain, sequence number, end position) of the last delivered group per
    /// GTID domain.
    gtids: Vec<(u32, u64, Position)>,
    /// Why the server's binlog is not the history the stream reads, if the poll found it so
    /// (its end went back: RESET MASTER). Cleared when a new stream starts ([`LagHandle::restart_at`]).
    went_back: Option<String>,
    /// The end of a backlog of unknown age ([`LagHandle::restart_behind`]), until applied.
    unknown_until: Option<Position>,
    /// Who the server the stream reads is, as it read it when it connected
    /// ([`LagHandle::stream_server`]).
    stream_server: Option<crate::continuity::ServerIdentity>,
}

/// A cheap handle to read a stream's lag from elsewhere (metrics, readiness, the gate).
#[derive(Clone, Debug, Default)]
pub struct LagHandle(Arc<Mutex<Inner>>);

impl LagHandle {
    /// The last observed lag.
    pub fn get(&self) -> Lag {
        self.0.lock().map(|l| l.lag.clone()).unwrap_or_default()
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut Lag)) {
        if let Ok(mut l) = self.0.lock() {
            f(&mut l.lag);
            l.lag.updated = Some(Instant::now());
        }
    }

    /// [`Lag::file_created`], without copying the rest.
    pub fn file_created(&self) -> Option<(String, u32)> {
        self.0.lock().ok()?.lag.file_created.clone()
    }

    /// Records that the server has written its binlog up to `at`, first seen now: written at
    /// the earliest right after the last poll's answer ([`Lag::polled`]), when the server's end
    /// was last known, so it counts from then. Between polls that is at most one [`POLL`]
    /// early; after an outage of the poll (the server, or the way to it, was away while others
    /// wrote) it is the whole outage, where the instant of the reconnect would time a backlog
    /// written long before as new.
    pub fn observe_server(&self, at: &BinlogPos) {
        self.observe_at(at, Instant::now());
    }

    fn observe_at(&self, at: &BinlogPos, seen: Instant) {
        let Ok(position) = at.position() else { return };
        if let Ok(mut l) = self.0.lock() {
            if l.seen.back().is_some_and(|&(p, _)| p >= position) {
                return;
            }
            let mut now = l.lag.polled.map_or(seen, |p| p.min(seen));
            // Not before an earlier observation's instant: both stay increasing.
            if let Some(&(_, last)) = l.seen.back() {
                now = now.max(last);
            }
            l.lag.server = Some(at.clone());
            match l.seen.back_mut() {
                Some(last) if now.duration_since(last.1) < SEEN_GRAIN => last.0 = position,
                _ => l.seen.push_back((position, now)),
            }
            if l.seen.len() > SEEN_MAX {
                // The two oldest become one: the later position, the earlier instant.
                if let Some((_, t)) = l.seen.pop_front()
                    && let Some(next) = l.seen.front_mut()
                {
                    next.1 = t;
                }
            }
        }
    }

    /// The poll read the server's end `at`, having asked after the server had been seen at
    /// `before` ([`LagHandle::last_seen`] then). The end of one history never goes back: if it
    /// did, the server's binlog was started again (RESET MASTER; in the first file, under the
    /// same name, the dump thread goes on reading the old file and reports nothing), and what
    /// the stream reads is not the server's history any more ([`LagHandle::went_back`]).
    pub fn observe_polled(&self, at: &BinlogPos, before: Option<Position>) {
        let Ok(position) = at.position() else { return };
        if let Some(before) = before.filter(|&b| position < b) {
            if let Ok(mut l) = self.0.lock()
                && l.went_back.is_none()
            {
                let was = BinlogPos::from_position(before, &at.file).map_or_else(|_| format!("{before:?}"), |p| p.to_string());
                l.went_back = Some(format!("the server's binlog ends at {at}, before {was} where it had been (RESET MASTER?)"));
            }
            return;
        }
        self.observe_server(at);
    }

    /// A connection of freshet's own reached another server (`reason`) than the one the
    /// stream reads: a failover that left the old connections where they were (a proxy that
    /// keeps them, DNS with the old primary up). The stream's connection may be one of those:
    /// it must start again ([`LagHandle::went_back`]).
    pub fn server_changed(&self, reason: String) {
        self.history_ended(reason);
    }

    /// A new connection to the server's address reached the server `now`: if the stream
    /// reads another, [`LagHandle::server_changed`]. Compared with the stream's server, under
    /// the lock that [`LagHandle::restart_behind`] sets it under, not with whatever the caller
    /// read before: a restart or failover the stream has already started again from is not
    /// a second gap. Nothing to compare before the stream has connected.
    pub fn server_reached(&self, now: &crate::continuity::ServerIdentity) {
        if let Ok(mut l) = self.0.lock()
            && l.went_back.is_none()
            && let Some(why) = l.stream_server.as_ref().and_then(|s| s.differs(now))
        {
            l.went_back = Some(format!("a new connection to the server's address reached another server: {why}"));
        }
    }

    /// The poll found that the server's binlog file of the name the stream reads was begun at
    /// another time than the one the stream read (`reason`): RESET MASTER made it anew, and the
    /// stream's connection reads the old one ([`LagHandle::went_back`]).
    pub fn file_begun_again(&self, reason: String) {
        self.history_ended(reason);
    }

    fn history_ended(&self, reason: String) {
        if let Ok(mut l) = self.0.lock()
            && l.went_back.is_none()
        {
            l.went_back = Some(reason);
        }
    }

    /// The stream connected to the server `identity` (and found it the one it had read before,
    /// if any): fills check that they read the same ([`crate::UpstreamFills::watch_server`]).
    pub fn stream_server_is(&self, identity: crate::continuity::ServerIdentity) {
        if let Ok(mut l) = self.0.lock() {
            l.stream_server = Some(identity);
        }
    }

    /// Who the server the stream reads is, once it has connected.
    pub fn stream_server(&self) -> Option<crate::continuity::ServerIdentity> {
        self.0.lock().ok()?.stream_server.clone()
    }

    /// The last server position seen (by the stream or the poll).
    pub fn last_seen(&self) -> Option<Position> {
        self.0.lock().ok()?.seen.back().map(|&(p, _)| p)
    }

    /// Why the server's binlog is no longer the history being read, if the poll found so:
    /// the stream must start again ([`crate::CdcError::Gap`]).
    pub fn went_back(&self) -> Option<String> {
        self.0.lock().ok()?.went_back.clone()
    }

    /// Forgets the server positions seen so far and starts again at `at` (a new stream after
    /// a gap: the server may be another one, its positions need not follow the old ones).
    pub fn restart_at(&self, at: &BinlogPos) {
        self.restart_behind(at, None, None);
    }

    /// [`LagHandle::restart_at`] a position stored by an earlier run, behind what the server
    /// wrote up to `unknown_until` while no freshet ran: at instants no one saw, maybe long
    /// ago. Until the applied position reaches it, the lag is not known ([`Behind::unknown_age`]).
    /// `server`: who the new stream's server is, set with the rest (a poll that compares in
    /// between would find the old one).
    pub fn restart_behind(&self, at: &BinlogPos, unknown_until: Option<Position>, server: Option<crate::continuity::ServerIdentity>) {
        if let Ok(mut l) = self.0.lock() {
            l.seen.clear();
            l.gtids.clear();
            l.went_back = None;
            if server.is_some() {
                l.stream_server = server;
            }
            l.unknown_until = unknown_until;
            l.lag.server = None;
            l.lag.polled = Some(Instant::now());
        }
        self.observe_server(at);
    }

    /// The lag of `applied`: see the module header.
    pub fn behind(&self, applied: Position) -> Behind {
        let now = Instant::now();
        let Ok(mut l) = self.0.lock() else { return Behind { lag: Duration::ZERO, server: None, polled_ago: None, unknown_age: true } };
        let unknown_age = l.unknown_until.is_some_and(|end| applied < end);
        if !unknown_age {
            l.unknown_until = None;
        }
        while l.seen.len() > 1 && l.seen[0].0 <= applied {
            l.seen.pop_front();
        }
        let oldest_unapplied = l.seen.iter().find(|(p, _)| *p > applied).map(|&(_, t)| t);
        // A server whose binlog went back has no known position relative to what was applied.
        let polled_ago = l.lag.polled.filter(|_| l.went_back.is_none()).map(|t| now.saturating_duration_since(t));
        // What the server may have written since the last poll without anyone seeing it.
        let unseen = polled_ago.map_or(Duration::ZERO, |a| a.saturating_sub(POLL));
        Behind {
            lag: oldest_unapplied.map_or(Duration::ZERO, |t| now.saturating_duration_since(t)).max(unseen),
            server: l.seen.back().map(|&(p, _)| p),
            polled_ago,
            unknown_age,
        }
    }

    /// Records that the group with `gtid` was delivered and ends at `end`. A domain keeps the
    /// highest sequence number delivered: a group numbered lower (its session chose it, with
    /// `gtid_strict_mode` off) comes after the higher ones it follows, which stay delivered.
    /// The server numbers the groups it numbers itself past the highest it has logged, so a
    /// read waiting for one is not answered early; a new history (RESET MASTER, another
    /// server) starts a new stream, which forgets these ([`LagHandle::restart_at`]).
    pub(crate) fn delivered_gtid(&self, gtid: MariaGtid, end: Position) {
        if let Ok(mut l) = self.0.lock() {
            match l.gtids.iter_mut().find(|(d, _, _)| *d == gtid.domain) {
                Some(entry) => *entry = (gtid.domain, entry.1.max(gtid.seq), end),
                None => l.gtids.push((gtid.domain, gtid.seq, end)),
            }
        }
    }

    /// A position at or after the end of the group `domain`-*-`seq`, once the stream has
    /// delivered it (or a later group of that domain); None before.
    pub fn gtid_delivered_at(&self, domain: u32, seq: u64) -> Option<Position> {
        let l = self.0.lock().ok()?;
        l.gtids.iter().find(|(d, s, _)| *d == domain && *s >= seq).map(|&(_, _, end)| end)
    }

    /// The highest sequence number delivered in each domain ([`LagHandle::delivered_gtid`]).
    pub fn delivered_gtids(&self) -> Vec<(u32, u64)> {
        self.0.lock().map(|l| l.gtids.iter().map(|&(d, s, _)| (d, s)).collect()).unwrap_or_default()
    }

    /// The server's position as observed, if the poll has read it at or after `since`: then
    /// it is at or after the end of every transaction the server had committed by `since`.
    /// None once the poll found the server's binlog begun again: its end is then in a history
    /// the stream does not read, and what was seen before is not past the server's writes.
    pub fn polled_since(&self, since: Instant) -> Option<Position> {
        let l = self.0.lock().ok()?;
        if l.lag.polled.is_none_or(|p| p < since) || l.went_back.is_some() {
            return None;
        }
        l.seen.back().map(|&(p, _)| p)
    }

    /// The poll read the server's binlog settings: says so in the log when what is wrong with
    /// them changes.
    fn settings_read(&self, problems: Vec<String>) {
        let Ok(mut l) = self.0.lock() else { return };
        l.lag.settings_read = Some(Instant::now());
        if l.lag.settings != problems {
            if problems.is_empty() {
                tracing::info!("the server's binlog settings are as freshet needs again");
            } else {
                tracing::warn!(problems = %problems.join("; "), "the server's binlog settings changed: writes may empty every cache or stop the stream");
            }
            l.lag.settings = problems;
        }
    }

    #[cfg(test)]
    fn polled(&self) {
        self.polled_at(Instant::now());
    }

    /// The poll's answer was asked for at `asked`: the server's end it names was read after
    /// that, and anything seen later may have been written right after `asked`, however long
    /// the answer took to come back ([`LagHandle::observe_server`]).
    fn polled_at(&self, asked: Instant) {
        if let Ok(mut l) = self.0.lock() {
            l.lag.polled = Some(l.lag.polled.map_or(asked, |p| p.max(asked)));
        }
    }
}

/// Polls the server's position every [`POLL`] into `lag` until every other clone of `lag` is
/// dropped. `position_sql` is the flavor's `current_position_sql`, `identity_sql` its
/// `identity_sql`. Failures are not errors: an unreachable server shows as a stale poll
/// ([`Behind::polled_ago`]), which readers treat as an unknown lag.
///
/// Every [`SETTINGS_EVERY`] the poll connects anew and reads who the server is
/// ([`crate::continuity::ServerIdentity`]): another server than the one the stream reads (a
/// failover that left existing connections on the old primary, which the stream's may be)
/// ends the stream with a gap ([`LagHandle::server_reached`]), and the poll goes on with the
/// new connection. A change the stream already started again from (a restart it reconnected
/// after first) is not a second gap. As often, where the server writes the file the stream reads, it asks when
/// that file was begun ([`crate::continuity::file_begun`], on a dump connection of its own
/// made with `binlog_setup`): another time than the stream read is a RESET MASTER whose new
/// file may end where the old one did, which the position alone never shows
/// ([`LagHandle::file_begun_again`]).
pub fn spawn_position_poll(
    opts: Opts,
    position_sql: &'static str,
    identity_sql: &'static str,
    binlog_setup: Vec<String>,
    lag: LagHandle,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut conn: Option<Conn> = None;
        // A server that is down is not asked to accept a connection every poll: reconnects
        // back off up to the staleness bound (so a server back is polled again within it).
        let mut backoff = Backoff::new(POLL, POLL_STALE);
        let mut settings_read: Option<Instant> = None;
        // Read the settings at the next chance, whatever the period: on a new connection (the
        // server may have restarted with others), and when the position comes back empty
        // (binary logging is off) while the last read found nothing wrong.
        let mut settings_due = false;
        loop {
            tick.tick().await;
            if Arc::strong_count(&lag.0) == 1 {
                return;
            }
            // Time to ask again: on a new connection, which goes where the address now leads.
            // The old one says goodbye (dropped, the server logs an aborted connection).
            if settings_read.is_none_or(|t| t.elapsed() >= SETTINGS_EVERY)
                && let Some(old) = conn.take()
            {
                let _ = tokio::time::timeout(POLL_STALE, old.disconnect()).await;
            }
            if conn.is_none() {
                backoff.wait().await;
                conn = tokio::time::timeout(POLL_STALE, Conn::new(opts.clone())).await.ok().and_then(Result::ok);
                if conn.is_some() {
                    backoff.reset();
                    settings_due = true;
                }
                if let Some(c) = conn.as_mut() {
                    match tokio::time::timeout(POLL_STALE, crate::continuity::ServerIdentity::read_with(c, identity_sql)).await {
                        Ok(Ok(now)) => lag.server_reached(&now),
                        _ => conn = None,
                    }
                }
            }
            let Some(c) = conn.as_mut() else { continue };
            // Whatever was seen before the question was asked, the answer is at or after.
            let before = lag.last_seen();
            let asked = Instant::now();
            let mut polled_file = None;
            match tokio::time::timeout(POLL_STALE, c.query_first::<mysql_async::Row, _>(position_sql)).await {
                Ok(Ok(Some(row))) => {
                    let file: Option<String> = row.get(0);
                    let offset: Option<u64> = row.get(1);
                    if let (Some(file), Some(offset)) = (file, offset.and_then(|o| u32::try_from(o).ok())) {
                        lag.observe_polled(&BinlogPos::new(file.clone(), offset), before);
                        lag.polled_at(asked);
                        let end = BinlogPos::new(file.clone(), offset);
                        if let Some(bytes) =
                            tokio::time::timeout(POLL_STALE, bytes_behind(c, lag.get().delivered.as_ref(), &end)).await.ok().flatten()
                        {
                            lag.update(|l| l.bytes_behind = bytes);
                        }
                        polled_file = Some((file, offset));
                    }
                }
                // No row: binary logging is off (the connection is fine). The settings read
                // names it; until then nothing here may still say they are as freshet needs.
                Ok(Ok(None)) => settings_due |= lag.get().settings.is_empty(),
                _ => conn = None,
            }
            if let Some(c) = conn.as_mut()
                && (settings_due || settings_read.is_none_or(|t| t.elapsed() >= SETTINGS_EVERY))
            {
                settings_due = false;
                settings_read = Some(Instant::now());
                match tokio::time::timeout(POLL_STALE, crate::checks::read_binlog_settings(c)).await {
                    Ok(Ok(problems)) => lag.settings_read(problems),
                    _ => conn = None,
                }
                // Only where the stream has read all the server wrote: a stream behind the end
                // reads on in the old file and comes to rest at its end, and is asked then (each
                // dump is a Note in the server's log at its default log_warnings).
                let at_rest = polled_file
                    .as_ref()
                    .is_some_and(|(file, offset)| lag.get().delivered.is_some_and(|d| d.file == *file && d.offset == *offset));
                if let Some((file, offset)) = polled_file.as_ref().filter(|_| at_rest)
                    && let Some((_, created)) = lag.file_created().filter(|(read, _)| read == file)
                {
                    let asked = crate::continuity::file_begun(opts.clone(), &binlog_setup, file, *offset);
                    let begun = tokio::time::timeout(POLL_STALE, asked).await;
                    if let Ok(Ok(Some(begun))) = begun
                        && begun != created
                    {
                        lag.file_begun_again(format!(
                            "binlog file {file} was begun at {begun}, not at {created} as the one the stream reads (RESET MASTER?)"
                        ));
                    }
                }
            }
        }
    })
}

/// Bytes of binlog from `delivered` to the server's `end`: their difference in one file; across
/// files, the rest of the delivered one, the whole of those between, and `end`'s offset, by
/// the server's list of its binary logs (`SHOW BINARY LOGS`, asked only then). None if it
/// cannot be told (no delivered position yet, a file the list does not have, a refusal).
async fn bytes_behind(c: &mut Conn, delivered: Option<&BinlogPos>, end: &BinlogPos) -> Option<u64> {
    let delivered = delivered?;
    if delivered.file == end.file {
        return Some(u64::from(end.offset.saturating_sub(delivered.offset)));
    }
    let logs: Vec<(String, u64)> =
        c.query("SHOW BINARY LOGS").await.ok()?.into_iter().filter_map(|r: mysql_async::Row| Some((r.get(0)?, r.get(1)?))).collect();
    let from = logs.iter().position(|(f, _)| *f == delivered.file)?;
    let to = logs.iter().position(|(f, _)| *f == end.file).filter(|&to| to > from)?;
    let rest = logs[from].1.saturating_sub(u64::from(delivered.offset));
    let between: u64 = logs[from + 1..to].iter().map(|(_, size)| size).sum();
    Some(rest + between + u64::from(end.offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(offset: u32) -> BinlogPos {
        BinlogPos::new("bin.000001", offset)
    }

    #[test]
    fn lag_is_the_age_of_the_oldest_unapplied_position() {
        let h = LagHandle::default();
        h.observe_server(&pos(100));
        let applied = pos(100).position().unwrap();
        assert_eq!(h.behind(applied).lag, Duration::ZERO);
        std::thread::sleep(SEEN_GRAIN * 2);
        h.observe_server(&pos(200));
        std::thread::sleep(Duration::from_millis(30));
        h.observe_server(&pos(300));
        let b = h.behind(applied);
        assert!(b.lag >= Duration::from_millis(30), "{b:?}");
        assert_eq!(b.server, Some(pos(300).position().unwrap()));
        // Applying 200 leaves 300, seen later: less lag; applying 300, none.
        let at_200 = h.behind(pos(200).position().unwrap()).lag;
        assert!(at_200 < b.lag, "{at_200:?} vs {b:?}");
        assert_eq!(h.behind(pos(300).position().unwrap()).lag, Duration::ZERO);
        // Older observations arriving late change nothing.
        h.observe_server(&pos(250));
        assert_eq!(h.behind(pos(300).position().unwrap()).lag, Duration::ZERO);
    }

    /// A position first seen after the observers were blind for a while (the poll and the
    /// stream could not reach the server) may have been written right after the last poll: it
    /// is as old as that poll (an audit: after a 7 s outage the backlog was timed from the
    /// reconnect, and answers 6-9 s old were served under `max_lag = 1s` as caught up).
    #[test]
    fn a_position_first_seen_after_an_outage_is_as_old_as_the_last_poll() {
        let h = LagHandle::default();
        let outage = Duration::from_secs(7);
        let before = Instant::now().checked_sub(outage).unwrap();
        // Seen, and polled, 7 s ago; the poll has not answered since.
        h.observe_at(&pos(100), before);
        h.0.lock().unwrap().lag.polled = Some(before);
        let applied = pos(100).position().unwrap();
        // The stream reconnects first and reads the backlog, then the poll answers again.
        h.observe_server(&pos(200));
        h.observe_polled(&pos(300), h.last_seen());
        h.polled();
        let b = h.behind(applied);
        assert!(b.lag >= outage, "{b:?}");
        assert!(h.behind(pos(200).position().unwrap()).lag >= outage, "the poll's answer is as old as the stream's");
    }

    /// A slow answer to the poll says where the server's end was when it was read, some time
    /// after the question: what is seen after the answer counts from the question (an audit
    /// of the outage rule, from the code).
    #[test]
    fn a_position_seen_after_a_slow_poll_counts_from_the_question() {
        let h = LagHandle::default();
        let asked = Instant::now().checked_sub(Duration::from_millis(800)).unwrap();
        h.observe_at(&pos(100), asked);
        h.observe_polled(&pos(100), h.last_seen());
        h.polled_at(asked);
        h.observe_server(&pos(200));
        assert!(h.behind(pos(100).position().unwrap()).lag >= Duration::from_millis(800));
    }

    #[test]
    fn memory_is_bounded_and_merging_only_overstates() {
        let h = LagHandle::default();
        let first = Instant::now();
        for i in 0..(SEEN_MAX as u32 + 100) {
            h.observe_at(&pos(10 + i), first + SEEN_GRAIN * i);
        }
        let l = h.0.lock().unwrap();
        assert!(l.seen.len() <= SEEN_MAX);
        assert_eq!(l.seen.front().unwrap().1, first, "the oldest instant survives merging");
    }

    #[test]
    fn a_gtid_is_delivered_once_its_domain_reaches_its_sequence() {
        let h = LagHandle::default();
        assert_eq!(h.gtid_delivered_at(0, 5), None);
        let end = |o| pos(o).position().unwrap();
        h.delivered_gtid(MariaGtid { domain: 0, server: 1, seq: 5 }, end(500));
        h.delivered_gtid(MariaGtid { domain: 2, server: 1, seq: 9 }, end(600));
        assert_eq!(h.gtid_delivered_at(0, 5), Some(end(500)));
        assert_eq!(h.gtid_delivered_at(0, 4), Some(end(500)), "a later group ends after an earlier one");
        assert_eq!(h.gtid_delivered_at(0, 6), None);
        assert_eq!(h.gtid_delivered_at(1, 1), None, "another domain");
        assert_eq!(h.gtid_delivered_at(2, 9), Some(end(600)));
        // A group numbered lower than one delivered before it (a session that chose its
        // sequence number, `gtid_strict_mode` off) leaves the earlier one delivered (an audit:
        // a session's every read waited out `ryw_timeout` until it wrote again).
        h.delivered_gtid(MariaGtid { domain: 0, server: 1, seq: 2 }, end(650));
        assert_eq!(h.gtid_delivered_at(0, 5), Some(end(650)), "a lower number after it");
        h.restart_at(&pos(700));
        assert_eq!(h.gtid_delivered_at(0, 5), None, "a new stream forgets what the old one delivered");
    }

    /// The poll's answer may be older than what the stream saw while the question was on its
    /// way (ignored), never older than what was seen before it was asked, unless the server's
    /// binlog started again: then the lag is unknown until a new stream starts.
    #[test]
    fn a_polled_end_before_what_was_seen_before_asking_is_a_new_history() {
        let h = LagHandle::default();
        h.observe_server(&pos(500));
        h.polled();
        let asked = h.last_seen();
        h.observe_server(&pos(800));
        h.observe_polled(&pos(700), asked);
        assert_eq!(h.went_back(), None, "an answer overtaken by the stream");
        assert_eq!(h.last_seen(), Some(pos(800).position().unwrap()));
        let applied = pos(800).position().unwrap();
        assert!(h.behind(applied).polled_ago.is_some());
        h.observe_polled(&pos(300), h.last_seen());
        assert!(h.went_back().is_some_and(|w| w.contains("RESET MASTER")), "{:?}", h.went_back());
        assert_eq!(h.behind(applied).polled_ago, None, "no lag can be told");
        h.observe_polled(&BinlogPos::new("bin.000002", 4), h.last_seen());
        assert!(h.went_back().is_some(), "kept until a new stream starts");
        h.restart_at(&pos(300));
        assert_eq!(h.went_back(), None);
    }

    #[test]
    fn the_server_position_counts_only_if_polled_after_the_instant() {
        let h = LagHandle::default();
        let before = Instant::now();
        h.observe_server(&pos(100));
        assert_eq!(h.polled_since(before), None, "seen from the stream, not polled");
        h.polled();
        assert_eq!(h.polled_since(before), Some(pos(100).position().unwrap()));
        assert_eq!(h.polled_since(Instant::now() + Duration::from_secs(1)), None);
    }

    /// While the poll is late (the server's position could not be read), a change the server
    /// wrote since the last poll may not have been seen at all: the lag counts the poll's age
    /// (less one interval), so that `max_lag` still bounds the age of what is served.
    #[test]
    fn a_late_poll_counts_as_lag() {
        let h = LagHandle::default();
        h.observe_server(&pos(100));
        h.polled();
        let applied = pos(100).position().unwrap();
        assert!(h.behind(applied).lag < POLL, "a fresh poll adds nothing");
        h.0.lock().unwrap().lag.polled = Some(Instant::now() - Duration::from_millis(800));
        let b = h.behind(applied);
        assert!(b.lag >= Duration::from_millis(700), "the last poll was 800 ms ago: {b:?}");
    }

    #[test]
    fn restart_forgets_the_old_series() {
        let h = LagHandle::default();
        h.observe_server(&BinlogPos::new("bin.000009", 500));
        h.restart_at(&BinlogPos::new("bin.000002", 4));
        let b = h.behind(BinlogPos::new("bin.000002", 4).position().unwrap());
        assert_eq!(b.lag, Duration::ZERO);
        assert!(b.polled_ago.is_some());
    }

    /// Settings never read, or read too long ago, are not known: the status says so rather
    /// than "ok".
    #[test]
    fn settings_are_known_only_when_read_lately() {
        let h = LagHandle::default();
        assert_eq!(h.get().settings_known(), None, "never read");
        h.settings_read(vec!["binlog_format is MIXED".into()]);
        assert_eq!(h.get().settings_known().map(<[String]>::len), Some(1));
        h.settings_read(Vec::new());
        assert_eq!(h.get().settings_known(), Some(&[][..]));
        let mut stale = h.get();
        stale.settings_read = Instant::now().checked_sub(3 * SETTINGS_EVERY);
        assert_eq!(stale.settings_known(), None, "read too long ago");
    }
}
