//! The routing layer: given a query matched to a cache (its verdict and literals, or a
//! prepared statement's bound values) and what the session knows, decide — serve these rows
//! under these column definitions, or relay for this [`RelayReason`].
//!
//! Owns: what a verdict is ([`Verdict`], [`ParamMap`], [`SlotUse`]: produced once per shape
//! by [`super::matcher`], kept by [`crate::matching::VerdictTable`], which bounds them
//! without reading them), the interpretation of verdicts ([`interpret`]), parameter binding ([`Binding`]), the session checks
//! ([`gate`]), the privilege check (via [`super::access`]) and the lookup
//! ([`answer`]). Does not own: the wire (the session writes the packets of an [`Answer`] and
//! relays), the probe that tells who the session is (the session runs it when [`gate`]
//! returns [`Gate::Probe`]).
//!
//! The checks, each a reason to relay, never to answer differently:
//! 1. a transaction is open or autocommit is off (the server's status flags);
//! 2. the session ran a statement freshet cannot follow ([`RelayReason::SessionState`]);
//! 3. replication lags over `[consistency] max_lag` ([`RelayReason::Lag`]);
//! 4. the server's answers about the session (the probe): its default database is the
//!    caches' one, as the server resolved it; its sql_mode, sql_select_limit and character
//!    sets are ones a cached answer is right for;
//! 5. the account (as the server identifies it) may read the cache: learned from the
//!    server's answer to its first read ([`RelayReason::Learning`]), refused while the server
//!    refuses it ([`RelayReason::Denied`]).
//!
//! Only then are the parameters bound and the view read; the first read of a shape in a
//! session character set is relayed to capture the server's column definitions.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use freshet_dataflow::{CompiledQuery, Rows, SqlType, Value};

use super::access::{self, Learning, Memo};
use super::matcher::for_each_slot;
use super::params::literal_value;
use super::{Cache, CacheId, Columns, ColumnsKey, ColumnsMemo, Engine};
use crate::matching::{self, Literal, Query, Weigh};
use crate::protocol::StatusFlags;

/// What one literal slot of a query's fingerprint is for, in a cached verdict (slots in the
/// order of [`crate::matching::Fingerprint::slots`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotUse {
    /// Feeds the view's `?` parameter number `p` (0-based, in the cached query's text order).
    Param(u16),
    /// An IN list whose values each feed the view's `?` number `p` (the view was compiled
    /// with `= ?`, and its plan gives the same rows for a list: checked by the full parse).
    InParam(u16),
    /// An IN list of the cached query's own placeholders `first..first + arity`: the query's
    /// list must have exactly that many values.
    List { first: u16, arity: u16 },
    /// A constant of the cached query: the query's literal must render exactly as this, else
    /// it is relayed (a different value is a different query).
    Const(Box<[u8]>),
    /// An IN list of constants of the cached query: the query's list must be as long and
    /// render exactly as this, value for value, else it is relayed.
    ConstList(Box<[Box<[u8]>]>),
}

/// How a query's extracted literals become the view's lookup parameters: one [`SlotUse`] per
/// fingerprint slot. Filled by the full parse.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParamMap {
    pub slots: Arc<[SlotUse]>,
}

/// What to do with every query of one fingerprint, decided once by the full parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The caches whose query this shape is, in the order they were added. Caches of one shape
    /// differ in their constants (`... AND a > 100`, `... AND a > 2`): a read goes to the first
    /// whose constants it repeats ([`interpret`]), nearly always the only one.
    Cache(Arc<[Match]>),
    Relay {
        reason: Arc<str>,
    },
}

/// A cache a shape is, and how the shape's literals map onto its view's parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    pub id: CacheId,
    pub params: ParamMap,
}

impl Verdict {
    pub fn relay(reason: &str) -> Verdict {
        Verdict::Relay { reason: Arc::from(reason) }
    }

    /// The verdict of a shape that is one cache's.
    pub fn cache(id: CacheId, params: ParamMap) -> Verdict {
        Verdict::Cache([Match { id, params }].into())
    }

    /// The caches a read of this shape may go to (none if it is relayed).
    pub fn matches(&self) -> &[Match] {
        match self {
            Verdict::Cache(matches) => matches,
            Verdict::Relay { .. } => &[],
        }
    }
}

