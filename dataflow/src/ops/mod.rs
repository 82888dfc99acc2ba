//! Incremental operators over one partition: the state each operator keeps and how a set of
//! base-row deltas flows through the tree to become reader deltas.
//!
//! Owns: [`Graph`] (the operator trees of one or more views flattened in post-order, identical
//! subtrees stored once, one root per reader), [`KeyState`] (all operator state and the reader
//! rows of one partition), delta propagation, seeding states from fill data, and byte
//! accounting of states. Does not own: which partitions exist, holes, positions or
//! eviction (view), nor evaluating from scratch (eval).
//!
//! Invariants:
//! - A [`KeyState`] is self-contained: processing a delta for partition `k` reads and writes
//!   only `k`'s state. Dropping a `KeyState` therefore evicts every entry derived from it.
//! - Deltas are multisets `(row, weight)`; applying `+w` then `-w` restores the state exactly,
//!   including `bytes`, which is maintained on every insertion and removal (never recomputed).
//! - Joins apply `ΔL ⋈ R_old` then `L_new ⋈ ΔR`, which is exact even when both inputs change in
//!   one batch (self-joins). Left joins emit and retract the NULL-extended row when a left row's
//!   match count moves between zero and non-zero.
//! - Indexing: `states` has one entry per graph node and `readers` one per root, both sized
//!   from the graph the `KeyState` was created for (a graph never changes under existing
//!   `KeyState`s: the view layer empties a domain before adding to its graph); a node's
//!   `inputs` precede it, so `outs[j]` exists when node `i > j` reads it.
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
//!   partition, which refills on demand. Every covered key is charged twice in `bytes`: once
//!   here and once for the view's dimension index entry that mirrors it.

use std::collections::{BTreeMap, HashMap, HashSet};

mod join;

use join::{bucket_add, bucket_count, concat, join_key, nulls, Bucket};

use crate::delta::Position;
use crate::expr::{div_dec, is_true};
use crate::plan::{AggKind, AggSpec, JoinKind, Node, OrderSpec};
use crate::value::{row_bytes, Decimal, ExactRow, Row, Value};

/// A weighted row change.
pub type Delta = (Row, i64);

/// A partition key: the parameter values, in key-column order.
pub type Key = Box<[Value]>;

