//! The join operator: both inputs' states bucketed by join key, incremental `ΔL ⋈ R_old` then
//! `L_new ⋈ ΔR`, left joins' NULL-extended rows, and the dimension-join cover check.
//!
//! Owns: [`Bucket`], the join methods of [`KeyState`]. Does not own: which keys a partition
//! covers or why (the fill and the view decide; see the parent's header for the invariants).

use std::collections::HashMap;

use super::{Delta, Key, KeyState, NodeState, SLOT};
use crate::plan::JoinKind;
use crate::value::{ExactRow, Row, Value, row_bytes};

pub(super) fn join_key(row: &[Value], cols: &[usize]) -> Option<Key> {
    let k: Key = cols.iter().map(|&c| row.get(c).cloned().unwrap_or(Value::Null)).collect();
    if k.iter().any(Value::is_null) { None } else { Some(k) }
}

pub(super) fn concat(a: &[Value], b: &[Value]) -> Row {
    a.iter().chain(b.iter()).cloned().collect()
}

pub(super) fn nulls(n: usize) -> Vec<Value> {
    vec![Value::Null; n]
}

/// The rows of one join input that share a join key, with multiplicities and their total.
#[derive(Debug, Default)]
pub(super) struct Bucket {
    pub(super) rows: HashMap<ExactRow, i64>,
    pub(super) total: i64,
}

impl Bucket {
    pub(super) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    pub(super) fn iter(&self) -> impl Iterator<Item = (&ExactRow, &i64)> {
        self.rows.iter()
    }
}

/// Adds `w` copies of `row` to a bucket; returns the byte change.
pub(super) fn bucket_add(bucket: &mut Bucket, row: &Row, w: i64) -> isize {
    bucket.total += w;
    let e = bucket.rows.entry(ExactRow(row.clone())).or_insert(0);
    let was = *e;
    *e += w;
    let b = (row_bytes(row) + SLOT) as isize;
    if *e == 0 {
        bucket.rows.remove(&ExactRow(row.clone()));
        -b
    } else if was == 0 {
        b
    } else {
        0
    }
}

pub(super) fn bucket_count(b: Option<&Bucket>) -> i64 {
    b.map(|v| v.total).unwrap_or(0)
}

impl KeyState {
    /// For dimension join `idx`: drops right (dimension) rows whose key is not covered, and
    /// flags the partition for refill if a left row needs a key that is not covered.
    pub(super) fn check_cover(&mut self, idx: usize, on: &[(usize, usize)], dl: &[Delta], dr: &mut Vec<Delta>) {
        let lcols: Vec<usize> = on.iter().map(|p| p.0).collect();
        let rcols: Vec<usize> = on.iter().map(|p| p.1).collect();
        let cover = self.cover.get(&idx);
        let covered = |k: &Option<Key>| k.as_ref().is_some_and(|k| cover.is_some_and(|c| c.contains(k)));
        dr.retain(|(r, _)| covered(&join_key(r, &rcols)));
        if dl.iter().any(|(l, _)| {
            let k = join_key(l, &lcols);
            k.is_some() && !covered(&k)
        }) {
            self.needs_refill = true;
        }
    }

    pub(super) fn join(
        &mut self,
        idx: usize,
        on: &[(usize, usize)],
        kind: JoinKind,
        rw: usize,
        dl: Vec<Delta>,
        dr: Vec<Delta>,
    ) -> Vec<Delta> {
        let lcols: Vec<usize> = on.iter().map(|p| p.0).collect();
        let rcols: Vec<usize> = on.iter().map(|p| p.1).collect();
        let NodeState::Join([ls, rs]) = &mut self.states[idx] else { return vec![] };
        let mut out = Vec::new();
        let mut bytes = 0isize;
        let count = bucket_count;
        for (l, w) in dl {
            let jk = join_key(&l, &lcols);
            let matches = jk.as_ref().and_then(|k| rs.get(k));
            if let Some(m) = matches {
                for (r, c) in m.iter() {
                    out.push((concat(&l, &r.0), w * c));
                }
            }
            if kind == JoinKind::Left && count(matches) == 0 {
                out.push((concat(&l, &nulls(rw)), w));
            }
            // Rows with a NULL join key never match but are kept under the all-NULL key so
            // that the full output can be rebuilt from state.
            let k = jk.unwrap_or_else(|| nulls(lcols.len()).into());
            let bucket = ls.entry(k.clone()).or_default();
            bytes += bucket_add(bucket, &l, w);
            if bucket.is_empty() {
                ls.remove(&k);
            }
        }
        for (r, w) in dr {
            let jk = join_key(&r, &rcols);
            if let Some(k) = &jk {
                let before = count(rs.get(k));
                let after = before + w;
                if let Some(lrows) = ls.get(k) {
                    for (l, c) in lrows.iter() {
                        out.push((concat(&l.0, &r), w * c));
                        if kind == JoinKind::Left {
                            if before == 0 && after != 0 {
                                out.push((concat(&l.0, &nulls(rw)), -c));
                            } else if before != 0 && after == 0 {
                                out.push((concat(&l.0, &nulls(rw)), *c));
                            }
                        }
                    }
                }
            }
            let k = jk.unwrap_or_else(|| nulls(rcols.len()).into());
            let bucket = rs.entry(k.clone()).or_default();
            bytes += bucket_add(bucket, &r, w);
            if bucket.is_empty() {
                rs.remove(&k);
            }
        }
        self.bytes += bytes;
        out
    }
}
