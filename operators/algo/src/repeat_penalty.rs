//! Outcome repetition penalty: a sample whose outcome others of its group repeat scores
//! less, so a group keeps trying different answers instead of collapsing onto one.
//!
//! After the *batch exploration* of Song, Kempe and Munos 2025 ("Outcome-based Exploration
//! for LLM Reasoning", arXiv:2509.06941), which penalises answers repeated within a batch
//! of samples of one question. Here the batch is the sample's group (`group_id`: same
//! initial state) and the outcome the rollout's `outcome` column (the answers the env
//! accepted, one per turn; a reply it could not parse is the outcome "not an answer",
//! which all such replies share). For sample i of group g with n_g samples:
//!
//! s_i ← s_i − c · |{j ∈ g, j ≠ i : o_j = o_i}| / (n_g − 1)
//!
//! so the penalty lies in [0, c]: 0 for an outcome no other sample gave, c when every
//! other sample gave it. A sample with no answer at all (its outcome is blank: the env
//! parsed none of its replies) is never a new outcome and takes c whatever its group did;
//! else a lone malformed reply would score above the answers its group agrees on. A group
//! whose samples all agree loses c each and, centred on its mean, keeps no gradient, as
//! without the penalty; a group that differs pushes its repeated outcomes down against its
//! rare ones. The penalty is applied to `score` and to
//! the sample's last response token's `token_reward`, before any estimator reads them
//! (the order of [`super::shaping`]).
//!
//! Why: on a task where the pretrained model prefers one answer whatever the input (the
//! instruction's example), GRPO sharpens that preference until every sample of every group
//! agrees and no gradient is left; the successes of the other answers, board by board, are
//! what should be learnt.
//!
//! RON: `shaping: (repeat_penalty: 0.5)` on any estimator; off by default.

use std::collections::HashMap;

use roll_flow_engine::batch::column::{GROUP_ID, OUTCOME, RESPONSE_MASK, SCORE, TOKEN_REWARD};
use roll_flow_engine::Batch;

use super::algo_stats::AlgoStats;
use super::batch_read::{read_bool, read_f32, read_str, read_u64};
use super::error::AlgoError;

/// Subtracts each sample's repetition penalty at weight `c` from `score` and from its last
/// response token's `token_reward` (each where the batch has it: the estimator reads one
/// or both); reports the mean penalty and the mean number of distinct outcomes a group had.
pub fn penalise_repeats(
    batch: &mut Batch,
    c: f32,
    node: &'static str,
    stats: &mut AlgoStats,
) -> Result<(), AlgoError> {
    let groups = read_u64(batch, node, &GROUP_ID)?;
    let outcomes = read_str(batch, node, &OUTCOME)?;
    let penalties = repeat_penalties(groups, outcomes, c);
    let distinct = distinct_per_group(groups, outcomes);
    if batch.has(&SCORE) {
        let mut scores = read_f32(batch, node, &SCORE)?.to_vec();
        for (s, p) in scores.iter_mut().zip(&penalties) {
            *s -= p;
        }
        batch
            .set(&SCORE, scores)
            .map_err(|source| AlgoError::Batch { node, source })?;
    }
    if batch.has(&TOKEN_REWARD) {
        let mask = read_bool(batch, node, &RESPONSE_MASK)?;
        let mut rewards = read_f32(batch, node, &TOKEN_REWARD)?.to_vec();
        for (i, p) in penalties.iter().enumerate() {
            let range = batch.sample_range(i);
            if let Some(last) = range.rev().find(|&t| mask[t]) {
                rewards[last] -= p;
            }
        }
        batch
            .set(&TOKEN_REWARD, rewards)
            .map_err(|source| AlgoError::Batch { node, source })?;
    }
    let n = penalties.len().max(1) as f64;
    let mean = penalties.iter().map(|&p| p as f64).sum::<f64>() / n;
    stats.insert("adv/repeat_penalty/mean".into(), mean);
    stats.insert("adv/repeat_penalty/distinct_per_group".into(), distinct);
    Ok(())
}