/// Per-entry overhead charged for hash-map slots and bookkeeping, so that many tiny entries
/// are not counted as free.
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
    /// Rows a top-k state keeps beyond `offset + limit`, so that a few deletions do not force
    /// a refill.
    pub topk_slack: usize,
    /// Per node: true for a dimension join (see [`Node::is_dimension_join`]).
    pub dim: Vec<bool>,
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
        self.roots.push(r);
        self.roots.len() - 1
    }
    fn add(&mut self, n: &Node) -> usize {
        if let Some(&i) = self.index.get(n) {
            return i;
        }
        let inputs = n.inputs().into_iter().map(|i| self.add(i)).collect();
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

/// Sum/average accumulator: exact part (integers and decimals) and float part kept apart so
/// that deleting values is exact whenever the inputs are exact.
#[derive(Clone, Debug, Default)]
struct SumAcc {
    exact: i128,
    scale: u8,
    float: f64,
    n_float: i64,
    n: i64,
    overflow: bool,
}

impl SumAcc {
    fn add(&mut self, v: &Value, w: i64) {
        let int = match v {
            Value::Null => return,
            Value::Int(i) => Some(*i as i128),
            Value::UInt(u) => Some(*u as i128),
            Value::Year(y) => Some(*y as i128),
            Value::Bit(b) => Some(*b as i128),
            _ => None,
        };
        self.n += w;
        if let Some(i) = int {
            let scaled = 10i128.checked_pow(self.scale as u32).and_then(|p| i.checked_mul(p));
            self.add_exact(scaled, w);
        } else if let Value::Decimal(d) = v {
            if d.scale() > self.scale {
                let up = 10i128.checked_pow((d.scale() - self.scale) as u32);
                match up.and_then(|p| self.exact.checked_mul(p)) {
                    Some(e) => self.exact = e,
                    None => self.overflow = true,
                }
                self.scale = d.scale();
            }
            self.add_exact(d.rescaled(self.scale), w);
        } else {
            self.float += v.to_f64().unwrap_or(0.0) * w as f64;
            self.n_float += w;
            if self.n_float == 0 {
                self.float = 0.0;
            }
        }
    }
    fn add_exact(&mut self, x: Option<i128>, w: i64) {
        match x.and_then(|x| x.checked_mul(w as i128)).and_then(|x| self.exact.checked_add(x)) {
            Some(e) => self.exact = e,
            None => self.overflow = true,
        }
    }
    fn sum(&self) -> Value {
        if self.n == 0 || self.overflow {
            return Value::Null;
        }
        if self.n_float != 0 {
            return Value::Double(self.exact as f64 / 10f64.powi(self.scale as i32) + self.float);
        }
        Decimal::new(self.exact, self.scale).map(Value::Decimal).unwrap_or(Value::Null)
    }
    fn avg(&self) -> Value {
        if self.n == 0 || self.overflow {
            return Value::Null;
        }
        if self.n_float != 0 {
            let total = self.exact as f64 / 10f64.powi(self.scale as i32) + self.float;
            return Value::Double(total / self.n as f64);
        }
        div_dec(self.exact, self.scale, self.n as i128, 0)
    }
}

#[derive(Clone, Debug)]
enum Acc {
    Count(i64),
    Sum(SumAcc),
    Avg(SumAcc),
    Min(BTreeMap<Value, i64>),
    Max(BTreeMap<Value, i64>),
    Distinct(HashMap<Value, i64>),
}

fn add_count<K: Ord + Clone>(m: &mut BTreeMap<K, i64>, k: &K, w: i64) -> isize {
    let c = m.entry(k.clone()).or_insert(0);
    let was = *c;
    *c += w;
    if *c == 0 {
        m.remove(k);
        return -1;
    }
    if was == 0 { 1 } else { 0 }
}

impl Acc {
    fn new(kind: AggKind) -> Acc {
        match kind {
            AggKind::CountStar | AggKind::CountNotNull => Acc::Count(0),
            AggKind::Sum => Acc::Sum(SumAcc::default()),
            AggKind::Avg => Acc::Avg(SumAcc::default()),
            AggKind::Min => Acc::Min(BTreeMap::new()),
            AggKind::Max => Acc::Max(BTreeMap::new()),
            AggKind::CountDistinct => Acc::Distinct(HashMap::new()),
        }
    }
    /// Applies `(row, w)`; returns the change in stored bytes.
    fn apply(&mut self, spec: &AggSpec, row: &[Value], w: i64) -> isize {
        let arg = row.get(spec.arg).unwrap_or(&Value::Null);
        match self {
            Acc::Count(n) => {
                if spec.kind == AggKind::CountStar || is_true(arg) == Some(true) {
                    *n += w;
                }
                0
            }
            Acc::Sum(s) | Acc::Avg(s) => {
                s.add(arg, w);
                0
            }
            Acc::Min(m) | Acc::Max(m) => {
                if arg.is_null() {
                    return 0;
                }
                add_count(m, arg, w) * (arg.bytes() + SLOT) as isize
            }
            Acc::Distinct(m) => {
                if arg.is_null() {
                    return 0;
                }
                let c = m.entry(arg.clone()).or_insert(0);
                let was = *c;
                *c += w;
                if *c == 0 {
                    m.remove(arg);
                    -((arg.bytes() + SLOT) as isize)
                } else if was == 0 {
                    (arg.bytes() + SLOT) as isize
                } else {
                    0
                }
            }
        }
    }
    fn output(&self) -> Value {
        match self {
            Acc::Count(n) => Value::Int(*n),
            Acc::Sum(s) => s.sum(),
            Acc::Avg(s) => s.avg(),
            Acc::Min(m) => m.keys().next().cloned().unwrap_or(Value::Null),
            Acc::Max(m) => m.keys().next_back().cloned().unwrap_or(Value::Null),
            Acc::Distinct(m) => Value::Int(m.len() as i64),
        }
    }
}

/// One group of an aggregate.
///
/// Groups are found by SQL equality, so under a case- or pad-insensitive collation rows
/// spelled differently (`'Story'`, `'STORY'`, `'Story '`) share a group. The group outputs one
/// spelling that its rows still have: `spellings` counts rows per exact spelling of the group
/// columns, and when the output spelling's last row goes (a title changed only in case), the
/// output moves to a remaining one and the change is emitted like any other.
#[derive(Clone, Debug)]
struct Group {
    values: Row,
    spellings: Vec<(Row, i64)>,
    rows: i64,
    accs: Vec<Acc>,
}

fn exact_eq(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.exact_cmp(y) == std::cmp::Ordering::Equal)
}

