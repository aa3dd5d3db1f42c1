//! The ROLL keys that become the pipeline: models, env sets, and the node graph implied by
//! `adv_estimator`. Each section of the written file starts with a comment naming the ROLL
//! keys it came from. docs/roll-import.md holds the same mapping as a table.

use super::checkpointing_mapping::gradient_checkpointing;
use super::config_reader::ConfigReader;
use super::env_mapping::{env_sets, EnvSets};
use super::import_error::ImportError;
use super::lora_mapping::policy_lora;
use super::precision_mapping::model_precision;
use super::prompt_templates::TagPrompt;
use super::roll_keys::NoticeKind;
use super::training_mapping::{actor_step, advantage, critic_step, optimizer, Estimator};
use super::yaml_value::Value;

/// The pipeline text, without the header.
pub struct Mapped {
    /// `Pipeline(...)` with its section comments.
    pub body: String,
}

/// Maps the whole config of a training pipeline (a rollout-only one is
/// [`super::rollout_only_mapping`]'s).
pub fn map_pipeline(r: &mut ConfigReader) -> Result<Mapped, ImportError> {
    if r.is_empty() {
        return Err(r.error(
            "(top level)",
            "the config has no keys (ROLL has nothing to run either: no `pretrain`, no env tags)"
                .into(),
            "import a config that sets `pretrain`, `custom_envs` and the env managers' `tags`",
        ));
    }
    let mut out = header_fields(r)?;
    let Some(pretrain) = r.text("pretrain")? else {
        return Err(r.missing(
            "pretrain",
            "give the policy's model directory, e.g. `pretrain: models/Qwen2.5-0.5B-Instruct`",
        ));
    };
    let estimator = Estimator::read(r)?;
    let train = env_sets(r, "train_env_manager", "train")?;
    let val = match r.peek("val_env_manager") {
        Some(_) => Some(env_sets(r, "val_env_manager", "val")?),
        None => None,
    };
    ignore_unplayed_tags(r, &["train_env_manager", "val_env_manager"]);
    let adv = advantage(r, &estimator)?;
    let actor = actor_step(r, &estimator, train.envs)?;
    let critic = if estimator == Estimator::Gae {
        Some(critic_step(r, train.envs)?)
    } else {
        None
    };
    let policy_optim = optimizer(r, "actor_train")?;
    let precision = model_precision(r, "actor_train")?;
    out.push_str("        // pretrain; actor_train.model_args.dtype, disable_gradient_checkpointing; actor_train.training_args (learning_rate, weight_decay, warmup_steps, lr_scheduler_type, adam_*); max_grad_norm\n");
    let lora = match policy_lora(r)? {
        Some(lora) => {
            out.push_str("        // actor_train.model_args.lora_target, lora_rank, lora_alpha, lora_dropout\n");
            format!(", lora: {lora}")
        }
        None => String::new(),
    };
    let checkpointing = gradient_checkpointing(r, "actor_train")?;
    out.push_str(&format!(
        "        \"policy\": (arch: HfDir({pretrain:?}){precision}{lora}{checkpointing}, optim: {policy_optim}),\n"
    ));
    if actor.kl_loss || adv.kl_penalty {
        let precision = model_precision(r, "reference")?;
        out.push_str("        // pretrain (the reference model of the KL term); reference.model_args.dtype\n");
        out.push_str(&format!(
            "        \"reference\": (arch: HfDir({pretrain:?}){precision}),\n"
        ));
    }
    if critic.is_some() {
        let critic_model = r
            .text("reward_pretrain")?
            .unwrap_or_else(|| pretrain.clone());
        let critic_optim = optimizer(r, "critic")?;
        let precision = model_precision(r, "critic")?;
        let checkpointing = gradient_checkpointing(r, "critic")?;
        out.push_str("        // reward_pretrain (the critic, adv_estimator: gae); critic.model_args.dtype, disable_gradient_checkpointing; critic.training_args; max_grad_norm\n");
        out.push_str(&format!(
            "        \"critic\": (arch: HfDir({critic_model:?}){precision}{checkpointing}, optim: {critic_optim}),\n"
        ));
    }
    out.push_str("    },\n    envs: {\n");
    write_env_sets(&mut out, "train_env_manager", &train);
    if let Some(val) = &val {
        write_env_sets(&mut out, "val_env_manager", val);
    }
    out.push_str("    },\n    nodes: {\n");
    let mut edges = Vec::new();
    let sampling = sampling_args(r, "train_env_manager")?;
    let samples = match (train.step_history, estimator) {
        (Some(history), _) => format!("Step(history: {history})"),
        (None, Estimator::GiGpo | Estimator::StepReinforce) => {
            return Err(r.error(
                "adv_estimator",
                "gigpo and step_reinforce need step-wise samples, but the train tags use TrajEnvManager".into(),
                "set the tags' env_manager_cls to StepEnvManager (ROLL's step_envs.yaml) or StepConcatEnvManager",
            ))
        }
        (None, _) => "Trajectory".into(),
    };
    let prompt = rollout_prompt(r, &train, val.as_ref());
    let max_new = max_new_tokens(sampling.max_new_tokens, train.max_tokens_per_step);
    out.push_str("        // actor_infer.generating_args (temperature, top_p, top_k, max_new_tokens), custom_envs.<tag>.max_tokens_per_step,\n");
    out.push_str("        // custom_envs.<tag>.env_manager_cls and history_length (sample mode), sequence_length\n");
    if prompt.is_some() {
        out.push_str("        // custom_envs.<tag>: agent_system_template, agent_template, env_config.env_instruction (prompt)\n");
    }
    out.push_str(&format!(
        "        \"rollout\": Rollout(envs: {}, policy: \"policy\", samples: {samples}, temperature: {:?}, top_p: {:?}{}, max_new_tokens: {max_new}{}{}),\n",
        set_names(&train), sampling.temperature, sampling.top_p,
        sampling.top_k.map(|k| format!(", top_k: {k}")).unwrap_or_default(),
        r.count("sequence_length")?.map(|n| format!(", sequence_length: {n}")).unwrap_or_default(),
        prompt.as_ref().map(prompt_fields).unwrap_or_default(),
    ));
    out.push_str("        // ROLL recomputes π_old with actor_train before the update\n");
    out.push_str("        \"old_logprob\": LogProb(model: \"policy\"),\n");
    edges.push(("rollout", "old_logprob"));
    if actor.kl_loss || adv.kl_penalty {
        out.push_str("        \"ref_logprob\": RefLogProb(model: \"reference\"),\n");
        edges.extend([("rollout", "ref_logprob"), ("ref_logprob", "adv")]);
    }
    if critic.is_some() {
        out.push_str("        \"values\": Values(model: \"critic\"),\n");
        edges.extend([("rollout", "values"), ("values", "adv")]);
    }
    edges.push(("old_logprob", "adv"));
    out.push_str(&format!(
        "        // {}\n        \"adv\": {},\n",
        adv.keys, adv.ron
    ));
    if let Some(critic) = &critic {
        out.push_str(&format!(
            "        // {}\n        \"critic_step\": {},\n",
            critic.keys, critic.ron
        ));
        edges.push(("adv", "critic_step"));
    }
    out.push_str(&format!(
        "        // {}\n        \"actor_step\": {},\n",
        actor.keys, actor.ron
    ));
    edges.extend([("adv", "actor_step"), ("actor_step", "checkpoint")]);
    if let Some(val) = &val {
        let every = r.count("eval_steps")?.unwrap_or(10).max(1);
        let val_sampling = sampling_args(r, "val_env_manager")?;
        let eval_new = max_new_tokens(val_sampling.max_new_tokens, val.max_tokens_per_step);
        if val_sampling.top_p < 1.0 || val_sampling.top_k.is_some() {
            r.notice(NoticeKind::NotSupported, "generating_args (validation)", "Eval samples with the temperature alone; top_p and top_k apply to training rollouts only");
        }
        out.push_str("        // eval_steps; val_env_manager plays with actor_infer.generating_args (else its own generating_args: temperature) and its tags' max_tokens_per_step\n");
        out.push_str(&format!(
            "        \"eval\": Eval(envs: {}, every: {every}, temperature: {:?}, max_new_tokens: {eval_new}),\n",
            set_names(val), val_sampling.temperature
        ));
    }
    for (key, estimators) in [
        ("step_reward_gamma", "gigpo and step_reinforce"),
        ("step_reward_weight", "gigpo"),
        ("episode_reward_weight", "gigpo"),
        ("value_clip", "gae (the critic)"),
        ("critic_warmup", "gae (the critic)"),
    ] {
        r.unread_unless_used(
            key,
            &format!("ROLL uses it with adv_estimator {estimators} only"),
        );
    }
    if critic.is_none() {
        r.unread_unless_used(
            "critic",
            "ROLL builds the critic with adv_estimator gae only",
        );
    }
    let save = r.count("save_steps")?.unwrap_or(50).max(1);
    out.push_str(&format!("        // save_steps\n        \"checkpoint\": Checkpoint(every: {save}),\n    }},\n    edges: [\n"));
    for (from, to) in edges {
        out.push_str(&format!("        ({from:?}, {to:?}),\n"));
    }
    out.push_str("    ],\n)\n");
    let rollout_batch = r.count("rollout_batch_size")?;
    if let Some(batch) = rollout_batch.filter(|b| *b != train.envs) {
        r.notice(NoticeKind::NotSupported, "rollout_batch_size", format!("{batch}: each train env plays one episode a step, so a step's batch is num_env_groups × group_size = {} trajectories", train.envs));
    }
    if let Some(ratio) = r.num("async_generation_ratio")?.filter(|x| *x > 0.0) {
        r.notice(
            NoticeKind::NotSupported,
            "async_generation_ratio",
            format!("{ratio}: the imported pipeline rolls out synchronously"),
        );
    }
    Ok(Mapped { body: out })
}

