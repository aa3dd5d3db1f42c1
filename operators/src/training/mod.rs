//! The model-driven operators of a training step:
//!
//! - [`log_prob`]: `LogProb` (π_old) and `RefLogProb` (π_ref) columns;
//! - [`values`]: the critic's `values`;
//! - [`actor_step`] and [`critic_step`]: PPO-style updates with micro-batches, gradient
//!   accumulation, global-norm clipping and the learning-rate schedule;
//! - [`model_update`]: publishing trained weights to the inference copy.

pub mod actor_step;
pub mod critic_step;
pub mod log_prob;
pub mod model_update;
pub mod values;

use roll_flow_engine::Batch;

/// Tokens per forward pass when scoring (bounds activation memory).
pub const SCORING_CHUNK_TOKENS: usize = 16_384;

/// The micro-batches of one pass: `micro_batch` samples each, or the whole batch.
pub fn micro_batches(batch: &Batch, micro_batch: Option<usize>) -> Vec<Batch> {
    let n = batch.num_samples();
    match micro_batch {
        Some(size) if size > 0 && size < n => batch.split(n.div_ceil(size)),
        _ => vec![batch.clone()],
    }
}

/// Training over several timely workers needs their gradients averaged; refuse clearly
/// rather than train diverging copies.
pub fn single_worker(kind: &str, peers: usize) -> Result<(), String> {
    if peers > 1 {
        return Err(format!(
            "`{kind}` with {peers} workers: averaging gradients across workers is not implemented yet; run with `-w 1`"
        ));
    }
    Ok(())
}

/// Running means of per-micro-batch statistics.
#[derive(Default)]
pub struct StatMeans {
    sums: std::collections::BTreeMap<String, (f64, usize)>,
}

impl StatMeans {
    pub fn add(&mut self, key: &str, value: f64) {
        let entry = self.sums.entry(key.to_string()).or_insert((0.0, 0));
        entry.0 += value;
        entry.1 += 1;
    }

    pub fn into_metrics(self, metrics: &mut std::collections::BTreeMap<String, f64>) {
        for (k, (sum, n)) in self.sums {
            metrics.insert(k, sum / n.max(1) as f64);
        }
    }
}