/// c · (how many others of the sample's group share its outcome) / (group size − 1); 0 in
/// a group of one; c for a blank outcome (no answer).
pub fn repeat_penalties(groups: &[u64], outcomes: &[String], c: f32) -> Vec<f32> {
    let mut sizes: HashMap<u64, usize> = HashMap::new();
    let mut same: HashMap<(u64, &str), usize> = HashMap::new();
    for (&g, o) in groups.iter().zip(outcomes) {
        *sizes.entry(g).or_default() += 1;
        *same.entry((g, o.as_str())).or_default() += 1;
    }
    groups
        .iter()
        .zip(outcomes)
        .map(|(&g, o)| match sizes[&g] {
            _ if o.trim().is_empty() => c,
            1 => 0.0,
            n => c * (same[&(g, o.as_str())] - 1) as f32 / (n - 1) as f32,
        })
        .collect()
}

/// The mean over groups of the number of distinct outcomes in a group.
fn distinct_per_group(groups: &[u64], outcomes: &[String]) -> f64 {
    let mut distinct: HashMap<u64, std::collections::HashSet<&str>> = HashMap::new();
    for (&g, o) in groups.iter().zip(outcomes) {
        distinct.entry(g).or_default().insert(o.as_str());
    }
    let total: usize = distinct.values().map(|set| set.len()).sum();
    total as f64 / distinct.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    /// Hand-computed: group 0 of four (Up, Up, Up, Left), group 1 of two alike, group 2 of
    /// one, group 3 with no answer in one sample of three (blank over two turns).
    #[test]
    fn penalty_is_the_share_of_the_others_that_repeat_the_outcome() {
        let groups = [0, 0, 0, 0, 1, 1, 2, 3, 3, 3];
        let outcomes = strings(&["Up", "Up", "Up", "Left", "a", "a", "Down", "\n", "b", "c"]);
        let p = repeat_penalties(&groups, &outcomes, 0.6);
        let expected = [0.4, 0.4, 0.4, 0.0, 0.6, 0.6, 0.0, 0.6, 0.0, 0.0];
        for (a, b) in p.iter().zip(expected) {
            assert!((a - b).abs() < 1e-6, "{p:?}");
        }
        assert_eq!(
            distinct_per_group(&groups, &outcomes),
            (2 + 1 + 1 + 3) as f64 / 4.0
        );
    }

    /// The penalty reaches `score` and the last response token's `token_reward`, nothing
    /// else.
    #[test]
    fn score_and_last_response_reward_are_penalised() {
        let mut batch = Batch::from_sequences(vec![vec![1, 2, 3, 4], vec![5, 6, 7], vec![8, 9]]);
        batch
            .set(
                &RESPONSE_MASK,
                vec![false, true, true, false, false, true, true, false, true],
            )
            .unwrap();
        batch
            .set(
                &TOKEN_REWARD,
                vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0],
            )
            .unwrap();
        batch.set(&SCORE, vec![1.0f32, 0.5, 0.0]).unwrap();
        batch.set(&GROUP_ID, vec![3u64, 3, 3]).unwrap();
        batch.set(&OUTCOME, strings(&["Up", "Up", "Left"])).unwrap();
        let mut stats = AlgoStats::new();
        penalise_repeats(&mut batch, 0.5, "Grpo", &mut stats).unwrap();
        assert_eq!(batch.f32s(&SCORE).unwrap(), &[0.75, 0.25, 0.0]);
        assert_eq!(
            batch.f32s(&TOKEN_REWARD).unwrap(),
            &[0.0, 0.0, 0.75, 0.0, 0.0, 0.0, 0.25, 0.0, 0.0]
        );
        assert!((stats["adv/repeat_penalty/mean"] - 1.0 / 6.0).abs() < 1e-9);
        assert_eq!(stats["adv/repeat_penalty/distinct_per_group"], 2.0);
    }

    /// Without an `outcome` column the error names it.
    #[test]
    fn a_missing_outcome_is_named() {
        let mut batch = Batch::from_sequences(vec![vec![1, 2]]);
        batch.set(&SCORE, vec![1.0f32]).unwrap();
        batch.set(&GROUP_ID, vec![0u64]).unwrap();
        let err = penalise_repeats(&mut batch, 0.5, "Grpo", &mut AlgoStats::new()).unwrap_err();
        assert!(err.to_string().contains("outcome"), "{err}");
    }
}