impl Group {
    /// Counts `w` rows spelled `spelling`; returns the change in bytes held.
    fn count_spelling(&mut self, spelling: &[Value], w: i64) -> isize {
        match self.spellings.iter_mut().find(|(s, _)| exact_eq(s, spelling)) {
            Some((_, n)) => {
                *n += w;
                0
            }
            None => {
                self.spellings.push((spelling.into(), w));
                row_bytes(spelling) as isize
            }
        }
    }

    /// Drops spellings without rows and keeps the output on one that has rows; returns the
    /// change in bytes held.
    fn settle_spellings(&mut self) -> isize {
        let mut bytes = 0isize;
        self.spellings.retain(|(s, n)| {
            if *n <= 0 {
                bytes -= row_bytes(s) as isize;
            }
            *n > 0
        });
        if !self.spellings.iter().any(|(s, _)| exact_eq(s, &self.values))
            && let Some((s, _)) = self.spellings.first()
        {
            self.values = s.clone();
        }
        bytes
    }
}

/// A row with its sort key for top-k: ordered by the ORDER BY columns, then exactly.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SortKey {
    parts: Vec<SortPart>,
    row: ExactRow,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum SortPart {
    Asc(Value),
    Desc(std::cmp::Reverse<Value>),
}

fn sort_key(row: &Row, order: &OrderSpec) -> SortKey {
    let parts = order
        .iter()
        .map(|&(c, desc)| {
            let v = row.get(c).cloned().unwrap_or(Value::Null);
            if desc { SortPart::Desc(std::cmp::Reverse(v)) } else { SortPart::Asc(v) }
        })
        .collect();
    SortKey { parts, row: ExactRow(row.clone()) }
}

/// Sorts rows the way ORDER BY does here (ties broken exactly, deterministically).
pub fn sort_rows(rows: &mut [Row], order: &OrderSpec) {
    rows.sort_by_cached_key(|r| sort_key(r, order));
}

/// Per-operator state of one partition.
#[derive(Debug)]
enum NodeState {
    None,
    Join([HashMap<Key, Bucket>; 2]),
    Agg(HashMap<Key, Group>),
    Distinct(HashMap<Row, Group>),
    TopK(TopState),
}

/// Top-k state: a prefix, in sort order, of the partition's input rows, at most `cap` rows
/// (`offset + limit + slack`). Invariant: every input row not held sorts at or after the last
/// held row; `complete` means nothing is left out. Inserts past the last held row of an
/// incomplete prefix are dropped; deletions that shrink an incomplete prefix below
/// `offset + limit` make the partition need a refill (the rows that would move into the window
/// are not held), which the view turns into an eviction.
#[derive(Debug, Default)]
struct TopState {
    rows: BTreeMap<SortKey, i64>,
    count: i64,
    complete: bool,
}

/// Everything freshet holds for one partition of one view.
#[derive(Debug)]
pub struct KeyState {
    /// The partition key.
    pub key: Key,
    states: Vec<NodeState>,
    /// Rows of each reader (exact multisets), by reader index.
    readers: Vec<HashMap<ExactRow, i64>>,
    /// Bytes held by this partition (states + reader), maintained incrementally.
    bytes: isize,
    /// Position the fill reflected: batches at or before it are skipped for this partition.
    pub filled_at: Position,
    /// Set when a bounded state (top-k) lost rows it would need, or a dimension join met a
    /// key it does not cover; the partition must be evicted and refilled.
    pub needs_refill: bool,
    /// Per dimension join node: the join keys whose dimension rows this partition holds.
    cover: HashMap<usize, HashSet<Key>>,
}

