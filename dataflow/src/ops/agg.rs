//! Aggregation and DISTINCT state of one partition: accumulators (COUNT, SUM, AVG, MIN,
//! MAX, with exact deletes), groups that keep the spelling their rows still have, and the
//! [`KeyState`] steps that turn deltas into group changes. The invariants are the operators'
//! (see the parent module): `+w` then `-w` restores a group exactly, bytes included.

use std::collections::BTreeMap;
use std::hash::Hash;

use super::{Delta, Key, KeyState, NodeState, SLOT, node_state};
use crate::expr::{div_dec, is_true};
use crate::hash::Map;
use crate::plan::{AggKind, AggSpec};
use crate::small::Small;
use crate::value::{Decimal, Row, Value, row_bytes};

/// Sum/average accumulator: exact part (integers and decimals) and float part kept apart so
/// that deleting values is exact whenever the inputs are exact.
#[derive(Clone, Debug, Default)]
pub(super) struct SumAcc {
    exact: i128,
    scale: u8,
    float: f64,
    n_float: i64,
    n: i64,
    overflow: bool,
}

impl SumAcc {
    pub(super) fn add(&mut self, v: &Value, w: i64) {
        let int = match v {
            Value::Null => return,
            Value::Int(i) => Some(*i as i128),
            Value::UInt(u) => Some(*u as i128),
            Value::Year(y) => Some(*y as i128),
            Value::Bit(b) => Some(*b as i128),
            _ => None,
        };
        self.n += w;
        if let Some(i) = int {
            let scaled = 10i128.checked_pow(self.scale as u32).and_then(|p| i.checked_mul(p));
            self.add_exact(scaled, w);
        } else if let Value::Decimal(d) = v {
            if d.scale() > self.scale {
                let up = 10i128.checked_pow((d.scale() - self.scale) as u32);
                match up.and_then(|p| self.exact.checked_mul(p)) {
                    Some(e) => self.exact = e,
                    None => self.overflow = true,
                }
                self.scale = d.scale();
            }
            self.add_exact(d.rescaled(self.scale), w);
        } else {
            self.float += v.to_f64().unwrap_or(0.0) * w as f64;
            self.n_float += w;
            if self.n_float == 0 {
                self.float = 0.0;
            }
        }
    }
    pub(super) fn add_exact(&mut self, x: Option<i128>, w: i64) {
        match x.and_then(|x| x.checked_mul(w as i128)).and_then(|x| self.exact.checked_add(x)) {
            Some(e) => self.exact = e,
            None => self.overflow = true,
        }
    }
    pub(super) fn sum(&self) -> Value {
        if self.n == 0 || self.overflow {
            return Value::Null;
        }
        if self.n_float != 0 {
            return Value::Double(self.exact as f64 / 10f64.powi(self.scale as i32) + self.float);
        }
        Decimal::new(self.exact, self.scale).map(Value::Decimal).unwrap_or(Value::Null)
    }
    pub(super) fn avg(&self) -> Value {
        if self.n == 0 || self.overflow {
            return Value::Null;
        }
        if self.n_float != 0 {
            let total = self.exact as f64 / 10f64.powi(self.scale as i32) + self.float;
            return Value::Double(total / self.n as f64);
        }
        div_dec(self.exact, self.scale, self.n as i128, 0)
    }
}

#[derive(Clone, Debug)]
pub(super) enum Acc {
    Count(i64),
    Sum(SumAcc),
    Avg(SumAcc),
    Min(BTreeMap<Spelled, i64>),
    Max(BTreeMap<Spelled, i64>),
    Distinct(Map<Value, i64>),
}

/// A MIN or MAX argument, ordered as SQL orders values and, among values SQL finds equal but
/// spelled otherwise (`'a'`, `'A'` and `'a '` under a case- and pad-insensitive collation), by
/// their exact spelling. So each spelling is counted apart, and the answer is always a
/// spelling some row has: when the row that had the shown one goes, another row's shows.
/// Among equal spellings the server shows the first its plan reads, which a view cannot know;
/// a view shows the least (MIN) or greatest (MAX) by bytes.
#[derive(Clone, Debug)]
pub(super) struct Spelled(Value);

