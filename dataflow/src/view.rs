//! The writer side of the dataflow and its readers: partitions, holes, fills, positions,
//! eviction, the memory budget and statistics.
//!
//! Owns: [`Dataflow`] (single writer: installs views, applies batches, turns misses into fill
//! requests, installs fills, evicts), [`Reader`] (cloneable, lock-free lookups), [`ViewStats`].
//! Does not own: operator semantics (ops), SQL (compile, render), fill transport (fill sources).
//!
//! Invariants of partial state (ARCHITECTURE.md "Invariants of partial state"), and why they
//! hold here:
//! - **Holes.** A partition is a hole unless it is in `View::parts`. A delta whose partition
//!   is a hole is dropped (`apply`), unless a fill for it is in flight (`View::pending`), in
//!   which case it is buffered with its position.
//! - **Fills are idempotent.** A fill is accepted only for partitions that are pending; a
//!   partition that is already filled (several readers asked) or was evicted meanwhile ignores
//!   it. Requests are deduplicated by the same pending set.
//! - **No double counting.** A pending partition records `since`, the writer's applied
//!   position when it became pending; every later delta for it is buffered. A fill at position
//!   P is accepted only if `P >= since` (otherwise deltas in `(P, since]` were dropped and
//!   would be lost); buffered deltas at or before P are discarded, later ones applied in order;
//!   the partition remembers `filled_at = P` and skips any delta at or before it that arrives
//!   later (a fill may be ahead of the binlog). Each committed write is thus counted once.
//! - **Descendant eviction.** All state derived from a partition lives in its `KeyState`
//!   (see `plan`); evicting removes the `KeyState` and the reader entry together.
//! - **Readers never wait for the writer.** Reader entries live in a `moka` concurrent map
//!   (lock-free reads). The writer builds a partition's complete new result and swaps one
//!   `Arc` per partition after each batch, so a read sees either all of a batch's effect on a
//!   partition or none of it. Misses are recorded in a small mutex-protected set that the
//!   writer only swaps out.
//! - **Budget.** One moka cache holds every view's entries, weighted by the partition's total
//!   bytes (operator state + reader rows), with LRU eviction at the global byte budget. moka
//!   reports size evictions through a listener; the writer drains those notices before every
//!   operation and drops the matching `KeyState` (matched by generation, so a notice about an
//!   old incarnation never evicts a newer fill). Until drained, a `KeyState` may outlive its
//!   reader entry by one operation; it can never serve a stale read, because reads go only to
//!   the cache. Where moka does not fit: it refreshes recency on the writer's re-inserts too,
//!   so "least recently read" is really "least recently read or updated".

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering as AtOrd};
use std::sync::{Arc, Mutex};

use moka::notification::RemovalCause;
use moka::policy::EvictionPolicy;

use crate::compile::{compile, Catalog, CompiledQuery, KeyColumn, Refusal};
use crate::cost::{cost_bounds, CostBounds};
use crate::delta::{Batch, Position};
use crate::expr::{is_true, parse_temporal, Expr};
use crate::fill::{BaseScan, FillData, FillError, FillRequest, FillResponse, FillSource, StateQuery, ViewId};
use crate::ops::{sort_rows, Delta, Graph, Key, KeyState};
use crate::plan::Node;
use crate::render::render_fill;
use crate::schema::{SqlType, TableSchema};
use crate::value::{row_bytes, Row, Value};

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
struct Counters {
    /// Set when the view is dropped (e.g. after DDL); its readers then answer `NoView`.
    dropped: std::sync::atomic::AtomicBool,
    keys: AtomicU64,
    bytes: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    fills: AtomicU64,
    evictions: AtomicU64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct EntryKey {
    view: u32,
    key: Key,
}

/// A published reader entry: the partition's result rows, ordered, visible columns only.
#[derive(Debug)]
pub struct Entry {
    rows: Arc<[Row]>,
    weight: u32,
    generation: u64,
}

type Evicted = Arc<Mutex<Vec<(EntryKey, u64)>>>;

struct Shared {
    cache: moka::sync::Cache<EntryKey, Arc<Entry>>,
    misses: Mutex<HashMap<u32, HashSet<Key>>>,
}

/// Result of a lookup.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// Every partition was present: the result rows, in the query's column order (and
    /// row order, if it has ORDER BY).
    Hit(Arc<[Row]>),
    /// Some partitions are holes; they have been queued for filling. Answer this read some
    /// other way (wait for the fill, or relay to the upstream).
    Miss(Vec<Key>),
}

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
}