impl Weigh for Verdict {
    fn heap_bytes(&self) -> usize {
        match self {
            Verdict::Relay { reason } => reason.len(),
            Verdict::Cache(matches) => {
                matches
                    .iter()
                    .flat_map(|m| m.params.slots.iter())
                    .map(|s| {
                        std::mem::size_of::<SlotUse>()
                            + match s {
                                SlotUse::Const(c) => c.len(),
                                SlotUse::ConstList(l) => l.iter().map(|c| std::mem::size_of_val(c) + c.len()).sum(),
                                _ => 0,
                            }
                    })
                    .sum::<usize>()
                    + std::mem::size_of_val::<[Match]>(matches)
            }
        }
    }
}

/// A query shape's verdict and statistics.
pub type Entry = matching::Entry<Verdict>;
/// The engine's table of verdicts.
pub type VerdictTable = matching::VerdictTable<Verdict>;

/// Why a read that could have been cached went to the upstream. A bounded set: these are
/// metric labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelayReason {
    /// The query cannot be cached (session-dependent, unsupported SQL, ...).
    NotCacheable,
    /// Cacheable, but no cache is configured for it.
    NoCache,
    /// Inside a transaction or with autocommit off.
    InTransaction,
    /// The session ran a statement freshet cannot follow, changed a setting that can change
    /// results, or the server says its database, sql_mode, sql_select_limit or character set
    /// is not one a cached answer is right for.
    SessionState,
    /// Replication lag over `[consistency] max_lag`, or the binlog stream is down.
    Lag,
    /// The fill did not arrive within `[fill] timeout`.
    FillTimeout,
    /// A value cannot be rendered exactly as the server would.
    Unencodable,
    /// A parameter cannot be used as a key (type, charset).
    Parameter,
    /// A constant differs from the cached query's.
    Constant,
    /// The first read of this shape: its answer is relayed to capture the column definitions.
    Capture,
    /// The cache's view is gone (DDL made it uncacheable) or was never built.
    Unavailable,
    /// The account's first read of this cache (since privileges last changed): the server
    /// answers it, and its answer says whether the account may read the cache.
    Learning,
    /// The server refused this account this cache: it answers each read itself.
    Denied,
    /// The session wrote, and the views had not applied its write within
    /// `[consistency] ryw_timeout` (read-your-writes, `cache::ryw`).
    OwnWrite,
    /// A partition the read needs weighed more than `[memory] limit` when it was last filled:
    /// it is not kept, and not filled again for a minute.
    TooLarge,
    /// As many of the cache's keys as the writer takes wait for fills already (a burst of
    /// reads of cold keys): the read is relayed at once rather than queued behind them.
    FillBacklog,
    /// The last fill of the cache's view (its domain) failed and none completed since (the
    /// server refuses its fills for now): a read that misses is relayed at once.
    FillFailing,
    /// An IN list's partitions showed different states of the server (a fill from a newer
    /// state than the stream had applied) for all of `[fill] timeout`: merged, they could
    /// show part of a transaction.
    Unsettled,
    /// A partition of the read is written about as fast as it is filled: its last fill could
    /// not be installed (the server's snapshot may disagree with its position on those
    /// writes), and for a moment its reads are the server's.
    FillRaced,
}

