//! The training keys: the advantage estimator and its shaping and KL penalty, the actor's
//! and critic's updates, and their optimizers.

use super::batch_mapping::batches;
use super::config_reader::ConfigReader;
use super::import_error::ImportError;
use super::policy_loss::policy_loss;
use super::roll_keys::NoticeKind;
use super::yaml_value::Value;

/// ROLL's `adv_estimator`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Estimator {
    Gae,
    Grpo,
    Reinforce,
    GiGpo,
    StepReinforce,
}

impl Estimator {
    /// Reads `adv_estimator` (ROLL's default `gae`).
    pub fn read(r: &mut ConfigReader) -> Result<Estimator, ImportError> {
        match r.text("adv_estimator")?.as_deref().unwrap_or("gae") {
            "gae" => Ok(Estimator::Gae),
            "grpo" => Ok(Estimator::Grpo),
            "reinforce" => Ok(Estimator::Reinforce),
            "gigpo" => Ok(Estimator::GiGpo),
            "step_reinforce" => Ok(Estimator::StepReinforce),
            "agentic_reinforce" => Err(r.error(
                "adv_estimator",
                "`agentic_reinforce` is not mapped: ROLL discounts the normalised trajectory score back from the last turn, roll-flow's AgenticReinforce discounts each turn's own env reward".into(),
                "use grpo, reinforce or step_reinforce, or write `AgenticReinforce` in the pipeline by hand",
            )),
            other => Err(r.error(
                "adv_estimator",
                format!("`{other}` is not supported"),
                "use gae, grpo, reinforce, gigpo or step_reinforce",
            )),
        }
    }
}

/// A node's RON text, the ROLL keys it came from, and what it needs upstream.
pub struct NodeText {
    pub ron: String,
    pub keys: &'static str,
    /// It has a KL penalty on the rewards (needs the reference model).
    pub kl_penalty: bool,
    /// It has a KL loss term (needs the reference model).
    pub kl_loss: bool,
}

fn node(ron: String, keys: &'static str) -> NodeText {
    NodeText {
        ron,
        keys,
        kl_penalty: false,
        kl_loss: false,
    }
}

const NO_OP: &str = "roll-flow has no equivalent";

