//! Top-k state of one partition: a bounded prefix of the input in ORDER BY order, the window
//! it shows, and the [`KeyState`] step that keeps it (see the parent module for when a prefix
//! too short to fill the window makes the partition need a refill).

use std::collections::BTreeMap;

use super::agg::add_count;
use super::{Delta, KeyState, NodeState, SLOT, node_state};
use crate::hash::Map;
use crate::plan::OrderSpec;
use crate::value::{ExactRow, Row, SharedRow, Value, ValueRef, exact_values_cmp, row_bytes};

/// A row with its sort key for top-k: ordered by the ORDER BY columns, then exactly.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct SortKey {
    parts: Vec<SortPart>,
    row: ExactRow,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum SortPart {
    Asc(Value),
    Desc(std::cmp::Reverse<Value>),
}

pub(super) fn sort_key(row: &[Value], order: &OrderSpec) -> SortKey {
    let parts = order
        .iter()
        .map(|&(c, desc)| {
            let v = row.get(c).cloned().unwrap_or(Value::Null);
            if desc { SortPart::Desc(std::cmp::Reverse(v)) } else { SortPart::Asc(v) }
        })
        .collect();
    SortKey { parts, row: ExactRow(row.into()) }
}

/// Sorts rows the way ORDER BY does here (ties broken exactly, deterministically).
pub fn sort_rows<R: AsRef<[Value]>>(rows: &mut [R], order: &OrderSpec) {
    rows.sort_by_cached_key(|r| sort_key(r.as_ref(), order));
}

