//! What a session's statements may have done to its state, read from their words.
//!
//! The words are only a hint, never the truth: the default database, the account, the
//! character sets and the sql_mode come from the server itself (the probe, [`super::probe`]).
//! What the words decide is when to ask the server again (`stale`) and when to stop trusting
//! the session altogether (`unfollowed`): a statement whose effect on the session freshet
//! cannot follow makes every cached read of the session relayed until COM_RESET_CONNECTION
//! or a new session. Those statements are: executable comments (`/*! */`, `/*M! */`), which
//! the server runs and the tokenizer does not read; EXECUTE IMMEDIATE, PREPARE and EXECUTE
//! of SQL text; CALL (a procedure may change anything); CREATE TEMPORARY TABLE (it shadows a
//! cached table for this session only); any SET of a variable neither known to be harmless
//! nor read by the probe (roles, optimizer settings, ...); a compound statement among
//! several in one text. A SET of what the probe reads (character sets, sql_mode,
//! sql_select_limit, time_zone, div_precision_increment, sql_auto_is_null) makes the session
//! `stale`: the server is asked again before its next cached read.
//!
//! `locked` records LOCK TABLES until UNLOCK TABLES: the server then answers a read of a
//! table the session did not lock with an error, so its cached reads are relayed.
//!
//! `unlogged` records that the session may have turned its binlogging off: which texts may,
//! and why a refused one is taken back, is [`super::binlogging`]'s.
//!
//! Does not own: where the tokenizer may read a text otherwise than the server under the
//! session's settings ([`super::misreading`]), nor the split of a text into statements
//! ([`super::statements`]).

use super::binlogging::{PREPARED_UNLOGGING, may_turn_binlogging_off, text_unlogs, turns_binlogging_off, unlogs, value_is};
use super::glance::{Glance, first_word, opens_executable_comment};
use super::misreading::{MISREAD_CHARSET, follows_charset, misread_collation, reads_as_default_mode};
use super::statements::{Statements, runs_statements, runs_statements_glanced};
use crate::matching::lexer::{Lexer, Token, TokenKind};

/// What a session's own statements say about it.
#[derive(Debug, Clone, Default)]
pub struct SessionState {
    /// The user name the client logged in with (for logs; the server's identity of the
    /// session is the probe's).
    pub user: String,
    /// A statement freshet cannot follow ran: relay cached reads until the session is reset.
    pub unfollowed: bool,
    /// The server's view of the session (database, account, character sets) may have
    /// changed: ask it again before the next cached read.
    pub stale: bool,
    /// Writes of this session may bypass the binlog.
    pub unlogged: bool,
    /// A statement chose its own GTID sequence number (`SET STATEMENT gtid_seq_no = n FOR`),
    /// which may be lower than the domain's last: read-your-writes cannot wait for it by
    /// number (taken by the session when it notes the write).
    pub chose_gtid: bool,
    /// The statement of the text last observed (counted from 0, empty ones not counted) at
    /// which `unlogged` was set: if the server refused it, the statements from it on did not
    /// run. Set by [`SessionState::observe`]; the session clears it before each command.
    pub unlogged_at: Option<usize>,
    /// Names of statements PREPAREd (SQL PREPARE) from a text that may turn binlogging off:
    /// an EXECUTE of one does. At most [`PREPARED_UNLOGGING`]. With each, whether the text
    /// runs other statements ([`runs_statements`]).
    prepared_unlogging: Vec<(Box<[u8]>, bool)>,
    /// The names added to `prepared_unlogging` by the command in progress, with the statement
    /// of its text that added each: one the server refused is taken back
    /// ([`SessionState::refused`]).
    prepared_now: Vec<(usize, Box<[u8]>)>,
    /// The statement of the text being observed (counted as `unlogged_at`).
    statement_at: usize,
    /// The next transaction's characteristics were set (`SET TRANSACTION ...`, `SET
    /// @@tx_isolation` without a scope): cached reads are relayed until a statement that
    /// starts a transaction uses them up on the server.
    pub next_transaction: bool,
    /// The session holds LOCK TABLES: the server answers a read of any table it did not lock
    /// with an error, so its cached reads are relayed until UNLOCK TABLES.
    pub locked: bool,
    /// The connection's character set (the handshake's, or a COM_CHANGE_USER's) is one the
    /// tokenizer misreads ([`misread_collation`]): a reset goes back to it, so the session is
    /// not followed after one either.
    misread_connection: bool,
    /// The server has told (the probe) how the session reads text since that last could
    /// change unseen: a new session, COM_CHANGE_USER or COM_RESET_CONNECTION may start in a
    /// character set or sql_mode its handshake did not name (an `init_connect`, the server's
    /// defaults), so until the first probe a text that reads otherwise in one
    /// ([`reads_otherwise_unseen`](super::misreading::reads_otherwise_unseen)) is asked about
    /// first (`Session::confirm_reading`). After it every change of that reading is a
    /// statement the tracker reads (or does not follow).
    pub confirmed: bool,
    /// Counts what may have changed the session's default database (USE, COM_INIT_DB, a
    /// reset): a prepared statement's tables are the prepare's database's
    /// (`PreparedRoute::in_cache_database`).
    pub database_epoch: u64,
    /// Counts what makes the server read the session's database privileges again: USE,
    /// COM_INIT_DB, dropping its database, and what may run or load a stored routine of
    /// another database (the server switches to its database and back) or run SET ROLE (a
    /// routine may): a call, several statements, what opens views (SHOW,
    /// information_schema: [`may_open_views`](super::glance::may_open_views)), a statement not followed. Not a reset, which keeps them (and the account).
    pub rights_epoch: u64,
    /// Counts what surely made the server read the session's database privileges again: a
    /// USE alone in its text, or a COM_INIT_DB, that the server answered OK (each also counts
    /// in `rights_epoch`; `Session::dispatch`). A refused one switches and reads nothing.
    pub rights_read_epoch: u64,
    /// Counts what may have changed how the server reads a statement's text (a SET of the
    /// sql_mode, character sets or collation, a statement not followed, a reset): a prepared
    /// statement's text was read under its prepare's (`PreparedRoute::text_reading`).
    pub settings_epoch: u64,
}

impl SessionState {
    pub fn new(user: String) -> SessionState {
        SessionState { user, ..SessionState::default() }
    }

