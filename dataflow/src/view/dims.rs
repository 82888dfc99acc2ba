//! Dimension tables of a domain: which join each one feeds, the writer's index from a
//! dimension join key to the partitions that hold rows for it, and the fill plumbing that is
//! specific to them (the upstream seed query, the replica's second step).
//!
//! Owns: [`Dim`], [`DimIndex`], [`DimLog`], [`borrow_covers`], [`find_dims`], [`dim_seed_plan`], [`replay_deltas`]. Does not
//! own: joining (ops; a partition's `cover` is the source of truth), positions (fills) and
//! buffering (batches).
//!
//! Invariants:
//! - **Index = covers.** For every dimension `d` and key `k`, `index[d][k]` is exactly the set
//!   of *filled* partitions whose `KeyState` covers `k` at `d`'s join: entries are added when a
//!   filled partition is installed and removed when it is dropped, and a cover otherwise grows
//!   only by [`borrow_covers`], which adds the index entry with it (ops: deltas never grow a
//!   cover; a left row needing an uncovered key evicts the partition). So a dimension delta
//!   routed through the index reaches every filled partition that holds (or must hold) rows for
//!   its key, and no other filled one.
//! - **Borrowing is exact:** before a batch is routed, a filled partition about to need a key it
//!   does not cover copies that key's rows from another filled partition covering it; both are
//!   at exactly the applied position (neither is a fill ahead of the binlog), and nothing of
//!   the batch has been applied yet, so the copy equals the dimension rows at that position.
//! - Pending partitions have no cover yet; dimension deltas applied while any is pending go to
//!   one shared [`DimLog`], which a fill replays (merged with the partition's own buffer, in
//!   position order) after its cover is set; the join ignores the rows it does not cover.
//! - Each dimension occurrence feeds exactly one join of the domain (the parent renumbers a
//!   dimension base that a new, different join would otherwise share), so routing a delta to
//!   a partition once per occurrence never counts it twice.

use std::collections::HashSet;

use crate::compile::Catalog;
use crate::hash::Map;
use crate::small::Small;

use crate::delta::Position;
use crate::expr::Expr;
use crate::fill::key_of;
use crate::ops::{Delta, Graph, Key, KeyState};
use crate::plan::{JoinKind, Node};
use crate::value::Row;

/// One dimension occurrence and the join it feeds.
#[derive(Clone, Debug)]
pub(super) struct Dim {
    /// The dimension join's node index in the graph.
    pub(super) node: usize,
    pub(super) occ: usize,
    pub(super) table: String,
    /// Join columns of the dimension table.
    pub(super) cols: Vec<usize>,
    /// The earlier occurrence whose columns `from_cols` carry the join key (`None` if the
    /// plan does not have that shape; compile refuses it, the replica fill path rejects it).
    pub(super) from: Option<(usize, Vec<usize>)>,
}

/// The dimension joins of `graph`, in node order (so a dimension's `from` occurrence, which
/// lies in the join's left input, is never a later dimension). Join columns are traced to the
/// base columns they copy ([`Node::origin`]): the join's inputs may be projections of their
/// bases, and the writer and the replica fill see base rows.
pub(super) fn find_dims(graph: &Graph, catalog: &Catalog) -> Vec<Dim> {
    let mut out = Vec::new();
    for (i, n) in graph.nodes.iter().enumerate() {
        let Node::Join { left, right, on, .. } = &n.tree else { continue };
        if !graph.dim.get(i).copied().unwrap_or(false) {
            continue;
        }
        let Some(Node::Base { occ, table, .. }) = right.bases().first().copied() else { continue };
        // Compile joins a dimension on plain columns of it, and its pruning keeps them plain
        // (`compile/prune.rs` checks): this `else` cannot run.
        let Some(cols) = on.iter().map(|&(_, r)| right.origin(r).filter(|o| o.0 == *occ).map(|o| o.1)).collect::<Option<Vec<_>>>() else {
            debug_assert!(false, "a dimension join on columns that are not the dimension's: {:?}", n.tree);
            continue;
        };
        let lefts: Option<Vec<(usize, usize)>> = on.iter().map(|&(l, _)| left.origin(l)).collect();
        let from = lefts.and_then(|ls| {
            let o = ls.first()?.0;
            ls.iter().all(|l| l.0 == o).then(|| (o, ls.iter().map(|l| l.1).collect()))
        });
        out.push(Dim { node: i, occ: *occ, table: catalog.key(table), cols, from });
    }
    out
}

