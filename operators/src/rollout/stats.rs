//! The episode metrics ROLL and RAGEN log, computed the same way for rollout and eval.
//!
//! - `score/mean|max|min`: episode total reward;
//! - `success`: fraction of episodes won;
//! - `effective_action_rate`: fraction of turns whose actions changed the state;
//! - `format_error_rate`: fraction of turns whose reply did not parse into valid actions;
//! - `response_length`: mean generated tokens per turn; `turns`: mean turns per episode;
//! - `truncated`: fraction of episodes cut by a turn, action or length limit;
//! - `info/<name>`: the mean of an env's own step metric over the turns that report it
//!   (WebShop's reward parts, reported on purchases: `info/r_type`, `info/r_att`, ...).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::episode::Episode;

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// What the episode metrics read of an episode: small, so that the workers of a
/// data-parallel run gather them and report the metrics of the whole step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpisodeSummary {
    /// The episode's slot position ([`roll_flow_envs::manager::EnvManager::slot_position`]):
    /// gathered summaries are put in this order, the order one worker plays them in.
    pub position: usize,
    pub env_tag: String,
    pub reward: f64,
    pub success: bool,
    pub truncated: bool,
    pub turns: Vec<TurnSummary>,
}

/// What the episode metrics read of a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnSummary {
    pub effective: bool,
    pub valid: bool,
    pub reply_tokens: usize,
    pub metrics: Vec<(String, f32)>,
}

impl EpisodeSummary {
    pub fn of(episode: &Episode, position: usize) -> EpisodeSummary {
        EpisodeSummary {
            position,
            env_tag: episode.slot.env_tag.clone(),
            reward: episode.total_reward() as f64,
            success: episode.success,
            truncated: episode.truncated,
            turns: episode
                .turns
                .iter()
                .map(|t| TurnSummary {
                    effective: t.info.action_is_effective,
                    valid: t.info.action_is_valid,
                    reply_tokens: t.reply.len(),
                    metrics: t
                        .info
                        .metrics
                        .iter()
                        .map(|(name, value)| (name.to_string(), value))
                        .collect(),
                })
                .collect(),
        }
    }
}

/// Adds the episode metrics, each key prefixed with `prefix`.
pub fn episode_metrics(episodes: &[&Episode], metrics: &mut BTreeMap<String, f64>, prefix: &str) {
    let summaries: Vec<EpisodeSummary> = episodes
        .iter()
        .enumerate()
        .map(|(i, e)| EpisodeSummary::of(e, i))
        .collect();
    summary_metrics(&summaries, metrics, prefix);
}

/// [`episode_metrics`] from the episodes' summaries.
pub fn summary_metrics(
    episodes: &[EpisodeSummary],
    metrics: &mut BTreeMap<String, f64>,
    prefix: &str,
) {
    if episodes.is_empty() {
        return;
    }
    let scores: Vec<f64> = episodes.iter().map(|e| e.reward).collect();
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
        mean(turns().map(|t| flag(t.effective))),
    );
    put("format_error_rate", mean(turns().map(|t| flag(!t.valid))));
    put(
        "response_length",
        mean(turns().map(|t| t.reply_tokens as f64)),
    );
    put("turns", mean(episodes.iter().map(|e| e.turns.len() as f64)));
    put(
        "truncated",
        mean(episodes.iter().map(|e| flag(e.truncated))),
    );
    let mut reported: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for (name, value) in turns().flat_map(|t| t.metrics.iter()) {
        let entry = reported.entry(name).or_default();
        entry.0 += f64::from(*value);
        entry.1 += 1;
    }
    for (name, (sum, n)) in reported {
        put(&format!("info/{name}"), sum / n as f64);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use roll_flow_envs::{EnvInfo, EnvSlot, StepMetrics};

    use super::episode_metrics;
    use crate::rollout::episode::{Episode, TurnRecord};

    fn turn(metrics: &[(&'static str, f32)]) -> TurnRecord {
        let mut info = EnvInfo::default();
        for &(name, value) in metrics {
            info.metrics.push(name, value);
        }
        TurnRecord {
            observation: String::new(),
            prompt: Vec::new(),
            reply: vec![1, 2],
            logprobs: vec![0.0, 0.0],
            reply_text: String::new(),
            reward: 0.0,
            info,
            policy_version: 0,
        }
    }

    fn episode(turns: Vec<TurnRecord>) -> Episode {
        let slot = EnvSlot {
            env_tag: "train".into(),
            group_id: 0,
            group_in_tag: 0,
            index_in_group: 0,
            seed: 0,
            max_turns: 4,
        };
        Episode {
            turns,
            ..Episode::start(slot, String::new())
        }
    }

    #[test]
    fn env_metrics_are_averaged_over_the_turns_that_report_them() {
        // Two purchases (r_type 1 and 0.5; r_option only on the first) among three turns.
        let a = episode(vec![turn(&[]), turn(&[("r_type", 1.0), ("r_option", 0.5)])]);
        let b = episode(vec![turn(&[("r_type", 0.5)])]);
        let mut metrics = BTreeMap::new();
        episode_metrics(&[&a, &b], &mut metrics, "eval/");
        assert_eq!(metrics["eval/info/r_type"], 0.75);
        assert_eq!(metrics["eval/info/r_option"], 0.5);
        // No env metrics, no `info/` keys.
        let mut plain = BTreeMap::new();
        episode_metrics(&[&episode(vec![turn(&[])])], &mut plain, "");
        assert!(plain.keys().all(|k| !k.starts_with("info/")));
        assert!(StepMetrics::default().is_empty());
    }
}
