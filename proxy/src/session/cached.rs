//! The hit path of a session: answer a cacheable read from a view, or say why it is relayed.
//!
//! Per COM_QUERY: classify the text (tokens only) -> verdict for its fingerprint (remembered;
//! the full parse runs once per shape) -> session checks -> lookup parameters from the
//! literals -> the view (waiting at most the fill timeout) -> rows encoded under the column
//! definitions the upstream sent for this shape. COM_STMT_EXECUTE does the same with the
//! verdict taken at prepare time and the bound parameters.
//!
//! The session checks, each a reason to relay (never to answer differently):
//! - a transaction is open or autocommit is off (the server's status flags say so): the read
//!   must see the transaction's own writes and snapshot;
//! - the session changed a setting that can change a result or its encoding (`SET sql_mode`,
//!   `SET time_zone`, ... — any system variable not known to be harmless), or its default
//!   database is not the one the caches read, or its character set is not UTF-8;
//! - replication lag is over `[consistency] max_lag`.
//!
//! The first read of a shape in a session character set is relayed with its column
//! definitions captured from the upstream's reply; later ones are answered.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;
use freshet_dataflow::{CompiledQuery, Row, SqlType, Value};

use crate::cache::matcher::for_each_slot;
use crate::cache::params::{execute_params, literal_value};
use crate::cache::{Cache, ColumnsKey, Engine, RelayReason};
use crate::encode::{binary, text};
use crate::matching::lexer::{Lexer, TokenKind};
use crate::matching::{self, Entry, Literal, ParamMap, Query, SlotUse, Verdict, VerdictTable};
use crate::protocol::cursor::put_lenenc;
use crate::protocol::response::EOF;
use crate::protocol::{Capabilities, StatusFlags};

use super::{Session, SessionError};

/// What a session knows about its own state, for the checks above.
#[derive(Debug, Clone)]
pub struct SessionState {
    pub user: String,
    /// The default database, lower-cased (None: none selected).
    pub database: Option<String>,
    /// Changes with every character-set statement; part of the column-definition key.
    pub charset: u64,
    /// The client's strings and the results are UTF-8.
    pub utf8: bool,
    /// A setting that may change results was changed: relay until the session is reset.
    pub tainted: bool,
    /// The handshake's collation, to reset to.
    pub initial_collation: u8,
}

impl SessionState {
    pub fn new(user: String, database: Option<String>, collation: u8) -> SessionState {
        SessionState {
            user,
            database: database.map(|d| d.to_ascii_lowercase()),
            charset: u64::from(collation),
            utf8: crate::encode::is_utf8(u16::from(collation)),
            tainted: false,
            initial_collation: collation,
        }
    }

    /// After COM_RESET_CONNECTION: session variables are back to their defaults.
    pub fn reset(&mut self) {
        self.charset = u64::from(self.initial_collation);
        self.utf8 = crate::encode::is_utf8(u16::from(self.initial_collation));
        self.tainted = false;
    }

