//! Publication to readers: rebuilding a filled partition's reader entries after the writer
//! changed it (swapping one entry per view, so a read sees a batch's effect whole or not at
//! all), and dropping a partition together with its entries and dimension-index entries (the
//! only place parts are removed; see "Descendant eviction" in `eviction`).

use std::sync::atomic::Ordering as AtOrd;

use super::cache::ENTRY_BYTES;
use super::reader::{Entry, EntryKey, Shared};
use super::{Domain, View, view_counters};
use crate::delta::Position;
use crate::ops::{Key, sort_shared_rows};
use crate::value::{Rows, SharedRow, exact_values_cmp};

pub(super) fn drop_part(shared: &Shared, views: &[Option<View>], domain: &mut Domain, key: &Key) -> bool {
    // Deltas held for it are dropped with it: it is a hole from here on.
    domain.unprocessed.remove(key);
    let Some(part) = domain.parts.remove(&**key) else { return false };
    domain.dim_index.remove(&domain.dims, key, &part.ks);
    for v in domain.views.iter().flatten() {
        // An entry the budget evicted is gone already: its weight leaves the view's bytes
        // when the writer drains the notice (`Dataflow::drain_evictions`).
        let weight = shared.cache.remove(&EntryKey::of(v.0, key));
        if let Some(c) = view_counters(views, v) {
            c.keys.fetch_sub(1, AtOrd::Relaxed);
            c.bytes.fetch_sub(u64::from(weight), AtOrd::Relaxed);
            c.evictions.fetch_add(1, AtOrd::Relaxed);
        }
    }
    true
}

/// A partition's share of the domain's map of partitions: its entry and control byte at the
/// table's mean load (a hashbrown table is between 7/16 and 7/8 full), a constant so that a
/// partition's weight does not depend on how many others were there when it was published.
const PARTS_SLOT: usize = (std::mem::size_of::<(super::PartKey, super::Part)>() + 1) * 3 / 2;

/// Rebuilds and swaps in the reader entries of one filled partition, one per live view. The
/// partition's bytes (its state, and what it costs whatever its rows: its slot in the domain's
/// map, its key, its tables) are split evenly over the entries so that the budget counts them
/// once; each entry adds its own rows and what the reader cache keeps for it. `applied`: what
/// the writer has applied; a partition filled at a later position is marked
/// [`ahead`](super::reader::Entry::ahead) until it is republished at or past it.
pub(super) fn publish(shared: &Shared, views: &[Option<View>], domain: &mut Domain, key: &Key, applied: Position) {
    let Some(part) = domain.parts.get_mut(&**key) else { return };
    let ahead = part.ks.filled_at > applied;
    if ahead {
        domain.ahead.push((part.ks.filled_at, key.clone()));
    }
    let live = domain.views.iter().flatten().count().max(1);
    let held = part.ks.bytes() + part.ks.fixed_bytes() + PARTS_SLOT + super::PartKey::heap_bytes(key);
    let state_share = held / live;
    for (r, v) in domain.views.iter().enumerate() {
        let Some(v) = v else { continue };
        let Some(view) = views.get(v.0 as usize).and_then(Option::as_ref) else { continue };
        let q = &view.q;
        let width = q.published;
        let rows: Vec<SharedRow> = if q.order.is_empty() {
            // No ORDER BY: SQL leaves the order to the server, which returns rows in the order
            // of the index it reads, usually the primary key's. Publishing rows sorted by their
            // columns as an index sorts them (text by its collation, NULL first), then exactly,
            // gives that order for the common `SELECT id, ...` and `SELECT s, id ... WHERE s =
            // ?` and a stable one otherwise, instead of the order of hash maps.
            let mut rows = part.ks.reader_rows_cut(r, width);
            rows.sort_by(index_row_cmp);
            rows
        } else {
            // Sorting may need hidden ORDER BY columns: sort full rows, then cut.
            let mut rows = part.ks.reader_rows_cut(r, usize::MAX);
            sort_shared_rows(&mut rows, &q.order);
            rows.iter().map(|r| r.cut(width)).collect()
        };
        // The entry's slice of rows (two rows or more have one), and the rows that are
        // copies: a row as wide as the state's is the state's own, counted with the state.
        let copies = if part.ks.reader_width(r) > width { rows.iter().map(SharedRow::heap_bytes).sum::<usize>() } else { 0 };
        let rows = Rows::from(rows);
        let published = rows.heap_bytes() + copies;
        let ek = EntryKey::of(v.0, key);
        let entry = ek.heap_bytes() + ENTRY_BYTES;
        let weight = u32::try_from(state_share + published + entry).unwrap_or(u32::MAX);
        let entry = Entry { rows, weight, generation: part.generation, ahead };
        // The view's bytes are its entries' weights, as the cache holds them.
        let old = shared.cache.insert(ek, entry);
        view.counters.bytes.fetch_add(u64::from(weight), AtOrd::Relaxed);
        view.counters.bytes.fetch_sub(u64::from(old), AtOrd::Relaxed);
    }
}

/// Rows as an index on their columns orders them: column by column in SQL order (text under
/// its collation, NULL first), then exactly, so that rows equal under the collation keep one
/// order whichever arrived first.
fn index_row_cmp(a: &SharedRow, b: &SharedRow) -> std::cmp::Ordering {
    a.iter().zip(b).map(|(x, y)| x.cmp_total(y)).find(|o| o.is_ne()).unwrap_or_else(|| exact_values_cmp(a, b))
}
