//! Incremental operators over one partition: the state each operator keeps and how a set of
//! base-row deltas flows through the tree to become reader deltas.
//!
//! Owns: [`Graph`] (the operator trees of one or more views flattened in post-order, identical
//! subtrees stored once, one root per reader), [`KeyState`] (all operator state and the reader
//! rows of one partition), delta propagation, seeding states from fill data, and byte
//! accounting of states. Does not own: which partitions exist, holes, positions or
//! eviction (view), nor evaluating from scratch (eval). Each stateful operator's state and
//! step live beside it: `join` (buckets), `agg` (groups and accumulators, DISTINCT), `topk`
//! (the bounded sorted prefix); this module holds the partition and the propagation.
//!
//! Invariants:
//! - A [`KeyState`] is self-contained: processing a delta for partition `k` reads and writes
//!   only `k`'s state. Dropping a `KeyState` therefore evicts every entry derived from it.
//! - Deltas are multisets `(row, weight)`; applying `+w` then `-w` restores the state exactly,
//!   including `bytes`, which is maintained on every insertion and removal (never recomputed).
//! - Joins apply `ΔL ⋈ R_old` then `L_new ⋈ ΔR`, which is exact even when both inputs change in
//!   one batch (self-joins). Left joins emit and retract the NULL-extended row when a left row's
//!   match count moves between zero and non-zero.
//! - Indexing: `held.states` has one entry per stateful graph node (join, aggregate, DISTINCT,
//!   top-k; found by node index) and `readers` one per root, both sized from the graph the
//!   `KeyState` was created for (a graph never changes under existing `KeyState`s: the view
//!   layer empties a domain before adding to its graph); a node's `inputs` precede it, so
//!   `outs[j]` exists when node `i > j` reads it.
//! - MIN/MAX keep the multiset of argument values, so deleting the current extreme yields the
//!   next one without a refill. Top-k keeps a bounded prefix (`offset + limit + slack` rows) of
//!   its input in sort order: deletions pull held rows into the window, and when a prefix that
//!   is known to be incomplete runs shorter than the window, [`KeyState::needs_refill`] is set
//!   and the view evicts the partition rather than show a short window.
//! - **Dimension joins** ([`Node::is_dimension_join`]): the partition holds, in the join's
//!   right state, the dimension rows for exactly the join keys it *covers* (`cover`, set by the
//!   fill before any delta is processed; grown between batches only together with the key's
//!   rows, see the view's borrowing; never by a delta). A right delta whose key is not
//!   covered is ignored (the view may route dimension deltas liberally, e.g. to every pending
//!   partition). A left delta whose (non-NULL) key is not covered cannot be joined exactly (the
//!   dimension rows are not held): it sets [`KeyState::needs_refill`] and the view evicts the
//!   partition, which refills on demand. A covered key is charged in `bytes` for its copy here
//!   and for the view's dimension index entry that mirrors it.

use std::collections::HashMap;

mod agg;
mod join;
mod topk;

use agg::{Acc, Group, group_output};
use join::{Bucket, bucket_count, concat, join_key, nulls, side_add};
use topk::{TopState, window};
pub use topk::{sort_rows, sort_shared_rows};

use crate::delta::Position;
use crate::expr::is_true;
use crate::hash::Set;
use crate::mem::{heap_block, table_bytes};
use crate::plan::{AggSpec, JoinKind, Node};
use crate::small::{OneOrMany, Small};
use crate::value::{ExactRow, Row, SharedRow, Value, row_bytes, row_heap};

/// A weighted row change.
pub type Delta = (Row, i64);

/// A partition key: the parameter values, in key-column order.
pub type Key = Box<[Value]>;

/// Per-entry overhead charged for the slots and bookkeeping of the states' maps whose tables
/// are not counted by capacity (join buckets' rows, top-k's B-tree, groups' accumulators), so
/// that many tiny entries are not counted as free.
const SLOT: usize = 32;

/// Default rows a top-k state keeps beyond its window.
pub const DEFAULT_TOPK_SLACK: usize = 16;

