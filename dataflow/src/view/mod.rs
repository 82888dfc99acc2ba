//! The writer side of the dataflow and its readers: partitions, holes, fills, positions,
//! eviction, the memory budget and statistics.
//!
//! Owns: [`Dataflow`] (single writer: installs views, groups views that share operators into
//! domains, applies batches, turns misses into fill requests, installs fills, evicts),
//! [`Reader`] (cloneable lookups that never wait for the writer's work), [`ViewStats`].
//! Does not own: operator semantics (ops), SQL (compile, render), fill transport (fill sources).
//!
//! This file holds the writer's state (domains, their partitions and pending fills, views)
//! and installing, dropping and recompiling views. The rest of the writer's work is a module
//! each: applying and publishing batches ([`batches`]), fills ([`fills`]), eviction
//! ([`eviction`]), rebuilding and dropping a partition's reader entries ([`publish`]), fill
//! requests and seeded states ([`seeding`]), dimension tables ([`dims`]); the read side is
//! [`reader`] and [`cache`].
//!
//! Invariants of partial state (ARCHITECTURE.md "Invariants of partial state"), and why they
//! hold here; those that one piece keeps are stated in its module header and named here:
//! - **Holes.** A partition is a hole unless it is in `Domain::parts`. A delta whose partition
//!   is a hole is dropped (`apply`), unless a fill for it is in flight (`Domain::pending`), in
//!   which case it is buffered with its position.
//! - **Fills are idempotent**: only pending partitions take a fill; see [`fills`].
//! - **No double counting**: each committed write is counted once (`since`, `filled_at`); see [`fills`].
//! - **Fills unsure of their position** wait for the stream to pass their unsure range; see [`fills`].
//! - **Descendant eviction**: a partition's derived state goes with it (`drop_part`); see [`eviction`].
//! - **Dimension tables** (see `dims`). A dimension delta reaches exactly the filled partitions
//!   covering its join key (the index mirrors the covers of filled partitions) and, while any
//!   partition is pending, to the domain's shared dimension log, which each fill replays after
//!   its position together with its own buffer (the join drops what the fill does not cover). The
//!   position rules ([`fills`]) apply to it unchanged. A partition that meets a key it does not
//!   cover is evicted after the batch (like a top-k prefix running short), and a fill whose
//!   buffered replay meets one is rejected as stale: the partition stays a hole.
//! - **Readers never wait for the writer's work.** Reader entries live in a sharded map
//!   (`cache`): a read takes one shard's read lock for a probe, and the writer takes a
//!   shard's write lock only for a probe-sized step (one entry put or removed, a grown table
//!   swapped in). The writer builds a partition's complete new result and swaps one
//!   `Arc` per partition after each batch (or, with `apply_held`, after the last of several
//!   held batches, at `publish_held`), so a read sees either all of a batch's effect on a
//!   partition or none of it. Every other operation publishes held batches first, so no entry
//!   built later (a fill) is shown beside an older entry of a held batch's partition. Misses
//!   are recorded in a small mutex-protected set that the writer only swaps out.
//! - **A read of several partitions sees one position** (`Shared::publishing`, `ahead`); see [`batches`].
//! - **Held batches** run a partition's operators once for all of them, as batch after batch would; see [`batches`].
//! - **Reuse.** Views whose trees share a stateful subtree form a *domain*: one graph in
//!   which identical subtrees are stored once (their operators and state are shared), and one
//!   set of partitions. A partition is filled, evicted and budgeted for the whole domain, so
//!   shared state is never evicted under one view while another still reads from it
//!   (descendant eviction across views). Joining a domain empties its partitions, which then
//!   refill on demand: states built before the new operators existed do not cover them.
//! - **Budget**: one reader cache, CLOCK at the global byte budget, its notices drained; see [`eviction`].

mod batches;
mod cache;
mod dims;
mod eviction;
mod explain;
mod fills;
mod publish;
mod reader;
mod renumber;
mod seeding;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering as AtOrd;

