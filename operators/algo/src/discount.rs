//! Discounted returns, the building block of REINFORCE, step-REINFORCE, agentic-REINFORCE
//! and GiGPO's step returns.
//!
//! G_t = r_t + γ·G_{t+1}, G_{T} = 0 past the end (ROLL `compute_reinforce_return`,
//! verl-agent `compute_step_discounted_returns`). Computed in f64.

use std::collections::HashMap;

/// Reverse discounted cumulative sum of `rewards`.
pub fn discounted_returns(rewards: &[f64], gamma: f64) -> Vec<f64> {
    let mut out = vec![0.0; rewards.len()];
    let mut next = 0.0;
    for t in (0..rewards.len()).rev() {
        next = rewards[t] + gamma * next;
        out[t] = next;
    }
    out
}

/// Per-step discounted returns of step samples: samples sharing a `trajectory` id are one
/// trajectory, ordered by `step`; returns are computed within each trajectory.
pub fn step_returns(rewards: &[f64], trajectory: &[u64], step: &[u64], gamma: f64) -> Vec<f64> {
    let mut out = vec![0.0; rewards.len()];
    for rows in trajectory_chains(trajectory, step) {
        let r: Vec<f64> = rows.iter().map(|&i| rewards[i]).collect();
        for (&i, g) in rows.iter().zip(discounted_returns(&r, gamma)) {
            out[i] = g;
        }
    }
    out
}

/// The step samples of each trajectory (rows sharing a `trajectory` id), ordered by
/// `step`; trajectories in the order of their first row, so the result is deterministic.
pub fn trajectory_chains(trajectory: &[u64], step: &[u64]) -> Vec<Vec<usize>> {
    let mut by_traj: HashMap<u64, Vec<usize>> = HashMap::new();
    let mut order = Vec::new();
    for (i, &t) in trajectory.iter().enumerate() {
        let rows = by_traj.entry(t).or_default();
        if rows.is_empty() {
            order.push(t);
        }
        rows.push(i);
    }
    order
        .iter()
        .filter_map(|t| by_traj.remove(t))
        .map(|mut rows| {
            rows.sort_by_key(|&i| step[i]);
            rows
        })
        .collect()
}

/// The first step index that occurs twice within one trajectory, if any.
pub fn repeated_step(trajectory: &[u64], step: &[u64]) -> Option<(u64, u64)> {
    let mut seen = std::collections::HashSet::new();
    trajectory
        .iter()
        .zip(step)
        .map(|(&t, &s)| (t, s))
        .find(|p| !seen.insert(*p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discounted_by_hand() {
        // r = [1, 0, 2], γ = 0.5: G2 = 2, G1 = 1, G0 = 1.5.
        assert_eq!(
            discounted_returns(&[1.0, 0.0, 2.0], 0.5),
            vec![1.5, 1.0, 2.0]
        );
        assert!(discounted_returns(&[], 0.9).is_empty());
    }

    #[test]
    fn step_returns_respect_trajectories_and_order() {
        // Trajectory 7 listed out of order (steps 1, 0), trajectory 3 a single step.
        let g = step_returns(&[1.0, 2.0, 5.0], &[7, 7, 3], &[1, 0, 0], 0.5);
        // traj 7: step0 r=2, step1 r=1 → G0 = 2 + 0.5 = 2.5, G1 = 1.
        assert_eq!(g, vec![1.0, 2.5, 5.0]);
        assert_eq!(repeated_step(&[7, 7, 3], &[1, 0, 0]), None);
        assert_eq!(repeated_step(&[7, 7], &[1, 1]), Some((7, 1)));
    }
}