    /// After COM_RESET_CONNECTION: session variables are back to their defaults, temporary
    /// tables and prepared statements gone.
    pub fn reset(&mut self) {
        let misread = self.misread_connection;
        *self = SessionState {
            user: std::mem::take(&mut self.user),
            stale: true,
            unfollowed: misread,
            misread_connection: misread,
            database_epoch: self.database_epoch + 1,
            rights_epoch: self.rights_epoch,
            rights_read_epoch: self.rights_read_epoch,
            settings_epoch: self.settings_epoch + 1,
            ..SessionState::default()
        };
    }

    /// The session started (a new state), or changed user (right after [`reset`](Self::reset)),
    /// with collation `id`: a new session on the server, followed unless that character set is
    /// misread.
    pub fn client_collation(&mut self, id: u16) {
        self.misread_connection = misread_collation(id);
        self.unfollowed = self.misread_connection;
    }

    /// Before each command: what the last one noted for [`SessionState::refused`] is done.
    pub fn begin_command(&mut self) {
        self.unlogged_at = None;
        self.prepared_now.clear();
    }

    /// After a command: what its statements noted is taken back for those that did not run
    /// (`ran(statement)` false: the server refused it or one before it), as for `unlogged`.
    pub fn refused(&mut self, ran: impl Fn(usize) -> bool) {
        for (at, name) in std::mem::take(&mut self.prepared_now) {
            if !ran(at) {
                self.forget_prepared(&name);
            }
        }
    }

    /// Whether `sql` runs other statements ([`runs_statements`]), as far as this session
    /// knows: `EXECUTE name` of a statement prepared from a text that may turn binlogging
    /// off runs that text, which was read at its PREPARE (so its refusal can be trusted).
    pub fn runs_statements(&self, g: &Glance<'_>) -> bool {
        let sql = g.sql;
        if !g.semicolon && g.starts(b"execute") {
            let mut tokens = Lexer::new(sql).skip(1);
            if let (Some(name), None) = (tokens.next(), tokens.next()) {
                let name = statement_name(sql, &name);
                if let Some((_, runs)) = self.prepared_unlogging.iter().find(|(n, _)| *n == name) {
                    return *runs;
                }
            }
        }
        runs_statements_glanced(g)
    }

    /// Notes what a statement that is not a cacheable SELECT may do to the session.
    pub fn observe(&mut self, sql: &[u8]) {
        self.statement_at = 0;
        let was = self.unlogged;
        self.observe_text(sql, was);
        if !was && self.unlogged {
            self.unlogged_at.get_or_insert(0);
        }
    }

    fn observe_text(&mut self, sql: &[u8], unlogged_before: bool) {
        // Most statements (INSERT, UPDATE, SELECT ...) change nothing followed here: decided
        // by their first word unless the text may hold several statements or SQL the server
        // runs from a comment.
        // Compared in place: this runs for every relayed statement.
        let first = first_word(sql);
        if !first.is_some_and(interesting) && memchr::memchr(b';', sql).is_none() && !has_executable_comment(sql) {
            if first.is_some_and(starts_transaction) {
                self.next_transaction = false;
            }
            return;
        }
        if Lexer::new(sql).any(|t| t.kind == TokenKind::ExecComment && !t.text(sql).starts_with(b"/*+")) {
            self.unfollowed("an executable comment", sql);
            return;
        }
        // One statement at a time, holding only the tokens reading it needs: a text of
        // millions of short statements must not cost a vector of all their tokens.
        let mut kept = Vec::new();
        let several = {
            let mut count = Statements::new(sql);
            count.next(|_| 0, &mut kept, |_| ()).is_some() && count.next(|_| 0, &mut kept, |_| ()).is_some()
        };
        let mut statements = Statements::new(sql);
        let keep = |t: &Token| if interesting(t.text(sql)) { MAX_STATEMENT_TOKENS + 1 } else { 3 };
        let mut at = 0;
        while let Some(statement) = statements.next(keep, &mut kept, |_| ()) {
            self.statement_at = at;
            if kept.len() > MAX_STATEMENT_TOKENS {
                self.unfollowed("a statement too long to follow", &sql[statement.range]);
            } else if !several {
                self.statement(sql, &kept);
            } else {
                // Several: each read by its first word. A compound statement (`BEGIN NOT
                // ATOMIC`, `IF`, a label), whose body may set anything and is split here at
                // its own semicolons, and any statement not known to leave the session alone,
                // are not followed.
                let first = word(sql, &kept[0]);
                if starts_transaction(first.as_bytes()) {
                    self.next_transaction = false;
                }
                match first.as_str() {
                    // An UNLOCK after a statement that fails does not run: the locks stay
                    // (until an UNLOCK alone, or a reset).
                    "unlock" => {}
                    w if interesting(w.as_bytes()) => self.statement(sql, &kept),
                    "begin" if statement.tokens == 1 || statement.tokens == 2 && word(sql, &kept[1]) == "work" => {}
                    w if PLAIN.contains(&w) => {}
                    _ => self.unfollowed("a compound statement, or one freshet does not follow, among several statements", sql),
                }
            }
            if !unlogged_before && self.unlogged {
                self.unlogged_at.get_or_insert(at);
            }
            if self.unfollowed {
                return;
            }
            at += 1;
        }
    }

    /// A SET of what the server reads a statement's text under (sql_mode, character sets,
    /// collation): asked again, and statements prepared before it were read otherwise
    /// (`settings_epoch`). Stored code cannot change these for good: a routine runs under its
    /// own and the server gives the caller's back when it returns.
    fn reading_may_change(&mut self) {
        self.stale = true;
        self.settings_epoch += 1;
    }

    /// USE, COM_INIT_DB or a dropped database: the server is asked again which database the
    /// session is in, and it read the session's database privileges again.
    pub fn database_may_change(&mut self) {
        self.stale = true;
        self.database_epoch += 1;
        self.rights_epoch += 1;
    }

    /// What may run or load stored code: the server may read the session's privileges again
    /// (`rights_epoch`), and the code may have set anything the probe reads.
    pub fn rights_may_be_read_again(&mut self) {
        self.stale = true;
        self.rights_epoch += 1;
    }

