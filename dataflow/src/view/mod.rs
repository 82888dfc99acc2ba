//! The writer side of the dataflow and its readers: partitions, holes, fills, positions,
//! eviction, the memory budget and statistics.
//!
//! Owns: [`Dataflow`] (single writer: installs views, groups views that share operators into
//! domains, applies batches, turns misses into fill requests, installs fills, evicts),
//! [`Reader`] (cloneable lookups that never wait for the writer's work), [`ViewStats`].
//! Does not own: operator semantics (ops), SQL (compile, render), fill transport (fill sources).
//!
//! Invariants of partial state (ARCHITECTURE.md "Invariants of partial state"), and why they
//! hold here:
//! - **Holes.** A partition is a hole unless it is in `Domain::parts`. A delta whose partition
//!   is a hole is dropped (`apply`), unless a fill for it is in flight (`Domain::pending`), in
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
//! - **Fills unsure of their position** ([`FillResponse::unsure`]: MariaDB's snapshot position
//!   is off by a few commits now and then). Such a fill waits in `Dataflow::waiting`, its
//!   partitions pending, until the applied position has passed its unsure range
//!   ([`Dataflow::settle_fills`]); then every commit that ended in the range is known, and a
//!   partition is installed only if the range does not begin before its `since` (commits
//!   before it were dropped unseen) and no commit from `since` to the range's end is in its
//!   buffer or is a dimension row its filled state covers (the shared log): the range checked
//!   starts at `since` for a margin. Outside the range the fill's data agrees with
//!   its position, so the rules above apply unchanged. A partition refused this way is a hole
//!   again, and its reads are relayed for a moment (`ReaderCache::note_raced`).
//! - **Descendant eviction.** All state derived from a partition lives in its `KeyState`
//!   (see `plan`), dimension rows included; evicting removes the `KeyState`, its reader entry
//!   and its dimension-index entries together (`drop_part`, the only place parts are removed).
//! - **Dimension tables** (see `dims`). A dimension delta reaches exactly the filled partitions
//!   covering its join key (the index mirrors the covers of filled partitions) and, while any
//!   partition is pending, to the domain's shared dimension log, which each fill replays after
//!   its position together with its own buffer (the join drops what the fill does not cover). The
//!   position rules above apply to it unchanged. A partition that meets a key it does not
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
//! - **A read of several partitions sees one position.** `publish_held` runs inside
//!   `Shared::publishing` (a count, odd while it runs): a read that saw it odd or changed
//!   looks again, and after a few tries answers `Unsettled` instead of merging entries from
//!   both sides of a step. A fill ahead of the applied position publishes entries marked
//!   `ahead` (remembered in `Domain::ahead`), which a read of several partitions does not
//!   merge either; the first `publish_held` at or past the fill's position republishes them
//!   unmarked. Between two publications every unmarked entry shows the applied position.
//! - **Held batches.** [`Dataflow::apply_held`] routes a batch at once (holes, pending
//!   buffers and the dimension log see it in order, as with `apply`) but only queues its deltas
//!   for a filled partition (`Domain::unprocessed`); the partition's operators run once for all
//!   of its held batches, concatenated in batch order, when it is *flushed*: at
//!   `publish_held`, and before anything reads or changes its state (borrowing reads lender and
//!   borrower at the applied position). That is the same state as batch after batch: every
//!   operator is exact for a multi-change batch (a batch is a multiset of weighted rows; joins
//!   take `ΔL ⋈ R_old` then `L_new ⋈ ΔR`; aggregates and top-k compare before and after the
//!   whole batch); only two choices may differ, both within what the server may answer: the
//!   spelling a case-insensitive group shows, and a top-k prefix that a deletion would have
//!   left short in between is not refilled if later rows fill it again. A partition that needs
//!   a refill after its flush is dropped then; dropped earlier (after the batch that caused
//!   it), it would have dropped the later batches' deltas as a hole, and be a hole now all the
//!   same. Readers see none of it before `publish_held`, so nothing else is observable.
//! - **Reuse.** Views whose trees share a stateful subtree form a *domain*: one graph in
//!   which identical subtrees are stored once (their operators and state are shared), and one
//!   set of partitions. A partition is filled, evicted and budgeted for the whole domain, so
//!   shared state is never evicted under one view while another still reads from it
//!   (descendant eviction across views). Joining a domain empties its partitions, which then
//!   refill on demand: states built before the new operators existed do not cover them.
//! - **Budget.** One reader cache holds every view's entries, weighted by the partition's
//!   total bytes (operator state + reader rows), with CLOCK eviction at the global byte
//!   budget (`cache` says which entries go first and which are spared). The cache notes what it
//!   evicted; the writer sweeps and drains those notices after every operation that
//!   publishes, and drops the matching `KeyState` (matched by generation, so a notice about an
//!   old incarnation never evicts a newer fill). Until drained, a `KeyState` may outlive its
//!   reader entry by one operation; it can never serve a stale read, because reads go only to
//!   the cache. The budget can be exceeded by one operation's inserts until that sweep. A
//!   view's bytes are its entries' weights as the cache holds them: counted in when an entry
//!   is put, out when it is replaced or removed, or, for an entry the budget evicted, when the
//!   writer drains its notice (the weight travels with it), so each weight leaves once.

