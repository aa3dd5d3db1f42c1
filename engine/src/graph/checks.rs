//! The individual validation checks. Each adds diagnostics to a `Report` and never stops
//! the others, so one run of `roll-flow validate` lists every problem.

use std::collections::{BTreeSet, VecDeque};

use petgraph::algo::tarjan_scc;
use petgraph::visit::EdgeRef;

use super::pipeline_graph::{node_index, GraphNode, Petgraph};
use crate::dialect::Catalog;
use crate::dialect::Pipeline;
use crate::node_spec::{NodeSpec, Reference, SettingProblem};
use crate::operator::Role;
use crate::spec::diagnostic::{Diagnostic, Location};
use crate::spec::load::Source;
use crate::spec::locate::{self, field, key, Seg};
use crate::spec::suggest::did_you_mean;

/// Collects diagnostics, resolving spec paths to file locations.
pub(crate) struct Report<'a> {
    source: &'a Source,
    diagnostics: Vec<Diagnostic>,
}

/// Where a diagnostic points: at a value, or at the key/field name that holds it.
pub(crate) enum At<'p> {
    Value(&'p [Seg]),
    Name(&'p [Seg]),
    /// At the value of the longest prefix of the path that the file writes (a field left
    /// at its default is not in the file).
    NearestValue(&'p [Seg]),
}

impl<'a> Report<'a> {
    pub(crate) fn new(source: &'a Source) -> Self {
        Report {
            source,
            diagnostics: Vec::new(),
        }
    }

    fn locate(&self, at: At) -> Option<Location> {
        let text = &self.source.text;
        let span = match at {
            At::Value(path) => locate::value_head(text, path),
            At::Name(path) => locate::name_span(text, path),
            At::NearestValue(path) => (1..=path.len())
                .rev()
                .find_map(|n| locate::value_head(text, &path[..n])),
        }?;
        Some(Location::from_span(text, span))
    }

    fn push(&mut self, diagnostic: Diagnostic, at: At) {
        let location = self.locate(at);
        self.diagnostics.push(diagnostic.at(location));
    }

    pub(crate) fn error(&mut self, at: At, message: String, help: Option<String>) {
        let d = Diagnostic::error(&self.source.path, message).help_opt(help);
        self.push(d, at);
    }

    pub(crate) fn warning(&mut self, at: At, message: String, help: Option<String>) {
        let d = Diagnostic::warning(&self.source.path, message).help_opt(help);
        self.push(d, at);
    }

    /// Errors before warnings, each in file order.
    pub(crate) fn finish(mut self) -> Vec<Diagnostic> {
        let line = |d: &Diagnostic| d.location.as_ref().map(|l| l.start);
        self.diagnostics.sort_by_key(|d| (d.severity, line(d)));
        self.diagnostics
    }
}

pub(crate) fn node_path(name: &str) -> Vec<Seg> {
    vec![field("nodes"), key(name)]
}

pub(crate) fn scalars<C: Catalog>(p: &Pipeline<C>, r: &mut Report) {
    if p.steps == 0 {
        r.error(
            At::Value(&[field("steps")]),
            "`steps` is 0: nothing would run".into(),
            Some("set `steps: 1` or more".into()),
        );
    }
    for (name, set) in p.envs.iter() {
        let path = |f: &str| vec![field("envs"), key(name), field(f)];
        if set.groups == 0 {
            r.error(
                At::Value(&path("groups")),
                format!("env set `{name}` has 0 groups"),
                Some("set `groups: 1` or more".into()),
            );
        }
        if set.group_size == 0 {
            r.error(
                At::Value(&path("group_size")),
                format!("env set `{name}` has group_size 0"),
                Some("set `group_size: 1` or more".into()),
            );
        }
        if set.max_turns == Some(0) {
            r.error(
                At::Value(&path("max_turns")),
                format!("env set `{name}` allows 0 turns"),
                Some("set `max_turns: 1` or more, or leave it out".into()),
            );
        }
    }
}

pub(crate) fn duplicate_names<C: Catalog>(p: &Pipeline<C>, r: &mut Report) {
    let sections: [(&str, &str, Vec<&str>); 3] = [
        ("nodes", "node", p.nodes.names().collect()),
        ("models", "model", p.models.names().collect()),
        ("envs", "env set", p.envs.names().collect()),
    ];
    for (section, what, names) in sections {
        let mut seen = BTreeSet::new();
        for name in names {
            let nth = seen.iter().filter(|(n, _)| *n == name).count();
            if nth > 0 {
                let path = [field(section), Seg::Key(name.to_string(), nth)];
                r.error(
                    At::Name(&path),
                    format!("{what} `{name}` is defined twice"),
                    Some("give each entry its own name".into()),
                );
            }
            seen.insert((name, nth));
        }
    }
}

pub(crate) fn references<C: Catalog>(p: &Pipeline<C>, r: &mut Report) {
    let models: Vec<&str> = p.models.names().collect();
    let envs: Vec<&str> = p.envs.names().collect();
    for (node, spec) in p.nodes.iter() {
        for reference in spec.references() {
            let (what, section, field_name, name, known) = match &reference {
                Reference::Model { field, name } => ("model", "models", *field, name, &models),
                Reference::Env { field, name } => ("env set", "envs", *field, name, &envs),
            };
            if !known.contains(&name.as_str()) {
                let mut path = node_path(node);
                path.push(field(field_name));
                let help = if known.is_empty() {
                    format!("declare it under `{section}:`")
                } else {
                    did_you_mean(name, known)
                };
                r.error(
                    At::Value(&path),
                    format!(
                        "node `{node}` uses {what} `{name}`, which `{section}` does not declare"
                    ),
                    Some(help),
                );
            }
        }
    }
}

pub(crate) fn node_settings<C: Catalog>(p: &Pipeline<C>, r: &mut Report) {
    for (name, spec) in p.nodes.iter() {
        if let Err(problem) = spec.check() {
            r.error(
                At::Value(&node_path(name)),
                format!("node `{name}` ({}): {problem}", spec.kind()),
                None,
            );
        }
    }
}

/// The catalog's checks of each model and env entry's own settings.
pub(crate) fn entry_settings<C: Catalog>(p: &Pipeline<C>, r: &mut Report) {
    let mut report = |entry: Vec<Seg>, what: &str, name: &str, problem: SettingProblem| {
        let mut path = entry;
        path.extend(problem.field.iter().map(|f| field(f)));
        r.error(
            At::NearestValue(&path),
            format!("{what} `{name}`: {}", problem.message),
            problem.help,
        );
    };
    for (nth, (name, model)) in nth_of_name(p.models.iter()) {
        for problem in C::check_model(model, p) {
            let entry = vec![field("models"), Seg::Key(name.to_string(), nth)];
            report(entry, "model", name, problem);
        }
    }
    for (nth, (name, set)) in nth_of_name(p.envs.iter()) {
        for problem in C::check_env(&set.env) {
            let entry = vec![field("envs"), Seg::Key(name.to_string(), nth), field("env")];
            report(entry, "env set", name, problem);
        }
    }
}

/// Each entry with how many entries before it have the same name (a repeated name is
/// reported elsewhere, but its settings are still checked where it stands).
fn nth_of_name<'a, V: 'a>(
    entries: impl Iterator<Item = (&'a str, &'a V)>,
) -> Vec<(usize, (&'a str, &'a V))> {
    let mut seen: Vec<&str> = Vec::new();
    entries
        .map(|(name, value)| {
            let nth = seen.iter().filter(|n| **n == name).count();
            seen.push(name);
            (nth, (name, value))
        })
        .collect()
}

/// Wires edges into `nodes` and returns the petgraph; reports bad edges.
pub(crate) fn edges<C: Catalog>(
    p: &Pipeline<C>,
    nodes: &mut [GraphNode],
    r: &mut Report,
) -> Petgraph {
    let mut graph = Petgraph::new();
    for i in 0..nodes.len() {
        graph.add_node(i);
    }
    let owned: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let names: Vec<&str> = owned.iter().map(String::as_str).collect();
    let mut seen = BTreeSet::new();
    for (e, (from, to)) in p.edges.iter().enumerate() {
        let end = |k: usize| [field("edges"), Seg::Index(e), Seg::Index(k)];
        let mut ends = [None, None];
        for (k, name) in [from, to].into_iter().enumerate() {
            ends[k] = names.iter().position(|n| n == name);
            if ends[k].is_none() {
                r.error(
                    At::Value(&end(k)),
                    format!("edge names unknown node `{name}`"),
                    Some(did_you_mean(name, &names)),
                );
            }
        }
        let [Some(a), Some(b)] = ends else { continue };
        if !seen.insert((a, b)) {
            r.error(
                At::Value(&[field("edges"), Seg::Index(e)]),
                format!("edge (\"{from}\", \"{to}\") is listed twice"),
                Some("remove the repeat".into()),
            );
            continue;
        }
        if nodes[b].role == Role::Source {
            let help = format!(
                "`{to}` ({}) starts each step from the policy version; remove this edge",
                nodes[b].kind
            );
            r.error(
                At::Value(&end(1)),
                format!("edge into source node `{to}`"),
                Some(help),
            );
            continue;
        }
        graph.add_edge(node_index(a), node_index(b), e);
        nodes[a].outputs.push(b);
        nodes[b].inputs.push(a);
    }
    graph
}

/// A topological order with ties broken by file order, or `None` (and errors) on cycles.
pub(crate) fn acyclic_order(
    graph: &Petgraph,
    nodes: &[GraphNode],
    r: &mut Report,
) -> Option<Vec<usize>> {
    let mut indegree: Vec<usize> = nodes.iter().map(|n| n.inputs.len()).collect();
    let mut ready: BTreeSet<usize> = (0..nodes.len()).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &j in &nodes[i].outputs {
            indegree[j] -= 1;
            if indegree[j] == 0 {
                ready.insert(j);
            }
        }
    }
    if order.len() == nodes.len() {
        return Some(order);
    }
    for scc in tarjan_scc(graph) {
        let self_loop = scc.len() == 1 && graph.contains_edge(scc[0], scc[0]);
        if scc.len() < 2 && !self_loop {
            continue;
        }
        let members: BTreeSet<usize> = scc.iter().map(|n| n.index()).collect();
        let first_edge = graph
            .edge_references()
            .filter(|e| {
                members.contains(&e.source().index()) && members.contains(&e.target().index())
            })
            .map(|e| *e.weight())
            .min()
            .unwrap_or(0);
        let path: Vec<&str> = members.iter().map(|&i| nodes[i].name.as_str()).collect();
        let help = "the only loop in a pipeline is the policy-version feedback from the training node back to the rollout, which roll-flow adds itself; remove one of these edges";
        r.error(
            At::Value(&[field("edges"), Seg::Index(first_edge)]),
            format!("cycle in the per-step graph through {}", path.join(", ")),
            Some(help.into()),
        );
    }
    None
}

/// Reports nodes no source leads to; returns which nodes are reachable.
pub(crate) fn reachable_from_sources(
    graph: &Petgraph,
    nodes: &[GraphNode],
    r: &mut Report,
) -> Vec<bool> {
    let sources: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].role == Role::Source)
        .collect();
    if sources.is_empty() {
        if !nodes.is_empty() {
            r.error(
                At::Name(&[field("nodes")]),
                "the graph has no source node".into(),
                Some("add a `Rollout(...)` node; every step starts there".into()),
            );
        }
        return vec![false; nodes.len()];
    }
    let mut seen = vec![false; nodes.len()];
    let mut queue: VecDeque<usize> = sources.into_iter().collect();
    while let Some(i) = queue.pop_front() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        queue.extend(graph.neighbors(node_index(i)).map(|n| n.index()));
    }
    for (i, node) in nodes.iter().enumerate().filter(|(i, _)| !seen[*i]) {
        let help = format!(
            "add an edge that leads to it, e.g. (\"{}\", \"{}\")",
            nodes
                .iter()
                .find(|n| n.role == Role::Source)
                .map_or("rollout", |n| &n.name),
            node.name
        );
        r.error(
            At::Name(&node_path(&node.name)),
            format!(
                "node `{}` is not reachable from any source, so it would never run",
                nodes[i].name
            ),
            Some(help),
        );
    }
    seen
}

/// The nodes that publish policy versions back to the sources.
pub(crate) fn feedback_origins(graph: &Petgraph, nodes: &[GraphNode]) -> Vec<usize> {
    let updaters: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].role == Role::PolicyUpdate)
        .collect();
    let has_updater_below = |i: usize| {
        let mut dfs = petgraph::visit::Dfs::new(graph, node_index(i));
        dfs.next(graph);
        std::iter::from_fn(|| dfs.next(graph)).any(|n| nodes[n.index()].role == Role::PolicyUpdate)
    };
    let last: Vec<usize> = updaters
        .into_iter()
        .filter(|&i| !has_updater_below(i))
        .collect();
    if last.is_empty() {
        (0..nodes.len())
            .filter(|&i| nodes[i].outputs.is_empty())
            .collect()
    } else {
        last
    }
}
