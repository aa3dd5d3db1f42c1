//! Watching a trained policy play: `roll-flow play --policy RUN_DIR [--checkpoint N]`.
//!
//! The run's own pipeline (its `pipeline.ron` copy) says which policy, envs and prompts
//! the run used; the checkpoint gives the weights. The policy is restored exactly as a
//! resumed run restores it (a [`Runtime`] whose first step is the checkpoint's), and the
//! episode is played by the same [`EnvPlayer`] rollout and eval use, the way eval plays:
//! greedily, with the rollout's prompts and eval's answer guide. Nothing here is a second
//! env loop, so what one watches is what training and eval did.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use roll_flow_engine::{Pipeline, WorkerInfo};

use roll_flow_envs::manager::Shard;
use roll_flow_model::spec::Precision;
use roll_flow_model::CpuBackend;

use crate::catalog::RollFlow;
use crate::registry::run_plan;
use crate::rollout::env_player::EnvPlayer;
use crate::rollout::episode::Episode;
use crate::run_layout::{saved_steps, step_dir};
use crate::runtime::resources::Runtime;
use crate::runtime::run_plan::RunPlan;

/// Which episode to watch.
#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    /// Completed-step count of the checkpoint (default: the newest).
    pub checkpoint: Option<u64>,
    /// The `envs:` entry to play (default: the first env set of the policy's `Eval`
    /// node, else of its `Rollout` node).
    pub env: Option<String>,
    /// Reset seed (default: the env set's fixed `seed`, else 0), as `roll-flow play`.
    pub seed: Option<u64>,
    /// Keep frames for a GIF.
    pub record: bool,
}

/// A played episode and where it came from.
pub struct Watched {
    pub episode: Episode,
    pub checkpoint: PathBuf,
    pub policy: String,
    /// The policy version the checkpoint holds.
    pub version: u64,
    pub tokenizer: Arc<roll_flow_model::TextTokenizer>,
}

/// The checkpoint step to load: `wanted`, or the newest in `run_dir`.
pub fn checkpoint_step(run_dir: &Path, wanted: Option<u64>) -> Result<u64, String> {
    let steps = saved_steps(run_dir);
    let listed = || {
        let names: Vec<String> = steps.iter().map(u64::to_string).collect();
        names.join(", ")
    };
    match wanted {
        None => steps.last().copied().ok_or_else(|| {
            format!(
                "{} has no checkpoint (looked in {}); add a Checkpoint node to the pipeline",
                run_dir.display(),
                run_dir.join("checkpoints").display()
            )
        }),
        Some(step) if steps.contains(&step) => Ok(step),
        Some(step) if steps.is_empty() => Err(format!(
            "--checkpoint {step}: {} has no checkpoints",
            run_dir.display()
        )),
        Some(step) => Err(format!(
            "--checkpoint {step}: no {}; saved steps: {}",
            step_dir(run_dir, step).display(),
            listed()
        )),
    }
}

/// Plays one episode with the policy of `pipeline` (whose `out_dir` is the run directory)
/// as saved in a checkpoint.
pub fn watch_policy(
    pipeline: &Pipeline<RollFlow>,
    options: &WatchOptions,
) -> Result<Watched, String> {
    let run_dir = &pipeline.out_dir;
    let step = checkpoint_step(run_dir, options.checkpoint)?;
    let plan = run_plan(pipeline);
    let rollout = plan
        .wiring
        .rollouts
        .first()
        .ok_or("the run's pipeline has no Rollout node, so no policy to watch")?;
    let policy = rollout.policy.clone();
    let eval = pipeline
        .nodes
        .iter()
        .filter_map(|(_, node)| node.evaluates())
        .find(|e| e.policy == policy);
    let tag = match &options.env {
        Some(name) if pipeline.envs.contains(name) => name.clone(),
        Some(name) => {
            let known: Vec<&str> = pipeline.envs.names().collect();
            return Err(format!(
                "--env {name}: the pipeline has no env set `{name}`; it has: {}",
                known.join(", ")
            ));
        }
        None => eval.as_ref().map_or(&rollout.envs, |e| &e.envs)[0].clone(),
    };
    let max_new_tokens = eval
        .as_ref()
        .map_or(rollout.settings.max_new_tokens, |e| e.max_new_tokens);
    let settings = rollout.for_eval(0.0, max_new_tokens, options.record);
    let worker = WorkerInfo::single(step);
    // Watching plays one episode on the CPU, whatever device the run trained on, and so in
    // f32 (half precision is for a GPU; the CPU refuses it).
    let mut models = plan.models.clone();
    for (_, model) in &mut models.0 {
        model.precision = Precision::F32;
    }
    let on_cpu = RunPlan {
        device: roll_flow_engine::spec::Device::Cpu,
        models,
        ..plan.clone()
    };
    let guide = rollout.eval_guide();
    let mut runtime = Runtime::<CpuBackend>::new(Arc::new(on_cpu), worker)?;
    let player = EnvPlayer::build(
        std::slice::from_ref(&tag),
        &policy,
        guide,
        settings,
        &mut runtime,
    )?;
    let mut slot = player
        .manager()
        .slots_for(&tag, 0, Shard::ALL)
        .map_err(|e| e.to_string())?
        .swap_remove(0);
    let fixed_seed = pipeline.envs.get(&tag).and_then(|set| set.seed);
    slot.seed = options.seed.or(fixed_seed).unwrap_or(0);
    let played = player.play_slots(vec![slot], 0, Shard::ALL)?;
    let (mut episodes, version) = (played.episodes, played.version);
    let lost = played
        .faults
        .first
        .unwrap_or_else(|| "no episode was played".into());
    Ok(Watched {
        episode: episodes.pop().ok_or(lost)?,
        checkpoint: step_dir(run_dir, step),
        policy,
        version,
        tokenizer: player.tokenizer(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpoint_is_the_newest_or_the_one_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let err = checkpoint_step(dir.path(), None).unwrap_err();
        assert!(err.contains("has no checkpoint"), "{err}");
        for step in [2, 10, 4] {
            std::fs::create_dir_all(step_dir(dir.path(), step)).unwrap();
        }
        assert_eq!(checkpoint_step(dir.path(), None), Ok(10));
        assert_eq!(checkpoint_step(dir.path(), Some(4)), Ok(4));
        let err = checkpoint_step(dir.path(), Some(3)).unwrap_err();
        assert!(err.ends_with("saved steps: 2, 4, 10"), "{err}");
    }
}
