//! `--dump-batches` for `ActorStep`: besides the batch the node received
//! (`DIR/step_NNNNNN/<node>.json`, [`roll_flow_engine::batch_dump`]), what its loss made of
//! each response token, so a reader can recompute the loss from the dump:
//! `DIR/step_NNNNNN/<node>.loss.json`, the same batch (same samples, same order) with the
//! token columns
//!
//! - `policy_logprob`: log π_θ of the token at the sample's first pass (the first epoch;
//!   the weights of its mini-batch's update, so the step's starting weights in the first
//!   mini-batch);
//! - `policy_ratio`: the importance ratio the loss clipped or weighed at that pass (per
//!   token, turn or sequence, [`roll_flow_algo::PolicyLoss::token_diagnostics`]);
//! - `mismatch_weight` (a loss with a mismatch correction) or `behaviour_weight`
//!   (`DecoupledPpo`): the weight each token's term was multiplied by.
//!
//! With several workers each records the micro-batches it computed; the records are
//! gathered before writing, so every worker writes the whole step's.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use roll_flow_engine::atomic_file::write_atomic;
use roll_flow_engine::collective::Collective;
use roll_flow_engine::{Batch, Column};

/// Each sample's place in the step's batch, carried through the shuffles and splits of
/// the epochs so a micro-batch's values find their sample.
pub const SAMPLE_INDEX: Column = Column::sample("loss_dump_index");

/// One sample's recorded token columns, by column name.
type Record = BTreeMap<String, Vec<f32>>;

/// The records of one step of one `ActorStep`, and where they go.
pub struct LossDump {
    dir: PathBuf,
    node: String,
    records: Mutex<BTreeMap<u64, Record>>,
}

impl LossDump {
    pub fn new(dir: PathBuf, node: &str) -> Self {
        LossDump {
            dir,
            node: node.to_string(),
            records: Mutex::default(),
        }
    }

    /// `batch` with [`SAMPLE_INDEX`] set, the records of an earlier step cleared.
    pub fn indexed(&self, batch: &Batch) -> Result<Batch, String> {
        self.records.lock().map_err(|_| poisoned())?.clear();
        let index: Vec<u64> = (0..batch.num_samples() as u64).collect();
        batch
            .clone()
            .with(&SAMPLE_INDEX, index)
            .map_err(|e| e.to_string())
    }

    /// Records `columns` (one value per token of `part`) for each sample of `part` not yet
    /// recorded (its first pass).
    pub fn record(&self, part: &Batch, columns: &[(&str, Vec<f32>)]) -> Result<(), String> {
        let index = part.u64s(&SAMPLE_INDEX).map_err(|e| e.to_string())?;
        let mut records = self.records.lock().map_err(|_| poisoned())?;
        for (i, &sample) in index.iter().enumerate() {
            if records.contains_key(&sample) {
                continue;
            }
            let range = part.sample_range(i);
            let record = (columns.iter())
                .map(|(name, values)| (name.to_string(), values[range.clone()].to_vec()))
                .collect();
            records.insert(sample, record);
        }
        Ok(())
    }

    /// Writes `DIR/step_NNNNNN/<node>.loss.json`: `batch` (the step's, in its order) with
    /// the recorded columns of every worker.
    pub fn write(&self, step: u64, batch: &Batch, collective: &Collective) -> Result<(), String> {
        let mine = std::mem::take(&mut *self.records.lock().map_err(|_| poisoned())?);
        let all: BTreeMap<u64, Record> = if collective.peers() == 1 {
            mine
        } else {
            (collective.gather(&mine))
                .map_err(|e| format!("--dump-batches: gathering the loss records: {e}"))?
                .into_iter()
                .flatten()
                .collect()
        };
        let mut names: Vec<&String> = all.values().flat_map(|r| r.keys()).collect();
        names.sort();
        names.dedup();
        let mut out = batch.clone();
        for name in names {
            let mut values = vec![0.0f32; batch.num_tokens()];
            for (&sample, record) in &all {
                let range = batch.sample_range(sample as usize);
                if let Some(v) = record.get(name.as_str()) {
                    values[range].copy_from_slice(v);
                }
            }
            let column = Column {
                name: name.clone().into(),
                level: roll_flow_engine::batch::column::Level::Token,
            };
            out.set(&column, values).map_err(|e| e.to_string())?;
        }
        let path = self
            .dir
            .join(format!("step_{step:06}"))
            .join(format!("{}.loss.json", self.node));
        let bytes = serde_json::to_vec(&out).map_err(|e| format!("--dump-batches: {e}"))?;
        write_atomic(&path, &bytes)
            .map_err(|e| format!("--dump-batches: cannot write {}: {e}", path.display()))
    }
}

fn poisoned() -> String {
    "--dump-batches: a thread recording the loss panicked".into()
}
