//! Fill plumbing of a domain: the request a set of holes sends (state queries for an upstream
//! server, base scans and dimension lookups for a replica) and how an answer becomes one
//! partition's [`KeyState`].
//!
//! Owns: [`build_request`], [`build_state`]. Does not own: which partitions are pending, the
//! position rules or installing the state (fills), dimension specifics (dims).
//!
//! Invariants: a request lists one state query per remotely seeded slot, in slot order, and
//! `build_state` reads answers in that same order; a state built from an answer whose shape
//! does not match the current layout is `None` (the fill is rejected, never half-installed).
//! A built state covers every dimension key its rows need before any delta is replayed on it.

use super::dims::{dim_seed_plan, replay_deltas};
use super::{Domain, Slot};
use crate::delta::Position;
use crate::fill::{BaseScan, DimScan, FillData, FillRequest, FillResponse, FillTicket, StateQuery, ViewId};
use crate::ops::{Delta, Key, KeyState};
use crate::plan::Node;
use crate::render::render_fill_capped;
use crate::value::{Collation, Value};

/// For a top-k state: its order and how many rows of its input a fill needs.
pub(super) fn topk_cap(domain: &Domain, node: usize) -> Option<(crate::plan::OrderSpec, usize)> {
    match domain.graph.nodes.get(node).map(|n| &n.tree) {
        Some(Node::TopK { order, limit, offset, .. }) => Some((order.clone(), (offset + limit).saturating_add(domain.graph.topk_slack))),
        _ => None,
    }
}

pub(super) fn build_request(domain: &Domain, v: ViewId, ticket: FillTicket, keys: Vec<Key>, min_position: Position) -> FillRequest {
    let mut queries = Vec::new();
    for s in &domain.slots {
        if s.remote.is_some() {
            let plan = seed_plan(domain, s);
            let grouped = matches!(domain.graph.nodes.get(s.node).map(|n| &n.tree), Some(Node::Aggregate { .. }));
            let cap = topk_cap(domain, s.node);
            let (sql, params) = render_fill_capped(&plan, &keys, grouped, cap.as_ref().map(|(o, n)| (o, *n)), &s.text);
            queries.push(StateQuery { node: s.node, side: s.side, sql, params, plan, grouped, cap });
        }
    }
    let scans =
        domain.occs.iter().map(|(occ, table, key)| BaseScan { occ: *occ, table: table.clone(), key_columns: key.clone() }).collect();
    let answer_of = |occ: usize| {
        domain.occs.iter().position(|o| o.0 == occ).or_else(|| domain.dims.iter().position(|d| d.occ == occ).map(|i| domain.occs.len() + i))
    };
    let dim_scans = domain
        .dims
        .iter()
        .map(|d| {
            let (from, from_columns) = match &d.from {
                // `usize::MAX` names no answer: the source returns no rows, and the view
                // rejects the fill (`replay_deltas` needs `from`).
                Some((o, cols)) => (answer_of(*o).unwrap_or(usize::MAX), cols.clone()),
                None => (usize::MAX, Vec::new()),
            };
            DimScan { occ: d.occ, table: d.table.clone(), columns: d.cols.clone(), from, from_columns }
        })
        .collect();
    FillRequest { view: v, ticket, keys, min_position, queries, scans, dim_scans }
}

/// The subtree a remotely seeded state is seeded from: the state's input, or for the right
/// (dimension) side of a dimension join, that side restricted to the left side's join keys
/// and tagged with the partition key (see `dims::dim_seed_plan`).
pub(super) fn seed_plan(domain: &Domain, s: &Slot) -> Node {
    if s.side == 1
        && domain.graph.dim.get(s.node).copied().unwrap_or(false)
        && let Some(plan) = domain.graph.nodes.get(s.node).and_then(|n| dim_seed_plan(&n.tree))
    {
        return plan;
    }
    domain.graph.nodes[s.input].tree.clone()
}

/// Builds the state of partition `key` from a fill response, at the response's position.
pub(super) fn build_state(domain: &Domain, key: &Key, resp: &FillResponse) -> Option<KeyState> {
    match &resp.data {
        FillData::BaseRows(scans) => {
            let mut ks = KeyState::empty(&domain.graph, key, resp.position, false);
            let mut deltas = replay_deltas(&domain.occs, &domain.dims, domain.n_occ, key, scans, &mut ks)?;
            ks.process(&domain.graph, key, &mut deltas);
            Some(ks)
        }
        FillData::States(answers) => {
            let mut ks = KeyState::empty(&domain.graph, key, resp.position, true);
            for s in &domain.slots {
                let rows: Vec<Delta> = match s.remote {
                    Some(qi) => {
                        let plan = seed_plan(domain, s);
                        let kpos = plan.key_positions();
                        let width = plan.width();
                        // A dimension seed carries the partition key after the input's row.
                        let keep = domain.graph.nodes[s.input].tree.width();
                        let grouped = matches!(domain.graph.nodes.get(s.node).map(|n| &n.tree), Some(Node::Aggregate { .. }));
                        answers
                            .get(qi)?
                            .iter()
                            .filter(|(r, _)| {
                                let k: Key = kpos.iter().map(|&c| tagged(r.get(c).unwrap_or(&Value::Null), s.collations.get(c))).collect();
                                k == *key
                            })
                            .map(|(r, w)| {
                                let row = |n: usize| r.iter().take(n).enumerate().map(|(c, v)| tagged(v, s.collations.get(c))).collect();
                                if grouped && r.len() == width + 1 {
                                    let n = match r.get(width) {
                                        Some(Value::Int(n)) => *n,
                                        Some(Value::UInt(n)) => *n as i64,
                                        _ => *w,
                                    };
                                    (row(width), n * w)
                                } else {
                                    (row(keep), *w)
                                }
                            })
                            .collect()
                    }
                    None => ks.full_output(&domain.graph, s.input)?,
                };
                ks.seed(&domain.graph, key, s.node, s.side, rows);
                if s.remote.is_some()
                    && let Some((_, cap)) = topk_cap(domain, s.node)
                {
                    ks.mark_truncated(s.node, cap);
                }
            }
            for d in &domain.dims {
                ks.cover_left_keys(d.node);
            }
            Some(ks)
        }
    }
}

/// A seed's value with the collation of the base column it copies (see `Slot::collations`);
/// other values as they came.
fn tagged(v: &Value, collation: Option<&Option<Collation>>) -> Value {
    match (v, collation) {
        (Value::Text(s, c), Some(Some(want))) if c != want => Value::Text(s.clone(), *want),
        _ => v.clone(),
    }
}
