//! `Eval`: plays the validation env sets with the current policy at step 0, every `every`
//! steps and at the last step, and reports success rate, score mean/max/min,
//! effective-action rate and format errors per env set (`<tag>/success`, ...).
//!
//! Validation sets carry their own `seed`, so every eval plays the same episodes and the
//! numbers are comparable across steps. Eval plays the way the policy's `Rollout` node
//! does (prompts, answer guide, sample mode) but greedily by default (`temperature: 0`).
//! The first `render` episodes of each set are saved under `out_dir/renders/step_N/` as a
//! GIF with PNG frames (grid envs) and a text transcript of prompts, replies and rewards.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use roll_flow_engine::{Batch, Operator, OperatorError, StepContext};

use crate::model::generate::SamplingParams;
use crate::nodes::{EvalSpec, Guide};
use crate::rollout::{play_settings, rollout_for, stats, EnvPlayer, Episode, PlaySettings};
use crate::runtime::Runtime;

pub struct EvalNode {
    spec: EvalSpec,
    player: EnvPlayer,
    out_dir: PathBuf,
    steps: u64,
}

impl EvalNode {
    pub fn build(spec: &EvalSpec, runtime: &mut Runtime) -> Result<Self, String> {
        let rollout = rollout_for(&runtime.pipeline, &spec.policy).cloned();
        let mut settings = match &rollout {
            Some(r) => play_settings(r, spec.render > 0),
            None => PlaySettings {
                samples: crate::nodes::SampleMode::Trajectory,
                sampling: SamplingParams::default(),
                max_new_tokens: spec.max_new_tokens,
                sequence_length: usize::MAX,
                instruction: true,
                record: spec.render > 0,
            },
        };
        settings.sampling = if spec.temperature > 0.0 {
            SamplingParams {
                temperature: spec.temperature,
                ..settings.sampling
            }
        } else {
            SamplingParams::greedy()
        };
        settings.max_new_tokens = spec.max_new_tokens;
        let guide = rollout.map_or(Guide::Free, |r| r.guide);
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

impl Operator for EvalNode {
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
                for (i, e) in mine.iter().take(self.spec.render).enumerate() {
                    save_render(e, &dir, &format!("{tag}_{i}")).map_err(OperatorError)?;
                }
            }
        }
        Ok(Batch::new())
    }
}

/// Writes an episode's frames/GIF (grid envs) and its chat transcript.
fn save_render(episode: &Episode, dir: &Path, stem: &str) -> Result<(), String> {
    if let Some(recording) = &episode.recording {
        recording.write(dir, stem).map_err(|e| e.to_string())?;
    }
    let mut text = format!(
        "env {} seed {}\n\n{}\n",
        episode.slot.env_tag, episode.slot.seed, episode.instruction
    );
    for (k, t) in episode.turns.iter().enumerate() {
        let _ = write!(
            text,
            "\n--- turn {} ---\nobservation:\n{}\nreply: {}\nreward: {} | valid: {} | effective: {}\n",
            k + 1,
            t.observation,
            t.reply_text,
            t.reward,
            t.info.action_is_valid,
            t.info.action_is_effective
        );
    }
    let _ = write!(
        text,
        "\nsuccess: {} | total reward: {}\n",
        episode.success,
        episode.total_reward()
    );
    roll_flow_engine::atomic_file::write_atomic(
        &dir.join(format!("{stem}_chat.txt")),
        text.as_bytes(),
    )
    .map_err(|e| format!("cannot write a render into {}: {e}", dir.display()))
}