/// [`sort_rows`] for shared rows: the same order, read from the rows' blocks. Each row's ORDER
/// BY values are read once, borrowed (as `sort_by_cached_key` reads each key once).
pub fn sort_shared_rows(rows: &mut Vec<SharedRow>, order: &OrderSpec) {
    if rows.len() < 2 {
        return;
    }
    let mut keyed: Vec<(Vec<ValueRef<'_>>, usize)> =
        rows.iter().enumerate().map(|(i, r)| (order.iter().map(|&(c, _)| r.get(c).unwrap_or(ValueRef::Null)).collect(), i)).collect();
    keyed.sort_by(|(a, i), (b, j)| {
        let mut by_order = a.iter().zip(b).zip(order).map(|((x, y), &(_, desc))| {
            let o = x.cmp_total(*y);
            if desc { o.reverse() } else { o }
        });
        by_order.find(|o| o.is_ne()).unwrap_or_else(|| exact_values_cmp(&rows[*i], &rows[*j]))
    });
    let sorted: Vec<SharedRow> = keyed.iter().map(|&(_, i)| rows[i].clone()).collect();
    drop(keyed);
    *rows = sorted;
}

/// Top-k state: a prefix, in sort order, of the partition's input rows, at most `cap` rows
/// (`offset + limit + slack`). Invariant: every input row not held sorts at or after the last
/// held row; `complete` means nothing is left out. Inserts past the last held row of an
/// incomplete prefix are dropped; deletions that shrink an incomplete prefix below
/// `offset + limit` make the partition need a refill (the rows that would move into the window
/// are not held), which the view turns into an eviction.
#[derive(Debug, Default)]
pub(super) struct TopState {
    pub(super) rows: BTreeMap<SortKey, i64>,
    pub(super) count: i64,
    pub(super) complete: bool,
}

impl KeyState {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn topk(&mut self, idx: usize, order: &OrderSpec, limit: usize, offset: usize, slack: usize, d: Vec<Delta>) -> Vec<Delta> {
        let Some(NodeState::TopK(st)) = node_state(&mut self.held, idx) else { return vec![] };
        if d.is_empty() {
            return vec![];
        }
        let cap = (offset + limit).saturating_add(slack) as i64;
        // The window before the first change that can move it; until then, changes past the
        // window's last row (most of them: a vote for a story far from the top) leave it as it
        // is, and the step costs no window copies.
        let mut before: Option<Vec<Row>> = None;
        let mut bytes = 0isize;
        for (row, w) in d {
            let b = (row_bytes(&row) * 2 + SLOT) as isize;
            let k = sort_key(&row, order);
            if before.is_none() && !past_window(&st.rows, &k, limit + offset) {
                before = Some(window(&st.rows, limit, offset));
            }
            if w > 0 {
                let beyond = !st.complete && st.rows.keys().next_back().is_none_or(|last| k >= *last);
                if beyond {
                    continue;
                }
                bytes += add_count(&mut st.rows, k, w) * b;
                st.count += w;
                while st.count > cap {
                    let Some((last, _)) = st.rows.iter().next_back().map(|(k, c)| (k.clone(), *c)) else { break };
                    let lb = (row_bytes(&last.row.0) * 2 + SLOT) as isize;
                    bytes += add_count(&mut st.rows, last, -1) * lb;
                    st.count -= 1;
                    st.complete = false;
                }
            } else {
                let held = st.rows.get(&k).copied().unwrap_or(0);
                let take = held.min(-w);
                if take > 0 {
                    bytes += add_count(&mut st.rows, k, -take) * b;
                    st.count -= take;
                }
            }
        }
        if !st.complete && st.count < (offset + limit) as i64 {
            self.needs_refill = true;
        }
        self.bytes += bytes;
        match before {
            Some(before) => diff(before, window(&st.rows, limit, offset)),
            None => Vec::new(),
        }
    }

    /// Marks a top-k state seeded with a server-truncated prefix of `cap` rows as possibly
    /// incomplete.
    pub fn mark_truncated(&mut self, idx: usize, cap: usize) {
        if let Some(NodeState::TopK(st)) = node_state(&mut self.held, idx)
            && st.count >= cap as i64
        {
            st.complete = false;
        }
    }
}

/// True if a row sorting at `k` lies after the first `shown` rows held (`OFFSET + LIMIT`), so
/// that adding or removing it cannot change the window. Rows trimmed beyond the cap lie
/// after it too (the cap is at least `shown`).
fn past_window(rows: &BTreeMap<SortKey, i64>, k: &SortKey, shown: usize) -> bool {
    let mut seen = 0usize;
    for (held, &c) in rows {
        seen += c.max(0) as usize;
        if seen >= shown {
            return *k > *held;
        }
    }
    false
}

pub(super) fn window(rows: &BTreeMap<SortKey, i64>, limit: usize, offset: usize) -> Vec<Row> {
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

pub(super) fn diff(before: Vec<Row>, after: Vec<Row>) -> Vec<Delta> {
    let mut m: Map<ExactRow, i64> = Map::default();
    for r in before {
        *m.entry(ExactRow(r)).or_insert(0) -= 1;
    }
    for r in after {
        *m.entry(ExactRow(r)).or_insert(0) += 1;
    }
    m.into_iter().filter(|(_, c)| *c != 0).map(|(r, c)| (r.0, c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Collation;

    /// Shared rows sort as rows of their values do: by the ORDER BY columns (text under its
    /// collation, NULL first, descending where asked), ties exactly, a missing column as NULL.
    #[test]
    fn shared_rows_sort_as_their_values() {
        let ci = |s: &str| Value::text(s, Collation::Utf8mb4GeneralCi);
        let rows: Vec<Vec<Value>> = vec![
            vec![Value::Int(2), ci("b")],
            vec![Value::UInt(2), ci("B")],
            vec![Value::Int(1), ci("a")],
            vec![Value::Null, ci("c")],
            vec![Value::Int(1), ci("A")],
            vec![Value::Int(3), Value::Null],
            vec![Value::Int(1)],
        ];
        for order in [vec![(0, false)], vec![(1, true), (0, false)], vec![(1, false)], vec![(2, false)], vec![]] {
            let mut want = rows.clone();
            sort_rows(&mut want, &order);
            let mut got: Vec<SharedRow> = rows.iter().map(|r| SharedRow::from(r.as_slice())).collect();
            sort_shared_rows(&mut got, &order);
            let got: Vec<Vec<Value>> = got.iter().map(SharedRow::to_vec).collect();
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{order:?}");
        }
    }
}