impl KeyState {
    /// An empty partition state for `key`. With `silent_globals`, global aggregates get their
    /// one (empty) group now without emitting it (the seeding path, where every state is
    /// installed separately); otherwise the group is created, and emitted downstream, by the
    /// first [`KeyState::process`] (the replay path).
    pub fn empty(graph: &Graph, key: Key, filled_at: Position, silent_globals: bool) -> KeyState {
        let states = graph
            .nodes
            .iter()
            .map(|n| match &n.tree {
                Node::Join { .. } => NodeState::Join([HashMap::new(), HashMap::new()]),
                Node::Aggregate { .. } => NodeState::Agg(HashMap::new()),
                Node::Distinct { .. } => NodeState::Distinct(HashMap::new()),
                Node::TopK { .. } => NodeState::TopK(TopState { complete: true, ..TopState::default() }),
                _ => NodeState::None,
            })
            .collect();
        let readers = vec![HashMap::new(); graph.roots.len()];
        let mut ks = KeyState { key, states, readers, bytes: 0, filled_at, needs_refill: false, cover: HashMap::new() };
        if !silent_globals {
            return ks;
        }
        for (i, n) in graph.nodes.iter().enumerate() {
            if let Node::Aggregate { global: true, group, aggs, .. } = &n.tree {
                ks.global_group(i, *group, aggs);
            }
        }
        ks
    }

    /// Creates the single group of a global aggregate; returns its output row.
    fn global_group(&mut self, idx: usize, group: usize, aggs: &[AggSpec]) -> Option<Row> {
        let key = self.key.clone();
        let NodeState::Agg(groups) = &mut self.states[idx] else { return None };
        if groups.contains_key(&key) || key.len() != group {
            return None;
        }
        let g = Group { values: key.clone(), spellings: Vec::new(), rows: 0, accs: aggs.iter().map(|a| Acc::new(a.kind)).collect() };
        let out = group_output(&g);
        self.bytes += (row_bytes(&key) * 2 + SLOT) as isize;
        groups.insert(key, g);
        Some(out)
    }

    /// Records that this partition holds the dimension rows of join node `node` for `key`
    /// (call before the rows are processed or seeded). NULL keys never match and are ignored.
    pub fn cover(&mut self, node: usize, key: Key) {
        if key.iter().any(Value::is_null) {
            return;
        }
        let b = 2 * (row_bytes(&key) + SLOT);
        if self.cover.entry(node).or_default().insert(key) {
            self.bytes += b as isize;
        }
    }

    /// Covers every non-NULL join key of dimension join `node`'s left state (after seeding it,
    /// on the upstream fill path, whose right-side answer holds exactly those keys' rows).
    pub fn cover_left_keys(&mut self, node: usize) {
        let keys: Vec<Key> = match self.states.get(node) {
            Some(NodeState::Join([ls, _])) => ls.keys().cloned().collect(),
            _ => return,
        };
        for k in keys {
            self.cover(node, k);
        }
    }

    /// True if this partition covers `key` at dimension join `node`.
    pub fn covers(&self, node: usize, key: &Key) -> bool {
        self.cover.get(&node).is_some_and(|c| c.contains(key))
    }

    /// The dimension rows (right side) this partition holds for `key` at join `node`.
    pub fn dim_rows(&self, node: usize, key: &Key) -> Vec<Delta> {
        match self.states.get(node) {
            Some(NodeState::Join([_, rs])) => {
                rs.get(key).map(|b| b.iter().map(|(r, c)| (r.0.clone(), *c)).collect()).unwrap_or_default()
            }
            _ => Vec::new(),
        }
    }

    /// The covered keys, as (dimension join node, key).
    pub fn covered(&self) -> impl Iterator<Item = (usize, &Key)> {
        self.cover.iter().flat_map(|(n, ks)| ks.iter().map(move |k| (*n, k)))
    }

    /// Bytes this partition holds.
    pub fn bytes(&self) -> usize {
        self.bytes.max(0) as usize
    }

    /// Reader 0's rows, unordered, with multiplicity expanded.
    pub fn reader_rows(&self) -> Vec<Row> {
        self.reader_rows_cut(0, usize::MAX)
    }

