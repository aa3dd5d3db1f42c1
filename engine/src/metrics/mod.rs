//! `metrics.jsonl`: one JSON object per finished step.
//!
//! Keys are flat, `node/metric`, so the file loads straight into pandas or TensorBoard
//! converters: `{"step": 3, "policy_version": 3, "wall_s": 12.5, "adv/seconds": 0.01,
//! "adv/adv/mean": 0.0, ...}`. Lines are appended and flushed as steps finish, so a run
//! that stops early keeps every completed step.
//!
//! - [`tensorboard`]: the same scalars as TensorBoard event files beside `metrics.jsonl`.
//! - [`crc32c`]: the checksum of event-file records.
//! - [`history`]: reading a run's `metrics.jsonl` back as series, for plots.
//! - [`plots`]: PNG charts of a run's (or several runs') metrics.

pub mod crc32c;
pub mod history;
pub mod plots;
pub mod tensorboard;

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::executor::node::StepReport;
use tensorboard::EventWriter;

/// The metrics of one step as a flat JSON object.
pub fn step_record(report: &StepReport, wall_seconds: f64) -> Map<String, Value> {
    let mut record = Map::new();
    record.insert("step".into(), report.step.into());
    record.insert("policy_version".into(), report.policy_version.into());
    record.insert("wall_s".into(), wall_seconds.into());
    for node in &report.nodes {
        record.insert(format!("{}/seconds", node.name), node.seconds.into());
        record.insert(format!("{}/samples", node.name), node.samples.into());
        record.insert(format!("{}/tokens", node.name), node.tokens.into());
        for (key, value) in &node.metrics {
            let v = serde_json::Number::from_f64(*value).map_or(Value::Null, Value::Number);
            record.insert(format!("{}/{key}", node.name), v);
        }
    }
    record
}

/// Whether `key` is a wall-clock metric: `wall_s`, a node's `seconds`, or a rate such as
/// `rollout/gen_tokens_per_s`. These are the only fields in which two runs with the same
/// seed and worker count may differ (the determinism test and the allocator benchmark
/// compare everything else).
pub fn is_timing_key(key: &str) -> bool {
    key == "wall_s" || key.ends_with("seconds") || key.ends_with("_per_s")
}

/// An append-only `metrics.jsonl` and the TensorBoard event file written alongside.
pub struct MetricsLog {
    path: PathBuf,
    out: BufWriter<File>,
    events: EventWriter,
}

impl MetricsLog {
    /// Opens `dir/metrics.jsonl` for a run that starts at `first_step`: truncated for a new
    /// run (`roll-flow run` has refused or moved aside a directory holding another run),
    /// appended to by a resumed one (`first_step > 0`). Either way a new TensorBoard
    /// event file is started (see [`tensorboard`] for how a restart is marked).
    pub fn open(dir: &Path, first_step: u64) -> io::Result<Self> {
        let append = first_step > 0;
        std::fs::create_dir_all(dir)?;
        let path = dir.join("metrics.jsonl");
        let file = OpenOptions::new()
            .create(true)
            .append(append)
            .write(true)
            .truncate(!append)
            .open(&path)?;
        let events = EventWriter::create(dir, append.then_some(first_step))?;
        Ok(MetricsLog {
            path,
            out: BufWriter::new(file),
            events,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record, flushes and fsyncs it, then writes its numbers (all but `step`,
    /// which is the event's step) as TensorBoard scalars, also fsynced: when this returns
    /// the step is durable, and a checkpoint covering it may be put in place.
    pub fn append(&mut self, record: &Map<String, Value>) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, record)?;
        self.out.write_all(b"\n")?;
        self.out.flush()?;
        self.out.get_ref().sync_data()?;
        let step = record.get("step").and_then(Value::as_u64).unwrap_or(0);
        let scalars: Vec<(&str, f32)> = record
            .iter()
            .filter(|(key, _)| key.as_str() != "step")
            .filter_map(|(key, value)| Some((key.as_str(), value.as_f64()? as f32)))
            .collect();
        self.events
            .write_scalars(step, tensorboard::unix_seconds(), &scalars)
    }
}

#[cfg(test)]
mod tests {
    use super::is_timing_key;

    #[test]
    fn timing_keys_are_wall_clock_fields_only() {
        for key in ["wall_s", "rollout/seconds", "rollout/gen_tokens_per_s"] {
            assert!(is_timing_key(key), "{key}");
        }
        for key in [
            "step",
            "policy_version",
            "adv/samples",
            "actor_step/lr",
            "eval/val/success",
        ] {
            assert!(!is_timing_key(key), "{key}");
        }
    }
}
