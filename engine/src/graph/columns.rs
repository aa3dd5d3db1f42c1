//! Column checks: every need met from upstream, no refused column given upstream, and
//! group-normalisation pitfalls.

use std::collections::BTreeSet;

use super::checks::{node_path, At, Report};
use super::pipeline_graph::GraphNode;
use crate::batch::column::Column;
use crate::dialect::Catalog;
use crate::dialect::Pipeline;
use crate::node_spec::{NodeSpec, Reference};
use crate::operator::Role;

/// Every need must be given by some node upstream (batches carry columns downstream), and
/// no column a node refuses may be. Unreachable nodes are skipped: they already have an
/// error of their own.
pub(crate) fn column_needs<N: NodeSpec>(
    order: &[usize],
    nodes: &[GraphNode],
    reachable: &[bool],
    r: &mut Report,
) {
    let mut available: Vec<BTreeSet<Column>> = vec![BTreeSet::new(); nodes.len()];
    for &i in order {
        let mut upstream = BTreeSet::new();
        for &j in &nodes[i].inputs {
            upstream.extend(available[j].iter().cloned());
            upstream.extend(nodes[j].contract.gives.iter().cloned());
        }
        for need in nodes[i].contract.needs.iter().filter(|_| reachable[i]) {
            if !upstream.contains(&need.column) {
                let help = need
                    .hint
                    .clone()
                    .or_else(|| giver_help::<N>(&need.column, i, nodes));
                let msg = format!(
                    "node `{}` ({}) needs column `{}`, which nothing upstream gives",
                    nodes[i].name, nodes[i].kind, need.column
                );
                r.error(At::Value(&node_path(&nodes[i].name)), msg, help);
            }
        }
        for refusal in nodes[i].contract.refuses.iter().filter(|_| reachable[i]) {
            if upstream.contains(&refusal.column) {
                let msg = format!(
                    "node `{}` ({}): {}",
                    nodes[i].name, nodes[i].kind, refusal.reason
                );
                r.error(At::Value(&node_path(&nodes[i].name)), msg, None);
            }
        }
        available[i] = upstream;
    }
}

fn giver_help<N: NodeSpec>(column: &Column, at: usize, nodes: &[GraphNode]) -> Option<String> {
    if let Some(giver) = nodes.iter().find(|n| n.contract.gives.contains(column)) {
        return Some(format!(
            "node `{}` gives it; add the edge (\"{}\", \"{}\")",
            giver.name, giver.name, nodes[at].name
        ));
    }
    N::giver_of(column).map(|what| format!("add {what} upstream of `{}`", nodes[at].name))
}

/// Warns when a group-normalising node sees env sets with `group_size: 1`.
pub(crate) fn group_pitfalls<C: Catalog>(
    p: &Pipeline<C>,
    order: &[usize],
    nodes: &[GraphNode],
    r: &mut Report,
) {
    let mut env_sets: Vec<BTreeSet<String>> = vec![BTreeSet::new(); nodes.len()];
    for &i in order {
        if let Some(spec) = p
            .nodes
            .get(&nodes[i].name)
            .filter(|_| nodes[i].role == Role::Source)
        {
            for reference in spec.references() {
                if let Reference::Env { name, .. } = reference {
                    env_sets[i].insert(name);
                }
            }
        }
        let inherited: BTreeSet<String> = nodes[i]
            .inputs
            .iter()
            .flat_map(|&j| env_sets[j].clone())
            .collect();
        env_sets[i].extend(inherited);
        if !nodes[i].contract.group_normalised {
            continue;
        }
        for set_name in &env_sets[i] {
            if p.envs.get(set_name).is_some_and(|s| s.group_size == 1) {
                let msg = format!("node `{}` ({}) normalises within groups, but env set `{set_name}` has group_size 1: every advantage will be 0", nodes[i].name, nodes[i].kind);
                let help = format!(
                    "set `group_size` above 1 in envs.{set_name}, or normalise over the batch"
                );
                r.warning(At::Value(&node_path(&nodes[i].name)), msg, Some(help));
            }
        }
    }
}
