//! The oracle simulation shared by the property tests: random base rows, a random query from
//! the supported set, and a random interleaving of inserts, updates, deletes, replication lag,
//! lookups, evictions, budget pressure, fills that arrive late, and reader publication held
//! back over several batches. Used by `oracle.rs` (the
//! in-memory sources) and by the replica crate's tests (the RocksDB store as the replica
//! source), which include this file by path.
#![allow(dead_code)]

use std::collections::VecDeque;

use freshet_dataflow::eval::eval;
use freshet_dataflow::*;
use proptest::prelude::*;

/// A replica fill source under test: follows the replicated batches (applied before the
/// dataflow applies them, as the engine's writer does) and answers base-row fills at the
/// position it has applied.
pub trait ReplicaUnderTest {
    fn apply(&mut self, batch: &Batch);
    fn fill(&mut self, req: &FillRequest) -> Result<FillResponse, FillError>;
}

pub const QUERIES: &[&str] = &[
    "SELECT id, x FROM a WHERE k = ?",
    "SELECT id, x FROM a WHERE k = ? AND x > 2",
    "SELECT k, COUNT(*), SUM(x), MIN(x), MAX(x), COUNT(DISTINCT g), AVG(x), COUNT(x) FROM a WHERE k = ? GROUP BY k",
    "SELECT COUNT(*), MAX(s), MIN(x) FROM a WHERE k = ?",
    "SELECT g, COUNT(x) AS n FROM a WHERE k = ? GROUP BY g HAVING COUNT(*) > 1",
    "SELECT a.id, b.y FROM a JOIN b ON b.k = a.k WHERE a.k = ?",
    "SELECT a.id, COUNT(b.id), MAX(b.y) FROM a LEFT JOIN b ON b.k = a.k AND b.y > 2 WHERE a.k = ? GROUP BY a.id",
    "SELECT a.id, b.id FROM a JOIN b ON b.k = a.k AND b.y = a.g WHERE a.k = ?",
    "SELECT a1.id, a2.id FROM a a1 JOIN a a2 ON a2.k = a1.k AND a2.g = a1.g WHERE a1.k = ?",
    "SELECT a.id, b.id, c.id FROM a JOIN b ON b.k = a.k LEFT JOIN a c ON c.k = b.k AND c.x = b.y WHERE b.k = ?",
    "SELECT id, x FROM a WHERE k = ? ORDER BY x DESC, id LIMIT 3",
    "SELECT id FROM a WHERE k = ? ORDER BY g, id LIMIT 2 OFFSET 1",
    "SELECT DISTINCT g FROM a WHERE k = ?",
    "SELECT DISTINCT s FROM a WHERE k = ?",
    "SELECT id, x * 2 + 1, CASE WHEN x > 3 THEN 'hi' ELSE s END, COALESCE(x, -1), CONCAT(s, '-', g) FROM a WHERE k = ? AND (s LIKE 'a%' OR x BETWEEN 2 AND 5)",
    "SELECT s, COUNT(*) FROM a WHERE k = ? GROUP BY s",
    "SELECT k, g, SUM(x) FROM a WHERE k IN (?, ?) GROUP BY k, g",
    "SELECT g, COUNT(*) FROM a GROUP BY g",
    "SELECT COUNT(*), SUM(y) FROM b",
    "SELECT id FROM a WHERE x IS NULL UNION ALL SELECT id FROM b WHERE y < 3",
    "SELECT a.g, COUNT(*) FROM a JOIN b ON b.k = a.k GROUP BY a.g ORDER BY a.g",
    "SELECT id, s FROM a ORDER BY s, id LIMIT 4",
    "SELECT id, g FROM a WHERE k = ? AND x >= ? ORDER BY id",
    "SELECT a.id, b.y FROM a JOIN b ON b.k = a.k WHERE a.k = ? AND ? < b.y",
];