/// A cloneable, thread-safe handle for reading one view.
#[derive(Clone)]
pub struct Reader {
    view: ViewId,
    q: Arc<CompiledQuery>,
    shared: Arc<Shared>,
    counters: Arc<Counters>,
}

impl Reader {
    /// The compiled query this reader serves.
    pub fn query(&self) -> &CompiledQuery {
        &self.q
    }

    /// Looks up the result for `params` (one value per `?`, in text order). Never blocks on
    /// the writer.
    pub fn lookup(&self, params: &[Value]) -> Result<Lookup, LookupError> {
        if self.counters.dropped.load(AtOrd::Acquire) {
            return Err(LookupError::NoView);
        }
        let keys = lookup_keys(&self.q, params)?;
        if keys.is_empty() {
            // A NULL parameter: `col = NULL` matches nothing.
            self.counters.hits.fetch_add(1, AtOrd::Relaxed);
            return Ok(Lookup::Hit(Arc::from(Vec::new())));
        }
        let mut found = Vec::with_capacity(keys.len());
        let mut missing = Vec::new();
        for k in keys {
            let ek = EntryKey { view: self.view.0, key: k };
            match self.shared.cache.get(&ek) {
                Some(e) => found.push(e),
                None => missing.push(ek.key),
            }
        }
        if !missing.is_empty() {
            self.counters.misses.fetch_add(1, AtOrd::Relaxed);
            if let Ok(mut m) = self.shared.misses.lock() {
                m.entry(self.view.0).or_default().extend(missing.iter().cloned());
            }
            return Ok(Lookup::Miss(missing));
        }
        self.counters.hits.fetch_add(1, AtOrd::Relaxed);
        if !self.q.read_filters.is_empty() {
            return self.filtered(&found, params);
        }
        if found.len() == 1 {
            if let Some(e) = found.pop() {
                return Ok(Lookup::Hit(e.rows.clone()));
            }
        }
        let mut rows: Vec<Row> = found.iter().flat_map(|e| e.rows.iter().cloned()).collect();
        if !self.q.order.is_empty() {
            sort_rows(&mut rows, &self.q.order);
        }
        Ok(Lookup::Hit(rows.into()))
    }

    /// Applies the range parameters to the partitions' rows, then keeps the visible columns.
    fn filtered(&self, found: &[Arc<Entry>], params: &[Value]) -> Result<Lookup, LookupError> {
        let mut preds = Vec::new();
        for f in &self.q.read_filters {
            let p = params.get(f.param).ok_or(LookupError::ParamCount { expected: self.q.n_params, got: params.len() })?;
            let v = coerce_param(p, &f.column_type, f.param)?.unwrap_or(Value::Null);
            preds.push(Expr::Cmp(f.op, Box::new(Expr::Col(f.column)), Box::new(Expr::lit(v))));
        }
        let visible = self.q.visible;
        let mut rows: Vec<Row> = found
            .iter()
            .flat_map(|e| e.rows.iter())
            .filter(|r| preds.iter().all(|p| is_true(&p.eval(r)) == Some(true)))
            .map(|r| r.iter().take(visible).cloned().collect())
            .collect();
        if found.len() > 1 && !self.q.order.is_empty() {
            sort_rows(&mut rows, &self.q.order);
        }
        Ok(Lookup::Hit(rows.into()))
    }

    /// Hit/miss counters and the writer's published numbers for this view.
    pub fn stats(&self) -> ViewStats {
        stats_of(&self.counters)
    }
}