pub use batches::ApplyError;
use cache::ReaderCache;
use dims::{Dim, DimIndex, DimLog, find_dims};
pub use explain::{Explanation, explain_sql};
pub use fills::FillOutcome;
pub use reader::{ByteSize, Entry, Lookup, LookupError, Reader, ViewStats};
use reader::{Counters, EntryKey, Shared, stats_of};
use renumber::renumber;

use crate::compile::{Catalog, CompiledQuery, Refusal, compile};
use crate::cost::{CostBounds, cost_bounds};
use crate::delta::Position;
use crate::fill::{FillResponse, ViewId};
use crate::hash::{Map, Set};
use crate::ops::{Delta, Graph, Key, KeyState};
use crate::plan::Node;
use crate::schema::{SqlType, TableSchema};
use crate::value::{Collation, Value};

/// Base deltas of one batch, indexed by base occurrence.
type OccDeltas = Vec<Vec<Delta>>;

/// A partition's key as the domain's map holds it: a key of one value inline (nearly every
/// cached query is keyed by one column; a box of one value would be a block of its own), a
/// wider one boxed. It hashes and compares as the slice of its values, so the map is looked up
/// by `&[Value]`.
#[derive(Clone, Debug)]
enum PartKey {
    One(Value),
    Wide(Key),
}

const _: () = assert!(std::mem::size_of::<PartKey>() == std::mem::size_of::<Value>(), "a one-value key is held inline");

impl PartKey {
    /// The heap blocks a partition's key takes in the map (see [`crate::mem::heap_block`]).
    fn heap_bytes(key: &[Value]) -> usize {
        match key {
            [value] => value.heap_bytes(),
            _ => crate::value::row_heap(key),
        }
    }
}

impl From<&[Value]> for PartKey {
    fn from(key: &[Value]) -> PartKey {
        match key {
            [value] => PartKey::One(value.clone()),
            _ => PartKey::Wide(key.into()),
        }
    }
}

impl std::ops::Deref for PartKey {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        match self {
            PartKey::One(value) => std::slice::from_ref(value),
            PartKey::Wide(key) => key,
        }
    }
}

impl std::borrow::Borrow<[Value]> for PartKey {
    fn borrow(&self) -> &[Value] {
        self
    }
}

impl std::hash::Hash for PartKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        <[Value] as std::hash::Hash>::hash(self, state);
    }
}

impl PartialEq for PartKey {
    fn eq(&self, other: &PartKey) -> bool {
        **self == **other
    }
}

impl Eq for PartKey {}

/// A filled partition. What each view's entry of it weighs is the reader cache's to know
/// (`cache::Slot`), not kept here as well.
struct Part {
    ks: KeyState,
    generation: u64,
}

struct Pending {
    since: Position,
    buffer: Vec<(Position, Vec<Vec<Delta>>)>,
}

/// How a state of the domain gets its contents on a fill.
#[derive(Clone, Debug)]
struct Slot {
    node: usize,
    side: usize,
    input: usize,
    /// Index into the request's queries, if the state is seeded from the source.
    remote: Option<usize>,
    /// For a state seeded from the source: per column of its rows, the collation the dataflow
    /// gives its text values (`Node::column_collation`). The server's result metadata gives
    /// the connection's collation for every column of a derived table, and every fill but a
    /// bare table scan reads one, so seeding gives the values the collation rows from the
    /// binlog get: one column, one collation, in every state.
    collations: Vec<Option<Collation>>,
    /// Per column of those rows: true if it holds text (a copy of a text column, or computed
    /// as text: `CONCAT(name, '!')`), which a grouped fill groups and a capped fill breaks
    /// ties by bytes as well, as the view does (`render_fill_capped`). A number computed from
    /// text (`CHAR_LENGTH(name)`) is not: its bytes order 10 before 9.
    text: Vec<bool>,
}