/// Per dimension (parallel to the domain's `dims`): join key -> filled partitions covering it.
#[derive(Debug, Default)]
pub(super) struct DimIndex(Vec<Map<Key, Parts>>);

/// The filled partitions covering one dimension key. A [`Small`]: nearly every key of a
/// dimension that fans out (a story's votes under a user's karma) is covered by one partition,
/// and a hash set of one entry allocates a table of four.
type Parts = Small<Key, ()>;

impl DimIndex {
    pub(super) fn new(n: usize) -> DimIndex {
        DimIndex((0..n).map(|_| Map::default()).collect())
    }

    fn slot(dims: &[Dim], node: usize) -> Option<usize> {
        dims.iter().position(|d| d.node == node)
    }

    /// Adds the covers of newly filled partition `key`.
    pub(super) fn add(&mut self, dims: &[Dim], key: &Key, ks: &KeyState) {
        for (node, k) in ks.covered() {
            if let Some(m) = Self::slot(dims, node).and_then(|d| self.0.get_mut(d)) {
                m.entry(k.clone()).or_default().insert(key.clone(), ());
            }
        }
    }

    /// Removes the covers of dropped partition `key`.
    pub(super) fn remove(&mut self, dims: &[Dim], key: &Key, ks: &KeyState) {
        for (node, k) in ks.covered() {
            let Some(m) = Self::slot(dims, node).and_then(|d| self.0.get_mut(d)) else { continue };
            if let Some(parts) = m.get_mut(k) {
                parts.remove(key);
                if parts.is_empty() {
                    m.remove(k);
                }
            }
        }
    }

    /// Filled partitions holding rows of dimension `d` with the join key of `row`.
    pub(super) fn route<'a>(&'a self, dims: &[Dim], d: usize, row: &[crate::value::Value]) -> impl Iterator<Item = &'a Key> {
        let k = dims.get(d).and_then(|dim| key_of(row, &dim.cols));
        k.and_then(|k| self.0.get(d)?.get(&k)).into_iter().flat_map(Parts::keys)
    }

    /// Number of (key, partition) entries, for tests.
    #[cfg(test)]
    pub(super) fn entries(&self) -> usize {
        self.0.iter().flat_map(|m| m.values()).map(Parts::len).sum()
    }
}

/// Before a batch at `pos` is routed: a new row of a partition-keyed table that will need a
/// dimension key its filled partition (at the applied position) does not cover borrows that key's dimension rows from
/// another filled partition that covers it, instead of evicting. Exact because the lender's
/// state reflects exactly the applied position (its `filled_at` is before `pos`, so it is not a
/// fill ahead of the binlog) and nothing of this batch has been applied yet; the borrower then
/// covers the key, joins the index, and receives this batch's dimension deltas for it. Only
/// rows whose join key comes straight from the new row (the dimension's `from` is
/// partition-keyed) are handled; other misses still evict.
///
/// Both partitions are read at the applied position: each is flushed first (its held deltas
/// processed, see "Held batches" in `batches`), and one that this drops is neither borrower nor
/// lender, as if it had been dropped after the batch that made it need a refill.
pub(super) fn borrow_covers(
    shared: &super::Shared,
    views: &[Option<super::View>],
    domain: &mut super::Domain,
    batch: &crate::delta::Batch,
    pos: Position,
) {
    for c in batch.changes.iter().filter(|c| c.insert) {
        for d in 0..domain.dims.len() {
            let dim = &domain.dims[d];
            let (node, Some((from, from_cols))) = (dim.node, &dim.from) else { continue };
            let Some((_, _, kcols)) = domain.occs.iter().find(|(o, table, _)| o == from && domain.is_table(table, &c.table)) else {
                continue;
            };
            let Some(part) = key_of(&c.row, kcols) else { continue };
            let Some(k) = key_of(&c.row, from_cols) else { continue };
            super::batches::flush(shared, views, domain, &part);
            // The borrower must be at the applied position too (a fill ahead of the binlog
            // would skip this key's deltas up to its position and keep older rows).
            if !domain.parts.get(&*part).is_some_and(|p| p.ks.filled_at < pos && !p.ks.covers(node, &k)) {
                continue;
            }
            let candidates: Vec<Key> =
                domain.dim_index.0.get(d).and_then(|m| m.get(&k)).map(|ps| ps.keys().cloned().collect()).unwrap_or_default();
            let mut rows = None;
            for q in candidates {
                super::batches::flush(shared, views, domain, &q);
                if let Some(lender) = domain.parts.get(&*q).filter(|q| q.ks.filled_at < pos) {
                    rows = Some(lender.ks.dim_rows(node, &k));
                    break;
                }
            }
            let Some(rows) = rows else { continue };
            let Some(p) = domain.parts.get_mut(&*part) else { continue };
            p.ks.cover(node, k.clone());
            p.ks.seed(&domain.graph, &part, node, 1, rows);
            if let Some(m) = domain.dim_index.0.get_mut(d) {
                m.entry(k).or_default().insert(part, ());
            }
        }
    }
}

