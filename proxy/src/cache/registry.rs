//! The registry: what is cached, read by every session, changed rarely.
//!
//! Owns: the caches (config and `CREATE CACHE`) and their views ([`Cache::live`]), the
//! verdicts for query shapes (via [`super::matcher`]), the catalog sessions match against,
//! and the column definitions captured from the upstream per query shape ([`Columns`]).
//! Does not own: changing the dataflow (the writer installs and recompiles views, then
//! publishes them here: [`Registry::add`], [`Cache::set_live`], [`Registry::publish_catalog`]),
//! counting (the engine counts what its callers did).
//!
//! Invariant: column definitions are the upstream's own packets for that query shape and
//! session character set, captured from a relayed answer, never built by freshet, and kept
//! only if they describe the cache's own tables and columns ([`Registry::store_columns`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::{Bytes, BytesMut};

use freshet_config::CacheSpec;
use freshet_dataflow::{Catalog, Dataflow, Reader, ViewId, ViewStats};

use super::latency::LatencySketch;
use super::matcher::{self, Pattern};
use super::route::{Entry, Verdict, VerdictTable};
use super::warm;
use crate::encode::text::Column;
use crate::matching::{self, CacheId, Query, SqlMode};
use crate::metrics::{Counter, Histogram};
use crate::protocol::column::ColumnDef;
use crate::protocol::cursor::put_lenenc;
use crate::protocol::io::frame_packet;

/// How many query shapes the verdict table remembers (and column definitions are kept for).
pub(super) const VERDICTS: usize = 10_000;

/// The view behind a cache while it can be served.
pub struct Live {
    pub view: ViewId,
    pub reader: Reader,
    pub cost_class: &'static str,
}

impl Live {
    /// The view `view` of `dataflow`, as sessions read it.
    pub(super) fn of(dataflow: &Dataflow, view: ViewId) -> Option<Arc<Live>> {
        let reader = dataflow.reader(view)?;
        let cost_class = dataflow.cost(view).map_or("unknown", |c| c.class());
        Some(Arc::new(Live { view, reader, cost_class }))
    }
}

/// One cached query.
pub struct Cache {
    pub id: CacheId,
    pub name: String,
    pub sql: String,
    /// Created with CREATE CACHE (gone at restart).
    pub runtime: bool,
    pattern: Pattern,
    live: RwLock<Result<Arc<Live>, String>>,
    pub hit_latency: LatencySketch,
    /// The same, for Prometheus.
    pub hit_histogram: Histogram,
    /// Reads, counted once each (the view's own counters count every lookup, and a read
    /// waiting for its fill looks up again after each completed fill).
    pub reads: ReadCounts,
    /// The recently read keys, for the warm restart ([`warm`]).
    pub hot: warm::HotKeys,
    /// What the views this cache had before its current one counted (DDL rebuilds a view,
    /// whose own counters start from zero), with the partitions it held when it was dropped
    /// as evictions: [`Cache::stats`] adds them, so that its counters never go back.
    earlier: Mutex<ViewStats>,
}

/// What became of the reads routed to one cache.
#[derive(Default)]
pub struct ReadCounts {
    /// Answered from memory at the first look.
    pub hit: Counter,
    /// Found a hole: answered after waiting for the fill, or relayed when it was late.
    pub missed: Counter,
    /// Of the missed, answered from memory after the fill arrived.
    pub filled: Counter,
}

impl ReadCounts {
    /// Reads answered at the first look, over all reads that looked (None before any).
    pub fn hit_ratio(&self) -> Option<f64> {
        let (hit, missed) = (self.hit.get(), self.missed.get());
        (hit + missed > 0).then(|| hit as f64 / (hit + missed) as f64)
    }
}