    /// Notes what a statement that is not a cacheable SELECT does to the session.
    pub fn observe(&mut self, sql: &[u8]) {
        // Most statements (INSERT, UPDATE, ...) change nothing followed here: decided by the
        // first word alone unless the text may hold several statements.
        let first = Lexer::new(sql).next().map(|t| t.text(sql));
        let may_change = first.is_some_and(|w| w.eq_ignore_ascii_case(b"set") || w.eq_ignore_ascii_case(b"use"));
        if !may_change && !sql.contains(&b';') {
            return;
        }
        let tokens: Vec<_> = Lexer::new(sql).collect();
        let word = |i: usize| -> Option<String> {
            tokens.get(i).filter(|t| matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent)).map(|t| {
                let s = String::from_utf8_lossy(t.text(sql)).to_ascii_lowercase();
                s.trim_matches('`').to_string()
            })
        };
        let statements = tokens.iter().filter(|t| t.is_symbol(sql, b";")).count();
        match word(0).as_deref() {
            _ if statements > 0 && tokens.iter().any(|t| t.kind == TokenKind::Word && matches!(t.text(sql).to_ascii_lowercase().as_slice(), b"set" | b"use")) => {
                // A multi-statement text with SET or USE somewhere: too much to follow.
                self.tainted = true;
            }
            Some("use") => self.database = word(1),
            Some("set") => self.observe_set(sql, &tokens),
            _ => {}
        }
    }

    fn observe_set(&mut self, sql: &[u8], tokens: &[matching::lexer::Token]) {
        let text = |i: usize| tokens.get(i).map(|t| String::from_utf8_lossy(t.text(sql)).to_ascii_lowercase()).unwrap_or_default();
        let first = text(1);
        if first == "names" || first == "character" || first == "charset" {
            let at = if first == "character" { 3 } else { 2 };
            self.charset_changed(sql, &text(at));
            return;
        }
        // Assignments: targets are the words after SET and after each top-level comma.
        let mut depth = 0i32;
        let mut expect_target = true;
        let mut i = 1;
        while i < tokens.len() {
            let t = tokens[i];
            let s = text(i);
            match t.kind {
                TokenKind::Symbol if s == "(" => depth += 1,
                TokenKind::Symbol if s == ")" => depth -= 1,
                TokenKind::Symbol if s == "," && depth == 0 => expect_target = true,
                TokenKind::UserVariable if expect_target => expect_target = false,
                TokenKind::Word | TokenKind::SystemVariable if expect_target => {
                    let name = s.trim_start_matches("@@").trim_start_matches("session.").trim_start_matches("local.").to_string();
                    if matches!(name.as_str(), "session" | "local" | "global") {
                        i += 1;
                        continue;
                    }
                    expect_target = false;
                    match name.as_str() {
                        "character_set_client" | "character_set_results" | "character_set_connection" | "collation_connection" => {
                            self.charset_changed(sql, &text(i + 2))
                        }
                        n if HARMLESS.contains(&n) => {}
                        _ => self.tainted = true,
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }

    fn charset_changed(&mut self, sql: &[u8], name: &str) {
        let mut h = DefaultHasher::new();
        (self.charset, sql).hash(&mut h);
        self.charset = h.finish();
        self.utf8 = name.trim_matches(['\'', '"', '`']).starts_with("utf8");
    }
}

/// Session variables that cannot change what a cached SELECT returns or how it is encoded.
const HARMLESS: &[&str] = &[
    "autocommit",
    "transaction",
    "transaction_isolation",
    "tx_isolation",
    "transaction_read_only",
    "tx_read_only",
    "wait_timeout",
    "interactive_timeout",
    "net_read_timeout",
    "net_write_timeout",
    "innodb_lock_wait_timeout",
    "lock_wait_timeout",
    "max_statement_time",
    "max_execution_time",
    "sql_log_bin",
    "session_track_schema",
    "session_track_state_change",
    "session_track_system_variables",
    "session_track_transaction_info",
    "profiling",
    "sql_notes",
    "sql_warnings",
    "foreign_key_checks",
    "unique_checks",
    "sql_auto_is_null",
];

/// How the view's parameters are obtained for one execution.
#[derive(Debug, Clone)]
pub struct Binding {
    sources: Vec<Source>,
    /// Which parameters feed each key column when an IN list stands for `= ?`.
    slots: Option<Vec<Vec<usize>>>,
}

#[derive(Debug, Clone)]
enum Source {
    Fixed(Value),
    Bound(u32),
    Unset,
    /// A `= ?` of the view answered by an IN list's values (appended at the end).
    Replaced,
}

impl Binding {
    /// Maps a query's literals onto the view's parameters (`view` = the cache's compiled
    /// query). Literals that are placeholders are bound at execute.
    pub fn new(query: &Query<'_>, map: &ParamMap, view: &CompiledQuery) -> Result<Binding, RelayReason> {
        // A TIMESTAMP parameter is read in the session's time zone, which freshet does not
        // follow; the view holds UTC.
        let timestamp = |ty: &SqlType| matches!(ty, SqlType::Timestamp { .. });
        if view.key_columns.iter().any(|k| timestamp(&k.ty)) || view.read_filters.iter().any(|f| timestamp(&f.column_type.ty)) {
            return Err(RelayReason::SessionState);
        }
        let mut sources = vec![Source::Unset; view.n_params];
        let mut slots: Option<Vec<Vec<usize>>> = None;
        let mut uses = map.slots.iter();
        let mut failed = None;
        for_each_slot(query, |_, literals| {
            if failed.is_some() {
                return;
            }
            let Some(usage) = uses.next() else {
                failed = Some(RelayReason::Parameter);
                return;
            };
            let outcome = (|| -> Result<(), RelayReason> {
                match usage {
                    SlotUse::Param(p) => {
                        let [l] = literals else { return Err(RelayReason::Parameter) };
                        *sources.get_mut(usize::from(*p)).ok_or(RelayReason::Parameter)? = source(l)?;
                    }
                    SlotUse::Const(expected) => {
                        let [l] = literals else { return Err(RelayReason::Constant) };
                        let mut rendered = Vec::new();
                        l.render(&mut rendered);
                        if matches!(l, Literal::Placeholder(_)) || rendered != **expected {
                            return Err(RelayReason::Constant);
                        }
                    }
                    SlotUse::List { first, arity } => {
                        if literals.len() != usize::from(*arity) {
                            return Err(RelayReason::Constant);
                        }
                        for (k, l) in literals.iter().enumerate() {
                            *sources.get_mut(usize::from(*first) + k).ok_or(RelayReason::Parameter)? = source(l)?;
                        }
                    }
                    SlotUse::InParam(p) => {
                        let p = usize::from(*p);
                        // The view's key column fed by `?` p alone is fed by the list instead.
                        let column = view.param_slots.iter().position(|s| *s == [p]).ok_or(RelayReason::Parameter)?;
                        let layout = slots.get_or_insert_with(|| view.param_slots.clone());
                        let mut fed = Vec::with_capacity(literals.len());
                        for l in literals {
                            fed.push(sources.len());
                            sources.push(source(l)?);
                        }
                        *sources.get_mut(p).ok_or(RelayReason::Parameter)? = Source::Replaced;
                        layout[column] = fed;
                    }
                }
                Ok(())
            })();
            if let Err(r) = outcome {
                failed = Some(r);
            }
        });
        if let Some(r) = failed {
            return Err(r);
        }
        if sources.iter().any(|s| matches!(s, Source::Unset)) {
            return Err(RelayReason::Parameter);
        }
        if let Some(layout) = slots.as_mut() {
            // `Reader::lookup_in` takes the parameters that feed no key column as the range
            // filters' ones, in order: the replaced `?`s must go, and the indexes after them
            // shift down.
            let mut index = Vec::with_capacity(sources.len());
            let mut next = 0;
            for s in &sources {
                index.push(next);
                if !matches!(s, Source::Replaced) {
                    next += 1;
                }
            }
            for list in layout.iter_mut() {
                for i in list.iter_mut() {
                    *i = index[*i];
                }
            }
            sources.retain(|s| !matches!(s, Source::Replaced));
        }
        Ok(Binding { sources, slots })
    }

    /// The parameter values, with `bound` for the placeholders.
    fn values(&self, bound: &[Value]) -> Result<Vec<Value>, RelayReason> {
        self.sources
            .iter()
            .map(|s| match s {
                Source::Fixed(v) => Ok(v.clone()),
                Source::Bound(i) => bound.get(*i as usize).cloned().ok_or(RelayReason::Parameter),
                Source::Unset | Source::Replaced => Err(RelayReason::Parameter),
            })
            .collect()
    }
}

fn source(l: &Literal<'_>) -> Result<Source, RelayReason> {
    match l {
        Literal::Placeholder(n) => Ok(Source::Bound(*n)),
        other => literal_value(other).map(Source::Fixed).map_err(|_| RelayReason::Parameter),
    }
}

/// A prepared statement's cache routing, decided at prepare time.
#[derive(Clone)]
pub struct PreparedRoute {
    pub cache: Arc<Cache>,
    pub binding: Binding,
    pub fingerprint: u64,
    /// (type, flags) of the parameters as last sent by the client.
    pub types: Vec<(u8, u8)>,
    /// COM_STMT_SEND_LONG_DATA was used: relay the next execute.
    pub long_data: bool,
}

impl std::fmt::Debug for PreparedRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedRoute").field("cache", &self.cache.name).field("binding", &self.binding).finish_non_exhaustive()
    }
}

/// What routing decided for a command.
pub enum Routed {
    /// Answered from a view; nothing to relay.
    Answered,
    /// Relay it; if `capture`, keep the column definitions of the reply under that key.
    Relay { capture: Option<ColumnsKey> },
}

impl Session {
    /// Routes a COM_QUERY. `payload` includes the command byte.
    pub(super) async fn route_query(&mut self, payload: &Bytes, last_seq: u8) -> Result<Routed, SessionError> {
        let Some(engine) = self.shared.engine.get().cloned() else {
            self.state.observe(&payload[1..]);
            return Ok(Routed::Relay { capture: None });
        };
        let started = Instant::now();
        let sql = &payload[1..];
        let query = engine.classify(sql);
        let is_select = query.relay != Some("not a SELECT");
        if !is_select || query.relay == Some("multiple statements") {
            self.state.observe(sql);
        }
        let entry = engine.verdict(&query);
        let (id, map) = match &entry.verdict {
            Verdict::Relay { reason } => {
                if is_select {
                    let why = if reason.starts_with("cacheable") { RelayReason::NoCache } else { RelayReason::NotCacheable };
                    engine.counters.relayed(why);
                }
                self.relayed = Some((entry.clone(), started));
                return Ok(Routed::Relay { capture: None });
            }
            Verdict::Cache { id, params } => (*id, params.clone()),
        };
        let outcome = self.answer_text(&engine, &query, id, &map, started, last_seq).await?;
        match outcome {
            Ok(()) => Ok(Routed::Answered),
            Err((reason, capture)) => {
                engine.counters.relayed(reason);
                self.relayed = Some((entry, started));
                Ok(Routed::Relay { capture })
            }
        }
    }

    async fn answer_text(
        &mut self,
        engine: &Engine,
        query: &Query<'_>,
        id: matching::CacheId,
        map: &ParamMap,
        started: Instant,
        last_seq: u8,
    ) -> Result<Result<(), (RelayReason, Option<ColumnsKey>)>, SessionError> {
        let cache = match self.checks(engine, id) {
            Ok(c) => c,
            Err(r) => return Ok(Err((r, None))),
        };
        let Ok(live) = cache.live() else { return Ok(Err((RelayReason::Unavailable, None))) };
        let binding = match Binding::new(query, map, live.reader.query()) {
            Ok(b) => b,
            Err(r) => return Ok(Err((r, None))),
        };
        let values = match binding.values(&[]) {
            Ok(v) => v,
            Err(r) => return Ok(Err((r, None))),
        };
        let key = ColumnsKey { cache: cache.id, fingerprint: query.fingerprint.hash, charset: self.state.charset, binary: false, extended: self.extended_metadata() };
        self.serve(engine, &cache, &binding, &values, key, started, last_seq).await
    }

    /// The checks every cached read passes; the cache on success.
    fn checks(&self, engine: &Engine, id: matching::CacheId) -> Result<Arc<Cache>, RelayReason> {
        if self.status.has(StatusFlags::IN_TRANS) || !self.status.has(StatusFlags::AUTOCOMMIT) {
            return Err(RelayReason::InTransaction);
        }
        let same_database = self.state.database.as_deref().is_some_and(|d| d.eq_ignore_ascii_case(&engine.settings.database));
        if self.state.tainted || !self.state.utf8 || !same_database {
            return Err(RelayReason::SessionState);
        }
        if !engine.fresh() {
            return Err(RelayReason::Lag);
        }
        engine.by_id(id).ok_or(RelayReason::Unavailable)
    }

    /// Looks up and writes the answer, or says why not (and whether to capture columns).
    #[allow(clippy::too_many_arguments)]
    async fn serve(
        &mut self,
        engine: &Engine,
        cache: &Cache,
        binding: &Binding,
        values: &[Value],
        key: ColumnsKey,
        started: Instant,
        last_seq: u8,
    ) -> Result<Result<(), (RelayReason, Option<ColumnsKey>)>, SessionError> {
        let Some(columns) = engine.columns(&key) else {
            // Relay this one to learn the column definitions; start its fill meanwhile.
            if let Ok(live) = cache.live() {
                let _ = match &binding.slots {
                    None => live.reader.lookup(values),
                    Some(s) => live.reader.lookup_in(s, values),
                };
                engine.wake_writer();
            }
            return Ok(Err((RelayReason::Capture, Some(key))));
        };
        if !columns.encodable.load(Ordering::Relaxed) {
            return Ok(Err((RelayReason::Unencodable, None)));
        }
        let rows = match engine.lookup(cache, values, binding.slots.as_deref()).await {
            Ok(rows) => rows,
            Err(r) => return Ok(Err((r, None))),
        };
        let (encoded, ends) = match encode_rows(&columns, &rows, key.binary) {
            Ok(rows) => rows,
            Err(why) => {
                tracing::debug!(cache = %cache.name, reason = %why, "a cached answer cannot be encoded as the server would; this shape is relayed");
                columns.encodable.store(false, Ordering::Relaxed);
                return Ok(Err((RelayReason::Unencodable, None)));
            }
        };
        let mut seq = last_seq.wrapping_add(1);
        let mut count = Vec::with_capacity(9);
        put_lenenc(&mut count, columns.packets.len() as u64);
        seq = self.client.queue_packet(seq, &count);
        for def in &columns.packets {
            seq = self.client.queue_packet(seq, def);
        }
        let status = StatusFlags(self.status.0 & !(StatusFlags::MORE_RESULTS_EXISTS | StatusFlags::CURSOR_EXISTS | StatusFlags::LAST_ROW_SENT));
        let deprecate_eof = self.caps.has(Capabilities::DEPRECATE_EOF);
        if !deprecate_eof {
            seq = self.client.queue_packet(seq, &eof(status));
        }
        let mut from = 0;
        for &end in &ends {
            seq = self.client.queue_packet(seq, &encoded[from..end]);
            from = end;
        }
        let end = if deprecate_eof { ok_eof(status) } else { eof(status) };
        self.client.queue_packet(seq, &end);
        self.flush_client().await?;
        let elapsed = started.elapsed();
        cache.hit_latency.record(elapsed);
        cache.hit_histogram.observe(elapsed);
        engine.counters.hits.inc();
        Ok(Ok(()))
    }

    /// At COM_STMT_PREPARE: the route of a statement whose text is a cached query's shape.
    pub(super) fn route_prepare(&mut self, sql: &[u8]) -> Option<PreparedRoute> {
        let engine = self.shared.engine.get()?.clone();
        let query = engine.classify(sql);
        if query.relay == Some("not a SELECT") {
            self.state.observe(sql);
            return None;
        }
        let entry = engine.verdict(&query);
        let Verdict::Cache { id, params } = &entry.verdict else { return None };
        let cache = engine.by_id(*id)?;
        let live = cache.live().ok()?;
        let binding = Binding::new(&query, params, live.reader.query()).ok()?;
        Some(PreparedRoute { cache, binding, fingerprint: query.fingerprint.hash, types: Vec::new(), long_data: false })
    }

    /// Routes a COM_STMT_EXECUTE of a statement with a route.
    pub(super) async fn route_execute(&mut self, payload: &Bytes, last_seq: u8) -> Result<Routed, SessionError> {
        let started = Instant::now();
        let Some(engine) = self.shared.engine.get().cloned() else { return Ok(Routed::Relay { capture: None }) };
        // [0x17][id u32][flags u8][iterations u32] then parameters.
        let Some(id) = payload.get(1..5).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])) else {
            return Ok(Routed::Relay { capture: None });
        };
        let flags = payload.get(5).copied().unwrap_or(0);
        let Some(stmt) = self.statements.get_mut(&id) else { return Ok(Routed::Relay { capture: None }) };
        let params_count = usize::from(stmt.params);
        let Some(route) = stmt.route.as_mut() else { return Ok(Routed::Relay { capture: None }) };
        // A cursor (flags != 0) or long data: the server's business.
        if flags != 0 || route.long_data {
            route.long_data = false;
            return Ok(Routed::Relay { capture: None });
        }
        let bound = match execute_params(payload.get(10..).unwrap_or(&[]), params_count, &mut route.types) {
            Ok(v) => v,
            Err(_) => {
                // Unknown types: relay, and forget them so the server sees what it expects.
                engine.counters.relayed(RelayReason::Parameter);
                return Ok(Routed::Relay { capture: None });
            }
        };
        let route = route.clone();
        let cache = match self.checks(&engine, route.cache.id) {
            Ok(c) => c,
            Err(r) => {
                engine.counters.relayed(r);
                return Ok(Routed::Relay { capture: None });
            }
        };
        let values = match route.binding.values(&bound) {
            Ok(v) => v,
            Err(r) => {
                engine.counters.relayed(r);
                return Ok(Routed::Relay { capture: None });
            }
        };
        let key = ColumnsKey { cache: cache.id, fingerprint: route.fingerprint, charset: self.state.charset, binary: true, extended: self.extended_metadata() };
        match self.serve(&engine, &cache, &route.binding, &values, key, started, last_seq).await? {
            Ok(()) => Ok(Routed::Answered),
            Err((reason, capture)) => {
                engine.counters.relayed(reason);
                Ok(Routed::Relay { capture })
            }
        }
    }

    fn extended_metadata(&self) -> bool {
        self.caps.has(Capabilities::MARIADB_EXTENDED_TYPE_INFO)
    }

    /// After a relayed command: count it under its shape (SHOW PROXIED QUERIES).
    pub(super) fn record_relayed(&mut self) {
        if let Some((entry, started)) = self.relayed.take() {
            VerdictTable::record(&entry, started.elapsed());
        }
    }
}

