//! The hit path's session side: run the routing layer ([`crate::cache::route`]) for a
//! COM_QUERY or COM_STMT_EXECUTE, ask the server who the session is when the route needs it
//! (the probe), and write the answer's packets — or relay, counting why.
//!
//! Per COM_QUERY: classify the text (tokens only) -> verdict for its fingerprint (remembered;
//! the full parse runs once per shape) -> the route's gate (session checks, the server's
//! identity of the session, the account's right to the cache) -> binding and lookup -> rows
//! encoded under the column definitions the upstream sent for this shape. COM_STMT_EXECUTE
//! does the same with the verdict taken at prepare time and the bound parameters.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use freshet_dataflow::{SharedRow, Value};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::cache::params::execute_params;
use crate::cache::registry::frame_head;
use crate::cache::route::{self, Admission, Answer, Binding, Decision, Entry, Gate, Relay, RelayReason, Standing, VerdictTable};
use crate::cache::{Cache, Columns, ColumnsKey, Engine};
use crate::encode::{Unencodable, binary, text};
use crate::matching::{self, literal};
use crate::protocol::io::PacketIo;
use crate::protocol::response::{end_of_rows, eof_packet};
use crate::protocol::{Capabilities, StatusFlags};

use super::reply::FLUSH_AT;
use super::{Session, SessionError};

/// A prepared statement's cache routing, decided at prepare time.
#[derive(Clone)]
pub struct PreparedRoute {
    pub cache: Arc<Cache>,
    /// `Engine::caches_changed` when `cache` was chosen: at an execute after the caches
    /// changed, a route whose cache was dropped takes the cache of its shape now, if any
    /// (`Session::renew_route`).
    pub caches_changed: u64,
    /// Shared with each execution (an `Arc` clone, not the binding's vectors, per execute).
    pub binding: Arc<Binding>,
    pub fingerprint: u64,
    /// The kinds of the text's own literals (`matching::literal::kinds`).
    pub literals: u64,
    /// Whether the statement's tables are the caches' database's. The server resolves them in
    /// the session's default database at the prepare, and keeps them when the session's
    /// default changes (a statement prepared under `USE other` reads `other`'s tables after
    /// `USE app`). None until the server has said (the probe) which database that was; an
    /// execute is answered here only if true.
    pub in_cache_database: Option<bool>,
    /// `SessionState::database_epoch` at the prepare: a probe at the same epoch tells the
    /// prepare's database.
    pub database_epoch: u64,
    /// How the server read the text at the prepare (`Identity::text_reading`): it keeps that
    /// reading for every execute (a statement prepared under `EMPTY_STRING_IS_NULL`, or a
    /// binary collation, answers so after the session's settings came back). An execute is
    /// answered here only under the same. None until the server has said (a probe at the
    /// prepare's `settings_epoch`).
    pub text_reading: Option<u64>,
    /// `SessionState::settings_epoch` at the prepare.
    pub settings_epoch: u64,
    /// An execute reached the server while the session may have read text otherwise than
    /// `text_reading`: after a DDL of its tables the server prepares the statement again at
    /// such an execute, under the session's reading then, and keeps that. Its executes are
    /// relayed from then on.
    pub read_otherwise: bool,
    /// (type, flags) of the parameters as last sent by the client.
    pub types: Vec<(u8, u8)>,
    /// COM_STMT_SEND_LONG_DATA was used: relay the next execute.
    pub long_data: bool,
    /// Long data named a parameter the statement lacks: the server refuses every execute
    /// until COM_STMT_RESET, so each is relayed (`Session::note_long_data`).
    pub refused: bool,
    /// An execute asked the server for a cursor: it stays open there until an execute of the
    /// statement without one is answered by the server (which closes it; a refused one does
    /// not), so those are relayed too; else a COM_STMT_FETCH after an execute answered here
    /// would get the old cursor's rows.
    pub cursor: bool,
    /// An execute with types reached the server (relayed, or sent again for diagnostics):
    /// an execute without them may be relayed as it is (`session::execute`).
    pub server_has_types: bool,
    /// A relayed execute that sent types was refused with 1210, and its types do not tell
    /// whether the server kept them (it keeps the ones it had when it does not know the first
    /// type, the sent ones when a value was refused: `params::refused_types`). Until the
    /// client sends types again, executes without them are relayed as they are (the server
    /// reads them with whatever it kept).
    pub types_unsure: bool,
    /// How the server reads long data for each parameter (MariaDB 10.11): by the type of the
    /// last execute that gave the parameter a value, as text after one that gave it NULL
    /// (`None`). That state as the client's last execute left it (None: not known), and
    /// whether the server is in it: an execute answered here with other types or NULLs leaves
    /// the server behind, and long data is then preceded by an execute that brings it up
    /// (`Session::long_data_types`).
    pub last_params: Option<Vec<Option<(u8, u8)>>>,
    pub params_in_sync: bool,
}