impl Cache {
    /// The view, or why there is none.
    pub fn live(&self) -> Result<Arc<Live>, String> {
        self.live.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The current view's partitions and bytes; hits, misses, fills and evictions of every
    /// view the cache had.
    pub fn stats(&self) -> ViewStats {
        let now = self.live().map(|l| l.reader.stats()).unwrap_or_default();
        let e = *self.earlier.lock().unwrap_or_else(|e| e.into_inner());
        ViewStats {
            hits: now.hits + e.hits,
            misses: now.misses + e.misses,
            fills: now.fills + e.fills,
            evictions: now.evictions + e.evictions,
            ..now
        }
    }

    /// The writer: the cache's view after DDL (recompiled, refused, or revived).
    pub(super) fn set_live(&self, live: Result<Arc<Live>, String>) {
        let mut slot = self.live.write().unwrap_or_else(|e| e.into_inner());
        if let Ok(old) = &*slot
            && live.as_ref().map_or(true, |new| new.view != old.view)
        {
            let s = old.reader.stats();
            let mut e = self.earlier.lock().unwrap_or_else(|e| e.into_inner());
            e.hits += s.hits;
            e.misses += s.misses;
            e.fills += s.fills;
            // What the old view still held goes with it.
            e.evictions += s.evictions + s.keys;
        }
        *slot = live;
    }
}

/// Column definitions captured from the upstream for one query shape.
pub struct Columns {
    /// The definition packets' payloads, verbatim.
    pub packets: Vec<Bytes>,
    /// How each column renders.
    pub render: Vec<Column>,
    /// The head of every answer, framed once: the column count and the definitions, with
    /// sequence ids from 1 (the reply to a command of one frame, as nearly every command is).
    pub head: Bytes,
    /// The sequence id of the packet after the head.
    pub after_head: u8,
    /// Cleared when a value of this shape could not be encoded: its reads are relayed without
    /// looking up the view again.
    pub encodable: AtomicBool,
    /// The index flags of the captured reply's status (`StatusFlags::NO_INDEX_USED`,
    /// `NO_GOOD_INDEX_USED`): how the server runs this shape, which an answer's EOF says.
    pub plan: u16,
}

impl Columns {
    /// The definitions as captured, and how each renders.
    pub fn new(packets: Vec<Bytes>, render: Vec<Column>) -> Columns {
        let mut head = BytesMut::new();
        let after_head = frame_head(&mut head, 1, &packets);
        Columns { packets, render, head: head.freeze(), after_head, encodable: AtomicBool::new(true), plan: 0 }
    }

    /// The same, as the server ran the captured read: `status`'s index flags.
    pub fn with_plan(self, status: u16) -> Columns {
        let plan = status & (crate::protocol::StatusFlags::NO_INDEX_USED | crate::protocol::StatusFlags::NO_GOOD_INDEX_USED);
        Columns { plan, ..self }
    }
}

/// Appends the head of an answer to `out`, framed from sequence id `seq`: the column count
/// (a length-encoded integer) and the definitions. Returns the next sequence id.
pub fn frame_head(out: &mut BytesMut, seq: u8, definitions: &[Bytes]) -> u8 {
    let mut count = Vec::with_capacity(9);
    put_lenenc(&mut count, definitions.len() as u64);
    let mut seq = frame_packet(out, seq, &count);
    for def in definitions {
        seq = frame_packet(out, seq, def);
    }
    seq
}

/// What captured column definitions are keyed by: the query shape, the session's character
/// set state, and the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ColumnsKey {
    /// The cache the shape matched (its definitions are forgotten when its tables change).
    pub cache: CacheId,
    pub fingerprint: u64,
    /// The kinds of the read's literals, and an execute's parameters' types
    /// (`matching::literal::kinds`): the server may describe the columns of `k = '1'` and
    /// `k = 1` apart.
    pub literals: u64,
    pub charset: u64,
    pub binary: bool,
    /// The session negotiated MariaDB's extended type information (another definition
    /// layout).
    pub extended: bool,
}

