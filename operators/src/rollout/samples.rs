//! Turning finished episodes into the step's [`Batch`] (docs/REFERENCE.md, "Sample
//! construction").
//!
//! - Trajectory-wise: one sample per episode, the whole chat; each turn's reward sits on
//!   the last token of that turn's reply; `score` = `episode_return` = the total reward.
//! - Step-wise: one sample per turn, its own prompt plus the reply; `score` is the turn's
//!   reward, `episode_return` the episode's total, and `state_hash`/`observation` identify
//!   the state the reply answered (GiGPO's anchor states).
//!
//! Episodes that produced no reply (no token budget at all) give no sample.

use roll_flow_engine::batch::column::*;
use roll_flow_engine::{Batch, BatchError};

use super::episode::{Episode, TurnRecord};
use crate::play_settings::SampleMode;

use roll_flow_envs::action::extract_answer;
use roll_flow_envs::observation_hash;

/// The answer of one turn as the `outcome` column keeps it: the text the env read the
/// action from ([`extract_answer`]: inside the reply's first `<answer>…</answer>`, tags in
/// any case; the reply text includes the prompt's `reply_start`), else the whole reply, in
/// lower case with its runs of white space made one space, as the envs read actions
/// (`DOWN`, `down` and ` Down ` are one answer: a repetition penalty must not pay for
/// spelling an answer anew); the empty string when the env could not parse the reply, so
/// all such replies are one outcome.
fn turn_answer(turn: &TurnRecord) -> String {
    if !turn.info.action_is_valid {
        return String::new();
    }
    let text = turn.reply_text.as_str();
    let inside = extract_answer(text).unwrap_or(text);
    let words: Vec<&str> = inside.split_whitespace().collect();
    words.join(" ").to_lowercase()
}

/// The outcome of `turns`: their answers joined by newlines.
fn outcome(turns: &[TurnRecord]) -> String {
    let answers: Vec<String> = turns.iter().map(turn_answer).collect();
    answers.join("\n")
}

/// Per-sample values that every sample of one episode shares.
struct EpisodeColumns {
    env_tag: Vec<String>,
    group_id: Vec<u64>,
    trajectory_id: Vec<u64>,
    episode_return: Vec<f32>,
    turn_count: Vec<u64>,
    success: Vec<f32>,
    policy_version: Vec<u64>,
}

impl EpisodeColumns {
    fn new() -> Self {
        EpisodeColumns {
            env_tag: Vec::new(),
            group_id: Vec::new(),
            trajectory_id: Vec::new(),
            episode_return: Vec::new(),
            turn_count: Vec::new(),
            success: Vec::new(),
            policy_version: Vec::new(),
        }
    }

    fn push(&mut self, e: &Episode, group_size: usize, version: u64) {
        self.env_tag.push(e.slot.env_tag.clone());
        self.group_id.push(e.slot.group_id as u64);
        let trajectory = e.slot.group_id * group_size + e.slot.index_in_group;
        self.trajectory_id.push(trajectory as u64);
        self.episode_return.push(e.total_reward());
        self.turn_count.push(e.turns.len() as u64);
        self.success.push(if e.success { 1.0 } else { 0.0 });
        self.policy_version.push(version);
    }

    /// The version of a sample: the oldest of its turns' (an episode a partial rollout
    /// continued holds turns of an earlier step), `version` without turns.
    fn oldest(turns: &[TurnRecord], version: u64) -> u64 {
        turns
            .iter()
            .map(|t| t.policy_version)
            .min()
            .unwrap_or(version)
    }

    fn write(self, batch: &mut Batch) -> Result<(), BatchError> {
        batch.set(&ENV_TAG, self.env_tag)?;
        batch.set(&GROUP_ID, self.group_id)?;
        batch.set(&TRAJECTORY_ID, self.trajectory_id)?;
        batch.set(&EPISODE_RETURN, self.episode_return)?;
        batch.set(&TURN_COUNT, self.turn_count)?;
        batch.set(&SUCCESS, self.success)?;
        batch.set(&POLICY_VERSION, self.policy_version)
    }
}

/// Sets `policy_lag` of `batch`, played by `version` whose weights are `lag` steps old:
/// `lag` for a sample of that version, more for one with older turns (a partial rollout
/// continued it from an earlier step).
pub fn set_policy_lag(batch: &mut Batch, lag: u64, version: u64) -> Result<(), BatchError> {
    let lags = (batch.u64s(&POLICY_VERSION)?.iter())
        .map(|&v| lag + version.saturating_sub(v))
        .collect::<Vec<u64>>();
    batch.set(&POLICY_LAG, lags)
}

/// Per-token columns, appended sample by sample.
#[derive(Default)]
struct TokenColumns {
    sequences: Vec<Vec<u32>>,
    mask: Vec<bool>,
    behaviour: Vec<f32>,
    turn: Vec<i64>,
    reward: Vec<f32>,
    score: Vec<f32>,
}

