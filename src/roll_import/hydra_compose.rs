//! Hydra's composition of a ROLL config: the `defaults:` list, read from files beside the
//! config, merged under it; then OmegaConf's `${...}` interpolations resolved.
//!
//! Supported defaults entries: `path/name` and `path/name@_here_` (merged at the top
//! level), `_self_` (where the file itself goes; last by default, as in Hydra 1.1+), and
//! `group: option` (the file `group/option.yaml`, placed under the key `group`). An
//! interpolation is `${a.b.c}`, an absolute key path; a value that is exactly one
//! interpolation takes the referenced value whole (a mapping too), otherwise the
//! referenced scalars are spliced into the string. Resolvers (`${oc.env:X}`) and relative
//! paths (`${.x}`) are refused with the key that uses them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::import_error::ImportError;
use super::yaml_value::{parse_yaml, Value};

/// A composed, resolved config and where its keys came from.
#[derive(Clone, Debug)]
pub struct Composed {
    /// The merged tree with every interpolation resolved.
    pub tree: Value,
    /// Key paths some interpolation read (they are consumed by the keys that use them).
    pub referenced: BTreeSet<String>,
    /// Top-level keys set only by defaults files, with the file that set them.
    pub from_defaults: BTreeMap<String, PathBuf>,
}

/// Reads `path`, composes its defaults list and resolves interpolations.
pub fn compose(path: &Path) -> Result<Composed, ImportError> {
    let mut from_defaults = BTreeMap::new();
    let merged = load_with_defaults(path, &mut from_defaults, 0)?;
    let mut resolver = Resolver {
        file: path,
        root: &merged,
        referenced: BTreeSet::new(),
    };
    let tree = resolver.resolve(&merged, "", &mut Vec::new())?;
    Ok(Composed {
        tree,
        referenced: resolver.referenced,
        from_defaults,
    })
}

const MAX_DEPTH: usize = 16;

fn load_with_defaults(
    path: &Path,
    from_defaults: &mut BTreeMap<String, PathBuf>,
    depth: usize,
) -> Result<Value, ImportError> {
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
        let included = match &entry {
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
                load_with_defaults(&file, from_defaults, depth + 1).map(|v| (v, file))?
            }
            Value::Map(group) if group.len() == 1 => {
                let (key, option) = &group[0];
                let group_name = key.trim_start_matches("override ").trim();
                if *option == Value::Null {
                    continue;
                }
                let file = yaml_file(&folder.join(group_name), &option.to_string());
                let v = load_with_defaults(&file, from_defaults, depth + 1)?;
                (Value::Map(vec![(group_name.to_string(), v)]), file)
            }
            other => {
                return Err(config_error(format!(
                    "defaults entry `{other}` is not a config name, `_self_` or `group: option`"
                )))
            }
        };
        let (value, file) = included;
        if let Value::Map(keys) = &value {
            for (key, _) in keys {
                from_defaults
                    .entry(key.clone())
                    .or_insert_with(|| file.clone());
            }
        }
        merge(&mut merged, value);
    }
    for (key, _) in &own {
        from_defaults.remove(key);
    }
    if !self_merged {
        merge(&mut merged, Value::Map(own));
    }
    Ok(merged)
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

struct Resolver<'a> {
    file: &'a Path,
    root: &'a Value,
    referenced: BTreeSet<String>,
}

impl Resolver<'_> {
    fn error(&self, key: &str, message: String, help: &str) -> ImportError {
        ImportError::Value {
            file: self.file.to_path_buf(),
            key: if key.is_empty() {
                "(top level)".into()
            } else {
                key.into()
            },
            message,
            help: help.into(),
        }
    }

    /// `value` (found at `key`) with its interpolations resolved; `stack` holds the
    /// references being resolved, to catch cycles.
    fn resolve(
        &mut self,
        value: &Value,
        key: &str,
        stack: &mut Vec<String>,
    ) -> Result<Value, ImportError> {
        match value {
            Value::Str(text) if text.contains("${") => self.interpolate(text, key, stack),
            Value::List(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| self.resolve(item, &format!("{key}[{i}]"), stack))
                .collect::<Result<_, _>>()
                .map(Value::List),
            Value::Map(entries) => entries
                .iter()
                .map(|(k, v)| Ok((k.clone(), self.resolve(v, &join(key, k), stack)?)))
                .collect::<Result<_, _>>()
                .map(Value::Map),
            other => Ok(other.clone()),
        }
    }

    fn interpolate(
        &mut self,
        text: &str,
        key: &str,
        stack: &mut Vec<String>,
    ) -> Result<Value, ImportError> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            let Some(len) = rest[start..].find('}') else {
                return Err(self.error(
                    key,
                    format!("`{text}` opens `${{` without a closing `}}`"),
                    "close the interpolation",
                ));
            };
            let reference = rest[start + 2..start + len].trim();
            let whole = start == 0 && start + len + 1 == rest.len() && out.is_empty();
            let value = self.reference(reference, key, stack)?;
            if whole {
                return Ok(value);
            }
            if matches!(value, Value::Map(_) | Value::List(_)) {
                return Err(self.error(
                    key,
                    format!(
                        "`${{{reference}}}` is {} and cannot be spliced into the string `{text}`",
                        value.kind()
                    ),
                    "make the value exactly `${...}` to take the whole value",
                ));
            }
            out.push_str(&rest[..start]);
            out.push_str(&value.to_string());
            rest = &rest[start + len + 1..];
        }
        out.push_str(rest);
        Ok(Value::Str(out))
    }

    fn reference(
        &mut self,
        reference: &str,
        key: &str,
        stack: &mut Vec<String>,
    ) -> Result<Value, ImportError> {
        if reference.contains(':') || reference.starts_with('.') {
            return Err(self.error(
                key,
                format!(
                    "`${{{reference}}}`: resolvers and relative interpolations are not supported"
                ),
                "write the value itself, or an absolute `${a.b.c}`",
            ));
        }
        if stack.iter().any(|r| r == reference) {
            return Err(self.error(
                key,
                format!("interpolation cycle: {} -> {reference}", stack.join(" -> ")),
                "make one of these keys a plain value",
            ));
        }
        stack.push(reference.to_string());
        let mut node = self.root.clone();
        let mut path = String::new();
        for seg in reference.split('.') {
            path = join(&path, seg);
            let next = node.get(seg).cloned().ok_or_else(|| {
                self.error(
                    key,
                    format!("`${{{reference}}}` names no key (`{path}` is missing)"),
                    "define the key, or fix the path in the interpolation",
                )
            })?;
            node = match &next {
                Value::Str(s) if s.contains("${") => self.interpolate(s, &path, stack)?,
                _ => next,
            };
        }
        let resolved = self.resolve(&node, reference, stack)?;
        stack.pop();
        self.referenced.insert(reference.to_string());
        Ok(resolved)
    }
}

/// `parent.key`, or `key` at the top.
pub fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

#[cfg(test)]
#[path = "hydra_compose_tests.rs"]
mod tests;