/// The caches, their verdicts, the catalog and the captured column definitions.
pub struct Registry {
    /// The database every cached query reads.
    database: String,
    /// `[warm] keys_per_cache` (0 without `[warm] dir`: nothing would read the record).
    warm_keys: usize,
    caches: RwLock<Vec<Arc<Cache>>>,
    /// Counts the changes of `caches` (CREATE and DROP CACHE), each made before the verdicts
    /// they may change are forgotten: a verdict taken from the caches as they were and stored
    /// after that forget is taken again ([`Registry::verdict`]).
    caches_changed: AtomicU64,
    next_id: AtomicU64,
    pub verdicts: VerdictTable,
    catalog: RwLock<Arc<Catalog>>,
    columns: RwLock<HashMap<ColumnsKey, Arc<Columns>>>,
    /// Counts the changes of `columns`, each made under its write lock: a session's
    /// [`ColumnsMemo`] taken at the current count holds what the map holds for its key.
    columns_epoch: AtomicU64,
    /// Counts the forgets of column definitions (DDL, a gap), each made under the map's write
    /// lock: a capture noted at a count before its query went upstream is kept only if no
    /// forget came since, else it may describe the table as it was before the DDL.
    columns_forgotten: AtomicU64,
}

/// The column definitions of a session's last few cached shapes, with the registry's change
/// count when they were looked up: the next hit of one of these shapes takes its definitions
/// from here, without hashing the key or taking the map's lock, while no definition has been
/// stored or forgotten since ([`Registry::columns_memo`]). A few, because a request of an
/// application often runs several cached queries in turn.
#[derive(Default)]
pub struct ColumnsMemo {
    epoch: u64,
    entries: [Option<(ColumnsKey, Arc<Columns>)>; ColumnsMemo::ENTRIES],
    /// The entry the next new shape takes (round robin).
    next: usize,
}

impl ColumnsMemo {
    const ENTRIES: usize = 4;
}

impl Registry {
    pub(super) fn new(database: String, warm_keys: usize, verdict_bytes: usize, catalog: Catalog) -> Registry {
        Registry {
            database,
            warm_keys,
            caches: RwLock::new(Vec::new()),
            caches_changed: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
            verdicts: VerdictTable::with_budget(VERDICTS, verdict_bytes),
            catalog: RwLock::new(Arc::new(catalog)),
            columns: RwLock::new(HashMap::new()),
            columns_epoch: AtomicU64::new(0),
            columns_forgotten: AtomicU64::new(0),
        }
    }

