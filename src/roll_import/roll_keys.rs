//! The ROLL keys roll-flow reads but does not use, and why. ROLL reads every key listed
//! here (its config dataclasses, `roll/configs/*.py` and
//! `roll/pipeline/agentic/agentic_config.py`, or keys ROLL's own examples write); each is
//! either ignored on this engine (it concerns ROLL's distributed machinery, logging or
//! placement) or not supported (it would change training and roll-flow has no
//! equivalent). The keys the importer maps are the ones `pipeline_mapping` reads;
//! docs/roll-import.md lists all three classes. `--strict` makes every key here an error.
//!
//! A pattern is a dotted key path; `*` matches one key (`*_env_manager` one ending so); a
//! pattern covers the whole subtree under the key it names.

/// How a key that is not mapped is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NoticeKind {
    /// Known, not used here: it would change training and roll-flow cannot do what it asks.
    NotSupported,
    /// Known, not used here: it concerns ROLL's machinery; roll-flow has no use for it.
    Ignored,
    /// Not read by ROLL either (a tag no env manager plays, a defaults-file variable).
    Unread,
    /// An OmegaConf resolver replaced by a stated constant.
    Resolver,
    /// Something the import went on without (a missing defaults file).
    Warning,
}

impl NoticeKind {
    /// The words a report line starts with.
    pub fn label(self) -> &'static str {
        match self {
            NoticeKind::NotSupported => "not supported",
            NoticeKind::Ignored => "ignored on this engine",
            NoticeKind::Unread => "not read by ROLL either",
            NoticeKind::Resolver => "resolver",
            NoticeKind::Warning => "warning",
        }
    }

    /// Whether the key is one ROLL reads and the pipeline does not use (`--strict` refuses).
    pub fn known_unused(self) -> bool {
        matches!(self, NoticeKind::NotSupported | NoticeKind::Ignored)
    }
}

const WORKERS: &str =
    "GPU placement of ROLL's workers: roll-flow trains and generates in one process on one device";
const RAY: &str = "ROLL's Ray RPC and scheduling: roll-flow runs in one process";
const STRATEGY: &str =
    "distributed strategy (Megatron, DeepSpeed, FSDP, vLLM, SGLang); roll-flow runs its own kernels";
const LOGS: &str = "metrics.jsonl and TensorBoard events are always written to `out_dir`";
const PROFILER: &str = "ROLL's profiler";
const ENV_VARS: &str = "environment variables of ROLL's workers";
const ATTENTION: &str =
    "attention implementation (flash-attn, sdpa): attention kernels are the engine's";
const DYNAMIC_BATCHING: &str = "dynamic batching of scoring passes: scoring batches are sized by the engine; the log-probs are the same";
const UNTRAINED_DYNAMIC_BATCHING: &str = "dynamic batching of a worker roll-flow does not train (the actor's, and a critic's where the pipeline has one, become `max_tokens_per_micro_batch`)";
const SEQUENCE_PACKING: &str = "sequence packing (several samples in one row): a row holds one sample here (or a prompt's samples, `prefix_grouper`); the gradient is the same";
const LENGTH_ROUND: &str = "padding a micro-batch's length to a multiple (for GPU kernels' tiles): rows pad to their longest here; the gradient is the same";
const ULYSSES: &str = "Ulysses sequence parallelism across GPUs";
const REMOVE_PADDING: &str = "FSDP's padding-free attention (ROLL's WorkerConfig no longer has it: dacite drops it); it does not change the loss";
const WORKER_DTYPE: &str = "a worker without a model of its own here (actor_infer generates with the policy's weights, in its `precision:` from actor_train.model_args.dtype; a reference or critic the pipeline does not build)";
const TRAINER_PRECISION: &str = "mixed precision is the model's `precision:`, from its worker's model_args.dtype; parameters and optimizer state stay f32";
const ADAPTER_DTYPE: &str = "LoRA adapters are kept and trained in f32";
const ACTIVATIONS: &str = "only the training workers' model_args.disable_gradient_checkpointing is read (actor_train's and critic's, as their model's `gradient_checkpointing:`)";
const CHECKPOINTS: &str = "checkpoints go to `out_dir`";
const LORA_UNUSED: &str = "LoRA settings of a worker that does not train, or without `lora_target` (ROLL trains no adapters then): the actor's become the policy's `lora:`, and generation and the reference read the policy's weights";
const OPD: &str = "on-policy distillation from a teacher: roll-flow has no distillation";
const INFER_SCHEDULE: &str = "ROLL's inference scheduling (routers, request limits)";
const CHAT: &str = "the chat template is the model directory's own";
const STOPS: &str = "generation stops at the end-of-turn token or `max_new_tokens`";