mod cache;
mod dims;
mod explain;
mod publish;
mod reader;
mod renumber;
mod seeding;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering as AtOrd;

use cache::{Evicted, ReaderCache};
use dims::{Dim, DimIndex, DimLog, borrow_covers, find_dims};
pub use explain::{Explanation, explain_sql};
use publish::{drop_part, publish};
pub use reader::{ByteSize, Entry, Lookup, LookupError, Reader, ViewStats};
use reader::{Counters, EntryKey, Shared, stats_of};
use renumber::renumber;
use seeding::{build_request, build_state};

use crate::compile::{Catalog, CompiledQuery, Refusal, compile};
use crate::cost::{CostBounds, cost_bounds};
use crate::delta::{Batch, Position};
use crate::fill::{FillError, FillRequest, FillResponse, FillSource, FillTicket, ViewId};
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

/// Most batches buffered for one partition while its fill is in flight.
const MAX_BUFFERED: usize = 100_000;

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
    /// operators once for all of them (`flush`). See "Held batches" in the module header.
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
    /// Partitions rejected because a commit to them ended where the fill's data may disagree
    /// with its position ([`FillResponse::unsure`]); they are holes again.
    pub unsure: usize,
    /// Partitions whose fill waits for the stream to pass its unsure range
    /// ([`Dataflow::settle_fills`] installs it).
    pub waiting: usize,
}

impl FillOutcome {
    fn add(&mut self, o: FillOutcome) {
        self.filled += o.filled;
        self.ignored += o.ignored;
        self.stale += o.stale;
        self.unsure += o.unsure;
        self.waiting += o.waiting;
    }
}

