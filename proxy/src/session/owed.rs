//! The statement a cached answer owes the server. A SELECT sets its session's diagnostics on
//! the server: `FOUND_ROWS()` becomes its row count, `ROW_COUNT()` -1, and `SHOW WARNINGS`
//! (`@@warning_count`, `GET DIAGNOSTICS`) lists its warnings instead of the statement
//! before's. A read answered from a view never reaches the server, so the session's later
//! statements would see the statement before it. So the answered read is owed: it is sent to
//! the server, and its reply dropped, ahead of the session's next statement unless that
//! statement replaces all the read left, as if it had run there.
//!
//! What the server keeps (MariaDB 10.11, `tests/cached/sessions.rs` tests both ways): every
//! statement sets `ROW_COUNT()`; only a statement that uses a table clears the warnings (`SET`,
//! `DO`, `BEGIN`, `SELECT 1` keep them, and report them in their own OK or EOF); only a SELECT
//! sets `FOUND_ROWS()` (an UPDATE keeps it).
//!
//! Owns: [`Owed`], [`may_read_diagnostics`], [`replaces_diagnostics`], `Session::settle_owed`.
//! Invariants:
//! - only the last answered read is owed, and only until the session's next statement
//!   reaches the server: sent ahead of it (in the same write, its reply drained before the
//!   statement's), or dropped when the statement replaces what the read left (a SELECT of a
//!   table or a write that reads no diagnostics: the usual relayed statements, at no cost);
//! - a COM_INIT_DB sends it first too (its text names tables of the database it changes), and
//!   so does long data for the owed execute's statement (the server would hand the data to
//!   the read); other commands that are not statements (ping, prepare, close) leave it owed;
//!   an execute is owed as its statement's, never as "the statement prepared last"
//!   (0xffffffff, which names another statement once the client prepares one); a close of the
//!   owed execute's statement waits until the read is settled (one at most), so the read can
//!   still be sent; a ping reaches the server (it sets `ROW_COUNT()` to 0 and keeps the rest),
//!   and a replay after one is followed by a ping of its own;
//! - what may read the diagnostics is decided by words, conservatively: a function or
//!   statement that reads them, or one that runs statements out of sight (CALL, EXECUTE); a
//!   text too long to search cheaply is taken to read them;
//! - a prepared statement's execute is sent again with its parameters' types when the client
//!   left them out (the server may never have seen them: earlier executes were answered here);
//! - the replayed read runs at the server's present, so `FOUND_ROWS()` counts the rows it has
//!   now, which the answer showed at most `[consistency] max_lag` earlier.
//!
//! Not followed, to keep writes and failed reads free of a replay: a write, or a SELECT of a
//! table that fails, keeps the read's `FOUND_ROWS()` on the server, where a later
//! `SELECT FOUND_ROWS()` reads the statement's before the read here. Without
//! SQL_CALC_FOUND_ROWS (whose reads are not served), that is the row count the client was
//! already sent.

use bytes::Bytes;

use crate::matching::lexer::{Lexer, Token, TokenKind};
use crate::metrics::UpstreamFailure;
use crate::protocol::Command;
use crate::protocol::cursor::Cursor;
use crate::protocol::io::Frame;
use crate::protocol::response::{self, ERR, LOCAL_INFILE, OK};
use crate::protocol::{Capabilities, StatusFlags};

use super::{Session, SessionError};

/// The last read answered from a view, as the client sent it (command byte included), while
/// `due`. The buffer is the session's for good: a hit copies its command into it (a few dozen
/// bytes, no allocation once it has grown), and never holds on to the client's read buffer.
#[derive(Debug, Default)]
pub(super) struct Owed {
    payload: Vec<u8>,
    due: bool,
    /// A COM_STMT_CLOSE of the owed execute's statement, held back until the read is settled
    /// (a close has no reply): the server must still hold the statement to run the read
    /// again. Drivers that prepare, execute and close per read (PHP's PDO without emulation)
    /// close it before their next statement.
    closing: Option<u32>,
    /// A COM_PING reached the server after the read was answered. MariaDB's ping sets
    /// `ROW_COUNT()` to 0 and keeps `FOUND_ROWS()` and the warnings, so a replay is followed
    /// by a ping of its own ([`Session::settle_owed`]).
    pub(super) pinged: bool,
    /// [`Session::settle_owed`] queued a ping after the replay: its OK is dropped too.
    ping_queued: bool,
    /// [`Session::settle_owed`] queued an execute that sets the parameter types long data
    /// is read with, ahead of everything else: its reply is dropped first.
    types_queued: bool,
}