/// One operator in the flattened tree.
#[derive(Debug)]
pub struct GNode {
    /// The subtree rooted here (for rendering seeds and from-scratch evaluation).
    pub tree: Node,
    /// Indexes of this node's inputs in [`Graph::nodes`].
    pub inputs: Vec<usize>,
}

/// Operator trees of one or more views, flattened in post-order (every node after its
/// inputs), with identical subtrees stored once: exact-subtree reuse. Each root feeds one
/// reader.
#[derive(Debug, Default)]
pub struct Graph {
    pub nodes: Vec<GNode>,
    /// Reader roots, by reader index.
    pub roots: Vec<usize>,
    /// Columns each reader keeps of its root's rows, by reader index (see
    /// [`Graph::keep_columns`]).
    keep: Vec<usize>,
    /// Rows a top-k state keeps beyond `offset + limit`, so that a few deletions do not force
    /// a refill.
    pub topk_slack: usize,
    /// Per node: true for a dimension join (see [`Node::is_dimension_join`]).
    pub dim: Vec<bool>,
    /// Per node: how many times its output is read (input edges of later nodes, and reader
    /// roots), so that `process` moves an output to its last reader instead of copying it.
    uses: Vec<u32>,
    index: HashMap<Node, usize>,
}

impl Graph {
    /// Flattens a single tree.
    pub fn new(root: &Node) -> Graph {
        let mut g = Graph { topk_slack: DEFAULT_TOPK_SLACK, ..Graph::default() };
        g.add_root(root);
        g
    }
    /// An empty graph whose top-k states keep `slack` rows beyond their window.
    pub fn with_topk_slack(slack: usize) -> Graph {
        Graph { topk_slack: slack, ..Graph::default() }
    }
    /// Adds a tree, reusing every node already present; returns the new reader's index.
    pub fn add_root(&mut self, root: &Node) -> usize {
        let r = self.add(root);
        self.uses[r] += 1;
        self.roots.push(r);
        self.keep.push(usize::MAX);
        self.roots.len() - 1
    }
    /// Makes reader `reader` keep only the first `width` columns of its root's rows: the
    /// columns it publishes, when no hidden column is needed to order them (the partition
    /// key, appended at the end of a root's output and constant within a partition, is the
    /// usual hidden column). Its rows are then the very rows its entries publish, shared, not a
    /// wider copy of them. Rows that differ only past `width` become one row counted twice,
    /// which expands to the same published rows.
    pub fn keep_columns(&mut self, reader: usize, width: usize) {
        if let Some(k) = self.keep.get_mut(reader) {
            *k = width;
        }
    }
    fn add(&mut self, n: &Node) -> usize {
        if let Some(&i) = self.index.get(n) {
            return i;
        }
        let inputs: Vec<usize> = n.inputs().into_iter().map(|i| self.add(i)).collect();
        for &i in &inputs {
            self.uses[i] += 1;
        }
        self.uses.push(0);
        self.dim.push(n.is_dimension_join());
        self.nodes.push(GNode { tree: n.clone(), inputs });
        self.index.insert(n.clone(), self.nodes.len() - 1);
        self.nodes.len() - 1
    }
    /// Index of the node equal to `n`, if present.
    pub fn find(&self, n: &Node) -> Option<usize> {
        self.index.get(n).copied()
    }
    /// Index of reader 0's root (single-view graphs).
    pub fn root(&self) -> usize {
        self.roots.first().copied().unwrap_or(0)
    }
}

/// Per-operator state of one partition.
#[derive(Debug)]
enum NodeState {
    Join([Small<Key, Bucket>; 2]),
    Agg(Small<Key, Group>),
    Distinct(Small<Row, Group>),
    TopK(TopState),
}

/// The states of a partition's stateful nodes, by node index: filters, projections, unions
/// and base tables keep nothing per partition, so they take no room (a point read has no
/// stateful node at all). There are a few per graph, found by a short scan.
#[derive(Debug)]
struct States(Box<[(usize, NodeState)]>);

impl States {
    fn get(&self, node: usize) -> Option<&NodeState> {
        self.0.iter().find(|(n, _)| *n == node).map(|(_, s)| s)
    }
    fn get_mut(&mut self, node: usize) -> Option<&mut NodeState> {
        self.0.iter_mut().find(|(n, _)| *n == node).map(|(_, s)| s)
    }
}

