//! One env's loop: reset, prompt, ask the inference loop for a reply, parse and step, until
//! the episode ends. Each env runs this on its own thread and talks to the inference loop
//! over crossbeam channels (AReaL's obs/act queues), so no env waits for another.
//!
//! Prompts follow REFERENCE.md, "Sample construction": trajectory-wise episodes grow one
//! [`Transcript`]; step-wise episodes build a fresh prompt each step from the instruction,
//! the last `history` (observation, action, reward) entries and the current observation.
//! The `Rollout`'s prompt templates (`crate::prompt`) write the system and user messages.
//! A turn's token budget is min(max_new_tokens, sequence_length − prompt length, model
//! context − prompt length); an episode that has no budget left ends as truncated.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use super::transcript::Transcript;
use crate::play_settings::{PlaySettings, SampleMode};
use crate::prompt::{EpisodeVars, HistoryTurn, TurnVars};
use roll_flow_envs::recording::EpisodeRecording;
use roll_flow_envs::{Env, EnvInfo, EnvSlot};
use roll_flow_model::generate::{AnswerChoices, FinishReason, GenerationOutput, GenerationRequest};
use roll_flow_model::TextTokenizer;

/// An env loop's error when its inference loop went away (whose own error is the cause).
pub(super) const INFERENCE_STOPPED: &str = "the inference loop stopped";

/// One turn: the state, the reply, what the env made of it.
#[derive(Clone, Debug)]
pub struct TurnRecord {
    /// The observation the reply answered.
    pub observation: String,
    /// The step-wise prompt (empty for trajectory-wise episodes).
    pub prompt: Vec<u32>,
    pub reply: Vec<u32>,
    pub logprobs: Vec<f32>,
    pub reply_text: String,
    pub reward: f32,
    pub info: EnvInfo,
}

/// A finished episode.
pub struct Episode {
    pub slot: EnvSlot,
    pub instruction: String,
    pub turns: Vec<TurnRecord>,
    /// The whole chat (trajectory-wise episodes).
    pub transcript: Option<Transcript>,
    pub success: bool,
    /// Ended by the turn limit, the env's budget or the sequence length.
    pub truncated: bool,
    pub recording: Option<EpisodeRecording>,
    /// The first prompt's length in tokens when it left no room for a reply (the episode
    /// ended before its first turn); `None` once a turn was played.
    pub first_prompt_without_room: Option<usize>,
}

impl Episode {
    /// An episode of `slot` before its first turn.
    pub fn start(slot: EnvSlot, instruction: String) -> Episode {
        Episode {
            slot,
            instruction,
            turns: Vec::new(),
            transcript: None,
            success: false,
            truncated: false,
            recording: None,
            first_prompt_without_room: None,
        }
    }

    pub fn total_reward(&self) -> f32 {
        self.turns.iter().map(|t| t.reward).sum()
    }
}

/// Refuses a step in which episodes were played but none got to reply because every first
/// prompt already filled the token budget (the batch would be empty, and training on
/// empty batches learns nothing). `context` is the model's longest sequence.
pub fn check_room_to_reply(
    episodes: &[Episode],
    settings: &PlaySettings,
    context: usize,
) -> Result<(), String> {
    let first_prompts: Option<Vec<usize>> = episodes
        .iter()
        .map(|e| e.first_prompt_without_room)
        .collect();
    let Some(&first) = first_prompts.as_ref().and_then(|p| p.first()) else {
        return Ok(());
    };
    Err(format!(
        "no episode could reply: the first prompt is {first} tokens, and a reply gets at most \
         min(max_new_tokens {}, sequence_length {} − prompt, model context {context} − \
         prompt) tokens, which is 0; shorten the prompt (`instruction: false` on the Rollout \
         node leaves out the env's instructions) or raise the Rollout's `sequence_length` \
         (and the model's context: `max_positions` for Tiny)",
        settings.max_new_tokens, settings.sequence_length
    ))
}

