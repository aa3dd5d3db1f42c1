//! GEM env types as `Process` envs: ROLL's `env_type: game:GuessTheNumber-v0` or
//! `rg:letter_counting` is `gem.make(env_type, **env_config)` (ROLL's
//! `traj_env_manager.py`); here the shipped adapter serves the same env over the
//! env-server protocol (docs/ENV_PROTOCOL.md):
//! `Process(command: ["python3", "-m", "roll_flow_env.gem", "game:GuessTheNumber-v0",
//! "--kwarg", "min_number=1", ...])`.
//!
//! The env config's integers pass as `--kwarg KEY=N` (the adapter takes integers); a
//! boolean passes as 0 or 1 (Python reads them alike); `seed` is dropped, as ROLL replaces
//! it with the group's seed and roll-flow seeds every reset; any other value is reported
//! and GEM's default is used. Dataset-backed GEM envs (`math:`, `code:`, `qa:`, `logic:`)
//! are refused by `env_mapping`.

use super::config_reader::ConfigReader;
use super::import_error::ImportError;
use super::roll_keys::NoticeKind;
use super::yaml_value::Value;

/// GEM's env families roll-flow serves through its adapter: games and reasoning-gym.
const SERVED: &[&str] = &["game:", "rg:"];

/// Whether `env_type` is a GEM env the adapter serves.
pub fn is_served_gem(env_type: &str) -> bool {
    SERVED.iter().any(|prefix| env_type.starts_with(prefix))
}

/// The `Process(..)` env of the GEM tag whose env config is at `config`.
pub fn gem_env(r: &mut ConfigReader, config: &str, env_type: &str) -> Result<String, ImportError> {
    let mut command = vec![
        "python3".to_string(),
        "-m".into(),
        "roll_flow_env.gem".into(),
        env_type.to_string(),
    ];
    for key in r.keys(config) {
        let path = format!("{config}.{key}");
        if ["group_id", "group_size"].contains(&key.as_str()) {
            continue;
        }
        let value = r.value(&path);
        let number = match value {
            _ if key == "seed" => continue,
            Some(Value::Int(n)) => n,
            Some(Value::Bool(b)) => i64::from(b),
            None | Some(Value::Null) => continue,
            Some(other) => {
                r.notice(NoticeKind::NotSupported, &path, format!("`{other}`: the GEM adapter passes integer keywords only; GEM's default is used"));
                continue;
            }
        };
        command.extend(["--kwarg".to_string(), format!("{key}={number}")]);
    }
    let quoted: Vec<String> = command.iter().map(|part| format!("{part:?}")).collect();
    Ok(format!("Process(command: [{}])", quoted.join(", ")))
}
