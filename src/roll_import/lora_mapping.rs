//! ROLL's LoRA keys (`actor_train.model_args.lora_*`) as the policy's `lora:`.
//!
//! ROLL (`roll/configs/model_args.py`, `roll/models/model_providers.py`'s
//! `setup_lora_training`, after LLaMA-Factory) trains adapters when `lora_target` is set:
//! a comma-separated list of module names, `all-linear` for every linear layer but the
//! head, or a regular expression; `lora_rank` (default 8), `lora_alpha` (default twice the
//! rank), `lora_dropout` (default 0). Names roll-flow's decoder lacks, `all-embedding`,
//! `all-router` and regular expressions are refused with the names it has.

use super::config_reader::ConfigReader;
use super::import_error::ImportError;

/// The decoder's linear layers, `all-linear`'s expansion: the model crate's
/// `lora_spec::TARGET_NAMES`, spelled out because `roll_import` depends on no other crate
/// (tests/cli_import_roll_keys.rs checks that the two agree).
pub const ALL_LINEAR: [&str; 7] = [
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
];

/// The policy's `lora: (..)` RON when ROLL's actor trains LoRA adapters, else `None`.
pub fn policy_lora(r: &mut ConfigReader) -> Result<Option<String>, ImportError> {
    const TARGET: &str = "actor_train.model_args.lora_target";
    let Some(target) = r.text(TARGET)? else {
        return Ok(None);
    };
    let rank = r.num("actor_train.model_args.lora_rank")?.unwrap_or(8.0);
    let alpha = r
        .num("actor_train.model_args.lora_alpha")?
        .unwrap_or(2.0 * rank);
    let dropout = r.num("actor_train.model_args.lora_dropout")?.unwrap_or(0.0);
    let help = format!(
        "name some of {} (comma-separated), or all-linear",
        ALL_LINEAR.join(", ")
    );
    if target.contains(['*', '$', '|', '(']) {
        return Err(r.error(
            TARGET,
            format!("`{target}` is a regular expression; roll-flow takes module names"),
            &help,
        ));
    }
    let mut targets: Vec<&'static str> = Vec::new();
    for name in target.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let names: Vec<&'static str> = match ALL_LINEAR.iter().find(|l| **l == name) {
            Some(layer) => vec![*layer],
            None if name == "all-linear" => ALL_LINEAR.to_vec(),
            None => {
                return Err(r.error(
                    TARGET,
                    format!("`{name}` is not a linear layer of roll-flow's decoder"),
                    &help,
                ))
            }
        };
        for n in names {
            if !targets.contains(&n) {
                targets.push(n);
            }
        }
    }
    if rank < 1.0 || rank.fract() != 0.0 {
        return Err(r.error(
            "actor_train.model_args.lora_rank",
            format!("{rank} is not a whole number ≥ 1"),
            "ROLL's default is 8",
        ));
    }
    let quoted: Vec<String> = targets.iter().map(|t| format!("{t:?}")).collect();
    let lora = format!(
        "(rank: {}, alpha: {alpha:?}, targets: [{}], dropout: {dropout:?})",
        rank as u64,
        quoted.join(", ")
    );
    Ok(Some(lora))
}