/// Per dimension join node, the join keys whose dimension rows a partition holds (boxed: only
/// partitions of views with a dimension join have any).
type Covered = Small<usize, Set<Key>>;

/// What a partition holds for its stateful nodes and dimension joins, in a block of its own: a
/// point read's partition has neither, and the partition's slot in its domain's map, which
/// every partition pays at the map's load, is two words narrower without them (docs/decisions.md,
/// "memory per cached row").
#[derive(Debug)]
struct Held {
    states: States,
    cover: Option<Box<Covered>>,
}

/// One reader's rows in a partition: exact rows with their counts. A single row, what a point
/// read's partition holds, is held inline (a vector of one is a 32-byte block of its own,
/// docs/decisions.md "memory per cached row"); none, or more, in a [`Small`].
#[derive(Debug)]
enum ReaderRows {
    One(ExactRow<SharedRow>, i64),
    Many(Small<ExactRow<SharedRow>, i64>),
}

impl Default for ReaderRows {
    fn default() -> ReaderRows {
        ReaderRows::Many(Small::default())
    }
}

/// What adding a weight did to a reader's rows.
enum Counted {
    /// The row was not there and is now.
    Added,
    /// The row's count went to zero: it is gone.
    Removed,
    /// Its count changed (or a zero weight changed nothing).
    Moved,
}

impl ReaderRows {
    /// Adds `w` to `row`'s count; also says whether the count is now below zero (more of the
    /// row retracted than was ever there).
    fn add(&mut self, row: ExactRow<SharedRow>, w: i64) -> (Counted, bool) {
        if w == 0 {
            return (Counted::Moved, false);
        }
        let below = |c: i64| c < 0;
        let (rows, counted, now) = match std::mem::take(self) {
            ReaderRows::One(one, c) if one == row => match c + w {
                0 => (ReaderRows::default(), Counted::Removed, 0),
                c => (ReaderRows::One(one, c), Counted::Moved, c),
            },
            ReaderRows::One(one, c) => {
                let mut many = Small::default();
                many.insert(one, c);
                many.insert(row, w);
                (ReaderRows::Many(many), Counted::Added, w)
            }
            ReaderRows::Many(many) if many.is_empty() => (ReaderRows::One(row, w), Counted::Added, w),
            ReaderRows::Many(mut many) => match many.get_mut(&row) {
                Some(c) => {
                    *c += w;
                    let now = *c;
                    if now != 0 {
                        (ReaderRows::Many(many), Counted::Moved, now)
                    } else {
                        many.remove(&row);
                        (ReaderRows::of(many), Counted::Removed, 0)
                    }
                }
                None => {
                    many.insert(row, w);
                    (ReaderRows::Many(many), Counted::Added, w)
                }
            },
        };
        *self = rows;
        (counted, below(now))
    }

    /// `row`'s count (0 if it is not there).
    fn count(&self, row: &ExactRow<SharedRow>) -> i64 {
        match self {
            ReaderRows::One(one, c) if one == row => *c,
            ReaderRows::One(..) => 0,
            ReaderRows::Many(many) => many.get(row).copied().unwrap_or(0),
        }
    }

    /// `many`, its one row held inline if it is down to one.
    fn of(many: Small<ExactRow<SharedRow>, i64>) -> ReaderRows {
        match many.iter().next() {
            Some((row, &c)) if many.len() == 1 => ReaderRows::One(ExactRow(row.0.clone()), c),
            _ => ReaderRows::Many(many),
        }
    }

