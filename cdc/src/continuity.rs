//! Whether a binlog connection continues the history the stream has followed.
//!
//! Owns: [`ServerIdentity`] (server id, start time, UUID where the server has one) and the
//! checks a reconnect passes before a single event of it is delivered. Does not own: what the
//! stream does about a gap (it reports [`CdcError::Gap`]; the caller evicts everything and
//! starts again at the server's current position, which is always correct).
//!
//! # Why
//! A position is `file:offset`. The same `file:offset` on a restarted server, on a replica
//! promoted after a failover, or on a restored backup may name different transactions, or
//! none: resuming there would apply the wrong changes, or skip some, and every cached answer
//! filled after it would be stamped with a position that does not compare with the batches'.
//! So a reconnect is trusted only when all of these hold, else it is a gap:
//! - the same server: same `server_id`, same UUID (MySQL), and the same start time (to within
//!   [`START_TOLERANCE`]: a restart is a gap even when the binlog on disk survived it, since a
//!   crash can end the binlog in a place the stream read past);
//! - the same history at the resume position (MariaDB): `BINLOG_GTID_POS(file, offset)` on
//!   this server names, for the domain of the last delivered transaction, exactly that
//!   transaction's GTID;
//! - (checked by the stream) the first ROTATE names the file asked for, and a later change of
//!   file is announced by a ROTATE event in the old file; a file that just begins (the server
//!   restarted between the two) is not the continuation;
//! - (checked by the position poll while the stream runs, [`file_begun`]) the file of the
//!   stream's name was begun when the one the stream read was: RESET MASTER in the first file
//!   makes one of the same name, which may end where the old one did, with the same GTIDs.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStreamRequest, Conn, Opts};

use crate::error::CdcError;
use crate::flavor::Flavor;
use crate::position::{BinlogPos, MariaGtid};

/// Two reads of a server's start time (now minus uptime, both in whole seconds) differ by up
/// to this much without a restart.
pub const START_TOLERANCE: i64 = 2;

/// When the server began binlog `file`: the timestamp of its FORMAT_DESCRIPTION, which the
/// server sends at the start of every dump, read by a non-blocking dump from `offset` (the
/// file's end as last polled: what is read after the description is what was written since)
/// on a connection of its own (made with `opts`, then `setup`, the flavor's binlog session
/// setup). The dump is read to its end, so that both sides close it cleanly (one cut short is
/// an aborted connection in the server's log). It asks as server id 0, which a server takes
/// for a mysqlbinlog and lets end no other dump (the stream's included). None if the server
/// sent no description.
pub async fn file_begun(opts: Opts, setup: &[String], file: &str, offset: u32) -> Result<Option<u32>, CdcError> {
    let mut conn = Conn::new(opts).await?;
    for statement in setup {
        conn.query_drop(statement).await?;
    }
    let request = BinlogStreamRequest::new(0).with_filename(file.as_bytes()).with_pos(u64::from(offset.max(4))).with_non_blocking();
    let mut stream = conn.get_binlog_stream(request).await?;
    let mut begun = None;
    while let Some(event) = crate::stream::next_event(&mut stream).await {
        if let crate::events::EventKind::FormatDescription { created } = crate::events::classify(&event?)?
            && begun.is_none()
        {
            begun = Some(created);
        }
    }
    let _ = stream.close().await;
    Ok(begun)
}

/// Who a server is, as far as a stream can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerIdentity {
    pub server_id: u32,
    /// Unix seconds at which the server started.
    pub started: i64,
    /// MySQL's `server_uuid`; MariaDB has none.
    pub uuid: Option<String>,
}

impl ServerIdentity {
    /// Reads the identity of the server behind `conn`.
    pub async fn read(conn: &mut Conn, flavor: &dyn Flavor) -> Result<ServerIdentity, CdcError> {
        Self::read_with(conn, flavor.identity_sql()).await
    }

    /// [`ServerIdentity::read`] with the flavor's `identity_sql`.
    pub async fn read_with(conn: &mut Conn, identity_sql: &str) -> Result<ServerIdentity, CdcError> {
        let row: Option<(u32, i64, Option<String>)> = conn.query_first(identity_sql).await?;
        let (server_id, started, uuid) = row.ok_or_else(|| CdcError::Protocol("the server did not say who it is".into()))?;
        Ok(ServerIdentity { server_id, started, uuid })
    }

    /// Why `now` is not the server this identity was read from, if it is not.
    pub fn differs(&self, now: &ServerIdentity) -> Option<String> {
        if self.server_id != now.server_id {
            return Some(format!("the server's server_id changed from {} to {}", self.server_id, now.server_id));
        }
        if self.uuid != now.uuid {
            return Some(format!("the server's server_uuid changed from {:?} to {:?}", self.uuid, now.uuid));
        }
        if (self.started - now.started).abs() > START_TOLERANCE {
            return Some(format!("the server restarted (it had started at unix time {}, now at {})", self.started, now.started));
        }
        None
    }
}