/// Most fills held for the stream to pass their unsure range; the oldest gives way (its
/// partitions become holes). They are as many as the fills in flight unless a gap or
/// evictions ask again for partitions whose fills still wait.
const MAX_WAITING: usize = 1024;

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

    /// Splits a batch into base deltas per partition (by occurrence), for the filled and
    /// pending partitions it concerns. Rows of partition-keyed tables go to their partition;
    /// dimension rows go to the filled partitions covering their key (the index), and, when
    /// some partition is pending (its cover is not known until its fill arrives), to the
    /// second result, for the shared log.
    fn route(&self, batch: &Batch) -> (Map<Key, OccDeltas>, Option<OccDeltas>) {
        let domain = self;
        let mut per_key: Map<Key, OccDeltas> = Map::default();
        let mut for_pending: Option<OccDeltas> = None;
        for c in &batch.changes {
            let is = |t: &str| domain.is_table(t, &c.table);
            for (occ, table, key) in &domain.occs {
                if !is(table) {
                    continue;
                }
                let k: Key = key.iter().map(|&i| c.row.get(i).cloned().unwrap_or(Value::Null)).collect();
                if !domain.parts.contains_key(&*k) && !domain.pending.contains_key(&k) {
                    continue;
                }
                let slot = per_key.entry(k).or_insert_with(|| vec![Vec::new(); domain.n_occ]);
                slot[*occ].push((c.row.clone(), if c.insert { 1 } else { -1 }));
            }
            for (d, dim) in domain.dims.iter().enumerate() {
                if !is(&dim.table) {
                    continue;
                }
                let w = if c.insert { 1 } else { -1 };
                for k in domain.dim_index.route(&domain.dims, d, &c.row) {
                    let slot = per_key.entry(k.clone()).or_insert_with(|| vec![Vec::new(); domain.n_occ]);
                    slot[dim.occ].push((c.row.clone(), w));
                }
                if !domain.pending.is_empty() {
                    let log = for_pending.get_or_insert_with(|| vec![Vec::new(); domain.n_occ]);
                    log[dim.occ].push((c.row.clone(), w));
                }
            }
        }
        (per_key, for_pending)
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

    /// Evicts every partition of every view that reads `table` (its rows changed in ways no
    /// batch carried: a foreign key's action). Views and their schema stay; partitions refill
    /// on demand at or after the applied position.
    pub fn evict_reading(&mut self, table: &str) {
        self.publish_held();
        let lower = self.catalog.key(table);
        let domains: Vec<usize> = self.views.iter().flatten().filter(|v| v.q.tables.contains(&lower)).map(|v| v.domain).collect();
        for di in domains {
            self.evict_domain(di);
        }
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

    /// Applies one upstream transaction. Deltas to holes are dropped, to pending partitions
    /// buffered, to filled partitions applied; each touched partition is republished once.
    pub fn apply(&mut self, batch: &Batch) -> Result<(), ApplyError> {
        let applied = self.apply_held(batch);
        self.publish_held();
        applied
    }

    /// Applies one upstream transaction like [`Dataflow::apply`] but holds back the
    /// republication of the partitions it changed until [`Dataflow::publish_held`], so that a
    /// partition touched by many transactions in a row (a global top-k, a popular story) is
    /// rebuilt and swapped once for all of them; its operators too run once for all of them,
    /// when it is flushed (see "Held batches" in the module header). A reader sees a held partition as it was before
    /// the held batches or, if applying one evicted it (a budget eviction, a refill that a
    /// bounded state needs), as a miss; never part of a batch: a partition's entry is only
    /// ever rebuilt from its state between whole batches. Every other operation that changes
    /// what readers see (fills, evictions, installs, drops, DDL that drops a view) publishes
    /// what is held first, so the order of operations readers observe is unchanged. [`Dataflow::applied`] counts held batches; a caller that
    /// announces a position as visible publishes first.
    pub fn apply_held(&mut self, batch: &Batch) -> Result<(), ApplyError> {
        if batch.position <= self.applied {
            return Err(ApplyError::OutOfOrder { got: batch.position, applied: self.applied });
        }
        self.drain_evictions();
        let pos = batch.position;
        for di in 0..self.domains.len() {
            let Some(domain) = self.domains[di].as_mut() else { continue };
            // Log entries at or before the oldest pending `since` can never be replayed.
            domain.dim_log.trim(domain.pending.values().map(|p| p.since).min());
            borrow_covers(&self.shared, &self.views, domain, batch, pos);
            let (per_key, for_pending) = domain.route(batch);
            if let Some(d) = for_pending {
                if domain.dim_log.len() >= MAX_BUFFERED {
                    // As for one partition's buffer below: these fills are as good as lost.
                    domain.pending.clear();
                    domain.dim_log.trim(None);
                } else {
                    domain.dim_log.push(pos, d);
                }
            }
            for (k, deltas) in per_key {
                if let Some(p) = domain.parts.get(&*k) {
                    if pos > p.ks.filled_at {
                        hold(&mut domain.unprocessed, k, deltas);
                    }
                } else if let Some(p) = domain.pending.get_mut(&k) {
                    if p.buffer.len() >= MAX_BUFFERED {
                        // A fill this late is as good as lost: make the partition a hole again
                        // (its fill will be ignored) rather than buffer without bound.
                        domain.pending.remove(&k);
                    } else {
                        p.buffer.push((pos, deltas));
                    }
                }
            }
        }
        self.applied = pos;
        Ok(())
    }

    /// Republishes every partition changed by batches applied with
    /// [`Dataflow::apply_held`]: from here on readers see all of them.
    /// Reads of several partitions see all of it or none ([`Shared::publishing`]): never some
    /// partitions before a transaction and others after it.
    pub fn publish_held(&mut self) {
        let applied = self.applied;
        // Nothing to publish (most callers ask in passing): no count that reads would retry on.
        let idle = |d: &Domain| d.held.is_empty() && d.unprocessed.is_empty() && d.ahead.iter().all(|(p, _)| *p > applied);
        if self.domains.iter().flatten().all(idle) {
            self.drain_evictions();
            return;
        }
        let (shared, views) = (&self.shared, &self.views);
        shared.publishing(|| {
            for domain in self.domains.iter_mut().flatten() {
                flush_all(shared, views, domain);
                // Fills ahead of the stream that it has now reached: their rows are the
                // applied state's too, which their republication says.
                if !domain.ahead.is_empty() {
                    let (passed, still): (Vec<_>, Vec<_>) = std::mem::take(&mut domain.ahead).into_iter().partition(|(p, _)| *p <= applied);
                    domain.ahead = still;
                    domain.held.extend(passed.into_iter().map(|(_, k)| k).filter(|k| domain.parts.contains_key(&**k)));
                }
                if domain.held.is_empty() {
                    continue;
                }
                for k in std::mem::take(&mut domain.held) {
                    publish(shared, views, domain, &k, applied);
                }
            }
        });
        self.drain_evictions();
    }

    /// Turns the misses readers recorded into fill requests: partitions already filled are
    /// republished, partitions already pending are skipped (deduplication), the rest become
    /// pending and are batched, at most `max_fill_keys` per request.
    pub fn fill_requests(&mut self) -> Vec<FillRequest> {
        self.publish_held();
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

    /// Requests a fill of `keys` of view `v` (and of the views sharing its domain) directly,
    /// e.g. to warm a view.
    pub fn request_fill(&mut self, v: ViewId, keys: Vec<Key>) -> Vec<FillRequest> {
        self.publish_held();
        let applied = self.applied;
        let max = self.max_fill_keys;
        let Some(di) = self.view(v).map(|x| x.domain) else { return vec![] };
        let Some(domain) = self.domains.get_mut(di).and_then(Option::as_mut) else { return vec![] };
        let mut fresh = Vec::new();
        let mut deferred = Vec::new();
        for k in keys {
            if domain.parts.contains_key(&*k) {
                publish(&self.shared, &self.views, domain, &k, applied);
            } else if domain.pending.contains_key(&k) {
                continue;
            } else if domain.pending.len() >= self.max_pending {
                deferred.push(k);
            } else {
                domain.pending.insert(k.clone(), Pending { since: applied, buffer: Vec::new() });
                fresh.push(k);
            }
        }
        if !deferred.is_empty()
            && let Ok(mut m) = self.shared.misses.lock()
        {
            m.entry(v.0).or_default().extend(deferred);
        }
        let ticket = FillTicket { domain: di as u32, epoch: domain.epoch };
        fresh.chunks(max).map(|chunk| build_request(domain, v, ticket, chunk.to_vec(), applied)).collect()
    }

    /// The domain a ticket names, if it still has the ticket's layout.
    fn domain_for(&mut self, t: FillTicket) -> Option<&mut Domain> {
        self.domains.get_mut(t.domain as usize).and_then(Option::as_mut).filter(|d| d.epoch == t.epoch)
    }

    /// Gives up on a fill (the source failed or timed out): its partitions become holes
    /// again, and the next read asks anew. Callers must do this for every request they will
    /// not answer, or its partitions stay pending.
    pub fn abandon_fill(&mut self, req: &FillRequest) {
        if let Some(domain) = self.domain_for(req.ticket) {
            for k in &req.keys {
                domain.pending.remove(k);
            }
        }
    }

    /// Installs a fill's answer (see the module header for the position rules). An answer
    /// whose data may disagree with its position ([`FillResponse::unsure`]) waits, its
    /// partitions pending, until the applied position has passed the unsure range
    /// ([`Dataflow::settle_fills`]).
    pub fn complete_fill(&mut self, resp: FillResponse) -> FillOutcome {
        self.publish_held();
        if resp.unsure.is_some_and(|u| u.to > self.applied) {
            if self.waiting.len() >= MAX_WAITING {
                let oldest = self.waiting.remove(0);
                if let Some(domain) = self.domain_for(oldest.ticket) {
                    for k in &oldest.keys {
                        domain.pending.remove(k);
                    }
                }
            }
            let waiting = resp.keys.len();
            self.waiting.push(resp);
            return FillOutcome { waiting, ..FillOutcome::default() };
        }
        let mut outcome = FillOutcome::default();
        let ticket = resp.ticket;
        let Some(domain) = self.domains.get_mut(ticket.domain as usize).and_then(Option::as_mut).filter(|d| d.epoch == ticket.epoch) else {
            outcome.ignored = resp.keys.len();
            return outcome;
        };
        let p = resp.position;
        for k in &resp.keys {
            let Some(pending) = domain.pending.get(k) else {
                outcome.ignored += 1;
                continue;
            };
            // Commits before `since` reached the hole and were dropped: a fill must reflect
            // them, and its unsure range must not reach back to them (nothing was kept to
            // tell whether they touched the partition).
            if p < pending.since || resp.unsure.is_some_and(|u| u.from < pending.since) {
                domain.pending.remove(k);
                outcome.stale += 1;
                continue;
            }
            let Some(pending) = domain.pending.remove(k) else { continue };
            // The partition's own commits in the unsure range are in its buffer: the fill may
            // show any of them or not, so it cannot be told which to apply. The range checked
            // starts at `since`, not at the later `from`: every commit since the request, for
            // a margin (once, under load, a snapshot lacked a commit logged before `from`).
            if let Some(u) = resp.unsure
                && pending.buffer.iter().any(|(q, _)| *q <= u.to)
            {
                raced(&self.shared, domain, k);
                outcome.unsure += 1;
                continue;
            }
            let Some(mut ks) = build_state(domain, k, &resp) else {
                outcome.stale += 1;
                continue;
            };
            // So are the dimension rows it joins with (the keys its filled state covers).
            if let Some(u) = resp.unsure
                && domain.dim_log.touches(&domain.dims, &ks, pending.since, u.to)
            {
                raced(&self.shared, domain, k);
                outcome.unsure += 1;
                continue;
            }
            for (_, mut deltas) in domain.dim_log.merged_after(p, pending.buffer) {
                ks.process(&domain.graph, k, &mut deltas);
            }
            if ks.needs_refill {
                // Buffered deletions emptied a top-k prefix: ask again later.
                outcome.stale += 1;
                continue;
            }
            ks.filled_at = p;
            domain.dim_index.add(&domain.dims, k, &ks);
            let generation = self.next_generation;
            self.next_generation += 1;
            domain.parts.insert(PartKey::from(&**k), Part { ks, generation });
            for v in domain.views.iter().flatten() {
                if let Some(view) = self.views.get(v.0 as usize).and_then(Option::as_ref) {
                    view.counters.keys.fetch_add(1, AtOrd::Relaxed);
                    view.counters.fills.fetch_add(1, AtOrd::Relaxed);
                }
            }
            publish(&self.shared, &self.views, domain, k, self.applied);
            outcome.filled += 1;
        }
        self.drain_evictions();
        outcome
    }

    /// Installs the fills that waited for the stream to pass their unsure range and it has
    /// (see [`Dataflow::complete_fill`]). The caller runs it after applying batches.
    pub fn settle_fills(&mut self) -> FillOutcome {
        let applied = self.applied;
        let passed = |r: &FillResponse| r.unsure.is_none_or(|u| u.to <= applied);
        let mut outcome = FillOutcome::default();
        if !self.waiting.iter().any(passed) {
            return outcome;
        }
        let (ready, still): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting).into_iter().partition(passed);
        self.waiting = still;
        for resp in ready {
            outcome.add(self.complete_fill(resp));
        }
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

    /// Evicts one partition (and everything derived from it, in every view of the domain).
    /// Returns true if it was filled or pending.
    pub fn evict(&mut self, v: ViewId, key: &Key) -> bool {
        self.publish_held();
        let Some(di) = self.view(v).map(|x| x.domain) else { return false };
        let Some(domain) = self.domains.get_mut(di).and_then(Option::as_mut) else { return false };
        let was_pending = domain.pending.remove(key).is_some();
        let was_filled = drop_part(&self.shared, &self.views, domain, key);
        was_pending || was_filled
    }

    fn evict_domain(&mut self, di: usize) {
        let Some(domain) = self.domains.get_mut(di).and_then(Option::as_mut) else { return };
        domain.pending.clear();
        domain.ahead.clear();
        let keys: Vec<Key> = domain.parts.keys().map(|k| Key::from(&**k)).collect();
        for k in keys {
            drop_part(&self.shared, &self.views, domain, &k);
        }
    }

    /// Evicts every partition of every view (e.g. when the replication stream cannot be
    /// trusted): always correct, since partitions refill on demand.
    pub fn evict_all(&mut self) {
        self.publish_held();
        self.waiting.clear();
        for di in 0..self.domains.len() {
            self.evict_domain(di);
        }
    }

    /// Filled partitions of view `v` (for tests and admin statements).
    pub fn filled_keys(&self, v: ViewId) -> Vec<Key> {
        self.view(v)
            .and_then(|x| self.domains.get(x.domain)?.as_ref())
            .map(|d| d.parts.keys().map(|k| Key::from(&**k)).collect())
            .unwrap_or_default()
    }

    fn drain_evictions(&mut self) {
        let fresh_from = std::mem::replace(&mut self.swept_at, self.next_generation);
        for Evicted { key: ek, generation, weight } in self.shared.cache.evict_to_budget(fresh_from) {
            let Some(view) = self.views.get(ek.view() as usize).and_then(Option::as_ref) else { continue };
            view.counters.bytes.fetch_sub(u64::from(weight), AtOrd::Relaxed);
            let Some(domain) = self.domains.get_mut(view.domain).and_then(Option::as_mut) else { continue };
            let key = ek.into_key();
            if domain.parts.get(&*key).is_some_and(|p| p.generation == generation) {
                drop_part(&self.shared, &self.views, domain, &key);
            }
        }
    }
}

/// Reads of `k` in each of the domain's views are relayed for a moment: commits to it raced
/// its fill (`ReaderCache::note_raced`).
fn raced(shared: &Shared, domain: &Domain, k: &Key) {
    for v in domain.views.iter().flatten() {
        shared.cache.note_raced(EntryKey::new(v.0, k.clone()));
    }
}

/// Adds one held batch's deltas for a filled partition to those not yet processed.
fn hold(unprocessed: &mut Map<Key, OccDeltas>, k: Key, deltas: OccDeltas) {
    match unprocessed.get_mut(&k) {
        Some(earlier) => {
            for (e, d) in earlier.iter_mut().zip(deltas) {
                e.extend(d);
            }
        }
        None => {
            unprocessed.insert(k, deltas);
        }
    }
}

/// Pushes the held deltas of partition `k` through its operators (all of its held batches in
/// one pass, in batch order), then marks it for republication, or drops it if a bounded state
/// or a dimension join now needs a refill (as if it had been dropped after the batch that
/// caused it: see "Held batches" in the module header). Call before reading or changing the
/// partition's state in any other way.
fn flush(shared: &Shared, views: &[Option<View>], domain: &mut Domain, k: &Key) {
    let Some(mut deltas) = domain.unprocessed.remove(k) else { return };
    let Some(p) = domain.parts.get_mut(&**k) else { return };
    p.ks.process(&domain.graph, k, &mut deltas);
    if p.ks.needs_refill {
        drop_part(shared, views, domain, k);
    } else {
        domain.held.insert(k.clone());
    }
}

/// [`flush`] for every partition with held deltas.
fn flush_all(shared: &Shared, views: &[Option<View>], domain: &mut Domain) {
    let keys: Vec<Key> = domain.unprocessed.keys().cloned().collect();
    for k in keys {
        flush(shared, views, domain, &k);
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