/// The buffer's capacity kept between reads; a longer read (up to `[limits] max_query`) is
/// held only while it is owed, so an idle session does not keep its longest read.
const KEPT: usize = 16 * 1024;

impl Owed {
    /// A read was answered from a view: it is owed now. `statement`: for an execute, the id of
    /// the statement it ran, which the payload names by itself unless it names 0xffffffff,
    /// "the statement prepared last": the read is owed as its statement's, since sent again
    /// through that id it would run whatever the client prepared since (an UPDATE it never
    /// executed, with the read's parameters).
    pub(super) fn answered(&mut self, payload: &[u8], statement: Option<u32>) {
        if self.payload.capacity() > KEPT && payload.len() <= KEPT {
            self.payload = Vec::new();
        }
        self.payload.clear();
        self.payload.extend_from_slice(payload);
        if let (Some(&command), Some(id), Some(named)) = (payload.first(), statement, self.payload.get_mut(1..5))
            && command == Command::StmtExecute as u8
        {
            named.copy_from_slice(&id.to_le_bytes());
        }
        self.due = true;
        self.pinged = false;
    }

    /// The statement of the owed read, if it is an execute.
    fn statement(&self) -> Option<u32> {
        (self.payload.first() == Some(&(Command::StmtExecute as u8))).then(|| statement_id(&self.payload)).flatten()
    }

    /// Whether a read is owed.
    pub(super) fn due(&self) -> bool {
        self.due
    }

    /// The session is a new one on the server (COM_RESET_CONNECTION, COM_CHANGE_USER): nothing
    /// is owed, and the server has closed every statement, a held one too.
    pub(super) fn new_session(&mut self) {
        self.forget();
        self.closing = None;
    }

    /// Nothing is owed any more: the server ran a statement of the session's.
    fn forget(&mut self) {
        self.due = false;
        self.pinged = false;
        if self.payload.capacity() > KEPT {
            self.payload = Vec::new();
        }
    }
}

/// Words whose presence in a statement means it may read the session's diagnostics, lower
/// case: the functions and statements that read them, and the statements that run
/// statements out of sight (a procedure; a prepared statement of SQL text, whose text was
/// read when it was prepared). `warning` and `error` cover SHOW WARNINGS / ERRORS /
/// COUNT(*) and `@@warning_count` / `@@error_count`. A compound statement's body is in its
/// text. A stored function that reads them, called from a statement with none of these
/// words, is not seen.
const DIAGNOSTIC_WORDS: [&[u8]; 7] = [b"found_rows", b"row_count", b"warning", b"error", b"diagnostics", b"call", b"execute"];

/// Past this length a text is not searched: it is taken to read the diagnostics.
const SEARCHED: usize = 64 * 1024;

/// Whether `sql` may read the diagnostics the statement before it left (see the module).
pub(super) fn may_read_diagnostics(sql: &[u8]) -> bool {
    sql.len() > SEARCHED || DIAGNOSTIC_WORDS.iter().any(|w| sql.windows(w.len()).any(|s| s.eq_ignore_ascii_case(w)))
}

