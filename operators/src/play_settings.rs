//! How a policy plays its envs: the settings a `Rollout` node gives and `Eval`, `LogProb`,
//! `ActorStep` and `roll-flow play --policy` follow (prompts, answer guide, sampling), as
//! plain data. The registry finds them on the nodes ([`PolicyPlay`], [`EvalPlay`]) and hands
//! them down, so no operator reads another node's settings.

use std::sync::Arc;

use roll_flow_model::generate::SamplingParams;

use crate::prompt::PromptTemplates;
use serde::Deserialize;

/// How rollout turns episodes into samples.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum SampleMode {
    /// One sample per trajectory holding the whole multi-turn history (StarPO, PPO).
    Trajectory,
    /// One sample per step whose prompt holds the last `history` turns (GiGPO).
    Step { history: usize },
}

/// How replies are constrained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum Guide {
    /// Any text (the env parses it; malformed answers earn the format penalty).
    #[default]
    Free,
    /// Exactly one of `<answer>NAME</answer>` for the env's action names, then the end of
    /// the message (after `prompt.reply_start`, what is left of it). The constraint is part
    /// of the policy: log-probs are taken over the allowed tokens when sampling and when
    /// training.
    Actions,
}

/// How episodes are played (shared by rollout and eval).
#[derive(Clone, Debug)]
pub struct PlaySettings {
    pub samples: SampleMode,
    pub sampling: SamplingParams,
    pub max_new_tokens: usize,
    pub sequence_length: usize,
    /// What the model reads: the system message and each turn's user message.
    pub prompt: PromptTemplates,
    /// Keep frames and texts of every state (eval renders).
    pub record: bool,
    /// Inference loops serving the envs (`Rollout`'s `inference_loops`).
    pub inference_loops: usize,
    /// Threads playing the envs (`Rollout`'s `env_threads`); `None`: [`DEFAULT_ENV_THREADS_PER_CORE`]
    /// per core.
    pub env_threads: Option<usize>,
    /// The thread pool the inference loops compute on: an asynchronous rollout's own, so
    /// its decoding does not queue behind training's long jobs on the global pool (as it
    /// did: a play took 3 times as long beside training); `None`, the global pool.
    pub compute: Option<Arc<rayon::ThreadPool>>,
    /// Groups per env tag started beyond those the step keeps (`Rollout`'s
    /// `partial: (extra_groups: N)`, [`crate::rollout::early_cut`]); 0: off.
    pub extra_groups: usize,
    /// Whether a partial rollout's groups not kept continue in the next step (`partial:
    /// (carry: true)`, the default) instead of being dropped.
    pub carry_cut: bool,
}

/// Env threads per core when `env_threads` is left out: an env's step is short next to
/// a reply's generation, and a few threads per core cover envs that wait on a server.
pub const DEFAULT_ENV_THREADS_PER_CORE: usize = 4;

impl PlaySettings {
    /// The threads that play the envs.
    pub fn env_threads(&self) -> usize {
        self.env_threads.unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            DEFAULT_ENV_THREADS_PER_CORE * cores
        })
    }
}

/// A policy, the env sets it is trained on and how it plays them: what a `Rollout` node
/// tells the nodes that score or evaluate that policy.
#[derive(Clone, Debug)]
pub struct PolicyPlay {
    pub policy: String,
    /// The env sets, by their `envs:` names.
    pub envs: Vec<String>,
    pub settings: PlaySettings,
    pub guide: Guide,
    /// The steps played with `guide` before the replies go free (`Rollout(guide_steps)`);
    /// `None`: every step.
    pub guide_steps: Option<u64>,
    /// How many steps ahead of training it plays (`Rollout(staleness)`; 0: synchronous).
    pub staleness: u64,
}

impl PolicyPlay {
    /// The temperature the replies were sampled with, as scoring must divide the logits by
    /// it; 1 for greedy rollouts (temperature 0).
    pub fn sampling_temperature(&self) -> f32 {
        match self.settings.sampling.temperature {
            t if t > 0.0 => t,
            _ => 1.0,
        }
    }

    /// The guide eval plays this policy with: the rollout's, unless the rollout guides only
    /// its first steps (`guide_steps`, a warm-up), when the policy is measured as it ends
    /// up playing, in free text.
    pub fn eval_guide(&self) -> Guide {
        match self.guide_steps {
            Some(_) => Guide::Free,
            None => self.guide,
        }
    }

    /// How eval plays this policy: the same prompts and sample mode, at
    /// `temperature` (0 is greedy) with `max_new_tokens`; `record` keeps frames for renders.
    pub fn for_eval(&self, temperature: f32, max_new_tokens: usize, record: bool) -> PlaySettings {
        eval_settings(self.settings.clone(), temperature, max_new_tokens, record)
    }
}

/// How eval plays a policy that no `Rollout` node trains: trajectory-wise, free text, the
/// env's instruction in the prompt, no length limit but the model's.
pub fn untrained_eval_settings(
    temperature: f32,
    max_new_tokens: usize,
    record: bool,
) -> PlaySettings {
    let settings = PlaySettings {
        samples: SampleMode::Trajectory,
        sampling: SamplingParams::default(),
        max_new_tokens,
        sequence_length: usize::MAX,
        prompt: PromptTemplates::default(),
        record,
        inference_loops: 1,
        env_threads: None,
        compute: None,
        extra_groups: 0,
        carry_cut: false,
    };
    eval_settings(settings, temperature, max_new_tokens, record)
}

fn eval_settings(
    mut settings: PlaySettings,
    temperature: f32,
    max_new_tokens: usize,
    record: bool,
) -> PlaySettings {
    settings.sampling = if temperature > 0.0 {
        SamplingParams {
            temperature,
            ..settings.sampling
        }
    } else {
        SamplingParams::greedy()
    };
    settings.max_new_tokens = max_new_tokens;
    settings.record = record;
    // Eval plays every group it is given.
    settings.extra_groups = 0;
    settings.carry_cut = false;
    settings
}

/// What an `Eval` node tells `roll-flow play --policy`: the policy it evaluates, on which
/// env sets, with how many tokens per reply.
#[derive(Clone, Debug)]
pub struct EvalPlay {
    pub policy: String,
    pub envs: Vec<String>,
    pub max_new_tokens: usize,
}