    fn apply_reader(&mut self, reader: usize, deltas: Vec<Delta>) {
        let Some(map) = self.readers.get_mut(reader) else { return };
        for (row, w) in deltas {
            let b = (row_bytes(&row) + SLOT) as isize;
            let key = ExactRow(row);
            let e = map.entry(key.clone()).or_insert(0);
            let was = *e;
            *e += w;
            if *e == 0 {
                map.remove(&key);
                self.bytes -= b;
            } else if was == 0 {
                self.bytes += b;
            }
        }
    }

    /// Rows of reader `reader` cut to their first `width` columns, with multiplicity
    /// expanded: what a reader entry publishes.
    pub fn reader_rows_cut(&self, reader: usize, width: usize) -> Vec<Row> {
        let Some(map) = self.readers.get(reader) else { return vec![] };
        let mut out = Vec::with_capacity(map.len());
        for (r, &c) in map {
            let cut: Row = if r.0.len() <= width { r.0.clone() } else { r.0[..width].into() };
            for _ in 1..c.max(0) {
                out.push(cut.clone());
            }
            if c > 0 {
                out.push(cut);
            }
        }
        out
    }

    /// Pushes base deltas (indexed by base occurrence) through the graph and applies the
    /// result to the reader rows.
    pub fn process(&mut self, graph: &Graph, base: &mut [Vec<Delta>]) {
        let mut outs: Vec<Vec<Delta>> = Vec::with_capacity(graph.nodes.len());
        for (i, n) in graph.nodes.iter().enumerate() {
            // Inputs are cloned, not moved: with shared subtrees a node can feed several.
            let take = |j: usize, outs: &mut Vec<Vec<Delta>>| outs[j].clone();
            let out = match &n.tree {
                Node::Base { occ, .. } => base.get_mut(*occ).map(std::mem::take).unwrap_or_default(),
                Node::Filter { pred, .. } => {
                    let mut d = take(n.inputs[0], &mut outs);
                    d.retain(|(r, _)| is_true(&pred.eval(r)) == Some(true));
                    d
                }
                Node::Project { exprs, .. } => take(n.inputs[0], &mut outs)
                    .into_iter()
                    .map(|(r, w)| (exprs.iter().map(|e| e.eval(&r)).collect(), w))
                    .collect(),
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
                    if *global
                        && let Some(row) = self.global_group(i, *group, aggs) {
                            created.push((row, 1));
                        }
                    created.extend(self.aggregate(i, *group, aggs, d));
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
            let d = outs.get(root).cloned().unwrap_or_default();
            self.apply_reader(i, d);
        }
    }

    fn aggregate(&mut self, idx: usize, group: usize, aggs: &[AggSpec], d: Vec<Delta>) -> Vec<Delta> {
        let NodeState::Agg(groups) = &mut self.states[idx] else { return vec![] };
        let mut old: HashMap<Key, Option<Row>> = HashMap::new();
        let mut bytes = 0isize;
        for (row, w) in d {
            let gk: Key = row.iter().take(group).cloned().collect();
            if !old.contains_key(&gk) {
                old.insert(gk.clone(), groups.get(&gk).map(group_output));
            }
            let g = groups.entry(gk.clone()).or_insert_with(|| {
                bytes += (row_bytes(&gk) * 2 + SLOT) as isize;
                Group { values: gk.clone(), spellings: Vec::new(), rows: 0, accs: aggs.iter().map(|a| Acc::new(a.kind)).collect() }
            });
            g.rows += w;
            bytes += g.count_spelling(&row[..group.min(row.len())], w);
            for (acc, spec) in g.accs.iter_mut().zip(aggs) {
                bytes += acc.apply(spec, &row, w);
            }
        }
        let mut out = Vec::new();
        for (gk, before) in old {
            if let Some(g) = groups.get_mut(&gk) {
                bytes += g.settle_spellings();
            }
            let after = match groups.get(&gk) {
                Some(g) if g.rows == 0 && !global_group_of(g, &self.key, group) => {
                    bytes -= (row_bytes(&gk) * 2 + SLOT) as isize;
                    groups.remove(&gk);
                    None
                }
                Some(g) => Some(group_output(g)),
                None => None,
            };
            if let (Some(b), Some(a)) = (&before, &after)
                && ExactRow(b.clone()) == ExactRow(a.clone()) {
                    continue;
                }
            if let Some(b) = before {
                out.push((b, -1));
            }
            if let Some(a) = after {
                out.push((a, 1));
            }
        }
        self.bytes += bytes;
        out
    }

    /// DISTINCT: a row is output while any row SQL-equal to it exists, in a spelling one of
    /// them has (see [`Group`]: the same bookkeeping, without accumulators).
    fn distinct(&mut self, idx: usize, d: Vec<Delta>) -> Vec<Delta> {
        let NodeState::Distinct(counts) = &mut self.states[idx] else { return vec![] };
        let mut before: HashMap<Row, Option<Row>> = HashMap::new();
        let mut bytes = 0isize;
        for (row, w) in d {
            if !before.contains_key(&row) {
                let shown = counts.get(&row).filter(|g| g.rows > 0).map(|g| g.values.clone());
                before.insert(row.clone(), shown);
            }
            let entry = counts.entry(row.clone()).or_insert_with(|| {
                bytes += (row_bytes(&row) + SLOT) as isize;
                Group { values: row.clone(), spellings: Vec::new(), rows: 0, accs: Vec::new() }
            });
            entry.rows += w;
            bytes += entry.count_spelling(&row, w);
        }
        let mut out = Vec::new();
        for (key, shown) in before {
            let after = match counts.get_mut(&key) {
                Some(g) => {
                    bytes += g.settle_spellings();
                    (g.rows > 0).then(|| g.values.clone())
                }
                None => None,
            };
            if counts.get(&key).is_some_and(|g| g.rows == 0) {
                counts.remove(&key);
                bytes -= (row_bytes(&key) + SLOT) as isize;
            }
            match (shown, after) {
                (Some(b), Some(a)) if exact_eq(&b, &a) => {}
                (b, a) => {
                    out.extend(b.map(|b| (b, -1)));
                    out.extend(a.map(|a| (a, 1)));
                }
            }
        }
        self.bytes += bytes;
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn topk(&mut self, idx: usize, order: &OrderSpec, limit: usize, offset: usize, slack: usize, d: Vec<Delta>) -> Vec<Delta> {
        let NodeState::TopK(st) = &mut self.states[idx] else { return vec![] };
        if d.is_empty() {
            return vec![];
        }
        let cap = (offset + limit).saturating_add(slack) as i64;
        let before = window(&st.rows, limit, offset);
        let mut bytes = 0isize;
        for (row, w) in d {
            let b = (row_bytes(&row) * 2 + SLOT) as isize;
            let k = sort_key(&row, order);
            if w > 0 {
                let beyond = !st.complete && st.rows.keys().next_back().is_none_or(|last| k >= *last);
                if beyond {
                    continue;
                }
                bytes += add_count(&mut st.rows, &k, w) * b;
                st.count += w;
                while st.count > cap {
                    let Some((last, _)) = st.rows.iter().next_back().map(|(k, c)| (k.clone(), *c)) else { break };
                    let lb = (row_bytes(&last.row.0) * 2 + SLOT) as isize;
                    bytes += add_count(&mut st.rows, &last, -1) * lb;
                    st.count -= 1;
                    st.complete = false;
                }
            } else {
                let held = st.rows.get(&k).copied().unwrap_or(0);
                let take = held.min(-w);
                if take > 0 {
                    bytes += add_count(&mut st.rows, &k, -take) * b;
                    st.count -= take;
                }
            }
        }
        if !st.complete && st.count < (offset + limit) as i64 {
            self.needs_refill = true;
        }
        let after = window(&st.rows, limit, offset);
        self.bytes += bytes;
        diff(before, after)
    }

    /// Marks a top-k state seeded with a server-truncated prefix of `cap` rows as possibly
    /// incomplete.
    pub fn mark_truncated(&mut self, idx: usize, cap: usize) {
        if let Some(NodeState::TopK(st)) = self.states.get_mut(idx)
            && st.count >= cap as i64 {
                st.complete = false;
            }
    }

    /// Full output of node `idx` for this partition, computed from state. `None` if the node
    /// is not derivable (a base table or a stateless node over one).
    pub fn full_output(&self, graph: &Graph, idx: usize) -> Option<Vec<Delta>> {
        let n = graph.nodes.get(idx)?;
        let input = |j: usize| graph.nodes[n.inputs[j]].tree.clone();
        Some(match (&n.tree, &self.states[idx]) {
            (Node::Base { .. }, _) => return None,
            (Node::Filter { pred, .. }, _) => {
                let mut d = self.full_output(graph, n.inputs[0])?;
                d.retain(|(r, _)| is_true(&pred.eval(r)) == Some(true));
                d
            }
            (Node::Project { exprs, .. }, _) => self
                .full_output(graph, n.inputs[0])?
                .into_iter()
                .map(|(r, w)| (exprs.iter().map(|e| e.eval(&r)).collect(), w))
                .collect(),
            (Node::Union { .. }, _) => {
                let mut all = Vec::new();
                for &j in &n.inputs {
                    all.extend(self.full_output(graph, j)?);
                }
                all
            }
            (Node::Join { kind, .. }, NodeState::Join([ls, rs])) => {
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
            (Node::Aggregate { .. }, NodeState::Agg(groups)) => {
                groups.values().map(|g| (group_output(g), 1)).collect()
            }
            (Node::Distinct { .. }, NodeState::Distinct(c)) => {
                c.values().filter(|g| g.rows > 0).map(|g| (g.values.clone(), 1)).collect()
            }
            (Node::TopK { limit, offset, .. }, NodeState::TopK(st)) => {
                window(&st.rows, *limit, *offset).into_iter().map(|r| (r, 1)).collect()
            }
            _ => return None,
        })
    }

    /// Installs fill data into the state of node `idx` (input `side` for joins; reader `i` when
    /// `idx == graph.nodes.len() + i`) without emitting anything downstream.
    pub fn seed(&mut self, graph: &Graph, idx: usize, side: usize, rows: Vec<Delta>) {
        if idx >= graph.nodes.len() {
            self.apply_reader(idx - graph.nodes.len(), rows);
            return;
        }
        let n = &graph.nodes[idx];
        match &n.tree {
            Node::Join { on, .. } => {
                let cols: Vec<usize> = on.iter().map(|p| if side == 0 { p.0 } else { p.1 }).collect();
                let NodeState::Join(sides) = &mut self.states[idx] else { return };
                let Some(st) = sides.get_mut(side) else { return };
                let mut bytes = 0isize;
                for (r, w) in rows {
                    let k = join_key(&r, &cols).unwrap_or_else(|| nulls(cols.len()).into());
                    let bucket = st.entry(k.clone()).or_default();
                    bytes += bucket_add(bucket, &r, w);
                    if bucket.is_empty() {
                        st.remove(&k);
                    }
                }
                self.bytes += bytes;
            }
            Node::Aggregate { group, aggs, .. } => {
                self.aggregate(idx, *group, aggs, rows);
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

fn global_group_of(g: &Group, key: &Key, group: usize) -> bool {
    // A global aggregate groups by the key columns only; its group never disappears.
    group == key.len() && g.values.as_ref() == key.as_ref()
}

fn group_output(g: &Group) -> Row {
    g.values.iter().cloned().chain(g.accs.iter().map(Acc::output)).collect()
}

fn window(rows: &BTreeMap<SortKey, i64>, limit: usize, offset: usize) -> Vec<Row> {
    let mut out = Vec::new();
    let mut skipped = 0usize;
    for (k, &c) in rows {
        for _ in 0..c.max(0) {
            if skipped < offset {
                skipped += 1;
                continue;
            }
            if out.len() >= limit {
                return out;
            }
            out.push(k.row.0.clone());
        }
    }
    out
}

fn diff(before: Vec<Row>, after: Vec<Row>) -> Vec<Delta> {
    let mut m: HashMap<ExactRow, i64> = HashMap::new();
    for r in before {
        *m.entry(ExactRow(r)).or_insert(0) -= 1;
    }
    for r in after {
        *m.entry(ExactRow(r)).or_insert(0) += 1;
    }
    m.into_iter().filter(|(_, c)| *c != 0).map(|(r, c)| (r.0, c)).collect()
}

#[cfg(test)]
mod tests;
