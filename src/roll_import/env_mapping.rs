//! ROLL's env managers and `custom_envs` as roll-flow env sets: one `envs:` entry per tag,
//! `num_groups_partition` giving each tag's groups; each tag's env, env manager and prompt.
//! An env key ROLL's config leaves out takes the default of ROLL's env class
//! (`roll/pipeline/agentic/env/{frozen_lake,sokoban}/env.py`), written out where roll-flow's
//! differs: Sokoban `dim_room (10, 10)`, `num_boxes 4`, `search_depth 300`; `max_steps 20`.

use super::config_reader::ConfigReader;
use super::gem_env::{gem_env, is_served_gem};
use super::import_error::ImportError;
use super::prompt_templates::{tag_prompt, Manager, TagPrompt};
use super::roll_keys::NoticeKind;
use super::unsupported_envs::{why_not, ENV_TYPES, MANAGERS};
use super::webshop_env::webshop_env;
use super::yaml_value::Value;

/// One tag of an env manager.
#[derive(Clone, Debug)]
pub struct EnvEntry {
    /// The `envs:` name, `<prefix>_<tag>`.
    pub name: String,
    /// The RON text of the entry.
    pub ron: String,
    /// The tag's prompt (`None`: roll-flow's default prompts).
    pub prompt: Option<TagPrompt>,
}

/// The env sets of one env manager and how its tags are played.
#[derive(Clone, Debug)]
pub struct EnvSets {
    /// The entries, in tag order.
    pub entries: Vec<EnvEntry>,
    /// Envs in all sets (groups × group_size).
    pub envs: u64,
    /// The largest `max_tokens_per_step` of the tags.
    pub max_tokens_per_step: Option<u64>,
    /// `Some(history)` when the tags use ROLL's step-wise env managers.
    pub step_history: Option<u64>,
}

/// `max_steps` of ROLL's FrozenLake and Sokoban envs when their env config has none.
const ROLL_ENV_MAX_STEPS: u64 = 20;

/// ROLL's sokoban letter grid (`SokobanDifferentGridVocab`), roll-flow's `Letters`.
const LETTERS: [&str; 7] = ["W", ".", "G", "C", "B", "A", "@"];

/// The env sets of `manager` (`train_env_manager` or `val_env_manager`), named
/// `<prefix>_<tag>`; validation sets get a fixed seed.
pub fn env_sets(r: &mut ConfigReader, manager: &str, prefix: &str) -> Result<EnvSets, ImportError> {
    let tags_key = format!("{manager}.tags");
    let tags: Vec<String> = match r.list(&tags_key)? {
        Some(items) => items.iter().map(Value::to_string).collect(),
        None => {
            return Err(r.missing(
                &tags_key,
                "list the env tags this manager plays, e.g. `tags: [FrozenLake]`",
            ))
        }
    };
    let groups = r
        .count(&format!("{manager}.num_env_groups"))?
        .unwrap_or(128);
    let group_size = r.count(&format!("{manager}.group_size"))?.unwrap_or(1);
    r.unsupported_unless(
        &format!("{manager}.group_size_redundancy"),
        |v| *v == Value::Int(0),
        "spare envs per group whose late episodes ROLL drops; roll-flow plays `group_size` envs (partial rollouts: `Rollout(partial)`)",
    );
    let partition = partition(r, manager, &tags, groups)?;
    let penalty = r.num(&format!("{manager}.format_penalty"))?.unwrap_or(0.0);
    let mut sets = EnvSets {
        entries: Vec::new(),
        envs: groups * group_size,
        max_tokens_per_step: None,
        step_history: None,
    };
    let mut managers = Vec::new();
    for (tag, n) in tags.iter().zip(partition) {
        let base = format!("custom_envs.{tag}");
        if r.peek(&base).is_none() {
            return Err(r.missing(
                &base,
                &format!(
                    "define the tag `{tag}` under `custom_envs`, or remove it from `{tags_key}`"
                ),
            ));
        }
        let env_type = env_type(r, &base)?;
        let env = env_value(r, &base, &env_type, penalty)?;
        let played_by = env_manager(r, &base)?;
        let tokens = r.count(&format!("{base}.max_tokens_per_step"))?;
        if let Some(tokens) = tokens {
            sets.max_tokens_per_step =
                Some(sets.max_tokens_per_step.map_or(tokens, |m| m.max(tokens)));
        }
        let history = r.count(&format!("{base}.history_length"))?;
        if played_by != Manager::Trajectory {
            sets.step_history = Some(step_history(r, &base, history)?);
        }
        managers.push(played_by);
        let prompt = tag_prompt(r, &base, played_by, tokens, is_served_gem(&env_type))?;
        let seed = if prefix == "val" { ", seed: 10000" } else { "" };
        let turns = match env_type.as_str() {
            t if is_served_gem(t) => r
                .count(&format!("{base}.max_steps"))?
                .map(|n| format!(", max_turns: {n}"))
                .unwrap_or_default(),
            _ => String::new(),
        };
        sets.entries.push(EnvEntry {
            name: format!("{prefix}_{tag}"),
            ron: format!("(env: {env}, groups: {n}, group_size: {group_size}{turns}{seed})"),
            prompt,
        });
    }
    if managers.iter().any(|m| *m != managers[0]) {
        return Err(r.error(
            &tags_key,
            format!("mixes env managers ({managers:?})"),
            "play one kind of env manager per manager (trajectory-wise or step-wise)",
        ));
    }
    Ok(sets)
}