/// `Pipeline(` up to `models: {`, from exp_name, seed, max_steps and output_dir.
pub(super) fn header_fields(r: &mut ConfigReader) -> Result<String, ImportError> {
    let name = r
        .text("exp_name")?
        .unwrap_or_else(|| "agentic_pipeline".into());
    let seed = r.count("seed")?.unwrap_or(42);
    // ROLL's BaseConfig default.
    let steps = r.count("max_steps")?.unwrap_or(500);
    let out_dir = r.text("output_dir")?.unwrap_or_else(|| "./output".into());
    let mut out = String::new();
    out.push_str("Pipeline(\n    // exp_name, seed, max_steps, output_dir\n");
    out.push_str(&format!(
        "    name: {name:?},\n    seed: {seed},\n    steps: {steps},\n"
    ));
    out.push_str(
        "    device: Cuda(0), // ROLL trains on GPUs; on a CPU, `--set device=Cpu` and each bf16 model's `precision=F32`\n",
    );
    out.push_str(&format!("    out_dir: {out_dir:?},\n    models: {{\n"));
    Ok(out)
}

/// `custom_envs` entries that none of `managers` lists in its `tags` (ROLL's examples
/// declare more tags than they play).
pub(super) fn ignore_unplayed_tags(r: &mut ConfigReader, managers: &[&str]) {
    let played: Vec<String> = managers
        .iter()
        .filter_map(|manager| match r.peek(&format!("{manager}.tags")) {
            Some(Value::List(tags)) => Some(tags),
            _ => None,
        })
        .flatten()
        .map(|tag| tag.to_string())
        .collect();
    for tag in r.keys("custom_envs") {
        if !played.contains(&tag) {
            r.account(
                NoticeKind::Unread,
                &format!("custom_envs.{tag}"),
                "no env manager plays this tag",
            );
        }
    }
}

