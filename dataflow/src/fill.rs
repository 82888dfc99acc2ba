//! Fill requests and fill sources: how a hole asks for the state it is missing.
//!
//! Owns: [`FillRequest`], [`FillResponse`], the [`FillSource`] trait and two in-memory sources
//! over a [`MemStore`]: [`MemUpstream`] (answers the request's SQL state queries, the way the
//! upstream server will) and [`MemReplica`] (returns base rows, the way the local replica will).
//! Does not own: deduplication, batching, positions and buffering (view), talking to MySQL or
//! RocksDB (cdc, replica).
//!
//! Invariants a source must keep (the view checks what it can):
//! - All data in one response reflects the database at exactly `position`.
//! - `position >= request.min_position` (the view applied everything up to `min_position`
//!   before the keys became holes; a fill older than that would miss dropped deltas).
//! - State-query answers are multisets: each answer row is a row of that query's plan output
//!   restricted to the request's keys, with a weight. For `grouped` queries the SQL returns a
//!   trailing `COUNT(*)` column (give weight 1) or the source folds it into the weight (as
//!   [`MemUpstream`] does); the view accepts both.
//! - Base-row answers list, per scan, every row of the table whose key columns equal a key;
//!   then, per [`DimScan`] (in order, after all scans), every row of the dimension table whose
//!   `columns` equal the `from_columns` of some row already answered for scan `from` (the
//!   second step of a replica fill; `from` always names an earlier answer). A source that
//!   does not know dimension scans answers too few lists, and the view rejects the fill (the
//!   partitions stay holes) rather than install partial state.

use std::collections::HashSet;

use crate::delta::Position;
use crate::eval::eval;
use crate::ops::{Delta, Key, sort_rows};
use crate::plan::{Node, OrderSpec};
use crate::store::MemStore;
use crate::value::{ExactRow, Row, Value};

/// Identifies a view inside one [`crate::Dataflow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ViewId(pub u32);

/// One state the fill must provide, as SQL for an upstream server and as a plan for
/// in-process evaluation.
#[derive(Clone, Debug)]
pub struct StateQuery {
    /// Operator index of the state in the domain's graph (`graph.nodes.len() + i` = reader
    /// `i`).
    pub node: usize,
    /// Input side for joins (0 = left, 1 = right), else 0.
    pub side: usize,
    /// MySQL text with `?` placeholders.
    pub sql: String,
    /// Values for the placeholders, in order.
    pub params: Vec<Value>,
    /// The subtree whose output (restricted to the keys) this state is seeded from.
    pub plan: Node,
    /// True if the answer is grouped by all columns with a trailing count.
    pub grouped: bool,
    /// If set, only the first `n` rows of each partition in this order are wanted (a top-k
    /// state's prefix); ties may be broken any way.
    pub cap: Option<(OrderSpec, usize)>,
}

/// One base-table occurrence the replay needs rows of.
#[derive(Clone, Debug)]
pub struct BaseScan {
    /// Occurrence number in the view's plan.
    pub occ: usize,
    /// Table name.
    pub table: String,
    /// Columns holding the partition key, in key order.
    pub key_columns: Vec<usize>,
}

/// A dimension table occurrence the replay needs rows of: those joined with the rows of an
/// earlier answer (its join keys are only known from them).
#[derive(Clone, Debug)]
pub struct DimScan {
    /// Occurrence number in the view's plan.
    pub occ: usize,
    /// Table name.
    pub table: String,
    /// The dimension table's join columns.
    pub columns: Vec<usize>,
    /// Index of the earlier answer (into `scans` followed by `dim_scans`) whose rows carry the
    /// join keys.
    pub from: usize,
    /// Columns of `from`'s rows holding the join keys, matching `columns` in order.
    pub from_columns: Vec<usize>,
}

/// Ties a response to the request it answers: which group of views (domain) and which layout
/// of their states it was built for. Sources copy it from the request into the response; the
/// dataflow ignores a response whose layout is no longer current.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FillTicket {
    pub(crate) domain: u32,
    pub(crate) epoch: u64,
}

/// A request for the state of some missing partitions of one view (and of every view that
/// shares operators with it: a fill covers the whole domain).
#[derive(Clone, Debug)]
pub struct FillRequest {
    /// The view whose miss asked for the fill.
    pub view: ViewId,
    /// Copy into the response.
    pub ticket: FillTicket,
    /// The missing partitions (deduplicated).
    pub keys: Vec<Key>,
    /// The fill must reflect a position at or after this one.
    pub min_position: Position,
    /// For sources that evaluate SQL: one query per state to seed.
    pub queries: Vec<StateQuery>,
    /// For sources that return base rows: one scan per partition-keyed table occurrence.
    pub scans: Vec<BaseScan>,
    /// For sources that return base rows: one lookup per dimension table occurrence, answered
    /// after `scans` (see the module header).
    pub dim_scans: Vec<DimScan>,
}

/// What a source returns.
#[derive(Clone, Debug)]
pub enum FillData {
    /// Answers to `FillRequest::queries`, in order, as weighted rows.
    States(Vec<Vec<Delta>>),
    /// Answers to `FillRequest::scans` then `FillRequest::dim_scans`, in order.
    BaseRows(Vec<Vec<Row>>),
}

/// A fill's answer.
#[derive(Clone, Debug)]
pub struct FillResponse {
    pub view: ViewId,
    /// The request's ticket.
    pub ticket: FillTicket,
    pub keys: Vec<Key>,
    /// The position the data reflects.
    pub position: Position,
    /// Commits whose end lies in this range may be in `data` or not, whatever `position` says;
    /// `None` from a source that is exact. MariaDB's snapshot position is not exactly its
    /// snapshot's content (cdc's fence says how the range is found).
    pub unsure: Option<Unsure>,
    pub data: FillData,
}