impl Ord for Spelled {
    fn cmp(&self, o: &Spelled) -> std::cmp::Ordering {
        self.0.cmp(&o.0).then_with(|| self.0.exact_cmp(&o.0))
    }
}
impl PartialOrd for Spelled {
    fn partial_cmp(&self, o: &Spelled) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl PartialEq for Spelled {
    fn eq(&self, o: &Spelled) -> bool {
        self.cmp(o).is_eq()
    }
}
impl Eq for Spelled {}

/// Adds `w` to `k`'s count in `m`, dropping it at zero; returns the change in keys held (1, 0 or -1).
pub(super) fn add_count<K: Ord>(m: &mut BTreeMap<K, i64>, k: K, w: i64) -> isize {
    match m.entry(k) {
        std::collections::btree_map::Entry::Vacant(e) => {
            e.insert(w);
            1
        }
        std::collections::btree_map::Entry::Occupied(mut e) => {
            *e.get_mut() += w;
            if *e.get() == 0 {
                e.remove();
                return -1;
            }
            0
        }
    }
}

impl Acc {
    pub(super) fn new(kind: AggKind) -> Acc {
        match kind {
            AggKind::CountStar | AggKind::CountNotNull => Acc::Count(0),
            AggKind::Sum => Acc::Sum(SumAcc::default()),
            AggKind::Avg => Acc::Avg(SumAcc::default()),
            AggKind::Min => Acc::Min(BTreeMap::new()),
            AggKind::Max => Acc::Max(BTreeMap::new()),
            AggKind::CountDistinct => Acc::Distinct(Map::default()),
        }
    }
    /// Applies `(row, w)`; returns the change in stored bytes.
    pub(super) fn apply(&mut self, spec: &AggSpec, row: &[Value], w: i64) -> isize {
        let arg = row.get(spec.arg).unwrap_or(&Value::Null);
        match self {
            Acc::Count(n) => {
                if spec.kind == AggKind::CountStar || is_true(arg) == Some(true) {
                    *n += w;
                }
                0
            }
            Acc::Sum(s) | Acc::Avg(s) => {
                s.add(arg, w);
                0
            }
            Acc::Min(m) | Acc::Max(m) => {
                if arg.is_null() {
                    return 0;
                }
                add_count(m, Spelled(arg.clone()), w) * (arg.bytes() + SLOT) as isize
            }
            Acc::Distinct(m) => {
                if arg.is_null() {
                    return 0;
                }
                let c = m.entry(arg.clone()).or_insert(0);
                let was = *c;
                *c += w;
                if *c == 0 {
                    m.remove(arg);
                    -((arg.bytes() + SLOT) as isize)
                } else if was == 0 {
                    (arg.bytes() + SLOT) as isize
                } else {
                    0
                }
            }
        }
    }
    pub(super) fn output(&self) -> Value {
        match self {
            Acc::Count(n) => Value::Int(*n),
            Acc::Sum(s) => s.sum(),
            Acc::Avg(s) => s.avg(),
            Acc::Min(m) => m.keys().next().map_or(Value::Null, |v| v.0.clone()),
            Acc::Max(m) => m.keys().next_back().map_or(Value::Null, |v| v.0.clone()),
            Acc::Distinct(m) => Value::Int(m.len() as i64),
        }
    }
}

/// One group of an aggregate.
///
/// Groups are found by SQL equality, so under a case- or pad-insensitive collation rows
/// spelled differently (`'Story'`, `'STORY'`, `'Story '`) share a group. The group outputs one
/// spelling that its rows still have: `spellings` counts rows per exact spelling of the group
/// columns, and when the output spelling's last row goes (a title changed only in case), the
/// output moves to a remaining one and the change is emitted like any other.
///
/// The shown spelling is an index into `spellings`, not a copy of it (a story's group columns
/// are its id, title and URL: a copy was ~180 bytes per group). A group with no spelling yet (a
/// global aggregate's group before its first row) shows its key, and the last spelling is kept,
/// at zero rows, while nothing replaces it, so the output does not change spelling when a
/// group's rows all go. A spelling exactly the group's key (the first row's, so nearly every
/// group's only one) is held as the empty row, which stands for the key: the key's values are
/// not held twice.
#[derive(Clone, Debug, Default)]
pub(super) struct Group {
    pub(super) spellings: Vec<(Row, i64)>,
    shown: usize,
    pub(super) rows: i64,
    pub(super) accs: Vec<Acc>,
}

pub(super) fn exact_eq(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.exact_cmp(y) == std::cmp::Ordering::Equal)
}

