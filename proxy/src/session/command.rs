//! The command phase: read a command, relay it, relay its reply to the end, repeat.
//!
//! Replies are forwarded frame by frame as they arrive (never buffered whole, so a result set
//! of any size streams through in constant memory) and parsed only enough to find their end:
//!
//! | command                                   | reply                                        |
//! |-------------------------------------------|----------------------------------------------|
//! | QUERY, STMT_EXECUTE, STMT_BULK_EXECUTE, PROCESS_INFO | result sets: OK / ERR / LOCAL INFILE / columns + rows, repeated while MORE_RESULTS_EXISTS |
//! | STMT_PREPARE                              | OK + parameter and column definitions, or ERR |
//! | FIELD_LIST, STMT_FETCH                    | packets up to a terminator, or ERR           |
//! | CHANGE_USER                               | an authentication exchange                   |
//! | STMT_SEND_LONG_DATA, STMT_CLOSE           | nothing                                      |
//! | everything else known                     | one packet                                   |
//!
//! Client writes are flushed whenever no further upstream frame is already buffered, so a
//! burst of rows leaves in few syscalls while a lone OK is not held back.
//!
//! Commands are joined from their frames before they are routed, except a COM_QUERY,
//! COM_STMT_EXECUTE or COM_STMT_SEND_LONG_DATA of 16 MiB or more, which is forwarded frame by
//! frame as it arrives (never routed: it is over any `[limits] max_query`), so that a command
//! of any length up to `[limits] max_packet` costs one frame of memory.

use std::pin::Pin;
use std::time::Instant;

use bytes::Bytes;

use crate::matching::lexer::{Lexer, Token, TokenKind, find};
use crate::protocol::cursor::Cursor;
use crate::protocol::io::{Frame, MAX_FRAME, ReadError};
use crate::protocol::response::{ErrPacket, codes};
use crate::protocol::{Command, StatusFlags};

use super::cached::Routed;
use super::connect::{AuthRelay, relay_auth};
use super::glance::Glance;
use super::require_tls::RequireTlsCheck;
use super::{PreparedStatement, Session, SessionError};
use crate::tls::MaybeTls;

/// COM_REFRESH's flag for the status counters (FLUSH STATUS).
const REFRESH_STATUS: u8 = 0x10;
/// COM_REFRESH's bit that reads the grant tables again.
const REFRESH_GRANT: u8 = 0x01;

/// What [`Session::note_effects`] found in a command's text, for after its reply.
struct Effects {
    /// The statement (counted from 0) that may change what accounts may read.
    privileges: Option<usize>,
    /// A USE alone or COM_INIT_DB, with the privilege generation read before it: if the
    /// server answers OK, it read the session's privileges again, of at least that one.
    sure_read: Option<Option<u64>>,
    /// The text runs other statements (a block, EXECUTE of a prepared text, a CALL), whose
    /// errors come after others ran.
    text_runs_statements: bool,
}

/// Whether a statement's first word says it cannot change what the session follows.
fn stateless_statement(sql: &[u8]) -> bool {
    let first = super::glance::first_word(sql);
    first.is_some_and(|w| [&b"select"[..], b"insert", b"replace", b"update", b"delete"].iter().any(|k| w.eq_ignore_ascii_case(k)))
}

/// What the loop does after a command.
#[derive(PartialEq, Eq)]
pub(super) enum Flow {
    Continue,
    /// Go on; the command was answered from a cache (timed in that cache's histogram, not in
    /// the relay one).
    Answered,
    Quit,
}

impl Session {
    /// Serves commands until the client quits (Ok) or the session breaks (Err).
    pub(super) async fn run(&mut self) -> Result<(), SessionError> {
        let stop = self.shared.stop.subscribe();
        // One wait for the whole session, not one per command: it stays registered with the
        // subscription's `Notify` between commands.
        let stopping = stop.cancelled();
        tokio::pin!(stopping);
        loop {
            self.client.give_back();
            self.upstream.give_back();
            self.wait_for_command(stopping.as_mut()).await?;
            // Refused at its header, as the server refuses it (its ERR numbered as the frame
            // should have been): waiting for the length a frame out of order declares would
            // let a client hold the session by sending less. On a compressed session the
            // server checks the compressed frames' ids, not those of the packets inside.
            if !self.client.is_compressed() && self.client.next_seq().await.map_err(SessionError::from_client)? != 0 {
                return Err(SessionError::from_client(ReadError::OutOfOrder { expected: 0 }));
            }
            let limit = self.shared.packet_limit.largest();
            let first = self.client.read_frame_limited(limit.min(MAX_FRAME)).await.map_err(SessionError::from_client)?;
            let started = Instant::now();
            // A byte no command has, or none: the server answers 1047 ("Unknown command") and
            // the session goes on, as for COM_SLEEP, which it is relayed as (and counted as).
            let command = first.payload().first().and_then(|&byte| Command::from_byte(byte)).unwrap_or(Command::Sleep);
            // Not on a compressed session: there the compression layer numbers the frames, and
            // the long command is joined as before (bounded by the packet limit all the same).
            let stream = first.is_continued() && !self.client.is_compressed();
            let flow = if stream && matches!(command, Command::Query | Command::StmtExecute | Command::StmtSendLongData) {
                self.relay_streamed(command, first, limit).await?
            } else {
                let packet = self.client.read_rest(first, limit).await.map_err(SessionError::from_client)?;
                self.dispatch(command, packet.payload, packet.last_seq, started).await?
            };
            self.shared.metrics.command(command, started, flow == Flow::Answered);
            self.account_bytes();
            if flow == Flow::Quit {
                return Ok(());
            }
        }
    }