/// The positions around a fill's `position` where its data may disagree with it
/// ([`FillResponse::unsure`]): commits ending after `from` and at or before `to`;
/// `from <= position <= to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsure {
    pub from: Position,
    pub to: Position,
}

impl FillResponse {
    /// The response to `req` with `data` reflecting `position` exactly.
    pub fn answer(req: &FillRequest, position: Position, data: FillData) -> FillResponse {
        FillResponse { view: req.view, ticket: req.ticket, keys: req.keys.clone(), position, unsure: None, data }
    }

    /// The same response, its data known to agree with `position` only on commits ending at
    /// or before `from` or after `to` (the range is widened to hold `position`).
    pub fn unsure_within(mut self, from: Position, to: Position) -> FillResponse {
        self.unsure = Some(Unsure { from: from.min(self.position), to: to.max(self.position) });
        self
    }
}

/// Why a fill could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FillError {
    /// The source cannot answer now (e.g. upstream unreachable); retrying later is safe.
    #[error("fill source unavailable: {0}")]
    Unavailable(String),
    /// The source's data is older than the request's `min_position`; retrying is safe.
    #[error("fill source is behind: at {have:?}, need {need:?}")]
    Behind { have: Position, need: Position },
}

/// Something that can answer fill requests.
pub trait FillSource {
    /// Answers `req` at one consistent position.
    fn fill(&mut self, req: &FillRequest) -> Result<FillResponse, FillError>;
}

/// The upstream stand-in: evaluates each state query's plan over a [`MemStore`], as the
/// server would evaluate its SQL.
pub struct MemUpstream<'a> {
    pub store: &'a MemStore,
}

impl FillSource for MemUpstream<'_> {
    fn fill(&mut self, req: &FillRequest) -> Result<FillResponse, FillError> {
        if self.store.position() < req.min_position {
            return Err(FillError::Behind { have: self.store.position(), need: req.min_position });
        }
        let keys: HashSet<Key> = req.keys.iter().cloned().collect();
        let mut answers = Vec::new();
        for q in &req.queries {
            let mut rows = eval(&q.plan, self.store, Some(&keys));
            if let Some((order, n)) = &q.cap {
                rows = first_per_partition(rows, &q.plan.key_positions(), order, *n);
            }
            answers.push(if q.grouped { group_count(rows) } else { rows.into_iter().map(|r| (r, 1)).collect() });
        }
        Ok(FillResponse::answer(req, self.store.position(), FillData::States(answers)))
    }
}

/// The first `n` rows of each partition in `order`.
fn first_per_partition(mut rows: Vec<Row>, key: &[usize], order: &OrderSpec, n: usize) -> Vec<Row> {
    sort_rows(&mut rows, order);
    let mut seen: std::collections::HashMap<Key, usize> = std::collections::HashMap::new();
    rows.retain(|r| {
        let k: Key = key.iter().map(|&c| r.get(c).cloned().unwrap_or(Value::Null)).collect();
        let c = seen.entry(k).or_insert(0);
        *c += 1;
        *c <= n
    });
    rows
}

/// Collapses a multiset into (row, count) pairs, as `GROUP BY all columns` with `COUNT(*)` does.
fn group_count(rows: Vec<Row>) -> Vec<Delta> {
    let mut out: Vec<Delta> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for r in rows {
        match index.get(&ExactRow(r.clone())) {
            Some(&i) => {
                let e: &mut Delta = &mut out[i];
                e.1 += 1;
            }
            None => {
                index.insert(ExactRow(r.clone()), out.len());
                out.push((r, 1));
            }
        }
    }
    out
}

/// The replica stand-in: returns base rows from a [`MemStore`] for the dataflow to replay.
pub struct MemReplica<'a> {
    pub store: &'a MemStore,
}

impl MemReplica<'_> {
    fn rows_with(&self, table: &str, columns: &[usize], keys: &HashSet<Key>) -> Vec<Row> {
        self.store
            .rows(table)
            .iter()
            .filter(|r| {
                let k: Key = columns.iter().map(|&c| r.get(c).cloned().unwrap_or(Value::Null)).collect();
                keys.contains(&k)
            })
            .cloned()
            .collect()
    }
}

/// The values of `columns` in `row`, or `None` if one is NULL (a NULL never joins).
pub fn key_of(row: &[Value], columns: &[usize]) -> Option<Key> {
    let k: Key = columns.iter().map(|&c| row.get(c).cloned().unwrap_or(Value::Null)).collect();
    if k.iter().any(Value::is_null) { None } else { Some(k) }
}

impl FillSource for MemReplica<'_> {
    fn fill(&mut self, req: &FillRequest) -> Result<FillResponse, FillError> {
        if self.store.position() < req.min_position {
            return Err(FillError::Behind { have: self.store.position(), need: req.min_position });
        }
        let keys: HashSet<Key> = req.keys.iter().cloned().collect();
        let mut scans: Vec<Vec<Row>> = req.scans.iter().map(|s| self.rows_with(&s.table, &s.key_columns, &keys)).collect();
        for d in &req.dim_scans {
            let from = scans.get(d.from).map(Vec::as_slice).unwrap_or(&[]);
            let join_keys: HashSet<Key> = from.iter().filter_map(|r| key_of(r, &d.from_columns)).collect();
            let rows = self.rows_with(&d.table, &d.columns, &join_keys);
            scans.push(rows);
        }
        Ok(FillResponse::answer(req, self.store.position(), FillData::BaseRows(scans)))
    }
}