/// The `adv` node.
pub fn advantage(r: &mut ConfigReader, estimator: &Estimator) -> Result<NodeText, ImportError> {
    let mut shaping = Vec::new();
    if let Some(c) = r.num("reward_clip")? {
        shaping.push(format!("reward_clip: {c:?}"));
    }
    if r.flag("whiten_advantages")? == Some(true) {
        shaping.push("whiten: true".into());
    }
    if let Some(c) = r.num("advantage_clip")? {
        shaping.push(format!("advantage_clip: {c:?}"));
    }
    for key in [
        "whiten_rewards",
        "use_reward_scaling",
        "use_reward_norm",
        "reward_shift",
        "reward_scale",
        "add_len_reward",
    ] {
        r.unsupported_unless(key, |v| *v == Value::Bool(false), NO_OP);
    }
    r.unsupported_unless("reward_norm", |v| *v == Value::Null, NO_OP);
    for (key, why) in [
        (
            "dirty_data_mask",
            "roll-flow trains on every sample the rollout gives",
        ),
        ("open_feedback_turn", NO_OP),
        ("use_token_reward", "rewards come from the envs' turns"),
        ("is_pure_opd", "on-policy distillation: roll-flow has none"),
        ("use_opd", "on-policy distillation: roll-flow has none"),
    ] {
        r.unsupported_unless(key, |v| *v == Value::Bool(false), why);
    }
    for key in [
        "norm_mean_type",
        "norm_std_type",
        "reward_normalization.global_scale_factor",
        "reward_normalization.global_shift_value",
    ] {
        r.unsupported_unless(key, |v| *v == Value::Null, NO_OP);
    }
    r.unsupported_unless(
        "exp_mode",
        |v| *v == Value::Str("train".into()),
        "roll-flow trains; `Eval` validates",
    );
    r.value("pure_opd_pipeline_type");
    let gamma = r.num("gamma")?.unwrap_or(1.0);
    let lambda = r.num("lambd")?.unwrap_or(0.95);
    let kl_coef = r.num("init_kl_coef")?.unwrap_or(0.2);
    let token_kl = r.flag("add_token_level_kl")?.unwrap_or(false);
    let estimator_name = kl_estimator(r)?;
    let target = r.num("target_kl")?;
    let horizon = r.num("kl_horizon")?;
    let mut kl = None;
    if token_kl && kl_coef > 0.0 {
        let mut fields = vec![
            format!("estimator: {estimator_name}"),
            format!("coef: {kl_coef:?}"),
        ];
        fields.extend(target.map(|t| format!("target: {t:?}")));
        fields.extend(horizon.map(|h| format!("horizon: {h:?}")));
        kl = Some(format!("kl_penalty: ({})", fields.join(", ")));
    }
    let (group_by, norm) = reward_normalization(r)?;
    let mut fields = Vec::new();
    let (kind, keys) = match estimator {
        Estimator::Gae => {
            fields.push(format!("gamma: {gamma:?}, lambda: {lambda:?}"));
            ("Gae", "adv_estimator: gae, gamma, lambd, reward_clip, whiten_advantages, advantage_clip, add_token_level_kl, init_kl_coef, target_kl, kl_horizon, kl_penalty")
        }
        Estimator::Grpo | Estimator::Reinforce => {
            fields.push(format!(
                "gamma: {gamma:?}, group_by: {group_by}, norm: {norm}"
            ));
            let kind = if *estimator == Estimator::Grpo {
                "Grpo"
            } else {
                "Reinforce"
            };
            (kind, "adv_estimator, gamma, reward_normalization (grouping, method), reward_clip, whiten_advantages, advantage_clip, add_token_level_kl, init_kl_coef, target_kl, kl_horizon, kl_penalty")
        }
        Estimator::GiGpo => {
            let step_gamma = r.num("step_reward_gamma")?.unwrap_or(0.95);
            let step_weight = r.num("step_reward_weight")?.unwrap_or(1.0);
            r.unsupported_unless(
                "episode_reward_weight",
                |v| v.as_f64() == Some(1.0),
                "roll-flow weighs the episode advantage 1; scale `step_weight` instead",
            );
            let gigpo_norm = if norm == "MeanStd" { "MeanStd" } else { "Mean" };
            if norm == "Identity" {
                r.notice(
                    NoticeKind::NotSupported,
                    "reward_normalization.method",
                    "GiGPO normalises by `mean` or `mean_std`; wrote Mean",
                );
            }
            fields.push(format!("step_gamma: {step_gamma:?}, step_weight: {step_weight:?}, norm: {gigpo_norm}, episode_stats: Trajectories"));
            if kl.take().is_some() {
                r.notice(
                    NoticeKind::NotSupported,
                    "add_token_level_kl",
                    "GiGPO takes no KL reward penalty; use `use_kl_loss`",
                );
            }
            ("GiGPO", "adv_estimator: gigpo, step_reward_gamma, step_reward_weight, episode_reward_weight, reward_normalization.method, reward_clip, whiten_advantages, advantage_clip")
        }
        Estimator::StepReinforce => {
            let step_gamma = r.num("step_reward_gamma")?.unwrap_or(0.95);
            if gamma != 1.0 {
                r.notice(NoticeKind::NotSupported, "gamma", format!("{gamma}: ROLL also discounts over a step's response tokens; roll-flow gives every token of a step its step's advantage"));
            }
            if kl.take().is_some() {
                r.notice(
                    NoticeKind::NotSupported,
                    "add_token_level_kl",
                    "StepReinforce takes no KL reward penalty; use `use_kl_loss`",
                );
            }
            fields.push(format!(
                "gamma: {step_gamma:?}, group_by: {group_by}, norm: {norm}"
            ));
            ("StepReinforce", "adv_estimator: step_reinforce, step_reward_gamma, reward_normalization (grouping, method, norm_mean_type, norm_std_type), reward_clip, whiten_advantages, advantage_clip")
        }
    };
    if !shaping.is_empty() {
        fields.push(format!("shaping: ({})", shaping.join(", ")));
    }
    let kl_penalty = kl.is_some();
    fields.extend(kl);
    let mut text = node(format!("{kind}({})", fields.join(", ")), keys);
    text.kl_penalty = kl_penalty;
    Ok(text)
}

