//! Read-your-writes per session: how far the views have applied the binlog, and the bounded
//! wait of a session whose own write they may not have applied yet.
//!
//! Owns: [`Progress`] (the highest binlog position the writer has processed, published once
//! per writer step on a watch channel), [`Target`] (what a session waits for) and
//! [`Engine::await_own_write`]. Does not own: knowing that a session wrote and asking the
//! server for its write's GTID (`session::ryw`), delivering GTIDs (cdc's stream records, per
//! GTID domain, where the last delivered group ends: [`freshet_cdc::LagHandle`]).
//!
//! The invariant: a session whose write committed is answered from a view only once the
//! writer has processed a position at or after the end of that write's binlog group. Why it
//! holds:
//! - MariaDB: the session's own `@@last_gtid` names its last commit `d-s-n`. The stream records
//!   the end of each delivered group per domain *before* the writer can receive the batch, and
//!   within a domain sequence numbers grow in binlog order, so once the stream has delivered
//!   `d-*-m` with `m >= n`, the end it recorded is at or after the write's end;
//! - a write whose GTID is unknown (MySQL 8, an empty `@@last_gtid`): the server's position
//!   read by the poll after the session saw its write's reply is at or after the write's end;
//! - the writer publishes a position only after every batch and schema change up to it is in
//!   the views (and the replica), and a fill installed later reflects at least that position
//!   (see the writer's header), so a read after the wait reflects the write.
//!
//! The wait never holds a lock a writer takes, and only sessions that wrote wait: the hit path
//! of the others reads one `Option` of their own. A wait past `[consistency] ryw_timeout`
//! gives up and the read is relayed ([`super::RelayReason::OwnWrite`]); the target is kept, so
//! the session's next read looks again.

use std::time::{Duration, Instant};

use freshet_dataflow::Position;
use tokio::sync::watch;

use super::Engine;
use crate::metrics::Counter;

/// While waiting for the server's position to be polled, how often to look.
const POLL_LOOK: Duration = Duration::from_millis(5);

/// What the views have processed, for sessions waiting on their own writes.
pub struct Progress {
    /// Highest position processed in the current history, and that history's era.
    processed: watch::Sender<Processed>,
    /// Cached reads after a write that asked where the write is.
    pub asked: Counter,
    /// Cached reads that waited for the views to apply the session's write.
    pub waits: Counter,
}

/// A position the views have processed, within a binlog history (an era). A new history
/// (RESET MASTER, another server, any gap) starts lower than the last, so positions of two
/// eras are never compared: a write that committed in an earlier era is processed once the
/// views have moved to a later one, since they were emptied then and everything filled since
/// reflects the server after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Processed {
    era: u64,
    at: u64,
}

impl Progress {
    pub fn new(at: Position) -> Progress {
        Progress { processed: watch::Sender::new(Processed { era: 0, at: at.0 }), asked: Counter::default(), waits: Counter::default() }
    }

    /// The writer has processed everything up to `at` (within an era it never moves back).
    pub(super) fn publish(&self, at: Position) {
        self.processed.send_if_modified(|p| {
            let moved = at.0 > p.at;
            if moved {
                p.at = at.0;
            }
            moved
        });
    }

    /// The stream is being re-established, possibly on a new history whose positions are
    /// lower: nothing counts as processed until [`Progress::restart`] (a session waiting then
    /// waits on, or gives up and is relayed).
    pub(super) fn stall(&self) {
        self.processed.send_modify(|p| p.at = 0);
    }

    /// The views were emptied and a new history starts at `at`: writes of earlier eras count as
    /// processed, those of this one from `at` on.
    pub(super) fn restart(&self, at: Position) {
        self.processed.send_modify(|p| *p = Processed { era: p.era + 1, at: at.0 });
    }

    /// The current era: a session records it when it learns what to wait for.
    pub fn era(&self) -> u64 {
        self.processed.borrow().era
    }

    /// True if a write at or before `at`, known in `era`, is processed.
    pub fn reached(&self, at: Position, era: u64) -> bool {
        let p = *self.processed.borrow();
        p.era != era || p.at >= at.0
    }

    /// The highest position processed in the current era.
    pub fn processed(&self) -> Position {
        Position(self.processed.borrow().at)
    }
}

/// What a session that wrote waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// MariaDB: the GTID of the session's last commit.
    Gtid { domain: u32, seq: u64 },
    /// The write's position is unknown: whatever the server had written by this instant
    /// (taken after the session saw its write's reply).
    ServerAt(Instant),
    /// A binlog position at or after the write's end.
    Position(Position),
}

impl Target {
    /// `domain-server-seq` as `@@last_gtid` shows it; None if empty or not a GTID.
    pub fn from_gtid(text: &str) -> Option<Target> {
        let g = freshet_cdc::MariaGtid::parse(text.trim())?;
        Some(Target::Gtid { domain: g.domain, seq: g.seq })
    }
}

/// A session's answer to its GTID question (`Flavor::session_gtid`): its last commit's GTID,
/// and the server's last GTID in each domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Asked<'a> {
    /// `@@last_gtid`: empty if the session has logged nothing.
    pub last: &'a str,
    /// `@@gtid_binlog_pos`.
    server: &'a str,
}

