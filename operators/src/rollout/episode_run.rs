//! An episode in play: reset, prompt, ask for a reply, parse and step, until the episode
//! ends, as a state that waits between turns. Any thread of the env pool
//! ([`super::env_pool`]) carries it from one reply to its next request, so a thousand envs
//! need no thousand threads.
//!
//! Prompts follow docs/REFERENCE.md, "Sample construction": trajectory-wise episodes grow one
//! [`Transcript`]; step-wise episodes build a fresh prompt each step from the instruction,
//! the last `history` (observation, action, reward) entries and the current observation.
//! The `Rollout`'s prompt templates (`crate::prompt`) write the system and user messages.
//! A turn's token budget is min(max_new_tokens, sequence_length − prompt length, model
//! context − prompt length); an episode that has no budget left ends as truncated.

use super::episode::{Episode, EpisodeJob, TurnRecord};
use super::transcript::Transcript;
use crate::play_settings::SampleMode;
use crate::prompt::{EpisodeVars, HistoryTurn, TurnVars};
use roll_flow_envs::recording::EpisodeRecording;
use roll_flow_envs::{EnvError, EnvSlot};
use roll_flow_model::generate::{FinishReason, GenerationOutput, GenerationRequest};

/// How an episode ended.
pub enum EpisodeOutcome {
    Played(Box<Episode>),
    /// The env failed a call in a way that loses only this episode (an env server's
    /// fault, [`roll_flow_envs::EnvError::loses_only_the_episode`]); its group is dropped.
    Lost {
        slot: EnvSlot,
        reason: String,
    },
    /// A partial rollout cut it off before it ended: its tag had its groups
    /// ([`super::early_cut`]).
    Unfinished(Unfinished),
}

/// An episode a partial rollout cut off, as it stood.
pub enum Unfinished {
    /// Not started: it resets with its group's seed when it continues.
    Unstarted(EpisodeJob),
    /// Between two turns: it continues with its next request.
    Running(Box<EpisodeRun>),
}

impl Unfinished {
    pub fn slot(&self) -> &EnvSlot {
        match self {
            Unfinished::Unstarted(job) => &job.slot,
            Unfinished::Running(run) => run.slot(),
        }
    }

    /// Moves the episode into group `group_id` (`group_in_tag` within its tag) of a step
    /// played by policy `version`, to continue there.
    pub fn continue_as(&mut self, group_id: usize, group_in_tag: usize, version: u64) {
        let job = match self {
            Unfinished::Unstarted(job) => job,
            Unfinished::Running(run) => {
                run.episode.slot.group_id = group_id;
                run.episode.slot.group_in_tag = group_in_tag;
                &mut run.job
            }
        };
        job.slot.group_id = group_id;
        job.slot.group_in_tag = group_in_tag;
        job.version = version;
    }
}

/// Why an episode stopped early.
pub(super) enum Stop {
    /// An env server's fault that loses only this episode (its group is dropped).
    Lost(String),
    /// An error that stops the run.
    Fatal(String),
}

impl From<String> for Stop {
    fn from(message: String) -> Stop {
        Stop::Fatal(message)
    }
}

impl Stop {
    /// The outcome of an episode that stopped here.
    pub(super) fn outcome(self, slot: EnvSlot) -> Result<EpisodeOutcome, String> {
        match self {
            Stop::Lost(reason) => Ok(EpisodeOutcome::Lost { slot, reason }),
            Stop::Fatal(message) => Err(message),
        }
    }
}

/// An episode between two turns: what it played so far and the request it waits on.
pub struct EpisodeRun {
    job: EpisodeJob,
    transcript: Option<Transcript>,
    recording: Option<EpisodeRecording>,
    episode: Episode,
    /// The observation the next reply answers.
    observation: String,
    /// The turn the next reply plays (0-based).
    turn: usize,
    /// The pending request's prompt (kept for step-wise samples).
    prompt: Vec<u32>,
    /// The env's action names and the tokenizer's stop tokens, read once per episode.
    actions: Vec<String>,
    stop_tokens: Vec<u32>,
}