impl std::fmt::Debug for PreparedRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedRoute").field("cache", &self.cache.name).field("binding", &self.binding).finish_non_exhaustive()
    }
}

/// One COM_STMT_EXECUTE of a routed statement: what routing needs of its route, and the
/// bound parameters.
struct Execution {
    cache: Arc<Cache>,
    binding: Arc<Binding>,
    fingerprint: u64,
    /// The kinds of the text's literals and the parameters' types, NULLs apart.
    literals: u64,
    bound: Vec<Value>,
    statement: u32,
}

/// Whether an answer was written.
enum Written {
    Sent,
    /// A value cannot be encoded exactly as the server would: nothing was written.
    Unencodable,
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
    pub(super) async fn route_query(&mut self, payload: &Bytes, last_seq: u8, started: Instant) -> Result<Routed, SessionError> {
        let sql = &payload[1..];
        let Some(engine) = self.shared.engine.get().cloned() else {
            self.state.observe(sql);
            return Ok(Routed::Relay { capture: None });
        };
        // A text this session may read otherwise than the tokenizer (NO_BACKSLASH_ESCAPES, a
        // client character set it misreads, or a reading the server has not told yet) is
        // relayed unclassified: its shape, recorded for SHOW PROXIED QUERIES, could hold a
        // literal read as a word (`'C:\' OR v = 'secret'`).
        if self.may_misread_text() && super::misreading::reads_otherwise_unseen(sql) {
            self.state.observe(sql);
            return Ok(Routed::Relay { capture: None });
        }
        // A text of a shape this session learnt is not tokenized again; any other is, noting
        // its literals' tokens so that its shape can be learnt if it is a cache's.
        let (mut query, tokens) = match self.shapes.classify(sql, engine.settings.bounds) {
            Some(query) => (query, None),
            None => {
                let (query, tokens) = engine.classify_with_tokens(sql);
                (query, Some(tokens))
            }
        };
        let is_select = query.relay != Some("not a SELECT");
        let entry = engine.verdict(&query);
        let (id, map) = match route::interpret(&entry.verdict, &query) {
            Ok(matched) => {
                if let Some(tokens) = tokens {
                    self.shapes.learn(sql, &mut query, &tokens);
                }
                matched
            }
            Err(why) => {
                // A SELECT no cache answers: its shape is learnt too, since such reads come
                // back with other values as cached ones do.
                if let Some(tokens) = tokens {
                    self.shapes.learn_relayed(sql, &mut query, &tokens);
                }
                // Not a cached shape: whatever it is may change the session.
                self.state.observe(sql);
                if is_select {
                    engine.counters.relayed(why);
                }
                self.relayed = Some((entry.clone(), started));
                return Ok(Routed::Relay { capture: None });
            }
        };
        let routed = match self.pass_gate(&engine, id, started).await? {
            Admission::Closed(reason) => {
                Decision::Relay(self.relay_gated(&engine, reason, id, query.fingerprint.hash, literal::kinds(&query.literals), false))
            }
            // A character the session's character sets cannot hold: the server reads it as
            // something else, or refuses it.
            Admission::Open(_) if self.identity.as_ref().is_some_and(|i| i.cannot_hold(sql)) => RelayReason::SessionState.into(),
            Admission::Open(cache) => match route::bind(&cache, &query, map) {
                Err(reason) => reason.into(),
                Ok(binding) => match self.own_writes(&engine).await? {
                    Some(reason) => reason.into(),
                    None => {
                        let key = self.columns_key(&cache, query.fingerprint.hash, literal::kinds(&query.literals), false);
                        let reading = self.reading();
                        let looked_up = route::answer(&engine, &cache, &binding, &[], key, &mut self.columns_memo, reading).await;
                        Decision::of(cache, key, looked_up)
                    }
                },
            },
        };
        self.finish_route(&engine, routed, Some(entry), started, last_seq).await
    }

    /// Whether this session may read a text otherwise than the tokenizer does: the server says
    /// backslashes do not escape, the session is not followed (a client character set the
    /// tokenizer misreads is one reason), or its reading is not known to be the default one
    /// (not confirmed, stale, or a sql_mode or character set that reads otherwise).
    fn may_misread_text(&self) -> bool {
        self.status.has(StatusFlags::NO_BACKSLASH_ESCAPES)
            || self.state.unfollowed
            || self.state.stale
            || !self.state.confirmed
            || self.identity.as_ref().is_none_or(|i| i.misread || i.misread_charset)
    }

