//! `metrics.jsonl`: one JSON object per finished step.
//!
//! Keys are flat, `node/metric`, so the file loads straight into pandas or TensorBoard
//! converters: `{"step": 3, "policy_version": 3, "wall_s": 12.5, "adv/seconds": 0.01,
//! "adv/adv/mean": 0.0, ...}`. Lines are appended and flushed as steps finish, so a run
//! that stops early keeps every completed step.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::executor::StepReport;

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

/// An append-only `metrics.jsonl`.
pub struct MetricsLog {
    path: PathBuf,
    out: BufWriter<File>,
}

impl MetricsLog {
    /// Opens `dir/metrics.jsonl`, truncating it unless `append`.
    pub fn open(dir: &Path, append: bool) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("metrics.jsonl");
        let file = OpenOptions::new()
            .create(true)
            .append(append)
            .write(true)
            .truncate(!append)
            .open(&path)?;
        Ok(MetricsLog {
            path,
            out: BufWriter::new(file),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record and flushes it to the file.
    pub fn append(&mut self, record: &Map<String, Value>) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, record)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}
