//! [`Small`]: the map of a partition's operator state, a vector while it holds a few entries and
//! a hash table past that; and [`OneOrMany`], a slice of one held inline.
//!
//! Why: most maps of a partition hold one entry or a handful. A point read's reader holds its one
//! row, a story's join sides hold the one story and its one bucket of votes, an aggregate keyed
//! by the partition has one group. A hash table of one entry allocates four buckets and a group of
//! control bytes (a story's group: 384 bytes for a 72-byte `Group`) and carries its 16-byte
//! hasher inline; a vector of one allocates one entry. docs/decisions.md ("memory per cached
//! row") has the measurements.
//!
//! Invariants: equality is the key type's own (`Borrow` + `Eq`, exactly what a hash map looks
//! up with), so a map answers the same in either form; it holds at most [`FEW`] entries in the
//! vector, so a linear search is bounded whatever the keys (no collisions to craft: past that the
//! keys go to a [`Map`], seeded as every map of the writer is); it never goes back from the table
//! to the vector (a partition that grew once is likely to grow again, as hash maps do not shrink
//! either). Iteration order is insertion order in the vector and the table's order after.

use std::borrow::Borrow;
use std::hash::Hash;

use crate::hash::Map;
use crate::mem::{heap_block, table_bytes};

/// A slice whose single element, the common case, is held inline: a boxed slice of one is a
/// block of its own (32 bytes or more) where one is needed per partition (a reader's rows, a
/// view's weight: nearly every domain has one view). Derefs to the slice.
#[derive(Debug)]
pub enum OneOrMany<T> {
    One(T),
    Many(Box<[T]>),
}

impl<T: Default> OneOrMany<T> {
    /// `n` default elements.
    pub fn new(n: usize) -> OneOrMany<T> {
        if n == 1 { OneOrMany::One(T::default()) } else { OneOrMany::Many((0..n).map(|_| T::default()).collect()) }
    }
}

impl<T> OneOrMany<T> {
    /// The boxed slice's block, if there is one (not what the elements hold).
    pub fn heap_bytes(&self) -> usize {
        match self {
            OneOrMany::One(_) => 0,
            OneOrMany::Many(all) => heap_block(std::mem::size_of_val::<[T]>(all)),
        }
    }
}

impl<T> std::ops::Deref for OneOrMany<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            OneOrMany::One(one) => std::slice::from_ref(one),
            OneOrMany::Many(all) => all,
        }
    }
}

impl<T> std::ops::DerefMut for OneOrMany<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            OneOrMany::One(one) => std::slice::from_mut(one),
            OneOrMany::Many(all) => all,
        }
    }
}

/// Most entries kept in the vector: past this a lookup hashes instead of comparing each key.
pub const FEW: usize = 8;

/// A map of few entries: see the module's header.
#[derive(Debug)]
pub enum Small<K, V> {
    /// Up to [`FEW`] entries, searched in order.
    Few(Vec<(K, V)>),
    /// More, in a hash table (boxed: the common, small form stays three words).
    Many(Box<Map<K, V>>),
}

impl<K, V> Default for Small<K, V> {
    fn default() -> Self {
        Small::Few(Vec::new())
    }
}

impl<K: Hash + Eq, V> Small<K, V> {
    pub fn len(&self) -> usize {
        match self {
            Small::Few(v) => v.len(),
            Small::Many(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get<Q: ?Sized + Hash + Eq>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        match self {
            Small::Few(v) => v.iter().find(|(k, _)| k.borrow() == key).map(|(_, v)| v),
            Small::Many(m) => m.get(key),
        }
    }

    /// The entry under `key`, with the key as the map holds it.
    pub fn get_key_value<Q: ?Sized + Hash + Eq>(&self, key: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
    {
        match self {
            Small::Few(v) => v.iter().find(|(k, _)| k.borrow() == key).map(|(k, v)| (k, v)),
            Small::Many(m) => m.get_key_value(key),
        }
    }

    pub fn get_mut<Q: ?Sized + Hash + Eq>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        match self {
            Small::Few(v) => v.iter_mut().find(|(k, _)| (*k).borrow() == key).map(|(_, v)| v),
            Small::Many(m) => m.get_mut(key),
        }
    }

    pub fn contains_key<Q: ?Sized + Hash + Eq>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.get(key).is_some()
    }

    /// Inserts `value` under `key`; returns the value it replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        if let Some(old) = self.get_mut(&key) {
            return Some(std::mem::replace(old, value));
        }
        self.push_new(key, value);
        None
    }

    /// The value under `key`, inserted from `make` if there was none.
    pub fn or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let at = match self {
            Small::Few(v) => v.iter().position(|(k, _)| *k == key),
            Small::Many(m) => return m.entry(key).or_insert_with(make),
        };
        match at {
            Some(i) => self.few_at(i),
            None => self.push_new(key, make()),
        }
    }

    pub fn remove<Q: ?Sized + Hash + Eq>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        match self {
            Small::Few(v) => {
                let i = v.iter().position(|(k, _)| k.borrow() == key)?;
                Some(v.swap_remove(i).1)
            }
            Small::Many(m) => m.remove(key),
        }
    }

    pub fn iter(&self) -> Iter<'_, K, V> {
        match self {
            Small::Few(v) => Iter::Few(v.iter()),
            Small::Many(m) => Iter::Many(m.iter()),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// The bytes the allocator handed out for the map's own storage (the vector's block or the
    /// table's), not what its keys and values point to.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Small::Few(v) => heap_block(v.capacity() * std::mem::size_of::<(K, V)>()),
            Small::Many(m) => heap_block(std::mem::size_of::<Map<K, V>>()) + table_bytes(m.capacity(), std::mem::size_of::<(K, V)>()),
        }
    }

    fn few_at(&mut self, i: usize) -> &mut V {
        match self {
            Small::Few(v) => &mut v[i].1,
            Small::Many(_) => unreachable!("few_at is called with an index found in the vector"),
        }
    }

    /// Adds an entry whose key is not in the map. The vector grows to exactly 1, 2, 4 and 8
    /// entries (a `Vec`'s first push would reserve four), then moves to a table.
    fn push_new(&mut self, key: K, value: V) -> &mut V {
        if let Small::Few(v) = self
            && v.len() == FEW
        {
            let mut m: Map<K, V> = Map::default();
            m.reserve(FEW + 1);
            m.extend(v.drain(..));
            *self = Small::Many(Box::new(m));
        }
        match self {
            Small::Few(v) => {
                if v.len() == v.capacity() {
                    v.reserve_exact(v.len().max(1));
                }
                v.push((key, value));
                let last = v.len() - 1;
                &mut v[last].1
            }
            Small::Many(m) => m.entry(key).or_insert(value),
        }
    }
}