fn kl_estimator(r: &mut ConfigReader) -> Result<&'static str, ImportError> {
    match r.text("kl_penalty")?.as_deref().unwrap_or("kl") {
        "kl" => Ok("K1"),
        "abs" => Ok("Abs"),
        "mse" => Ok("Mse"),
        "full" => {
            r.notice(
                NoticeKind::NotSupported,
                "kl_penalty",
                "`full` needs the reference's whole distribution; wrote K1",
            );
            Ok("K1")
        }
        other => Err(r.error(
            "kl_penalty",
            format!("`{other}` is not a KL estimator"),
            "use kl, abs, mse or full",
        )),
    }
}

/// `reward_normalization` as (`group_by`, `norm`), as ROLL's `RewardNormalizationConfig`
/// resolves it (agentic_config.py): `norm_mean_type` / `norm_std_type` (`batch`, `group`
/// or none) where given, else derived from `method` (`mean`: a mean; `mean_std`,
/// `asym_clip`: mean and std) over the batch when `grouping` is `batch` (ROLL's default),
/// else over `grouping`'s groups.
fn reward_normalization(r: &mut ConfigReader) -> Result<(&'static str, &'static str), ImportError> {
    let grouping = r
        .text("reward_normalization.grouping")?
        .unwrap_or_else(|| "batch".into());
    let groups = match grouping.as_str() {
        "state" | "traj_group_id" => "Group",
        "tags" => "EnvTag",
        "batch" => "Batch",
        other => {
            r.notice(
                NoticeKind::NotSupported,
                "reward_normalization.grouping",
                format!("`{other}`; wrote Group (traj_group_id)"),
            );
            "Group"
        }
    };
    let scope = if groups == "Batch" { "batch" } else { "group" };
    let method = r
        .text("reward_normalization.method")?
        .unwrap_or_else(|| "identity".into());
    let (mut mean, mut std) = match method.as_str() {
        "identity" => (None, None),
        "mean" => (Some(scope.to_string()), None),
        "mean_std" | "asym_clip" => (Some(scope.to_string()), Some(scope.to_string())),
        other => {
            r.notice(
                NoticeKind::NotSupported,
                "reward_normalization.method",
                format!("`{other}` (ROLL falls back to identity); wrote Identity"),
            );
            (None, None)
        }
    };
    if method == "asym_clip" {
        r.notice(
            NoticeKind::NotSupported,
            "reward_normalization.method",
            "`asym_clip`: wrote MeanStd without ROLL's asymmetric clip",
        );
    }
    for (key, slot) in [("norm_mean_type", &mut mean), ("norm_std_type", &mut std)] {
        if let Some(explicit) = r.text(&format!("reward_normalization.{key}"))? {
            *slot = Some(explicit);
        }
    }
    let scoped = |t: &str| if t == "batch" { "Batch" } else { groups };
    Ok(match (mean.as_deref(), std.as_deref()) {
        (None, None) => (groups, "Identity"),
        (Some(m), None) => (scoped(m), "Mean"),
        (Some(m), Some(s)) if m == s => (scoped(m), "MeanStd"),
        (m, s) => {
            r.notice(NoticeKind::NotSupported, "reward_normalization", format!("mean over {m:?}, std over {s:?}: roll-flow takes both over one grouping; wrote MeanStd over {}", scoped(m.unwrap_or("group"))));
            (scoped(m.unwrap_or("group")), "MeanStd")
        }
    })
}