    /// Notes what one statement (its tokens in `sql`) may do to the session.
    fn statement(&mut self, sql: &[u8], tokens: &[Token]) {
        match tokens.first().map(|t| word(sql, t)).as_deref() {
            Some("use") => self.database_may_change(),
            // Dropping (or replacing) the session's default database leaves it with none: the
            // server is asked again which it is.
            Some("drop" | "create") if drops_a_database(sql, tokens) => self.database_may_change(),
            Some("set") => self.observe_set(sql, tokens),
            Some("prepare") => self.sql_prepare(sql, tokens),
            Some("execute") => self.sql_execute(sql, tokens),
            Some("deallocate" | "drop") if tokens.get(1).is_some_and(|t| word(sql, t) == "prepare") => {
                if let Some(name) = tokens.get(2) {
                    self.forget_prepared(&statement_name(sql, name));
                }
            }
            Some("call") => self.unfollowed("SQL run from a procedure", sql),
            Some("create") if tokens.iter().take(4).any(|t| word(sql, t) == "temporary") => self.unfollowed("a temporary table", sql),
            Some(w @ ("lock" | "unlock")) if tokens.get(1).is_some_and(|t| matches!(word(sql, t).as_str(), "table" | "tables")) => {
                self.locked = w == "lock";
            }
            // `FLUSH TABLES t, ... WITH READ LOCK` and `... FOR EXPORT` lock the tables named as
            // LOCK TABLES does: the server refuses reads of any other until UNLOCK TABLES.
            Some("flush") if locks_tables(sql, tokens) => self.locked = true,
            // The session's status counters start from 0 again, the count of temporary tables
            // it made among them, while the tables stay: a table made by stored code is no
            // longer told (`Session::made_no_temporary_tables`).
            Some("flush") if tokens.iter().any(|t| word(sql, t) == "status") => self.counters_reset(),
            _ => {}
        }
    }

    /// FLUSH STATUS, COM_REFRESH with its status bit: see [`Self::statement`].
    pub fn counters_reset(&mut self) {
        self.not_followed("a reset of the session's status counters, which tell the temporary tables it made");
    }

    pub(super) fn unfollowed(&mut self, why: &str, sql: &[u8]) {
        self.not_followed(why);
        // The text may have turned binlogging off.
        if may_turn_binlogging_off(sql, 0) {
            self.unlogged = true;
        }
    }

    fn not_followed(&mut self, why: &str) {
        if !self.unfollowed {
            tracing::debug!(reason = why, "a statement freshet cannot follow; the session's cached reads are relayed until it is reset");
        }
        self.unfollowed = true;
        // It may have set anything, a role (which the server reads the session's privileges
        // again for, and keeps across a reset) among them.
        self.settings_epoch += 1;
        self.rights_epoch += 1;
    }

    /// `PREPARE name FROM text`: the text runs, and may turn binlogging off, at each EXECUTE.
    /// The text is read as the tracker reads a statement (a SET of the variables, not any
    /// mention of them); one from a user variable is not read (as a procedure's body is not).
    fn sql_prepare(&mut self, sql: &[u8], tokens: &[Token]) {
        self.not_followed("SQL run from text");
        let Some(name) = tokens.get(1).map(|t| statement_name(sql, t)) else { return };
        // The server drops a statement of the name even when the new one fails.
        self.forget_prepared(&name);
        let from = tokens.get(2).is_some_and(|t| word(sql, t) == "from");
        let text = tokens.get(3).filter(|t| from && is_string(t.kind)).map(|t| unquoted(t.text(sql)));
        if text.as_deref().is_some_and(text_unlogs) {
            if self.prepared_unlogging.len() < PREPARED_UNLOGGING {
                self.prepared_now.push((self.statement_at, name.clone()));
                self.prepared_unlogging.push((name, text.as_deref().is_some_and(runs_statements)));
            } else {
                self.unlogged = true;
            }
        }
    }

    /// `EXECUTE name` of a text that may turn binlogging off, `EXECUTE IMMEDIATE text`.
    fn sql_execute(&mut self, sql: &[u8], tokens: &[Token]) {
        self.not_followed("SQL run from text");
        let Some(second) = tokens.get(1) else { return };
        let unlogs = if word(sql, second) == "immediate" {
            tokens.get(2).filter(|t| is_string(t.kind)).is_some_and(|t| text_unlogs(&unquoted(t.text(sql))))
        } else {
            let name = statement_name(sql, second);
            self.prepared_unlogging.iter().any(|(n, _)| *n == name)
        };
        self.unlogged |= unlogs;
    }

    fn forget_prepared(&mut self, name: &[u8]) {
        self.prepared_unlogging.retain(|(n, _)| **n != *name);
    }