impl RelayReason {
    pub const ALL: [RelayReason; 19] = [
        Self::NotCacheable,
        Self::NoCache,
        Self::InTransaction,
        Self::SessionState,
        Self::Lag,
        Self::FillTimeout,
        Self::Unencodable,
        Self::Parameter,
        Self::Constant,
        Self::Capture,
        Self::Unavailable,
        Self::Learning,
        Self::Denied,
        Self::OwnWrite,
        Self::TooLarge,
        Self::FillBacklog,
        Self::FillFailing,
        Self::Unsettled,
        Self::FillRaced,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Self::NotCacheable => "not_cacheable",
            Self::NoCache => "no_cache",
            Self::InTransaction => "in_transaction",
            Self::SessionState => "session_state",
            Self::Lag => "lag",
            Self::FillTimeout => "fill_timeout",
            Self::Unencodable => "unencodable",
            Self::Parameter => "parameter",
            Self::Constant => "constant",
            Self::Capture => "capture",
            Self::Unavailable => "unavailable",
            Self::Learning => "learning_privileges",
            Self::Denied => "denied",
            Self::OwnWrite => "own_write",
            Self::TooLarge => "too_large",
            Self::FillBacklog => "fill_backlog",
            Self::FillFailing => "fill_failing",
            Self::Unsettled => "unsettled",
            Self::FillRaced => "fill_raced",
        }
    }

    /// The index in [`RelayReason::ALL`] (a metric slot).
    pub fn index(self) -> usize {
        RelayReason::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// Who the server says a session is, and what it says about the session's state (the
/// probe's answer; see `session::probe`).
#[derive(Debug, Clone)]
pub struct Identity {
    /// `CURRENT_USER()` (user@host as the server matched the login), plus `/role` when a
    /// role is active, after the length of the first (names may hold `@` and `/`): the key
    /// privileges are learned under.
    pub account: Arc<str>,
    pub user: String,
    pub host: String,
    /// `DATABASE()`: the default database as the server resolved it.
    pub database: Option<String>,
    /// `lower_case_table_names` is not 0: database names compare without case.
    pub case_insensitive_names: bool,
    /// Why a cached answer would not be the server's for this session (sql_mode,
    /// sql_select_limit, character sets, sql_auto_is_null), if so.
    pub unfit: Option<String>,
    /// The session's character sets, collation and `div_precision_increment`, hashed: what
    /// the server's column definitions depend on besides the query (part of their key).
    pub charset: u64,
    /// The session's sql_mode, client and connection character sets and collation, hashed:
    /// how the server reads a statement's text (a prepared statement's once, at its prepare).
    pub text_reading: u64,
    /// How the session reads what some views depend on.
    pub reading: Reading,
    /// The session's sql_mode changes how text is read (ANSI, ANSI_QUOTES,
    /// NO_BACKSLASH_ESCAPES): its statements may be misread by the tokenizer here.
    pub misread: bool,
    /// The session's client character set is one whose characters the tokenizer may misread
    /// (gbk, big5, sjis, cp932, gb18030: `session::misreading::misread_charset`).
    pub misread_charset: bool,
    /// The session's client or connection character set is utf8mb3, which holds no character
    /// past U+FFFF: the server refuses such a literal against a utf8mb4 column, or reads it as
    /// `?`, where the view would look it up as it is ([`Identity::cannot_hold`]).
    pub narrow_text: bool,
    /// How long the upstream connection may go without a command, while reads are answered
    /// from views, before freshet pings the server to keep the session alive (half its
    /// `wait_timeout`).
    pub keep_alive: std::time::Duration,
}

impl Identity {
    /// Whether `text` (a statement, or a parameter's bytes) has a character the session's
    /// character sets cannot hold: the server reads it otherwise than a view would, so the
    /// read is relayed. Only a utf8mb3 session's texts are searched.
    pub fn cannot_hold(&self, text: &[u8]) -> bool {
        self.narrow_text && text.iter().any(|&b| b >= 0xF0)
    }
}

/// How a session reads what some views depend on, as the server says (the probe). A view
/// computes as a session with the server's defaults and UTC would; a session that reads
/// otherwise is relayed for the views that depend on it, and served by the others.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// The session reads TIMESTAMPs in UTC, as views hold them
    /// ([`freshet_dataflow::CompiledQuery::reads_timestamp`]).
    pub utc: bool,
    /// The session's `div_precision_increment` is 4, the decimals a view's quotients have
    /// beyond their dividend's ([`freshet_dataflow::CompiledQuery::divides`]).
    pub default_division: bool,
    /// The session's `collation_connection` is general_ci, the collation a view gives text
    /// made of literals alone ([`freshet_dataflow::CompiledQuery::literal_text`]).
    pub general_ci: bool,
    /// The session's sql_mode has neither NO_ZERO_DATE nor NO_ZERO_IN_DATE, under which
    /// `DATE()` is NULL for some dates a view gives
    /// ([`freshet_dataflow::CompiledQuery::converts_dates`]).
    pub zero_dates: bool,
}

impl Reading {
    /// As a view computes: every view fits.
    pub const VIEWS: Reading = Reading { utc: true, default_division: true, general_ci: true, zero_dates: true };

    /// True if a view compiled as `q` answers this session as the server would.
    pub fn fits(self, q: &freshet_dataflow::CompiledQuery) -> bool {
        (self.utc || !q.reads_timestamp)
            && (self.default_division || !q.divides)
            && (self.general_ci || !q.literal_text)
            && (self.zero_dates || !q.converts_dates)
    }
}

impl Identity {
    /// True if the session's default database is `database` as the server resolves names.
    pub fn in_database(&self, database: &str) -> bool {
        self.database.as_deref().is_some_and(|d| d == database || (self.case_insensitive_names && d.eq_ignore_ascii_case(database)))
    }
}