impl TokenColumns {
    fn into_batch(self) -> Result<Batch, BatchError> {
        let mut batch = Batch::from_sequences(self.sequences);
        batch.set(&RESPONSE_MASK, self.mask)?;
        batch.set(&BEHAVIOUR_LOGPROB, self.behaviour)?;
        batch.set(&TOKEN_TURN, self.turn)?;
        batch.set(&TOKEN_REWARD, self.reward)?;
        batch.set(&SCORE, self.score)?;
        Ok(batch)
    }
}

/// One sample per episode.
/// The step's batch in the rollout's sample mode: [`trajectory_batch`] or [`step_batch`].
pub fn batch(
    mode: &SampleMode,
    episodes: &[Episode],
    group_size: impl Fn(&str) -> usize,
    version: u64,
) -> Result<Batch, BatchError> {
    match mode {
        SampleMode::Trajectory => trajectory_batch(episodes, group_size, version),
        SampleMode::Step { .. } => step_batch(episodes, group_size),
    }
}

pub fn trajectory_batch(
    episodes: &[Episode],
    group_size: impl Fn(&str) -> usize,
    version: u64,
) -> Result<Batch, BatchError> {
    let mut tokens = TokenColumns::default();
    let mut shared = EpisodeColumns::new();
    let mut outcomes = Vec::new();
    for e in episodes {
        let Some(t) = e.transcript.as_ref().filter(|t| !t.reply_ends.is_empty()) else {
            continue;
        };
        let mut reward = vec![0.0f32; t.tokens.len()];
        for (turn, &end) in e.turns.iter().zip(&t.reply_ends) {
            reward[end] += turn.reward;
        }
        tokens.sequences.push(t.tokens.clone());
        tokens.mask.extend(&t.response);
        tokens.behaviour.extend(&t.behaviour);
        tokens.turn.extend(&t.turn);
        tokens.reward.extend(reward);
        tokens.score.push(e.total_reward());
        let oldest = EpisodeColumns::oldest(&e.turns, version);
        shared.push(e, group_size(&e.slot.env_tag), oldest);
        outcomes.push(outcome(&e.turns));
    }
    let mut batch = tokens.into_batch()?;
    shared.write(&mut batch)?;
    batch.set(&OUTCOME, outcomes)?;
    Ok(batch)
}

