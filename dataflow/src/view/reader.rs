//! The read side: [`Reader`] handles, lookups, parameter coercion, published entries and the
//! per-view counters.
//!
//! Owns: what a lookup does (parameters to partition keys, one map read per key under a
//! shard's read lock, read-time range filters, merging several partitions' rows) and
//! [`ViewStats`]. Does not own:
//! building or publishing entries (the writer, in the parent module).
//!
//! Invariants: a lookup never waits for the writer's work: it clones entries (a count of their
//! rows) out of the reader cache under one shard's read lock (which the writer holds only for a
//! probe-sized step), plus the short miss-queue mutex on a miss; a
//! key is built from parameters coerced to the key column's type and collation, so it hashes
//! exactly like the base values that were partitioned under it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtOrd};
use std::sync::{Arc, Mutex};

use super::cache::ReaderCache;
use crate::compile::{CompiledQuery, KeyColumn};
use crate::expr::{Expr, is_true, parse_temporal};
use crate::fill::ViewId;
use crate::ops::{Key, sort_shared_rows};
use crate::plan::Node;
use crate::schema::SqlType;
use crate::value::{Rows, SharedRow, Value, row_heap};

/// A size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

/// Statistics of one view, as plain numbers (the proxy renders them as Prometheus text).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ViewStats {
    /// Filled partitions.
    pub keys: u64,
    /// Bytes held by filled partitions (operator state + reader rows).
    pub bytes: u64,
    /// Lookups answered from memory.
    pub hits: u64,
    /// Lookups that found at least one hole.
    pub misses: u64,
    /// Partitions filled.
    pub fills: u64,
    /// Partitions evicted (by budget or explicitly).
    pub evictions: u64,
}

#[derive(Default, Debug)]
pub(super) struct Counters {
    /// Set when the view is dropped (e.g. after DDL); its readers then answer `NoView`.
    pub(super) dropped: AtomicBool,
    pub(super) keys: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) hits: AtomicU64,
    pub(super) misses: AtomicU64,
    pub(super) fills: AtomicU64,
    pub(super) evictions: AtomicU64,
}

/// A reader entry's key in the cache: its view and its partition's key. A key of one column
/// (nearly every view's) is held inline, without a block of its own, so a read of one
/// partition builds it without allocating. The form follows the key's width whatever builds
/// it ([`EntryKey::new`], [`EntryKey::of`]), so a partition always has one key in the cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum EntryKey {
    One(u32, Value),
    Wide(u32, Key),
}

impl EntryKey {
    pub(super) fn new(view: u32, key: Key) -> EntryKey {
        match <[Value; 1]>::try_from(Vec::from(key)) {
            Ok([value]) => EntryKey::One(view, value),
            Err(key) => EntryKey::Wide(view, key.into_boxed_slice()),
        }
    }

    pub(super) fn of(view: u32, key: &[Value]) -> EntryKey {
        match key {
            [value] => EntryKey::One(view, value.clone()),
            _ => EntryKey::Wide(view, key.into()),
        }
    }

    pub(super) fn view(&self) -> u32 {
        match self {
            EntryKey::One(view, _) | EntryKey::Wide(view, _) => *view,
        }
    }

    pub(super) fn into_key(self) -> Key {
        match self {
            EntryKey::One(_, value) => Box::new([value]),
            EntryKey::Wide(_, key) => key,
        }
    }

    /// The heap it holds besides itself.
    pub(super) fn heap_bytes(&self) -> usize {
        match self {
            EntryKey::One(_, value) => value.heap_bytes(),
            EntryKey::Wide(_, key) => row_heap(key),
        }
    }
}

/// A published reader entry: the partition's result rows, ordered, visible columns only. The
/// cache holds it by value, and a read clones it: one count of the rows.
#[derive(Clone, Debug)]
pub struct Entry {
    pub(super) rows: Rows,
    pub(super) weight: u32,
    pub(super) generation: u64,
    /// The rows are a fill's, from a newer state of the server than the writer had applied
    /// when they were published: a read of this partition alone may show them, one that
    /// merges it with others may not (they show the applied state). Cleared by republishing
    /// once the writer has applied the fill's position.
    pub(super) ahead: bool,
}

pub(super) struct Shared {
    pub(super) cache: ReaderCache,
    pub(super) misses: Mutex<HashMap<u32, HashSet<Key>>>,
    /// Odd while the writer republishes a step's partitions (one by one), even between: a
    /// read of several partitions that saw it odd, or saw it change, may have taken some of
    /// them before the step's transactions and others after ([`Shared::publishing`]).
    pub(super) publications: AtomicU64,
}

impl Shared {
    pub(super) fn new(cache: ReaderCache) -> Shared {
        Shared { cache, misses: Mutex::new(HashMap::new()), publications: AtomicU64::new(0) }
    }

