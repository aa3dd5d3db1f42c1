//! [`ExecError`]: why a run stopped early, with the node and step where known.

/// Why a run stopped early.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}{message}", location(.node, .step))]
pub struct ExecError {
    pub node: Option<String>,
    pub step: Option<u64>,
    pub message: String,
}

fn location(node: &Option<String>, step: &Option<u64>) -> String {
    match (node, step) {
        (Some(n), Some(s)) => format!("node `{n}` at step {s}: "),
        (Some(n), None) => format!("node `{n}`: "),
        (None, Some(s)) => format!("step {s}: "),
        (None, None) => String::new(),
    }
}
