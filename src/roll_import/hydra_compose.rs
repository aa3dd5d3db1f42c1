//! Hydra's composition of a ROLL config: the `defaults:` list, read from files beside the
//! config, merged under it ([`super::hydra_defaults`]); then OmegaConf's `${...}`
//! interpolations resolved.
//!
//! An interpolation is `${a.b.c}`, an absolute key path; a value that is exactly one
//! interpolation takes the referenced value whole (a mapping too), otherwise the
//! referenced scalars are spliced into the string. The resolvers ROLL's configs use
//! (`${now:..}`, `${oc.env:..}`, `${oc.select:..}`) become stated constants
//! ([`super::omegaconf_resolvers`]); other resolvers and relative paths (`${.x}`) are refused
//! with the key that uses them. A defaults entry whose file is missing is recorded and
//! skipped: an error names it only where a key it might supply is needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::hydra_defaults::Loader;
use super::import_error::ImportError;
use super::omegaconf_resolvers::{evaluate, split_default, unquote};
use super::yaml_value::Value;

/// A composed, resolved config and where its keys came from.
#[derive(Clone, Debug)]
pub struct Composed {
    /// The merged tree with every interpolation resolved.
    pub tree: Value,
    /// Key paths some interpolation read (they are consumed by the keys that use them).
    pub referenced: BTreeSet<String>,
    /// Key paths whose value is written as an interpolation (a variable, when it is not a
    /// key ROLL reads).
    pub interpolated: BTreeSet<String>,
    /// Top-level keys set only by defaults files, with the file that set them.
    pub from_defaults: BTreeMap<String, PathBuf>,
    /// Defaults entries whose file is missing: (the entry as written, the file looked for).
    pub missing_defaults: Vec<(String, PathBuf)>,
    /// Resolvers replaced by constants: (key path, `${..}` as written, value, why).
    pub resolutions: Vec<Resolution>,
}

/// One use of a resolver and the constant it became.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolution {
    pub key: String,
    pub expression: String,
    pub value: String,
    pub why: String,
}

/// Where a needed key might have come from, when defaults files are missing: appended to
/// the error about that key.
pub fn missing_defaults_note(missing: &[(String, PathBuf)]) -> String {
    missing
        .iter()
        .map(|(entry, file)| {
            format!(
                "; the defaults entry `{entry}` may supply it, but its file {} is missing",
                file.display()
            )
        })
        .collect()
}

/// Reads `path`, composes its defaults list and resolves interpolations.
pub fn compose(path: &Path) -> Result<Composed, ImportError> {
    let mut loader = Loader::default();
    let merged = loader.load(path, 0)?;
    let mut resolver = Resolver {
        file: path,
        root: &merged,
        referenced: BTreeSet::new(),
        interpolated: BTreeSet::new(),
        resolutions: Vec::new(),
        missing_defaults: &loader.missing_defaults,
    };
    let tree = resolver.resolve(&merged, "", &mut Vec::new())?;
    Ok(Composed {
        tree,
        referenced: resolver.referenced,
        interpolated: resolver.interpolated,
        resolutions: resolver.resolutions,
        from_defaults: loader.from_defaults,
        missing_defaults: loader.missing_defaults,
    })
}

struct Resolver<'a> {
    file: &'a Path,
    root: &'a Value,
    referenced: BTreeSet<String>,
    interpolated: BTreeSet<String>,
    resolutions: Vec<Resolution>,
    missing_defaults: &'a [(String, PathBuf)],
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
            Value::Str(text) if text.contains("${") => {
                self.interpolated.insert(key.to_string());
                self.interpolate(text, key, stack)
            }
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
        if let Some((name, args)) = reference.split_once(':') {
            return self.resolver(name.trim(), args, key, stack);
        }
        if reference.starts_with('.') {
            return Err(self.error(
                key,
                format!("`${{{reference}}}`: relative interpolations are not supported"),
                "write an absolute `${a.b.c}`",
            ));
        }
        match self.lookup(reference, key, stack)? {
            Ok(value) => Ok(value),
            Err(path) => Err(self.error(
                key,
                format!(
                    "`${{{reference}}}` names no key (`{path}` is missing){}",
                    missing_defaults_note(self.missing_defaults)
                ),
                "define the key, or fix the path in the interpolation",
            )),
        }
    }

    /// `${name:args}`: a stated constant (reported), or the refusal of a resolver the
    /// importer does not know.
    fn resolver(
        &mut self,
        name: &str,
        args: &str,
        key: &str,
        stack: &mut Vec<String>,
    ) -> Result<Value, ImportError> {
        let expression = format!("${{{name}:{args}}}");
        if name == "oc.select" {
            let (selected, default) = split_default(args);
            return match (self.lookup(selected, key, stack)?, default) {
                (Ok(value), _) => Ok(value),
                (Err(_), Some(default)) => Ok(Value::Str(unquote(default).to_string())),
                (Err(path), None) => Err(self.error(
                    key,
                    format!(
                        "`{expression}` selects no key (`{path}` is missing) and has no default"
                    ),
                    "define the key, or give a default: `${oc.select:key,default}`",
                )),
            };
        }
        let Some(evaluated) = evaluate(name, args) else {
            return Err(self.error(
                key,
                format!("`{expression}`: the resolver `{name}` is not one the importer evaluates (now, oc.env, oc.select)"),
                "write the value itself",
            ));
        };
        self.resolutions.push(Resolution {
            key: key.to_string(),
            expression,
            value: evaluated.value.to_string(),
            why: evaluated.why,
        });
        Ok(evaluated.value)
    }

    /// The value at the absolute path `reference`, resolved; `Err(path)` names the first
    /// missing prefix.
    fn lookup(
        &mut self,
        reference: &str,
        key: &str,
        stack: &mut Vec<String>,
    ) -> Result<Result<Value, String>, ImportError> {
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
            let Some(next) = node.get(seg).cloned() else {
                stack.pop();
                return Ok(Err(path));
            };
            node = match &next {
                Value::Str(s) if s.contains("${") => self.interpolate(s, &path, stack)?,
                _ => next,
            };
        }
        let resolved = self.resolve(&node, reference, stack)?;
        stack.pop();
        self.referenced.insert(reference.to_string());
        Ok(Ok(resolved))
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
