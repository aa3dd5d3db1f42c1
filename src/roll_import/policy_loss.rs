//! ROLL's policy loss as `ActorStep(loss: ..)`.
//!
//! ROLL's agentic `ActorWorker` (the default `actor_train.worker_cls`) uses the PPO clip
//! loss; `agentic_actor_pg_worker.ActorWorker` picks one by `actor_train.pg_variant`
//! (default `vanilla`, `agentic_actor_pg_worker.py`). [`PG_VARIANTS`] holds every name,
//! one line each: the roll-flow loss it becomes, or why it is not mapped yet (the import
//! then writes the PPO clip loss and reports it). A loss roll-flow gains is one line
//! changed here.
//!
//! The PPO clip: `pg_clip` (0.2), or `pg_clip_low`/`pg_clip_high` with
//! `use_pg_clip_range`; `dual_clip_loss` (ROLL's dual clip at 3); `ratio_type` token or
//! segment; `loss_agg_mode`.

use super::config_reader::ConfigReader;
use super::import_error::ImportError;
use super::roll_keys::NoticeKind;

/// The PPO clip's settings, which the losses below take.
pub struct ClipArgs {
    pub low: f64,
    pub high: f64,
    pub dual_clip: bool,
    /// `Token` or `Segment`.
    pub ratio: &'static str,
    /// The aggregation, e.g. `SeqMeanTokenSum`.
    pub agg: &'static str,
}