/// Each tag's groups: `num_groups_partition`, or the groups split evenly (ROLL's rule).
fn partition(
    r: &mut ConfigReader,
    manager: &str,
    tags: &[String],
    groups: u64,
) -> Result<Vec<u64>, ImportError> {
    let key = format!("{manager}.num_groups_partition");
    let partition: Vec<u64> = match r.list(&key)? {
        Some(items) => items
            .iter()
            .map(|v| match v {
                Value::Int(n) if *n >= 0 => Ok(*n as u64),
                other => Err(r.error(
                    &key,
                    format!("`{other}` is not a group count"),
                    "write non-negative integers",
                )),
            })
            .collect::<Result<_, _>>()?,
        None if !tags.is_empty() && groups.is_multiple_of(tags.len() as u64) => {
            vec![groups / tags.len() as u64; tags.len()]
        }
        None => {
            return Err(r.error(
                &key,
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
            &key,
            format!("{partition:?} must have one entry per tag ({}) summing to num_env_groups ({groups})", tags.len()),
            "make the counts add up, as ROLL asserts",
        ));
    }
    Ok(partition)
}

/// ROLL shows the `history_length − 1` turns before the current one
/// (`rollout_cache.history[-history_length:-1]`, step_env_manager.py), none without the
/// key, and every earlier turn with 0 (Python's `[-0:-1]`: the tag's `max_steps` here).
fn step_history(
    r: &mut ConfigReader,
    base: &str,
    history: Option<u64>,
) -> Result<u64, ImportError> {
    Ok(match history {
        None => 0,
        Some(0) => r.count(&format!("{base}.max_steps"))?.unwrap_or(100),
        Some(n) => n - 1,
    })
}

fn env_type(r: &mut ConfigReader, base: &str) -> Result<String, ImportError> {
    let key = format!("{base}.env_type");
    r.text(&key)?.ok_or_else(|| {
        r.missing(&key, "name the env: `env_type: frozen_lake`, `sokoban`, `webshop` or a GEM game (`game:GuessTheNumber-v0`)")
    })
}

/// The tag's env manager (ROLL's default `TrajEnvManager`).
fn env_manager(r: &mut ConfigReader, base: &str) -> Result<Manager, ImportError> {
    let key = format!("{base}.env_manager_cls");
    let class = r.text(&key)?.unwrap_or_else(|| "TrajEnvManager".into());
    let name = class.rsplit('.').next().unwrap_or(&class);
    Ok(match name {
        "TrajEnvManager" => Manager::Trajectory,
        "ProxyEnvManager" => {
            r.notice(NoticeKind::NotSupported, &key, "ROLL plays the tag through its agent runner's HTTP proxy; roll-flow plays the same turns in its own loop");
            Manager::Trajectory
        }
        "StepEnvManager" => Manager::Step,
        "StepConcatEnvManager" => Manager::StepConcat,
        other => {
            let why = why_not(MANAGERS, other).unwrap_or(
                "not one of ROLL's TrajEnvManager, StepEnvManager, StepConcatEnvManager",
            );
            return Err(r.error(&key, format!("`{class}`: {why}"), "roll-flow plays tags with TrajEnvManager (trajectories), StepEnvManager or StepConcatEnvManager (steps)"));
        }
    })
}

/// The `env:` value of the tag at `base` (`custom_envs.<tag>`).
fn env_value(
    r: &mut ConfigReader,
    base: &str,
    env_type: &str,
    format_penalty: f64,
) -> Result<String, ImportError> {
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
    if is_served_gem(env_type) {
        r.count(&format!("{base}.max_steps"))?;
        return gem_env(r, &config, env_type);
    }
    // The env ends an episode at its own `max_steps`; the env manager also stops at the
    // tag's `max_steps`: the episode ends at the smaller.
    let manager_steps = r.count(&format!("{base}.max_steps"))?;
    // ROLL's envs take the penalty from their env_config; the manager's is the fallback.
    let format_penalty = r
        .num(&format!("{config}.format_penalty"))?
        .unwrap_or(format_penalty);
    if env_type == "webshop" {
        return webshop_env(r, &config, manager_steps, format_penalty);
    }
    let env_steps = r
        .count(&format!("{config}.max_steps"))?
        .unwrap_or(ROLL_ENV_MAX_STEPS);
    let max_actions = manager_steps.map_or(env_steps, |m| m.min(env_steps));
    let mut fields = Vec::new();
    match env_type {
        "frozen_lake" => {
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
        "sokoban" => {
            let (x, y) = match dim_room(r, &format!("{config}.dim_room"))? {
                Some(dims) => dims,
                None => (
                    r.count(&format!("{config}.dim_x"))?.unwrap_or(10),
                    r.count(&format!("{config}.dim_y"))?.unwrap_or(10),
                ),
            };
            fields.push(format!("dim_room: ({x}, {y})"));
            fields.push(format!("num_boxes: {}", r.count(&format!("{config}.num_boxes"))?.unwrap_or(4)));
            let depth = r.count(&format!("{config}.search_depth"))?.unwrap_or(300);
            fields.push(format!("search_depth: {depth}"));
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
        other => Err(r.error(
            &type_key,
            match why_not(ENV_TYPES, other) {
                Some(why) => format!("env_type `{other}` is not supported: {why}"),
                None => format!("env_type `{other}` is not supported"),
            },
            "roll-flow maps frozen_lake, sokoban, webshop and GEM's games and reasoning-gym envs (`game:…`, `rg:…`); a Rust program can register its own env (README, \"Your own environment, from Rust\") and any env can be served over docs/ENV_PROTOCOL.md",
        )),
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

/// The turn limit and penalty; one action a turn, as ROLL's envs parse one
/// (`parse_action_utils.py`: `<answer>Left || Up</answer>` is no action there).
fn push_common(fields: &mut Vec<String>, max_actions: u64, format_penalty: f64) {
    fields.push(format!(
        "max_actions: {max_actions}, max_actions_per_turn: 1"
    ));
    fields.push(format!("format_penalty: {format_penalty:?}"));
}