fn stats_of(c: &Counters) -> ViewStats {
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
    Ok(Some(match (&col.ty, v) {
        (SqlType::Text, Value::Text(s, _)) => Value::Text(s.clone(), col.collation.ok_or_else(bad)?),
        (SqlType::Text, Value::Bytes(b)) => match std::str::from_utf8(b) {
            Ok(s) => Value::text(s, col.collation.ok_or_else(bad)?),
            Err(_) => return Err(bad()),
        },
        (SqlType::Text, _) => return Err(bad()),
        (SqlType::Int { .. } | SqlType::Decimal { .. } | SqlType::Year | SqlType::Bit { .. }, Value::Text(s, _)) => {
            let t = s.trim();
            if let Ok(i) = t.parse::<i64>() {
                Value::Int(i)
            } else if let Ok(u) = t.parse::<u64>() {
                Value::UInt(u)
            } else if let Some(d) = crate::value::Decimal::parse(t) {
                Value::Decimal(d)
            } else {
                return Err(bad());
            }
        }
        (SqlType::Date | SqlType::DateTime { .. } | SqlType::Timestamp { .. }, Value::Text(s, _)) => {
            let t = parse_temporal(s).ok_or_else(bad)?;
            match (&col.ty, t) {
                (SqlType::Timestamp { .. }, Value::DateTime(d)) => Value::Timestamp(d),
                (_, t) => t,
            }
        }
        (SqlType::Enum(labels), Value::Text(s, _)) => {
            let i = labels.iter().position(|l| l.eq_ignore_ascii_case(s)).map(|i| i + 1).unwrap_or(0);
            Value::Enum(i as u16)
        }
        (SqlType::Bytes, Value::Text(s, _)) => Value::Bytes(s.as_bytes().into()),
        (_, Value::Text(..)) => return Err(bad()),
        (_, other) => other.clone(),
    }))
}

/// The partition keys a lookup touches (cartesian product of IN lists), or none if a
/// parameter is NULL.
fn lookup_keys(q: &CompiledQuery, params: &[Value]) -> Result<Vec<Key>, LookupError> {
    if params.len() != q.n_params {
        return Err(LookupError::ParamCount { expected: q.n_params, got: params.len() });
    }
    let mut keys: Vec<Vec<Value>> = vec![vec![]];
    for (slots, col) in q.param_slots.iter().zip(&q.key_columns) {
        let mut vals: Vec<Value> = Vec::new();
        for &i in slots {
            let p = params.get(i).ok_or(LookupError::ParamCount { expected: q.n_params, got: params.len() })?;
            if let Some(v) = coerce_param(p, col, i)? {
                if !vals.contains(&v) {
                    vals.push(v);
                }
            }
        }
        keys = keys.into_iter().flat_map(|k| vals.iter().map(move |v| {
            let mut k = k.clone();
            k.push(v.clone());
            k
        })).collect();
    }
    Ok(keys.into_iter().map(Vec::into_boxed_slice).collect())
}

struct Part {
    ks: KeyState,
    generation: u64,
    weight: u64,
}

/// Most batches buffered for one partition while its fill is in flight.
const MAX_BUFFERED: usize = 100_000;

struct Pending {
    since: Position,
    buffer: Vec<(Position, Vec<Vec<Delta>>)>,
}

/// How a state of the view gets its contents on a fill.
#[derive(Clone, Debug)]
struct Slot {
    node: usize,
    side: usize,
    input: usize,
    /// Index into the request's queries, if the state is seeded from the source.
    remote: Option<usize>,
}

struct View {
    q: Arc<CompiledQuery>,
    graph: Graph,
    /// (occurrence, table lower-case, key columns) per base occurrence.
    occs: Vec<(usize, String, Vec<usize>)>,
    n_occ: usize,
    slots: Vec<Slot>,
    parts: HashMap<Key, Part>,
    pending: HashMap<Key, Pending>,
    counters: Arc<Counters>,
}

/// Outcome of installing a fill.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FillOutcome {
    /// Partitions filled.
    pub filled: usize,
    /// Partitions ignored: already filled, evicted meanwhile, or never requested.
    pub ignored: usize,
    /// Partitions rejected because the fill was older than the position they became holes
    /// at; they are holes again and will be requested anew.
    pub stale: usize,
}