/// Whether `sql` replaces what a SELECT leaves the session's diagnostics before anything in it
/// can read them: it begins with a SELECT that reads a table (a name after its FROM, not
/// DUAL), or with a write (INSERT, UPDATE, DELETE, REPLACE: it uses a table, so it sets the
/// warnings and `ROW_COUNT()`; it keeps `FOUND_ROWS()`, which is not followed, see the
/// module). Anything else (SET, DO, BEGIN, `SELECT 1`) keeps the warnings and `FOUND_ROWS()`.
pub(super) fn replaces_diagnostics(sql: &[u8]) -> bool {
    let mut tokens = Lexer::new(sql);
    let word = |t: &Token, w: &[u8]| t.kind == TokenKind::Word && t.text(sql).eq_ignore_ascii_case(w);
    match tokens.next() {
        Some(t) if word(&t, b"select") => {}
        Some(t) => return [&b"insert"[..], b"update", b"delete", b"replace"].iter().any(|w| word(&t, w)),
        None => return false,
    }
    let mut depth = 0u32;
    while let Some(t) = tokens.next() {
        if t.is_symbol(sql, b"(") {
            depth += 1;
        } else if t.is_symbol(sql, b")") {
            depth = depth.saturating_sub(1);
        } else if t.is_symbol(sql, b";") {
            return false;
        } else if depth == 0 && word(&t, b"from") {
            return tokens.next().is_some_and(|t| t.kind == TokenKind::QuotedIdent || t.kind == TokenKind::Word && !word(&t, b"dual"));
        }
    }
    false
}

impl Session {
    /// Before `payload` (a command the session relays) goes to the server: if a read answered
    /// here is owed and the command may leave or read what the read would have left, the
    /// read is queued ahead of it (not flushed: the command's own write sends both). True if
    /// so: the caller drains the read's reply ([`Session::drain_owed`]) before relaying the
    /// command's.
    pub(super) fn settle_owed(&mut self, command: Command, payload: &[u8]) -> bool {
        // First, what long data needs of the server's parameter types (`session::execute`).
        if command == Command::StmtSendLongData
            && let Some(types) = self.long_data_types(payload)
        {
            self.upstream.queue_packet(0, &types);
            self.upstream.end_frame();
            self.owed.types_queued = true;
            self.upstream_idle = false;
        }
        if !self.owed.due {
            return false;
        }
        let first = match command {
            Command::Query => may_read_diagnostics(&payload[1..]) || !replaces_diagnostics(&payload[1..]),
            // A statement prepared from text: its text says (an unknown id is the server's
            // error, which replaces the warnings and ROW_COUNT()).
            Command::StmtExecute | Command::StmtBulkExecute => statement_id(payload)
                .and_then(|id| self.statements.get(&id))
                .is_some_and(|s| may_read_diagnostics(&s.sql) || !replaces_diagnostics(&s.sql)),
            Command::InitDb => true,
            // Long data for the owed read's statement: the server would hand it to the read
            // sent after it, whose parameters are its own.
            Command::StmtSendLongData => self.names_owed_statement(payload),
            _ => return false,
        };
        let replay = if first { self.replayable() } else { None };
        let pinged = self.owed.pinged;
        self.owed.forget();
        let queued = match replay {
            Some(replay) => {
                // Each in a compressed frame of its own, as the command behind them
                // (`PacketIo::end_frame`).
                self.upstream.queue_packet(0, &replay);
                self.upstream.end_frame();
                if pinged {
                    self.upstream.queue_packet(0, &[Command::Ping as u8]);
                    self.upstream.end_frame();
                }
                self.owed.ping_queued = pinged;
                self.upstream_idle = false;
                true
            }
            None => {
                if first {
                    tracing::debug!("a cached read owed to the server cannot be sent again (its statement is closed)");
                }
                false
            }
        };
        if let Some(id) = self.owed.closing.take() {
            self.queue_close(id);
        }
        queued
    }

    /// Whether `payload` (a command that names a statement) names the owed read's.
    fn names_owed_statement(&self, payload: &[u8]) -> bool {
        let owed = self.owed.statement();
        owed.is_some() && statement_id(payload).and_then(|id| self.statements.id(id)) == owed
    }

    /// At a COM_STMT_CLOSE (`payload`): true if it closes the statement of the owed read, which
    /// then holds it back (see [`Owed::closing`]); a close it held before is queued to go out
    /// with the next command, so at most one closed statement stays open on the server.
    pub(super) fn hold_close(&mut self, payload: &[u8]) -> bool {
        let owed_statement = self.owed.statement().filter(|_| self.owed.due);
        let Some(id) = statement_id(payload).filter(|&id| owed_statement == Some(id)) else { return false };
        if let Some(before) = self.owed.closing.replace(id).filter(|&before| before != id) {
            self.queue_close(before);
        }
        true
    }