    /// Runs `publish`, the republication of a step's partitions, as one change for reads of
    /// several partitions: they retry rather than merge entries from both sides of it. Writer
    /// only.
    pub(super) fn publishing<T>(&self, publish: impl FnOnce() -> T) -> T {
        // SeqCst on both sides: the entries the writer puts in between are ordered after the
        // first increment and before the second, for any reader that sees either.
        self.publications.fetch_add(1, AtOrd::SeqCst);
        let out = publish();
        self.publications.fetch_add(1, AtOrd::SeqCst);
        out
    }
}

/// How many times a read of several partitions looks again when the writer republished some
/// meanwhile, before it reports [`LookupError::Unsettled`] (its caller waits and asks again).
const SETTLE_TRIES: usize = 4;

/// Result of a lookup.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// Every partition was present: the result rows, in the query's column order (and
    /// row order, if it has ORDER BY).
    Hit(Rows),
    /// Some partitions are holes; they have been queued for filling. Answer this read some
    /// other way (wait for the fill, or relay to the upstream).
    Miss(Vec<Key>),
}

/// The most keys of one view recorded for filling and not yet taken by the writer
/// ([`crate::Dataflow::fill_requests`], which then holds at most `max_pending` of a domain's in
/// flight): what one burst of reads of cold keys can queue, and what the writer sorts at each
/// pass over them.
pub const MAX_WAITING_KEYS: usize = 4096;

/// Why a lookup cannot be answered from the cache at all (relay it instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// Wrong number of parameters.
    #[error("expected {expected} parameters, got {got}")]
    ParamCount { expected: usize, got: usize },
    /// A parameter cannot be compared with its column the way the server would by key
    /// equality (e.g. a number against a text column, which MySQL compares numerically).
    #[error("parameter {index} cannot be used as a key for column {column}")]
    ParamType { index: usize, column: String },
    /// The view was dropped.
    #[error("no such view")]
    NoView,
    /// A partition of the read weighed more than the whole memory budget when it was last
    /// filled: it is not kept, and not filled again for a while.
    #[error("a partition larger than the memory limit")]
    TooLarge,
    /// A partition of the read was being written while it was filled, so fast that the fill
    /// could not be installed (its data may disagree with its position on those writes): it
    /// is not filled again for a moment.
    #[error("a partition written as fast as it is filled")]
    Raced,
    /// As many of the view's keys as [`MAX_WAITING_KEYS`] already wait for a fill: the read
    /// is not added to them (it would wait behind them, and make the writer's every pass over
    /// them longer).
    #[error("too many keys of the view wait for a fill")]
    Backlog,
    /// Every key value is NULL (so no partition matches) and the query aggregates without
    /// GROUP BY, whose answer over no rows is one row (`COUNT(*)` = 0) the cache does not
    /// hold: relay it.
    #[error("a NULL key parameter on an aggregate without GROUP BY")]
    NullKey,
    /// [`Reader::lookup_in`]: the parameter slots do not name each parameter at most once,
    /// with at least one per key column of the view.
    #[error("the parameter slots do not match the view's key columns")]
    ParamSlots,
    /// [`Reader::lookup_in`] named several partitions of a view whose result for several keys
    /// is not the merge of each key's result (see [`CompiledQuery::mergeable`]).
    #[error("the view's results for several keys cannot be merged (LIMIT, or an aggregate not grouped by the key)")]
    NotMergeable,
    /// The partitions of a read of several show different states of the server: the writer
    /// was republishing them (a step's transactions), or one holds a fill's rows from a newer
    /// state than the others, until the writer applies the stream up to it. Merging them
    /// could show part of a transaction; ask again shortly (or relay).
    #[error("the partitions read show different states of the server")]
    Unsettled,
    /// The IN lists name more partitions than one lookup may read ([`MAX_LOOKUP_KEYS`]).
    #[error("the lookup names {keys} partition keys, more than {max}")]
    TooManyKeys { keys: usize, max: usize },
}

/// A cloneable, thread-safe handle for reading one view.
#[derive(Clone)]
pub struct Reader {
    pub(super) view: ViewId,
    pub(super) q: Arc<CompiledQuery>,
    pub(super) shared: Arc<Shared>,
    pub(super) counters: Arc<Counters>,
}

impl Reader {
    /// The compiled query this reader serves.
    pub fn query(&self) -> &CompiledQuery {
        &self.q
    }

    /// Looks up the result for `params` (one value per `?`, in text order). Never waits for the
    /// writer's work (at most for one probe-sized step in a shard: see the reader cache).
    pub fn lookup(&self, params: &[Value]) -> Result<Lookup, LookupError> {
        if self.counters.dropped.load(AtOrd::Acquire) {
            return Err(LookupError::NoView);
        }
        let keys = lookup_keys(&self.q, &self.q.param_slots, params)?;
        let mut filter_params = Vec::with_capacity(self.q.read_filters.len());
        for f in &self.q.read_filters {
            filter_params.push(params.get(f.param).ok_or(LookupError::ParamCount { expected: self.q.n_params, got: params.len() })?);
        }
        self.read(keys, &filter_params)
    }