/// The row packets' payloads for `rows`, back to back, and where each ends; or why a value
/// cannot be encoded exactly (nothing is sent then: the read is relayed whole).
fn encode_rows(columns: &crate::cache::Columns, rows: &[Row], binary_protocol: bool) -> Result<(Vec<u8>, Vec<usize>), crate::encode::Unencodable> {
    let mut out = Vec::with_capacity(64 * rows.len());
    let mut ends = Vec::with_capacity(rows.len());
    for row in rows {
        if binary_protocol {
            binary::row(&mut out, row, &columns.render)?;
        } else {
            text::row(&mut out, row, &columns.render)?;
        }
        ends.push(out.len());
    }
    Ok((out, ends))
}

fn eof(status: StatusFlags) -> Vec<u8> {
    let mut out = vec![EOF, 0, 0];
    out.extend_from_slice(&status.0.to_le_bytes());
    out
}

/// The OK packet with an 0xFE header that ends a result set under DEPRECATE_EOF.
fn ok_eof(status: StatusFlags) -> Vec<u8> {
    let mut out = vec![EOF, 0, 0];
    out.extend_from_slice(&status.0.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// Entry kept while a relayed command runs.
pub type Relayed = Option<(Arc<Entry>, Instant)>;

#[cfg(test)]
mod tests {
    use super::*;

    fn after(statements: &[&str]) -> SessionState {
        let mut s = SessionState::new("app".into(), Some("Shop".into()), 45);
        for sql in statements {
            s.observe(sql.as_bytes());
        }
        s
    }

    #[test]
    fn harmless_settings_keep_the_session_cacheable() {
        let s = after(&["SET autocommit = 1", "SET SESSION wait_timeout = 100, @@session.net_read_timeout = 30", "SET @x = NOW()", "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"]);
        assert!(!s.tainted && s.utf8);
        assert_eq!(s.database.as_deref(), Some("shop"));
    }

    #[test]
    fn settings_that_change_results_taint_until_reset() {
        for sql in ["SET sql_mode = 'ANSI'", "SET @@time_zone = '+02:00'", "SET SESSION div_precision_increment = 2", "SET a = 1, sql_select_limit = 5", "SELECT 1; SET time_zone = '+00:00'"] {
            let mut s = after(&[sql]);
            assert!(s.tainted, "{sql}");
            s.reset();
            assert!(!s.tainted);
        }
    }

    #[test]
    fn character_sets_and_databases_are_followed() {
        let s = after(&["SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci"]);
        assert!(s.utf8 && !s.tainted);
        assert_ne!(s.charset, 45, "a new capture key");
        let s = after(&["SET NAMES latin1"]);
        assert!(!s.utf8);
        let s = after(&["SET character_set_results = 'binary'"]);
        assert!(!s.utf8);
        let s = after(&["USE `other`"]);
        assert_eq!(s.database.as_deref(), Some("other"));
        let mut s = after(&["SET NAMES latin1"]);
        s.reset();
        assert!(s.utf8);
        assert_eq!(s.charset, 45);
    }
}
