//! A data-parallel step's rollout put together: each worker plays its shard of the env
//! groups (whole groups, round robin), then every worker gathers the others' samples and
//! episode summaries, so that it holds the step's whole batch in the order one worker
//! would have made it (group by group). Everything downstream (advantages, whitening,
//! StarPO-S's top-std filter, the training nodes' mini-batches) then sees the global batch
//! and computes what a one-worker run computes; the training nodes share the gradient work
//! ([`crate::training::epochs::train_epochs`]).
//!
//! This is verl's dispatch (the driver collects the rollout and splits the batch evenly
//! over the data-parallel ranks) without a driver: the batch of a FrozenLake step is about
//! 1 MB, against the 0.2 MB gradient of its Tiny model that is reduced once per mini-batch,
//! and a Qwen2.5-0.5B step's tens of MB against a 2 GB gradient.

use roll_flow_engine::batch::column::GROUP_ID;
use roll_flow_engine::collective::Collective;
use roll_flow_engine::Batch;
use serde::{Deserialize, Serialize};

use super::stats::EpisodeSummary;

/// One worker's share of a step.
#[derive(Serialize, Deserialize)]
struct Share {
    batch: Batch,
    episodes: Vec<EpisodeSummary>,
    /// Counts that add up over workers (requests, prompt tokens...).
    counts: Vec<f64>,
    /// Seconds this worker played.
    seconds: f64,
}

/// The step's whole rollout, as every worker now holds it.
pub struct Gathered {
    pub batch: Batch,
    /// In slot order.
    pub episodes: Vec<EpisodeSummary>,
    /// Each count summed over workers.
    pub counts: Vec<f64>,
    /// The slowest worker's playing time.
    pub seconds: f64,
}

/// Gathers every worker's `batch`, `episodes` and `counts` (the identity on one worker).
pub fn gather(
    collective: &Collective,
    batch: Batch,
    episodes: Vec<EpisodeSummary>,
    counts: Vec<f64>,
    seconds: f64,
) -> Result<Gathered, String> {
    if collective.peers() == 1 {
        return Ok(Gathered {
            batch,
            episodes,
            counts,
            seconds,
        });
    }
    let share = Share {
        batch,
        episodes,
        counts,
        seconds,
    };
    let shares = collective
        .gather(&share)
        .map_err(|e| format!("gathering the workers' rollouts: {e}"))?;
    let mut counts = vec![0.0; shares[0].counts.len()];
    let mut seconds: f64 = 0.0;
    let mut episodes = Vec::new();
    let mut batches = Vec::new();
    for share in shares {
        for (sum, c) in counts.iter_mut().zip(&share.counts) {
            *sum += c;
        }
        seconds = seconds.max(share.seconds);
        episodes.extend(share.episodes);
        batches.push(share.batch);
    }
    episodes.sort_by_key(|e| e.position);
    let batch = in_group_order(Batch::concat(&batches).map_err(|e| e.to_string())?)?;
    Ok(Gathered {
        batch,
        episodes,
        counts,
        seconds,
    })
}

/// The samples sorted by group, stably: a group is played whole by one worker, so this is
/// the order of a one-worker batch (groups in slot order, each group's samples as played).
fn in_group_order(batch: Batch) -> Result<Batch, String> {
    if !batch.has(&GROUP_ID) {
        return Ok(batch);
    }
    let groups = batch.u64s(&GROUP_ID).map_err(|e| e.to_string())?;
    let mut order: Vec<usize> = (0..batch.num_samples()).collect();
    order.sort_by_key(|&i| groups[i]);
    Ok(batch.select(&order))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_come_back_in_group_order_keeping_each_group_as_played() {
        // Worker 0 played groups 0 and 2, worker 1 group 1; concatenated by worker.
        let batch = Batch::from_sequences([vec![1], vec![2], vec![3], vec![4], vec![5]])
            .with(&GROUP_ID, vec![0u64, 0, 2, 1, 1])
            .unwrap();
        let sorted = in_group_order(batch).unwrap();
        assert_eq!(sorted.tokens(), &[1, 2, 4, 5, 3]);
        assert_eq!(sorted.u64s(&GROUP_ID).unwrap(), &[0, 0, 1, 1, 2]);
    }
}