impl Group {
    /// A group without rows, with these accumulators.
    pub(super) fn new(accs: Vec<Acc>) -> Group {
        Group { accs, ..Group::default() }
    }

    /// The spelling of the group columns the output shows; `key` is the group's key in its map.
    pub(super) fn values<'a>(&'a self, key: &'a [Value]) -> &'a [Value] {
        self.spellings.get(self.shown).map_or(key, |(s, _)| if s.is_empty() { key } else { s })
    }

    /// The bytes its spellings hold (given back with the group).
    pub(super) fn spelling_bytes(&self) -> isize {
        self.spellings.iter().map(|(s, _)| row_bytes(s) as isize).sum()
    }

    /// Counts `w` rows spelled `spelling`, which `is_key` says is exactly the group's key in
    /// its map (see [`spelled_as_key`]); returns the change in bytes held.
    pub(super) fn count_spelling(&mut self, spelling: &[Value], is_key: bool, w: i64) -> isize {
        // The key's own spelling is held as the empty row.
        let stored: &[Value] = if is_key { &[] } else { spelling };
        match self.spellings.iter_mut().find(|(s, _)| exact_eq(s, stored)) {
            Some((_, n)) => {
                *n += w;
                0
            }
            None => {
                self.spellings.push((stored.into(), w));
                row_bytes(stored) as isize
            }
        }
    }

    /// Drops spellings without rows and keeps the output on one that has rows; returns the
    /// change in bytes held.
    pub(super) fn settle_spellings(&mut self) -> isize {
        if !self.spellings.iter().any(|(_, n)| *n > 0) {
            // Nothing has rows: keep only the shown spelling, at zero rows (as a dropped
            // spelling would start again), which the output goes on showing.
            let mut bytes = 0isize;
            let mut i = 0;
            let shown = self.shown;
            self.spellings.retain_mut(|(s, n)| {
                let keep = i == shown;
                i += 1;
                if keep {
                    *n = 0;
                } else {
                    bytes -= row_bytes(s) as isize;
                }
                keep
            });
            self.shown = 0;
            return bytes;
        }
        let shown_has_rows = self.spellings.get(self.shown).is_some_and(|(_, n)| *n > 0);
        // The shown spelling's index among the kept ones: the kept spellings before it.
        let shown = self.spellings.iter().take(self.shown).filter(|(_, n)| *n > 0).count();
        let mut bytes = 0isize;
        self.spellings.retain(|(s, n)| {
            if *n <= 0 {
                bytes -= row_bytes(s) as isize;
            }
            *n > 0
        });
        self.shown = if shown_has_rows { shown } else { 0 };
        bytes
    }
}

