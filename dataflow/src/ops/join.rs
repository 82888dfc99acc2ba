//! The join operator: both inputs' states bucketed by join key, incremental `ΔL ⋈ R_old` then
//! `L_new ⋈ ΔR`, left joins' NULL-extended rows, and the dimension-join cover check.
//!
//! Owns: [`Bucket`], the join methods of [`KeyState`]. Does not own: which keys a partition
//! covers or why (the fill and the view decide; see the parent's header for the invariants).

use super::{Delta, Key, KeyState, NodeState, SLOT, node_state};
use crate::mem::heap_block;
use crate::plan::JoinKind;
use crate::small::Small;
use crate::value::{ExactRow, Row, Value, row_bytes, row_heap};

pub(super) fn join_key(row: &[Value], cols: &[usize]) -> Option<Key> {
    let k: Key = cols.iter().map(|&c| row.get(c).cloned().unwrap_or(Value::Null)).collect();
    if k.iter().any(Value::is_null) { None } else { Some(k) }
}

/// A row's join key, borrowed from the row for the usual single column (looking a bucket up
/// allocates nothing), owned for several.
pub(super) enum JoinKey<'a> {
    One(&'a Value),
    Many(Key),
}

impl JoinKey<'_> {
    pub(super) fn as_slice(&self) -> &[Value] {
        match self {
            JoinKey::One(v) => std::slice::from_ref(*v),
            JoinKey::Many(k) => k,
        }
    }
}

/// As [`join_key`], without allocating for one column: `None` if any key column is NULL.
pub(super) fn join_key_ref<'a>(row: &'a [Value], cols: &[usize]) -> Option<JoinKey<'a>> {
    match cols {
        [c] => row.get(*c).filter(|v| !v.is_null()).map(JoinKey::One),
        _ => join_key(row, cols).map(JoinKey::Many),
    }
}

/// Adds `w` copies of `row` to the bucket of `key` in `side` (created and dropped as needed);
/// returns the byte change.
pub(super) fn side_add(side: &mut Small<Key, Bucket>, key: &[Value], row: &Row, w: i64) -> isize {
    let created = !side.contains_key(key);
    if created {
        side.insert(key.into(), Bucket::default());
    }
    let Some(bucket) = side.get_mut(key) else { return 0 };
    let bytes = bucket_add(bucket, row, w);
    match (created, bucket.is_empty()) {
        (true, true) => {
            side.remove(key);
            bytes
        }
        (false, true) => {
            side.remove(key);
            bytes - bucket_cost(key)
        }
        (true, false) => bytes + bucket_cost(key),
        (false, false) => bytes,
    }
}

/// What a bucket costs besides its rows: its key's heap (the key itself is inline in the side's
/// table, which `KeyState::fixed_bytes` counts by capacity) and the first block of its map of
/// rows, one entry (later growth is in the rows' `SLOT`).
fn bucket_cost(key: &[Value]) -> isize {
    (row_heap(key) + heap_block(std::mem::size_of::<(ExactRow, i64)>())) as isize
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
    pub(super) rows: Small<ExactRow, i64>,
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
fn bucket_add(bucket: &mut Bucket, row: &Row, w: i64) -> isize {
    bucket.total += w;
    let b = (row_bytes(row) + SLOT) as isize;
    let key = ExactRow(row.clone());
    match bucket.rows.get_mut(&key) {
        Some(e) => {
            *e += w;
            if *e == 0 {
                bucket.rows.remove(&key);
                -b
            } else {
                0
            }
        }
        None if w == 0 => 0,
        None => {
            bucket.rows.insert(key, w);
            b
        }
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
        let cover = self.cover_sets().and_then(|c| c.get(&idx));
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
        let Some(NodeState::Join([ls, rs])) = node_state(&mut self.held, idx) else { return vec![] };
        let mut out = Vec::new();
        let mut bytes = 0isize;
        let count = bucket_count;
        let null_left = nulls(lcols.len());
        let null_right = nulls(rcols.len());
        for (l, w) in dl {
            let jk = join_key_ref(&l, &lcols);
            let matches = jk.as_ref().and_then(|k| rs.get(k.as_slice()));
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
            let k = jk.as_ref().map_or(&null_left[..], JoinKey::as_slice);
            bytes += side_add(ls, k, &l, w);
        }
        for (r, w) in dr {
            let jk = join_key_ref(&r, &rcols);
            if let Some(k) = &jk {
                let before = count(rs.get(k.as_slice()));
                let after = before + w;
                if let Some(lrows) = ls.get(k.as_slice()) {
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
            let k = jk.as_ref().map_or(&null_right[..], JoinKey::as_slice);
            bytes += side_add(rs, k, &r, w);
        }
        self.bytes += bytes;
        out
    }
}
