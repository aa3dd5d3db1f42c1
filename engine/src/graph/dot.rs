//! Graphviz DOT output of a validated graph, for `roll-flow graph`.
//!
//! Each node is a record showing its name, its RON variant, and the columns it needs and
//! gives; the policy-version feedback edge is drawn dashed, so the picture shows the
//! whole training loop, not only the edges written in the file.

use std::fmt::Write;

use super::pipeline_graph::PipelineGraph;
use crate::operator::Role;

fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c {
            '"' | '{' | '}' | '|' | '<' | '>' | '\\' => vec!['\\', c],
            c => vec![c],
        })
        .collect()
}

fn column_list(columns: impl Iterator<Item = String>) -> String {
    let all: Vec<String> = columns.map(|c| escape(&c)).collect();
    if all.is_empty() {
        "-".to_string()
    } else {
        all.join("\\n")
    }
}

/// Renders the graph as DOT; `title` labels the whole graph.
pub fn to_dot(graph: &PipelineGraph, title: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph pipeline {{");
    let _ = writeln!(
        out,
        "  label=\"{}\";\n  labelloc=t;\n  rankdir=TB;",
        escape(title)
    );
    let _ = writeln!(
        out,
        "  node [shape=record, fontname=\"Helvetica\", fontsize=10];"
    );
    for &i in &graph.order {
        let node = &graph.nodes[i];
        let needs = column_list(node.contract.needs.iter().map(|n| n.column.to_string()));
        let gives = column_list(node.contract.gives.iter().map(|c| c.to_string()));
        let style = match node.role {
            Role::Source => ", style=filled, fillcolor=\"#dbe9f6\"",
            Role::PolicyUpdate => ", style=filled, fillcolor=\"#f6e3db\"",
            Role::Transform => "",
        };
        let _ = writeln!(
            out,
            "  n{i} [label=\"{{{} : {}|{{needs\\n{}|gives\\n{}}}}}\"{style}];",
            escape(&node.name),
            escape(node.kind),
            needs,
            gives
        );
    }
    for (i, node) in graph.nodes.iter().enumerate() {
        for &j in &node.outputs {
            let _ = writeln!(out, "  n{i} -> n{j};");
        }
    }
    for &from in &graph.feedback_from {
        for to in graph.sources() {
            let _ = writeln!(
                out,
                "  n{from} -> n{to} [style=dashed, label=\"policy version\", constraint=false];"
            );
        }
    }
    out.push_str("}\n");
    out
}