/// What a session tells the gate.
pub struct Standing<'a> {
    pub status: StatusFlags,
    /// A statement the session ran cannot be followed.
    pub unfollowed: bool,
    /// None: the server has not been asked yet (or its answer is stale).
    pub identity: Option<&'a Identity>,
    pub memo: &'a mut Memo,
    /// [`access::Access::generation`] when the server last authenticated the session (None
    /// if the engine did not exist yet): what it may read may be older than that.
    pub login_generation: Option<u64>,
    /// When the server last authenticated the session: its global and database privileges
    /// are as of then, unless `reread`.
    pub login_at: Instant,
    /// The server read the session's privileges again since (USE, COM_INIT_DB, SET ROLE):
    /// they are of that moment, not its login's, so what it learns is its own.
    pub reread: bool,
    /// When the read arrived.
    pub now: Instant,
}

/// The gate's decision for a read matched to a cache.
pub enum Gate {
    /// Checks passed: bind, look up, answer.
    Open(Arc<Cache>),
    /// Ask the server who the session is first, then call the gate again.
    Probe,
    /// Relay; if `learn`, the reply's outcome teaches the account's right to the cache.
    Closed(RelayReason, Option<Learning>),
}

/// The gate's decision once the probe it asked for (if any) has run.
pub enum Admission {
    /// Bind, look up, answer from this cache.
    Open(Arc<Cache>),
    /// Relay, for this reason.
    Closed(RelayReason),
}

/// The routing layer's decision for one read: serve rows, or relay.
pub enum Decision {
    /// Serve `answer` from `cache`; `key` says which column definitions (and protocol) it
    /// is encoded for.
    Serve {
        cache: Arc<Cache>,
        answer: Answer,
        key: ColumnsKey,
    },
    Relay(Relay),
}

impl Decision {
    /// The lookup's outcome for a read the gate let through.
    pub fn of(cache: Arc<Cache>, key: ColumnsKey, looked_up: Result<Answer, Relay>) -> Decision {
        match looked_up {
            Ok(answer) => Decision::Serve { cache, answer, key },
            Err(relay) => Decision::Relay(relay),
        }
    }
}

impl From<RelayReason> for Decision {
    fn from(reason: RelayReason) -> Decision {
        Decision::Relay(reason.into())
    }
}

/// The session checks and the privilege check for a read matched to cache `id`.
pub fn gate(engine: &Engine, id: CacheId, s: Standing<'_>) -> Gate {
    if s.status.has(StatusFlags::IN_TRANS) || !s.status.has(StatusFlags::AUTOCOMMIT) {
        return Gate::Closed(RelayReason::InTransaction, None);
    }
    if s.unfollowed {
        return Gate::Closed(RelayReason::SessionState, None);
    }
    if !engine.fresh() {
        return Gate::Closed(RelayReason::Lag, None);
    }
    let Some(identity) = s.identity else { return Gate::Probe };
    if identity.unfit.is_some() || !identity.in_database(&engine.settings.database) {
        return Gate::Closed(RelayReason::SessionState, None);
    }
    let Some(cache) = engine.by_id(id) else { return Gate::Closed(RelayReason::Unavailable, None) };
    let login = access::Login { generation: s.login_generation, at: s.login_at };
    match s.memo.check(&engine.access, &identity.account, id, login, s.now) {
        access::Verdict::Allowed => Gate::Open(cache),
        access::Verdict::Denied => Gate::Closed(RelayReason::Denied, None),
        access::Verdict::Unknown { generation } => {
            // MariaDB keeps a session's global and database privileges from its login: what a
            // session older than the last privilege change may read is its own, not its
            // account's; and what a session younger than it learns holds for its account
            // only as long from its login as anything learned holds (a change the binlog
            // does not carry may have come since).
            let login = (s.login_generation == Some(generation) && !s.reread).then_some(s.login_at);
            Gate::Closed(RelayReason::Learning, Some(Learning::new(identity.account.clone(), id, generation, login)))
        }
    }
}