    /// Every cache, in creation order.
    pub fn caches(&self) -> Vec<Arc<Cache>> {
        self.caches.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn by_name(&self, name: &str) -> Option<Arc<Cache>> {
        self.caches.read().unwrap_or_else(|e| e.into_inner()).iter().find(|c| c.name.eq_ignore_ascii_case(name)).cloned()
    }

    /// How many times the set of caches changed (CREATE and DROP CACHE): a route taken at an
    /// older count may name a dropped cache.
    pub fn caches_changed(&self) -> u64 {
        self.caches_changed.load(Ordering::Acquire)
    }

    pub fn by_id(&self, id: CacheId) -> Option<Arc<Cache>> {
        self.caches.read().unwrap_or_else(|e| e.into_inner()).iter().find(|c| c.id == id).cloned()
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The verdict entry for a classified query: remembered, or taken now (the full parse).
    pub fn verdict(&self, query: &Query<'_>) -> Arc<Entry> {
        if let Some(entry) = self.verdicts.get(&query.fingerprint) {
            return entry;
        }
        loop {
            // Taken again if the caches changed meanwhile: a verdict of the caches before a
            // CREATE or DROP CACHE, stored after it forgot the verdicts, would be kept for good
            // (a new cache never asked, a dropped one asked). The count goes up before the
            // forget, under the caches' lock, and the forget takes the lock of each shard,
            // which the insert takes too: a verdict stored after the forget sees the new
            // count, and one stored before it is forgotten.
            let changed = self.caches_changed.load(Ordering::Acquire);
            let caches = self.caches();
            let patterns: Vec<(CacheId, &Pattern)> = caches.iter().filter(|c| c.live().is_ok()).map(|c| (c.id, &c.pattern)).collect();
            // Taken again if the catalog changed meanwhile: a verdict of the schema before DDL,
            // stored after the DDL forgot the verdicts, would be kept for good. The catalog is
            // replaced after the patterns are compiled anew and before the verdicts are
            // forgotten (`publish_catalog`), so a verdict taken under one catalog and stored
            // is either of the new schema or forgotten.
            let mut catalog = self.catalog();
            let verdict = loop {
                let verdict = matcher::verdict(query, &patterns, &catalog);
                let now = self.catalog();
                if Arc::ptr_eq(&now, &catalog) {
                    break verdict;
                }
                catalog = now;
            };
            let entry = self.verdicts.insert(&query.fingerprint, verdict);
            if self.caches_changed.load(Ordering::Acquire) == changed {
                return entry;
            }
        }
    }

    /// Compiles and installs one cache into the dataflow (start-up, or in the writer for
    /// CREATE CACHE); not yet [added](Registry::add).
    pub(super) fn build(&self, dataflow: &mut Dataflow, spec: &CacheSpec, runtime: bool) -> Result<Arc<Cache>, String> {
        if self.by_name(&spec.name).is_some() {
            return Err(format!("a cache named {} exists already", spec.name));
        }
        let query = matching::classify(spec.query.as_bytes(), SqlMode::default());
        let pattern = Pattern::new(&query, dataflow.catalog())?;
        let view = dataflow.install_sql(&spec.query).map_err(|r| r.reason)?;
        let live = Live::of(dataflow, view).ok_or("the view vanished while being installed")?;
        Ok(self.cache(spec, runtime, pattern, Ok(live)))
    }

    /// A configured cache that cannot be built: kept, unavailable, its queries relayed.
    pub(super) fn unavailable(&self, spec: &CacheSpec, reason: String) -> Arc<Cache> {
        let query = matching::classify(spec.query.as_bytes(), SqlMode::default());
        let pattern = Pattern::new(&query, &self.catalog()).unwrap_or_else(|_| Pattern::never(&spec.query));
        self.cache(spec, false, pattern, Err(reason))
    }

    fn cache(&self, spec: &CacheSpec, runtime: bool, pattern: Pattern, live: Result<Arc<Live>, String>) -> Arc<Cache> {
        Arc::new(Cache {
            id: CacheId(self.next_id.fetch_add(1, Ordering::Relaxed) as u32),
            name: spec.name.clone(),
            sql: spec.query.clone(),
            runtime,
            pattern,
            live: RwLock::new(live),
            hit_latency: LatencySketch::default(),
            hit_histogram: Histogram::default(),
            reads: ReadCounts::default(),
            hot: warm::HotKeys::new(self.warm_keys),
            earlier: Mutex::default(),
        })
    }

    /// Makes a built cache visible to sessions, and renews every verdict: each is taken anew
    /// at its shape's next read ([`VerdictTable::renew`]).
    ///
    /// Every one, because any may change. A shape relayed for want of a cache may match the
    /// new one; a shape whose verdict lists caches may be the new cache's too, by its text or
    /// by its plan (caches of one shape differ in a constant: `id > 100`, `id > 200`), and a
    /// verdict kept would never ask it (until session 53 cache verdicts were kept, and the
    /// second cache of a shape created at runtime never served). Telling which verdicts the
    /// new cache cannot change would take each shape's plan, which is not kept: its text would
    /// be compiled again anyway. The cost: each shape's next read takes the full parse again
    /// (a compile for a text not of a cache's spelling); CREATE CACHE is an operator's act,
    /// not a read's. The shapes' statistics go on (SHOW PROXIED QUERIES).
    pub(super) fn add(&self, cache: Arc<Cache>) {
        {
            let mut caches = self.caches.write().unwrap_or_else(|e| e.into_inner());
            caches.push(cache);
            self.caches_changed.fetch_add(1, Ordering::AcqRel);
        }
        self.verdicts.renew(|_| true);
    }

    /// Forgets a cache and the verdicts that sent reads to it (DROP CACHE).
    pub(super) fn remove(&self, id: CacheId) {
        {
            let mut caches = self.caches.write().unwrap_or_else(|e| e.into_inner());
            caches.retain(|c| c.id != id);
            self.caches_changed.fetch_add(1, Ordering::AcqRel);
        }
        self.verdicts.retain(|e| !e.verdict.matches().iter().any(|m| m.id == id));
    }

    /// The writer: the catalog sessions match against follows the dataflow's; verdicts and
    /// column definitions that may depend on `table`'s old schema (None: on anything) are
    /// forgotten.
    pub(super) fn publish_catalog(&self, catalog: Catalog, table: Option<&str>) {
        // The caches' patterns first, then the catalog, then the verdicts: see `verdict`.
        for cache in self.caches() {
            cache.pattern.recompile(&catalog);
        }
        *self.catalog.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(catalog);
        self.forget_for_table(table);
    }

    /// After DDL on `table` (None: on anything, e.g. after a reconnect): verdicts and column
    /// definitions that may depend on it are forgotten and taken anew on next use. Relay
    /// verdicts always go (a new table or column can make a query cacheable); cache verdicts
    /// and definitions only for the caches that read the table.
    fn forget_for_table(&self, table: Option<&str>) {
        let affected = self.reading(table);
        self.verdicts.retain(|e| matches!(&e.verdict, Verdict::Cache(m) if m.iter().all(|m| !affected.contains(&m.id))));
        self.forget_columns_of(&affected);
    }

    /// After DDL on `table` that leaves its schema as the views know it (an index, a wider
    /// VARCHAR): the column definitions of the caches that read it are forgotten, since they
    /// carry what the catalog does not (display lengths, key flags); verdicts and views stay.
    pub(super) fn forget_columns(&self, table: &str) {
        self.forget_columns_of(&self.reading(Some(table)));
    }

    /// The caches that read `table` (None: every cache), and those without a view.
    fn reading(&self, table: Option<&str>) -> Vec<CacheId> {
        self.caches()
            .iter()
            .filter(|c| match (table, c.live()) {
                (None, _) | (_, Err(_)) => true,
                (Some(t), Ok(live)) => live.reader.query().tables.iter().any(|x| x.eq_ignore_ascii_case(t)),
            })
            .map(|c| c.id)
            .collect()
    }

    fn forget_columns_of(&self, caches: &[CacheId]) {
        let mut columns = self.columns.write().unwrap_or_else(|e| e.into_inner());
        columns.retain(|k, _| !caches.contains(&k.cache));
        self.columns_epoch.fetch_add(1, Ordering::Release);
        self.columns_forgotten.fetch_add(1, Ordering::Release);
    }

    /// The count of forgets, to note when a capture's query goes upstream
    /// ([`Registry::store_columns`]).
    pub fn columns_forgotten(&self) -> u64 {
        self.columns_forgotten.load(Ordering::Acquire)
    }

    pub fn columns(&self, key: &ColumnsKey) -> Option<Arc<Columns>> {
        self.columns.read().unwrap_or_else(|e| e.into_inner()).get(key).cloned()
    }

    /// [`Registry::columns`] through a session's memo: what the map holds for `key` now.
    /// The memo answers while the map has not changed since its entries were taken; a change
    /// in progress (under the write lock, not yet counted) orders this read before it, as the
    /// read lock would.
    pub fn columns_memo(&self, memo: &mut ColumnsMemo, key: &ColumnsKey) -> Option<Arc<Columns>> {
        let epoch = self.columns_epoch.load(Ordering::Acquire);
        if memo.epoch == epoch
            && let Some((_, columns)) = memo.entries.iter().flatten().find(|(k, _)| k == key)
        {
            return Some(columns.clone());
        }
        let map = self.columns.read().unwrap_or_else(|e| e.into_inner());
        // Under the read lock no change is in progress: the count matches the map.
        let epoch = self.columns_epoch.load(Ordering::Acquire);
        if memo.epoch != epoch {
            *memo = ColumnsMemo { epoch, ..ColumnsMemo::default() };
        }
        let found = map.get(key).cloned();
        if let Some(columns) = &found {
            memo.entries[memo.next] = Some((*key, columns.clone()));
            memo.next = (memo.next + 1) % ColumnsMemo::ENTRIES;
        }
        found
    }

    /// Keeps the column definitions the upstream sent for a shape if they are the cache's
    /// own (see [`Registry::check_capture`]); else says why not, and keeps nothing (so one bad
    /// capture poisons nothing). Labels of ENUM and SET columns come from the catalog (the
    /// view holds their indexes). `noted`: [`Registry::columns_forgotten`] before the query
    /// went upstream; if definitions were forgotten since, these are not kept (they may be the
    /// table's before a DDL that the forget was for), and the next read captures again.
    pub fn store_columns(&self, key: ColumnsKey, packets: Vec<Bytes>, status: u16, noted: u64) -> Result<(), String> {
        self.check_capture(&key, &packets)?;
        let catalog = self.catalog();
        let mut render = Vec::with_capacity(packets.len());
        for p in &packets {
            let Ok(def) = ColumnDef::parse_with(p, key.extended) else { return Ok(()) };
            let labels = enum_labels(p, &def, &catalog);
            render.push(Column { def, labels });
        }
        self.keep_columns(key, Columns::new(packets, render).with_plan(status), noted);
        Ok(())
    }

    /// Puts checked definitions in the map unless a forget came after `noted`; whether it did.
    fn keep_columns(&self, key: ColumnsKey, columns: Columns, noted: u64) -> bool {
        let mut map = self.columns.write().unwrap_or_else(|e| e.into_inner());
        // Forgets are counted under this lock: none can come between the check and the insert.
        if self.columns_forgotten.load(Ordering::Relaxed) != noted {
            return false;
        }
        // Bounded like the verdicts: shapes x charsets x protocols stay few in practice;
        // past the bound, start over rather than grow.
        if map.len() >= VERDICTS {
            map.clear();
        }
        map.insert(key, Arc::new(columns));
        self.columns_epoch.fetch_add(1, Ordering::Release);
        true
    }

    /// Column definitions describe the cache's own result only if there is one per result
    /// column and each column with an origin comes from the caches' database, from one of
    /// the cache's tables, and names a column the catalog has. A session whose names resolve
    /// elsewhere (another default database, a temporary table) is not let through to a
    /// capture by the routing checks; this is the second line.
    fn check_capture(&self, key: &ColumnsKey, packets: &[Bytes]) -> Result<(), String> {
        let cache = self.by_id(key.cache).ok_or("the cache is gone")?;
        let live = cache.live()?;
        let query = live.reader.query();
        if packets.len() != query.visible {
            return Err(format!("{} columns where the cache has {}", packets.len(), query.visible));
        }
        let catalog = self.catalog();
        let database = &self.database;
        for p in packets {
            let (schema, org_table, org_name) = column_origin(p).ok_or("a column definition too short to read")?;
            if org_table.is_empty() && org_name.is_empty() {
                // An expression (COUNT(*), ...): no origin to check; its type is the plan's.
                continue;
            }
            if !catalog.in_database(&schema) {
                return Err(format!("column {org_name} comes from database {schema}, not {database}"));
            }
            if !query.tables.iter().any(|t| catalog.same_name(t, &org_table)) {
                return Err(format!("column {org_name} comes from table {org_table}, which the cache does not read"));
            }
            if catalog.get(&org_table).and_then(|t| t.column_index(&org_name)).is_none() {
                return Err(format!("column {org_table}.{org_name} is not in the table freshet knows"));
            }
        }
        Ok(())
    }

    /// Bytes held by all views.
    pub fn memory_used(&self) -> u64 {
        let mut seen = std::collections::HashSet::new();
        self.caches().iter().filter_map(|c| c.live().ok()).filter(|l| seen.insert(l.view)).map(|l| l.reader.stats().bytes).sum()
    }
}

/// (schema, org_table, org_name) of a column definition packet.
fn column_origin(packet: &[u8]) -> Option<(String, String, String)> {
    let mut c = crate::protocol::cursor::Cursor::new(packet);
    let mut field = || c.lenenc_bytes().ok().map(|b| String::from_utf8_lossy(b).into_owned());
    let (_catalog, schema, _table, org_table, _name, org_name) = (field()?, field()?, field()?, field()?, field()?, field()?);
    Some((schema, org_table, org_name))
}

/// ENUM/SET labels of a result column, from its origin table and column in the catalog.
fn enum_labels(packet: &[u8], def: &ColumnDef, catalog: &Catalog) -> Vec<String> {
    use crate::protocol::column::flags;
    if !def.has(flags::ENUM) && !def.has(flags::SET) {
        return Vec::new();
    }
    let mut c = crate::protocol::cursor::Cursor::new(packet);
    let mut field = || c.lenenc_bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
    let (_catalog, _schema, _table, org_table, _name, org_name) = (field(), field(), field(), field(), field(), field());
    let Some(table) = catalog.get(&org_table) else { return Vec::new() };
    let Some(i) = table.column_index(&org_name) else { return Vec::new() };
    match &table.columns[i].ty {
        freshet_dataflow::SqlType::Enum(labels) | freshet_dataflow::SqlType::Set(labels) => labels.clone(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns() -> Arc<Columns> {
        Arc::new(Columns::new(Vec::new(), Vec::new()))
    }

    fn key(cache: u32, fingerprint: u64) -> ColumnsKey {
        ColumnsKey { cache: CacheId(cache), fingerprint, literals: 0, charset: 45, binary: true, extended: false }
    }

    /// Puts `columns` in the map as a stored capture does (counted), without the checks.
    fn put(registry: &Registry, key: ColumnsKey, columns: &Arc<Columns>) {
        registry.columns.write().unwrap().insert(key, columns.clone());
        registry.columns_epoch.fetch_add(1, Ordering::Release);
    }

    #[test]
    fn the_memo_answers_what_the_map_holds() {
        let registry = Registry::new("db".into(), 0, 1 << 20, Catalog::new());
        let mut memo = ColumnsMemo::default();
        assert!(registry.columns_memo(&mut memo, &key(1, 1)).is_none(), "nothing stored");
        let shapes: Vec<(ColumnsKey, Arc<Columns>)> = (0..6).map(|f| (key(1 + f as u32 % 2, f), columns())).collect();
        for (k, c) in &shapes {
            put(&registry, *k, c);
        }
        // More shapes than the memo holds, in turn, twice: each read is the map's own entry.
        for _ in 0..2 {
            for (k, c) in &shapes {
                assert!(Arc::ptr_eq(&registry.columns_memo(&mut memo, k).unwrap(), c));
            }
        }
        // Every shape of cache 2 is forgotten (DDL on its table); cache 1's stay. The last
        // shapes read, in the memo, first.
        registry.forget_columns_of(&[CacheId(2)]);
        for (k, c) in shapes.iter().rev() {
            let got = registry.columns_memo(&mut memo, k);
            if k.cache == CacheId(2) {
                assert!(got.is_none(), "a forgotten shape is not answered from the memo");
            } else {
                assert!(Arc::ptr_eq(&got.unwrap(), c));
            }
        }
        // A shape captured again gets its new definitions, also in a memo that held the old.
        let (k, _) = &shapes[1];
        let again = columns();
        put(&registry, *k, &again);
        assert!(Arc::ptr_eq(&registry.columns_memo(&mut memo, k).unwrap(), &again));
    }

    /// A capture whose query went upstream before a forget (DDL on its table) may describe the
    /// table as it was: it is not kept. One noted after the forget is.
    #[test]
    fn a_capture_from_before_a_forget_is_not_kept() {
        let registry = Registry::new("db".into(), 0, 1 << 20, Catalog::new());
        let mut memo = ColumnsMemo::default();
        let before = registry.columns_forgotten();
        registry.forget_columns_of(&[CacheId(1)]);
        assert!(!registry.keep_columns(key(1, 1), Columns::new(Vec::new(), Vec::new()), before));
        assert!(registry.columns_memo(&mut memo, &key(1, 1)).is_none(), "nothing kept");
        let after = registry.columns_forgotten();
        assert!(registry.keep_columns(key(1, 1), Columns::new(Vec::new(), Vec::new()), after));
        assert!(registry.columns_memo(&mut memo, &key(1, 1)).is_some());
    }
}