/// The one prompt of the `Rollout` (Eval plays with it too): the first train tag's. A tag
/// whose templates differ is reported, as roll-flow has one prompt per rollout.
pub(super) fn rollout_prompt(
    r: &mut ConfigReader,
    train: &EnvSets,
    val: Option<&EnvSets>,
) -> Option<TagPrompt> {
    let first = train.entries.first()?;
    let prompt = first.prompt.clone();
    let others = train
        .entries
        .iter()
        .chain(val.map(|v| v.entries.as_slice()).unwrap_or_default());
    for entry in others {
        if entry.prompt != prompt {
            r.notice(
                NoticeKind::NotSupported,
                &format!("prompt of {}", entry.name),
                format!("its templates differ from {}'s; roll-flow plays every env set of a pipeline with one prompt, {}'s", first.name, first.name),
            );
        }
    }
    prompt
}

/// `, prompt: (system: .., turn: ..)`, or `instruction: false` without a system message.
pub(super) fn prompt_fields(prompt: &TagPrompt) -> String {
    match &prompt.system {
        Some(system) => format!(", prompt: (system: {system:?}, turn: {:?})", prompt.turn),
        None => format!(", instruction: false, prompt: (turn: {:?})", prompt.turn),
    }
}

pub(super) fn write_env_sets(out: &mut String, manager: &str, sets: &EnvSets) {
    out.push_str(&format!(
        "        // {manager}: tags, num_groups_partition, group_size, format_penalty; custom_envs.<tag>: env_type, env_config\n"
    ));
    for entry in &sets.entries {
        out.push_str(&format!("        {:?}: {},\n", entry.name, entry.ron));
    }
}