/// A verdict's meaning for `query`: the cache and its parameter map, or why it is relayed.
/// Of several caches of the shape, the first whose constants the query repeats; if none, the
/// first (whose binding then relays the read, `Constant`).
pub fn interpret<'v>(verdict: &'v Verdict, query: &Query<'_>) -> Result<(CacheId, &'v ParamMap), RelayReason> {
    // A text's own reason to be the server's comes first. A verdict is its shape's, taken for
    // the first text of the shape: should the fingerprint take a text the server reads
    // otherwise for that shape (a bare `current_role` for a quoted column's name, until session
    // 53), the verdict would answer it from the cache.
    if query.relay.is_some() {
        return Err(RelayReason::NotCacheable);
    }
    match verdict {
        Verdict::Cache(matches) => {
            let chosen = match &matches[..] {
                [] => return Err(RelayReason::NoCache),
                [only] => only,
                [first, ..] => matches.iter().find(|m| constants_repeated(query, &m.params)).unwrap_or(first),
            };
            Ok((chosen.id, &chosen.params))
        }
        v if super::matcher::is_no_cache(v) => Err(RelayReason::NoCache),
        Verdict::Relay { .. } => Err(RelayReason::NotCacheable),
    }
}

/// The cache that answers `query`, if any: [`interpret`]'s choice, if the query repeats its
/// constants. A read leaves that check to its binding (the only cache of a shape is taken
/// unchecked, and a read with none of its caches' constants goes to the first, to be relayed);
/// EXPLAIN CACHE must not show a cache whose binding would relay the read.
pub fn answering(verdict: &Verdict, query: &Query<'_>) -> Option<CacheId> {
    let (id, params) = interpret(verdict, query).ok()?;
    constants_repeated(query, params).then_some(id)
}

/// Whether `query` has the constants of the cached query `map` describes, slot for slot (and
/// its lists of placeholders' lengths: another is relayed as another constant would be).
fn constants_repeated(query: &Query<'_>, map: &ParamMap) -> bool {
    let (mut uses, mut repeated) = (map.slots.iter(), true);
    for_each_slot(query, |_, literals| {
        repeated &= match uses.next() {
            Some(SlotUse::Const(expected)) => is_constant(literals, expected),
            Some(SlotUse::ConstList(expected)) => is_constant_list(literals, expected),
            Some(SlotUse::List { arity, .. }) => literals.len() == usize::from(*arity),
            _ => true,
        };
    });
    repeated
}