/// Checks that `at`, where the last delivered transaction `gtid` ended, means the same history
/// on the server behind `conn`. `Ok(None)`: continuous (or the flavor cannot tell, see
/// [`Flavor::gtid_state_at_sql`]); `Ok(Some(reason))`: a gap.
pub async fn history_differs(
    conn: &mut Conn,
    flavor: &dyn Flavor,
    at: &BinlogPos,
    gtid: MariaGtid,
    limit: Duration,
) -> Result<Option<String>, CdcError> {
    let Some(sql) = flavor.gtid_state_at_sql(&at.file, at.offset) else { return Ok(None) };
    let state: Option<Option<String>> = match tokio::time::timeout(limit, conn.query_first(sql)).await {
        Ok(r) => r?,
        Err(_) => return Ok(Some(format!("the server's GTID state at {at} could not be read within {limit:?}"))),
    };
    Ok(state_differs(at, state.flatten(), gtid))
}

/// Why the server's GTID state at `at` (None: the server could not say, its
/// `BINLOG_GTID_POS` is NULL) is not the history that ended with `gtid` there, if it is not.
fn state_differs(at: &BinlogPos, state: Option<String>, gtid: MariaGtid) -> Option<String> {
    let Some(state) = state else {
        // Not a history of other transactions: no history at all there.
        return Some(format!(
            "the server has no binlog position {at} any more (its file was purged or made anew by RESET MASTER, or the server is another one)"
        ));
    };
    gtid_state_mismatch(&state, gtid).map(|found| format!("at {at} the server's history has {found} where the stream delivered {gtid}"))
}

/// What `state` (comma-separated GTIDs) has for `gtid`'s domain, if that is not `gtid`.
fn gtid_state_mismatch(state: &str, gtid: MariaGtid) -> Option<String> {
    let same_domain = state.split(',').filter_map(MariaGtid::parse).find(|g| g.domain == gtid.domain);
    match same_domain {
        Some(g) if g == gtid => None,
        Some(g) => Some(g.to_string()),
        None => Some(format!("nothing in domain {}", gtid.domain)),
    }
}

/// True if a ROTATE's `name` is `file`, allowing for the four checksum bytes that the first
/// (artificial) ROTATE of a connection may carry: it is read before the format description
/// says that events have checksums. The name arrives decoded lossily (each byte that is not
/// UTF-8 became one replacement character), so the tail is counted in characters.
pub fn names_file(name: &str, file: &str) -> bool {
    name.strip_prefix(file).is_some_and(|rest| rest.chars().count() <= 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(server_id: u32, started: i64, uuid: Option<&str>) -> ServerIdentity {
        ServerIdentity { server_id, started, uuid: uuid.map(str::to_string) }
    }

    #[test]
    fn a_restart_or_another_server_differs() {
        let a = id(1, 1_000, None);
        assert_eq!(a.differs(&id(1, 1_001, None)), None, "one second of rounding is no restart");
        assert!(a.differs(&id(1, 1_010, None)).unwrap().contains("restarted"));
        assert!(a.differs(&id(2, 1_000, None)).unwrap().contains("server_id"));
        assert!(id(1, 1_000, Some("u1")).differs(&id(1, 1_000, Some("u2"))).unwrap().contains("server_uuid"));
    }

    #[test]
    fn gtid_state_names_the_last_transaction_or_not() {
        let g = MariaGtid { domain: 0, server: 1, seq: 42 };
        assert_eq!(gtid_state_mismatch("0-1-42", g), None);
        assert_eq!(gtid_state_mismatch("1-5-7,0-1-42", g), None);
        assert_eq!(gtid_state_mismatch("0-1-41", g).as_deref(), Some("0-1-41"));
        assert_eq!(gtid_state_mismatch("0-2-42", g).as_deref(), Some("0-2-42"), "same number, another server: another history");
        assert!(gtid_state_mismatch("", g).unwrap().contains("domain 0"));
    }

    /// A position the server no longer has (a purged file) is named so, not as a history
    /// other than the stream's (session 49's status audit read it that way in the log).
    #[test]
    fn a_position_the_server_has_no_more_is_named_so() {
        let g = MariaGtid { domain: 0, server: 1, seq: 42 };
        let at = BinlogPos::new("bin.000002".to_string(), 400);
        assert_eq!(state_differs(&at, Some("0-1-42".into()), g), None);
        assert!(state_differs(&at, Some("0-1-41".into()), g).unwrap().contains("history has 0-1-41"));
        let gone = state_differs(&at, None, g).unwrap();
        assert!(gone.contains("no binlog position bin.000002:400 any more") && gone.contains("purged"), "{gone}");
    }

    #[test]
    fn rotate_names() {
        assert!(names_file("bin.000002", "bin.000002"));
        assert!(names_file("bin.000002\u{fffd}\u{fffd}a\u{fffd}", "bin.000002"));
        assert!(!names_file("bin.000003", "bin.000002"));
        assert!(!names_file("bin.0000021234x", "bin.000002"));
    }
}