    /// The gate, with the probe run when the gate asks for it: the cache, or why the read is
    /// relayed (a read that teaches the account's right is marked in `self.learning`).
    async fn pass_gate(&mut self, engine: &Engine, id: matching::CacheId, now: Instant) -> Result<Admission, SessionError> {
        self.learning = None;
        // Relayed for what was set for the next transaction alone: its answer tells whether
        // the server used it up (`learn_from`).
        self.using_up_next_transaction = self.state.next_transaction && !self.state.unfollowed && !self.state.locked;
        for _ in 0..2 {
            let standing = Standing {
                status: self.status,
                // Under LOCK TABLES the server refuses reads of tables the session did not lock;
                // what was set for the next transaction is the server's to use up.
                unfollowed: self.state.unfollowed || self.state.locked || self.state.next_transaction,
                // Stale: asked again (the probe). The identity is kept until then: the probe
                // keeps what the session learnt if the account is the same.
                identity: self.identity.as_ref().filter(|_| !self.state.stale),
                memo: &mut self.memo,
                login_generation: self.login_generation,
                login_at: self.login_at,
                reread: self.state.rights_epoch != self.login_rights_epoch,
                now,
            };
            match route::gate(engine, id, standing) {
                Gate::Open(cache) => return Ok(Admission::Open(cache)),
                Gate::Closed(reason, learning) => {
                    if learning.is_some() && !self.made_no_temporary_tables(engine).await? {
                        return Ok(Admission::Closed(RelayReason::SessionState));
                    }
                    self.learning = learning;
                    return Ok(Admission::Closed(reason));
                }
                Gate::Probe => {
                    let gtid = self.own.gtid_to_ask(&engine.settings);
                    if gtid.is_some() {
                        self.own.before_asking(engine);
                    }
                    self.probe(gtid).await?;
                }
            }
        }
        Ok(Admission::Closed(RelayReason::SessionState))
    }

    /// Before a relayed read teaches the account's right to a cache: whether the session has
    /// made no temporary table, which would shadow the cached table for it on the server and
    /// answer the read where the real table is refused. Its own CREATE TEMPORARY leaves it
    /// unfollowed already; one made by stored code (a function or trigger run with its
    /// definer's rights, reached through a call, a write or a view) is in no text here, and
    /// only the server's count tells. A session that made one is unfollowed (false); one the
    /// server cannot tell of (another flavor, no row) teaches nothing (false).
    async fn made_no_temporary_tables(&mut self, engine: &Engine) -> Result<bool, SessionError> {
        let Some(sql) = engine.settings.temporary_tables_made else { return Ok(true) };
        let made = self.one_row(sql.as_bytes(), 1, 1024, "the temporary tables question").await?;
        match made.as_deref() {
            Some([Some(n)]) if n == "0" => Ok(true),
            Some([Some(n)]) if n.parse::<u64>().is_ok() => {
                self.state.unfollowed("temporary tables made by stored code", b"");
                Ok(false)
            }
            _ => Ok(false),
        }
    }

    /// A read the gate closed. One relayed to learn the account's right also captures the
    /// shape's column definitions if none are known yet: it passed every session check, and
    /// an error reply captures nothing. Such a read is counted as a capture (it would have
    /// been relayed for that alone).
    fn relay_gated(
        &self,
        engine: &Engine,
        reason: RelayReason,
        id: matching::CacheId,
        fingerprint: u64,
        literals: u64,
        binary: bool,
    ) -> Relay {
        let capture = match (reason, engine.by_id(id)) {
            (RelayReason::Learning, Some(cache)) => {
                Some(self.columns_key(&cache, fingerprint, literals, binary)).filter(|key| engine.columns(key).is_none())
            }
            _ => None,
        };
        let reason = if capture.is_some() { RelayReason::Capture } else { reason };
        Relay { reason, capture }
    }

    /// How the server said this session reads what some views depend on (as no view computes,
    /// before the probe ran).
    fn reading(&self) -> route::Reading {
        self.identity.as_ref().map_or(route::Reading::default(), |i| i.reading)
    }

    fn columns_key(&self, cache: &Cache, fingerprint: u64, literals: u64, binary: bool) -> ColumnsKey {
        let charset = self.identity.as_ref().map_or(0, |i| i.charset);
        ColumnsKey { cache: cache.id, fingerprint, literals, charset, binary, extended: self.extended_metadata() }
    }

    /// Writes a routed answer, or sets up the relay (counted under its reason).
    async fn finish_route(
        &mut self,
        engine: &Engine,
        routed: Decision,
        entry: Option<Arc<Entry>>,
        started: Instant,
        last_seq: u8,
    ) -> Result<Routed, SessionError> {
        self.own.routed();
        let relay = match routed {
            Decision::Serve { cache, answer, key } => match self.write_answer(&cache, &answer, key.binary, last_seq).await? {
                Written::Sent => {
                    let elapsed = started.elapsed();
                    cache.hit_latency.record(elapsed);
                    cache.hit_histogram.observe(elapsed);
                    engine.counters.hits.inc();
                    return Ok(Routed::Answered);
                }
                Written::Unencodable => Relay::from(RelayReason::Unencodable),
            },
            Decision::Relay(relay) => relay,
        };
        engine.counters.relayed(relay.reason);
        if let Some(entry) = &entry {
            entry.note_relay(u8::try_from(relay.reason.index()).unwrap_or(u8::MAX));
        }
        self.relayed = entry.map(|e| (e, started));
        Ok(Routed::Relay { capture: relay.capture })
    }