impl EpisodeRun {
    /// Resets the env and writes the first prompt.
    pub(super) fn start(mut job: EpisodeJob) -> Result<EpisodeRun, Stop> {
        let reset = job.env.reset(job.slot.seed).map_err(env_error(&job))?;
        let mut run = EpisodeRun {
            transcript: None,
            recording: None,
            episode: Episode::start(job.slot.clone(), reset.instruction),
            observation: reset.observation,
            turn: 0,
            prompt: Vec::new(),
            actions: job.env.action_names(),
            stop_tokens: job.tokenizer.stop_tokens(),
            job,
        };
        run.episode.system = run.job.settings.prompt.system(&run.vars())?;
        if run.job.settings.samples == SampleMode::Trajectory {
            let first = run.user_message(0, &run.observation, &[])?;
            let transcript = Transcript::start(
                &run.job.tokenizer,
                run.episode.system.as_deref(),
                &first,
                run.job.settings.prompt.reply_start(),
            )?;
            run.transcript = Some(transcript);
        }
        if run.job.settings.record && run.job.env.renders_frames() {
            let mut recording = EpisodeRecording::default();
            recording
                .capture(run.job.env.as_ref())
                .map_err(env_error(&run.job))?;
            run.recording = Some(recording);
        }
        Ok(run)
    }

    pub fn slot(&self) -> &EnvSlot {
        &self.job.slot
    }

    /// The job's index within its inference loop.
    pub(super) fn index(&self) -> usize {
        self.job.index
    }

    /// Sets the job's index within its inference loop (an episode continued in a new step).
    pub(super) fn set_index(&mut self, index: usize) {
        self.job.index = index;
    }

    /// Whether the requests continue one chat (trajectory-wise samples), so the inference
    /// loop may reuse the cached keys of the previous turn.
    pub(super) fn continues_chat(&self) -> bool {
        self.transcript.is_some()
    }