/// The `actor_step` node.
pub fn actor_step(
    r: &mut ConfigReader,
    estimator: &Estimator,
    samples: u64,
) -> Result<NodeText, ImportError> {
    let loss = policy_loss(r)?;
    let mut ron = format!("ActorStep(model: \"policy\", loss: {loss}");
    r.unsupported_unless("l2", |v| v.as_f64() == Some(0.0), NO_OP);
    let entropy = r.num("entropy_loss_coef")?.unwrap_or(0.0);
    if entropy != 0.0 {
        ron.push_str(&format!(", entropy: {entropy:?}"));
    }
    let kl_loss = r.flag("use_kl_loss")? == Some(true);
    let kl_coef = r.num("kl_loss_coef")?.unwrap_or(0.0);
    if kl_loss {
        ron.push_str(&format!(", kl: (coef: {kl_coef:?}, estimator: K3)"));
    }
    ron.push_str(&format!(
        ", ppo_epochs: {}",
        r.count("ppo_epochs")?.unwrap_or(1).max(1)
    ));
    ron.push_str(&batches(r, "actor_train", samples)?);
    if *estimator == Estimator::Gae {
        ron.push_str(&format!(
            ", critic_warmup: {}",
            r.count("critic_warmup")?.unwrap_or(0)
        ));
    }
    ron.push(')');
    let mut text = node(ron, "actor_train.pg_variant, pg_clip (use_pg_clip_range, pg_clip_low, pg_clip_high), dual_clip_loss, ratio_type, loss_agg_mode, entropy_loss_coef, use_kl_loss, kl_loss_coef, ppo_epochs, critic_warmup; actor_train.training_args (per_device_train_batch_size × gradient_accumulation_steps × data-parallel devices)");
    text.kl_loss = kl_loss;
    Ok(text)
}

/// The `critic_step` node.
pub fn critic_step(r: &mut ConfigReader, samples: u64) -> Result<NodeText, ImportError> {
    let clip = match r.num("value_clip")? {
        Some(c) => format!("Some({c:?})"),
        None => "None".into(),
    };
    let epochs = r.count("ppo_epochs")?.unwrap_or(1).max(1);
    let batches = batches(r, "critic", samples)?;
    Ok(node(
        format!("CriticStep(model: \"critic\", loss: ValueLoss(clip: {clip}), ppo_epochs: {epochs}{batches})"),
        "value_clip, ppo_epochs; critic.training_args (per_device_train_batch_size × gradient_accumulation_steps × data-parallel devices)",
    ))
}

/// The `optim:` of `worker`'s training args (transformers' defaults where absent).
pub fn optimizer(r: &mut ConfigReader, worker: &str) -> Result<String, ImportError> {
    let args = format!("{worker}.training_args");
    let lr = r.num(&format!("{args}.learning_rate"))?.unwrap_or(5e-5);
    let beta1 = r.num(&format!("{args}.adam_beta1"))?.unwrap_or(0.9);
    let beta2 = r.num(&format!("{args}.adam_beta2"))?.unwrap_or(0.999);
    let eps = r.num(&format!("{args}.adam_epsilon"))?.unwrap_or(1e-8);
    let decay = r.num(&format!("{args}.weight_decay"))?.unwrap_or(0.0);
    let steps = r.peek("max_steps").and_then(|v| v.as_f64()).unwrap_or(0.0);
    let mut warmup = r.count(&format!("{args}.warmup_steps"))?.unwrap_or(0);
    if let Some(ratio) = r.num(&format!("{args}.warmup_ratio"))?.filter(|x| *x > 0.0) {
        warmup = warmup.max((ratio * steps).ceil() as u64);
    }
    let schedule_key = format!("{args}.lr_scheduler_type");
    let schedule = match r.text(&schedule_key)?.as_deref().unwrap_or("linear") {
        "cosine" => "Cosine",
        "constant" | "constant_with_warmup" => "Constant",
        other => {
            r.notice(NoticeKind::NotSupported, &schedule_key, format!("`{other}` (transformers' default is linear): roll-flow has constant and cosine; wrote Cosine"));
            "Cosine"
        }
    };
    let clip = match r.num("max_grad_norm")?.or(Some(1.0)).filter(|c| *c > 0.0) {
        Some(c) => format!("Some({c:?})"),
        None => "None".into(),
    };
    Ok(format!(
        "AdamW(lr: {lr:?}, betas: ({beta1:?}, {beta2:?}), eps: {eps:?}, weight_decay: {decay:?}, warmup_steps: {warmup}, schedule: {schedule}, grad_clip: {clip})"
    ))
}