impl KeyState {
    pub(super) fn aggregate(&mut self, idx: usize, group: usize, aggs: &[AggSpec], d: Vec<Delta>, key: &Key) -> Vec<Delta> {
        let Some(NodeState::Agg(groups)) = node_state(&mut self.held, idx) else { return vec![] };
        let mut old: Map<Key, Option<Row>> = Map::default();
        let mut bytes = 0isize;
        for (row, w) in d {
            // Looked up by the row's own prefix: a key is allocated only for a new group.
            let gk = &row[..group.min(row.len())];
            if !old.contains_key(gk) {
                old.insert(gk.into(), groups.get_key_value(gk).map(|(k, g)| group_output(k, g)));
            }
            let is_key = spelled_as_key(groups, gk);
            let g = match groups.get_mut(gk) {
                Some(g) => g,
                None => {
                    bytes += (row_bytes(gk) + SLOT) as isize;
                    let accs = aggs.iter().map(|a| Acc::new(a.kind)).collect();
                    groups.or_insert_with(gk.into(), || Group::new(accs))
                }
            };
            g.rows += w;
            bytes += g.count_spelling(gk, is_key, w);
            for (acc, spec) in g.accs.iter_mut().zip(aggs) {
                bytes += acc.apply(spec, &row, w);
            }
        }
        let mut out = Vec::new();
        for (gk, before) in old {
            if let Some(g) = groups.get_mut(&gk) {
                bytes += g.settle_spellings();
            }
            let after = match groups.get_key_value(&gk) {
                Some((k, g)) if g.rows == 0 && !global_group_of(k, key, group) => {
                    bytes -= (row_bytes(k) + SLOT) as isize + g.spelling_bytes();
                    groups.remove(&gk);
                    None
                }
                Some((k, g)) => Some(group_output(k, g)),
                None => None,
            };
            if let (Some(b), Some(a)) = (&before, &after)
                && exact_eq(b, a)
            {
                continue;
            }
            if let Some(b) = before {
                out.push((b, -1));
            }
            if let Some(a) = after {
                out.push((a, 1));
            }
        }
        self.bytes += bytes;
        out
    }

    /// DISTINCT: a row is output while any row SQL-equal to it exists, in a spelling one of
    /// them has (see [`Group`]: the same bookkeeping, without accumulators).
    pub(super) fn distinct(&mut self, idx: usize, d: Vec<Delta>) -> Vec<Delta> {
        let Some(NodeState::Distinct(counts)) = node_state(&mut self.held, idx) else { return vec![] };
        let mut before: Map<Row, Option<Row>> = Map::default();
        let mut bytes = 0isize;
        for (row, w) in d {
            if !before.contains_key(&row) {
                let shown = counts.get_key_value(&row).filter(|(_, g)| g.rows > 0).map(|(k, g)| g.values(k).into());
                before.insert(row.clone(), shown);
            }
            let is_key = spelled_as_key(counts, &row);
            let entry = counts.or_insert_with(row.clone(), || {
                bytes += (row_bytes(&row) + SLOT) as isize;
                Group::new(Vec::new())
            });
            entry.rows += w;
            bytes += entry.count_spelling(&row, is_key, w);
        }
        let mut out = Vec::new();
        for (key, shown) in before {
            if let Some(g) = counts.get_mut(&key) {
                bytes += g.settle_spellings();
            }
            let after: Option<Row> = counts.get_key_value(&key).filter(|(_, g)| g.rows > 0).map(|(k, g)| g.values(k).into());
            if let Some((k, g)) = counts.get_key_value(&key).filter(|(_, g)| g.rows == 0) {
                bytes -= (row_bytes(k) + SLOT) as isize + g.spelling_bytes();
                counts.remove(&key);
            }
            match (shown, after) {
                (Some(b), Some(a)) if exact_eq(&b, &a) => {}
                (b, a) => {
                    out.extend(b.map(|b| (b, -1)));
                    out.extend(a.map(|a| (a, 1)));
                }
            }
        }
        self.bytes += bytes;
        out
    }
}

/// True if `spelling` is exactly the key its group has (or will have, being new) in `groups`:
/// groups are found by SQL equality, and a group's key is its first row's spelling.
pub(super) fn spelled_as_key<K: std::borrow::Borrow<[Value]> + Hash + Eq>(groups: &Small<K, Group>, spelling: &[Value]) -> bool {
    groups.get_key_value(spelling).is_none_or(|(k, _)| exact_eq(k.borrow(), spelling))
}

/// True for the group (whose key in its map is `gk`) of a global aggregate of partition `key`.
pub(super) fn global_group_of(gk: &[Value], key: &Key, group: usize) -> bool {
    // A global aggregate groups by the key columns only; its group never disappears.
    group == key.len() && gk == key.as_ref()
}

/// A group's output row; `gk` is its key in its map.
pub(super) fn group_output(gk: &[Value], g: &Group) -> Row {
    g.values(gk).iter().cloned().chain(g.accs.iter().map(Acc::output)).collect()
}