    /// A command of 16 MiB or more (its first frame is full) that freshet never needs whole:
    /// forwarded frame by frame as it arrives, so it costs a frame of memory whatever its
    /// length (joined, a 64 MiB statement held 64 MiB and more while it grew). Such a text is
    /// longer than any `[limits] max_query`, so it would be relayed untokenized anyway; a
    /// query that may change session state (its first word is not one of a few that cannot, or
    /// it has a `;` anywhere: more statements) makes the session relay its cached reads from
    /// now on, as an unfollowed change does. An execute's prepared text is followed as at any
    /// execute.
    async fn relay_streamed(&mut self, command: Command, first: Frame, limit: usize) -> Result<Flow, SessionError> {
        self.release_close(command, first.payload());
        match command {
            Command::Query if !stateless_statement(&first.payload()[1..]) => {
                self.state.unfollowed("a text of 16 MiB or more that may change the session", b"")
            }
            // A prepared statement runs its text at each execute, whatever its parameters'
            // length (a SET executed with 16 MiB of them): followed as at any execute.
            Command::StmtExecute if self.routed_statement(first.payload()) => self.execute_reaches_server(first.payload()),
            Command::StmtExecute => {
                let id = Cursor::new(&first.payload()[1..]).u32().ok();
                if let Some(sql) = id.and_then(|id| self.statements.get(&id)).map(|s| s.sql.clone()) {
                    self.state.observe(&sql);
                }
            }
            Command::StmtSendLongData => self.note_long_data(first.payload()),
            _ => {}
        }
        if matches!(command, Command::Query | Command::StmtExecute) {
            self.own.wrote();
        }
        // A text this long is taken to read the diagnostics a cached read owes.
        let owed = self.settle_owed(command, first.payload());
        // A write this long in a session with binlogging off evicts like any other (below).
        let unlogged_write = self.state.unlogged && matches!(command, Command::Query | Command::StmtExecute);
        // The text is not read, but searched for the names of the variables that turn
        // binlogging off: one that names them is a text the session does not follow that may
        // (`binlogging::may_turn_binlogging_off`), and may have written with binlogging off.
        let mut names = (command == Command::Query).then(super::binlogging::NamesInPieces::default);
        if let Some(n) = names.as_mut() {
            n.feed(&first.payload()[1..]);
        }
        // A text whose first word changes nothing may hold more statements: one with a `;`
        // anywhere (in a string too) is not followed.
        let mut semicolon = command == Command::Query && memchr::memchr(b';', &first.payload()[1..]).is_some();
        let mut total = first.payload().len();
        let mut frame = first;
        self.upstream_idle = false;
        loop {
            self.upstream.queue_frame(&frame);
            let continued = frame.is_continued();
            // Gone before the next frame is read: one frame in memory, not two.
            drop(frame);
            self.upstream.flush().await.map_err(|e| SessionError::from_upstream(e.into()))?;
            if !continued {
                break;
            }
            let room = limit.saturating_sub(total);
            frame = self.client.read_frame_limited(room.min(MAX_FRAME)).await.map_err(|e| match e {
                ReadError::TooLarge { size, seq, .. } => {
                    SessionError::from_client(ReadError::TooLarge { size: total as u64 + size, limit: limit as u64, seq })
                }
                other => SessionError::from_client(other),
            })?;
            total += frame.payload().len();
            if let Some(n) = names.as_mut() {
                n.feed(frame.payload());
                semicolon |= memchr::memchr(b';', frame.payload()).is_some();
            }
        }
        self.drain_owed(owed).await?;
        self.privileges_changed_in_part = false;
        if matches!(command, Command::Query | Command::StmtExecute) {
            self.relay_results().await?;
        }
        self.rest_upstream();
        self.flush_client().await?;
        // The text is not read: a privilege statement in it that succeeded is in the binlog,
        // one that failed in part says so in its error.
        if self.privileges_changed_in_part
            && let Some(engine) = self.shared.engine.get()
        {
            engine.access.forget_all();
        }
        let turns_off = names.is_some_and(|n| n.found());
        self.state.unlogged |= turns_off;
        if semicolon {
            self.state.unfollowed = true;
        }
        if unlogged_write || turns_off {
            self.evict_after_unlogged_write().await;
        }
        Ok(Flow::Continue)
    }