    fn observe_set(&mut self, sql: &[u8], tokens: &[Token]) {
        let text = |i: usize| tokens.get(i).map(|t| String::from_utf8_lossy(t.text(sql)).to_ascii_lowercase()).unwrap_or_default();
        let first = text(1);
        // Where the assignments start: after SET, or after the character set's part (then at
        // no target until the loop below meets a top-level comma).
        let (mut start, mut expect_target) = (1, true);
        if matches!(first.as_str(), "names" | "character" | "charset") {
            self.reading_may_change();
            // `SET NAMES x`, `SET CHARSET x`, `SET CHARACTER SET x`: x is the client's.
            let at = if first == "character" { 3 } else { 2 };
            if !follows_charset(sql, tokens, at) {
                self.unfollowed(MISREAD_CHARSET, sql);
            }
            // `SET NAMES x, max_join_size = 1`: what follows its first top-level comma is read
            // as any assignments are.
            (start, expect_target) = (at, false);
        }
        // `SET PASSWORD [FOR account] = ...` and `SET DEFAULT ROLE ...` assign no variable: the
        // one changes a password (and ends an expired one's sandbox), the other which role a
        // login starts with. Neither changes what this session reads; it is asked again all the
        // same. What follows their first top-level comma is read as any assignments are (`SET
        // PASSWORD = PASSWORD('x'), sql_mode = 'ANSI'` sets the mode).
        if first == "password" || (first == "default" && text(2) == "role") {
            self.stale = true;
            (start, expect_target) = (2, false);
        }
        // MariaDB's `SET STATEMENT assignments FOR statement`: the assignments hold for that
        // statement only, which is read as one of its own.
        if first == "statement" {
            let mut depth = 0i32;
            for (i, t) in tokens.iter().enumerate().skip(2) {
                if t.is_symbol(sql, b"(") {
                    depth += 1;
                } else if t.is_symbol(sql, b")") {
                    depth -= 1;
                } else if depth == 0
                    && t.kind == TokenKind::Word
                    && t.text(sql).eq_ignore_ascii_case(b"for")
                    && let Some(statement) = tokens.get(i + 1..).filter(|rest| !rest.is_empty())
                {
                    // The statement's binlogging may be off: its write is never in the binlog.
                    // Taken for the session's (as a SET of them would be): a prepared
                    // statement's every execute evicts too.
                    self.unlogged |= unlogs(sql, &tokens[2..i]);
                    self.chose_gtid |= (2..i).any(|k| assigned_variable(sql, tokens, k).0 == "gtid_seq_no");
                    self.statement(sql, statement);
                    return;
                }
            }
            self.unfollowed("SET STATEMENT without a statement freshet can read", sql);
            return;
        }
        // Assignments: targets are the words after SET and after each top-level comma.
        let mut depth = 0i32;
        let mut i = start;
        // The target's scope was said (`SESSION`, `LOCAL`, `@@session.`; GLOBAL is not
        // followed at all): without one,
        // `SET TRANSACTION` and `@@tx_isolation` are the next transaction's only.
        let mut scoped = false;
        while i < tokens.len() {
            let t = tokens[i];
            let s = text(i);
            match t.kind {
                TokenKind::Symbol if s == "(" => depth += 1,
                TokenKind::Symbol if s == ")" => depth -= 1,
                TokenKind::Symbol if s == "," && depth == 0 => {
                    expect_target = true;
                    scoped = false;
                }
                TokenKind::UserVariable if expect_target => expect_target = false,
                TokenKind::Word | TokenKind::SystemVariable | TokenKind::QuotedIdent if expect_target => {
                    let (name, named_by) = assigned_variable(sql, tokens, i);
                    if matches!(name.as_str(), "session" | "local") && t.kind == TokenKind::Word {
                        scoped = true;
                        i += 1;
                        continue;
                    }
                    let at_at = s.starts_with("@@");
                    scoped |= ["@@session.", "@@local.", "@@global."].iter().any(|p| s.starts_with(p));
                    // `SET TRANSACTION ...` and `SET @@tx_isolation = ...` (no scope; `SET
                    // tx_isolation` is the session's): the next transaction's, which its first
                    // statement uses up on the server.
                    let characteristic =
                        matches!(name.as_str(), "tx_isolation" | "transaction_isolation" | "tx_read_only" | "transaction_read_only");
                    if !scoped && ((name == "transaction" && t.kind == TokenKind::Word) || (at_at && characteristic)) {
                        self.next_transaction = true;
                    }
                    expect_target = false;
                    // The value's first token, after `=`, and whether it is all of the value.
                    let value = text(i + named_by + 1);
                    let value_alone = tokens.get(i + named_by + 2).is_none_or(|t| t.is_symbol(sql, b","));
                    i += named_by - 1;
                    match name.as_str() {
                        "character_set_client" => {
                            self.reading_may_change();
                            if !(tokens.get(i + 1).is_some_and(|t| t.is_symbol(sql, b"=") || t.is_symbol(sql, b":="))
                                && follows_charset(sql, tokens, i + 2))
                            {
                                self.unfollowed(MISREAD_CHARSET, sql);
                            }
                        }
                        "character_set_results" | "character_set_connection" | "collation_connection" => self.reading_may_change(),
                        // A value the server computes (`1 - 1`) may be anything.
                        "sql_log_bin" | "binlog_format" => self.unlogged |= !value_alone || turns_binlogging_off(&name, &value),
                        // READ UNCOMMITTED reads other sessions' uncommitted rows, which no view
                        // holds; one set for the next transaction alone is not the probe's to
                        // see. Any other level reads committed rows outside a transaction.
                        "transaction" if tokens.iter().any(|t| word(sql, t) == "uncommitted") => {
                            self.unfollowed("READ UNCOMMITTED isolation", sql)
                        }
                        "transaction" | "transaction_isolation" | "tx_isolation" => self.stale = true,
                        // On, the server answers every SELECT a view answers; off, it may
                        // refuse a large one (max_join_size).
                        "sql_big_selects" if value_is(&value, &["1", "on", "true"]) => {}
                        // A mode that changes how text is read: this tracker reads the
                        // session's statements in the default mode, so from here on it may
                        // misread them (a SET hidden in what looks like a string).
                        "sql_mode" if !reads_as_default_mode(sql, &tokens[i + 1..]) => {
                            self.unfollowed("a sql_mode that may change how text is read", sql)
                        }
                        // Read by the probe: asked again, and the server's answer decides
                        // which reads are served (`route::Reading`, `Identity::unfit`).
                        "sql_mode" => self.reading_may_change(),
                        "sql_select_limit" | "time_zone" | "div_precision_increment" | "sql_auto_is_null" | "wait_timeout" => {
                            self.stale = true
                        }
                        n if HARMLESS.contains(&n) => {}
                        _ => self.unfollowed("a setting that may change results", sql),
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}

/// `DROP DATABASE|SCHEMA ...` or `CREATE OR REPLACE DATABASE|SCHEMA ...`.
fn drops_a_database(sql: &[u8], tokens: &[Token]) -> bool {
    let word = |i: usize| tokens.get(i).map(|t| word(sql, t)).unwrap_or_default();
    let object = |i: usize| matches!(word(i).as_str(), "database" | "schema");
    (word(0) == "drop" && object(1)) || (word(0) == "create" && word(1) == "or" && word(2) == "replace" && object(3))
}

/// Whether a statement of this first word surely uses up what `SET TRANSACTION` set for the
/// next transaction: one that starts or ends a transaction explicitly. Others use it up only if
/// they touch a transactional table and succeed (a SELECT of an InnoDB table does, `SELECT 1`,
/// a MyISAM table or a refused write does not), which the text does not tell; a relayed read
/// of a cached table does (`Session::learn_from`).
fn starts_transaction(word: &[u8]) -> bool {
    [&b"start"[..], b"begin", b"commit", b"rollback"].iter().any(|k| word.eq_ignore_ascii_case(k))
}

/// First words of statements that may change what the session tracker follows.
fn interesting(word: &[u8]) -> bool {
    [&b"set"[..], b"use", b"execute", b"prepare", b"call", b"create", b"deallocate", b"drop", b"lock", b"unlock", b"flush"]
        .iter()
        .any(|k| word.eq_ignore_ascii_case(k))
}

/// The most tokens of one statement the tracker reads; a longer one (a SET of a list of a
/// million values) is not followed.
const MAX_STATEMENT_TOKENS: usize = 1 << 16;

pub(super) fn is_string(kind: TokenKind) -> bool {
    matches!(kind, TokenKind::SingleQuoted | TokenKind::DoubleQuoted | TokenKind::NationalString)
}

/// A string token's value, under the default modes: quotes off, doubled quotes and
/// backslash escapes taken (`\n` kept as `n`: only the words matter here).
pub(super) fn unquoted(token: &[u8]) -> Vec<u8> {
    let token = if token.first().is_some_and(|c| c.eq_ignore_ascii_case(&b'n')) { &token[1..] } else { token };
    let Some((&quote, rest)) = token.split_first() else { return Vec::new() };
    let body = rest.strip_suffix(&[quote]).unwrap_or(rest);
    let mut out = Vec::with_capacity(body.len());
    let mut bytes = body.iter().copied();
    while let Some(b) = bytes.next() {
        match b {
            b'\\' => out.extend(bytes.next()),
            q if q == quote => {
                out.push(q);
                bytes.next();
            }
            other => out.push(other),
        }
    }
    out
}

/// A prepared statement's name as the server compares them (case-insensitively).
fn statement_name(sql: &[u8], token: &Token) -> Box<[u8]> {
    let text = token.text(sql);
    let text = if token.kind == TokenKind::QuotedIdent { text.get(1..text.len() - 1).unwrap_or_default() } else { text };
    text.to_ascii_lowercase().into_boxed_slice()
}

/// The system variable an assignment's target at `tokens[i]` names, in lower case and without
/// `@@`, its `session.` or `local.` scope or backticks (`sql_mode`, `` `sql_mode` ``,
/// `` @@session.`sql_mode` `` and `` @@`sql_mode` `` are one variable to the server), and how
/// many tokens name it (the tokenizer ends `@@session` at a backtick, and the dot is a token of
/// its own).
pub(super) fn assigned_variable(sql: &[u8], tokens: &[Token], i: usize) -> (String, usize) {
    let piece = |t: &Token| {
        let text = t.text(sql);
        let text = if t.kind == TokenKind::QuotedIdent { unquoted(text) } else { text.to_vec() };
        String::from_utf8_lossy(&text).to_ascii_lowercase()
    };
    let Some(first) = tokens.get(i) else { return (String::new(), 1) };
    let mut name = piece(first);
    let mut named_by = 1;
    if first.kind == TokenKind::SystemVariable {
        let quoted = |k: usize| tokens.get(k).filter(|t| t.kind == TokenKind::QuotedIdent);
        if name == "@@"
            && let Some(rest) = quoted(i + 1)
        {
            name.push_str(&piece(rest));
            named_by = 2;
        } else if tokens.get(i + 1).is_some_and(|t| t.is_symbol(sql, b"."))
            && let Some(rest) = quoted(i + 2)
        {
            name = format!("{name}.{}", piece(rest));
            named_by = 3;
        }
    }
    let name = name.trim_start_matches("@@").trim_start_matches("session.").trim_start_matches("local.").to_string();
    (name, named_by)
}

/// `FLUSH [NO_WRITE_TO_BINLOG | LOCAL] TABLE[S] name[, ...] WITH READ LOCK | FOR EXPORT`: the
/// session holds those tables' locks (not the global read lock of `FLUSH TABLES WITH READ
/// LOCK`, under which reads go on).
fn locks_tables(sql: &[u8], tokens: &[Token]) -> bool {
    let words: Vec<String> = tokens.iter().map(|t| word(sql, t)).collect();
    let Some(at) = words.iter().position(|w| w == "table" || w == "tables") else { return false };
    let named = words.get(at + 1).is_some_and(|w| w != "with" && w != "for");
    let locking = words.windows(2).any(|w| w == ["read", "lock"] || w == ["for", "export"]);
    named && locking
}

/// `/*!` or `/*M!` anywhere (a cheap scan before tokenizing; the lexer decides).
fn has_executable_comment(sql: &[u8]) -> bool {
    // Most texts have no `/` at all: one memchr instead of searching for the pair.
    memchr::memchr(b'/', sql).is_some() && opens_executable_comment(sql)
}

/// Session variables that cannot change what a cached SELECT returns or how it is encoded.
const HARMLESS: &[&str] = &[
    "autocommit",
    "transaction_read_only",
    "tx_read_only",
    // A session's own wait_timeout is read by the probe (above); its interactive_timeout
    // is read only at login.
    "interactive_timeout",
    "net_read_timeout",
    "net_write_timeout",
    "innodb_lock_wait_timeout",
    "lock_wait_timeout",
    "max_statement_time",
    "max_execution_time",
    "session_track_schema",
    "session_track_state_change",
    "session_track_system_variables",
    "session_track_transaction_info",
    "profiling",
    "sql_notes",
    "sql_warnings",
    "foreign_key_checks",
    "unique_checks",
    // Writes only.
    "sql_safe_updates",
    // GROUP_CONCAT's limit: no view computes GROUP_CONCAT (the compiler refuses it).
    "group_concat_max_len",
];

/// First words of statements that leave what the session reads alone (DML, transactions,
/// DDL, administration), read among several statements in one text.
const PLAIN: &[&str] = &[
    "select",
    "insert",
    "update",
    "delete",
    "replace",
    "with",
    "values",
    "table",
    "do",
    "commit",
    "rollback",
    "start",
    "savepoint",
    "release",
    "show",
    "explain",
    "describe",
    "desc",
    "analyze",
    "optimize",
    "check",
    "checksum",
    "truncate",
    "alter",
    "drop",
    "rename",
    "grant",
    "revoke",
    "xa",
    "flush",
    "kill",
];

/// `token`'s text in lower case if it is a word (or a quoted name), else empty.
fn word(sql: &[u8], token: &Token) -> String {
    match token.kind {
        TokenKind::Word | TokenKind::QuotedIdent => {
            String::from_utf8_lossy(token.text(sql)).to_ascii_lowercase().trim_matches('`').to_string()
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(statements: &[&str]) -> SessionState {
        let mut s = SessionState::default();
        for sql in statements {
            s.observe(sql.as_bytes());
        }
        s
    }

    /// What applications send on connect, and no cached read depends on: MediaWiki's
    /// `group_concat_max_len` (no view computes GROUP_CONCAT), WordPress's `SQL_BIG_SELECTS = 1`
    /// (the server answers more, never otherwise), `sql_safe_updates` (writes only).
    #[test]
    fn what_applications_set_on_connect_keeps_the_session_cacheable() {
        let s = after(&["SET group_concat_max_len = 262144", "SET SESSION SQL_BIG_SELECTS=1", "SET sql_safe_updates = 1"]);
        assert!(!s.unfollowed && !s.stale, "{s:?}");
        assert!(after(&["SET SQL_BIG_SELECTS = 0"]).unfollowed, "the server may refuse what a view answers");
    }

    /// `SET NAMES x, <assignments>` and `SET CHARACTER SET x, ...`: the assignments after the
    /// character set are read as any others (an audit: `SET NAMES utf8mb4, max_join_size = 1`
    /// and `..., sql_mode = 'ANSI_QUOTES'` went unseen, and cached reads answered where the
    /// server refused, or read a base table a temporary one shadowed).
    #[test]
    fn assignments_after_set_names_are_read() {
        for sql in [
            "SET NAMES utf8mb4, max_join_size = 1",
            "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci, sql_mode = 'ANSI_QUOTES'",
            "SET CHARACTER SET utf8mb4, sql_big_selects = 0",
            "set charset utf8mb4, @@session.optimizer_switch = 'index_merge=off'",
        ] {
            assert!(after(&[sql]).unfollowed, "{sql}");
        }
        assert!(after(&["SET NAMES utf8mb4, sql_log_bin = 0"]).unlogged);
        let s = after(&["SET NAMES utf8mb4, @a = 1"]);
        assert!(s.stale && !s.unfollowed, "{s:?}");
    }

    /// `SET PASSWORD` and `SET DEFAULT ROLE` change no setting of the session (an audit: every
    /// cached read after them was relayed for the session's life, and an expired password's
    /// session must run SET PASSWORD); what follows them after a comma is read as any
    /// assignments are.
    #[test]
    fn set_password_and_default_role_leave_the_session_followed() {
        for sql in
            ["SET PASSWORD = PASSWORD('x')", "set password for 'u'@'%' = 'hash'", "SET DEFAULT ROLE r", "SET DEFAULT ROLE NONE FOR u@'%'"]
        {
            let s = after(&[sql]);
            assert!(s.stale && !s.unfollowed, "{sql}: {s:?}");
        }
        for sql in ["SET PASSWORD = PASSWORD('x'), sql_mode = 'ANSI'", "SET DEFAULT ROLE NONE, max_join_size = 1"] {
            assert!(after(&[sql]).unfollowed, "{sql}");
        }
        assert!(after(&["SET PASSWORD = PASSWORD('x'), sql_log_bin = 0"]).unlogged);
    }

    /// A transaction's characteristics set for the next transaction only (`SET TRANSACTION`,
    /// `SET @@tx_isolation` without a scope) are used up by its next statement that starts one:
    /// a cached read in between is relayed so that the server's SELECT uses them up (an audit:
    /// `SET TRANSACTION READ ONLY`, a cached read, then an UPDATE refused with 1792; `SET
    /// @@tx_isolation = 'READ-UNCOMMITTED'` unseen by the probe, which reads the session's).
    #[test]
    fn next_transaction_settings_are_used_up_by_the_server() {
        for sql in [
            "SET TRANSACTION READ ONLY",
            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "SET @@tx_isolation = 'READ-UNCOMMITTED'",
            "SET @@`tx_read_only` = 1",
            "SET @@transaction_isolation = 'READ-COMMITTED'",
        ] {
            assert!(after(&[sql]).next_transaction, "{sql}");
            assert!(after(&[sql, "SHOW WARNINGS"]).next_transaction, "{sql}, then SHOW");
            // A SELECT may touch no transactional table (`SELECT 1`): the server keeps it then
            // (a second audit). A relayed cached read uses it up (the session's to see).
            assert!(after(&[sql, "SELECT 1"]).next_transaction, "{sql}, then SELECT 1");
            for ends in ["START TRANSACTION", "BEGIN", "COMMIT", "ROLLBACK"] {
                assert!(!after(&[sql, ends]).next_transaction, "{sql}, then {ends}");
            }
        }
        for sql in ["SET SESSION TRANSACTION READ ONLY", "SET @@session.tx_isolation = 'READ-COMMITTED'", "SET tx_read_only = 1"] {
            assert!(!after(&[sql]).next_transaction, "{sql}");
        }
    }

    #[test]
    fn harmless_settings_keep_the_session_cacheable() {
        let s = after(&[
            "SET autocommit = 1",
            "SET SESSION interactive_timeout = 100, @@session.net_read_timeout = 30",
            "SET @x = NOW()",
            "SELECT 1 /*+ hint */",
            "INSERT INTO t VALUES (1)",
        ]);
        assert!(!s.unfollowed && !s.stale && !s.unlogged, "{s:?}");
        // Cacheable, and read again by the probe (a cached read keeps the session alive
        // within half of it).
        let s = after(&["SET SESSION wait_timeout = 100"]);
        assert!(!s.unfollowed && s.stale, "{s:?}");
    }

    /// MariaDB's `SET STATEMENT ... FOR` sets its variables for the one statement after FOR
    /// (MediaWiki sends `SET STATEMENT max_statement_time = N FOR SELECT ...`); the session's
    /// own settings stay as they were. What follows FOR is read as its own statement.
    #[test]
    fn a_setting_for_one_statement_leaves_the_session_alone() {
        let s = after(&[
            "SET STATEMENT max_statement_time = 30 FOR SELECT id FROM t WHERE k = 1",
            "set statement sql_select_limit = 1, optimizer_switch = 'index_merge=off' for select 1",
            "SET STATEMENT max_statement_time = (SELECT 5) FOR UPDATE t SET a = 1",
        ]);
        assert!(!s.unfollowed && !s.stale, "{s:?}");
        assert!(after(&["SET STATEMENT max_statement_time = 1 FOR SET sql_mode = 'ANSI'"]).unfollowed, "what follows FOR is read");
        assert!(after(&["SET STATEMENT max_statement_time = 1 FOR CALL p()"]).unfollowed);
        assert!(after(&["SET STATEMENT max_statement_time = 1"]).unfollowed, "no FOR: not read");
    }

    #[test]
    fn settings_that_change_results_are_unfollowed_until_reset() {
        for sql in [
            "SET a = 1, sql_select_limit = 5",
            "SET GLOBAL sql_mode = ''",
            "SET optimizer_switch = 'index_merge=off'",
            // A mode that changes how text is read: what follows may be misread.
            "SET sql_mode = 'ANSI'",
            "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_BACKSLASH_ESCAPES', time_zone = '+00:00'",
            "SET sql_mode = ansi_quotes",
            "SET sql_mode = @saved",
            "SET sql_mode = (SELECT m FROM modes)",
            // Named in backticks: the same variables to the server.
            "SET `sql_mode` = 'ANSI_QUOTES'",
            "SET @@session.`sql_mode` = 'NO_BACKSLASH_ESCAPES'",
            "SET `optimizer_switch` = 'index_merge=off'",
            "SET ROLE r",
            "/*!40101 SET NAMES latin1 */",
            "SELECT /*M!100000 1, */ 2",
            "EXECUTE IMMEDIATE 'SET NAMES latin1'",
            "PREPARE s FROM 'SET character_set_results = latin1'",
            "EXECUTE s",
            "CALL p()",
            "CREATE TEMPORARY TABLE t (id INT)",
            "create or replace temporary table t (id int)",
        ] {
            let mut s = after(&[sql]);
            assert!(s.unfollowed, "{sql}");
            s.reset();
            assert!(!s.unfollowed && s.stale);
        }
    }

    /// A setting the probe reads (sql_mode, sql_select_limit, time_zone,
    /// div_precision_increment, sql_auto_is_null) is asked of the server again, whatever its
    /// value: the server's answer decides which reads are served. Rails, for one, sets
    /// sql_mode and sql_auto_is_null on every connection.
    #[test]
    fn settings_the_probe_reads_are_asked_again() {
        for sql in [
            "SET @@SESSION.sql_mode = CONCAT(CONCAT(@@sql_mode, ',STRICT_ALL_TABLES'), ',NO_AUTO_VALUE_ON_ZERO'), \
             @@SESSION.sql_auto_is_null = 0, @@SESSION.wait_timeout = 2147483",
            "SET sql_mode = 'STRICT_ALL_TABLES'",
            "SET sql_mode = TRADITIONAL",
            "SET sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_ZERO_DATE')",
            "SET @@time_zone = '+02:00'",
            "SET time_zone = @tz",
            "SET SESSION div_precision_increment = 2",
            "SET sql_select_limit = 5",
            "SET SQL_AUTO_IS_NULL = 1",
            "SELECT 1; SET time_zone = '+00:00'",
            "SET `sql_select_limit` = 1",
            "SET SESSION `sql_mode` = 'EMPTY_STRING_IS_NULL'",
            "SET @@session.`sql_mode` = 'PAD_CHAR_TO_FULL_LENGTH'",
            "SET SESSION `time_zone` = '+02:00'",
            "SET @@session.`sql_select_limit` = 1, @@`time_zone` = '+02:00'",
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
            "SET tx_isolation = 'READ-UNCOMMITTED'",
        ] {
            let s = after(&[sql]);
            assert!(s.stale && !s.unfollowed, "{sql}: {s:?}");
        }
        // A mode the tracker cannot read from the text, or READ UNCOMMITTED for the next
        // transaction alone (which the probe would not see), is not followed.
        for sql in [
            "SET sql_mode = CONCAT('NO_BACK', 'SLASH_ESCAPES')",
            "SET sql_mode = 4",
            "SET sql_mode = 0x414E53495F51554F544553",
            "SET sql_mode = 'ORACLE'",
            "SET sql_mode = @@GLOBAL.sql_mode",
            "SET sql_mode = ANSI_QUOTES",
            "SET sql_mode = @m",
            "SET sql_mode = (SELECT 'ANSI')",
            "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
        ] {
            assert!(after(&[sql]).unfollowed, "{sql}");
        }
    }

    /// Several statements in one text are read one by one: writes with SET in them keep the
    /// session followed; a setting, a compound statement (whose body may set anything) or a
    /// statement freshet does not know among them does not.
    #[test]
    fn several_statements_are_read_one_by_one() {
        for sql in [
            "UPDATE t SET a = 1; UPDATE t SET b = 2 WHERE id = 3",
            "INSERT INTO t VALUES (1); SELECT 1",
            "INSERT INTO t SELECT 1; SET @x = 1; DELETE FROM t",
            "BEGIN; UPDATE t SET a = 1; COMMIT",
            "UPDATE t SET s = 'a;b'; SET autocommit = 1;",
        ] {
            let s = after(&[sql]);
            assert!(!s.unfollowed && !s.stale, "{sql}: {s:?}");
        }
        for sql in [
            "UPDATE t SET a = 1; SET optimizer_switch = 'index_merge=off'",
            "BEGIN NOT ATOMIC SET @@time_zone = '+02:00'; END",
            "lbl: BEGIN NOT ATOMIC SELECT 1; END",
            "IF 1 THEN SET @@sql_select_limit = 1; END IF",
            "SELECT 1; CALL p()",
            "DELETE FROM t; CREATE TEMPORARY TABLE x (i INT)",
            "SELECT 1; EXECUTE s",
            "CREATE PROCEDURE p() BEGIN SET time_zone = '+02:00'; END",
        ] {
            assert!(after(&[sql]).unfollowed, "{sql}");
        }
        for sql in ["SELECT 1; USE other", "UPDATE t SET a = 1; SET time_zone = '+02:00'"] {
            let s = after(&[sql]);
            assert!(s.stale && !s.unfollowed, "{sql}: {s:?}");
        }
        assert!(after(&["UPDATE t SET a = 1; SET sql_log_bin = 0"]).unlogged);
    }

    /// LOCK TABLES limits the session's reads to the tables it locked until UNLOCK TABLES
    /// (or a reset).
    #[test]
    fn lock_tables_is_followed_until_unlock() {
        for sql in ["LOCK TABLES t READ", "lock table t write, u read", "UPDATE t SET a = 1; LOCK TABLES t WRITE"] {
            let mut s = after(&[sql]);
            assert!(s.locked && !s.unfollowed, "{sql}");
            s.observe(b"UNLOCK TABLES");
            assert!(!s.locked, "{sql}");
        }
        let mut s = after(&["LOCK TABLES t READ"]);
        s.reset();
        assert!(!s.locked);
        assert!(!after(&["LOCK INSTANCE FOR BACKUP"]).locked);
    }

    #[test]
    fn character_sets_and_databases_make_the_servers_view_stale() {
        for sql in ["SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci", "SET character_set_results = 'binary'", "USE `other`", "use x"] {
            let s = after(&[sql]);
            assert!(s.stale && !s.unfollowed, "{sql}");
        }
    }

    #[test]
    fn a_client_character_set_the_tokenizer_misreads_is_not_followed() {
        for sql in [
            "SET NAMES gbk",
            "SET NAMES 'big5' COLLATE big5_bin",
            "SET CHARACTER SET sjis",
            "SET CHARSET cp932",
            "SET character_set_client = gbk",
            "SET @@session.character_set_client = 'GB18030'",
            "SET NAMES DEFAULT",
            "SET character_set_client = @cs",
            "SET character_set_client = CONCAT('g', 'bk')",
            "SET NAMES 'g\\bk'",
            "SET NAMES",
        ] {
            let s = after(&[sql]);
            assert!(s.stale && s.unfollowed, "{sql}");
        }
        for sql in [
            "SET NAMES utf8mb4",
            "SET NAMES 'utf8' COLLATE 'utf8_general_ci'",
            "SET CHARACTER SET latin1",
            "SET character_set_client = utf8mb4, character_set_results = gbk",
            "SET NAMES ujis",
        ] {
            let s = after(&[sql]);
            assert!(s.stale && !s.unfollowed, "{sql}");
        }
        let mut s = SessionState::new(String::new());
        s.client_collation(45);
        s.reset();
        assert!(!s.unfollowed, "utf8mb4_general_ci");
        for id in [28, 1, 13, 95, 248, 1052] {
            let mut s = SessionState::new(String::new());
            s.client_collation(id);
            assert!(s.unfollowed, "collation {id}");
            // COM_RESET_CONNECTION goes back to the connection's character set.
            s.reset();
            assert!(s.unfollowed, "collation {id} after a reset");
        }
    }

    #[test]
    fn binlogging_turned_off_is_remembered() {
        for sql in [
            "SET sql_log_bin = 0",
            "SET SESSION sql_log_bin = OFF",
            "SET @@session.binlog_format = 'STATEMENT'",
            "/*!50000 SET sql_log_bin = 0 */",
            "SET binlog_format = @f",
        ] {
            assert!(after(&[sql]).unlogged, "{sql}");
        }
        assert!(after(&["SET STATEMENT sql_log_bin = 0 FOR UPDATE t SET a = 1"]).unlogged);
        assert!(after(&["SET STATEMENT max_statement_time = 5, binlog_format = 'MIXED' FOR DELETE FROM t"]).unlogged);
        assert!(!after(&["SET STATEMENT max_statement_time = 5, sql_log_bin = 1 FOR DELETE FROM t"]).unlogged);
        for sql in ["SET sql_log_bin = 1", "SET binlog_format = 'ROW'", "SET sql_mode = ''"] {
            assert!(!after(&[sql]).unlogged, "{sql}");
        }
        let mut s = after(&["SET sql_log_bin = 0"]);
        s.reset();
        assert!(!s.unlogged);
    }

    /// Texts freshet does not follow count if they name the variables as the server reads
    /// them; a string, a comment or a string in an executable comment does not.
    #[test]
    fn binlogging_is_read_from_words_not_strings() {
        for sql in [
            "/*!50000 SET sql_log_bin = 0 */",
            "SELECT 1; /*M!100100 SET `sql_log_bin` = 0 */",
            "BEGIN NOT ATOMIC SET @@session.binlog_format = 'STATEMENT'; UPDATE t SET a = 1; END",
            "EXECUTE IMMEDIATE 'SET sql_log_bin = 0'",
            "EXECUTE IMMEDIATE 'EXECUTE IMMEDIATE ''SET sql_log_bin = 0'''",
            "SELECT 1 /*!50000 , 1 /* nested */ */, 'sql_log_bin'",
        ] {
            assert!(after(&[sql]).unlogged, "{sql}");
        }
        for sql in [
            "SELECT /*!10000 'sql_log_bin', */ 1",
            "DO /*!10000 \"binlog_format\", */ 9",
            "EXECUTE IMMEDIATE 'SELECT ''sql_log_bin'''",
            "CALL p('sql_log_bin')",
            "BEGIN NOT ATOMIC SELECT 'sql_log_bin'; END",
            "PREPARE s FROM 'DO ''sql_log_bin'''",
        ] {
            assert!(!after(&[sql]).unlogged, "{sql}");
        }
    }

    /// A PREPAREd text turns binlogging off when it is EXECUTEd, until it is deallocated.
    #[test]
    fn a_prepared_text_turns_binlogging_off_when_executed() {
        assert!(!after(&["PREPARE s FROM 'SET sql_log_bin = 0'"]).unlogged);
        assert!(after(&["PREPARE s FROM 'SET sql_log_bin = 0'", "EXECUTE s"]).unlogged);
        assert!(after(&["PREPARE `S` FROM \"SET STATEMENT sql_log_bin = 0 FOR DELETE FROM t\"", "EXECUTE s USING @a"]).unlogged);
        assert!(!after(&["PREPARE s FROM 'SET sql_log_bin = 0'", "EXECUTE t"]).unlogged);
        assert!(!after(&["PREPARE s FROM 'SET sql_log_bin = 0'", "DEALLOCATE PREPARE s", "EXECUTE s"]).unlogged);
        assert!(!after(&["PREPARE s FROM 'SET sql_log_bin = 0'", "PREPARE s FROM 'DO 1'", "EXECUTE s"]).unlogged);
        assert!(!after(&["PREPARE s FROM 'SET sql_log_bin = 0'", "DROP PREPARE s", "EXECUTE s"]).unlogged);
        // Past the bound, preparing one more counts at once.
        let names: Vec<String> = (0..=PREPARED_UNLOGGING).map(|i| format!("PREPARE s{i} FROM 'SET sql_log_bin = 0'")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        assert!(after(&names).unlogged);
    }

    /// Which statement of a text set `unlogged`: a reply that refused it means it did not run.
    #[test]
    fn the_statement_that_turned_binlogging_off_is_known() {
        let at = |sql: &str| after(&[sql]).unlogged_at;
        assert_eq!(at("SET sql_log_bin = 0"), Some(0));
        assert_eq!(at("DO 1; SET sql_log_bin = 0; DO 2"), Some(1));
        assert_eq!(at("DO 1;; DO 2; SET STATEMENT sql_log_bin = 0 FOR DO 3"), Some(2));
        assert_eq!(at("DO 1; /*!1 SET sql_log_bin = 0 */"), Some(0), "an executable comment: the whole text's");
        assert_eq!(at("DO 1"), None);
    }
}
