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
mod tests;