/// Dimension deltas applied while some partition of the domain was pending, by batch
/// position, shared by all pending partitions (instead of one copy per partition): a fill at
/// position P replays the entries after P together with its own buffer. Entries at or before
/// the oldest pending partition's `since` are dropped: every fill that could still be accepted
/// is at or after its `since`, so it skips them.
#[derive(Debug, Default)]
pub(super) struct DimLog(Vec<(Position, Vec<Vec<Delta>>)>);

impl DimLog {
    pub(super) fn push(&mut self, pos: Position, deltas: Vec<Vec<Delta>>) {
        self.0.push((pos, deltas));
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// Drops entries at or before `oldest` (all of them when nothing is pending).
    pub(super) fn trim(&mut self, oldest: Option<Position>) {
        match oldest {
            Some(o) => self.0.retain(|(p, _)| *p > o),
            None => self.0.clear(),
        }
    }

    /// Whether an entry after `from` and at or before `to` has a row of a dimension whose
    /// join key `ks` covers: a row the partition joins with.
    pub(super) fn touches(&self, dims: &[Dim], ks: &KeyState, from: Position, to: Position) -> bool {
        let covered: HashSet<(usize, &Key)> = ks.covered().collect();
        if covered.is_empty() {
            return false;
        }
        self.0.iter().filter(|(q, _)| from < *q && *q <= to).any(|(_, deltas)| {
            dims.iter().any(|d| {
                deltas
                    .get(d.occ)
                    .is_some_and(|rows| rows.iter().any(|(row, _)| key_of(row, &d.cols).is_some_and(|k| covered.contains(&(d.node, &k)))))
            })
        })
    }

    /// The batches after `p`, in position order: the partition's own buffered `own` entries
    /// merged with this log's (one batch is one position, so equal positions are combined
    /// into one delta set; both are indexed by occurrence).
    pub(super) fn merged_after(&self, p: Position, own: Vec<(Position, Vec<Vec<Delta>>)>) -> Vec<(Position, Vec<Vec<Delta>>)> {
        let mut all: Vec<(Position, Vec<Vec<Delta>>)> = own.into_iter().filter(|(q, _)| *q > p).collect();
        for (q, d) in self.0.iter().filter(|(q, _)| *q > p) {
            match all.iter_mut().find(|(x, _)| x == q) {
                Some((_, mine)) => {
                    for (i, rows) in d.iter().enumerate() {
                        if let Some(slot) = mine.get_mut(i) {
                            slot.extend(rows.iter().cloned());
                        }
                    }
                }
                None => all.push((*q, d.clone())),
            }
        }
        all.sort_by_key(|(q, _)| *q);
        all
    }
}

/// The state query seeding the right (dimension) side of dimension join `join`: the dimension
/// rows joined with the distinct `(partition key, join key)` pairs of the left input, each
/// followed by the partition key: `[dimension row..., key...]`. The server computes the join;
/// each dimension row comes once per partition that needs it.
pub(super) fn dim_seed_plan(join: &Node) -> Option<Node> {
    let Node::Join { left, right, on, .. } = join else { return None };
    let kpos = left.key_positions();
    let nk = kpos.len();
    let mut pre: Vec<Expr> = kpos.iter().map(|&k| Expr::Col(k)).collect();
    pre.extend(on.iter().map(|p| Expr::Col(p.0)));
    let np = pre.len();
    let pairs = Node::Distinct { input: Box::new(Node::Project { input: left.clone(), exprs: pre }) };
    let on2 = on.iter().enumerate().map(|(i, p)| (nk + i, p.1)).collect();
    let j = Node::Join { left: Box::new(pairs), right: right.clone(), on: on2, kind: JoinKind::Inner };
    let mut exprs: Vec<Expr> = (0..right.width()).map(|c| Expr::Col(np + c)).collect();
    exprs.extend((0..nk).map(Expr::Col));
    Some(Node::Project { input: Box::new(j), exprs })
}

/// Replica fill, per partition: the base deltas (by occurrence) of partition `key` from the
/// scans' answers (`scans` then dimension lookups, as [`crate::fill::DimScan`] orders them),
/// covering in `ks` every join key its rows carry. `None` if the answer has the wrong shape.
pub(super) fn replay_deltas(
    occs: &[(usize, String, Vec<usize>)],
    dims: &[Dim],
    n_occ: usize,
    key: &Key,
    answers: &[Vec<Row>],
    ks: &mut KeyState,
) -> Option<Vec<Vec<Delta>>> {
    if answers.len() != occs.len() + dims.len() {
        return None;
    }
    let mut deltas: Vec<Vec<Delta>> = vec![Vec::new(); n_occ];
    for (rows, (occ, _, kcols)) in answers.iter().zip(occs) {
        for r in rows {
            let k: Key = kcols.iter().map(|&c| r.get(c).cloned().unwrap_or(crate::value::Value::Null)).collect();
            if k == *key {
                deltas.get_mut(*occ)?.push((r.clone(), 1));
            }
        }
    }
    for (d, dim) in dims.iter().enumerate() {
        let (from, from_cols) = dim.from.as_ref()?;
        let keys: HashSet<Key> = deltas.get(*from)?.iter().filter_map(|(r, _)| key_of(r, from_cols)).collect();
        let rows: Vec<Delta> = answers
            .get(occs.len() + d)?
            .iter()
            .filter(|r| key_of(r, &dim.cols).is_some_and(|k| keys.contains(&k)))
            .map(|r| (r.clone(), 1))
            .collect();
        for k in keys {
            ks.cover(dim.node, k);
        }
        deltas.get_mut(dim.occ)?.extend(rows);
    }
    Some(deltas)
}

#[cfg(test)]
mod tests {
    use crate::fill::FillSource;
    use crate::{
        Batch, ByteSize, Catalog, ColumnSchema, Dataflow, Key, Lookup, MemReplica, MemStore, MemUpstream, Position, Row, SqlType,
        TableSchema, Value, ViewId,
    };

