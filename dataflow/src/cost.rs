//! Cost bounds per compiled query, in the spirit of PIQL's scale-independence classes: how
//! the work of a hit, a miss (fill) and one base-row write grows with the data.
//!
//! Owns: [`CostBounds`], [`Bound`], [`cost_bounds`]. Does not own: measuring anything; these
//! are static bounds derived from the plan and the schema (primary keys), for EXPLAIN.
//!
//! Invariant: a bound is never optimistic for the plan as this crate executes it (e.g. a top-k
//! fill ships at most `offset + limit + slack` rows per partition, but the server still reads
//! the partition to rank it unless an index serves the order, so its fill bound is linear).
//! Dimension tables (joined on a non-parameter key, see `plan`): a fill looks up the rows
//! joined with the partition's rows (one per joined row when the join columns cover the
//! table's primary key, else linear in the partition); a write to one is routed through the
//! writer's index to every filled partition holding its join key, so its write bound is
//! [`Bound::FanOut`] of the per-partition work.

use crate::compile::{Catalog, CompiledQuery};
use crate::plan::Node;

/// How a quantity grows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Independent of data size.
    Constant,
    /// At most this many (rows or steps), independent of data size.
    AtMost(u64),
    /// Linear in the number of base rows of one partition (rows sharing the parameter value).
    LinearInPartition,
    /// Linear in the number of filled partitions holding the written row's join key (a write
    /// to a dimension table), each costing the inner bound.
    FanOut(Box<Bound>),
    /// Linear in the size of a table (the query has no parameters: one partition).
    LinearInTable,
}

impl Bound {
    fn rank(&self) -> u8 {
        match self {
            Bound::Constant => 0,
            Bound::AtMost(_) => 1,
            Bound::LinearInPartition => 2,
            Bound::FanOut(_) => 3,
            Bound::LinearInTable => 4,
        }
    }
    fn max(self, o: Bound) -> Bound {
        match (&self, &o) {
            (Bound::AtMost(a), Bound::AtMost(b)) => Bound::AtMost((*a).max(*b)),
            _ if o.rank() > self.rank() => o,
            _ => self,
        }
    }
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bound::Constant => f.write_str("constant"),
            Bound::AtMost(n) => write!(f, "at most {n}"),
            Bound::LinearInPartition => f.write_str("linear in partition"),
            Bound::FanOut(inner) => write!(f, "per filled partition holding the key: {inner}"),
            Bound::LinearInTable => f.write_str("linear in table"),
        }
    }
}

/// Costs per base table occurrence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableCost {
    pub table: String,
    /// Rows a fill reads from this table per missing partition.
    pub fill_rows: Bound,
    /// True if the table is a dimension: looked up by a join key, not by the parameters.
    pub dimension: bool,
    /// Work to apply one base-row write to this table (operators plus republishing the
    /// partition's reader entry).
    pub write: Bound,
}

/// A state the view keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateInfo {
    /// Operator ("join", "aggregate", "top-k", "distinct", "reader").
    pub op: &'static str,
    /// True if the state can be partial (holes, eviction, fills). Always true here: every
    /// state is partitioned by the parameters; a parameterless view is one partition.
    pub partial: bool,
}

/// The cost bounds of one query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostBounds {
    /// Work of a hit: hash lookups (one per partition the parameters name).
    pub hit: Bound,
    /// Per table occurrence: fill reads and write work.
    pub tables: Vec<TableCost>,
    /// The states kept.
    pub states: Vec<StateInfo>,
    /// Number of partitions the view has: one (no parameters) or one per parameter value.
    pub single_partition: bool,
}