/// A message from an env to the inference loop: the next request, or `None` when done.
pub struct EnvMessage {
    pub env: usize,
    pub request: Option<GenerationRequest>,
    /// Whether the request's prompt continues this env's chat (trajectory-wise samples), so
    /// the inference loop may reuse the cached keys of the previous turn.
    pub continues_chat: bool,
}

/// Everything one env loop needs.
pub struct EpisodeJob<'a> {
    pub index: usize,
    pub slot: EnvSlot,
    pub env: Box<dyn Env>,
    pub tokenizer: &'a TextTokenizer,
    pub settings: &'a PlaySettings,
    pub guide: Option<Arc<AnswerChoices>>,
    /// Longest prompt + reply the model accepts.
    pub context: usize,
    pub seed: u64,
}

/// How an episode ended.
pub enum EpisodeOutcome {
    Played(Box<Episode>),
    /// The env failed a call in a way that loses only this episode (an env server's
    /// fault, [`roll_flow_envs::EnvError::loses_only_the_episode`]); its group is dropped.
    Lost {
        slot: EnvSlot,
        reason: String,
    },
}

/// Why [`play`] stopped early.
enum Stop {
    Lost(String),
    Fatal(String),
}

impl From<String> for Stop {
    fn from(message: String) -> Stop {
        Stop::Fatal(message)
    }
}

/// Runs the episode; always tells the inference loop when it is done.
pub fn run_episode(
    job: EpisodeJob<'_>,
    calls: Sender<EnvMessage>,
    replies: Receiver<GenerationOutput>,
) -> Result<EpisodeOutcome, String> {
    let index = job.index;
    let slot = job.slot.clone();
    let result = play(job, &calls, &replies);
    let _ = calls.send(EnvMessage {
        env: index,
        request: None,
        continues_chat: false,
    });
    match result {
        Ok(episode) => Ok(EpisodeOutcome::Played(Box::new(episode))),
        Err(Stop::Lost(reason)) => Ok(EpisodeOutcome::Lost { slot, reason }),
        Err(Stop::Fatal(message)) => Err(message),
    }
}