    const COMMENTS: &str =
        "SELECT comments.id, users.name FROM comments JOIN users ON users.id = comments.author_id WHERE comments.story_id = ?";

    fn catalog() -> Catalog {
        let i = |n: &str| ColumnSchema::new(n, SqlType::Int { bytes: 8, unsigned: false });
        let mut c = Catalog::new();
        c.add(TableSchema::new("comments", vec![i("id"), i("story_id"), i("author_id")], vec![0])).unwrap();
        c.add(TableSchema::new("users", vec![i("id"), i("name")], vec![0])).unwrap();
        c
    }

    fn row(v: &[i64]) -> Row {
        v.iter().map(|&x| Value::Int(x)).collect()
    }

    struct W {
        df: Dataflow,
        store: MemStore,
        pos: u64,
        v: ViewId,
    }

    impl W {
        fn new() -> W {
            let mut df = Dataflow::new(catalog(), ByteSize(1 << 30));
            let v = df.install_sql(COMMENTS).unwrap();
            let mut w = W { df, store: MemStore::new(), pos: 0, v };
            w.write(|b| {
                for u in 1..=3 {
                    b.insert("users", row(&[u, 100 + u]));
                }
                b.insert("comments", row(&[1, 10, 1]));
                b.insert("comments", row(&[2, 10, 2]));
                b.insert("comments", row(&[3, 11, 1]));
            });
            w
        }
        fn write(&mut self, f: impl FnOnce(&mut Batch)) {
            self.pos += 1;
            let mut b = Batch::new(Position(self.pos));
            f(&mut b);
            self.store.apply(&b);
            self.df.apply(&b).unwrap();
        }
        fn read(&mut self, story: i64, replica: bool) -> Vec<Row> {
            let r = self.df.reader(self.v).unwrap();
            if let Lookup::Hit(rows) = r.lookup(&[Value::Int(story)]).unwrap() {
                let mut rows: Vec<Row> = rows.iter().map(|r| Row::from(r.to_vec())).collect();
                rows.sort();
                return rows;
            }
            if replica {
                self.df.run_fills(&mut MemReplica { store: &self.store }).unwrap();
            } else {
                self.df.run_fills(&mut MemUpstream { store: &self.store }).unwrap();
            }
            match r.lookup(&[Value::Int(story)]).unwrap() {
                Lookup::Hit(rows) => {
                    let mut rows: Vec<Row> = rows.iter().map(|r| Row::from(r.to_vec())).collect();
                    rows.sort();
                    rows
                }
                Lookup::Miss(_) => panic!("miss after fill"),
            }
        }
        fn entries(&self) -> usize {
            self.df.domains.iter().flatten().map(|d| d.dim_index.entries()).sum()
        }
        fn filled(&self, story: i64) -> bool {
            let k: Key = vec![Value::Int(story)].into();
            self.df.filled_keys(self.v).contains(&k)
        }
    }