    /// Waits for the client's next command while watching the idle upstream connection.
    ///
    /// A server closes idle connections (wait_timeout, KILL, shutdown), sometimes after an
    /// unsolicited ERR packet. A direct client would see that at once, and drivers check for
    /// it before reusing a pooled connection, so freshet forwards what the upstream sends and
    /// closes the client's connection as soon as the upstream's closes. When freshet shuts
    /// down (`stopping` completes), a session waiting here ends (a command already sent is
    /// served first).
    async fn wait_for_command(&mut self, mut stopping: Pin<&mut impl Future<Output = ()>>) -> Result<(), SessionError> {
        loop {
            // Reads answered here since the server last heard of the session: it must hear
            // again before half its wait_timeout (`Session::keep_alive`).
            let keep_alive = self.arm_keep_alive();
            if !self.client.has_buffered() {
                tokio::select! {
                    biased;
                    ready = self.client.readable() => ready.map_err(SessionError::from_client)?,
                    frame = self.upstream.read_frame() => {
                        self.sent_while_waiting(frame).await?;
                        continue;
                    }
                    () = self.keep_alive_timer.as_mut(), if keep_alive.is_some() => {
                        self.keep_alive().await?;
                        continue;
                    }
                    () = stopping.as_mut() => return Err(SessionError::ShuttingDown),
                }
            }
            // The client has a command. One that always has the next one ready (it pipelines)
            // is never waited for, and the upstream never looked at: every `LOOK_EVERY`
            // commands the upstream and the keep-alive are looked at without waiting, or a
            // session the server ended would go on being answered from the cache. (A look polls
            // the upstream's socket, most of a thousand instructions: too many for every hit.)
            self.queued_without_look += 1;
            if self.queued_without_look >= LOOK_EVERY {
                self.queued_without_look = 0;
                if let Some(frame) = now(self.upstream.read_frame()).await {
                    self.sent_while_waiting(frame).await?;
                    continue;
                }
                if keep_alive.is_some() && now(self.keep_alive_timer.as_mut()).await.is_some() {
                    self.keep_alive().await?;
                }
            }
            return Ok(());
        }
    }

    /// What the upstream sent while the session waited for its client: forwarded, or the end
    /// of the session. MariaDB resets (RST) a connection it drops for wait_timeout and closes
    /// (FIN) one it KILLs; others send an ERR packet first. The client's connection ends the
    /// same way (see Session::close).
    async fn sent_while_waiting(&mut self, frame: Result<Frame, ReadError>) -> Result<(), SessionError> {
        let frame = frame.map_err(|e| match e {
            ReadError::Io(e) if e.kind() == std::io::ErrorKind::ConnectionReset => SessionError::UpstreamReset,
            ReadError::Closed | ReadError::Io(_) => SessionError::UpstreamClosedIdle,
            other => SessionError::from_upstream(other),
        })?;
        self.upstream_idle = false;
        self.client.queue_frame(&frame);
        self.flush_client().await
    }

    /// Routes one command, read at `started`: admin statements and cached reads are answered
    /// here, everything else is relayed.
    async fn dispatch(&mut self, command: Command, payload: Bytes, last_seq: u8, started: Instant) -> Result<Flow, SessionError> {
        use Command::*;
        self.release_close(command, &payload);
        let unlogged_before = self.state.unlogged;
        self.state.begin_command();
        match command {
            BinlogDump | BinlogDumpGtid | RegisterSlave | TableDump => {
                let reply = ErrPacket::new(
                    codes::NOT_SUPPORTED,
                    "42000",
                    "freshet does not relay replication commands; connect replicas to the server directly",
                );
                self.client.queue_packet(last_seq.wrapping_add(1), &reply.encode());
                self.flush_client().await?;
                return Ok(Flow::Continue);
            }
            Query => {
                if let Some(flow) = self.admin_statement(&payload, last_seq).await? {
                    return Ok(flow);
                }
                match self.route_query(&payload, last_seq, started).await? {
                    Routed::Answered => return Ok(self.answered(&payload)),
                    Routed::Relay { capture } => self.start_capture(capture),
                }
            }
            StmtExecute if self.routed_statement(&payload) => match self.route_execute(&payload, last_seq, started).await? {
                Routed::Answered => return Ok(self.answered(&payload)),
                Routed::Relay { capture } => self.start_capture(capture),
            },
            StmtSendLongData => self.note_long_data(&payload),
            // The server's answer decides the database (and the account): ask it again
            // before the next cached read, whatever it answers here.
            InitDb => self.state.database_may_change(),
            // The table's columns: a view's opened, with the functions it calls.
            FieldList => self.state.rights_may_be_read_again(),
            // REFRESH_STATUS: as FLUSH STATUS (`SessionState::counters_reset`).
            Refresh if payload.get(1).is_some_and(|flags| flags & REFRESH_STATUS != 0) => self.state.counters_reset(),
            // A new session on the server: nothing is owed to its diagnostics.
            ChangeUser => {
                self.state.stale = true;
                self.own.server_forgot();
                self.owed.new_session();
            }
            ResetConnection => {
                self.state.reset();
                self.own.server_forgot();
                self.owed.new_session();
            }
            // MariaDB's ping, and its statement reset, set ROW_COUNT() to 0 and keep the rest:
            // a replay of the owed read must be followed by a ping.
            Ping | StmtReset => {
                if command == StmtReset
                    && let Some(route) = self.statement_of(&payload).and_then(|s| s.route.as_mut())
                {
                    route.refused = false;
                }
                if self.owed.due() {
                    self.owed.pinged = true;
                }
            }
            // The owed read's statement: closed once the read is settled (no reply to send).
            StmtClose if self.hold_close(&payload) => return Ok(Flow::Continue),
            _ => {}
        }
        // The server says backslashes do not escape (a sql_mode this tracker did not read, or
        // has not been told of): a text whose strings hold one would be misread here.
        if self.status.has(StatusFlags::NO_BACKSLASH_ESCAPES)
            && !self.state.unfollowed
            && matches!(command, Query | StmtPrepare)
            && super::misreading::reads_otherwise_unseen(payload.get(1..).unwrap_or_default())
        {
            self.state.unfollowed("a backslash in a string under NO_BACKSLASH_ESCAPES", b"");
        }
        self.confirm_reading(command, &payload).await?;
        let effects = self.note_effects(command, &payload);
        self.errored = false;
        self.privileges_changed_in_part = false;
        let owed = self.settle_owed(command, &payload);
        self.refused_at = None;
        // A refusal at a block's end tells nothing of what ran in it (a prepared statement's
        // text was read at its prepare).
        let trusts_refusal = match command {
            StmtExecute | StmtBulkExecute => !self.statement_of(&payload).is_some_and(|s| s.runs_statements),
            _ => !effects.text_runs_statements,
        };
        if command == StmtExecute {
            self.execute_reaches_server(&payload);
        }
        let payload = if command == StmtExecute { self.execute_for_server(payload) } else { payload };
        self.forward_command(&payload).await?;
        self.drain_owed(owed).await?;
        match command {
            Quit => return Ok(Flow::Quit),
            Query | StmtExecute | StmtBulkExecute | ProcessInfo => self.relay_results().await?,
            StmtPrepare => self.relay_prepare(payload.clone()).await?,
            FieldList => self.relay_until_terminator().await?,
            StmtFetch => {
                self.relay_rows().await?;
            }
            StmtSendLongData => {}
            StmtClose => {
                if let Ok(id) = Cursor::new(&payload[1..]).u32() {
                    self.statements.remove(&id);
                }
            }
            ChangeUser => self.relay_change_user(&payload).await?,
            ResetConnection => {
                self.statements.clear();
                self.relay_single().await?;
            }
            _ => self.relay_single().await?,
        }
        self.rest_upstream();
        self.flush_client().await?;
        self.record_relayed();
        self.store_capture();
        self.after_relayed(effects.privileges, unlogged_before, trusts_refusal).await;
        if command == StmtExecute && !self.errored {
            self.execute_answered(&payload);
        }
        if let Some(generation) = effects.sure_read.filter(|_| !self.errored) {
            self.state.rights_read_epoch += 1;
            self.reread_generation = generation;
        }
        Ok(Flow::Continue)
    }

