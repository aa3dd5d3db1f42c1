//! Drawing the DOT of [`super::dot::to_dot`] as a PNG with Graphviz's `dot` binary
//! (`roll-flow graph FILE --png OUT`).
//!
//! Graphviz's layout is what makes pipeline drawings readable, and reimplementing it is
//! out of scope, so the binary is a run-time dependency of this one command only; when it
//! is missing the error says how to install it and how to get the DOT without it.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::atomic_file::write_atomic;

/// Renders `dot_text` with `dot -Tpng` and writes the image to `out` atomically.
pub fn write_png(dot_text: &str, out: &Path) -> Result<(), String> {
    let mut child = Command::new("dot")
        .arg("-Tpng")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "graphviz's `dot` is not on PATH; install graphviz \
                 (apt-get install graphviz, brew install graphviz), or write the DOT text with \
                 `roll-flow graph FILE > graph.dot`"
                .to_string(),
            _ => format!("cannot run graphviz's `dot`: {e}"),
        })?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // Write from a thread: `dot` may fill its stdout pipe before reading all its input.
    let text = dot_text.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let output = child
        .wait_with_output()
        .map_err(|e| format!("graphviz's `dot` failed: {e}"))?;
    let written = writer
        .join()
        .map_err(|_| "writing to `dot` panicked".to_string())?;
    if !output.status.success() {
        return Err(format!(
            "graphviz's `dot` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    written.map_err(|e| format!("cannot write the graph to `dot`: {e}"))?;
    write_atomic(out, &output.stdout).map_err(|e| format!("cannot write {}: {e}", out.display()))
}