    /// Like [`lookup`](Reader::lookup), but the caller says which of `params` feed each key
    /// column: `param_slots` has one list per key column of the view, in the view's key order,
    /// each with any number (at least one) of parameter indexes; the partitions read are the
    /// cartesian product of the lists' values (deduplicated; NULLs match nothing) and their
    /// rows are merged exactly as for a view compiled with `IN (?, ...)` (re-sorted by the
    /// query's ORDER BY). The parameters that feed no key column feed the view's range
    /// filters (`col > ?`), in order: the k-th of them (by index) is the k-th filter parameter
    /// of the view's text.
    ///
    /// This answers `key IN (a, b, c)` from a view compiled as `key = ?`. It is correct only
    /// when the view compiled from the IN text has the same plan except for the arity: check
    /// [`CompiledQuery::same_plan_except_arity`] (IN query against this reader's query) once
    /// per query shape, and pass the IN query's `param_slots`. As a safety net, a lookup that
    /// names several partitions of a view that is not
    /// [`mergeable`](CompiledQuery::mergeable) (LIMIT, an aggregate not grouped by the key,
    /// ...) is refused with [`LookupError::NotMergeable`] rather than answered wrongly.
    pub fn lookup_in(&self, param_slots: &[Vec<usize>], params: &[Value]) -> Result<Lookup, LookupError> {
        if self.counters.dropped.load(AtOrd::Acquire) {
            return Err(LookupError::NoView);
        }
        let q = &self.q;
        let mut used = vec![false; params.len()];
        let mut bad_slots = param_slots.len() != q.key_columns.len() || param_slots.iter().any(Vec::is_empty);
        for &i in param_slots.iter().flatten() {
            match used.get_mut(i) {
                Some(u) if !*u => *u = true,
                // Out of range, or named twice.
                _ => bad_slots = true,
            }
        }
        if bad_slots {
            return Err(LookupError::ParamSlots);
        }
        let rest: Vec<&Value> = params.iter().zip(&used).filter(|(_, u)| !**u).map(|(p, _)| p).collect();
        if rest.len() != q.read_filters.len() {
            let expected = param_slots.iter().map(Vec::len).sum::<usize>() + q.read_filters.len();
            return Err(LookupError::ParamCount { expected, got: params.len() });
        }
        let filter_params: Vec<&Value> = q.renumbered_filters().iter().map(|f| rest[f.param]).collect();
        let keys = lookup_keys(q, param_slots, params)?;
        if keys.len() > 1 && !q.mergeable {
            return Err(LookupError::NotMergeable);
        }
        self.read(keys, &filter_params)
    }

    /// The partition keys a lookup with these parameters reads (`param_slots` as for
    /// [`lookup_in`](Reader::lookup_in), None for [`lookup`](Reader::lookup)): what a caller
    /// remembers of a read to [`warm`](Reader::warm) it again later.
    pub fn partition_keys(&self, param_slots: Option<&[Vec<usize>]>, params: &[Value]) -> Result<Vec<Key>, LookupError> {
        lookup_keys(&self.q, param_slots.unwrap_or(&self.q.param_slots), params).map(Keys::into_vec)
    }

    /// Asks for one partition by its key, as a read would but without counting as one: true
    /// if it is present, false if it is a hole, now queued for filling like a read's miss.
    /// The values are coerced to the key columns again (a key remembered from another run may
    /// no longer fit the view: then it is refused like a read's parameter); a key with a NULL
    /// names no partition and counts as present.
    pub fn warm(&self, key: &[Value]) -> Result<bool, LookupError> {
        if self.counters.dropped.load(AtOrd::Acquire) {
            return Err(LookupError::NoView);
        }
        if key.len() != self.q.key_columns.len() {
            return Err(LookupError::ParamCount { expected: self.q.key_columns.len(), got: key.len() });
        }
        let mut coerced = Vec::with_capacity(key.len());
        for (i, (v, col)) in key.iter().zip(&self.q.key_columns).enumerate() {
            match coerce_param(v, col, i)? {
                Some(v) => coerced.push(v),
                None => return Ok(true),
            }
        }
        let ek = EntryKey::new(self.view.0, coerced.into_boxed_slice());
        if self.shared.cache.contains_key(&ek) {
            return Ok(true);
        }
        if self.shared.cache.too_heavy(&ek) {
            return Err(LookupError::TooLarge);
        }
        if let Ok(mut m) = self.shared.misses.lock() {
            m.entry(self.view.0).or_default().insert(ek.into_key());
        }
        Ok(false)
    }