    #[test]
    fn dim_log_merges_by_position_and_trims() {
        use super::DimLog;
        let d = |occ: usize, v: i64| {
            let mut x = vec![Vec::new(); 2];
            x[occ].push((row(&[v]), 1));
            x
        };
        let mut log = DimLog::default();
        for p in 1..=4 {
            log.push(Position(p), d(1, p as i64));
        }
        let own = vec![(Position(2), d(0, 20)), (Position(3), d(0, 30)), (Position(5), d(0, 50))];
        let m = log.merged_after(Position(2), own);
        let positions: Vec<u64> = m.iter().map(|(p, _)| p.0).collect();
        assert_eq!(positions, vec![3, 4, 5]);
        assert_eq!(m[0].1, vec![vec![(row(&[30]), 1)], vec![(row(&[3]), 1)]], "same batch, one delta set");
        log.trim(Some(Position(3)));
        assert_eq!(log.len(), 1);
        log.trim(None);
        assert_eq!(log.len(), 0);
    }

    #[test]
    fn index_follows_fills_dimension_deltas_and_evictions() {
        for replica in [false, true] {
            let mut w = W::new();
            assert_eq!(w.entries(), 0);
            assert_eq!(w.read(10, replica), vec![row(&[1, 101]), row(&[2, 102])]);
            assert_eq!(w.read(11, replica), vec![row(&[3, 101])]);
            // user 1 -> {10, 11}, user 2 -> {10}.
            assert_eq!(w.entries(), 3);
            let bytes_before = w.df.stats(w.v).unwrap().bytes;
            // A dimension update reaches both partitions holding user 1, and only those.
            w.write(|b| {
                b.update("users", row(&[1, 101]), row(&[1, 201]));
            });
            assert_eq!(w.read(10, replica), vec![row(&[1, 201]), row(&[2, 102])]);
            assert_eq!(w.read(11, replica), vec![row(&[3, 201])]);
            // Changing a dimension row's join key moves it out of the partitions covering
            // the old key (the new key, 5, is covered by none).
            w.write(|b| {
                b.update("users", row(&[2, 102]), row(&[5, 102]));
            });
            assert_eq!(w.read(10, replica), vec![row(&[1, 201])]);
            assert!(w.filled(10), "a dimension delta never evicts");
            // ... and back.
            w.write(|b| {
                b.update("users", row(&[5, 102]), row(&[2, 302]));
            });
            assert_eq!(w.read(10, replica), vec![row(&[1, 201]), row(&[2, 302])]);
            assert_eq!(w.entries(), 3);
            assert_eq!(w.df.stats(w.v).unwrap().bytes, bytes_before, "same rows, same bytes");
            // Evicting a partition removes its index entries; the other keeps its own.
            assert!(w.df.evict(w.v, &vec![Value::Int(10)].into()));
            assert_eq!(w.entries(), 1);
            w.write(|b| {
                b.update("users", row(&[1, 201]), row(&[1, 301]));
            });
            assert_eq!(w.read(11, replica), vec![row(&[3, 301])]);
            w.df.evict_all();
            assert_eq!(w.entries(), 0);
        }
    }