    /// Writes the answer's packets, or nothing if a value cannot be encoded exactly as the
    /// server would.
    async fn write_answer(&mut self, cache: &Cache, answer: &Answer, binary: bool, last_seq: u8) -> Result<Written, SessionError> {
        // The session's flags, and how the server runs this read (its index flags as the
        // captured reply had them): nothing the statement before set for itself.
        let status = StatusFlags((self.status.0 & StatusFlags::SESSION) | answer.columns.plan);
        let deprecate_eof = self.caps.has(Capabilities::DEPRECATE_EOF);
        let reply = Reply { binary, status, deprecate_eof, last_seq };
        let (columns, rows) = (&answer.columns, &answer.rows[..]);
        // The rows are sent a chunk at a time, each flushed before the next is encoded, as the
        // relay flushes every `FLUSH_AT`: a client that stops reading holds one chunk of the
        // answer, not all of it. Nothing is sent unless every row can be encoded, so the rows
        // past the first chunk are tried first (encoded once more to be sent).
        let checked = self.encoded.encode_until(columns, rows, binary, FLUSH_AT).and_then(|first| {
            let rest = rows.get(first..).unwrap_or_default();
            if !rest.is_empty() {
                encodable(columns, rest, binary)?;
            }
            Ok(first)
        });
        let mut sent = match checked {
            Ok(first) => first,
            Err(why) => {
                self.encoded.clear();
                tracing::debug!(cache = %cache.name, reason = %why, "a cached answer cannot be encoded as the server would; this shape is relayed");
                answer.columns.encodable.store(false, std::sync::atomic::Ordering::Relaxed);
                return Ok(Written::Unencodable);
            }
        };
        self.answered_since_rest = true;
        let mut seq = queue_head(&mut self.client, columns, reply);
        seq = queue_encoded(&mut self.client, seq, &mut self.encoded);
        while let Some(rest) = rows.get(sent..).filter(|r| !r.is_empty()) {
            self.flush_answer().await?;
            // Tried above: it cannot fail now; if it did, the session would end mid-answer.
            let n = self.encoded.encode_until(columns, rest, binary, FLUSH_AT).map_err(|why| {
                SessionError::ClientIo(std::io::Error::other(format!("a cached row that encoded a moment ago no longer does: {why}")))
            })?;
            seq = queue_encoded(&mut self.client, seq, &mut self.encoded);
            sent += n;
        }
        self.client.queue_packet(seq, &end_of_rows(reply.status, reply.deprecate_eof));
        self.flush_answer().await?;
        Ok(Written::Sent)
    }

    /// Flushes a cached answer to the client, keeping the server's session alive meanwhile: a
    /// client that reads a large answer slowly is busy, not idle, as it would be directly.
    async fn flush_answer(&mut self) -> Result<(), SessionError> {
        // Most answers fit the socket's buffer: flushed at once, no timer polled for them.
        if let Some(r) = super::command::now(self.client.flush()).await {
            return r.map_err(SessionError::ClientIo);
        }
        loop {
            if self.arm_keep_alive().is_none() {
                return self.flush_client().await;
            }
            let flushed = tokio::select! {
                r = self.client.flush() => Some(r),
                () = self.keep_alive_timer.as_mut() => None,
            };
            match flushed {
                Some(r) => return r.map_err(SessionError::ClientIo),
                // The answer is still being taken: the next ping falls due as the first did.
                None => {
                    self.keep_alive().await?;
                    self.answered_since_rest = true;
                }
            }
        }
    }

    /// At COM_STMT_PREPARE: the route of a statement whose text is a cached query's shape. A
    /// prepare runs nothing: what the text does to the session is followed at each execute
    /// (`Session::dispatch`), never here (a prepared `UNLOCK TABLES` unlocks nothing).
    pub(super) fn route_prepare(&mut self, sql: &[u8]) -> Option<PreparedRoute> {
        let engine = self.shared.engine.get().cloned()?;
        let caches_changed = engine.caches_changed();
        let query = engine.classify(sql);
        let entry = engine.verdict(&query);
        let Ok((id, params)) = route::interpret(&entry.verdict, &query) else { return None };
        let cache = engine.by_id(id)?;
        let binding = route::bind(&cache, &query, params).ok()?;
        Some(PreparedRoute {
            cache,
            caches_changed,
            binding: Arc::new(binding),
            fingerprint: query.fingerprint.hash,
            literals: literal::kinds(&query.literals),
            in_cache_database: self.identity.as_ref().filter(|_| !self.state.stale).map(|i| i.in_database(&engine.settings.database)),
            database_epoch: self.state.database_epoch,
            text_reading: self.identity.as_ref().filter(|_| !self.state.stale).map(|i| i.text_reading),
            settings_epoch: self.state.settings_epoch,
            read_otherwise: false,
            types: Vec::new(),
            long_data: false,
            refused: false,
            cursor: false,
            server_has_types: false,
            types_unsure: false,
            last_params: None,
            params_in_sync: true,
        })
    }

