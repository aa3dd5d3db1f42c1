//! ROLL's env managers and `custom_envs` as roll-flow env sets: one `envs:` entry per tag,
//! `num_groups_partition` giving each tag's groups.

use super::config_reader::ConfigReader;
use super::import_error::ImportError;
use super::roll_keys::NoticeKind;
use super::yaml_value::Value;

/// The env sets of one env manager and how its tags are played.
#[derive(Clone, Debug)]
pub struct EnvSets {
    /// `(set name, RON text of the entry)`, in tag order.
    pub entries: Vec<(String, String)>,
    /// Envs in all sets (groups × group_size).
    pub envs: u64,
    /// The largest `max_tokens_per_step` of the tags.
    pub max_tokens_per_step: Option<u64>,
    /// `Some(history)` when the tags use ROLL's `StepEnvManager`.
    pub step_history: Option<u64>,
}

/// ROLL's sokoban letter grid (`SokobanDifferentGridVocab`), roll-flow's `Letters`.
const LETTERS: [&str; 7] = ["W", ".", "G", "C", "B", "A", "@"];

/// The env sets of `manager` (`train_env_manager` or `val_env_manager`), named
/// `<prefix>_<tag>`; validation sets get a fixed seed.
pub fn env_sets(r: &mut ConfigReader, manager: &str, prefix: &str) -> Result<EnvSets, ImportError> {
    let tags_key = format!("{manager}.tags");
    let tags: Vec<String> = match r.list(&tags_key)? {
        Some(items) => items.iter().map(Value::to_string).collect(),
        None => {
            return Err(r.error(
                &tags_key,
                "missing".into(),
                "list the env tags this manager plays, e.g. `tags: [FrozenLake]`",
            ))
        }
    };
    let groups = r
        .count(&format!("{manager}.num_env_groups"))?
        .unwrap_or(128);
    let group_size = r.count(&format!("{manager}.group_size"))?.unwrap_or(1);
    let partition_key = format!("{manager}.num_groups_partition");
    let partition: Vec<u64> = match r.list(&partition_key)? {
        Some(items) => items
            .iter()
            .map(|v| match v {
                Value::Int(n) if *n >= 0 => Ok(*n as u64),
                other => Err(r.error(
                    &partition_key,
                    format!("`{other}` is not a group count"),
                    "write non-negative integers",
                )),
            })
            .collect::<Result<_, _>>()?,
        None if !tags.is_empty() && groups % tags.len() as u64 == 0 => {
            vec![groups / tags.len() as u64; tags.len()]
        }
        None => {
            return Err(r.error(
                &partition_key,
                format!(
                    "missing, and {groups} groups do not split evenly over {} tags",
                    tags.len()
                ),
                "give one group count per tag",
            ))
        }
    };
    if partition.len() != tags.len() || partition.iter().sum::<u64>() != groups {
        return Err(r.error(
            &partition_key,
            format!("{partition:?} must have one entry per tag ({}) summing to num_env_groups ({groups})", tags.len()),
            "make the counts add up, as ROLL asserts",
        ));
    }
    let penalty = r.num(&format!("{manager}.format_penalty"))?.unwrap_or(0.0);
    let mut sets = EnvSets {
        entries: Vec::new(),
        envs: groups * group_size,
        max_tokens_per_step: None,
        step_history: None,
    };
    let mut step_flags = Vec::new();
    for (tag, n) in tags.iter().zip(partition) {
        let base = format!("custom_envs.{tag}");
        let env = env_value(r, &base, penalty)?;
        if let Some(tokens) = r.count(&format!("{base}.max_tokens_per_step"))? {
            sets.max_tokens_per_step = Some(
                sets.max_tokens_per_step
                    .map_or(tokens, |m: u64| m.max(tokens)),
            );
        }
        let step = r
            .text(&format!("{base}.env_manager_cls"))?
            .is_some_and(|c| c.ends_with("StepEnvManager"));
        let history = r.count(&format!("{base}.history_length"))?;
        if step {
            sets.step_history = Some(history.unwrap_or(5));
        }
        step_flags.push(step);
        let seed = if prefix == "val" { ", seed: 10000" } else { "" };
        sets.entries.push((
            format!("{prefix}_{tag}"),
            format!("(env: {env}, groups: {n}, group_size: {group_size}{seed})"),
        ));
    }
    if step_flags.iter().any(|s| *s) && !step_flags.iter().all(|s| *s) {
        return Err(r.error(
            &tags_key,
            "mixes StepEnvManager and TrajEnvManager tags".into(),
            "play one kind of env manager per manager",
        ));
    }
    Ok(sets)
}

