//! `Eval`: plays the validation env sets with the current policy at step 0, every `every`
//! steps and at the last step, and reports success rate, score mean/max/min,
//! effective-action rate and format errors per env set (`<tag>/success`, ...).
//!
//! Validation sets carry their own `seed`, so every eval plays the same episodes and the
//! numbers are comparable across steps. Eval plays the way the policy's `Rollout` node
//! does (prompts, sample mode, the answer guide unless the rollout guides only its first
//! steps: `guide_steps`) but greedily by default (`temperature: 0`). An unguided eval
//! plays free text even on the rollout's own env set while its warm-up guide is on.
//! The first `render` episodes of each set are saved under `out_dir/renders/step_N/` as a
//! GIF with PNG frames (grid envs) and a text transcript of each turn's prompt, reply,
//! parsed action and reward (`rollout::episode_text`).
//!
//! RON: `"eval": Eval(envs: "val", every: 20)`.

use std::path::{Path, PathBuf};

use roll_flow_engine::collective::Collective;
use roll_flow_engine::{
    Batch, Column, Contract, Operator, OperatorError, Reference, Role, StepContext,
};
use roll_flow_model::TextTokenizer;
use serde::Deserialize;

use super::env_names::EnvNames;
use super::kind::{at_least_one, default_max_new_tokens, default_policy, NodeKind};
use crate::play_settings::{untrained_eval_settings, EvalPlay, Guide};
use crate::rollout::env_player::EnvPlayer;
use crate::rollout::episode::Episode;
use crate::rollout::episode_text::{episode_text, TextOptions};
use crate::rollout::gathered;
use crate::rollout::stats::{self, EpisodeSummary};
use crate::runtime::backend::RunBackend;
use crate::runtime::resources::Runtime;

/// `Eval`'s settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalSpec {
    /// Env set(s) to play: a name from `envs:` or a list of names.
    pub envs: EnvNames,
    /// The policy evaluated (default `"policy"`).
    #[serde(default = "default_policy")]
    pub policy: String,
    /// Evaluate at step 0 and every `every` steps (default 10).
    #[serde(default = "eval_every")]
    pub every: u64,
    /// Sampling temperature; 0 is greedy (default).
    #[serde(default)]
    pub temperature: f32,
    /// Tokens per reply (default 64, as `Rollout`).
    #[serde(default = "default_max_new_tokens")]
    pub max_new_tokens: usize,
    /// Episodes saved as renders per eval (default 4).
    #[serde(default = "render_episodes")]
    pub render: usize,
}

fn eval_every() -> u64 {
    10
}
fn render_episodes() -> usize {
    4
}

impl NodeKind for EvalSpec {
    /// Eval starts from the policy version alone and reports metrics; it gives no columns.
    fn contract(&self) -> Contract {
        Contract::default()
    }

    fn may_give() -> Vec<Column> {
        Vec::new()
    }

    fn role(&self) -> Role {
        Role::Source
    }

    fn references(&self) -> Vec<Reference> {
        self.envs.played_by(&self.policy)
    }

    fn check(&self) -> Result<(), String> {
        at_least_one("every", self.every)?;
        at_least_one("max_new_tokens", self.max_new_tokens as u64)?;
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(format!(
                "`temperature` must be >= 0 (0 is greedy), got {}",
                self.temperature
            ));
        }
        Ok(())
    }

    fn evaluates(&self) -> Option<EvalPlay> {
        Some(EvalPlay {
            policy: self.policy.clone(),
            envs: self.envs.0.clone(),
            max_new_tokens: self.max_new_tokens,
        })
    }

    fn build<B: RunBackend>(
        &self,
        _name: &str,
        runtime: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String> {
        let record = self.render > 0;
        let rollout = runtime.plan.wiring.rollout_for(&self.policy);
        let settings = match rollout {
            Some(r) => r.for_eval(self.temperature, self.max_new_tokens, record),
            None => untrained_eval_settings(self.temperature, self.max_new_tokens, record),
        };
        let guide = rollout.map_or(Guide::Free, |r| r.eval_guide());
        Ok(Box::new(EvalNode {
            player: EnvPlayer::build(&self.envs.0, &self.policy, guide, settings, runtime)?,
            spec: self.clone(),
            out_dir: runtime.run.out_dir.clone(),
            steps: runtime.run.steps,
            collective: runtime.worker.collective.clone(),
        }))
    }
}

struct EvalNode<B: RunBackend> {
    spec: EvalSpec,
    player: EnvPlayer<B>,
    out_dir: PathBuf,
    steps: u64,
    collective: Collective,
}

impl<B: RunBackend> EvalNode<B> {
    fn due(&self, step: u64) -> bool {
        step.is_multiple_of(self.spec.every.max(1)) || step + 1 == self.steps
    }
}

impl<B: RunBackend> Operator for EvalNode<B> {
    fn process(&mut self, ctx: &mut StepContext, _input: Batch) -> Result<Batch, OperatorError> {
        if !self.due(ctx.step) {
            return Ok(Batch::new());
        }
        let played = self.player.play(ctx).map_err(OperatorError)?;
        let episodes = played.episodes;
        // Several workers each play a shard of the episodes; the metrics are the whole
        // set's.
        let summaries = self.player.summaries(&episodes);
        let counts = played.faults.counts().to_vec();
        let all = gathered::gather(&self.collective, Batch::new(), summaries, counts, 0.0)
            .map_err(OperatorError)?;
        (played.faults.with_totals(&all.counts)).report(ctx.step, &mut ctx.metrics);
        for tag in self.player.tags() {
            let of_tag: Vec<EpisodeSummary> = (all.episodes.iter())
                .filter(|e| &e.env_tag == tag)
                .cloned()
                .collect();
            stats::summary_metrics(&of_tag, &mut ctx.metrics, &format!("{tag}/"));
            if ctx.worker == 0 {
                let mine = episodes.iter().filter(|e| &e.slot.env_tag == tag);
                let dir = self
                    .out_dir
                    .join("renders")
                    .join(format!("step_{}", ctx.step));
                let tokenizer = self.player.tokenizer();
                for (i, e) in mine.take(self.spec.render).enumerate() {
                    save_render(e, &tokenizer, &dir, &format!("{tag}_{i}"))
                        .map_err(OperatorError)?;
                }
            }
        }
        Ok(Batch::new())
    }
}

/// Writes an episode's frames/GIF (grid envs) and its transcript.
fn save_render(
    episode: &Episode,
    tokenizer: &TextTokenizer,
    dir: &Path,
    stem: &str,
) -> Result<(), String> {
    if let Some(recording) = &episode.recording {
        recording.write(dir, stem).map_err(|e| e.to_string())?;
    }
    let text = episode_text(episode, tokenizer, TextOptions::default());
    roll_flow_engine::atomic_file::write_atomic(
        &dir.join(format!("{stem}_chat.txt")),
        text.as_bytes(),
    )
    .map_err(|e| format!("cannot write a render into {}: {e}", dir.display()))
}