    /// Reads the partitions `keys` and merges their rows; `filter_params` has one value per
    /// read filter of the query.
    fn read(&self, keys: Keys, filter_params: &[&Value]) -> Result<Lookup, LookupError> {
        let mut keys = match keys {
            Keys::One(key) => return self.read_one(EntryKey::new(self.view.0, key), filter_params),
            Keys::Value(value) => return self.read_one(EntryKey::One(self.view.0, value), filter_params),
            Keys::Many(keys) => keys,
        };
        if keys.is_empty() {
            // A NULL parameter: `col = NULL` matches nothing. Without GROUP BY an aggregate
            // still answers one row over no rows (`COUNT(*)` is 0), which no partition holds.
            if self.q.root.post_order().iter().any(|n| matches!(n, Node::Aggregate { global: true, .. })) {
                return Err(LookupError::NullKey);
            }
            return Ok(self.hit(Rows::Empty));
        }
        if self.q.order.is_empty() && keys.len() > 1 {
            // Several partitions of an unordered view (`key IN (9, 3, 7)`): merged in key
            // order, as a server reading the key's index returns them.
            keys.sort_by(|a, b| {
                a.iter().zip(b.iter()).map(|(x, y)| x.cmp_total(y)).find(|c| c.is_ne()).unwrap_or(std::cmp::Ordering::Equal)
            });
        }
        if keys.len() == 1
            && let Some(key) = keys.pop()
        {
            return self.read_one(EntryKey::new(self.view.0, key), filter_params);
        }
        let keys: Vec<EntryKey> = keys.into_iter().map(|k| EntryKey::new(self.view.0, k)).collect();
        let mut found = Vec::with_capacity(keys.len());
        for _ in 0..SETTLE_TRIES {
            found.clear();
            let before = self.shared.publications.load(AtOrd::SeqCst);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut missing = Vec::new();
            for ek in &keys {
                match self.shared.cache.get(ek) {
                    Some(e) => found.push(e),
                    None => missing.push(ek),
                }
            }
            if !missing.is_empty() {
                return self.missed(missing.into_iter().map(|ek| ek.clone().into_key()).collect());
            }
            // A shard's lock orders each entry read after the first increment of the
            // publication that put it: if none began since `before`, all were read between
            // two publications.
            if self.shared.publications.load(AtOrd::SeqCst) == before {
                if found.iter().any(|e| e.ahead) {
                    // A fill's rows from a newer state beside rows of the applied one.
                    return Err(LookupError::Unsettled);
                }
                return self.answer(&found, filter_params);
            }
        }
        Err(LookupError::Unsettled)
    }

    /// The common read, one partition: no vectors for what was found or missing.
    fn read_one(&self, ek: EntryKey, filter_params: &[&Value]) -> Result<Lookup, LookupError> {
        match self.shared.cache.get(&ek) {
            // The cache handed out a clone of the entry: its rows are the answer as they are.
            Some(e) if self.q.read_filters.is_empty() => Ok(self.hit(e.rows)),
            Some(e) => self.answer(std::slice::from_ref(&e), filter_params),
            None => self.missed(vec![ek.into_key()]),
        }
    }

    fn hit(&self, rows: Rows) -> Lookup {
        self.counters.hits.fetch_add(1, AtOrd::Relaxed);
        Lookup::Hit(rows)
    }

    /// A read some of whose partitions are holes: they are recorded for filling, unless one
    /// of them was too heavy to keep lately ([`LookupError::TooLarge`]: relayed), its fill
    /// raced writes to it lately ([`LookupError::Raced`]: relayed) or the view's
    /// keys waiting for fills are at their bound ([`LookupError::Backlog`]: relayed).
    fn missed(&self, missing: Vec<Key>) -> Result<Lookup, LookupError> {
        for k in &missing {
            let ek = EntryKey::new(self.view.0, k.clone());
            if self.shared.cache.too_heavy(&ek) {
                return Err(LookupError::TooLarge);
            }
            if self.shared.cache.raced(&ek) {
                return Err(LookupError::Raced);
            }
        }
        if let Ok(mut m) = self.shared.misses.lock() {
            let waiting = m.entry(self.view.0).or_default();
            if waiting.len() + missing.len() > MAX_WAITING_KEYS {
                return Err(LookupError::Backlog);
            }
            waiting.extend(missing.iter().cloned());
        }
        self.counters.misses.fetch_add(1, AtOrd::Relaxed);
        Ok(Lookup::Miss(missing))
    }

    /// A read all of whose partitions were found: their rows, merged.
    fn answer(&self, found: &[Entry], filter_params: &[&Value]) -> Result<Lookup, LookupError> {
        if !self.q.read_filters.is_empty() {
            return Ok(self.hit(self.filtered(found, filter_params)?));
        }
        if let [e] = found {
            return Ok(self.hit(e.rows.clone()));
        }
        let mut rows: Vec<SharedRow> = found.iter().flat_map(|e| e.rows.iter().cloned()).collect();
        if !self.q.order.is_empty() {
            sort_shared_rows(&mut rows, &self.q.order);
        }
        Ok(self.hit(rows.into()))
    }