/// Queries with dimension joins: tables joined on columns other than the parameter (inner and
/// left, multi-column keys, chains of two, under aggregates, top-k, DISTINCT and IN lists).
/// Writes to `b` change its join columns `k` and `y`, so dimension rows move between keys.
pub const DIMS: &[&str] = &[
    "SELECT a.id, b.y FROM a JOIN b ON b.k = a.g WHERE a.k = ?",
    "SELECT a.id, b.id, b.s FROM a LEFT JOIN b ON b.k = a.g AND b.y > 1 WHERE a.k = ?",
    "SELECT a.id, b.id FROM a JOIN b ON b.k = a.g AND b.y = a.x WHERE a.k = ?",
    "SELECT a.id, b.id, b.s FROM a JOIN b ON b.k = a.g AND b.s = a.s WHERE a.k = ?",
    "SELECT a.id, b.id FROM a LEFT JOIN b ON b.y = a.x AND b.k = a.g WHERE a.k = ? AND (b.s IS NULL OR b.s <> 'b')",
    "SELECT a.id, b.id, c.id FROM a JOIN b ON b.k = a.g JOIN a c ON c.k = b.y WHERE a.k = ?",
    "SELECT a.id, b.id, c.x FROM a LEFT JOIN b ON b.k = a.x LEFT JOIN a c ON c.g = b.y AND c.k = b.k WHERE a.k = ?",
    "SELECT a.k, COUNT(c.id), SUM(c.x) FROM a JOIN b ON b.k = a.k JOIN a c ON c.g = b.y WHERE a.k = ? GROUP BY a.k",
    "SELECT a.k, COUNT(b.id), MAX(b.y) FROM a LEFT JOIN b ON b.k = a.g WHERE a.k = ? GROUP BY a.k",
    "SELECT a.id, b.s FROM a JOIN b ON b.k = a.g WHERE a.k = ? ORDER BY b.y DESC, a.id, b.id LIMIT 2",
    "SELECT DISTINCT b.y FROM a JOIN b ON b.k = a.g WHERE a.k = ?",
    "SELECT COUNT(*), SUM(b.y) FROM a JOIN b ON b.k = a.g WHERE a.k = ?",
    "SELECT a.id, b.y FROM a JOIN b ON b.k = a.g WHERE a.k = ? AND b.y > ?",
    "SELECT a.k, a.id, b.y FROM a JOIN b ON b.k = a.g WHERE a.k IN (?, ?)",
    "SELECT b.id, a.id FROM b JOIN a ON a.g = b.k AND a.k = b.y WHERE b.y = ? AND a.x > 1",
    // The first table is a dimension: inner joins are re-placed behind the keyed table.
    "SELECT b.id, a.id, a.x FROM b JOIN a ON a.g = b.k WHERE a.k = ?",
    // A dimension joined on columns of two tables: one table's columns key it, the other
    // equality stays a filter.
    "SELECT a.id, b.id, c.id FROM a JOIN b ON b.k = a.g JOIN a c ON c.k = b.y AND c.g = a.g WHERE a.k = ?",
    "SELECT c.id, b.id, a.id FROM a c JOIN b ON b.y = c.k JOIN a ON a.g = b.k WHERE a.k = ?",
    "SELECT b.id, COUNT(*), SUM(a.x) FROM b JOIN a ON a.g = b.k AND a.s = b.s WHERE a.k = ? GROUP BY b.id",
];

pub use freshet_testkit::catalog::ab as catalog;

#[derive(Clone, Debug)]
pub enum Op {
    Insert { b: bool, k: i64, g: i64, x: Option<i64>, s: usize },
    Delete { b: bool, idx: usize },
    Update { b: bool, idx: usize, k: i64, x: Option<i64> },
    Replicate,
    Lookup(i64),
    TakeFills { replica: bool },
    Deliver(usize),
    Evict(i64),
    Check,
}

/// The value given to range parameters (`col > ?`).
pub const RANGE_PARAM: i64 = 2;

pub const STRINGS: &[&str] = &["a", "A", "b", "ab", "B ", "á"];

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), 0..4i64, 0..3i64, proptest::option::of(0..6i64), 0..STRINGS.len())
            .prop_map(|(b, k, g, x, s)| Op::Insert { b, k, g, x, s }),
        2 => (any::<bool>(), any::<usize>()).prop_map(|(b, idx)| Op::Delete { b, idx }),
        2 => (any::<bool>(), any::<usize>(), 0..4i64, proptest::option::of(0..6i64))
            .prop_map(|(b, idx, k, x)| Op::Update { b, idx, k, x }),
        3 => Just(Op::Replicate),
        3 => (0..5i64).prop_map(Op::Lookup),
        2 => any::<bool>().prop_map(|replica| Op::TakeFills { replica }),
        2 => any::<usize>().prop_map(Op::Deliver),
        1 => (0..5i64).prop_map(Op::Evict),
        1 => Just(Op::Check),
    ]
}

