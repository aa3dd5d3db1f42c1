//! ROLL's rollout-only pipeline (ROLL's `start_agentic_rollout_pipeline.py` example,
//! `roll/pipeline/agentic/agentic_rollout_pipeline.py`): a config with env managers and no
//! `actor_train`. ROLL plays `train_env_manager`'s envs with `actor_infer` for `max_steps`
//! steps, logs their scores per tag and dumps the trajectories; it trains nothing. The
//! pipeline it becomes is the same: the policy without an optimizer and one `Rollout`
//! node, no advantage, update or checkpoint (`roll-flow run --dump-batches DIR` writes the
//! batches, as ROLL's `rollout_dump_dir`). `val_env_manager`, if any, is not played, as in
//! ROLL.

use super::config_reader::ConfigReader;
use super::env_mapping::env_sets;
use super::import_error::ImportError;
use super::pipeline_mapping::{
    header_fields, ignore_unplayed_tags, max_new_tokens, prompt_fields, rollout_prompt,
    sampling_args, set_names, write_env_sets, Mapped,
};
use super::precision_mapping::model_precision;
use super::roll_keys::NoticeKind;

/// The top-level keys of ROLL's training (the estimator, the losses, the update, the
/// critic and reference, checkpoints and validation), which a rollout-only config may carry
/// and ROLL's rollout pipeline does not read: reported as such.
const TRAINING_KEYS: [&str; 35] = [
    "adv_estimator",
    "advantage_clip",
    "whiten_advantages",
    "reward_normalization",
    "reward_clip",
    "gamma",
    "lambd",
    "init_kl_coef",
    "target_kl",
    "kl_horizon",
    "kl_penalty",
    "add_token_level_kl",
    "max_grad_norm",
    "pg_clip",
    "pg_clip_low",
    "pg_clip_high",
    "use_pg_clip_range",
    "dual_clip_loss",
    "ratio_type",
    "loss_agg_mode",
    "ppo_epochs",
    "use_kl_loss",
    "kl_loss_coef",
    "entropy_loss_coef",
    "critic_warmup",
    "value_clip",
    "step_reward_gamma",
    "step_reward_weight",
    "episode_reward_weight",
    "save_steps",
    "eval_steps",
    "reference",
    "critic",
    "reward_pretrain",
    "async_generation_ratio",
];

/// Whether `r` is ROLL's rollout-only config: env managers and no `actor_train`.
pub fn is_rollout_only(r: &ConfigReader) -> bool {
    r.peek("actor_train").is_none() && r.peek("train_env_manager").is_some()
}

/// Maps a rollout-only config ([`is_rollout_only`]).
pub fn map_rollout_only(r: &mut ConfigReader) -> Result<Mapped, ImportError> {
    let mut out = header_fields(r)?;
    let Some(pretrain) = r.text("pretrain")? else {
        return Err(r.missing(
            "pretrain",
            "give the policy's model directory, e.g. `pretrain: models/Qwen2.5-0.5B-Instruct`",
        ));
    };
    let train = env_sets(r, "train_env_manager", "train")?;
    r.unread_unless_used(
        "val_env_manager",
        "ROLL's rollout pipeline plays train_env_manager's tags only",
    );
    ignore_unplayed_tags(r, &["train_env_manager"]);
    let precision = model_precision(r, "actor_infer")?;
    out.push_str(
        "        // pretrain (actor_infer plays; nothing trains); actor_infer.model_args.dtype\n",
    );
    out.push_str(&format!(
        "        \"policy\": (arch: HfDir({pretrain:?}){precision}),\n    }},\n    envs: {{\n"
    ));
    write_env_sets(&mut out, "train_env_manager", &train);
    out.push_str("    },\n    nodes: {\n");
    let sampling = sampling_args(r, "train_env_manager")?;
    let prompt = rollout_prompt(r, &train, None);
    let max_new = max_new_tokens(sampling.max_new_tokens, train.max_tokens_per_step);
    out.push_str("        // actor_infer.generating_args, custom_envs.<tag>.max_tokens_per_step, sequence_length;\n");
    out.push_str("        // ROLL's rollout pipeline trains nothing: no advantage, update or checkpoint node\n");
    out.push_str(&format!(
        "        \"rollout\": Rollout(envs: {}, policy: \"policy\", temperature: {:?}, top_p: {:?}{}, max_new_tokens: {max_new}{}{}),\n    }},\n    edges: [],\n)\n",
        set_names(&train),
        sampling.temperature,
        sampling.top_p,
        sampling.top_k.map(|k| format!(", top_k: {k}")).unwrap_or_default(),
        r.count("sequence_length")?.map(|n| format!(", sequence_length: {n}")).unwrap_or_default(),
        prompt.as_ref().map(prompt_fields).unwrap_or_default(),
    ));
    if let Some(batch) = r.count("rollout_batch_size")?.filter(|b| *b != train.envs) {
        r.notice(NoticeKind::NotSupported, "rollout_batch_size", format!("{batch}: each env plays one episode a step, so a step's batch is num_env_groups × group_size = {} trajectories", train.envs));
    }
    for key in TRAINING_KEYS {
        r.unread_unless_used(key, "ROLL's rollout pipeline trains nothing");
    }
    Ok(Mapped { body: out })
}
