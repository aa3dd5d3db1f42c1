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

/// The batch in parts of `size` samples each, or whole.
pub fn parts_of(batch: &Batch, size: Option<usize>) -> Vec<Batch> {
    let n = batch.num_samples();
    match size {
        Some(size) if size > 0 && size < n => batch.split(n.div_ceil(size)),
        _ => vec![batch.clone()],
    }
}

/// The mini-batches of one epoch: the samples shuffled with `seed` (kept in order when the
/// whole batch is one mini-batch), cut into parts of `mini_batch` samples.
pub fn mini_batches(batch: &Batch, mini_batch: Option<usize>, seed: u64) -> Vec<Batch> {
    let n = batch.num_samples();
    if mini_batch.is_none_or(|m| m >= n) {
        return vec![batch.clone()];
    }
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    parts_of(&batch.select(&order), mini_batch)
}

/// Runs `ppo_epochs` epochs of mini-batch updates: for each mini-batch, `micro` is called
/// on each micro-batch with its loss scale (1 / micro-batches) to accumulate gradients,
/// then `apply` takes the optimizer step. Statistics are averaged.
pub fn train_epochs(
    batch: &Batch,
    epochs: usize,
    (mini, micro_size): (Option<usize>, Option<usize>),
    seed: u64,
    stats: &mut StatMeans,
    mut micro: impl FnMut(&Batch, f32) -> Result<crate::algo::AlgoStats, String>,
    mut apply: impl FnMut() -> crate::runtime::trainable::UpdateStats,
) -> Result<(), String> {
    for epoch in 0..epochs.max(1) {
        let epoch_seed = seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for mini_batch in mini_batches(batch, mini, epoch_seed) {
            let parts = parts_of(&mini_batch, micro_size);
            let scale = 1.0 / parts.len() as f32;
            for part in parts.iter().filter(|p| p.num_samples() > 0) {
                for (k, v) in micro(part, scale)? {
                    stats.add(&k, v);
                }
            }
            let update = apply();
            stats.add("grad_norm", update.grad_norm);
            stats.add("lr", update.lr);
            stats.add("skipped_updates", if update.skipped { 1.0 } else { 0.0 });
            stats.add_sum("optimizer_steps", 1.0);
        }
    }
    Ok(())
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

    /// A statistic reported as a total rather than a mean.
    pub fn add_sum(&mut self, key: &str, value: f64) {
        let entry = self.sums.entry(key.to_string()).or_insert((0.0, 1));
        entry.0 += value;
    }

    pub fn into_metrics(self, metrics: &mut std::collections::BTreeMap<String, f64>) {
        for (k, (sum, n)) in self.sums {
            metrics.insert(k, sum / n.max(1) as f64);
        }
    }
}