/// Errors applying a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// Batches must arrive in strictly increasing position order.
    #[error("batch at {got:?} is not after the applied position {applied:?}")]
    OutOfOrder { got: Position, applied: Position },
}

/// The dataflow: every installed view and the single writer that maintains them.
pub struct Dataflow {
    catalog: Catalog,
    views: Vec<Option<View>>,
    reuse: HashMap<CompiledQuery, ViewId>,
    applied: Position,
    shared: Arc<Shared>,
    evicted: Evicted,
    next_generation: u64,
    max_fill_keys: usize,
    max_pending: usize,
}

impl Dataflow {
    /// A dataflow over `catalog` with a global memory budget.
    pub fn new(catalog: Catalog, budget: ByteSize) -> Dataflow {
        let evicted: Evicted = Arc::new(Mutex::new(Vec::new()));
        let sink = evicted.clone();
        let cache = moka::sync::Cache::builder()
            .max_capacity(budget.0)
            .eviction_policy(EvictionPolicy::lru())
            .weigher(|_k: &EntryKey, v: &Arc<Entry>| v.weight)
            .eviction_listener(move |k: Arc<EntryKey>, v: Arc<Entry>, cause| {
                if cause == RemovalCause::Size {
                    if let Ok(mut s) = sink.lock() {
                        s.push(((*k).clone(), v.generation));
                    }
                }
            })
            .build();
        Dataflow {
            catalog,
            views: Vec::new(),
            reuse: HashMap::new(),
            applied: Position(0),
            shared: Arc::new(Shared { cache, misses: Mutex::new(HashMap::new()) }),
            evicted,
            next_generation: 1,
            max_fill_keys: 64,
            max_pending: 4096,
        }
    }

    /// Sets the most partitions one fill request may carry (default 64).
    pub fn set_max_fill_keys(&mut self, n: usize) {
        self.max_fill_keys = n.max(1);
    }

    /// Sets the most partitions of one view that may have a fill in flight (default 4096).
    /// Further misses stay queued until fills complete.
    pub fn set_max_pending(&mut self, n: usize) {
        self.max_pending = n.max(1);
    }

    /// The catalog queries are compiled against.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Position of the last applied batch.
    pub fn applied(&self) -> Position {
        self.applied
    }

    /// Sets the applied position without a batch (at start-up, to where replication resumes).
    pub fn set_applied(&mut self, p: Position) {
        self.applied = self.applied.max(p);
    }

    /// Compiles and installs `sql`.
    pub fn install_sql(&mut self, sql: &str) -> Result<ViewId, Refusal> {
        let q = compile(sql, &self.catalog)?;
        Ok(self.install(q))
    }

    /// Installs a compiled query. A query whose compiled plan is identical to an installed
    /// one (whatever its text) shares that view, its state and its statistics.
    pub fn install(&mut self, q: CompiledQuery) -> ViewId {
        let mut ident = q.clone();
        ident.sql = String::new();
        if let Some(v) = self.reuse.get(&ident) {
            return *v;
        }
        let graph = Graph::new(&q.root);
        let occs: Vec<(usize, String, Vec<usize>)> = q
            .root
            .bases()
            .into_iter()
            .filter_map(|b| match b {
                Node::Base { occ, table, key, .. } => Some((*occ, table.to_ascii_lowercase(), key.clone())),
                _ => None,
            })
            .collect();
        let n_occ = occs.iter().map(|o| o.0 + 1).max().unwrap_or(0);
        let mut slots = Vec::new();
        for (i, n) in graph.nodes.iter().enumerate() {
            if n.tree.is_stateful() {
                for (side, &input) in n.inputs.iter().enumerate() {
                    slots.push(Slot { node: i, side, input, remote: None });
                }
            }
        }
        slots.push(Slot { node: graph.nodes.len(), side: 0, input: graph.root(), remote: None });
        let mut remote = 0;
        for s in &mut slots {
            if !graph.nodes[s.input].tree.derivable() {
                s.remote = Some(remote);
                remote += 1;
            }
        }
        let id = ViewId(self.views.len() as u32);
        self.views.push(Some(View {
            q: Arc::new(q),
            graph,
            occs,
            n_occ,
            slots,
            parts: HashMap::new(),
            pending: HashMap::new(),
            counters: Arc::new(Counters::default()),
        }));
        self.reuse.insert(ident, id);
        id
    }

