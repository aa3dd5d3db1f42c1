//! The ROLL keys roll-flow does not map, and why: each is either ignored on this engine
//! (it concerns ROLL's distributed machinery, logging or placement) or not supported (it
//! would change training and roll-flow has no equivalent). The keys the importer maps are
//! the ones `pipeline_mapping` reads; docs/roll-import.md lists both.
//!
//! A pattern is a dotted key path; `*` matches one key; a pattern covers the whole subtree
//! under the key it names.

/// How an unmapped key is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NoticeKind {
    /// The key would change training and roll-flow cannot do what it asks.
    NotSupported,
    /// The key concerns ROLL's machinery; roll-flow has no use for it.
    Ignored,
}

impl NoticeKind {
    /// The words a report line starts with.
    pub fn label(self) -> &'static str {
        match self {
            NoticeKind::NotSupported => "not supported",
            NoticeKind::Ignored => "ignored on this engine",
        }
    }
}

const WORKERS: &str = "roll-flow trains and generates in one process on one device";
const PROMPTS: &str = "prompt templates: roll-flow writes each env's own instruction and parses \
    `<answer>…</answer>` replies";

/// The ignored keys.
pub const IGNORED: &[(&str, &str)] = &[
    ("hydra", "Hydra's run-directory settings"),
    ("logging_dir", "logs and metrics go to `out_dir`"),
    ("render_save_dir", "eval renders go to `out_dir/renders`"),
    ("system_envs", "environment variables of ROLL's workers"),
    (
        "track_with",
        "metrics.jsonl and TensorBoard events are always written to `out_dir`",
    ),
    (
        "tracker_kwargs",
        "metrics.jsonl and TensorBoard events are always written to `out_dir`",
    ),
    ("checkpoint_config", "checkpoints go to `out_dir`"),
    ("num_gpus_per_node", WORKERS),
    ("logging_steps", "metrics are written every step"),
    (
        "resume_from_checkpoint",
        "resume with `roll-flow run --resume RUN_DIR`",
    ),
    ("val_batch_size", "Eval plays each validation env once"),
    (
        "rng_state_dir",
        "random streams derive from `seed` and the step",
    ),
    (
        "model_download_type",
        "models are read from a local directory",
    ),
    (
        "reward_pretrain",
        "only a critic (`adv_estimator: gae`) is built from it",
    ),
    ("profiler_timeline", "ROLL's profiler"),
    ("profiler_output_dir", "ROLL's profiler"),
    (
        "*.strategy_args",
        "distributed strategy (Megatron, DeepSpeed, vLLM); roll-flow runs its own kernels",
    ),
    ("*.device_mapping", WORKERS),
    ("*.world_size", WORKERS),
    ("*.num_gpus_per_worker", WORKERS),
    ("*.worker_cls", WORKERS),
    ("*.name", WORKERS),
    ("*.offload_nccl", WORKERS),
    (
        "*.infer_batch_size",
        "scoring batches are sized by the engine",
    ),
    (
        "*.data_args",
        "the chat template is the model directory's own",
    ),
    (
        "*.model_args.attn_implementation",
        "attention kernels are the engine's",
    ),
    (
        "*.model_args.disable_gradient_checkpointing",
        "activation memory is the engine's",
    ),
    ("*.model_args.dtype", "roll-flow trains in f32"),
    (
        "*.model_args.model_type",
        "the architecture is read from config.json",
    ),
    (
        "*.model_args.model_name_or_path",
        "every model is built from `pretrain`",
    ),
    ("*.training_args.bf16", "roll-flow trains in f32"),
    ("*.training_args.fp16", "roll-flow trains in f32"),
    ("*.training_args.output_dir", "checkpoints go to `out_dir`"),
    (
        "*.training_args.logging_steps",
        "metrics are written every step",
    ),
    (
        "*.training_args.save_steps",
        "checkpoints follow `save_steps`",
    ),
    ("*.training_args.max_steps", "the run length is `max_steps`"),
    ("*.training_args.seed", "random streams derive from `seed`"),
    (
        "*.training_args.gradient_checkpointing",
        "activation memory is the engine's",
    ),
    ("*.training_args.dataloader_num_workers", WORKERS),
    ("actor_infer.training_args", "actor_infer does not train"),
    (
        "reference.training_args",
        "the reference model does not train",
    ),
    (
        "reference.generating_args",
        "the reference model does not generate",
    ),
    (
        "actor_train.generating_args",
        "generation follows `actor_infer.generating_args`",
    ),
    ("critic.generating_args", "the critic does not generate"),
    (
        "actor_infer.generating_args.num_return_sequences",
        "ROLL forces 1",
    ),
    (
        "*_env_manager.max_env_num_per_worker",
        "the envs share a bounded pool of threads (`Rollout(env_threads)`)",
    ),
    (
        "*_env_manager.max_traj_per_env",
        "each env plays one episode per step",
    ),
    (
        "*_env_manager.llm_proxy",
        "envs are played by the policy being trained",
    ),
    (
        "*_env_manager.generating_args",
        "generation follows `actor_infer.generating_args` where it is set (ROLL's rule)",
    ),
    (
        "*_env_manager.model_args",
        "envs are played by the policy being trained",
    ),
    (
        "custom_envs.*.use_thread_lock",
        "an env is played by one thread at a time",
    ),
    (
        "custom_envs.*.env_config.render_mode",
        "eval renders are always written",
    ),
    (
        "batch_adjust_mode",
        "roll-flow trains on the whole batch the rollout gives",
    ),
];

/// The keys whose every value is unsupported.
pub const NOT_SUPPORTED: &[(&str, &str)] = &[
    ("custom_envs.*.user_prompt_format", PROMPTS),
    ("custom_envs.*.agent_system_template", PROMPTS),
    ("custom_envs.*.agent_template", PROMPTS),
    ("custom_envs.*.reward_template", PROMPTS),
    ("custom_envs.*.env_config.env_instruction", PROMPTS),
    ("custom_envs.*.env_config.action_pattern", PROMPTS),
];

/// The pattern of `table` that covers `path` exactly (not a longer one), with its reason.
pub fn matching<'t>(table: &'t [(&'t str, &'t str)], path: &str) -> Option<(&'t str, &'t str)> {
    let segs: Vec<&str> = path.split('.').collect();
    table.iter().copied().find(|(pattern, _)| {
        let pats: Vec<&str> = pattern.split('.').collect();
        pats.len() == segs.len() && pats.iter().zip(&segs).all(|(p, s)| segment_matches(p, s))
    })
}

fn segment_matches(pattern: &str, seg: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some(suffix) => seg.ends_with(suffix),
        None => pattern == seg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_segments_and_wildcards() {
        assert_eq!(
            matching(IGNORED, "actor_train.strategy_args").map(|m| m.0),
            Some("*.strategy_args")
        );
        assert_eq!(
            matching(IGNORED, "val_env_manager.max_env_num_per_worker").map(|m| m.0),
            Some("*_env_manager.max_env_num_per_worker")
        );
        assert!(matching(IGNORED, "actor_train.strategy_args.strategy_name").is_none());
        assert!(matching(IGNORED, "strategy_args").is_none());
        assert!(matching(NOT_SUPPORTED, "custom_envs.Lake.agent_template").is_some());
    }
}