    /// Distinct rows.
    fn len(&self) -> usize {
        match self {
            ReaderRows::One(..) => 1,
            ReaderRows::Many(many) => many.len(),
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&ExactRow<SharedRow>, i64)> {
        let (one, many) = match self {
            ReaderRows::One(row, c) => (Some((row, *c)), None),
            ReaderRows::Many(many) => (None, Some(many.iter().map(|(row, c)| (row, *c)))),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    /// The block of the map's storage, if it has one (not what its rows point to).
    fn heap_bytes(&self) -> usize {
        match self {
            ReaderRows::One(..) => 0,
            ReaderRows::Many(many) => many.heap_bytes(),
        }
    }
}

/// The state of stateful node `node` in a partition's `held` (a function of the field, so that
/// the partition's other fields can change while it is borrowed).
fn node_state(held: &mut Option<Box<Held>>, node: usize) -> Option<&mut NodeState> {
    held.as_mut()?.states.get_mut(node)
}

/// Everything freshet holds for one partition of one view.
#[derive(Debug)]
pub struct KeyState {
    // The partition key is not here: the domain's map of partitions holds it, and the calls
    // that need it (processing, for a global aggregate's group) are given it.
    /// None for a graph without stateful nodes (until a dimension join's cover, which has one).
    held: Option<Box<Held>>,
    /// Rows of each reader (exact multisets), by reader index.
    /// One map per reader of the domain (nearly always one, held inline).
    readers: OneOrMany<ReaderRows>,
    /// Bytes held by this partition (states + reader), maintained incrementally.
    bytes: isize,
    /// Position the fill reflected: batches at or before it are skipped for this partition.
    pub filled_at: Position,
    /// Set when a bounded state (top-k) lost rows it would need, or a dimension join met a
    /// key it does not cover; the partition must be evicted and refilled.
    pub needs_refill: bool,
}

impl KeyState {
    /// An empty partition state for `key`. With `silent_globals`, global aggregates get their
    /// one (empty) group now without emitting it (the seeding path, where every state is
    /// installed separately); otherwise the group is created, and emitted downstream, by the
    /// first [`KeyState::process`] (the replay path).
    pub fn empty(graph: &Graph, key: &Key, filled_at: Position, silent_globals: bool) -> KeyState {
        let states = graph
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| match &n.tree {
                Node::Join { .. } => Some((i, NodeState::Join([Small::default(), Small::default()]))),
                Node::Aggregate { .. } => Some((i, NodeState::Agg(Small::default()))),
                Node::Distinct { .. } => Some((i, NodeState::Distinct(Small::default()))),
                Node::TopK { .. } => Some((i, NodeState::TopK(TopState { complete: true, ..TopState::default() }))),
                _ => None,
            })
            .collect();
        let states: Box<[_]> = states;
        let held = (!states.is_empty()).then(|| Box::new(Held { states: States(states), cover: None }));
        let readers = OneOrMany::new(graph.roots.len());
        let mut ks = KeyState { held, readers, bytes: 0, filled_at, needs_refill: false };
        if !silent_globals {
            return ks;
        }
        for (i, n) in graph.nodes.iter().enumerate() {
            if let Node::Aggregate { global: true, group, aggs, .. } = &n.tree {
                ks.global_group(i, *group, aggs, key);
            }
        }
        ks
    }

    /// Creates the single group of a global aggregate of partition `key`; returns its output
    /// row.
    fn global_group(&mut self, idx: usize, group: usize, aggs: &[AggSpec], key: &Key) -> Option<Row> {
        let Some(NodeState::Agg(groups)) = node_state(&mut self.held, idx) else { return None };
        if groups.contains_key(key) || key.len() != group {
            return None;
        }
        let g = Group::new(aggs.iter().map(|a| Acc::new(a.kind)).collect());
        let out = group_output(key, &g);
        self.bytes += (row_bytes(key) + SLOT) as isize;
        groups.insert(key.clone(), g);
        Some(out)
    }

    /// Records that this partition holds the dimension rows of join node `node` for `key`
    /// (call before the rows are processed or seeded). NULL keys never match and are ignored.
    pub fn cover(&mut self, node: usize, key: Key) {
        if key.iter().any(Value::is_null) {
            return;
        }
        // The key's blocks in the cover set (whose table `fixed_bytes` counts by capacity), and
        // the view's dimension index entry that mirrors it: a slot in the key's set of
        // partitions (a `Small`, a fuller table than most) and the partition key's clone there,
        // sized like this key, which it is for the usual one-column keys.
        let b = 2 * row_heap(&key) + 2 * std::mem::size_of::<Key>();
        let held = self.held.get_or_insert_with(|| Box::new(Held { states: States(Box::default()), cover: None }));
        if held.cover.get_or_insert_default().or_insert_with(node, Set::default).insert(key) {
            self.bytes += b as isize;
        }
    }

    /// Covers every non-NULL join key of dimension join `node`'s left state (after seeding it,
    /// on the upstream fill path, whose right-side answer holds exactly those keys' rows).
    pub fn cover_left_keys(&mut self, node: usize) {
        let keys: Vec<Key> = match self.state(node) {
            Some(NodeState::Join([ls, _])) => ls.keys().cloned().collect(),
            _ => return,
        };
        for k in keys {
            self.cover(node, k);
        }
    }

    /// True if this partition covers `key` at dimension join `node`.
    pub fn covers(&self, node: usize, key: &Key) -> bool {
        self.cover_sets().and_then(|c| c.get(&node)).is_some_and(|c| c.contains(key))
    }

    /// The dimension rows (right side) this partition holds for `key` at join `node`.
    pub fn dim_rows(&self, node: usize, key: &Key) -> Vec<Delta> {
        match self.state(node) {
            Some(NodeState::Join([_, rs])) => rs.get(key).map(|b| b.iter().map(|(r, c)| (r.0.clone(), *c)).collect()).unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// The covered keys, as (dimension join node, key).
    pub fn covered(&self) -> impl Iterator<Item = (usize, &Key)> {
        self.cover_sets().into_iter().flat_map(|c| c.iter()).flat_map(|(n, ks)| ks.iter().map(move |k| (*n, k)))
    }

    /// The state of stateful node `node`, if it is one.
    fn state(&self, node: usize) -> Option<&NodeState> {
        self.held.as_ref()?.states.get(node)
    }

    fn cover_sets(&self) -> Option<&Covered> {
        self.held.as_ref()?.cover.as_deref()
    }

    /// Bytes this partition holds.
    pub fn bytes(&self) -> usize {
        self.bytes.max(0) as usize
    }

    /// What this partition holds besides the rows and entries [`KeyState::bytes`] counts: its
    /// key, the blocks of its vectors, and the tables of its readers' maps, its maps of groups
    /// and join buckets and its cover sets, from their capacities. O(nodes): the tables inside
    /// join buckets are charged when a bucket is made (`join::bucket_cost`).
    pub fn fixed_bytes(&self) -> usize {
        use std::mem::size_of;
        let states: &[(usize, NodeState)] = self.held.as_ref().map_or(&[], |h| &h.states.0);
        let mut b = self.held.as_ref().map_or(0, |_| heap_block(size_of::<Held>()))
            + heap_block(std::mem::size_of_val(states))
            + self.readers.heap_bytes();
        for r in self.readers.iter() {
            b += r.heap_bytes();
        }
        for (_, s) in states {
            b += match s {
                NodeState::TopK(_) => 0,
                NodeState::Join(sides) => sides.iter().map(Small::heap_bytes).sum(),
                NodeState::Agg(m) => m.heap_bytes(),
                NodeState::Distinct(m) => m.heap_bytes(),
            };
        }
        if let Some(c) = self.cover_sets() {
            b += heap_block(size_of::<Covered>())
                + c.heap_bytes()
                + c.values().map(|s| table_bytes(s.capacity(), size_of::<Key>())).sum::<usize>();
        }
        b
    }

    /// Reader 0's rows, unordered, with multiplicity expanded.
    pub fn reader_rows(&self) -> Vec<Row> {
        self.reader_rows_cut(0, usize::MAX).iter().map(|r| r.to_vec().into()).collect()
    }

    fn apply_reader(&mut self, reader: usize, keep: usize, deltas: Vec<Delta>) {
        let Some(map) = self.readers.get_mut(reader) else { return };
        let mut below_zero = Vec::new();
        for (row, w) in deltas {
            // The map's storage, where the row's pointer is inline, is counted by
            // `fixed_bytes`; the row itself is counted here once, however many published
            // entries share it.
            let key = ExactRow(if row.len() > keep { SharedRow::from(&row[..keep]) } else { SharedRow::from(row) });
            let b = key.0.heap_bytes() as isize;
            // Only a retraction can take a count below zero.
            let retracted = (w < 0).then(|| key.clone());
            let (counted, below) = map.add(key, w);
            match counted {
                Counted::Added => self.bytes += b,
                Counted::Removed => self.bytes -= b,
                Counted::Moved => {}
            }
            if below && let Some(row) = retracted {
                below_zero.push(row);
            }
        }
        // More of a row retracted than was ever there, once the whole batch is in (its own
        // order may retract before it inserts): the partition missed or doubled a change (a
        // fill whose position was not exactly its rows'), and is dropped to refill rather
        // than served.
        if below_zero.iter().any(|row| map.count(row) < 0) {
            self.needs_refill = true;
        }
    }

    /// The width of reader `reader`'s rows (every row of a reader has its root's width), 0 while
    /// it holds none.
    pub fn reader_width(&self, reader: usize) -> usize {
        self.readers.get(reader).and_then(|m| m.iter().next()).map_or(0, |(r, _)| r.0.len())
    }

    /// Rows of reader `reader` cut to their first `width` columns, with multiplicity
    /// expanded: what a reader entry publishes. A row no wider than `width` is the state's own
    /// row, shared; a wider one is copied, cut.
    pub fn reader_rows_cut(&self, reader: usize, width: usize) -> Vec<SharedRow> {
        let Some(map) = self.readers.get(reader) else { return vec![] };
        let mut out = Vec::with_capacity(map.len());
        for (r, c) in map.iter() {
            let cut = r.0.cut(width);
            for _ in 1..c.max(0) {
                out.push(cut.clone());
            }
            if c > 0 {
                out.push(cut);
            }
        }
        out
    }

    /// Pushes base deltas (indexed by base occurrence) of partition `key` through the graph and
    /// applies the result to the reader rows.
    pub fn process(&mut self, graph: &Graph, key: &Key, base: &mut [Vec<Delta>]) {
        let mut outs: Vec<Vec<Delta>> = Vec::with_capacity(graph.nodes.len());
        // Reads left per node output: the last read moves it, earlier ones (a subtree shared
        // by several nodes or readers) copy it.
        let mut left = graph.uses.clone();
        let mut take = |j: usize, outs: &mut Vec<Vec<Delta>>| {
            left[j] = left[j].saturating_sub(1);
            if left[j] == 0 { std::mem::take(&mut outs[j]) } else { outs[j].clone() }
        };
        for (i, n) in graph.nodes.iter().enumerate() {
            let out = match &n.tree {
                Node::Base { occ, .. } => base.get_mut(*occ).map(std::mem::take).unwrap_or_default(),
                Node::Filter { pred, .. } => {
                    let mut d = take(n.inputs[0], &mut outs);
                    d.retain(|(r, _)| is_true(&pred.eval(r)) == Some(true));
                    d
                }
                Node::Project { exprs, .. } => {
                    take(n.inputs[0], &mut outs).into_iter().map(|(r, w)| (exprs.iter().map(|e| e.eval(&r)).collect(), w)).collect()
                }
                Node::Union { .. } => {
                    let mut all = Vec::new();
                    for &j in &n.inputs {
                        all.extend(take(j, &mut outs));
                    }
                    all
                }
                Node::Join { on, kind, right, .. } => {
                    let dl = take(n.inputs[0], &mut outs);
                    let mut dr = take(n.inputs[1], &mut outs);
                    if graph.dim.get(i).copied().unwrap_or(false) {
                        self.check_cover(i, on, &dl, &mut dr);
                    }
                    self.join(i, on, *kind, right.width(), dl, dr)
                }
                Node::Aggregate { group, aggs, global, .. } => {
                    let d = take(n.inputs[0], &mut outs);
                    let mut created = Vec::new();
                    if *global && let Some(row) = self.global_group(i, *group, aggs, key) {
                        created.push((row, 1));
                    }
                    created.extend(self.aggregate(i, *group, aggs, d, key));
                    created
                }
                Node::Distinct { .. } => {
                    let d = take(n.inputs[0], &mut outs);
                    self.distinct(i, d)
                }
                Node::TopK { order, limit, offset, .. } => {
                    let d = take(n.inputs[0], &mut outs);
                    self.topk(i, order, *limit, *offset, graph.topk_slack, d)
                }
            };
            outs.push(out);
        }
        for (i, &root) in graph.roots.iter().enumerate() {
            let d = if root < outs.len() { take(root, &mut outs) } else { Vec::new() };
            self.apply_reader(i, graph.keep[i], d);
        }
    }

    /// Full output of node `idx` for this partition, computed from state. `None` if the node
    /// is not derivable (a base table or a stateless node over one).
    pub fn full_output(&self, graph: &Graph, idx: usize) -> Option<Vec<Delta>> {
        let n = graph.nodes.get(idx)?;
        let input = |j: usize| graph.nodes[n.inputs[j]].tree.clone();
        Some(match (&n.tree, self.state(idx)) {
            (Node::Base { .. }, _) => return None,
            (Node::Filter { pred, .. }, _) => {
                let mut d = self.full_output(graph, n.inputs[0])?;
                d.retain(|(r, _)| is_true(&pred.eval(r)) == Some(true));
                d
            }
            (Node::Project { exprs, .. }, _) => {
                self.full_output(graph, n.inputs[0])?.into_iter().map(|(r, w)| (exprs.iter().map(|e| e.eval(&r)).collect(), w)).collect()
            }
            (Node::Union { .. }, _) => {
                let mut all = Vec::new();
                for &j in &n.inputs {
                    all.extend(self.full_output(graph, j)?);
                }
                all
            }
            (Node::Join { kind, .. }, Some(NodeState::Join([ls, rs]))) => {
                let rw = input(1).width();
                let mut out = Vec::new();
                for (k, lrows) in ls {
                    let matches = if k.iter().any(Value::is_null) { None } else { rs.get(k) };
                    for (l, c) in lrows.iter() {
                        match matches {
                            Some(m) if bucket_count(Some(m)) != 0 => {
                                for (r, c2) in m.iter() {
                                    out.push((concat(&l.0, &r.0), c * c2));
                                }
                            }
                            _ if *kind == JoinKind::Left => out.push((concat(&l.0, &nulls(rw)), *c)),
                            _ => {}
                        }
                    }
                }
                out
            }
            (Node::Aggregate { .. }, Some(NodeState::Agg(groups))) => groups.iter().map(|(k, g)| (group_output(k, g), 1)).collect(),
            (Node::Distinct { .. }, Some(NodeState::Distinct(c))) => {
                c.iter().filter(|(_, g)| g.rows > 0).map(|(k, g)| (g.values(k).into(), 1)).collect()
            }
            (Node::TopK { limit, offset, .. }, Some(NodeState::TopK(st))) => {
                window(&st.rows, *limit, *offset).into_iter().map(|r| (r, 1)).collect()
            }
            _ => return None,
        })
    }

    /// Installs fill data into the state of node `idx` (input `side` for joins; reader `i` when
    /// `idx == graph.nodes.len() + i`) of partition `key` without emitting anything downstream.
    pub fn seed(&mut self, graph: &Graph, key: &Key, idx: usize, side: usize, rows: Vec<Delta>) {
        if idx >= graph.nodes.len() {
            let reader = idx - graph.nodes.len();
            self.apply_reader(reader, graph.keep.get(reader).copied().unwrap_or(usize::MAX), rows);
            return;
        }
        let n = &graph.nodes[idx];
        match &n.tree {
            Node::Join { on, .. } => {
                let cols: Vec<usize> = on.iter().map(|p| if side == 0 { p.0 } else { p.1 }).collect();
                let Some(NodeState::Join(sides)) = node_state(&mut self.held, idx) else { return };
                let Some(st) = sides.get_mut(side) else { return };
                let mut bytes = 0isize;
                for (r, w) in rows {
                    let k = join_key(&r, &cols).unwrap_or_else(|| nulls(cols.len()).into());
                    bytes += side_add(st, &k, &r, w);
                }
                self.bytes += bytes;
            }
            Node::Aggregate { group, aggs, .. } => {
                self.aggregate(idx, *group, aggs, rows, key);
            }
            Node::Distinct { .. } => {
                self.distinct(idx, rows);
            }
            Node::TopK { order, limit, offset, .. } => {
                self.topk(idx, order, *limit, *offset, graph.topk_slack, rows);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
