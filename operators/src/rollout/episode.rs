//! Episodes: what one env's play gives ([`Episode`], one [`TurnRecord`] per turn), what it
//! needs ([`EpisodeJob`]) and the messages between envs and the inference loop
//! ([`EnvMessage`], AReaL's obs/act queues). [`super::episode_run`] plays them and says
//! how they ended.

use std::sync::Arc;

use super::transcript::Transcript;
use crate::play_settings::PlaySettings;
use roll_flow_envs::recording::EpisodeRecording;
use roll_flow_envs::{Env, EnvInfo, EnvSlot};
use roll_flow_model::generate::{AnswerChoices, GenerationRequest};
use roll_flow_model::TextTokenizer;

/// An env's error when its inference loop went away (whose own error is the cause).
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
    /// The policy version whose weights wrote the reply (a turn played before a partial
    /// rollout's cut is older than the step's).
    pub policy_version: u64,
}

/// A finished episode.
pub struct Episode {
    pub slot: EnvSlot,
    pub instruction: String,
    /// The system message the model read: the instruction by default, a `prompt.system`
    /// template's text, or none (`instruction: false`).
    pub system: Option<String>,
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
            system: None,
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

/// Everything one env's play needs (owned, so an episode a partial rollout cut off can
/// continue in the next step).
pub struct EpisodeJob {
    pub index: usize,
    pub slot: EnvSlot,
    pub env: Box<dyn Env>,
    pub tokenizer: Arc<TextTokenizer>,
    pub settings: Arc<PlaySettings>,
    pub guide: Option<Arc<AnswerChoices>>,
    /// Longest prompt + reply the model accepts.
    pub context: usize,
    pub seed: u64,
    /// The policy version playing the step.
    pub version: u64,
}