    /// The next turn's request, or `None` when the episode has ended (out of turns, or no
    /// token budget left).
    pub(super) fn next_request(&mut self) -> Result<Option<GenerationRequest>, Stop> {
        let (job, settings) = (&self.job, &*self.job.settings);
        if self.turn >= job.slot.max_turns {
            return Ok(None);
        }
        let prompt = match &self.transcript {
            Some(t) => t.tokens.clone(),
            None => {
                let text = self.user_message(self.turn, &self.observation, &self.episode.turns)?;
                let reply_start = settings.prompt.reply_start();
                Transcript::start(
                    &job.tokenizer,
                    self.episode.system.as_deref(),
                    &text,
                    reply_start,
                )?
                .tokens
            }
        };
        let limit = settings.sequence_length.min(job.context);
        let budget = settings
            .max_new_tokens
            .min(limit.saturating_sub(prompt.len()));
        if budget == 0 {
            self.episode.truncated = true;
            if self.turn == 0 {
                self.episode.first_prompt_without_room = Some(prompt.len());
            }
            return Ok(None);
        }
        let request = GenerationRequest {
            prompt: prompt.clone(),
            max_new_tokens: budget,
            sampling: settings.sampling.clone(),
            stop_tokens: self.stop_tokens.clone(),
            seed: job.seed ^ (self.turn as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            guide: job.guide.clone(),
        };
        self.prompt = prompt;
        Ok(Some(request))
    }

    /// Plays the reply to the pending request; `false` when the episode has ended.
    pub(super) fn take_reply(&mut self, output: GenerationOutput) -> Result<bool, Stop> {
        let tokenizer = self.job.tokenizer.clone();
        let turn = self.turn;
        if output.finish == FinishReason::NonFinite {
            return Err(Stop::Fatal(format!(
                "the policy's logits were not finite (NaN or infinite) in turn {} of an \
                 episode of env `{}`: its weights have diverged (an `lr` too large for \
                 its gradients); lower the model's `lr` and `--resume` from the last checkpoint",
                turn + 1,
                self.job.slot.env_tag
            )));
        }
        let stop = match (output.finish, output.tokens.last()) {
            (FinishReason::Stop, Some(&token)) => Some(token),
            _ => None,
        };
        let content = match stop {
            Some(_) => &output.tokens[..output.tokens.len() - 1],
            None => &output.tokens[..],
        };
        let generated_text = tokenizer
            .decode(content, false)
            .map_err(|e| e.to_string())?;
        let reply_text = format!("{}{generated_text}", self.job.settings.prompt.reply_start());
        let result = self
            .job
            .env
            .step(&reply_text)
            .map_err(env_error(&self.job))?;
        if let Some(r) = &mut self.recording {
            r.capture(self.job.env.as_ref())
                .map_err(env_error(&self.job))?;
        }
        if let Some(t) = &mut self.transcript {
            t.add_reply(
                &tokenizer,
                &output.tokens,
                &output.logprobs,
                stop,
                &generated_text,
            )?;
        }
        let prompt = std::mem::take(&mut self.prompt);
        self.episode.success |= result.info.success;
        let (done, terminated, truncated) = (result.done(), result.terminated, result.truncated);
        self.episode.turns.push(TurnRecord {
            observation: std::mem::replace(&mut self.observation, result.observation),
            prompt: if self.transcript.is_some() {
                Vec::new()
            } else {
                prompt
            },
            reply: output.tokens,
            logprobs: output.logprobs,
            reply_text,
            reward: result.reward,
            info: result.info,
            policy_version: self.job.version,
        });
        if done {
            self.episode.truncated = truncated && !terminated;
            return Ok(false);
        }
        if turn + 1 == self.job.slot.max_turns {
            self.episode.truncated = true;
            return Ok(false);
        }
        self.turn += 1;
        if let Some(mut transcript) = self.transcript.take() {
            let next = self.user_message(self.turn, &self.observation, &[]);
            let added = next.and_then(|text| transcript.add_user(&tokenizer, &text));
            self.transcript = Some(transcript);
            added?;
        }
        Ok(true)
    }

    /// The finished episode.
    pub(super) fn finish(mut self) -> Episode {
        if let Some(mut t) = self.transcript.take() {
            t.trim_after_last_reply();
            self.episode.transcript = Some(t);
        }
        self.episode.recording = self.recording.take();
        self.episode
    }

    fn vars(&self) -> EpisodeVars<'_> {
        EpisodeVars {
            instruction: &self.episode.instruction,
            env: &self.job.slot.env_tag,
            max_turns: self.job.slot.max_turns,
            actions: &self.actions,
            sample: self.job.slot.index_in_group,
        }
    }

    /// The user message of turn `index` (0-based) showing `observation`; `turns` are the
    /// earlier turns a step-wise prompt shows.
    fn user_message(
        &self,
        index: usize,
        observation: &str,
        turns: &[TurnRecord],
    ) -> Result<String, String> {
        let turn = TurnVars {
            observation,
            index,
            valid_actions: self.job.env.valid_actions(),
            history: history(turns, &self.job.settings.samples),
        };
        self.job.settings.prompt.turn(&self.vars(), &turn)
    }
}

/// An env's error as a [`Stop`]: lost (the episode only) or fatal.
fn env_error(job: &EpisodeJob) -> impl Fn(EnvError) -> Stop {
    let tag = job.slot.env_tag.clone();
    move |e| {
        let message = format!("env `{tag}`: {e}");
        match e.loses_only_the_episode() {
            true => Stop::Lost(message),
            false => Stop::Fatal(message),
        }
    }
}

/// The earlier turns a step-wise prompt shows (the last `history`); none for trajectories,
/// whose chat holds them.
fn history(turns: &[TurnRecord], samples: &SampleMode) -> Vec<HistoryTurn> {
    let SampleMode::Step { history } = *samples else {
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
