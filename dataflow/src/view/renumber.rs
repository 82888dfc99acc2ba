//! Occurrence numbers of a domain's base tables: they route base deltas, so every distinct
//! base node of a domain's graph needs its own.
//!
//! Owns: [`renumber`]. Invariant it establishes: within one domain, two base nodes share an
//! occurrence number only if they are the same node (then their state is shared), and a
//! dimension base under a join the graph did not have yet gets its own number even when an
//! identical base exists (so each dimension occurrence feeds exactly one join, see `dims`).

use std::collections::HashMap;

use crate::ops::Graph;
use crate::plan::Node;

/// Renumbers base occurrences of `tree` that would collide with a different occurrence
/// already in `graph` (occurrence numbers route base deltas, so they must be unique per
/// domain). Occurrences identical to one in the graph keep their number.
pub(super) fn renumber(tree: &Node, graph: &Graph, next: &mut usize) -> Node {
    let mut map: HashMap<usize, usize> = HashMap::new();
    let taken: HashMap<usize, &Node> = graph
        .nodes
        .iter()
        .filter_map(|n| match &n.tree {
            Node::Base { occ, .. } => Some((*occ, &n.tree)),
            _ => None,
        })
        .collect();
    // A dimension base feeds exactly one join of a domain (see `dims`): under a join the graph
    // does not have yet, it gets its own occurrence even if an identical base exists.
    let fresh_dims: Vec<usize> = tree
        .post_order()
        .into_iter()
        .filter(|n| n.is_dimension_join() && graph.find(n).is_none())
        .filter_map(|n| match n {
            Node::Join { right, .. } => match right.bases().first() {
                Some(Node::Base { occ, .. }) => Some(*occ),
                _ => None,
            },
            _ => None,
        })
        .collect();
    for b in tree.bases() {
        if let Node::Base { occ, .. } = b {
            match taken.get(occ) {
                Some(existing) if *existing == b && !fresh_dims.contains(occ) => {}
                Some(_) => {
                    map.insert(*occ, *next);
                    *next += 1;
                }
                None => {}
            }
        }
    }
    fn rewrite(n: &Node, map: &HashMap<usize, usize>) -> Node {
        let b = |x: &Node| Box::new(rewrite(x, map));
        match n {
            Node::Base { occ, table, columns, key } => {
                Node::Base { occ: map.get(occ).copied().unwrap_or(*occ), table: table.clone(), columns: columns.clone(), key: key.clone() }
            }
            Node::Filter { input, pred } => Node::Filter { input: b(input), pred: pred.clone() },
            Node::Project { input, exprs } => Node::Project { input: b(input), exprs: exprs.clone() },
            Node::Join { left, right, on, kind } => Node::Join { left: b(left), right: b(right), on: on.clone(), kind: *kind },
            Node::Aggregate { input, group, aggs, global } => {
                Node::Aggregate { input: b(input), group: *group, aggs: aggs.clone(), global: *global }
            }
            Node::Distinct { input } => Node::Distinct { input: b(input) },
            Node::TopK { input, order, limit, offset } => {
                Node::TopK { input: b(input), order: order.clone(), limit: *limit, offset: *offset }
            }
            Node::Union { inputs } => Node::Union { inputs: inputs.iter().map(|i| rewrite(i, map)).collect() },
        }
    }
    if map.is_empty() { tree.clone() } else { rewrite(tree, &map) }
}