    /// Routes a COM_STMT_EXECUTE of a statement with a route.
    pub(super) async fn route_execute(&mut self, payload: &Bytes, last_seq: u8, started: Instant) -> Result<Routed, SessionError> {
        let Some(engine) = self.shared.engine.get().cloned() else { return Ok(Routed::Relay { capture: None }) };
        self.renew_route(&engine, payload);
        let Some(Execution { cache, binding, fingerprint, literals, bound, statement }) = self.bound_execute(&engine, payload) else {
            return Ok(Routed::Relay { capture: None });
        };
        let routed = match self.pass_gate(&engine, cache.id, started).await? {
            Admission::Closed(reason) => Decision::Relay(self.relay_gated(&engine, reason, cache.id, fingerprint, literals, true)),
            Admission::Open(_) if self.identity.as_ref().is_some_and(|i| bound.iter().any(|v| cannot_hold(i, v))) => {
                RelayReason::SessionState.into()
            }
            // Its tables may be another database's (the gate checked the session's default
            // database now, not the prepare's), or its text read otherwise.
            Admission::Open(_) if !self.prepared_as_now(statement) => RelayReason::SessionState.into(),
            Admission::Open(cache) => match self.own_writes(&engine).await? {
                Some(reason) => reason.into(),
                None => {
                    let key = self.columns_key(&cache, fingerprint, literals, true);
                    let reading = self.reading();
                    let looked_up = route::answer(&engine, &cache, &binding, &bound, key, &mut self.columns_memo, reading).await;
                    Decision::of(cache, key, looked_up)
                }
            },
        };
        self.finish_route(&engine, routed, None, started, last_seq).await
    }