impl CostBounds {
    /// The PIQL-style class of the query, for SHOW CACHES: the worst of the hit, fill and
    /// write bounds, one of
    /// - `"constant"`: one hash lookup per hit, at most one row per fill and write (a
    ///   primary-key point query);
    /// - `"bounded"`: at most a fixed number of rows or steps (an IN list, a LIMIT), still
    ///   independent of data size;
    /// - `"linear in partition"`: grows with the rows sharing one parameter value (a story's
    ///   comments); scale-independent only if the application bounds those;
    /// - `"fan-out"`: a write to a dimension table costs work in every filled partition
    ///   holding its key (a user's rename reaches each story partition showing them);
    /// - `"linear in table"`: grows with a whole table (no parameters, or a range parameter
    ///   over a parameterless view): not scale-independent.
    pub fn class(&self) -> &'static str {
        let worst = self.tables.iter().flat_map(|t| [&t.fill_rows, &t.write]).fold(self.hit.clone(), |w, b| w.max(b.clone()));
        match worst {
            Bound::Constant | Bound::AtMost(0 | 1) => "constant",
            Bound::AtMost(_) => "bounded",
            Bound::LinearInPartition => "linear in partition",
            Bound::FanOut(_) => "fan-out",
            Bound::LinearInTable => "linear in table",
        }
    }
}

/// Derives the bounds of `q`.
pub fn cost_bounds(q: &CompiledQuery, catalog: &Catalog) -> CostBounds {
    let keyed = !q.key_columns.is_empty();
    let hit = if !q.read_filters.is_empty() {
        // The reader scans the partition's rows to apply range parameters.
        if keyed { Bound::LinearInPartition } else { Bound::LinearInTable }
    } else {
        match q.n_params {
            0 | 1 => Bound::Constant,
            n => Bound::AtMost(n as u64),
        }
    };
    let nodes = q.root.post_order();
    let bases = q.root.bases();
    let pk_keyed = |b: &Node| -> bool {
        let Node::Base { table, key, .. } = b else { return false };
        let Some(t) = catalog.get(table) else { return false };
        !key.is_empty() && {
            let mut pk = t.primary_key.clone();
            pk.sort();
            let mut k = key.clone();
            k.sort();
            k.dedup();
            pk.iter().all(|c| k.contains(c)) && !pk.is_empty()
        }
    };
    let per_partition = |b: &Node| {
        if !keyed {
            Bound::LinearInTable
        } else if pk_keyed(b) {
            Bound::AtMost(1)
        } else {
            Bound::LinearInPartition
        }
    };
    let has_join = nodes.iter().any(|n| matches!(n, Node::Join { .. }));
    let topk = nodes.iter().find_map(|n| match n {
        Node::TopK { limit, offset, .. } => Some((limit + offset) as u64),
        _ => None,
    });
    let global = nodes.iter().any(|n| matches!(n, Node::Aggregate { global: true, .. }));
    let publish = if let Some(k) = topk {
        Bound::AtMost(k)
    } else if global {
        Bound::Constant
    } else if keyed && bases.iter().all(|b| pk_keyed(b)) {
        Bound::AtMost(1)
    } else if keyed {
        Bound::LinearInPartition
    } else {
        Bound::LinearInTable
    };
    let tables = bases
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut write = publish.clone();
            if has_join {
                for (j, o) in bases.iter().enumerate() {
                    if j != i {
                        write = write.max(per_partition(o));
                    }
                }
            }
            if let Some(k) = topk {
                write = write.max(Bound::AtMost(k));
            }
            let (table, dimension) = match b {
                Node::Base { table, key, .. } => (table.clone(), keyed && key.is_empty()),
                _ => (String::new(), false),
            };
            if dimension {
                write = Bound::FanOut(Box::new(write));
            }
            TableCost { table, fill_rows: per_partition(b), write, dimension }
        })
        .collect();
    let mut states: Vec<StateInfo> =
        nodes.iter().filter(|n| n.is_stateful()).map(|n| StateInfo { op: n.op_name(), partial: true }).collect();
    states.push(StateInfo { op: "reader", partial: true });
    CostBounds { hit, tables, states, single_partition: !keyed }
}