/// A set of views whose operator trees share state: one graph (identical subtrees stored
/// once), one set of partitions. Filling, evicting and budgeting act on a partition of the
/// whole domain, so shared state is never evicted from under one of its views.
struct Domain {
    graph: Graph,
    /// (occurrence, table as [`Catalog::key`] has it, key columns) per partition-keyed (or,
    /// without parameters, every) base occurrence of the graph.
    occs: Vec<(usize, String, Vec<usize>)>,
    /// The catalog's [`Names::case_sensitive`](crate::Names): whether a change's table is
    /// compared with the names of `occs` and `dims` as it is, or without case.
    case_sensitive: bool,
    /// Dimension occurrences, in graph order, and the index routing their deltas.
    dims: Vec<Dim>,
    dim_index: DimIndex,
    /// Dimension deltas applied while partitions were pending, for their fills to replay.
    dim_log: DimLog,
    n_occ: usize,
    slots: Vec<Slot>,
    parts: Map<PartKey, Part>,
    pending: Map<Key, Pending>,
    /// Filled partitions changed by batches applied with [`Dataflow::apply_held`] whose reader
    /// entries still show the state before them (republished by [`Dataflow::publish_held`]).
    held: Set<Key>,
    /// Deltas of held batches routed to filled partitions and not yet pushed through the
    /// operators, in batch order: a partition that several held transactions touch runs its
    /// operators once for all of them ([`batches::flush`]). See "Held batches" in [`batches`].
    unprocessed: Map<Key, OccDeltas>,
    /// Partitions published with a fill's rows from a newer state than the applied one
    /// ([`reader::Entry::ahead`]), with the fill's position: republished (the mark cleared)
    /// by the first [`Dataflow::publish_held`] at or past it.
    ahead: Vec<(Position, Key)>,
    /// The view fed by each reader index (`None` once dropped).
    views: Vec<Option<ViewId>>,
    /// Changes whenever the graph (and so the layout of fill requests) changes; responses
    /// built for another epoch are ignored.
    epoch: u64,
}

struct View {
    q: Arc<CompiledQuery>,
    domain: usize,
    reader: usize,
    counters: Arc<Counters>,
}

/// A view dropped by DDL and what replaced it: its new id, or why it can no longer be cached.
pub type Recompiled = (ViewId, Result<ViewId, Refusal>);

/// The dataflow: every installed view and the single writer that maintains them.
pub struct Dataflow {
    catalog: Catalog,
    views: Vec<Option<View>>,
    domains: Vec<Option<Domain>>,
    reuse: HashMap<CompiledQuery, ViewId>,
    applied: Position,
    shared: Arc<Shared>,
    next_generation: u64,
    /// `next_generation` at the last eviction sweep: partitions filled since are fresh, and the
    /// next sweep spares them (their reads have not come yet).
    swept_at: u64,
    max_fill_keys: usize,
    max_pending: usize,
    topk_slack: usize,
    /// Fills whose unsure range the stream has not passed yet, oldest first.
    waiting: Vec<FillResponse>,
}

impl Domain {
    fn new(topk_slack: usize) -> Domain {
        Domain {
            graph: Graph::with_topk_slack(topk_slack),
            occs: Vec::new(),
            case_sensitive: false,
            dims: Vec::new(),
            dim_index: DimIndex::default(),
            dim_log: DimLog::default(),
            n_occ: 0,
            slots: Vec::new(),
            parts: Map::default(),
            pending: Map::default(),
            held: Set::default(),
            unprocessed: Map::default(),
            ahead: Vec::new(),
            views: Vec::new(),
            epoch: 0,
        }
    }

    /// Whether `key` (a name of `occs` or `dims`) is the table a change names `table`: a row
    /// event's name is the server's, and is compared without allocating a folded copy.
    fn is_table(&self, key: &str, table: &str) -> bool {
        if self.case_sensitive { key == table } else { key.eq_ignore_ascii_case(table) }
    }