    /// At an execute (`payload`) of a statement routed before the caches last changed: if its
    /// cache was dropped, the statement is routed to the cache of its shape now (DROP CACHE,
    /// then CREATE CACHE of the same query), keeping what is known of it on the server; else
    /// it stays routed to the dropped one, and relayed as `unavailable`.
    fn renew_route(&mut self, engine: &Engine, payload: &[u8]) {
        let Some(id) = payload.get(1..5).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])) else { return };
        let changed = engine.caches_changed();
        let Some(statement) = self.statements.get_mut(&id) else { return };
        let Some(route) = statement.route.as_mut().filter(|r| r.caches_changed != changed) else { return };
        route.caches_changed = changed;
        if engine.by_id(route.cache.id).is_some() {
            return;
        }
        let sql = statement.sql.clone();
        let Some(now) = self.route_prepare(&sql) else { return };
        if let Some(route) = self.statements.get_mut(&id).and_then(|s| s.route.as_mut()) {
            route.cache = now.cache;
            route.binding = now.binding;
            route.fingerprint = now.fingerprint;
            route.literals = now.literals;
        }
    }

    /// The route and bound values of an execute that may be answered; None to relay it.
    fn bound_execute(&mut self, engine: &Engine, payload: &[u8]) -> Option<Execution> {
        // [0x17][id u32][flags u8][iterations u32] then parameters.
        let id = payload.get(1..5).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))?;
        let flags = payload.get(5).copied().unwrap_or(0);
        let stmt = self.statements.get_mut(&id)?;
        let params_count = usize::from(stmt.params);
        let route = stmt.route.as_mut()?;
        // A cursor (flags != 0) or long data: the server's business; and the executes after a
        // cursor's, until one the server answers closes it (`execute_answered`).
        route.cursor |= flags != 0;
        if flags != 0 || route.long_data || route.cursor || route.refused {
            route.long_data = false;
            return None;
        }
        // Types sent with this execute are the statement's from now on; the server knows them
        // only if the execute reaches it (`session::execute`, which marks it so).
        let typed = payload.get(10 + params_count.div_ceil(8)) == Some(&1);
        if params_count > 0 && typed {
            route.server_has_types = false;
            route.types_unsure = false;
        }
        if params_count > 0 && !typed && route.types_unsure {
            engine.counters.relayed(RelayReason::Parameter);
            return None;
        }
        // Through the id of the statement prepared last, MariaDB reads an execute only with its
        // types (1835 without): its own answer.
        if id == u32::MAX && params_count > 0 && !typed {
            return None;
        }
        match execute_params(payload.get(10..).unwrap_or(&[]), params_count, &mut route.types) {
            Ok(bound) => {
                // What this execute leaves long data read as, if it is answered here.
                let state: Vec<_> = route.types.iter().zip(&bound).map(|(&t, v)| (!matches!(v, Value::Null)).then_some(t)).collect();
                route.params_in_sync &= route.last_params.as_ref() == Some(&state);
                route.last_params = Some(state);
                let literals = route.types.iter().zip(&bound).fold(route.literals, |h, (&(ty, flags), value)| {
                    let kind = if matches!(value, Value::Null) { 0 } else { 0x1_0000 | u64::from(ty) << 8 | u64::from(flags) };
                    literal::fold_kind(h, kind)
                });
                Some(Execution {
                    cache: route.cache.clone(),
                    binding: route.binding.clone(),
                    fingerprint: route.fingerprint,
                    literals,
                    bound,
                    statement: id,
                })
            }
            Err(_) => {
                // Unknown types: relay, and forget them so the server sees what it expects.
                engine.counters.relayed(RelayReason::Parameter);
                None
            }
        }
    }

    /// Whether statement `id`'s tables are known to be the caches' database's, and its text
    /// to have been read at the prepare as the session reads text now.
    fn prepared_as_now(&self, id: u32) -> bool {
        let Some(route) = self.statements.get(&id).and_then(|s| s.route.as_ref()) else { return false };
        route.in_cache_database == Some(true)
            && !route.read_otherwise
            && route.text_reading.is_some()
            && route.text_reading == self.identity.as_ref().map(|i| i.text_reading)
    }

    /// An execute of statement `payload` names is about to reach the server. If the session
    /// may read text otherwise than the statement's route holds (its settings changed since
    /// and the server has not said they are the same), the server may prepare it again under
    /// them (it does at the first execute after a DDL of its tables), so the route no longer
    /// knows how the text was read.
    /// A relayed execute the server answered without an error: one without a cursor closed
    /// the statement's cursor there (a refused one, 1210 before it ran, leaves it open).
    pub(super) fn execute_answered(&mut self, payload: &[u8]) {
        let Some(id) = payload.get(1..5).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])) else { return };
        if payload.get(5) == Some(&0)
            && let Some(route) = self.statements.get_mut(&id).and_then(|s| s.route.as_mut())
        {
            route.cursor = false;
        }
    }

    pub(super) fn execute_reaches_server(&mut self, payload: &[u8]) {
        let Some(id) = payload.get(1..5).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])) else { return };
        let (epoch, stale) = (self.state.settings_epoch, self.state.stale);
        let now = self.identity.as_ref().map(|i| i.text_reading);
        let Some(route) = self.statements.get_mut(&id).and_then(|s| s.route.as_mut()) else { return };
        let same = route.settings_epoch == epoch || (!stale && now.is_some() && route.text_reading == now);
        route.read_otherwise |= !same;
    }

    /// After a probe: the routes of statements prepared since the session's default database
    /// (or settings) last changed learn which database their tables are in (and how their
    /// text was read): the probe's.
    pub(super) fn note_prepared_database(&mut self) {
        let (Some(engine), Some(identity)) = (self.shared.engine.get(), self.identity.as_ref()) else { return };
        let in_cache_database = identity.in_database(&engine.settings.database);
        let (database_epoch, settings_epoch) = (self.state.database_epoch, self.state.settings_epoch);
        for route in self.statements.values_mut().filter_map(|s| s.route.as_mut()) {
            if route.in_cache_database.is_none() && route.database_epoch == database_epoch {
                route.in_cache_database = Some(in_cache_database);
            }
            if route.text_reading.is_none() && route.settings_epoch == settings_epoch {
                route.text_reading = Some(identity.text_reading);
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

    /// The first packet of a relayed reply: if the read was relayed to learn the account's
    /// right to a cache, keep what the server answered.
    pub(super) fn learn_from(&mut self, first: &[u8]) {
        if let (Some(learning), Some(engine)) = (self.learning.take(), self.shared.engine.get()) {
            engine.access.learn(&learning, first, Instant::now(), &mut self.memo);
        }
        // A read of a cached (InnoDB) table relayed for what was set for the next transaction:
        // answered with rows, it started that transaction on the server.
        if std::mem::take(&mut self.using_up_next_transaction) && !matches!(first.first(), Some(&crate::protocol::response::ERR)) {
            self.state.next_transaction = false;
        }
    }
}

/// Whether a bound parameter has a character the session's character sets cannot hold
/// ([`route::Identity::cannot_hold`]).
fn cannot_hold(identity: &route::Identity, value: &Value) -> bool {
    match value {
        Value::Text(s, _) => identity.cannot_hold(s.as_bytes()),
        Value::Bytes(b) => identity.cannot_hold(b),
        _ => false,
    }
}

/// How a cached answer's result set is sent: the protocol, the status its terminator
/// carries, whether EOF packets are deprecated, and the sequence id of the command's last
/// packet (the reply goes on from the next).
#[derive(Clone, Copy, Debug)]
pub struct Reply {
    pub binary: bool,
    pub status: StatusFlags,
    pub deprecate_eof: bool,
    pub last_seq: u8,
}

/// Queues the result set of a cached answer on `client` (column count, the captured column
/// definitions, EOF unless deprecated, one packet per row, the terminator), for the caller
/// to flush; or, if a value cannot be encoded exactly as the server would, queues nothing
/// and says why (the read is relayed whole). The rows are encoded into `encoded`, which the
/// caller keeps between answers. A step of the hit path of its own (benches:
/// `proxy/benches/hit.rs`).
pub fn queue_answer<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut PacketIo<S>,
    encoded: &mut Encoded,
    columns: &Columns,
    rows: &[SharedRow],
    reply: Reply,
) -> Result<(), Unencodable> {
    encoded.encode(columns, rows, reply.binary)?;
    let seq = queue_head(client, columns, reply);
    let seq = queue_encoded(client, seq, encoded);
    client.queue_packet(seq, &end_of_rows(reply.status, reply.deprecate_eof));
    Ok(())
}

/// Queues an answer's column count and definitions (and EOF unless deprecated); the next
/// sequence id.
fn queue_head<S: AsyncRead + AsyncWrite + Unpin>(client: &mut PacketIo<S>, columns: &Columns, reply: Reply) -> u8 {
    let mut seq = reply.last_seq.wrapping_add(1);
    if seq == 1 {
        client.queue_framed(&columns.head);
        seq = columns.after_head;
    } else {
        // After a command of several frames: the head framed anew from `seq`.
        let mut head = BytesMut::new();
        seq = frame_head(&mut head, seq, &columns.packets);
        client.queue_framed(&head);
    }
    if !reply.deprecate_eof {
        seq = client.queue_packet(seq, &eof_packet(reply.status));
    }
    seq
}

/// Queues the rows `encoded` holds and empties it; the next sequence id.
fn queue_encoded<S: AsyncRead + AsyncWrite + Unpin>(client: &mut PacketIo<S>, mut seq: u8, encoded: &mut Encoded) -> u8 {
    for row in encoded.rows() {
        seq = client.queue_packet(seq, row);
    }
    encoded.clear();
    seq
}

/// Whether every row of `rows` can be encoded exactly as the server would (each encoded and
/// dropped).
fn encodable(columns: &Columns, rows: &[SharedRow], binary_protocol: bool) -> Result<(), Unencodable> {
    let mut scratch = Vec::new();
    for row in rows {
        scratch.clear();
        if binary_protocol {
            binary::row(&mut scratch, row, &columns.render)?;
        } else {
            text::row(&mut scratch, row, &columns.render)?;
        }
    }
    Ok(())
}

/// The row packets' payloads of one answer, back to back, and where each ends. A session keeps
/// one between answers, so that a hit allocates no buffers for its rows.
#[derive(Default)]
pub struct Encoded {
    payloads: Vec<u8>,
    ends: Vec<usize>,
}

impl Encoded {
    /// Payload bytes and rows kept after an answer; larger buffers are given back, so that a
    /// session that once read a large result does not hold its size for good (at most 24 KiB
    /// per idle session: 24 MiB for 1,000 connections; a hit's rows are usually far smaller).
    const KEEP_BYTES: usize = 16 * 1024;
    const KEEP_ROWS: usize = 1024;

    /// Encodes `rows`, or says why a value cannot be encoded exactly (nothing is sent then:
    /// the read is relayed whole).
    fn encode(&mut self, columns: &Columns, rows: &[SharedRow], binary_protocol: bool) -> Result<(), Unencodable> {
        self.encode_until(columns, rows, binary_protocol, usize::MAX).map(|_| ())
    }

    /// Encodes the first rows of `rows`, until their payloads reach `limit` bytes (at least
    /// one row); how many. Or says why a value cannot be encoded exactly, holding nothing.
    fn encode_until(&mut self, columns: &Columns, rows: &[SharedRow], binary_protocol: bool, limit: usize) -> Result<usize, Unencodable> {
        self.clear();
        self.payloads.reserve(64 * rows.len().min(4096));
        for row in rows {
            if self.payloads.len() >= limit {
                break;
            }
            let encoded = if binary_protocol {
                binary::row(&mut self.payloads, row, &columns.render)
            } else {
                text::row(&mut self.payloads, row, &columns.render)
            };
            if let Err(why) = encoded {
                self.clear();
                return Err(why);
            }
            self.ends.push(self.payloads.len());
        }
        Ok(self.ends.len())
    }

    /// Each row's payload, in order.
    fn rows(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(from, &end)| &self.payloads[from..end])
    }

    /// Empties it, giving back buffers grown past [`Encoded::KEEP_BYTES`] and
    /// [`Encoded::KEEP_ROWS`].
    fn clear(&mut self) {
        if self.payloads.capacity() > Self::KEEP_BYTES {
            self.payloads = Vec::new();
        }
        if self.ends.capacity() > Self::KEEP_ROWS {
            self.ends = Vec::new();
        }
        self.payloads.clear();
        self.ends.clear();
    }
}