    /// Drops view `v`: its state is freed and its readers answer [`LookupError::NoView`].
    pub fn drop_view(&mut self, v: ViewId) -> bool {
        let Some(mut view) = self.views.get_mut(v.0 as usize).and_then(Option::take) else { return false };
        view.counters.dropped.store(true, AtOrd::Release);
        let keys: Vec<Key> = view.parts.keys().cloned().collect();
        for k in keys {
            drop_part(&self.shared, &mut view, v.0, &k);
        }
        self.reuse.retain(|_, id| *id != v);
        if let Ok(mut m) = self.shared.misses.lock() {
            m.remove(&v.0);
        }
        true
    }

    /// Applies DDL: replaces (or, with `None`, removes) table `name`'s schema. Every view that
    /// reads the table is dropped — never serve rows shaped by the old schema — and recompiled
    /// from its SQL against the new catalog. Returns, per dropped view, its replacement or why
    /// it can no longer be cached.
    pub fn alter_table(
        &mut self,
        name: &str,
        schema: Option<TableSchema>,
    ) -> Result<Vec<(ViewId, Result<ViewId, Refusal>)>, crate::schema::SchemaError> {
        match schema {
            Some(s) => self.catalog.add(s)?,
            None => self.catalog.remove(name),
        }
        let lower = name.to_ascii_lowercase();
        let affected: Vec<(ViewId, String)> = self
            .views
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().map(|v| (i, v)))
            .filter(|(_, v)| v.q.tables.contains(&lower))
            .map(|(i, v)| (ViewId(i as u32), v.q.sql.clone()))
            .collect();
        let mut out = Vec::new();
        for (v, sql) in affected {
            self.drop_view(v);
            out.push((v, self.install_sql(&sql)));
        }
        Ok(out)
    }

    /// A reader for view `v`.
    pub fn reader(&self, v: ViewId) -> Option<Reader> {
        let view = self.view(v)?;
        Some(Reader { view: v, q: view.q.clone(), shared: self.shared.clone(), counters: view.counters.clone() })
    }

    /// The compiled query of view `v`.
    pub fn query(&self, v: ViewId) -> Option<&CompiledQuery> {
        self.view(v).map(|x| x.q.as_ref())
    }

    /// Cost bounds of view `v`.
    pub fn cost(&self, v: ViewId) -> Option<CostBounds> {
        self.view(v).map(|x| cost_bounds(&x.q, &self.catalog))
    }

    /// Statistics of view `v`.
    pub fn stats(&self, v: ViewId) -> Option<ViewStats> {
        self.view(v).map(|x| stats_of(&x.counters))
    }

    fn view(&self, v: ViewId) -> Option<&View> {
        self.views.get(v.0 as usize).and_then(Option::as_ref)
    }

    /// Applies one upstream transaction. Deltas to holes are dropped, to pending partitions
    /// buffered, to filled partitions applied; each touched partition is republished once.
    pub fn apply(&mut self, batch: &Batch) -> Result<(), ApplyError> {
        if batch.position <= self.applied {
            return Err(ApplyError::OutOfOrder { got: batch.position, applied: self.applied });
        }
        self.drain_evictions();
        let pos = batch.position;
        for vi in 0..self.views.len() {
            let Some(view) = self.views[vi].as_mut() else { continue };
            let mut per_key: HashMap<Key, Vec<Vec<Delta>>> = HashMap::new();
            for c in &batch.changes {
                let t = c.table.to_ascii_lowercase();
                for (occ, table, key) in &view.occs {
                    if *table != t {
                        continue;
                    }
                    let k: Key = key.iter().map(|&i| c.row.get(i).cloned().unwrap_or(Value::Null)).collect();
                    if !view.parts.contains_key(&k) && !view.pending.contains_key(&k) {
                        continue;
                    }
                    let slot = per_key.entry(k).or_insert_with(|| vec![Vec::new(); view.n_occ]);
                    slot[*occ].push((c.row.clone(), if c.insert { 1 } else { -1 }));
                }
            }
            let mut touched = Vec::new();
            for (k, mut deltas) in per_key {
                if let Some(p) = view.parts.get_mut(&k) {
                    if pos > p.ks.filled_at {
                        p.ks.process(&view.graph, &mut deltas);
                        touched.push(k);
                    }
                } else if let Some(p) = view.pending.get_mut(&k) {
                    if p.buffer.len() >= MAX_BUFFERED {
                        // A fill this late is as good as lost: make the partition a hole again
                        // (its fill will be ignored) rather than buffer without bound.
                        view.pending.remove(&k);
                    } else {
                        p.buffer.push((pos, deltas));
                    }
                }
            }
            for k in touched {
                publish(&self.shared, view, vi as u32, &k, None);
            }
        }
        self.applied = pos;
        self.shared.cache.run_pending_tasks();
        self.drain_evictions();
        Ok(())
    }

    /// Turns the misses readers recorded into fill requests: partitions already filled are
    /// republished, partitions already pending are skipped (deduplication), the rest become
    /// pending and are batched, at most `max_fill_keys` per request.
    pub fn fill_requests(&mut self) -> Vec<FillRequest> {
        self.drain_evictions();
        let misses = match self.shared.misses.lock() {
            Ok(mut m) => std::mem::take(&mut *m),
            Err(_) => HashMap::new(),
        };
        let mut out = Vec::new();
        let mut sorted: Vec<_> = misses.into_iter().collect();
        sorted.sort_by_key(|(v, _)| *v);
        for (v, keys) in sorted {
            let mut keys: Vec<Key> = keys.into_iter().collect();
            keys.sort();
            out.extend(self.request_fill(ViewId(v), keys));
        }
        out
    }

    /// Requests a fill of `keys` of view `v` directly (e.g. to warm a view).
    pub fn request_fill(&mut self, v: ViewId, keys: Vec<Key>) -> Vec<FillRequest> {
        let applied = self.applied;
        let max = self.max_fill_keys;
        let Some(view) = self.views.get_mut(v.0 as usize).and_then(Option::as_mut) else { return vec![] };
        let mut fresh = Vec::new();
        let mut deferred = Vec::new();
        for k in keys {
            if view.parts.contains_key(&k) {
                publish(&self.shared, view, v.0, &k, None);
            } else if view.pending.contains_key(&k) {
                continue;
            } else if view.pending.len() >= self.max_pending {
                deferred.push(k);
            } else {
                view.pending.insert(k.clone(), Pending { since: applied, buffer: Vec::new() });
                fresh.push(k);
            }
        }
        if !deferred.is_empty() {
            if let Ok(mut m) = self.shared.misses.lock() {
                m.entry(v.0).or_default().extend(deferred);
            }
        }
        fresh.chunks(max).map(|chunk| build_request(view, v, chunk.to_vec(), applied)).collect()
    }

    /// Gives up on a fill (the source failed): its partitions become holes again, and the
    /// next read asks anew.
    pub fn abandon_fill(&mut self, req: &FillRequest) {
        if let Some(view) = self.views.get_mut(req.view.0 as usize).and_then(Option::as_mut) {
            for k in &req.keys {
                view.pending.remove(k);
            }
        }
    }

    /// Installs a fill's answer (see the module header for the position rules).
    pub fn complete_fill(&mut self, resp: FillResponse) -> FillOutcome {
        self.drain_evictions();
        let mut outcome = FillOutcome::default();
        let vid = resp.view.0;
        let Some(view) = self.views.get_mut(vid as usize).and_then(Option::as_mut) else { return outcome };
        let p = resp.position;
        for (ki, k) in resp.keys.iter().enumerate() {
            let Some(pending) = view.pending.get(k) else {
                outcome.ignored += 1;
                continue;
            };
            if p < pending.since {
                view.pending.remove(k);
                outcome.stale += 1;
                continue;
            }
            let Some(pending) = view.pending.remove(k) else { continue };
            let mut ks = match build_state(view, k, ki, &resp) {
                Some(ks) => ks,
                None => {
                    outcome.stale += 1;
                    continue;
                }
            };
            for (pos, mut deltas) in pending.buffer {
                if pos > p {
                    ks.process(&view.graph, &mut deltas);
                }
            }
            ks.filled_at = p;
            let generation = self.next_generation;
            self.next_generation += 1;
            view.parts.insert(k.clone(), Part { ks, generation, weight: 0 });
            view.counters.keys.fetch_add(1, AtOrd::Relaxed);
            view.counters.fills.fetch_add(1, AtOrd::Relaxed);
            publish(&self.shared, view, vid, k, None);
            outcome.filled += 1;
        }
        self.shared.cache.run_pending_tasks();
        self.drain_evictions();
        outcome
    }

    /// Convenience for synchronous callers and tests: turns pending misses into requests and
    /// answers them from `source` right away. Returns the partitions filled.
    pub fn run_fills(&mut self, source: &mut dyn FillSource) -> Result<usize, FillError> {
        let mut filled = 0;
        for req in self.fill_requests() {
            match source.fill(&req) {
                Ok(resp) => filled += self.complete_fill(resp).filled,
                Err(e) => {
                    self.abandon_fill(&req);
                    return Err(e);
                }
            }
        }
        Ok(filled)
    }

    /// Evicts one partition (and everything derived from it). Returns true if it was filled
    /// or pending.
    pub fn evict(&mut self, v: ViewId, key: &Key) -> bool {
        let Some(view) = self.views.get_mut(v.0 as usize).and_then(Option::as_mut) else { return false };
        let was_pending = view.pending.remove(key).is_some();
        let was_filled = drop_part(&self.shared, view, v.0, key);
        was_pending || was_filled
    }

    /// Evicts every partition of every view (e.g. when the replication stream cannot be
    /// trusted): always correct, since partitions refill on demand.
    pub fn evict_all(&mut self) {
        for (vi, slot) in self.views.iter_mut().enumerate() {
            if let Some(view) = slot.as_mut() {
                view.pending.clear();
                let keys: Vec<Key> = view.parts.keys().cloned().collect();
                for k in keys {
                    drop_part(&self.shared, view, vi as u32, &k);
                }
            }
        }
    }

    /// Filled partitions of view `v` (for tests and admin statements).
    pub fn filled_keys(&self, v: ViewId) -> Vec<Key> {
        self.view(v).map(|x| x.parts.keys().cloned().collect()).unwrap_or_default()
    }

    fn drain_evictions(&mut self) {
        let notes = match self.evicted.lock() {
            Ok(mut e) => std::mem::take(&mut *e),
            Err(_) => Vec::new(),
        };
        for (ek, generation) in notes {
            let Some(view) = self.views.get_mut(ek.view as usize).and_then(Option::as_mut) else { continue };
            if view.parts.get(&ek.key).is_some_and(|p| p.generation == generation) {
                drop_part(&self.shared, view, ek.view, &ek.key);
            }
        }
    }
}