    /// Adds a view's tree; returns its reader index. The caller has emptied the domain's
    /// partitions (their states do not cover the new operators).
    fn add_view(&mut self, v: ViewId, root: &Node, catalog: &Catalog) -> usize {
        let mut next = self.n_occ.max(
            root.bases()
                .iter()
                .filter_map(|b| match b {
                    Node::Base { occ, .. } => Some(occ + 1),
                    _ => None,
                })
                .max()
                .unwrap_or(0),
        );
        let tree = renumber(root, &self.graph, &mut next);
        let reader = self.graph.add_root(&tree);
        self.views.push(Some(v));
        self.epoch += 1;
        self.occs.clear();
        self.case_sensitive = catalog.names().case_sensitive;
        self.dims = find_dims(&self.graph, catalog);
        self.dim_index = DimIndex::new(self.dims.len());
        self.dim_log = DimLog::default();
        for n in &self.graph.nodes {
            if let Node::Base { occ, table, key, .. } = &n.tree
                && !self.dims.iter().any(|d| d.occ == *occ)
            {
                self.occs.push((*occ, catalog.key(table), key.clone()));
            }
        }
        self.n_occ = self.occs.iter().map(|o| o.0 + 1).chain(self.dims.iter().map(|d| d.occ + 1)).max().unwrap_or(0);
        let mut slots = Vec::new();
        for (i, n) in self.graph.nodes.iter().enumerate() {
            if n.tree.is_stateful() {
                for (side, &input) in n.inputs.iter().enumerate() {
                    slots.push(Slot { node: i, side, input, remote: None, collations: Vec::new(), text: Vec::new() });
                }
            }
        }
        for (r, &root) in self.graph.roots.iter().enumerate() {
            slots.push(Slot {
                node: self.graph.nodes.len() + r,
                side: 0,
                input: root,
                remote: None,
                collations: Vec::new(),
                text: Vec::new(),
            });
        }
        let mut remote = 0;
        for s in &mut slots {
            if !self.graph.nodes[s.input].tree.derivable() {
                s.remote = Some(remote);
                remote += 1;
            }
        }
        for s in &mut slots {
            if s.remote.is_some() {
                let plan = seeding::seed_plan(self, s);
                // Text columns only: an ENUM has a collation for its labels, but its values are
                // indexes, compared and tie-broken as numbers.
                let base = |table: &str, column: &str| catalog.column(table, column).filter(|c| matches!(c.ty, SqlType::Text));
                s.collations = (0..plan.width()).map(|c| plan.column_collation(c, &|t, n| base(t, n)?.collation)).collect();
                s.text = (0..plan.width()).map(|c| plan.column_is_text(c, &|t, n| base(t, n).is_some())).collect();
                s.collations.iter().flatten().for_each(|c| c.warm());
            }
        }
        self.slots = slots;
        reader
    }

    /// True if `root` has a stateful subtree this domain already maintains.
    fn shares_state_with(&self, root: &Node) -> bool {
        root.post_order().into_iter().any(|n| n.is_stateful() && self.graph.find(n).is_some())
    }
}

impl Dataflow {
    /// A dataflow over `catalog` with a global memory budget.
    pub fn new(catalog: Catalog, budget: ByteSize) -> Dataflow {
        let cache = ReaderCache::new(budget.0);
        Dataflow {
            catalog,
            views: Vec::new(),
            domains: Vec::new(),
            reuse: HashMap::new(),
            applied: Position(0),
            shared: Arc::new(Shared::new(cache)),
            next_generation: 1,
            swept_at: 1,
            max_fill_keys: 64,
            max_pending: 4096,
            topk_slack: crate::ops::DEFAULT_TOPK_SLACK,
            waiting: Vec::new(),
        }
    }

    /// Sets how many rows beyond `OFFSET + LIMIT` a top-k state keeps (default 16) for views
    /// installed afterwards. More slack means fewer refills after deletions, more memory.
    pub fn set_topk_slack(&mut self, n: usize) {
        self.topk_slack = n;
    }