/// Entry kept while a relayed command runs.
pub type Relayed = Option<(Arc<Entry>, Instant)>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::text::Column;
    use crate::protocol::column::{ColumnDef, types};

    fn columns() -> Columns {
        let def = ColumnDef { name: "id".into(), charset: 63, length: 20, type_code: types::LONGLONG, flags: 0, decimals: 0 };
        Columns::new(Vec::new(), vec![Column { def, labels: vec![] }])
    }

    #[test]
    fn an_answer_is_encoded_row_by_row_and_large_buffers_are_not_kept() {
        let cols = columns();
        let mut encoded = Encoded::default();
        let rows: Vec<SharedRow> = (0..3).map(|i| SharedRow::from(vec![Value::Int(i * 10)])).collect();
        encoded.encode(&cols, &rows, false).unwrap();
        let got: Vec<&[u8]> = encoded.rows().collect();
        assert_eq!(got, [&[1, b'0'][..], &[2, b'1', b'0'][..], &[2, b'2', b'0'][..]]);
        encoded.clear();
        let small = encoded.payloads.capacity();
        assert!(small > 0, "a small answer's buffer is kept for the next");

        let big: Vec<SharedRow> = (0..20_000).map(|i| SharedRow::from(vec![Value::Int(i)])).collect();
        encoded.encode(&cols, &big, false).unwrap();
        assert_eq!(encoded.rows().count(), 20_000);
        encoded.clear();
        assert!(encoded.payloads.capacity() <= Encoded::KEEP_BYTES && encoded.ends.capacity() <= Encoded::KEEP_ROWS);

        // A value that cannot be encoded leaves nothing behind.
        let bad = [SharedRow::from(vec![Value::Int(1), Value::Int(2)])];
        assert!(encoded.encode(&cols, &bad, false).is_err());
        assert_eq!(encoded.rows().count(), 0);
    }

    /// The packets `queue_answer` sends for `rows` after a command whose last frame had
    /// sequence id `last_seq`, read back as (sequence id, payload).
    async fn sent(columns: &Columns, rows: &[SharedRow], last_seq: u8) -> Vec<(u8, Bytes)> {
        let (a, b) = tokio::io::duplex(1 << 16);
        let (mut a, mut b) = (PacketIo::new(a), PacketIo::new(b));
        let reply = Reply { binary: false, status: StatusFlags(StatusFlags::AUTOCOMMIT), deprecate_eof: true, last_seq };
        queue_answer(&mut a, &mut Encoded::default(), columns, rows, reply).unwrap();
        a.flush().await.unwrap();
        drop(a);
        let mut packets = Vec::new();
        while let Ok(p) = b.read_packet(1 << 20).await {
            packets.push((p.seq, p.payload));
        }
        packets
    }

    #[tokio::test]
    async fn an_answer_goes_on_from_the_commands_sequence_id() {
        let render: Vec<Column> = ["id", "a", "b"]
            .iter()
            .map(|name| Column {
                def: ColumnDef { name: (*name).into(), charset: 63, length: 20, type_code: types::LONGLONG, flags: 0, decimals: 0 },
                labels: vec![],
            })
            .collect();
        let defs: Vec<Bytes> = render.iter().map(|c| Bytes::from(c.def.encode(false))).collect();
        let cols = Columns::new(defs.clone(), render);
        let rows: Vec<SharedRow> = (1..=2).map(|i| SharedRow::from(vec![Value::Int(i), Value::Int(10), Value::Null])).collect();
        // After a command of one frame, the head framed once; after one of several (a long
        // statement), framed anew: the same packets, numbered on from the command's.
        let first = sent(&cols, &rows, 0).await;
        let later = sent(&cols, &rows, 254).await;
        assert_eq!(first.len(), 1 + 3 + 2 + 1, "count, definitions, rows, end");
        assert_eq!(first[0].1[..], [3]);
        assert_eq!(first[1..4].iter().map(|(_, p)| p.clone()).collect::<Vec<_>>(), defs);
        assert_eq!(later.len(), first.len());
        for (i, ((s1, p1), (s2, p2))) in first.iter().zip(&later).enumerate() {
            assert_eq!((*s1, *s2), (1 + i as u8, 255u8.wrapping_add(i as u8)), "packet {i}");
            assert_eq!(p1, p2, "packet {i}");
        }
    }
}
