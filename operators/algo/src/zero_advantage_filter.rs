//! Dropping the samples that carry no policy gradient.
//!
//! A sample whose response advantages are all zero adds nothing to the policy-gradient term
//! Σ_t A_t·∇log π(y_t): with group-normalised estimators (GRPO, StarPO, GiGPO) that is every
//! sample of a group whose members all scored the same. DAPO's dynamic sampling (Yu et al.
//! 2025, §3.2; verl `algorithm.filter_groups`) and StarPO-S's variance filter (RAGEN) drop
//! such groups before the update; this filter drops the samples themselves, whatever the
//! estimator, so `LogProb` and `ActorStep` downstream spend no forward or backward pass on
//! them. What changes besides the cost: token-mean losses average over the kept tokens
//! only, and the entropy bonus sees only them. When no sample is informative the batch is
//! kept whole, so the update still runs (on its entropy and KL terms), and nothing counts
//! as dropped.
//!
//! Stat: `adv/dropped_zero_samples`, the number of samples removed from the batch.
//!
//! [`no_policy_gradient`] says when no sample is informative: the policy-gradient term is
//! then 0 for any weights, and an `ActorStep` whose objective has no other term adds zero
//! gradients instead of running its forward and backward passes (the same update).
//!
//! RON: `shaping: (drop_zero_advantage: true)` on any estimator; off by default, as in verl.
//! Keep it off for a critic-based pipeline whose `CriticStep` should see every sample.

use roll_flow_engine::batch::column::ADVANTAGES;
use roll_flow_engine::Batch;

use super::algo_stats::AlgoStats;
use super::batch_read::{read_f32, read_mask};
use super::error::AlgoError;

/// Removes the samples whose response tokens all have advantage 0 (unless that is every
/// sample: then the batch stays whole); reports how many went.
pub fn drop_zero_advantage(
    batch: &mut Batch,
    node: &'static str,
    stats: &mut AlgoStats,
) -> Result<(), AlgoError> {
    let informative = informative_samples(batch, node)?;
    let dropped = if informative.is_empty() {
        0
    } else {
        batch.num_samples() - informative.len()
    };
    stats.insert("adv/dropped_zero_samples".into(), dropped as f64);
    if dropped > 0 {
        *batch = batch.select(&informative);
    }
    Ok(())
}

/// Whether every response token of `batch` has advantage 0, so that Σ_t A_t·∇log π(y_t)
/// is 0 whatever the weights.
pub fn no_policy_gradient(batch: &Batch, node: &'static str) -> Result<bool, AlgoError> {
    Ok(informative_samples(batch, node)?.is_empty())
}

/// The samples with a response token whose advantage is not 0, in batch order.
fn informative_samples(batch: &Batch, node: &'static str) -> Result<Vec<usize>, AlgoError> {
    let advantages = read_f32(batch, node, &ADVANTAGES)?;
    let mask = read_mask(batch, node)?;
    let offsets = batch.offsets();
    Ok((0..batch.num_samples())
        .filter(|&s| {
            let tokens = offsets[s]..offsets[s + 1];
            tokens.into_iter().any(|t| mask[t] && advantages[t] != 0.0)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_batches::{f32s, get, with_masks};

    #[test]
    fn drops_samples_whose_response_advantages_are_all_zero() {
        // Sample 1's only non-zero advantage sits on a prompt token (mask 0).
        let mut b = with_masks(&[&[0, 1, 1], &[1, 0], &[1], &[0, 1]]);
        f32s(
            &mut b,
            &ADVANTAGES,
            &[0.0, 0.5, -0.5, 0.0, 2.0, 0.0, 0.0, -1.0],
        );
        let mut stats = AlgoStats::new();
        drop_zero_advantage(&mut b, "test", &mut stats).unwrap();
        assert_eq!(b.num_samples(), 2);
        assert_eq!(get(&b, &ADVANTAGES), vec![0.0, 0.5, -0.5, 0.0, -1.0]);
        assert_eq!(stats["adv/dropped_zero_samples"], 2.0);
        assert!(!no_policy_gradient(&b, "test").unwrap());
    }

    #[test]
    fn keeps_the_whole_batch_when_nothing_is_informative() {
        let mut b = with_masks(&[&[1, 1], &[1]]);
        f32s(&mut b, &ADVANTAGES, &[0.0, 0.0, 0.0]);
        assert!(no_policy_gradient(&b, "test").unwrap());
        let mut stats = AlgoStats::new();
        drop_zero_advantage(&mut b, "test", &mut stats).unwrap();
        assert_eq!(b.num_samples(), 2);
        assert_eq!(get(&b, &ADVANTAGES), vec![0.0, 0.0, 0.0]);
        assert_eq!(
            stats["adv/dropped_zero_samples"], 0.0,
            "nothing was dropped"
        );
    }
}