    /// Sets the most partitions one fill request may carry (default 64).
    pub fn set_max_fill_keys(&mut self, n: usize) {
        self.max_fill_keys = n.max(1);
    }

    /// Sets the most partitions of one domain that may have a fill in flight (default 4096).
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
    /// Fills ahead of the old position that the new one reaches are republished unmarked at
    /// once (a schema change's position may be the last the stream brings for a while).
    pub fn set_applied(&mut self, p: Position) {
        self.publish_held();
        self.applied = self.applied.max(p);
        self.publish_held();
    }

    /// Starts a new binlog history at `p`, which may be lower than anything applied: the
    /// server's binary logs were reset (RESET MASTER) or another server answers at its address.
    /// Every partition and pending fill is dropped, and with them the dimension deltas logged
    /// for fills to replay, whose positions belong to the old history; from here batches and
    /// fills are compared with `p`. [`Dataflow::set_applied`] never moves back, so that a
    /// position of the old history cannot be mistaken for a later one of the new.
    pub fn restart_at(&mut self, p: Position) {
        self.evict_all();
        for domain in self.domains.iter_mut().flatten() {
            domain.dim_log = DimLog::default();
        }
        self.applied = p;
    }

    /// Compiles and installs `sql`.
    pub fn install_sql(&mut self, sql: &str) -> Result<ViewId, Refusal> {
        let q = compile(sql, &self.catalog)?;
        Ok(self.install(q))
    }

    /// Installs a compiled query. A query whose compiled plan is identical to an installed
    /// one (whatever its text) shares that view. A query that has a stateful subtree identical
    /// to one an installed view maintains joins that view's domain and shares the subtree's
    /// operators and state (exact-subtree reuse); the domain's partitions are emptied then,
    /// and refill on demand.
    pub fn install(&mut self, q: CompiledQuery) -> ViewId {
        self.publish_held();
        // Readers hash text keys by their weights: built here, not at a read.
        q.key_columns.iter().filter_map(|k| k.collation).for_each(Collation::warm);
        let mut ident = q.clone();
        ident.sql = String::new();
        if let Some(v) = self.reuse.get(&ident) {
            return *v;
        }
        let id = ViewId(self.views.len() as u32);
        let existing = self.domains.iter().position(|d| d.as_ref().is_some_and(|d| d.shares_state_with(&q.root)));
        let di = match existing {
            Some(di) => {
                self.evict_domain(di);
                di
            }
            None => {
                self.domains.push(Some(Domain::new(self.topk_slack)));
                self.domains.len() - 1
            }
        };
        // `di` indexes a domain that was found live above or pushed just now, and nothing in
        // between removes domains: this `else` cannot run.
        let Some(domain) = self.domains[di].as_mut() else { unreachable!("domain {di} was just found or created") };
        let reader = domain.add_view(id, &q.root, &self.catalog);
        if q.order.iter().all(|&(c, _)| c < q.published) {
            domain.graph.keep_columns(reader, q.published);
        }
        self.views.push(Some(View { q: Arc::new(q), domain: di, reader, counters: Arc::new(Counters::default()) }));
        self.reuse.insert(ident, id);
        id
    }

    /// Drops view `v`: its reader entries are freed and its readers answer
    /// [`LookupError::NoView`]. Operators it shared stay with the other views of its domain.
    pub fn drop_view(&mut self, v: ViewId) -> bool {
        self.publish_held();
        let Some(view) = self.views.get_mut(v.0 as usize).and_then(Option::take) else { return false };
        view.counters.dropped.store(true, AtOrd::Release);
        self.reuse.retain(|_, id| *id != v);
        if let Ok(mut m) = self.shared.misses.lock() {
            m.remove(&v.0);
        }
        let di = view.domain;
        let Some(domain) = self.domains.get_mut(di).and_then(Option::as_mut) else { return true };
        for k in domain.parts.keys() {
            self.shared.cache.remove(&EntryKey::of(v.0, k));
        }
        if let Some(slot) = domain.views.get_mut(view.reader) {
            *slot = None;
        }
        if domain.views.iter().all(Option::is_none) {
            self.evict_domain(di);
            self.domains[di] = None;
        }
        true
    }