    /// What a relayed command's text says it may do, noted before it is sent: the session's
    /// state it may change (stored code: asked again), the writes it may make (read-your-writes
    /// waits for them; with binlogging off, every cache is evicted after it), the statement
    /// that may change privileges, and whether a USE makes the server read the session's
    /// privileges again.
    fn note_effects(&mut self, command: Command, payload: &Bytes) -> Effects {
        use Command::*;
        // The SQL the command runs, looked up once (a statement's is its prepare's text), and
        // what every reading of it asks first.
        let text = self.statement_bytes(command, payload);
        // A prepared text changes the session when it runs, each time it runs (`SET time_zone
        // = ?` executed again after the session was asked, `SET sql_log_bin = 0`), as a text
        // sent as a query does: it is followed at every execute. A cached read's needs nothing.
        if matches!(command, StmtExecute | StmtBulkExecute)
            && let Some(sql) = &text
            && !self.routed_statement(payload)
        {
            self.state.observe(sql);
        }
        let glance = text.as_deref().map(Glance::of);
        let may_write = self.may_write(command, glance.as_ref());
        let mut privileges = glance.as_ref().and_then(|g| self.privilege_statement(g));
        // With binlogging off, a GRANT or REVOKE run by other statements (a block, EXECUTE, a
        // CALL) is in no binlog, and what they run cannot be read here: the text is the only
        // evidence, as for a plain one.
        if privileges.is_none() && self.state.unlogged && glance.as_ref().is_some_and(|g| self.state.runs_statements(g)) {
            privileges = Some(0);
        }
        // COM_REFRESH with its grant bit is FLUSH PRIVILEGES, which it does not log.
        if command == Refresh && payload.get(1).is_some_and(|flags| flags & REFRESH_GRANT != 0) {
            privileges = Some(0);
        }
        self.unlogged_write = self.state.unlogged && may_write;
        // Stored code (a trigger, a function, one a view calls) may set the session's
        // variables: ask again. It may write too, under a SELECT, SET, SHOW or DO: the next
        // cached read waits for it as for any write (the question rides on the probe's).
        // Each looked at once: a call (or several statements), a view opened, a write or SET.
        let (calls, opens_views, writes) = match glance.as_ref() {
            Some(g) => (
                g.semicolon || super::glance::calls_a_routine(g),
                self.names_a_view(g) || super::glance::may_open_views(g),
                super::glance::writes_or_sets(g),
            ),
            None => (false, false, false),
        };
        let stored_code = calls || opens_views || writes;
        if stored_code {
            self.state.stale = true;
        }
        // What may run or load a routine of another database, which reads the session's
        // privileges again: a call, a view opened, several statements. Not a plain write: its
        // triggers may call one, but counting every write cost a session learning again at
        // each write once a privilege change was seen (left in docs/decisions.md).
        if calls || opens_views {
            self.state.rights_may_be_read_again();
        }
        // A USE alone, or COM_INIT_DB: if the server answers OK, it surely read the session's
        // privileges again, of at least the generation read now.
        let sure_read = (command == InitDb || command == Query && glance.as_ref().is_some_and(|g| g.starts(b"use") && !g.semicolon))
            .then(|| self.shared.engine.get().map(|e| e.access.generation()));
        if may_write || stored_code {
            self.own.wrote();
        }
        if std::mem::take(&mut self.state.chose_gtid) {
            self.own.chose_gtid();
        }
        Effects { privileges, sure_read, text_runs_statements: glance.as_ref().is_some_and(|g| self.state.runs_statements(g)) }
    }