    #[test]
    fn a_row_needing_an_uncovered_dimension_key_evicts_its_partition() {
        for replica in [false, true] {
            let mut w = W::new();
            assert_eq!(w.read(10, replica), vec![row(&[1, 101]), row(&[2, 102])]);
            // A new comment by a covered author is applied in place.
            w.write(|b| {
                b.insert("comments", row(&[4, 10, 2]));
            });
            assert!(w.filled(10));
            assert_eq!(w.read(10, replica), vec![row(&[1, 101]), row(&[2, 102]), row(&[4, 102])]);
            // A comment by user 3, whom partition 10 does not hold: evicted, index cleaned.
            w.write(|b| {
                b.insert("comments", row(&[5, 10, 3]));
            });
            assert!(!w.filled(10));
            assert_eq!(w.entries(), 0);
            // Refilled on demand, now covering user 3.
            assert_eq!(w.read(10, replica), vec![row(&[1, 101]), row(&[2, 102]), row(&[4, 102]), row(&[5, 103])]);
            assert_eq!(w.entries(), 3);
            // A comment with a NULL author never joins and needs no dimension row.
            w.write(|b| {
                b.insert("comments", vec![Value::Int(6), Value::Int(10), Value::Null].into());
            });
            assert!(w.filled(10));
        }
    }

    #[test]
    fn a_missing_dimension_key_is_borrowed_from_a_partition_that_holds_it() {
        for replica in [false, true] {
            let mut w = W::new();
            assert_eq!(w.read(10, replica), vec![row(&[1, 101]), row(&[2, 102])]);
            assert_eq!(w.read(11, replica), vec![row(&[3, 101])]);
            assert_eq!(w.entries(), 3);
            // Story 11 does not hold user 2, story 10 does: borrowed, no eviction; the same
            // batch's rename of user 2 reaches both.
            w.write(|b| {
                b.insert("comments", row(&[6, 11, 2]));
                b.update("users", row(&[2, 102]), row(&[2, 202]));
            });
            assert!(w.filled(11), "borrowed, not evicted");
            assert_eq!(w.entries(), 4);
            assert_eq!(w.read(11, replica), vec![row(&[3, 101]), row(&[6, 202])]);
            assert_eq!(w.read(10, replica), vec![row(&[1, 101]), row(&[2, 202])]);
            // Later dimension deltas for the borrowed key reach the borrower through the index.
            w.write(|b| {
                b.update("users", row(&[2, 202]), row(&[2, 302]));
            });
            assert_eq!(w.read(11, replica), vec![row(&[3, 101]), row(&[6, 302])]);
            // Evicting the lender does not disturb the borrower.
            w.df.evict(w.v, &vec![Value::Int(10)].into());
            w.write(|b| {
                b.update("users", row(&[2, 302]), row(&[2, 402]));
            });
            assert_eq!(w.read(11, replica), vec![row(&[3, 101]), row(&[6, 402])]);
        }
    }

