//! The episode metrics ROLL and RAGEN log, computed the same way for rollout and eval.
//!
//! - `score/mean|max|min`: episode total reward;
//! - `success`: fraction of episodes won;
//! - `effective_action_rate`: fraction of turns whose actions changed the state;
//! - `format_error_rate`: fraction of turns whose reply did not parse into valid actions;
//! - `response_length`: mean generated tokens per turn; `turns`: mean turns per episode;
//! - `truncated`: fraction of episodes cut by a turn, action or length limit.

use std::collections::BTreeMap;

use super::episode::Episode;

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// Adds the episode metrics, each key prefixed with `prefix`.
pub fn episode_metrics(episodes: &[&Episode], metrics: &mut BTreeMap<String, f64>, prefix: &str) {
    if episodes.is_empty() {
        return;
    }
    let scores: Vec<f64> = episodes.iter().map(|e| e.total_reward() as f64).collect();
    let turns = || episodes.iter().flat_map(|e| e.turns.iter());
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    let mut put = |key: &str, value: f64| {
        metrics.insert(format!("{prefix}{key}"), value);
    };
    put("score/mean", mean(scores.iter().copied()));
    put("score/max", scores.iter().copied().fold(f64::MIN, f64::max));
    put("score/min", scores.iter().copied().fold(f64::MAX, f64::min));
    put("success", mean(episodes.iter().map(|e| flag(e.success))));
    put(
        "effective_action_rate",
        mean(turns().map(|t| flag(t.info.action_is_effective))),
    );
    put(
        "format_error_rate",
        mean(turns().map(|t| flag(!t.info.action_is_valid))),
    );
    put(
        "response_length",
        mean(turns().map(|t| t.reply.len() as f64)),
    );
    put("turns", mean(episodes.iter().map(|e| e.turns.len() as f64)));
    put(
        "truncated",
        mean(episodes.iter().map(|e| flag(e.truncated))),
    );
}