    /// Applies the range parameters to the partitions' rows, then keeps the visible columns.
    fn filtered(&self, found: &[Entry], filter_params: &[&Value]) -> Result<Rows, LookupError> {
        let mut preds = Vec::new();
        for (f, p) in self.q.read_filters.iter().zip(filter_params) {
            let v = coerce_param(p, &f.column_type, f.param)?.unwrap_or(Value::Null);
            preds.push(Expr::Cmp(f.op, Box::new(Expr::Col(f.column)), Box::new(Expr::lit(v))));
        }
        let visible = self.q.visible;
        // The filters are expressions over `Value`s, and a shared row holds none: the columns
        // they compare are read into `values` (one vector for the whole answer; a text they
        // compare is a block of its own), the others left NULL, unread.
        let filtered: Vec<usize> = self.q.read_filters.iter().map(|f| f.column).collect();
        let mut values: Vec<Value> = Vec::new();
        let mut rows: Vec<SharedRow> = Vec::new();
        for row in found.iter().flat_map(|e| e.rows.iter()) {
            values.clear();
            values.extend(row.iter().enumerate().map(|(i, v)| if filtered.contains(&i) { v.to_owned() } else { Value::Null }));
            if preds.iter().all(|p| is_true(&p.eval(&values)) == Some(true)) {
                rows.push(row.cut(visible));
            }
        }
        if found.len() > 1 && !self.q.order.is_empty() {
            sort_shared_rows(&mut rows, &self.q.order);
        }
        Ok(rows.into())
    }

    /// Hit/miss counters and the writer's published numbers for this view.
    pub fn stats(&self) -> ViewStats {
        stats_of(&self.counters)
    }
}

pub(super) fn stats_of(c: &Counters) -> ViewStats {
    ViewStats {
        keys: c.keys.load(AtOrd::Relaxed),
        bytes: c.bytes.load(AtOrd::Relaxed),
        hits: c.hits.load(AtOrd::Relaxed),
        misses: c.misses.load(AtOrd::Relaxed),
        fills: c.fills.load(AtOrd::Relaxed),
        evictions: c.evictions.load(AtOrd::Relaxed),
    }
}

/// Converts a parameter to the key column's domain, so that it hashes like the base values.
fn coerce_param(v: &Value, col: &KeyColumn, index: usize) -> Result<Option<Value>, LookupError> {
    let bad = || LookupError::ParamType { index, column: col.name.clone() };
    if v.is_null() {
        return Ok(None);
    }
    let key = coerce_value(v, col).ok_or_else(bad)?;
    // A DECIMAL with more fraction digits than the column holds: the server's index lookup
    // stores the constant in the column's type, rounding it (`k = 1.5` on an indexed INT finds
    // k = 2, where its scan finds nothing), so what it answers is its plan's: relayed.
    let places = match col.ty {
        SqlType::Int { .. } | SqlType::Bit { .. } => Some(0),
        SqlType::Decimal { scale, .. } => Some(scale),
        _ => None,
    };
    if let (Some(places), Value::Decimal(d)) = (places, &key)
        && d.normalized().1 > places
    {
        return Err(bad());
    }
    // A whole DECIMAL against an integer or BIT column keys as the integer it is: the fill
    // binds the key, and a BIT's index lookup stores a string (how a DECIMAL parameter
    // travels) as its bytes, finding no row for `1.0` in a partition `bt = 1` then shares.
    let key = match (&col.ty, key) {
        (SqlType::Int { .. } | SqlType::Bit { .. }, Value::Decimal(d)) => match d.normalized() {
            (m, 0) => i64::try_from(m).map(Value::Int).or_else(|_| u64::try_from(m).map(Value::UInt)).map_err(|_| bad())?,
            _ => return Err(bad()),
        },
        (_, key) => key,
    };
    // Likewise a date-time text with more fraction digits than the column holds (a DATE holds
    // none): the index lookup drops them, the scan compares them. (A binary DATETIME parameter
    // is compared whole by both.)
    let fsp = match col.ty {
        SqlType::Date => Some(0),
        SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } => Some(fsp),
        _ => None,
    };
    if let (Some(fsp), Value::Text(..), Value::DateTime(d) | Value::Timestamp(d)) = (fsp, v, &key)
        && d.time().3 % 10u32.pow(6 - u32::from(fsp.min(6))) != 0
    {
        return Err(bad());
    }
    Ok(Some(key))
}