    /// Relays a COM_CHANGE_USER's authentication exchange; on success the server's session is
    /// new, and so is what freshet knows of it.
    async fn relay_change_user(&mut self, payload: &Bytes) -> Result<(), SessionError> {
        self.upstream_idle = false;
        let login_generation = self.shared.engine.get().map(|e| e.access.generation());
        let login_at = std::time::Instant::now();
        let bridged = matches!(self.client.get_ref(), MaybeTls::Plain(_)) && matches!(self.upstream.get_ref(), MaybeTls::Tls(_));
        let tls_client = matches!(self.client.get_ref(), MaybeTls::Tls(_));
        let upstream_tls = matches!(self.upstream.get_ref(), MaybeTls::Tls(_));
        let check = ((bridged && !self.shared.config.listen.trust_plain_clients) || (tls_client && upstream_tls))
            .then(|| RequireTlsCheck::for_change_user(payload, self.caps, self.client.get_ref()));
        let relay = AuthRelay { shift: 0, state: &mut self.auth, bridge: bridged.then_some(&self.shared.sha2_key), require_tls: check };
        let result = relay_auth(&mut self.client, &mut self.upstream, relay).await;
        self.statements.clear();
        match result {
            Ok(status) => {
                // A new session on the server: settings, temporary tables and
                // prepared statements are gone, and its privileges are read anew.
                self.status = status;
                self.login_generation = login_generation;
                self.memo_generation = login_generation;
                self.memo_rights_read = self.state.rights_read_epoch;
                self.reread_generation = login_generation;
                self.login_at = login_at;
                self.memo.clear();
                self.state.reset();
                self.login_rights_epoch = self.state.rights_epoch;
                if let Some(id) = crate::protocol::handshake::change_user_collation(payload, self.caps) {
                    self.state.client_collation(id);
                }
                Ok(())
            }
            // A refused COM_CHANGE_USER leaves the connection to the server's rules;
            // the client saw the server's ERR packet.
            Err(SessionError::AuthFailed) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// After a relayed command, what it may have done to others: forget what accounts may
    /// read if its statement `privileges` ran, evict every cache if it wrote with binlogging
    /// off (`unlogged_before`: the session's binlogging was off before it).
    ///
    /// Whatever the server answered, unless it refused the statement before running it: a
    /// GRANT or REVOKE that fails may still take effect in part, and is then not in the binlog
    /// that tells freshet of the others; a refused one changed nothing, and any login can send
    /// those in a loop to make every account learn again, or (a SET of `sql_log_bin` it may
    /// not make) every cache empty at each statement. A text's statements stop at the first
    /// error, and each gives at least one result, so the `r`th result was that of statement
    /// `r - 1` or an earlier one (a CALL gives several). Unless `trusts_refusal` is false: a
    /// block, CALL or EXECUTE answers with the error of a statement inside it, after others.
    async fn after_relayed(&mut self, privileges: Option<usize>, unlogged_before: bool, trusts_refusal: bool) {
        let refused_at = self.refused_at;
        let ran = move |statement: usize| !trusts_refusal || refused_at.is_none_or(|r| statement + 1 < r);
        self.state.refused(ran);
        // A privilege statement that failed in part, in a block, a CALL or an EXECUTE as well
        // as in the text: the server logs nothing of what it did.
        if (privileges.is_some_and(ran) || self.privileges_changed_in_part)
            && let Some(engine) = self.shared.engine.get()
        {
            engine.access.forget_all();
        }
        // Writes with binlogging off are those from the statement that turned it off on.
        let unlogged_from = if unlogged_before { 0 } else { self.state.unlogged_at.unwrap_or(0) };
        if !unlogged_before && self.state.unlogged && !ran(unlogged_from) {
            self.state.unlogged = false;
        }
        let in_transaction = self.status.has(StatusFlags::IN_TRANS);
        if std::mem::take(&mut self.unlogged_write) && ran(unlogged_from) {
            self.evict_after_unlogged_write().await;
            self.unlogged_in_transaction = in_transaction;
        } else if self.unlogged_in_transaction && !in_transaction {
            // Committed (or rolled back) by whatever statement ended the transaction.
            self.unlogged_in_transaction = false;
            self.evict_after_unlogged_write().await;
        }
    }

    /// A command answered from a view: the server owes its diagnostics (`owed`).
    fn answered(&mut self, payload: &[u8]) -> Flow {
        let statement = payload.get(1..5).and_then(|b| self.statements.id(u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        self.owed.answered(payload, statement);
        Flow::Answered
    }

    /// True if the command may write (it is not known to only read or set).
    /// `text` is the command's SQL, glanced at (None for a statement freshet does not know).
    fn may_write(&self, command: Command, text: Option<&Glance<'_>>) -> bool {
        let g = match command {
            Command::Query | Command::StmtExecute | Command::StmtBulkExecute => match text {
                Some(g) => g,
                None => return true,
            },
            _ => return false,
        };
        // Compared in place, without a lowercased copy: this runs for every relayed command.
        let reads = [&b"select"[..], b"show", b"set", b"use", b"desc", b"describe", b"explain", b"help"].iter().any(|k| g.starts(k));
        // `SET STATEMENT ... FOR UPDATE ...` writes: taken for a write whatever follows FOR.
        !reads || g.semicolon || g.set_statement()
    }

    /// The first statement of `text` (the SQL the session sent) that may change what accounts
    /// may read ([`privilege_statement`]), run in the session's default database.
    fn privilege_statement(&self, text: &Glance<'_>) -> Option<usize> {
        // The server's answer, unless something may have changed it since.
        let database = if self.state.stale { None } else { self.identity.as_ref().and_then(|i| i.database.as_deref()) };
        let tracked = self.shared.engine.get().map_or("", |e| e.settings.database.as_str());
        privilege_statement(text, database, tracked, !self.status.has(StatusFlags::NO_BACKSLASH_ESCAPES))
    }

    /// The SQL a statement command runs: a query's text, or the text an execute's statement was
    /// prepared from (None for an unknown statement, or a command that is no statement).
    /// A handle of its own (no copy).
    fn statement_bytes(&self, command: Command, payload: &Bytes) -> Option<Bytes> {
        match command {
            Command::Query => Some(payload.slice(1..)),
            Command::StmtExecute | Command::StmtBulkExecute => {
                Cursor::new(payload.get(1..)?).u32().ok().and_then(|id| self.statements.get(&id)).map(|stmt| stmt.sql.clone())
            }
            _ => None,
        }
    }

    /// Whether a relayed text names a view freshet knows of (`Engine::views`): a view may
    /// call a stored function, which may change the session (`SET SESSION sql_select_limit`,
    /// a time zone, `SET ROLE NONE`) with no call in the text. Every word and quoted name is
    /// looked up, wherever it stands: a column or alias named like a view costs a question to
    /// the server, never an answer. Nothing is read while no view is known.
    fn names_a_view(&self, text: &Glance<'_>) -> bool {
        let Some(views) = self.shared.engine.get().map(|e| &e.views).filter(|v| !v.is_empty()) else { return false };
        Lexer::new(text.sql).any(|t| match t.kind {
            TokenKind::Word => views.contains(t.text(text.sql)),
            TokenKind::QuotedIdent => {
                let quoted = t.text(text.sql);
                let name = quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or_default();
                views.contains(&String::from_utf8_lossy(name).replace("``", "`").into_bytes())
            }
            _ => false,
        })
    }

    /// A write of a session whose binlogging may be off: the binlog will never show it, so
    /// every cache is evicted (freshet cannot tell what a write, its triggers and cascades
    /// changed) before the session's next command.
    async fn evict_after_unlogged_write(&mut self) {
        let Some(engine) = self.shared.engine.get().cloned() else { return };
        engine.counters.unlogged_writes.inc();
        tracing::warn!(user = %self.state.user, "a write with binlogging off (sql_log_bin = 0 or binlog_format other than ROW); evicting every cache");
        engine.evict_all().await;
    }

    /// The prepared statement a COM_STMT_EXECUTE / SEND_LONG_DATA payload names.
    fn statement_of(&mut self, payload: &[u8]) -> Option<&mut PreparedStatement> {
        let id = Cursor::new(payload.get(1..)?).u32().ok()?;
        self.statements.get_mut(&id)
    }

    /// At a COM_STMT_SEND_LONG_DATA (`payload`): the statement's next execute is relayed (the
    /// server holds the data). One for a parameter the statement lacks makes MariaDB refuse
    /// every execute of it (1210) until COM_STMT_RESET, so all are relayed until then.
    fn note_long_data(&mut self, payload: &[u8]) {
        let parameter = payload.get(5..7).map(|b| u16::from_le_bytes([b[0], b[1]]));
        let Some(statement) = self.statement_of(payload) else { return };
        let lacks = parameter.is_some_and(|p| usize::from(p) >= usize::from(statement.params));
        if let Some(route) = statement.route.as_mut() {
            route.long_data = true;
            route.refused |= lacks;
        }
    }

    fn routed_statement(&mut self, payload: &[u8]) -> bool {
        self.statement_of(payload).is_some_and(|s| s.route.is_some())
    }

    /// Sets up the capture of the column definitions of the query about to be relayed, noting
    /// the registry's count of forgets before it goes upstream.
    fn start_capture(&mut self, key: Option<crate::cache::ColumnsKey>) {
        self.capture = key.and_then(|key| {
            let noted = self.shared.engine.get()?.columns_forgotten();
            Some(super::Capture { key, defs: Vec::new(), noted, status: 0 })
        });
    }

    /// Keeps column definitions captured from a relayed single result set.
    fn store_capture(&mut self) {
        if let Some(super::Capture { key, defs, noted, status }) = self.capture.take()
            && !defs.is_empty()
            && let Some(engine) = self.shared.engine.get()
        {
            engine.store_columns(key, defs, status, noted);
        }
    }
}

/// The first statement of `sql` (counted from 0) that may change what accounts may read, as
/// cdc reads the binlog's statements (`freshet_cdc::ddl::privileges_may_change`): each
/// statement of the text by its first word (GRANT, REVOKE, DROP USER, FLUSH PRIVILEGES, DDL
/// of the privilege tables, ...), a write by whether it names the `mysql` schema as a
/// qualifier or runs in it (`database`, the session's default database: None if not known
/// or if the text may change it). A GRANT or REVOKE counts if it may reach the tables of
/// `tracked`, the caches' database. The body of an executable comment is read as the
/// text the server runs. `backslash_escapes`: the session reads strings the default way (no
/// NO_BACKSLASH_ESCAPES), as the tokenizer does, so a `'mysql.user'` in one is a string and
/// the statements are split where the server splits them; otherwise any `mysql` in a write
/// counts, and statement 0 is named. Errs towards the first statement where the text cannot
/// be read: a false alarm costs each account one relayed read per cache.
fn privilege_statement(text: &Glance<'_>, database: Option<&str>, tracked: &str, backslash_escapes: bool) -> Option<usize> {
    let first = privilege_statements(text, database, tracked, backslash_escapes, true)?;
    Some(if backslash_escapes { first } else { 0 })
}

fn privilege_statements(
    text: &Glance<'_>,
    database: Option<&str>,
    tracked: &str,
    backslash_escapes: bool,
    open_comments: bool,
) -> Option<usize> {
    let sql = text.sql;
    let named = |w: &[u8]| sql.windows(w.len()).any(|s| s.eq_ignore_ascii_case(w));
    let comments = text.slash && find(sql, b"/*").is_some();
    if comments && Lexer::new(sql).any(|t| matches!(t.kind, TokenKind::ExecComment | TokenKind::Unterminated)) {
        if open_comments && let Some(opened) = super::glance::open_exec_comments(sql, Lexer::new(sql)) {
            return privilege_statements(&Glance::of(&opened), database, tracked, backslash_escapes, false);
        }
        const WORDS: [&[u8]; 6] = [b"grant", b"revoke", b"user", b"role", b"password", b"privileges"];
        let in_mysql = database.is_some_and(|d| d.eq_ignore_ascii_case("mysql"));
        return (WORDS.iter().any(|w| named(w)) || in_mysql || named(b"mysql")).then_some(0);
    }
    // `mysql.user`, `` `mysql`.db ``, `"mysql".db` (an identifier under ANSI_QUOTES).
    let qualifier = |t: &Token| {
        let text = t.text(sql);
        let name = match t.kind {
            TokenKind::Word => text,
            TokenKind::QuotedIdent | TokenKind::DoubleQuoted => text.get(1..text.len() - 1).unwrap_or_default(),
            _ => return false,
        };
        name.eq_ignore_ascii_case(b"mysql")
    };
    // Whether one statement (its first word, its text) may, in `database`; `names_mysql`
    // tells whether its tokens name `mysql` as a qualifier.
    let one = |first: &[u8], text: &[u8], database: Option<&str>, names_mysql: &dyn Fn() -> bool| {
        // In place: a text may hold millions of statements.
        let mut lower = [0u8; 8];
        let Some(word) = lower.get_mut(..first.len()) else { return false };
        word.copy_from_slice(first);
        word.make_ascii_lowercase();
        match &*word {
            b"grant" | b"revoke" | b"create" | b"drop" | b"alter" | b"rename" | b"truncate" | b"set" | b"flush" => {
                // cdc does not read a text past its head (64 KiB): it takes it to change
                // anything, and so does the session, without copying it.
                text.len() > 64 << 10 || freshet_cdc::ddl::privileges_may_change(&String::from_utf8_lossy(text), database, tracked)
            }
            b"insert" | b"update" | b"delete" | b"replace" | b"load" => {
                database.is_some_and(|d| d.eq_ignore_ascii_case("mysql")) || (named(b"mysql") && (!backslash_escapes || names_mysql()))
            }
            _ => false,
        }
    };
    // Most texts: one statement, read by its first word, and its tokens only if it is a write
    // that says `mysql`.
    if !text.semicolon && !comments {
        let first = text.first.unwrap_or_default();
        let names_mysql = || {
            let mut after_qualifier = false;
            Lexer::new(sql).any(|t| {
                let named = after_qualifier && t.is_symbol(sql, b".");
                after_qualifier = qualifier(&t);
                named
            })
        };
        return one(first, sql, database, &names_mysql).then_some(0);
    }
    // Otherwise one statement at a time, holding none of their tokens. Empty statements (`;;`)
    // are not counted: counting fewer errs towards an earlier one. A USE changes the default
    // database of the statements after it.
    let mut statements = super::statements::Statements::new(sql);
    let (mut kept, mut database, mut at) = (Vec::new(), database, 0);
    loop {
        let (mut names_mysql, mut after_qualifier) = (false, false);
        let statement = statements.next(
            |_| 1,
            &mut kept,
            |t| {
                names_mysql |= after_qualifier && t.is_symbol(sql, b".");
                after_qualifier = qualifier(t);
            },
        )?;
        let first = kept[0].text(sql);
        if first.eq_ignore_ascii_case(b"use") {
            database = None;
        } else if one(first, &sql[statement.range], database, &|| names_mysql) {
            return Some(at);
        }
        at += 1;
    }
}

/// How many commands a client may have waiting, one after another, before the session looks
/// at its upstream and keep-alive without waiting (`Session::wait_for_command`).
const LOOK_EVERY: u32 = 16;

/// `future`'s output if it is ready at its first poll, without waiting (its waker is kept).
pub(super) async fn now<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| match future.as_mut().poll(cx) {
        std::task::Poll::Ready(v) => std::task::Poll::Ready(Some(v)),
        std::task::Poll::Pending => std::task::Poll::Ready(None),
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::{Glance, privilege_statement};

    #[test]
    fn statements_that_may_change_privileges_are_known_in_any_text() {
        let changes = |sql: &str| privilege_statement(&Glance::of(sql.as_bytes()), Some("app"), "app", true).is_some();
        for sql in [
            "GRANT SELECT ON app.t TO 'u'@'%'",
            "revoke select (id, ts) on app.t from u",
            "CREATE OR REPLACE USER x IDENTIFIED BY 'p'",
            "FLUSH PRIVILEGES",
            "UPDATE mysql.global_priv SET priv = '{}'",
            "DELETE FROM `mysql`.db WHERE User = 'x'",
            "UPDATE t, mysql.global_priv SET t.a = 1",
            "TRUNCATE mysql.tables_priv",
            "SELECT 1; REVOKE SELECT ON app.t FROM u",
            "INSERT INTO t VALUES (1); DROP USER x",
            "SELECT 1; /*!50000 GRANT ALL ON *.* TO u */",
            "/*M!100500 GRANT ALL ON *.* TO u */",
            "SELECT 1 /*!; GRANT ALL ON *.* TO u */",
            "INSERT INTO /*!mysql.*/db VALUES ()",
            "SELECT 1; /*!50000 GRANT /* nested */ ALL ON *.* TO u */",
            "SET STATEMENT max_statement_time = 5 FOR REVOKE SELECT ON app.t FROM u",
        ] {
            assert!(changes(sql), "{sql}");
        }
        assert!(
            privilege_statement(&Glance::of(b"DELETE FROM user WHERE User = 'x'"), Some("mysql"), "app", true).is_some(),
            "a write run in the mysql database"
        );
        assert_eq!(
            privilege_statement(&Glance::of(b"INSERT INTO t VALUES ('mysql.x')"), Some("app"), "app", false),
            Some(0),
            "strings read otherwise"
        );
        // Which statement, for a text the server may stop at an error before it.
        assert_eq!(privilege_statement(&Glance::of(b"SELECT 1; GRANT ALL ON *.* TO u"), Some("app"), "app", true), Some(1));
        assert_eq!(
            privilege_statement(&Glance::of(b"SELECT 1;; SELECT ';'; /*!GRANT ALL ON *.* TO u */"), Some("app"), "app", true),
            Some(2)
        );
        assert_eq!(
            privilege_statement(&Glance::of(b"SELECT 1; GRANT ALL ON *.* TO u"), Some("app"), "app", false),
            Some(0),
            "split otherwise"
        );
        // Grants on another database's objects reach no cache of `app`; unqualified ones are
        // the default database's, which a USE in the text makes unknown.
        let grant = |sql: &str, database: Option<&str>| privilege_statement(&Glance::of(sql.as_bytes()), database, "app", true).is_some();
        assert!(!grant("GRANT SELECT ON other.* TO u", Some("app")));
        assert!(!grant("GRANT SELECT ON t TO u", Some("other")));
        assert!(grant("GRANT SELECT ON t TO u", None));
        assert!(grant("GRANT SELECT ON t TO u", Some("app")));
        assert!(grant("USE app; GRANT SELECT ON t TO u", Some("other")));
        assert!(grant("GRANT SELECT ON `a%`.* TO u", Some("other")));
        for sql in [
            "SELECT * FROM users",
            "INSERT INTO users (name, role) VALUES ('a', 'admin'); SELECT LAST_INSERT_ID()",
            "UPDATE users SET password = 'x' WHERE id = 1",
            "SET NAMES utf8mb4; SET ROLE NONE",
            "CREATE TABLE grants (id INT)",
            "SET STATEMENT max_statement_time = 5 FOR SELECT * FROM users",
            // What any login may send: its own password and default role, texts that say
            // `mysql` or a privilege statement's words elsewhere than as the statement.
            "SET PASSWORD = PASSWORD('p')",
            "SET PASSWORD FOR u = PASSWORD('p')",
            "SET DEFAULT ROLE NONE",
            "CREATE USER x IDENTIFIED BY 'p'",
            "INSERT INTO notes VALUES (1, 'moving off MySQL: revoke the grant, drop the user')",
            "UPDATE notes SET note = 'mysql.user', `mysql` = 1 WHERE id = 1",
            "CREATE OR REPLACE VIEW v AS SELECT mysql.note FROM notes AS mysql",
            "SELECT /*!10000 'grant', 'user' */ 1",
            "SELECT /*+ MAX_EXECUTION_TIME(5) */ user FROM t",
            "DELETE FROM notes WHERE body = 'GRANT ALL ON *.* TO u'",
        ] {
            assert!(!changes(sql), "{sql}");
        }
    }
}