fn play(
    mut job: EpisodeJob<'_>,
    calls: &Sender<EnvMessage>,
    replies: &Receiver<GenerationOutput>,
) -> Result<Episode, Stop> {
    let tag = job.slot.env_tag.clone();
    let env_error = |e: roll_flow_envs::EnvError| {
        let message = format!("env `{tag}`: {e}");
        match e.loses_only_the_episode() {
            true => Stop::Lost(message),
            false => Stop::Fatal(message),
        }
    };
    let reset = job.env.reset(job.slot.seed).map_err(env_error)?;
    let tokenizer = job.tokenizer;
    let settings = job.settings;
    let vars = EpisodeVars {
        instruction: &reset.instruction,
        env: &tag,
        max_turns: job.slot.max_turns,
        actions: job.env.action_names(),
    };
    let system = settings.prompt.system(&vars)?;
    let user = |env: &dyn Env, index: usize, observation: &str, turns: &[TurnRecord]| {
        let turn = TurnVars {
            observation,
            index,
            valid_actions: env.valid_actions(),
            history: history(turns, settings),
        };
        settings.prompt.turn(&vars, &turn)
    };
    let mut transcript = match settings.samples {
        SampleMode::Trajectory => Some(Transcript::start(
            tokenizer,
            system.as_deref(),
            &user(job.env.as_ref(), 0, &reset.observation, &[])?,
        )?),
        SampleMode::Step { .. } => None,
    };
    let mut recording =
        (settings.record && job.env.renders_frames()).then(EpisodeRecording::default);
    if let Some(r) = &mut recording {
        r.capture(job.env.as_ref()).map_err(env_error)?;
    }
    let stop_tokens = tokenizer.stop_tokens();
    let mut episode = Episode::start(job.slot.clone(), reset.instruction.clone());
    let mut observation = reset.observation;
    for turn in 0..job.slot.max_turns {
        let prompt = match &transcript {
            Some(t) => t.tokens.clone(),
            None => {
                let text = user(job.env.as_ref(), turn, &observation, &episode.turns)?;
                Transcript::start(tokenizer, system.as_deref(), &text)?.tokens
            }
        };
        let limit = settings.sequence_length.min(job.context);
        let budget = settings
            .max_new_tokens
            .min(limit.saturating_sub(prompt.len()));
        if budget == 0 {
            episode.truncated = true;
            if turn == 0 {
                episode.first_prompt_without_room = Some(prompt.len());
            }
            break;
        }
        let request = GenerationRequest {
            prompt: prompt.clone(),
            max_new_tokens: budget,
            sampling: settings.sampling.clone(),
            stop_tokens: stop_tokens.clone(),
            seed: job.seed ^ (turn as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            guide: job.guide.clone(),
        };
        calls
            .send(EnvMessage {
                env: job.index,
                request: Some(request),
                continues_chat: transcript.is_some(),
            })
            .map_err(|_| INFERENCE_STOPPED.to_string())?;
        let output = replies.recv().map_err(|_| INFERENCE_STOPPED.to_string())?;
        if output.finish == FinishReason::NonFinite {
            return Err(Stop::Fatal(format!(
                "the policy's logits were not finite (NaN or infinite) in turn {} of an \
                 episode of env `{tag}`: its weights have diverged (an `lr` too large for \
                 its gradients); lower the model's `lr` and `--resume` from the last checkpoint",
                turn + 1
            )));
        }
        let stop = (output.finish == FinishReason::Stop)
            .then(|| *output.tokens.last().expect("stopped on a token"));
        let content = match stop {
            Some(_) => &output.tokens[..output.tokens.len() - 1],
            None => &output.tokens[..],
        };
        let reply_text = tokenizer
            .decode(content, false)
            .map_err(|e| e.to_string())?;
        let result = job.env.step(&reply_text).map_err(env_error)?;
        if let Some(r) = &mut recording {
            r.capture(job.env.as_ref()).map_err(env_error)?;
        }
        if let Some(t) = &mut transcript {
            t.add_reply(
                tokenizer,
                &output.tokens,
                &output.logprobs,
                stop,
                &reply_text,
            )?;
        }
        episode.turns.push(TurnRecord {
            observation: std::mem::replace(&mut observation, result.observation.clone()),
            prompt: if transcript.is_some() {
                Vec::new()
            } else {
                prompt
            },
            reply: output.tokens,
            logprobs: output.logprobs,
            reply_text,
            reward: result.reward,
            info: result.info,
        });
        episode.success |= result.info.success;
        if result.done() {
            episode.truncated = result.truncated && !result.terminated;
            break;
        }
        if turn + 1 == job.slot.max_turns {
            episode.truncated = true;
            break;
        }
        if let Some(t) = &mut transcript {
            t.add_user(
                tokenizer,
                &user(job.env.as_ref(), turn + 1, &observation, &[])?,
            )?;
        }
    }
    if let Some(mut t) = transcript {
        t.trim_after_last_reply();
        episode.transcript = Some(t);
    }
    episode.recording = recording;
    Ok(episode)
}

/// The earlier turns a step-wise prompt shows (the last `history`); none for trajectories,
/// whose chat holds them.
fn history(turns: &[TurnRecord], settings: &PlaySettings) -> Vec<HistoryTurn> {
    let SampleMode::Step { history } = settings.samples else {
        return Vec::new();
    };
    let first = turns.len().saturating_sub(history);
    (turns.iter().enumerate().skip(first))
        .map(|(k, t)| HistoryTurn {
            step: k + 1,
            observation: t.observation.clone(),
            action: t.reply_text.clone(),
            reward: format!("{}", t.reward),
        })
        .collect()
}