/// [`coerce_param`] of one value of an IN list of several. Against a YEAR column the server
/// does not always read a number of 0-99 (or a text) there as the YEAR a column would
/// store from it, as it does in `y = ?`: UNSIGNED parameters are compared as the numbers they
/// are (`y IN (24, 1901)` finds no 2024), and `'0'` as 0000. Such a value is relayed.
fn in_list_param(v: &Value, col: &KeyColumn, index: usize) -> Result<Option<Value>, LookupError> {
    let windowed = match v {
        Value::Int(i) => (0..=99).contains(i),
        Value::UInt(u) => *u <= 99,
        Value::Decimal(d) => d.mantissa() >= 0 && d.mantissa() < 100 * 10i128.pow(u32::from(d.scale())),
        Value::Text(..) | Value::Bytes(_) => true,
        _ => false,
    };
    if col.ty == SqlType::Year && windowed {
        return Err(LookupError::ParamType { index, column: col.name.clone() });
    }
    coerce_param(v, col, index)
}

/// Whether the IN list `slots` of `params` mixes strings and numbers against a DECIMAL of more
/// digits than a double tells apart: the server then compares every value as a double
/// (`d IN ('9007199254740992', 1)` finds 9007199254740993 too), a list of strings alone or
/// numbers alone exactly, as a view does.
fn mixed_against_wide_decimal(slots: &[usize], params: &[Value], col: &KeyColumn) -> bool {
    const DOUBLE_DIGITS: u8 = 15;
    if !matches!(col.ty, SqlType::Decimal { precision, .. } if precision > DOUBLE_DIGITS) || slots.len() < 2 {
        return false;
    }
    let values = || slots.iter().filter_map(|&i| params.get(i));
    values().any(|v| matches!(v, Value::Text(..) | Value::Bytes(_)))
        && values().any(|v| !matches!(v, Value::Text(..) | Value::Bytes(_) | Value::Null))
}

/// [`coerce_param`]'s conversion: None where the parameter is relayed.
fn coerce_value(v: &Value, col: &KeyColumn) -> Option<Value> {
    // A character past U+FFFF (a four-byte UTF-8 sequence) against a utf8mb3 column: the
    // server refuses the comparison (1267).
    let supplementary = |b: &[u8]| b.iter().any(|&b| b >= 0xF0);
    if col.bmp_only
        && match v {
            Value::Text(s, _) => supplementary(s.as_bytes()),
            Value::Bytes(b) => supplementary(b),
            _ => false,
        }
    {
        return None;
    }
    Some(match (&col.ty, v) {
        (SqlType::Year, v) => crate::value::year_operand(v)?,
        (SqlType::Text, Value::Text(s, _)) => Value::Text(s.clone(), col.collation?),
        (SqlType::Text, Value::Bytes(b)) => match std::str::from_utf8(b) {
            Ok(s) => Value::text(s, col.collation?),
            Err(_) => return None,
        },
        (SqlType::Text, _) => return None,
        // Not against a BIT: its index lookup stores the string as the BIT's bytes (`'1'` is
        // 0x31), its scan reads it as a number; the answer is the plan's (relayed, below).
        (SqlType::Int { .. } | SqlType::Decimal { .. }, Value::Text(s, _)) => {
            // Leading white space the server skips silently; trailing white space it reads
            // with a note, which an answer from a view would not count: relayed.
            let t = s.trim_start_matches(crate::value::SQL_SPACE);
            if t.ends_with(crate::value::SQL_SPACE) {
                return None;
            }
            if let Ok(i) = t.parse::<i64>() {
                Value::Int(i)
            } else if let Ok(u) = t.parse::<u64>() {
                Value::UInt(u)
            } else if let Some(d) = crate::value::Decimal::parse(t) {
                Value::Decimal(d)
            } else {
                return None;
            }
        }
        // A DATETIME parameter against a DATE column: equal to a date only at midnight (the
        // server compares as DATETIME); anything else matches no row here, so refuse rather
        // than partition under a key no row has.
        (SqlType::Date, Value::DateTime(d)) => match d.time() {
            (0, 0, 0, 0) => Value::Date(d.date()),
            _ => return None,
        },
        (SqlType::DateTime { .. }, Value::Date(d)) => Value::DateTime(crate::value::DateTime::new(*d, 0, 0, 0, 0)),
        (SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. }, Value::Text(s, _)) => {
            let t = parse_temporal(s)?;
            match (&col.ty, t) {
                (SqlType::Timestamp { .. }, Value::DateTime(d)) => Value::Timestamp(d),
                (_, t) => t,
            }
        }
        (SqlType::Enum(labels), Value::Text(s, _)) => Value::Enum(crate::schema::enum_index(labels, s, col.collation)?),
        // A number is compared with the index (`en = 1` is the first label, 0 the error value
        // ''); one that is no index (past the labels, negative, a fraction) matches no row.
        (SqlType::Enum(_), number @ (Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Double(_) | Value::Float(_))) => {
            let n = number.to_f64()?;
            let index = (n.fract() == 0.0 && (0.0..f64::from(crate::schema::NO_LABEL)).contains(&n)).then_some(n as u16);
            Value::Enum(index.unwrap_or(crate::schema::NO_LABEL))
        }
        (SqlType::Enum(_), _) => return None,
        (SqlType::Bytes, Value::Text(s, _)) => Value::Bytes(s.as_bytes().into()),
        // A DOUBLE against an exact column is compared as a double: `sb = 9.223372036854776e18`
        // matches 2^63 - 1, whose double it is, and `d5 = 9999999.99999e0` matches what rounds
        // to it, where the exact numbers it equals as a double (`9223372036854775808`,
        // `9999999.999990000001`) match nothing. Only a whole double below 2^53 against an
        // integer column matches exactly the rows its integer would: keyed by that integer.
        // Any other is relayed rather than share a partition with a number of other rows.
        (SqlType::Int { .. } | SqlType::Bit { .. }, Value::Double(_) | Value::Float(_)) => {
            const EXACT: f64 = (1u64 << 53) as f64;
            match v.to_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < EXACT => Value::Int(f as i64),
                _ => return None,
            }
        }
        (SqlType::Decimal { .. }, Value::Double(_) | Value::Float(_)) => return None,
        // Against a FLOAT or DOUBLE column every number is compared as a double: keyed by it,
        // so that it hashes as the column's values do (a whole double hashes as its integer,
        // which an integer past 2^53 is not).
        (
            SqlType::Float | SqlType::Double,
            number @ (Value::Int(_)
            | Value::UInt(_)
            | Value::Decimal(_)
            | Value::Double(_)
            | Value::Float(_)
            | Value::Bit(_)
            | Value::Year(_)),
        ) => Value::Double(number.to_f64()?),
        // A value of the column's own family is compared as it is. Any other (a number
        // against a date, bytes or a TIME; a date against a number) the server converts by
        // rules of its own (`d = 20240101` compares the date's number): relayed.
        (
            SqlType::Int { .. } | SqlType::Decimal { .. } | SqlType::Bit { .. },
            number @ (Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Bit(_) | Value::Year(_)),
        ) => number.clone(),
        (
            SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. },
            t @ (Value::Date(_) | Value::DateTime(_) | Value::Timestamp(_)),
        ) => t.clone(),
        (SqlType::Time { .. }, t @ Value::Time(_)) => t.clone(),
        (SqlType::Bytes, b @ Value::Bytes(_)) => b.clone(),
        _ => return None,
    })
}

