//! From-scratch evaluation of an operator tree over a [`MemStore`].
//!
//! Owns: [`eval`], the reference semantics the incremental operators must agree with; it is
//! the oracle of the property tests and the "server" of the in-memory upstream fill source.
//! Does not own: incremental maintenance (ops). It is written independently of `ops` (plain
//! loops, no shared accumulators) so that a bug in one is not silently mirrored in the other.
//!
//! Invariant: rows restricted by `keys` are exactly the base rows whose partition-key columns
//! equal one of the keys (dimension tables, whose key is empty, are not restricted: the join
//! restricts them); global aggregates yield one row per requested key even when empty.

use std::collections::{HashMap, HashSet};

use crate::expr::{div_dec, is_true};
use crate::ops::{Key, sort_rows};
use crate::plan::{AggKind, AggSpec, JoinKind, Node};
use crate::store::MemStore;
use crate::value::{Decimal, Row, Value};

/// Evaluates `node` over `store`, restricted to the partitions in `keys` (all if `None`).
pub fn eval(node: &Node, store: &MemStore, keys: Option<&HashSet<Key>>) -> Vec<Row> {
    match node {
        Node::Base { table, key, .. } => store
            .rows(table)
            .iter()
            .filter(|r| {
                // An empty key is a parameterless view (one partition) or a dimension table,
                // which is joined, not restricted.
                key.is_empty()
                    || keys.is_none_or(|ks| {
                        let k: Key = key.iter().map(|&c| r.get(c).cloned().unwrap_or(Value::Null)).collect();
                        ks.contains(&k)
                    })
            })
            .cloned()
            .collect(),
        Node::Filter { input, pred } => eval(input, store, keys).into_iter().filter(|r| is_true(&pred.eval(r)) == Some(true)).collect(),
        Node::Project { input, exprs } => {
            eval(input, store, keys).into_iter().map(|r| exprs.iter().map(|e| e.eval(&r)).collect()).collect()
        }
        Node::Join { left, right, on, kind } => {
            let (l, r) = (eval(left, store, keys), eval(right, store, keys));
            let rw = right.width();
            let key = |row: &Row, cols: &mut dyn Iterator<Item = usize>| -> Option<Vec<Value>> {
                let k: Vec<Value> = cols.map(|c| row.get(c).cloned().unwrap_or(Value::Null)).collect();
                if k.iter().any(Value::is_null) { None } else { Some(k) }
            };
            let mut index: HashMap<Vec<Value>, Vec<&Row>> = HashMap::new();
            for rr in &r {
                if let Some(k) = key(rr, &mut on.iter().map(|p| p.1)) {
                    index.entry(k).or_default().push(rr);
                }
            }
            let mut out = Vec::new();
            for lr in &l {
                let mut matched = false;
                if let Some(ms) = key(lr, &mut on.iter().map(|p| p.0)).and_then(|k| index.get(&k)) {
                    for rr in ms {
                        matched = true;
                        out.push(lr.iter().chain(rr.iter()).cloned().collect());
                    }
                }
                if !matched && *kind == JoinKind::Left {
                    out.push(lr.iter().cloned().chain(std::iter::repeat_n(Value::Null, rw)).collect());
                }
            }
            out
        }
        Node::Aggregate { input, group, aggs, global } => {
            let rows = eval(input, store, keys);
            let mut groups: Vec<(Row, Vec<Row>)> = Vec::new();
            let mut index: HashMap<Row, usize> = HashMap::new();
            for r in rows {
                let g: Row = r.iter().take(*group).cloned().collect();
                let i = *index.entry(g.clone()).or_insert_with(|| {
                    groups.push((g, Vec::new()));
                    groups.len() - 1
                });
                groups[i].1.push(r);
            }
            if *global {
                let wanted: Vec<Key> = match keys {
                    Some(ks) => ks.iter().cloned().collect(),
                    None => vec![Box::new([])],
                };
                for k in wanted {
                    if k.len() == *group && !index.contains_key(&k) {
                        groups.push((k, Vec::new()));
                    }
                }
            }
            groups.into_iter().map(|(g, rows)| g.iter().cloned().chain(aggs.iter().map(|a| aggregate(a, &rows))).collect()).collect()
        }
        Node::Distinct { input } => {
            let mut seen = HashSet::new();
            eval(input, store, keys).into_iter().filter(|r| seen.insert(r.clone())).collect()
        }
        Node::TopK { input, order, limit, offset } => {
            let mut rows = eval(input, store, keys);
            sort_rows(&mut rows, order);
            rows.into_iter().skip(*offset).take(*limit).collect()
        }
        Node::Union { inputs } => inputs.iter().flat_map(|i| eval(i, store, keys)).collect(),
    }
}

fn aggregate(spec: &AggSpec, rows: &[Row]) -> Value {
    let args: Vec<&Value> = rows.iter().map(|r| r.get(spec.arg).unwrap_or(&Value::Null)).collect();
    let non_null: Vec<&Value> = args.iter().copied().filter(|v| !v.is_null()).collect();
    match spec.kind {
        AggKind::CountStar => Value::Int(rows.len() as i64),
        AggKind::CountNotNull => Value::Int(args.iter().filter(|v| is_true(v) == Some(true)).count() as i64),
        AggKind::CountDistinct => Value::Int(non_null.iter().cloned().cloned().collect::<HashSet<Value>>().len() as i64),
        AggKind::Min => non_null.iter().min().map(|v| (*v).clone()).unwrap_or(Value::Null),
        AggKind::Max => non_null.iter().max().map(|v| (*v).clone()).unwrap_or(Value::Null),
        AggKind::Sum | AggKind::Avg => {
            if non_null.is_empty() {
                return Value::Null;
            }
            let exact =
                non_null.iter().all(|v| matches!(v, Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Year(_) | Value::Bit(_)));
            let n = non_null.len() as i128;
            if exact {
                let scale = non_null.iter().map(|v| if let Value::Decimal(d) = v { d.scale() } else { 0 }).max().unwrap_or(0);
                let mut sum: i128 = 0;
                for v in &non_null {
                    let m = match v {
                        Value::Decimal(d) => d.rescaled(scale),
                        Value::Int(i) => (*i as i128).checked_mul(10i128.pow(scale as u32)),
                        Value::UInt(u) => (*u as i128).checked_mul(10i128.pow(scale as u32)),
                        other => other.to_f64().map(|f| f as i128 * 10i128.pow(scale as u32)),
                    };
                    match m.and_then(|m| sum.checked_add(m)) {
                        Some(s) => sum = s,
                        None => return Value::Null,
                    }
                }
                if spec.kind == AggKind::Sum {
                    Decimal::new(sum, scale).map(Value::Decimal).unwrap_or(Value::Null)
                } else {
                    div_dec(sum, scale, n, 0)
                }
            } else {
                let s: f64 = non_null.iter().map(|v| v.to_f64().unwrap_or(0.0)).sum();
                Value::Double(if spec.kind == AggKind::Sum { s } else { s / n as f64 })
            }
        }
    }
}