    /// Before a command that names a statement (execute, fetch, reset, long data): if its close
    /// is held back, it is queued now, ahead of the command. The client closed it, so the
    /// server answers it as an unknown statement; the owed read is then not sent again.
    pub(super) fn release_close(&mut self, command: Command, payload: &[u8]) {
        use Command::*;
        let names = matches!(command, StmtExecute | StmtBulkExecute | StmtFetch | StmtReset | StmtSendLongData);
        // 0xffffffff names the statement prepared last, which may be the one held.
        let named = statement_id(payload).is_some_and(|id| id == u32::MAX || self.owed.closing == Some(id));
        if names
            && named
            && let Some(id) = self.owed.closing.take()
        {
            self.queue_close(id);
        }
    }

    /// Queues a COM_STMT_CLOSE of statement `id` (no reply comes) and forgets the statement.
    /// In a compressed frame of its own: MariaDB answers only the first command of a frame
    /// that holds several, and the command behind the close would get no answer, for good.
    fn queue_close(&mut self, id: u32) {
        self.upstream.queue_packet(0, &[&[Command::StmtClose as u8][..], &id.to_le_bytes()].concat());
        self.upstream.end_frame();
        self.statements.remove(&id);
    }

    /// Drops the reply to the owed read [`Session::settle_owed`] queued, once the command
    /// behind it is sent.
    pub(super) async fn drain_owed(&mut self, queued: bool) -> Result<(), SessionError> {
        if std::mem::take(&mut self.owed.types_queued) {
            self.drain_results().await?;
        }
        if queued {
            self.drain_results().await?;
        }
        // The ping queued after it: one OK.
        if std::mem::take(&mut self.owed.ping_queued) {
            self.dropped_packet().await?;
        }
        Ok(())
    }

    /// The owed read as it can be sent now: a text as it was; an execute with its parameters'
    /// types bound where the server may not know them (`session::execute`). None if its
    /// statement is gone (the server's session is a new one).
    fn replayable(&mut self) -> Option<Bytes> {
        let read = Bytes::copy_from_slice(&self.owed.payload);
        if read.first() != Some(&(Command::StmtExecute as u8)) {
            return Some(read);
        }
        self.statements.get(&statement_id(&read)?)?;
        Some(self.execute_for_server(read))
    }

    /// Reads and drops the server's whole reply to a statement freshet sent on the session's
    /// connection: result sets until one ends without MORE_RESULTS_EXISTS, or an OK or ERR.
    /// Rows are read frame by frame and never joined, whatever their size.
    async fn drain_results(&mut self) -> Result<(), SessionError> {
        loop {
            let first = self.dropped_packet().await?;
            let more = match first.payload().first() {
                Some(&OK) => self.status_of(response::ok_status(first.payload(), self.caps))?,
                Some(&ERR) => false,
                // A SELECT never asks for a file; decline with an empty packet all the same.
                Some(&LOCAL_INFILE) => {
                    self.upstream.queue_packet(first.seq().wrapping_add(1), &[]);
                    self.upstream.flush().await.map_err(|e| SessionError::from_upstream(e.into()))?;
                    true
                }
                Some(_) => {
                    let columns = Cursor::new(first.payload()).lenenc().map_err(|_| replay_protocol("bad column count"))?;
                    let eof = u64::from(!self.caps.has(Capabilities::DEPRECATE_EOF));
                    for _ in 0..columns + eof {
                        self.dropped_packet().await?;
                    }
                    loop {
                        let p = self.dropped_packet().await?;
                        if response::is_terminator(p.payload(), self.caps) {
                            break self.status_of(response::terminator_status(p.payload(), self.caps))?;
                        }
                        if p.payload().first() == Some(&ERR) {
                            break false;
                        }
                    }
                }
                None => return Err(replay_protocol("an empty packet where a result was expected")),
            };
            if !more {
                return Ok(());
            }
        }
    }

