//! The console view of a run: a progress bar with ETA and the key metrics on a terminal,
//! one plain line per step otherwise (logs, CI).

use std::io::IsTerminal;
use std::sync::OnceLock;

use indicatif::{ProgressBar, ProgressStyle};
use roll_flow::engine::StepReport;

pub struct Progress {
    bar: OnceLock<ProgressBar>,
    terminal: bool,
    last: u64,
}

/// `success 0.41 | score 0.41 | val/success 0.52 | ...` from a step's node metrics.
fn key_metrics(report: &StepReport) -> String {
    let mut parts = Vec::new();
    for node in &report.nodes {
        let wanted: &[&str] = match node.kind {
            "Rollout" => &["success", "score/mean", "response_length"],
            "ActorStep" => &["entropy", "grad_norm"],
            "CriticStep" => &["value_loss"],
            _ => &[],
        };
        for key in wanted {
            if let Some(v) = node.metrics.get(*key) {
                parts.push(format!("{key} {v:.3}"));
            }
        }
        if node.kind == "Eval" {
            for (k, v) in node.metrics.iter().filter(|(k, _)| k.ends_with("/success")) {
                parts.push(format!("{k} {v:.3}"));
            }
        }
    }
    parts.join(" | ")
}

impl Progress {
    /// A view of a run that ends at step `last`; the bar starts at the first step reported
    /// (a resumed run's first step, so its ETA counts only the steps left).
    pub fn new(last: u64) -> Self {
        Progress {
            bar: OnceLock::new(),
            terminal: std::io::stderr().is_terminal(),
            last,
        }
    }

    fn bar(&self, first: u64) -> &ProgressBar {
        self.bar.get_or_init(|| {
            let bar = ProgressBar::new(self.last);
            bar.set_position(first);
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} steps  {elapsed_precise} < {eta_precise}  {msg}",
                )
                .expect("valid template"),
            );
            bar
        })
    }

    pub fn step_done(&self, report: &StepReport) {
        let metrics = key_metrics(report);
        if self.terminal {
            let bar = self.bar(report.step);
            bar.set_position(report.step + 1);
            bar.set_message(metrics);
        } else {
            eprintln!("step {}/{} | {metrics}", report.step + 1, self.last);
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = self.bar.get() {
            bar.finish();
        }
    }
}