    #[test]
    fn a_partition_filled_ahead_of_the_binlog_never_borrows_older_rows() {
        let sql = "SELECT comments.id, users.name FROM comments JOIN users ON users.id = comments.author_id WHERE comments.story_id = ? AND comments.id > 100";
        let mut df = Dataflow::new(catalog(), ByteSize(1 << 30));
        let v = df.install_sql(sql).unwrap();
        let mut store = MemStore::new();
        let mut batches: Vec<Batch> = Vec::new();
        fn write(store: &mut MemStore, batches: &mut Vec<Batch>, f: &dyn Fn(&mut Batch)) {
            let mut b = Batch::new(Position(batches.len() as u64 + 1));
            f(&mut b);
            store.apply(&b);
            batches.push(b);
        }
        write(&mut store, &mut batches, &|b| {
            for u in 1..=3 {
                b.insert("users", row(&[u, 100 + u]));
            }
            b.insert("comments", row(&[101, 10, 1]));
            b.insert("comments", row(&[102, 11, 2]));
        });
        df.apply(&batches[0]).unwrap();
        let r = df.reader(v).unwrap();
        let _ = r.lookup(&[Value::Int(11)]);
        df.run_fills(&mut MemUpstream { store: &store }).unwrap();
        // Upstream moves on: a filtered-out comment by user 2 on story 10, then a rename.
        write(&mut store, &mut batches, &|b| {
            b.insert("comments", row(&[2, 10, 2]));
        });
        write(&mut store, &mut batches, &|b| {
            b.update("users", row(&[2, 102]), row(&[2, 502]));
        });
        // Story 10 is filled at position 3, ahead of the binlog (applied: 1); it covers user 1.
        let _ = r.lookup(&[Value::Int(10)]);
        df.run_fills(&mut MemUpstream { store: &store }).unwrap();
        df.apply(&batches[1]).unwrap();
        df.apply(&batches[2]).unwrap();
        write(&mut store, &mut batches, &|b| {
            b.insert("comments", row(&[103, 10, 2]));
        });
        df.apply(&batches[3]).unwrap();
        match r.lookup(&[Value::Int(10)]).unwrap() {
            Lookup::Hit(rows) => {
                let mut rows: Vec<Row> = rows.iter().map(|r| Row::from(r.to_vec())).collect();
                rows.sort();
                assert_eq!(rows, vec![row(&[101, 101]), row(&[103, 502])]);
            }
            Lookup::Miss(_) => panic!("story 10 should have borrowed user 2, not been evicted"),
        }
    }

    #[test]
    fn a_fill_older_than_the_eviction_is_rejected() {
        let mut w = W::new();
        let r = w.df.reader(w.v).unwrap();
        assert!(matches!(r.lookup(&[Value::Int(10)]).unwrap(), Lookup::Miss(_)));
        let reqs = w.df.fill_requests();
        let old = MemUpstream { store: &w.store }.fill(&reqs[0]).unwrap();
        w.df.complete_fill(old);
        // Evicted by a comment needing user 3; a fill answered before that is too old.
        let before = MemReplica { store: &w.store }.fill(&reqs[0]).unwrap();
        w.write(|b| {
            b.insert("comments", row(&[5, 10, 3]));
        });
        assert!(!w.filled(10));
        assert!(matches!(r.lookup(&[Value::Int(10)]).unwrap(), Lookup::Miss(_)));
        let reqs = w.df.fill_requests();
        let mut stale = before;
        stale.ticket = reqs[0].ticket;
        assert_eq!(w.df.complete_fill(stale).stale, 1);
        assert!(!w.filled(10));
    }

    #[test]
    fn a_replica_source_that_ignores_dimension_scans_is_rejected() {
        let mut w = W::new();
        let r = w.df.reader(w.v).unwrap();
        let _ = r.lookup(&[Value::Int(10)]);
        let req = w.df.fill_requests().remove(0);
        assert_eq!(req.dim_scans.len(), 1);
        let mut resp = MemReplica { store: &w.store }.fill(&req).unwrap();
        if let crate::FillData::BaseRows(rows) = &mut resp.data {
            rows.truncate(req.scans.len());
        }
        assert_eq!(w.df.complete_fill(resp).stale, 1);
        assert!(!w.filled(10));
    }
}