impl<'a> Asked<'a> {
    pub fn parse(answer: &'a str) -> Asked<'a> {
        let (last, server) = answer.split_once(' ').unwrap_or((answer, ""));
        Asked { last: last.trim(), server }
    }

    /// Whether the server numbers `domain` below what the stream had delivered of it right
    /// before the question (`delivered_before`, per domain): the domain was numbered again
    /// (RESET MASTER, `FLUSH BINARY LOGS DELETE_DOMAIN_ID`), so a sequence number of it says
    /// nothing of where its group is. Within one numbering the server's last number is at or
    /// past every number delivered before (a session's chosen lower number, with
    /// `gtid_strict_mode` off, reads as numbered again too: its read waits by position).
    pub fn numbered_again(&self, domain: u32, delivered_before: &[(u32, u64)]) -> bool {
        let Some(&(_, before)) = delivered_before.iter().find(|(d, _)| *d == domain) else { return false };
        let server = self.server.split(',').filter_map(freshet_cdc::MariaGtid::parse).find(|g| g.domain == domain);
        server.is_none_or(|g| g.seq < before)
    }
}

impl Engine {
    /// Waits until the views have processed `target`, learnt in `era`, at most `timeout`. True
    /// if they have; `target` is narrowed to a position once one is known, so a later call
    /// resumes there.
    pub async fn await_own_write(&self, target: &mut Target, era: u64, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut processed = self.writer.ryw().processed.subscribe();
        let lag = self.lag_handle();
        loop {
            // Read the published position before resolving the target: a publication after
            // this read wakes `changed` below, and the stream records a group's end before
            // the writer can publish past it.
            let now = *processed.borrow_and_update();
            if now.era != era {
                return true;
            }
            let resolved = match *target {
                Target::Position(p) => Some(p),
                Target::Gtid { domain, seq } => lag.gtid_delivered_at(domain, seq),
                Target::ServerAt(since) => lag.polled_since(since),
            };
            if let Some(p) = resolved {
                *target = Target::Position(p);
                if now.at >= p.0 {
                    return true;
                }
            }
            // The poll is not a publication: look again soon while waiting for it.
            let wake = match target {
                Target::ServerAt(_) => deadline.min(tokio::time::Instant::now() + POLL_LOOK),
                _ => deadline,
            };
            match tokio::time::timeout_at(wake, processed.changed()).await {
                Ok(Ok(())) => {}
                // The writer is gone: nothing will be applied again.
                Ok(Err(_)) => return false,
                Err(_) if tokio::time::Instant::now() >= deadline => return false,
                Err(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_numbered_below_what_was_delivered_was_numbered_again() {
        let asked = Asked::parse("0-1-3 0-1-3,7-1-40");
        assert_eq!(asked.last, "0-1-3");
        assert!(asked.numbered_again(0, &[(0, 500), (7, 10)]), "RESET MASTER: 3 after 500 delivered");
        assert!(!asked.numbered_again(0, &[(0, 3)]), "delivered up to the write itself");
        assert!(!asked.numbered_again(0, &[(7, 3)]), "nothing delivered in the domain: its numbers are new");
        assert!(!asked.numbered_again(7, &[(7, 40)]));
        assert!(asked.numbered_again(5, &[(5, 1)]), "a delivered domain the server no longer lists");
        let nothing = Asked::parse(" 0-1-9");
        assert_eq!(nothing.last, "", "the session logged nothing");
        assert_eq!(Asked::parse("0-1-3").last, "0-1-3", "an answer without the server's list");
    }

    #[test]
    fn the_servers_gtid_text_becomes_a_target() {
        assert_eq!(Target::from_gtid("0-1-42"), Some(Target::Gtid { domain: 0, seq: 42 }));
        assert_eq!(Target::from_gtid(" 3-100-7\n"), Some(Target::Gtid { domain: 3, seq: 7 }));
        assert_eq!(Target::from_gtid(""), None);
        assert_eq!(Target::from_gtid("3E11FA47-71CA-11E1-9E33-C80AA9429562:23"), None);
    }

    #[test]
    fn progress_never_moves_back_within_an_era() {
        let p = Progress::new(Position(10));
        p.publish(Position(20));
        p.publish(Position(15));
        assert_eq!(p.processed(), Position(20));
        assert!(p.reached(Position(20), 0) && !p.reached(Position(21), 0));
    }

    /// A new history starts lower: its positions are compared with its own, and whatever was
    /// waited for in an earlier era is processed; while the stream is away nothing is.
    #[test]
    fn a_new_history_is_an_era_of_its_own() {
        let p = Progress::new(Position(10));
        p.publish(Position(500));
        p.stall();
        assert!(!p.reached(Position(30), 0), "a position of a history not yet followed");
        p.restart(Position(5));
        assert_eq!((p.era(), p.processed()), (1, Position(5)));
        assert!(p.reached(Position(499), 0), "a write of the old history: the views were emptied since");
        assert!(!p.reached(Position(30), 1), "the new history's own positions");
        p.publish(Position(30));
        assert!(p.reached(Position(30), 1));
    }
}