/// Iterator over a [`Small`]'s entries.
pub enum Iter<'a, K, V> {
    Few(std::slice::Iter<'a, (K, V)>),
    Many(std::collections::hash_map::Iter<'a, K, V>),
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);
    fn next(&mut self) -> Option<(&'a K, &'a V)> {
        match self {
            Iter::Few(i) => i.next().map(|(k, v)| (k, v)),
            Iter::Many(i) => i.next(),
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Few(i) => i.size_hint(),
            Iter::Many(i) => i.size_hint(),
        }
    }
}

impl<'a, K: Hash + Eq, V> IntoIterator for &'a Small<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = Iter<'a, K, V>;
    fn into_iter(self) -> Iter<'a, K, V> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Every operation answers as a hash map does, across the move from vector to table.
    #[test]
    fn answers_as_a_hash_map_does() {
        let mut small: Small<u64, i64> = Small::default();
        let mut model: HashMap<u64, i64> = HashMap::new();
        // A small linear congruential sequence: keys 0..12 so that the map crosses FEW both ways.
        let mut x = 7u64;
        for step in 0..2_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = (x >> 33) % 12;
            match step % 4 {
                0 | 1 => assert_eq!(small.insert(key, step), model.insert(key, step)),
                2 => assert_eq!(small.remove(&key), model.remove(&key)),
                _ => {
                    *small.or_insert_with(key, || -1) += 1;
                    *model.entry(key).or_insert(-1) += 1;
                }
            }
            assert_eq!(small.len(), model.len());
            for k in 0..12 {
                assert_eq!(small.get(&k), model.get(&k));
                assert_eq!(small.contains_key(&k), model.contains_key(&k));
            }
            let mut seen: Vec<(u64, i64)> = small.iter().map(|(k, v)| (*k, *v)).collect();
            seen.sort();
            let mut want: Vec<(u64, i64)> = model.iter().map(|(k, v)| (*k, *v)).collect();
            want.sort();
            assert_eq!(seen, want);
        }
    }

    /// The vector grows to exactly 1, 2, 4 and 8 entries and the ninth moves the map to a table;
    /// the bytes it reports are its allocation's.
    #[test]
    fn grows_exactly_then_moves_to_a_table() {
        let mut m: Small<u64, u64> = Small::default();
        assert_eq!(m.heap_bytes(), 0);
        let mut caps = Vec::new();
        for k in 0..FEW as u64 {
            m.insert(k, k);
            let Small::Few(v) = &m else { panic!("a table at {k}") };
            caps.push(v.capacity());
        }
        assert_eq!(caps, [1, 2, 4, 4, 8, 8, 8, 8]);
        assert_eq!(m.heap_bytes(), heap_block(8 * 16));
        m.insert(FEW as u64, 0);
        assert!(matches!(m, Small::Many(_)));
        assert_eq!(m.len(), FEW + 1);
        assert!(m.heap_bytes() > heap_block(8 * 16));
        // Emptied, it stays a table (as a hash map keeps its capacity).
        for k in 0..=FEW as u64 {
            m.remove(&k);
        }
        assert!(m.is_empty() && matches!(m, Small::Many(_)));
    }

    /// Borrowed lookups use the key type's own equality: a boxed slice found by a slice.
    #[test]
    fn looks_up_by_borrowed_keys() {
        let mut m: Small<Box<[u32]>, u8> = Small::default();
        m.insert(vec![1, 2].into(), 1);
        m.insert(vec![3].into(), 2);
        assert_eq!(m.get(&[1u32, 2][..]), Some(&1));
        assert_eq!(m.get(&[1u32][..]), None);
        assert_eq!(m.remove(&[3u32][..]), Some(2));
        assert_eq!(m.len(), 1);
    }
}