/// Case count: `FRESHET_ORACLE_CASES` overrides the default (for long runs).
pub fn cases(default: u32) -> u32 {
    std::env::var("FRESHET_ORACLE_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

pub struct Sim {
    pub df: Dataflow,
    pub views: Vec<ViewId>,
    upstream: MemStore,
    lag: VecDeque<Batch>,
    replicated: MemStore,
    in_flight: Vec<FillResponse>,
    next_id: i64,
    pos: u64,
    /// Entries compared with the oracle, and how many of them were non-empty.
    pub checked: usize,
    pub nonempty: usize,
    /// Fills rejected as older than their partition's hole.
    pub stale: usize,
    /// The replica fill source under test, if not the in-memory one.
    replica: Option<Box<dyn ReplicaUnderTest>>,
    /// Batches applied since the last `publish_held`.
    held: usize,
}

/// Batches replicated with their publication held back before the simulation publishes.
pub const HELD_BATCHES: usize = 3;

pub fn int(i: i64) -> Value {
    Value::Int(i)
}
pub fn opt(x: Option<i64>) -> Value {
    x.map(Value::Int).unwrap_or(Value::Null)
}

impl Sim {
    /// One oracle case: applies `ops` to `views` of `df`, then looks up keys 0..4, delivers
    /// every fill they need from one source (`replica` or upstream) and checks every filled
    /// entry against a from-scratch evaluation.
    pub fn run(df: Dataflow, views: Vec<ViewId>, ops: Vec<Op>, replica: bool) -> Sim {
        Sim::run_with(df, views, ops, replica, None)
    }

    /// As [`Sim::run`], with `under_test` answering the replica's fills instead of the
    /// in-memory replica.
    pub fn run_with(df: Dataflow, views: Vec<ViewId>, ops: Vec<Op>, replica: bool, under_test: Option<Box<dyn ReplicaUnderTest>>) -> Sim {
        let mut sim = Sim {
            df,
            views,
            upstream: MemStore::new(),
            lag: VecDeque::new(),
            replicated: MemStore::new(),
            in_flight: Vec::new(),
            next_id: 1,
            pos: 0,
            checked: 0,
            nonempty: 0,
            stale: 0,
            replica: under_test,
            held: 0,
        };
        for o in ops {
            sim.step(o);
        }
        for k in 0..4 {
            sim.step(Op::Lookup(k));
        }
        sim.step(Op::TakeFills { replica });
        while !sim.in_flight.is_empty() {
            sim.step(Op::Deliver(0));
        }
        sim.check();
        sim
    }

    fn write(&mut self, f: impl FnOnce(&mut Batch, &MemStore)) {
        self.pos += 1;
        let mut b = Batch::new(Position(self.pos));
        f(&mut b, &self.upstream);
        self.upstream.apply(&b);
        self.lag.push_back(b);
    }
    fn replicate(&mut self) {
        if let Some(b) = self.lag.pop_front() {
            self.replicated.apply(&b);
            if let Some(r) = self.replica.as_mut() {
                r.apply(&b);
            }
            // As the engine's writer does within a step: publication held back over a few
            // batches (operations that fill or evict publish what is held first).
            self.df.apply_held(&b).unwrap();
            self.held += 1;
            if self.held >= HELD_BATCHES {
                self.df.publish_held();
                self.held = 0;
            }
        }
    }
    fn params(&self, view: ViewId, k: i64) -> Vec<Value> {
        let q = self.df.query(view).unwrap();
        let mut p = vec![int(k); q.n_params];
        for f in &q.read_filters {
            p[f.param] = int(RANGE_PARAM);
        }
        p
    }
    fn step(&mut self, op: Op) {
        match op {
            Op::Insert { b, k, g, x, s } => {
                let id = self.next_id;
                self.next_id += 1;
                let st = Value::text(STRINGS[s], Collation::Utf8mb4GeneralCi);
                self.write(|batch, _| {
                    if b {
                        batch.insert("b", vec![int(id), int(k), int(g + x.unwrap_or(0)), st].into());
                    } else {
                        batch.insert("a", vec![int(id), int(k), int(g), opt(x), st].into());
                    }
                });
            }
            Op::Delete { b, idx } => {
                let t = if b { "b" } else { "a" };
                self.write(|batch, up| {
                    let rows = up.rows(t);
                    if !rows.is_empty() {
                        batch.delete(t, rows[idx % rows.len()].clone());
                    }
                });
            }
            Op::Update { b, idx, k, x } => {
                let t = if b { "b" } else { "a" };
                self.write(|batch, up| {
                    let rows = up.rows(t);
                    if rows.is_empty() {
                        return;
                    }
                    let old = rows[idx % rows.len()].clone();
                    let mut new = old.to_vec();
                    new[1] = int(k);
                    if b {
                        new[2] = int(x.unwrap_or(0));
                    } else {
                        new[3] = opt(x);
                    }
                    batch.update(t, old, new.into());
                });
            }
            Op::Replicate => self.replicate(),
            Op::Lookup(k) => {
                let view = self.views[(k as usize) % self.views.len()];
                let p = self.params(view, k);
                // A partition too heavy for the budget is not filled again for a while.
                match self.df.reader(view).unwrap().lookup(&p) {
                    Ok(_) | Err(LookupError::TooLarge) => {}
                    Err(e) => panic!("lookup: {e}"),
                }
            }
            Op::TakeFills { replica } => {
                for req in self.df.fill_requests() {
                    let resp = if let (true, Some(r)) = (replica, self.replica.as_mut()) {
                        r.fill(&req)
                    } else if replica {
                        MemReplica { store: &self.upstream }.fill(&req)
                    } else {
                        MemUpstream { store: &self.upstream }.fill(&req)
                    };
                    self.in_flight.push(resp.unwrap());
                }
            }
            Op::Deliver(i) => {
                if !self.in_flight.is_empty() {
                    let r = self.in_flight.remove(i % self.in_flight.len());
                    self.stale += self.df.complete_fill(r).stale;
                }
            }
            Op::Evict(k) => {
                let view = self.views[0];
                let n = self.df.query(view).unwrap().key_columns.len();
                let key: Key = vec![int(k); n].into();
                self.df.evict(view, &key);
            }
            Op::Check => self.check(),
        }
    }

    /// Catches replication up and publishes, then compares every filled entry with the oracle.
    fn check(&mut self) {
        while !self.lag.is_empty() {
            self.replicate();
        }
        self.df.publish_held();
        self.held = 0;
        for view in self.views.clone() {
            self.check_view(view);
        }
    }

    fn check_view(&mut self, view: ViewId) {
        let q = self.df.query(view).unwrap().clone();
        let reader = self.df.reader(view).unwrap();
        for key in self.df.filled_keys(view) {
            let k = match key.first() {
                Some(Value::Int(k)) => *k,
                _ => 0,
            };
            let params = self.params(view, k);
            let got = match reader.lookup(&params) {
                Ok(Lookup::Hit(rows)) => rows.iter().map(|r| Row::from(r.to_vec())).collect::<Vec<Row>>(),
                // Evicted by the budget between listing and reading: nothing to check.
                Ok(Lookup::Miss(_)) | Err(LookupError::TooLarge) => continue,
                Err(e) => panic!("lookup: {e}"),
            };
            let keys = std::iter::once(key.clone()).collect();
            let restrict = if q.n_params == 0 { None } else { Some(&keys) };
            let passes = |r: &Row| {
                q.read_filters.iter().all(|f| {
                    let e = freshet_dataflow::expr::Expr::Cmp(
                        f.op,
                        Box::new(freshet_dataflow::expr::Expr::Col(f.column)),
                        Box::new(freshet_dataflow::expr::Expr::lit(int(RANGE_PARAM))),
                    );
                    e.eval(r) == int(1)
                })
            };
            // The reference is the plan without projection pushdown, so the oracle checks
            // that pass too (the view runs the pruned plan).
            let reference = compile_unpruned(&q.sql, self.df.catalog()).unwrap();
            assert_eq!(reference.root.width(), q.root.width(), "pruning changed the root of {}", q.sql);
            let mut all = eval(&reference.root, &self.replicated, restrict);
            all.retain(|r| passes(r));
            let mut got_sorted = got.clone();
            if q.order.is_empty() {
                got_sorted.sort();
            } else {
                // Ordered results must match in order (ties are broken deterministically).
                freshet_dataflow::ops::sort_rows(&mut all, &q.order);
            }
            let mut want: Vec<Row> = all.into_iter().map(|r| r[..q.visible].to_vec().into()).collect();
            if q.order.is_empty() {
                want.sort();
            }
            assert_eq!(got_sorted, want, "query {} key {:?}", q.sql, key);
            self.checked += 1;
            if !want.is_empty() {
                self.nonempty += 1;
            }
        }
    }
}

/// Runs one oracle case: installs `sql`, applies `ops`, fills every key 0..4 from one source
/// and checks. Returns the simulation (for its counts).
pub fn run_case(sql: &str, budget: ByteSize, slack: usize, replica: bool, ops: Vec<Op>) -> Sim {
    let mut df = Dataflow::new(catalog(), budget);
    df.set_topk_slack(slack);
    df.set_max_fill_keys(2);
    let view = df.install_sql(sql).unwrap();
    Sim::run(df, vec![view], ops, replica)
}

/// Queries that share stateful subtrees, installed together: they share operators and
/// partitions (exact-subtree reuse), and each must still equal its own recomputation.
pub const FAMILIES: &[&[&str]] = &[
    &[
        "SELECT k, COUNT(*), SUM(x) FROM a WHERE k = ? GROUP BY k",
        "SELECT k, COUNT(*), SUM(x) FROM a WHERE k = ? GROUP BY k HAVING COUNT(*) > 2",
        "SELECT k, COUNT(*), SUM(x) FROM a WHERE k = ? GROUP BY k ORDER BY k",
    ],
    &[
        "SELECT a.id, b.y FROM a JOIN b ON b.k = a.k WHERE a.k = ?",
        "SELECT a.id, b.y FROM a JOIN b ON b.k = a.k WHERE a.k = ? ORDER BY b.y DESC, a.id LIMIT 2",
        "SELECT a.g, COUNT(*) FROM a JOIN b ON b.k = a.k WHERE a.k = ? GROUP BY a.g",
    ],
    &[
        "SELECT a.id, c.id FROM a JOIN b ON b.k = a.k JOIN b c ON c.k = a.k WHERE a.k = ?",
        // Reads the same columns of the a-b join as the first (projection pushdown narrows a
        // join's inputs to what its query reads, and only equal subtrees are shared).
        "SELECT a.id, c.id FROM a JOIN b ON b.k = a.k JOIN a c ON c.k = a.k AND c.id = a.id WHERE a.k = ?",
        "SELECT a.id, b.id FROM a JOIN b ON b.k = a.k WHERE a.k = ? AND b.y > 1",
    ],
    &[
        // Share the keyed join a-b; the dimension `c` (same occurrence number, same table)
        // sits under a different join in each view (each keeps other columns of `c`).
        "SELECT a.id, c.id FROM a JOIN b ON b.k = a.k JOIN b c ON c.k = a.g WHERE a.k = ?",
        "SELECT a.id, c.y FROM a JOIN b ON b.k = a.k JOIN b c ON c.k = a.g WHERE a.k = ?",
        "SELECT a.id, b.id, c.id FROM a JOIN b ON b.k = a.k LEFT JOIN b c ON c.y = b.y WHERE a.k = ?",
    ],
    &["SELECT g, COUNT(*) FROM a GROUP BY g", "SELECT g, COUNT(*) FROM a GROUP BY g HAVING COUNT(*) > 3", "SELECT DISTINCT g FROM a"],
];

/// Top-k views under churn with no slack, so that prefixes run short and refill often.
pub const TOP_K: &[&str] = &[
    "SELECT id, x FROM a WHERE k = ? ORDER BY x DESC, id LIMIT 2",
    "SELECT id FROM a WHERE k = ? ORDER BY g, id LIMIT 1 OFFSET 1",
    "SELECT a.id, b.y FROM a JOIN b ON b.k = a.k WHERE a.k = ? ORDER BY b.y DESC, a.id LIMIT 2",
    "SELECT id, s FROM a ORDER BY s, id LIMIT 2",
];