fn drop_part(shared: &Shared, view: &mut View, vid: u32, key: &Key) -> bool {
    let Some(part) = view.parts.remove(key) else { return false };
    shared.cache.invalidate(&EntryKey { view: vid, key: key.clone() });
    view.counters.keys.fetch_sub(1, AtOrd::Relaxed);
    view.counters.bytes.fetch_sub(part.weight, AtOrd::Relaxed);
    view.counters.evictions.fetch_add(1, AtOrd::Relaxed);
    true
}

/// Rebuilds and swaps in the reader entry of one filled partition.
fn publish(shared: &Shared, view: &mut View, vid: u32, key: &Key, _hint: Option<()>) {
    let Some(part) = view.parts.get_mut(key) else { return };
    let rows = if view.q.order.is_empty() {
        part.ks.reader_rows_cut(view.q.published)
    } else {
        // Sorting may need hidden ORDER BY columns: sort full rows, then cut.
        let mut rows = part.ks.reader_rows();
        sort_rows(&mut rows, &view.q.order);
        let width = view.q.published;
        rows.into_iter().map(|r| if r.len() <= width { r } else { r[..width].into() }).collect()
    };
    let published: usize = rows.iter().map(|r| row_bytes(r)).sum();
    let weight = (part.ks.bytes() + published + std::mem::size_of::<Entry>() + 64) as u64;
    view.counters.bytes.fetch_add(weight, AtOrd::Relaxed);
    view.counters.bytes.fetch_sub(part.weight, AtOrd::Relaxed);
    part.weight = weight;
    let entry = Entry { rows: rows.into(), weight: weight.min(u32::MAX as u64) as u32, generation: part.generation };
    shared.cache.insert(EntryKey { view: vid, key: key.clone() }, Arc::new(entry));
}