/// The `env:` value of the tag at `base` (`custom_envs.<tag>`).
fn env_value(r: &mut ConfigReader, base: &str, format_penalty: f64) -> Result<String, ImportError> {
    let type_key = format!("{base}.env_type");
    let config = format!("{base}.env_config");
    for written_by_roll in ["group_id", "group_size"] {
        r.value(&format!("{config}.{written_by_roll}"));
    }
    r.unsupported_unless(
        &format!("{base}.agent_runner_cls"),
        |v| *v == Value::Null,
        "roll-flow plays each env in its own loop, not through an agent runner",
    );
    // The env ends an episode at its own `max_steps`; the env manager also stops at the
    // tag's `max_steps`: the episode ends at the smaller.
    let max_actions = match (
        r.count(&format!("{config}.max_steps"))?,
        r.count(&format!("{base}.max_steps"))?,
    ) {
        (Some(env), Some(manager)) => Some(env.min(manager)),
        (one, other) => one.or(other),
    };
    // ROLL's envs take the penalty from their env_config; the manager's is the fallback.
    let format_penalty = r
        .num(&format!("{config}.format_penalty"))?
        .unwrap_or(format_penalty);
    let mut fields = Vec::new();
    match r.text(&type_key)?.as_deref() {
        Some("frozen_lake") => {
            if let Some(size) = r.count(&format!("{config}.size"))? {
                fields.push(format!("size: {size}"));
            }
            if let Some(p) = r.num(&format!("{config}.p"))? {
                fields.push(format!("p: {p:?}"));
            }
            let slippery = r.flag(&format!("{config}.is_slippery"))?.unwrap_or(true);
            fields.push(format!("slippery: {slippery}"));
            push_common(&mut fields, max_actions, format_penalty);
            Ok(format!("FrozenLake({})", fields.join(", ")))
        }
        Some("sokoban") => {
            let (x, y) = match dim_room(r, &format!("{config}.dim_room"))? {
                Some(dims) => dims,
                None => (
                    r.count(&format!("{config}.dim_x"))?.unwrap_or(6),
                    r.count(&format!("{config}.dim_y"))?.unwrap_or(6),
                ),
            };
            fields.push(format!("dim_room: ({x}, {y})"));
            fields.push(format!("num_boxes: {}", r.count(&format!("{config}.num_boxes"))?.unwrap_or(1)));
            if let Some(depth) = r.count(&format!("{config}.search_depth"))? {
                fields.push(format!("search_depth: {depth}"));
            }
            let lookup_key = format!("{config}.grid_lookup");
            if let Some(Value::Map(lookup)) = r.value(&lookup_key) {
                r.value(&format!("{config}.grid_vocab"));
                let symbols: Vec<String> = lookup.iter().map(|(_, v)| v.to_string()).collect();
                if symbols == LETTERS {
                    fields.push("vocabulary: Letters".into());
                } else {
                    r.notice(NoticeKind::NotSupported, &lookup_key, "roll-flow draws rooms in its `Standard` symbols or ROLL's `W . G C B A @` (`Letters`); wrote Standard");
                }
            }
            push_common(&mut fields, max_actions, format_penalty);
            Ok(format!("Sokoban({})", fields.join(", ")))
        }
        Some(other) => Err(r.error(&type_key, format!("env_type `{other}` is not supported"), "roll-flow has frozen_lake and sokoban built in; a Rust program can register its own (README, \"Your own environment, from Rust\")")),
        None => Err(r.error(&type_key, "missing".into(), "name the env: `env_type: frozen_lake` or `env_type: sokoban`")),
    }
}

/// ROLL's `dim_room: [x, y]` (newer configs; older ones write `dim_x` and `dim_y`).
fn dim_room(r: &mut ConfigReader, key: &str) -> Result<Option<(u64, u64)>, ImportError> {
    match r.list(key)?.as_deref() {
        None => Ok(None),
        Some([Value::Int(x), Value::Int(y)]) if *x > 0 && *y > 0 => {
            Ok(Some((*x as u64, *y as u64)))
        }
        Some(other) => Err(r.error(
            key,
            format!("`{}` is not a room size", Value::List(other.to_vec())),
            "write two positive integers, e.g. `dim_room: [6, 6]`",
        )),
    }
}

fn push_common(fields: &mut Vec<String>, max_actions: Option<u64>, format_penalty: f64) {
    if let Some(n) = max_actions {
        fields.push(format!("max_actions: {n}"));
    }
    fields.push(format!("format_penalty: {format_penalty:?}"));
}