/// The most partition keys one lookup may touch (the product of its IN lists' distinct
/// values); past it the lookup is refused ([`LookupError::TooManyKeys`]) before any key is
/// built, and the read goes to the server.
pub const MAX_LOOKUP_KEYS: usize = 1_000_000;

/// The partitions one lookup reads: one (every read but an IN list), or any number (none when
/// a parameter is NULL).
enum Keys {
    /// The key of a view keyed by one column, as its value: no block for the key.
    Value(Value),
    /// The key of a view keyed by several columns.
    One(Key),
    Many(Vec<Key>),
}

impl Keys {
    fn len(&self) -> usize {
        match self {
            Keys::Value(_) | Keys::One(_) => 1,
            Keys::Many(keys) => keys.len(),
        }
    }

    fn into_vec(self) -> Vec<Key> {
        match self {
            Keys::Value(value) => vec![Box::new([value])],
            Keys::One(key) => vec![key],
            Keys::Many(keys) => keys,
        }
    }
}

/// The partition keys a lookup touches (cartesian product of IN lists), or none if a
/// parameter is NULL. Linear in the parameters: duplicates are dropped through a hash set (a
/// list of 100,000 values took 50 s with a scan per value).
fn lookup_keys(q: &CompiledQuery, param_slots: &[Vec<usize>], params: &[Value]) -> Result<Keys, LookupError> {
    let expected = param_slots.iter().map(Vec::len).sum::<usize>() + q.read_filters.len();
    if params.len() != expected {
        return Err(LookupError::ParamCount { expected, got: params.len() });
    }
    if param_slots.iter().all(|slots| slots.len() == 1) {
        // `k = ?` for each key column (every read but an IN list): one key, or none if a
        // parameter is NULL; built without the sets and products below.
        if let ([slots], [col]) = (param_slots, &q.key_columns[..]) {
            // One key column (most views): the value is the key, without a vector.
            let i = slots[0];
            let p = params.get(i).ok_or(LookupError::ParamCount { expected, got: params.len() })?;
            return Ok(coerce_param(p, col, i)?.map_or(Keys::Many(Vec::new()), Keys::Value));
        }
        let mut key = Vec::with_capacity(param_slots.len());
        let mut null = false;
        for (slots, col) in param_slots.iter().zip(&q.key_columns) {
            let i = slots[0];
            let p = params.get(i).ok_or(LookupError::ParamCount { expected, got: params.len() })?;
            match coerce_param(p, col, i)? {
                Some(v) => key.push(v),
                None => null = true,
            }
        }
        return Ok(if null { Keys::Many(Vec::new()) } else { Keys::One(key.into_boxed_slice()) });
    }
    let mut columns: Vec<Vec<Value>> = Vec::with_capacity(param_slots.len());
    let mut product = 1usize;
    for (slots, col) in param_slots.iter().zip(&q.key_columns) {
        if mixed_against_wide_decimal(slots, params, col) {
            return Err(LookupError::ParamType { index: slots[0], column: col.name.clone() });
        }
        let mut seen = std::collections::HashSet::with_capacity(slots.len());
        let mut vals: Vec<Value> = Vec::new();
        for &i in slots {
            let p = params.get(i).ok_or(LookupError::ParamCount { expected, got: params.len() })?;
            if let Some(v) = in_list_param(p, col, i)?
                && seen.insert(v.clone())
            {
                vals.push(v);
            }
        }
        product = product.saturating_mul(vals.len());
        if product > MAX_LOOKUP_KEYS {
            return Err(LookupError::TooManyKeys { keys: product, max: MAX_LOOKUP_KEYS });
        }
        columns.push(vals);
    }
    let mut keys: Vec<Vec<Value>> = vec![vec![]];
    for vals in &columns {
        keys = keys
            .into_iter()
            .flat_map(|k| {
                vals.iter().map(move |v| {
                    let mut k = k.clone();
                    k.push(v.clone());
                    k
                })
            })
            .collect();
    }
    Ok(Keys::Many(keys.into_iter().map(Vec::into_boxed_slice).collect()))
}