fn build_request(view: &View, v: ViewId, keys: Vec<Key>, min_position: Position) -> FillRequest {
    let mut queries = Vec::new();
    for s in &view.slots {
        if s.remote.is_some() {
            let plan = view.graph.nodes[s.input].tree.clone();
            let grouped = matches!(view.graph.nodes.get(s.node).map(|n| &n.tree), Some(Node::Aggregate { .. }));
            let (sql, params) = render_fill(&plan, &keys, grouped);
            queries.push(StateQuery { node: s.node, side: s.side, sql, params, plan, grouped });
        }
    }
    let scans = view
        .occs
        .iter()
        .map(|(occ, table, key)| BaseScan { occ: *occ, table: table.clone(), key_columns: key.clone() })
        .collect();
    FillRequest { view: v, keys, min_position, queries, scans }
}

/// Builds the state of partition `key` from a fill response, at the response's position.
fn build_state(view: &View, key: &Key, _ki: usize, resp: &FillResponse) -> Option<KeyState> {
    match &resp.data {
        FillData::BaseRows(scans) => {
            let mut ks = KeyState::empty(&view.graph, key.clone(), resp.position, false);
            let mut deltas: Vec<Vec<Delta>> = vec![Vec::new(); view.n_occ];
            for (rows, (occ, _, kcols)) in scans.iter().zip(&view.occs) {
                for r in rows {
                    let k: Key = kcols.iter().map(|&c| r.get(c).cloned().unwrap_or(Value::Null)).collect();
                    if k == *key {
                        deltas[*occ].push((r.clone(), 1));
                    }
                }
            }
            if scans.len() != view.occs.len() {
                return None;
            }
            ks.process(&view.graph, &mut deltas);
            Some(ks)
        }
        FillData::States(answers) => {
            let mut ks = KeyState::empty(&view.graph, key.clone(), resp.position, true);
            for s in &view.slots {
                let rows: Vec<Delta> = match s.remote {
                    Some(qi) => {
                        let plan = &view.graph.nodes[s.input].tree;
                        let kpos = plan.key_positions();
                        let width = plan.width();
                        let grouped = matches!(view.graph.nodes.get(s.node).map(|n| &n.tree), Some(Node::Aggregate { .. }));
                        answers
                            .get(qi)?
                            .iter()
                            .filter(|(r, _)| {
                                let k: Key = kpos.iter().map(|&c| r.get(c).cloned().unwrap_or(Value::Null)).collect();
                                k == *key
                            })
                            .map(|(r, w)| {
                                if grouped && r.len() == width + 1 {
                                    let n = match r.get(width) {
                                        Some(Value::Int(n)) => *n,
                                        Some(Value::UInt(n)) => *n as i64,
                                        _ => *w,
                                    };
                                    (r.iter().take(width).cloned().collect(), n * w)
                                } else {
                                    (r.clone(), *w)
                                }
                            })
                            .collect()
                    }
                    None => ks.full_output(&view.graph, s.input)?,
                };
                ks.seed(&view.graph, s.node, s.side, rows);
            }
            Some(ks)
        }
    }
}