pub(super) fn set_names(sets: &EnvSets) -> String {
    match sets.entries.as_slice() {
        [one] => format!("{:?}", one.name),
        several => {
            let names: Vec<String> = several.iter().map(|e| format!("{:?}", e.name)).collect();
            format!("[{}]", names.join(", "))
        }
    }
}

/// `actor_infer.generating_args`.
pub(super) struct Sampling {
    pub temperature: f64,
    pub top_p: f64,
    pub top_k: Option<u64>,
    pub max_new_tokens: Option<u64>,
}

/// The generation settings ROLL plays `manager` (`train_env_manager`/`val_env_manager`)
/// with, as its `agentic_config.py` picks them: `actor_infer.generating_args` when that has
/// any key, for both managers; otherwise the manager's own `generating_args`.
pub(super) fn sampling_args(r: &mut ConfigReader, manager: &str) -> Result<Sampling, ImportError> {
    let base = if r.keys("actor_infer.generating_args").is_empty() {
        format!("{manager}.generating_args")
    } else {
        "actor_infer.generating_args".to_string()
    };
    // vLLM's `top_k: -1` (and 0) is off.
    let top_k = r
        .num(&format!("{base}.top_k"))?
        .filter(|k| *k >= 1.0)
        .map(|k| k as u64);
    r.unsupported_unless(
        &format!("{base}.num_beams"),
        |v| *v == Value::Int(1),
        "roll-flow samples, it does not beam-search",
    );
    r.unsupported_unless(
        &format!("{base}.repetition_penalty"),
        |v| v.as_f64() == Some(1.0),
        "no repetition penalty",
    );
    let greedy = r.flag(&format!("{base}.do_sample"))? == Some(false);
    Ok(Sampling {
        temperature: if greedy {
            0.0
        } else {
            r.num(&format!("{base}.temperature"))?.unwrap_or(1.0)
        },
        top_p: r.num(&format!("{base}.top_p"))?.unwrap_or(1.0),
        top_k,
        max_new_tokens: r.count(&format!("{base}.max_new_tokens"))?,
    })
}

/// ROLL generates at most `max_tokens_per_step` per turn, within `max_new_tokens`.
pub(super) fn max_new_tokens(generating: Option<u64>, per_step: Option<u64>) -> u64 {
    match (generating, per_step) {
        (Some(g), Some(s)) => g.min(s),
        (Some(n), None) | (None, Some(n)) => n,
        (None, None) => 128,
    }
}