/// Whether a slot's `literals` are the cached query's constant `expected`, as written there.
fn is_constant(literals: &[Literal<'_>], expected: &[u8]) -> bool {
    let [l] = literals else { return false };
    renders_as(l, expected)
}

/// Whether a list slot's `literals` are the cached query's list of constants, as long and
/// each as written there.
fn is_constant_list(literals: &[Literal<'_>], expected: &[Box<[u8]>]) -> bool {
    literals.len() == expected.len() && literals.iter().zip(expected).all(|(l, e)| renders_as(l, e))
}

/// Whether `l` is a value (not a placeholder) that renders as `expected`.
fn renders_as(l: &Literal<'_>, expected: &[u8]) -> bool {
    if matches!(l, Literal::Placeholder(_)) {
        return false;
    }
    let mut rendered = Vec::new();
    l.render(&mut rendered);
    rendered == expected
}

/// The binding of a query's literals to the parameters of `cache`'s view.
pub fn bind(cache: &Cache, query: &Query<'_>, map: &ParamMap) -> Result<Binding, RelayReason> {
    let live = cache.live().map_err(|_| RelayReason::Unavailable)?;
    Binding::new(query, map, live.reader.query())
}

/// Rows to send and the column definitions to send them under.
pub struct Answer {
    pub columns: Arc<Columns>,
    pub rows: Rows,
}

/// Relaying instead of answering, and whether to capture the reply's column definitions.
pub struct Relay {
    pub reason: RelayReason,
    pub capture: Option<ColumnsKey>,
}

impl From<RelayReason> for Relay {
    fn from(reason: RelayReason) -> Relay {
        Relay { reason, capture: None }
    }
}

/// Binds and looks up a read the gate let through. `bound`: the execute's parameters (empty
/// for text); `memo`: the session's last column definitions; `reading`: how the session reads
/// what some views depend on ([`Identity::reading`]). Waits at most the fill timeout.
pub async fn answer(
    engine: &Engine,
    cache: &Cache,
    binding: &Binding,
    bound: &[Value],
    key: ColumnsKey,
    memo: &mut ColumnsMemo,
    reading: Reading,
) -> Result<Answer, Relay> {
    // Asked of the live view (a DDL may have made a column a TIMESTAMP), and only for
    // sessions that read otherwise than views compute, so that a usual hit pays nothing.
    if reading != Reading::VIEWS && cache.live().is_ok_and(|l| !reading.fits(l.reader.query())) {
        return Err(RelayReason::SessionState.into());
    }
    let values = binding.values(bound)?;
    let Some(columns) = engine.columns_memo(memo, &key) else {
        // Relay this one to learn the column definitions; start its fill meanwhile. Its
        // partitions are asked for as a warm-up asks (`Reader::warm`), not looked up: a
        // lookup of a filled one would count this relayed read as the view's hit.
        if let Ok(live) = cache.live() {
            if let Ok(keys) = live.reader.partition_keys(binding.slots.as_deref(), &values) {
                let holes: Vec<_> = keys.into_iter().filter(|k| matches!(live.reader.warm(k), Ok(false))).collect();
                if !holes.is_empty() {
                    cache.hot.missed(&holes);
                }
            }
            engine.wake_writer();
        }
        return Err(Relay { reason: RelayReason::Capture, capture: Some(key) });
    };
    if !columns.encodable.load(Ordering::Relaxed) {
        return Err(RelayReason::Unencodable.into());
    }
    let rows = engine.lookup(cache, &values, binding.slots.as_deref()).await?;
    Ok(Answer { columns, rows })
}

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
        let mut b = Binding { sources: vec![Source::Unset; view.n_params], slots: None };
        let mut uses = map.slots.iter();
        let mut failed = None;
        for_each_slot(query, |_, literals| {
            if failed.is_some() {
                return;
            }
            let outcome = match uses.next() {
                Some(usage) => b.bind_slot(usage, literals, view),
                None => Err(RelayReason::Parameter),
            };
            if let Err(r) = outcome {
                failed = Some(r);
            }
        });
        if let Some(r) = failed {
            return Err(r);
        }
        if b.sources.iter().any(|s| matches!(s, Source::Unset)) {
            return Err(RelayReason::Parameter);
        }
        b.drop_replaced();
        Ok(b)
    }

    fn bind_slot(&mut self, usage: &SlotUse, literals: &[Literal<'_>], view: &CompiledQuery) -> Result<(), RelayReason> {
        let sources = &mut self.sources;
        match usage {
            SlotUse::Param(p) => {
                let [l] = literals else { return Err(RelayReason::Parameter) };
                *sources.get_mut(usize::from(*p)).ok_or(RelayReason::Parameter)? = source(l)?;
            }
            SlotUse::Const(expected) => {
                if !is_constant(literals, expected) {
                    return Err(RelayReason::Constant);
                }
            }
            SlotUse::ConstList(expected) => {
                if !is_constant_list(literals, expected) {
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
                let layout = self.slots.get_or_insert_with(|| view.param_slots.clone());
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
    }

    /// `Reader::lookup_in` takes the parameters that feed no key column as the range
    /// filters' ones, in order: the replaced `?`s must go, and the indexes after them shift
    /// down.
    fn drop_replaced(&mut self) {
        let Some(layout) = self.slots.as_mut() else { return };
        let mut index = Vec::with_capacity(self.sources.len());
        let mut next = 0;
        for s in &self.sources {
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
        self.sources.retain(|s| !matches!(s, Source::Replaced));
    }

    /// The parameter values, with `bound` for the placeholders (the execute's; none for a
    /// text query, whose literals were bound by [`Binding::new`]).
    ///
    /// An execute whose parameters are the view's, in order (`WHERE id = ?`), gets them as
    /// they came, without a copy.
    pub fn values<'b>(&self, bound: &'b [Value]) -> Result<Cow<'b, [Value]>, RelayReason> {
        let in_order = self.sources.len() == bound.len()
            && self.sources.iter().enumerate().all(|(k, s)| matches!(s, Source::Bound(i) if *i as usize == k));
        if in_order {
            return Ok(Cow::Borrowed(bound));
        }
        self.sources
            .iter()
            .map(|s| match s {
                Source::Fixed(v) => Ok(v.clone()),
                Source::Bound(i) => bound.get(*i as usize).cloned().ok_or(RelayReason::Parameter),
                Source::Unset | Source::Replaced => Err(RelayReason::Parameter),
            })
            .collect::<Result<Vec<Value>, RelayReason>>()
            .map(Cow::Owned)
    }
}

fn source(l: &Literal<'_>) -> Result<Source, RelayReason> {
    match l {
        Literal::Placeholder(n) => Ok(Source::Bound(*n)),
        other => literal_value(other).map(Source::Fixed).map_err(|_| RelayReason::Parameter),
    }
}