    /// Whether a status (of an OK or a terminator) says more results follow.
    fn status_of<E>(&self, status: Result<StatusFlags, E>) -> Result<bool, SessionError> {
        Ok(status.map_err(|_| replay_protocol("a short OK or EOF packet"))?.has(StatusFlags::MORE_RESULTS_EXISTS))
    }

    /// One logical packet from the upstream, dropped: its first frame, the rest read past.
    async fn dropped_packet(&mut self) -> Result<Frame, SessionError> {
        let first = self.upstream.read_frame().await.map_err(SessionError::from_upstream)?;
        let mut continued = first.is_continued();
        while continued {
            continued = self.upstream.read_frame().await.map_err(SessionError::from_upstream)?.is_continued();
        }
        Ok(first)
    }
}

/// The statement id of a COM_STMT_EXECUTE, COM_STMT_BULK_EXECUTE or COM_STMT_CLOSE payload.
fn statement_id(payload: &[u8]) -> Option<u32> {
    payload.get(1..5).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn replay_protocol(why: &str) -> SessionError {
    SessionError::Upstream(format!("upstream protocol error in a cached read sent again: {why}"), UpstreamFailure::Protocol)
}

#[cfg(test)]
mod tests {
    use super::{KEPT, Owed, may_read_diagnostics, replaces_diagnostics};

    /// A long read answered once is not held for the session's life.
    #[test]
    fn a_long_read_is_held_only_while_it_is_owed() {
        let mut owed = Owed::default();
        owed.answered(&vec![b'x'; 200 * 1024], None);
        assert!(owed.due && owed.payload.len() == 200 * 1024);
        owed.forget();
        assert!(!owed.due && owed.payload.capacity() <= KEPT);
        owed.answered(&vec![b'x'; 200 * 1024], None);
        owed.answered(b"SELECT 1", None);
        assert!(owed.payload.capacity() <= KEPT, "a short read after a long one");
        assert_eq!(owed.payload, b"SELECT 1");
    }

    #[test]
    fn statements_that_may_read_the_diagnostics_are_known_by_their_words() {
        for sql in [
            "SELECT FOUND_ROWS()",
            "select row_count()",
            "SHOW WARNINGS",
            "SHOW COUNT(*) ERRORS",
            "SELECT @@warning_count",
            "GET DIAGNOSTICS @n = NUMBER",
            "CALL p()",
            "EXECUTE s",
            "BEGIN NOT ATOMIC SELECT FOUND_ROWS(); END",
            "SELECT `found_rows`()",
        ] {
            assert!(may_read_diagnostics(sql.as_bytes()), "{sql}");
        }
        for sql in ["SELECT id FROM stories WHERE id = 1", "UPDATE t SET a = 1 WHERE id = 2", "INSERT INTO votes VALUES (1, 2)", "BEGIN"] {
            assert!(!may_read_diagnostics(sql.as_bytes()), "{sql}");
        }
        assert!(may_read_diagnostics(&vec![b'x'; 70_000]), "a text too long to search");
    }

    /// Only a SELECT of a table or a write replaces what a read left; the rest send the read first.
    #[test]
    fn a_select_of_a_table_replaces_what_a_read_left() {
        for sql in [
            "SELECT id FROM stories WHERE id = 1",
            "select /* c */ n from `t` where k = 'from'",
            "SELECT (SELECT 1) FROM t; SET @a = 1",
            "UPDATE t SET a = 1",
            "insert into t values (1)",
        ] {
            assert!(replaces_diagnostics(sql.as_bytes()), "{sql}");
        }
        for sql in [
            "SET @a = 1",
            "DO 1",
            "BEGIN",
            "SELECT 1",
            "SELECT 1 FROM DUAL",
            "SELECT (SELECT n FROM t)",
            "SELECT 1; SELECT n FROM t",
            "WITH x AS (SELECT 1) SELECT * FROM x",
            "/*!50000 SELECT */ n FROM t",
            "",
        ] {
            assert!(!replaces_diagnostics(sql.as_bytes()), "{sql}");
        }
    }
}