    /// Applies DDL: replaces (or, with `None`, removes) table `name`'s schema. Every view that
    /// reads the table is dropped — never serve rows shaped by the old schema — and recompiled
    /// from its SQL against the new catalog. Returns, per dropped view, its replacement or why
    /// it can no longer be cached. A new schema the catalog refuses removes the table: its
    /// views are dropped all the same (the binlog's rows have the new shape), and each one's
    /// refusal says why.
    pub fn alter_table(&mut self, name: &str, schema: Option<TableSchema>) -> Vec<Recompiled> {
        let refused = match schema.map(|s| self.catalog.add(s)) {
            Some(Ok(())) => None,
            // The catalog no longer has the table, and says why.
            Some(Err(e)) => Some(e),
            None => {
                self.catalog.remove(name);
                None
            }
        };
        let lower = self.catalog.key(name);
        let affected: Vec<(ViewId, String)> = self
            .views
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().map(|v| (i, v)))
            .filter(|(_, v)| v.q.tables.contains(&lower))
            .map(|(i, v)| (ViewId(i as u32), v.q.sql.clone()))
            .collect();
        for (v, _) in &affected {
            self.drop_view(*v);
        }
        affected
            .into_iter()
            .map(|(v, sql)| match &refused {
                Some(e) => (v, Err(Refusal { reason: format!("the new schema of `{name}` is refused: {e}") })),
                None => (v, self.install_sql(&sql)),
            })
            .collect()
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

    /// Views sharing operators and partitions with `v` (itself included).
    pub fn domain_of(&self, v: ViewId) -> Vec<ViewId> {
        self.view(v)
            .and_then(|x| self.domains.get(x.domain)?.as_ref())
            .map(|d| d.views.iter().flatten().copied().collect())
            .unwrap_or_default()
    }

    fn view(&self, v: ViewId) -> Option<&View> {
        self.views.get(v.0 as usize).and_then(Option::as_ref)
    }

    /// Filled partitions of view `v` (for tests and admin statements).
    pub fn filled_keys(&self, v: ViewId) -> Vec<Key> {
        self.view(v)
            .and_then(|x| self.domains.get(x.domain)?.as_ref())
            .map(|d| d.parts.keys().map(|k| Key::from(&**k)).collect())
            .unwrap_or_default()
    }
}

fn view_counters<'a>(views: &'a [Option<View>], v: &ViewId) -> Option<&'a Counters> {
    views.get(v.0 as usize).and_then(Option::as_ref).map(|x| x.counters.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_key_is_found_by_any_equal_values() {
        let one: Key = Box::new([Value::Int(5)]);
        let wide: Key = vec![Value::Int(1), Value::text("a", Collation::Utf8mb4GeneralCi)].into();
        assert!(matches!(PartKey::from(&*one), PartKey::One(_)), "a one-value key is inline");
        let mut map: Map<PartKey, u32> = Map::default();
        map.insert(PartKey::from(&*one), 1);
        map.insert(PartKey::from(&*wide), 2);
        // Equal values of another type or spelling find the partition, as they did in a map
        // keyed by the boxed slice: the key hashes and compares as its values.
        assert_eq!(map.get(&[Value::UInt(5)][..]), Some(&1));
        assert_eq!(map.get(&[Value::Int(1), Value::text("A", Collation::Utf8mb4GeneralCi)][..]), Some(&2));
        assert_eq!(map.get(&[Value::Int(5), Value::Null][..]), None);
        assert_eq!(map.get(&[Value::Int(1)][..]), None);
        assert_eq!(map.get(&[][..]), None);
    }
}