/// The keys ignored on this engine.
pub const IGNORED: &[(&str, &str)] = &[
    ("*.model_args.lora_rank", LORA_UNUSED),
    ("*.model_args.lora_alpha", LORA_UNUSED),
    ("*.model_args.lora_target", LORA_UNUSED),
    ("*.model_args.lora_dropout", LORA_UNUSED),
    ("*.model_args.autocast_adapter_dtype", ADAPTER_DTYPE),
    ("hydra", "Hydra's run-directory settings"),
    ("logging_dir", "logs and metrics go to `out_dir`"),
    ("render_save_dir", "eval renders go to `out_dir/renders`"),
    ("system_envs", ENV_VARS),
    ("*.system_envs", ENV_VARS),
    ("track_with", LOGS),
    ("tracker_kwargs", LOGS),
    ("report_length_and_rewards", LOGS),
    ("otlp_output_dir", "ROLL's tracing"),
    ("checkpoint_config", CHECKPOINTS),
    ("max_ckpt_to_keep", CHECKPOINTS),
    ("base_dir", CHECKPOINTS),
    ("num_gpus_per_node", WORKERS),
    ("num_nodes", WORKERS),
    ("local_rank", WORKERS),
    ("offload_nccl", WORKERS),
    ("partial_gpu_mode", WORKERS),
    ("is_offload_states", WORKERS),
    ("is_offload_optimizer_states_in_train_step", WORKERS),
    ("model_update_buffer_size_mb", WORKERS),
    ("transfer_backend", WORKERS),
    ("rpc_timeout", RAY),
    (
        "env_monitor",
        "ROLL's hung-env monitor; `Process(timeout_s)` bounds a stalled env server",
    ),
    ("router_args", INFER_SCHEDULE),
    ("max_running_requests", INFER_SCHEDULE),
    ("generate_opt_level", INFER_SCHEDULE),
    ("is_num_return_sequences_expand", INFER_SCHEDULE),
    ("is_use_additional_prompts", INFER_SCHEDULE),
    ("max_additional_running_prompts", INFER_SCHEDULE),
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
    ("profiler_timeline", PROFILER),
    ("profiler_memory", PROFILER),
    ("profiler_output_dir", PROFILER),
    ("length_profiler_dir", PROFILER),
    (
        "rollout_dump_dir",
        "ROLL's rollout dump; `roll-flow run --dump-batches` writes roll-flow's",
    ),
    (
        "rollout_mock",
        "ROLL's rollout dump and replay for debugging",
    ),
    (
        "prompt_length",
        "padding length of ROLL's batches; roll-flow's limit is `sequence_length`",
    ),
    (
        "response_length",
        "padding length of ROLL's batches; roll-flow's limit is `sequence_length`",
    ),
    ("val_prompt_length", "padding length of ROLL's batches"),
    ("val_sequence_length", "padding length of ROLL's batches"),
    (
        "enable_reference",
        "the reference model is built when a KL term needs it",
    ),
    (
        "enable_old_logprobs_recompute",
        "π_old is recomputed by a `LogProb` node, as ROLL's agentic pipeline does",
    ),
    (
        "force_disable_old_logprobs_recompute",
        "π_old is recomputed by a `LogProb` node",
    ),
    (
        "parse_tool_call_parameter_to_dict",
        "tool-call parsing of ROLL's LLM proxy; roll-flow's envs take the reply text",
    ),
    ("skip_mock_system_prompt", CHAT),
    (
        "batch_adjust_mode",
        "roll-flow trains on the whole batch the rollout gives",
    ),
    ("*.strategy_args", STRATEGY),
    ("*.device_mapping", WORKERS),
    ("*.world_size", WORKERS),
    ("*.num_gpus_per_worker", WORKERS),
    ("*.worker_cls", WORKERS),
    ("*.name", WORKERS),
    ("*.offload_nccl", WORKERS),
    ("*.max_concurrency", WORKERS),
    ("*.model_update_frequency", WORKERS),
    ("*.backend_timeout", RAY),
    (
        "*.infer_batch_size",
        "scoring batches are sized by the engine",
    ),
    (
        "*.use_dynamic_batching_in_train",
        UNTRAINED_DYNAMIC_BATCHING,
    ),
    (
        "*.max_tokens_per_microbatch_in_train",
        UNTRAINED_DYNAMIC_BATCHING,
    ),
    ("*.sequence_length_round_in_train", LENGTH_ROUND),
    ("*.use_dynamic_batching_in_infer", DYNAMIC_BATCHING),
    ("*.max_tokens_per_microbatch_in_infer", DYNAMIC_BATCHING),
    ("*.sequence_length_round_in_infer", DYNAMIC_BATCHING),
    ("*.use_sequence_packing", SEQUENCE_PACKING),
    ("*.sequence_packing_args", SEQUENCE_PACKING),
    ("*.use_remove_padding", REMOVE_PADDING),
    (
        "*.router_replay",
        "MoE router replay between inference and training",
    ),
    ("*.apply_loss_scale", STRATEGY),
    ("*.data_args", CHAT),
    ("*.model_args.attn_implementation", ATTENTION),
    ("*.model_args.flash_attn", ATTENTION),
    ("*.model_args.ulysses_size", ULYSSES),
    ("*.model_args.disable_gradient_checkpointing", ACTIVATIONS),
    (
        "*.model_args.gradient_checkpointing_use_reentrant",
        ACTIVATIONS,
    ),
    ("*.model_args.dtype", WORKER_DTYPE),
    ("*.model_args.device_map", WORKERS),
    (
        "*.model_args.model_type",
        "the architecture is read from config.json",
    ),
    (
        "*.model_args.model_name_or_path",
        "every model is built from `pretrain`",
    ),
    ("*.training_args.bf16", TRAINER_PRECISION),
    ("*.training_args.fp16", TRAINER_PRECISION),
    ("*.training_args.output_dir", CHECKPOINTS),
    (
        "*.training_args.logging_steps",
        "metrics are written every step",
    ),
    (
        "*.training_args.save_steps",
        "checkpoints follow `save_steps`",
    ),
    ("*.training_args.save_hf_model", CHECKPOINTS),
    ("*.training_args.max_steps", "the run length is `max_steps`"),
    ("*.training_args.seed", "random streams derive from `seed`"),
    (
        "*.training_args.data_seed",
        "random streams derive from `seed`",
    ),
    ("*.training_args.gradient_checkpointing", ACTIVATIONS),
    ("*.training_args.dataloader_num_workers", WORKERS),
    (
        "*.generating_args.logprobs",
        "the sampler's log-probs are always recorded",
    ),
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
        "custom_envs.*.max_env_step_concurrent",
        "env steps run on `Rollout(env_threads)` threads",
    ),
    (
        "custom_envs.*.env_config.render_mode",
        "eval renders are always written",
    ),
];