#[cfg(test)]
mod coerce_tests {
    use super::*;
    use crate::value::{Date, DateTime};

    fn col(ty: SqlType) -> KeyColumn {
        KeyColumn { name: "t.c".into(), ty, collation: None, bmp_only: false }
    }

    #[test]
    fn temporal_parameters_take_the_key_columns_type() {
        let day = Date::new(2024, 1, 2);
        let midnight = Value::DateTime(DateTime::new(day, 0, 0, 0, 0));
        assert!(matches!(coerce_param(&midnight, &col(SqlType::Date), 0), Ok(Some(Value::Date(d))) if d == day));
        let noon = Value::DateTime(DateTime::new(day, 12, 0, 0, 0));
        assert!(coerce_param(&noon, &col(SqlType::Date), 0).is_err());
        let as_datetime = coerce_param(&Value::Date(day), &col(SqlType::DateTime { fsp: 0 }), 0);
        assert!(matches!(as_datetime, Ok(Some(Value::DateTime(d))) if d == DateTime::new(day, 0, 0, 0, 0)));
    }

    /// In an IN list of several values the server does not always take a number of 0-99 as
    /// the YEAR a column would store (an audit: `y IN (?, ?)` with UNSIGNED parameters 24 and
    /// 1901 found no row where a view found 2024, and `'0'` found 0000): such a value is
    /// relayed there. A YEAR, a four-digit number and `y = ?` are answered as before.
    #[test]
    fn a_year_of_two_digits_in_an_in_list_is_relayed() {
        let year = col(SqlType::Year);
        for v in [Value::UInt(24), Value::Int(0), Value::Int(99), Value::text("0", crate::value::Collation::Binary)] {
            assert!(in_list_param(&v, &year, 0).is_err(), "{v:?}");
            assert!(coerce_param(&v, &year, 0).is_ok(), "{v:?} alone");
        }
        for v in [Value::UInt(1901), Value::Year(2024), Value::Int(2155)] {
            assert!(in_list_param(&v, &year, 0).is_ok(), "{v:?}");
        }
        assert!(in_list_param(&Value::UInt(24), &col(SqlType::Int { bytes: 4, unsigned: true }), 0).is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn an_entry_key_has_one_form_whatever_builds_it() {
        let seeded = std::collections::hash_map::RandomState::new();
        for key in [vec![Value::Int(7)], vec![Value::Int(7), Value::Text("a".into(), crate::value::Collation::Binary)]] {
            let key: Key = key.into_boxed_slice();
            let (built, copied) = (EntryKey::new(3, key.clone()), EntryKey::of(3, &key));
            assert_eq!(built, copied);
            assert_eq!(seeded.hash_one(&built), seeded.hash_one(&copied));
            assert_eq!(matches!(built, EntryKey::One(..)), key.len() == 1, "one column is inline");
            assert_eq!(built.view(), 3);
            assert_eq!(built.into_key(), key);
        }
        // A one-column read builds the inline form directly (`Keys::Value`).
        assert_eq!(EntryKey::One(3, Value::Int(7)), EntryKey::of(3, &[Value::Int(7)]));
        assert_eq!(EntryKey::of(3, &[Value::Int(7)]).heap_bytes(), 0);
    }
}
