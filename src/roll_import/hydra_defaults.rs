//! Hydra's `defaults:` list: the files it names are read from the config's folder and
//! merged under the config (`_self_` last unless placed, as in Hydra 1.1+). Supported
//! entries: `path/name`, `path/name@_here_` / `@_global_` (merged at the top level),
//! `_self_`, and `group: option` (the file `group/option.yaml` under the key `group`). An
//! entry whose file is missing is recorded and skipped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::import_error::ImportError;
use super::yaml_value::{parse_yaml, Value};

const MAX_DEPTH: usize = 16;

/// Reads a config and its defaults, remembering where keys came from.
#[derive(Default)]
pub struct Loader {
    pub from_defaults: BTreeMap<String, PathBuf>,
    pub missing_defaults: Vec<(String, PathBuf)>,
}

impl Loader {
    /// The defaults file `file` of the entry `entry`, or `None` (recorded) when it is
    /// missing.
    fn load_default(
        &mut self,
        entry: &str,
        file: &Path,
        depth: usize,
    ) -> Result<Option<Value>, ImportError> {
        if !file.exists() {
            self.missing_defaults
                .push((entry.to_string(), file.to_path_buf()));
            return Ok(None);
        }
        self.load(file, depth).map(Some)
    }

    pub fn load(&mut self, path: &Path, depth: usize) -> Result<Value, ImportError> {
        let config_error = |message: String| ImportError::Config {
            file: path.to_path_buf(),
            message,
        };
        if depth > MAX_DEPTH {
            return Err(config_error(
                "the defaults lists nest more than 16 deep; is a file its own default?".into(),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| ImportError::Read {
            file: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let mut own = match parse_yaml(path, &text)? {
            Value::Map(entries) => entries,
            Value::Null => Vec::new(),
            other => {
                return Err(config_error(format!(
                    "the top level must be a mapping, got {}",
                    other.kind()
                )))
            }
        };
        let defaults = match own.iter().position(|(k, _)| k == "defaults") {
            Some(i) => own.remove(i).1,
            None => Value::List(Vec::new()),
        };
        let Value::List(entries) = defaults else {
            return Err(config_error(
                "`defaults` must be a list of config names".into(),
            ));
        };
        let folder = path.parent().unwrap_or(Path::new("."));
        let mut merged = Value::Map(Vec::new());
        let mut self_merged = false;
        for entry in entries {
            let (value, file) = match &entry {
                Value::Str(name) if name == "_self_" => {
                    merge(&mut merged, Value::Map(own.clone()));
                    self_merged = true;
                    continue;
                }
                Value::Str(name) => {
                    let (file_name, package) = name.split_once('@').unwrap_or((name, "_here_"));
                    if package != "_here_" && package != "_global_" {
                        return Err(config_error(format!(
                            "defaults entry `{name}`: only the packages `@_here_` and `@_global_` are supported; \
                             move the keys under `{package}` in the included file instead"
                        )));
                    }
                    let file = yaml_file(folder, file_name);
                    match self.load_default(name, &file, depth + 1)? {
                        Some(v) => (v, file),
                        None => continue,
                    }
                }
                Value::Map(group) if group.len() == 1 => {
                    let (key, option) = &group[0];
                    let group_name = key.trim_start_matches("override ").trim();
                    if *option == Value::Null {
                        continue;
                    }
                    let file = yaml_file(&folder.join(group_name), &option.to_string());
                    let written = format!("{group_name}: {option}");
                    match self.load_default(&written, &file, depth + 1)? {
                        Some(v) => (Value::Map(vec![(group_name.to_string(), v)]), file),
                        None => continue,
                    }
                }
                other => {
                    return Err(config_error(format!(
                        "defaults entry `{other}` is not a config name, `_self_` or `group: option`"
                    )))
                }
            };
            if let Value::Map(keys) = &value {
                for (key, _) in keys {
                    self.from_defaults
                        .entry(key.clone())
                        .or_insert_with(|| file.clone());
                }
            }
            merge(&mut merged, value);
        }
        for (key, _) in &own {
            self.from_defaults.remove(key);
        }
        if !self_merged {
            merge(&mut merged, Value::Map(own));
        }
        Ok(merged)
    }
}

fn yaml_file(folder: &Path, name: &str) -> PathBuf {
    if name.ends_with(".yaml") || name.ends_with(".yml") {
        folder.join(name)
    } else {
        folder.join(format!("{name}.yaml"))
    }
}

/// Merges `over` into `base`: mappings key by key, anything else replaced.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Map(base_entries), Value::Map(over_entries)) => {
            for (key, value) in over_entries {
                match base_entries.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, slot)) => merge(slot, value),
                    None => base_entries.push((key, value)),
                }
            }
        }
        (base, over) => *base = over,
    }
}