/// The keys whose every value is unsupported.
pub const NOT_SUPPORTED: &[(&str, &str)] = &[
    ("custom_envs.*.user_prompt_format", "ROLL's older prompt format; the prompt follows `agent_template`"),
    ("custom_envs.*.reward_template", "roll-flow shows the env's reward as the env gives it"),
    ("custom_envs.*.tool_wrapper", "tool calls inside an env (python, search): roll-flow's envs take one reply a turn"),
    ("*.model_args.additional_target", "whole modules trained beside the adapters (PEFT's modules_to_save): roll-flow's LoRA trains the adapters only"),
    ("*.model_args.adapter_name_or_path", "starting from a saved adapter: roll-flow's LoRA starts from fresh adapters"),
    ("*.model_args.freeze_module_prefix", "roll-flow trains every parameter"),
    ("*.model_args.moe_aux_loss_coef", "roll-flow's models have no MoE layers"),
    ("*.model_args.model_config_kwargs", "the architecture is read from config.json as it is"),
    ("*.topr_positive_weight", "TOPR's weights (`pg_variant: topr`): roll-flow has no TOPR loss yet"),
    ("*.topr_negative_weight", "TOPR's weights (`pg_variant: topr`): roll-flow has no TOPR loss yet"),
    ("*.generating_args.stop_strings", STOPS),
    ("*.generating_args.include_stop_str_in_output", STOPS),
    ("train_infer_correction", "importance-sampling correction and filters between the sampler's and the trainer's log-probs: roll-flow has none yet"),
    ("teacher", OPD),
    ("student_train", OPD),
    ("student_infer", OPD),
    ("*.opd_kl_coef", OPD),
    ("*.tag_included", OPD),
    ("reward", "an LLM reward worker: roll-flow's rewards come from the envs"),
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
        assert!(matching(IGNORED, "actor_infer.model_args.lora_rank").is_some());
    }

    #[test]
    fn each_pattern_is_listed_once() {
        let mut all: Vec<&str> = IGNORED.iter().chain(NOT_SUPPORTED).map(|e| e.0).collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a pattern appears twice in roll_keys.rs");
    }
}
