//! `Eval`: plays the validation env sets with the current policy at step 0, every `every`
//! steps and at the last step, and reports success rate, score mean/max/min,
//! effective-action rate and format errors per env set (`<tag>/success`, ...).
//!
//! Validation sets carry their own `seed`, so every eval plays the same episodes and the
//! numbers are comparable across steps. Eval plays the way the policy's `Rollout` node
//! does (prompts, answer guide, sample mode) but greedily by default (`temperature: 0`).
//! The first `render` episodes of each set are saved under `out_dir/renders/step_N/` as a
//! GIF with PNG frames (grid envs) and a text transcript of each turn's prompt, reply,
//! parsed action and reward (`rollout::episode_text`).

use std::path::{Path, PathBuf};

use roll_flow_engine::{Batch, Operator, OperatorError, Pipeline, StepContext};

use roll_flow_model::generate::SamplingParams;
use roll_flow_model::TextTokenizer;
use crate::nodes::{EvalSpec, Guide};
use crate::rollout::episode_text::{episode_text, TextOptions};
use crate::rollout::{play_settings, rollout_for, stats, EnvPlayer, Episode, PlaySettings};
use crate::runtime::{RunBackend, Runtime};
use crate::RollFlow;

/// How eval plays `policy`: as its `Rollout` node does (prompts, answer guide, sample
/// mode), at `temperature` (0 is greedy) and with `max_new_tokens`; `record` keeps frames
/// for renders. `roll-flow play --policy` plays this way too.
pub fn eval_play_settings(
    pipeline: &Pipeline<RollFlow>,
    policy: &str,
    temperature: f32,
    max_new_tokens: usize,
    record: bool,
) -> (PlaySettings, Guide) {
    let rollout = rollout_for(pipeline, policy);
    let mut settings = match rollout {
        Some(r) => play_settings(r, record),
        None => PlaySettings {
            samples: crate::nodes::SampleMode::Trajectory,
            sampling: SamplingParams::default(),
            max_new_tokens,
            sequence_length: usize::MAX,
            instruction: true,
            record,
            inference_loops: 1,
        },
    };
    settings.sampling = if temperature > 0.0 {
        SamplingParams {
            temperature,
            ..settings.sampling
        }
    } else {
        SamplingParams::greedy()
    };
    settings.max_new_tokens = max_new_tokens;
    (settings, rollout.map_or(Guide::Free, |r| r.guide))
}

pub struct EvalNode<B: RunBackend> {
    spec: EvalSpec,
    player: EnvPlayer<B>,
    out_dir: PathBuf,
    steps: u64,
}

impl<B: RunBackend> EvalNode<B> {
    pub fn build(spec: &EvalSpec, runtime: &mut Runtime<B>) -> Result<Self, String> {
        let (settings, guide) = eval_play_settings(
            &runtime.pipeline,
            &spec.policy,
            spec.temperature,
            spec.max_new_tokens,
            spec.render > 0,
        );
        Ok(EvalNode {
            player: EnvPlayer::build(&spec.envs.0, &spec.policy, guide, settings, runtime)?,
            spec: spec.clone(),
            out_dir: runtime.run.out_dir.clone(),
            steps: runtime.run.steps,
        })
    }

    fn due(&self, step: u64) -> bool {
        step.is_multiple_of(self.spec.every.max(1)) || step + 1 == self.steps
    }
}

impl<B: RunBackend> Operator for EvalNode<B> {
    fn process(&mut self, ctx: &mut StepContext, _input: Batch) -> Result<Batch, OperatorError> {
        if !self.due(ctx.step) {
            return Ok(Batch::new());
        }
        let (episodes, _, _) = self.player.play(ctx).map_err(OperatorError)?;
        for tag in self.player.tags() {
            let mine: Vec<&Episode> = episodes.iter().filter(|e| &e.slot.env_tag == tag).collect();
            stats::episode_metrics(&mine, &mut ctx.metrics, &format!("{tag}/"));
            if ctx.worker == 0 {
                let dir = self
                    .out_dir
                    .join("renders")
                    .join(format!("step_{}", ctx.step));
                let tokenizer = self.player.tokenizer();
                for (i, e) in mine.iter().take(self.spec.render).enumerate() {
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