/// What a `pg_variant` becomes.
pub enum PgVariant {
    /// A roll-flow loss, as its RON text (reading the variant's own keys, if any).
    Loss(fn(&ClipArgs, &mut ConfigReader) -> Result<String, ImportError>),
    /// Not in roll-flow yet: what the variant is.
    NotYet(&'static str),
}

/// ROLL's `pg_variant` names (agentic_actor_pg_worker.py), one line each.
pub const PG_VARIANTS: &[(&str, PgVariant)] = &[
    ("ppo", PgVariant::Loss(|a, _| Ok(ppo_clip(a)))),
    (
        "vanilla",
        PgVariant::NotYet("plain policy gradient −A·log π, without a ratio or clip"),
    ),
    ("tis", PgVariant::NotYet("truncated importance sampling")),
    (
        "topr",
        PgVariant::NotYet("tapered off-policy REINFORCE (TOPR)"),
    ),
    ("cispo", PgVariant::Loss(cispo)),
    ("kimi15", PgVariant::NotYet("Kimi k1.5's policy loss")),
];

/// The worker class that reads `pg_variant`.
const PG_WORKER: &str = "agentic_actor_pg_worker.ActorWorker";

/// `PpoClip(..)`.
fn ppo_clip(a: &ClipArgs) -> String {
    let dual = if a.dual_clip { ", dual_clip: 3.0" } else { "" };
    let ratio = if a.ratio == "Token" {
        String::new()
    } else {
        format!(", ratio: {}", a.ratio)
    };
    format!(
        "PpoClip(low: {:?}, high: {:?}{dual}{ratio}, agg: {})",
        a.low, a.high, a.agg
    )
}

/// `Cispo(..)` from ROLL's `_compute_cispo_loss`: the weight clip(r, 1 − ε_low, 1 + ε_high)
/// with `actor_train.cispo_epsilon_low`/`_high` (ROLL's defaults 0.1 and 0.1, not
/// roll-flow's 1 and 0.2), the run's `loss_agg_mode`. ROLL's `cispo_use_unified_mask: true`
/// (PPO's masking of the tokens past the clip) and a segment ratio are reported: roll-flow's
/// CISPO keeps every token and takes token ratios.
fn cispo(a: &ClipArgs, r: &mut ConfigReader) -> Result<String, ImportError> {
    let low = r.num("actor_train.cispo_epsilon_low")?.unwrap_or(0.1);
    let high = r.num("actor_train.cispo_epsilon_high")?.unwrap_or(0.1);
    if r.flag("actor_train.cispo_use_unified_mask")? == Some(true) {
        r.notice(
            NoticeKind::NotSupported,
            "actor_train.cispo_use_unified_mask",
            "`true` (drop the tokens past the clip, as PPO): roll-flow's Cispo keeps every token's gradient; wrote it without the mask",
        );
    }
    if a.ratio == "Segment" {
        r.notice(
            NoticeKind::NotSupported,
            "ratio_type",
            "`segment` with pg_variant cispo: roll-flow's Cispo takes token ratios",
        );
    }
    Ok(format!(
        "Cispo(low: {low:?}, high: {high:?}, agg: {})",
        a.agg
    ))
}

/// The `loss:` RON of the actor step.
pub fn policy_loss(r: &mut ConfigReader) -> Result<String, ImportError> {
    let args = clip_args(r)?;
    let worker = r.text("actor_train.worker_cls")?;
    let reads_variant = worker.as_deref().is_some_and(|w| w.ends_with(PG_WORKER));
    let variant = r.text("actor_train.pg_variant")?;
    let name = match (&variant, reads_variant) {
        (Some(v), false) => {
            r.notice(NoticeKind::Unread, "actor_train.pg_variant", format!("`{v}`: only `actor_train.worker_cls: roll.pipeline.agentic.{PG_WORKER}` reads it; ROLL's default ActorWorker uses the PPO clip loss"));
            return Ok(ppo_clip(&args));
        }
        (None, false) => return Ok(ppo_clip(&args)),
        (Some(v), true) => v.clone(),
        (None, true) => "vanilla".to_string(),
    };
    match PG_VARIANTS.iter().find(|(n, _)| *n == name) {
        Some((_, PgVariant::Loss(write))) => write(&args, r),
        Some((_, PgVariant::NotYet(what))) => {
            r.notice(
                NoticeKind::NotSupported,
                "actor_train.pg_variant",
                format!(
                    "`{name}` ({what}): roll-flow has no such loss yet; wrote the PPO clip loss"
                ),
            );
            Ok(ppo_clip(&args))
        }
        None => {
            let names: Vec<&str> = PG_VARIANTS.iter().map(|(n, _)| *n).collect();
            Err(r.error(
                "actor_train.pg_variant",
                format!("`{name}` is not a pg_variant ROLL knows (it raises ValueError)"),
                &format!("use one of {}", names.join(", ")),
            ))
        }
    }
}

fn clip_args(r: &mut ConfigReader) -> Result<ClipArgs, ImportError> {
    let clip = r.num("pg_clip")?.unwrap_or(0.2);
    let range = r.flag("use_pg_clip_range")? == Some(true);
    let low = r.num("pg_clip_low")?;
    let high = r.num("pg_clip_high")?;
    let (low, high) = match range {
        true => (low.unwrap_or(clip), high.unwrap_or(clip)),
        false => (clip, clip),
    };
    let dual_clip = r.flag("dual_clip_loss")? == Some(true);
    let ratio = match r.text("ratio_type")?.as_deref().unwrap_or("token") {
        "token" => "Token",
        "segment" => "Segment",
        other => {
            return Err(r.error(
                "ratio_type",
                format!("`{other}` is not a ratio type"),
                "use token or segment",
            ))
        }
    };
    let agg = match r
        .text("loss_agg_mode")?
        .as_deref()
        .unwrap_or("seq-mean-token-sum")
    {
        "token-mean" => "TokenMean",
        "seq-mean-token-sum" => "SeqMeanTokenSum",
        "seq-mean-token-mean" => "SeqMeanTokenMean",
        "seq-mean-token-sum-norm" => "SeqMeanTokenSumNorm",
        other => return Err(r.error(
            "loss_agg_mode",
            format!("`{other}` is not a loss aggregation"),
            "use token-mean, seq-mean-token-sum, seq-mean-token-mean or seq-mean-token-sum-norm",
        )),
    };
    Ok(ClipArgs {
        low,
        high,
        dual_clip,
        ratio,
        agg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_is_listed_once_and_ppo_maps_to_the_clip_loss() {
        let mut names: Vec<&str> = PG_VARIANTS.iter().map(|(n, _)| *n).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
        let args = ClipArgs {
            low: 0.2,
            high: 0.28,
            dual_clip: true,
            ratio: "Segment",
            agg: "TokenMean",
        };
        assert!(matches!(
            PG_VARIANTS.iter().find(|(n, _)| *n == "ppo"),
            Some((_, PgVariant::Loss(_)))
        ));
        assert_eq!(
            ppo_clip(&args),
            "PpoClip(low: 0.2, high: 0.28, dual_clip: 3.0, ratio: Segment, agg: TokenMean)"
        );
    }
}