/// One sample per turn, of the version that played the turn.
pub fn step_batch(
    episodes: &[Episode],
    group_size: impl Fn(&str) -> usize,
) -> Result<Batch, BatchError> {
    let mut tokens = TokenColumns::default();
    let mut shared = EpisodeColumns::new();
    let (mut hashes, mut steps, mut observations) = (Vec::new(), Vec::new(), Vec::new());
    let mut outcomes = Vec::new();
    for e in episodes {
        for (k, turn) in e.turns.iter().enumerate() {
            let (p, r) = (turn.prompt.len(), turn.reply.len());
            let mut seq = turn.prompt.clone();
            seq.extend(&turn.reply);
            tokens.sequences.push(seq);
            tokens.mask.extend((0..p + r).map(|i| i >= p));
            tokens
                .behaviour
                .extend(std::iter::repeat_n(0.0, p).chain(turn.logprobs.iter().copied()));
            tokens.turn.extend(std::iter::repeat_n(0, p + r));
            tokens
                .reward
                .extend((0..p + r).map(|i| if i + 1 == p + r { turn.reward } else { 0.0 }));
            tokens.score.push(turn.reward);
            shared.push(e, group_size(&e.slot.env_tag), turn.policy_version);
            hashes.push(observation_hash(&turn.observation));
            steps.push(k as u64);
            observations.push(turn.observation.clone());
            outcomes.push(outcome(std::slice::from_ref(turn)));
        }
    }
    let mut batch = tokens.into_batch()?;
    shared.write(&mut batch)?;
    batch.set(&STATE_HASH, hashes)?;
    batch.set(&STEP_INDEX, steps)?;
    batch.set(&OBSERVATION, observations)?;
    batch.set(&OUTCOME, outcomes)?;
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::episode::TurnRecord;
    use crate::rollout::transcript::Transcript;
    use roll_flow_envs::{EnvInfo, EnvSlot};

    fn turn(observation: &str, prompt: Vec<u32>, reply: Vec<u32>, reward: f32) -> TurnRecord {
        TurnRecord {
            observation: observation.into(),
            prompt,
            logprobs: vec![-0.5; reply.len()],
            reply,
            reply_text: String::new(),
            reward,
            info: EnvInfo::default(),
            policy_version: 0,
        }
    }

    fn episode(turns: Vec<TurnRecord>, transcript: Option<Transcript>) -> Episode {
        let slot = EnvSlot {
            env_tag: "train".into(),
            group_id: 3,
            group_in_tag: 3,
            index_in_group: 1,
            seed: 9,
            max_turns: 5,
        };
        Episode {
            turns,
            transcript,
            success: true,
            ..Episode::start(slot, String::new())
        }
    }

    #[test]
    fn trajectory_sample_puts_each_turn_reward_on_its_last_reply_token() {
        // Prompt [1, 2], reply [10, 11], glue [3], reply [12].
        let mut transcript = Transcript::default();
        transcript.tokens = vec![1, 2, 10, 11, 3, 12];
        transcript.response = vec![false, false, true, true, false, true];
        transcript.turn = vec![0, 0, 0, 0, 1, 1];
        transcript.behaviour = vec![0.0, 0.0, -0.5, -0.5, 0.0, -0.5];
        transcript.reply_ends = vec![3, 5];
        // The first turn played before a partial rollout's cut (version 6), the second after.
        let turns = vec![
            TurnRecord {
                policy_version: 6,
                ..turn("a", vec![], vec![10, 11], -0.1)
            },
            TurnRecord {
                policy_version: 7,
                ..turn("b", vec![], vec![12], 1.0)
            },
        ];
        let batch = trajectory_batch(&[episode(turns, Some(transcript))], |_| 4, 7).unwrap();
        assert_eq!(batch.num_samples(), 1);
        assert_eq!(
            batch.f32s(&TOKEN_REWARD).unwrap(),
            &[0.0, 0.0, 0.0, -0.1, 0.0, 1.0]
        );
        assert_eq!(batch.f32s(&SCORE).unwrap(), &[0.9]);
        assert_eq!(batch.u64s(&TRAJECTORY_ID).unwrap(), &[3 * 4 + 1]);
        // A sample is as old as its oldest turn.
        assert_eq!(batch.u64s(&POLICY_VERSION).unwrap(), &[6]);
        assert_eq!(batch.i64s(&TOKEN_TURN).unwrap(), &[0, 0, 0, 0, 1, 1]);
        // Without turns (no reply), the step's version.
        assert_eq!(EpisodeColumns::oldest(&[], 7), 7);
        // Neither turn parsed (EnvInfo's default): one outcome of two empty answers.
        assert_eq!(batch.strs(&OUTCOME).unwrap(), &["\n".to_string()]);
    }

    /// A turn's answer is the text inside its tags, else the reply, in lower case with its
    /// white space collapsed; a reply the env refused is "".
    #[test]
    fn outcomes_are_the_answers_the_env_accepted() {
        let valid = |text: &str| TurnRecord {
            reply_text: text.into(),
            info: EnvInfo {
                action_is_valid: true,
                ..EnvInfo::default()
            },
            ..turn("a", vec![], vec![1], 0.0)
        };
        assert_eq!(turn_answer(&valid("<answer> Up </answer>")), "up");
        // The first complete pair, tags in any case, as the env reads it.
        assert_eq!(
            turn_answer(&valid("Left</answer> and <answer>Up</answer>")),
            "up"
        );
        assert_eq!(
            turn_answer(&valid("<ANSWER>DOWN</Answer> or <answer>Up</answer>")),
            "down"
        );
        assert_eq!(turn_answer(&valid("  Right \n")), "right");
        let spaced = valid("<answer>Left \n  ||\tUp</answer>");
        assert_eq!(turn_answer(&spaced), "left || up");
        let refused = TurnRecord {
            reply_text: "<answer>Up</answer>".into(),
            ..turn("a", vec![], vec![1], 0.0)
        };
        assert_eq!(turn_answer(&refused), "");
        let turns = [
            valid("<answer>Up</answer>"),
            refused,
            valid("<answer>Left</answer>"),
        ];
        assert_eq!(outcome(&turns), "up\n\nleft");
    }

    #[test]
    fn step_samples_carry_their_reward_state_and_episode_return() {
        let turns = vec![
            TurnRecord {
                policy_version: 3,
                ..turn("a", vec![1, 2], vec![10], 0.0)
            },
            TurnRecord {
                policy_version: 4,
                ..turn("b", vec![1, 3, 4], vec![11, 12], 1.0)
            },
        ];
        let batch = step_batch(&[episode(turns, None)], |_| 2).unwrap();
        assert_eq!(batch.num_samples(), 2);
        assert_eq!(batch.u64s(&POLICY_VERSION).unwrap(), &[3, 4]);
        assert_eq!(batch.tokens(), &[1, 2, 10, 1, 3, 4, 11, 12]);
        assert_eq!(
            batch.bools(&RESPONSE_MASK).unwrap(),
            &[false, false, true, false, false, false, true, true]
        );
        assert_eq!(batch.f32s(&SCORE).unwrap(), &[0.0, 1.0]);
        assert_eq!(batch.f32s(&EPISODE_RETURN).unwrap(), &[1.0, 1.0]);
        assert_eq!(batch.u64s(&STEP_INDEX).unwrap(), &[0, 1]);
        let hashes = batch.u64s(&STATE_HASH).unwrap();
        assert_eq!(hashes, &[observation_hash("a"), observation_hash("b")]);
        assert_eq!(batch.f32s(&TOKEN_REWARD).unwrap()[7], 1.0);
        assert_eq!(batch.strs(&OUTCOME).unwrap(), &["", ""]);
    }
}
