//! The console view of a run: a progress bar with ETA and the key metrics on a terminal,
//! one plain line per step otherwise (logs, CI).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};
use roll_flow_engine::StepReport;

pub struct Progress {
    bar: Option<ProgressBar>,
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
    pub fn new(first: u64, last: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(last);
            bar.set_position(first);
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} steps  {elapsed_precise} < {eta_precise}  {msg}",
                )
                .expect("valid template"),
            );
            bar
        });
        Progress { bar, last }
    }

    pub fn step_done(&self, report: &StepReport) {
        let metrics = key_metrics(report);
        match &self.bar {
            Some(bar) => {
                bar.set_position(report.step + 1);
                bar.set_message(metrics);
            }
            None => eprintln!("step {}/{} | {metrics}", report.step + 1, self.last),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
