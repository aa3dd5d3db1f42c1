//! Typed reads of a composed ROLL config that remember every key they touch, so that at
//! the end each key of the file is accounted for: read (mapped), listed in
//! [`super::roll_keys`] (ignored or not supported), consumed by an interpolation, set only
//! by a defaults file and never used, or else reported as unknown with its path. The
//! notices also carry the resolvers replaced by constants and the missing defaults files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::hydra_compose::{join, missing_defaults_note, Composed};
use super::import_error::{ImportError, UnknownKey};
use super::roll_keys::{matching, NoticeKind, IGNORED, NOT_SUPPORTED};
use super::yaml_value::Value;

/// One reported key (or group of keys) that the written pipeline does not carry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Notice {
    /// Not supported or ignored.
    pub kind: NoticeKind,
    /// The key path (or pattern, for a group of keys).
    pub key: String,
    /// Why, and what the pipeline does instead.
    pub message: String,
}

/// Table matches by (kind, pattern, reason): the first path matched and the count.
type Grouped = BTreeMap<(NoticeKind, String, String), (String, usize)>;

/// Reads keys of one composed config.
pub struct ConfigReader {
    file: PathBuf,
    composed: Composed,
    asked: BTreeSet<String>,
    used: BTreeSet<String>,
    notices: Vec<Notice>,
}

impl ConfigReader {
    /// A reader over `composed`, read from `file`.
    pub fn new(file: &Path, composed: Composed) -> Self {
        ConfigReader {
            file: file.to_path_buf(),
            composed,
            asked: BTreeSet::new(),
            used: BTreeSet::new(),
            notices: Vec::new(),
        }
    }

    /// The value at `path`, marking it (and everything under it) used.
    pub fn value(&mut self, path: &str) -> Option<Value> {
        self.asked.insert(path.to_string());
        let segs: Vec<&str> = path.split('.').collect();
        let value = self.composed.tree.at(&segs).cloned();
        if value.is_some() {
            self.used.insert(path.to_string());
        }
        value
    }

    /// The value at `path`, without counting it as read (for keys reported otherwise,
    /// such as the device mapping that sizes mini-batches).
    pub fn peek(&self, path: &str) -> Option<Value> {
        let segs: Vec<&str> = path.split('.').collect();
        self.composed.tree.at(&segs).cloned()
    }

    /// `path` is absent but needed: the error says so, with `help`, and names any missing
    /// defaults file that might have supplied it.
    pub fn missing(&self, path: &str, help: &str) -> ImportError {
        let message = format!(
            "missing{}",
            missing_defaults_note(&self.composed.missing_defaults)
        );
        self.error(path, message, help)
    }

    /// Whether the config has no keys at all.
    pub fn is_empty(&self) -> bool {
        matches!(&self.composed.tree, Value::Map(entries) if entries.is_empty())
    }

    /// A type error at `path`.
    pub fn error(&self, path: &str, message: String, help: &str) -> ImportError {
        ImportError::Value {
            file: self.file.clone(),
            key: path.to_string(),
            message,
            help: help.to_string(),
        }
    }

    fn typed<T>(
        &mut self,
        path: &str,
        what: &str,
        get: impl Fn(&Value) -> Option<T>,
    ) -> Result<Option<T>, ImportError> {
        match self.value(path) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => get(&v).map(Some).ok_or_else(|| {
                self.error(
                    path,
                    format!("expected {what}, got {} `{v}`", v.kind()),
                    &format!("write {what}"),
                )
            }),
        }
    }

    /// A number (`null` and absent are `None`).
    pub fn num(&mut self, path: &str) -> Result<Option<f64>, ImportError> {
        self.typed(path, "a number", Value::as_f64)
    }

    /// A non-negative integer.
    pub fn count(&mut self, path: &str) -> Result<Option<u64>, ImportError> {
        self.typed(path, "a non-negative integer", |v| match v {
            Value::Int(i) if *i >= 0 => Some(*i as u64),
            _ => None,
        })
    }

    /// A boolean.
    pub fn flag(&mut self, path: &str) -> Result<Option<bool>, ImportError> {
        self.typed(path, "true or false", |v| match v {
            Value::Bool(b) => Some(*b),
            _ => None,
        })
    }

    /// A string (a number is written out as text).
    pub fn text(&mut self, path: &str) -> Result<Option<String>, ImportError> {
        self.typed(path, "a string", |v| match v {
            Value::Str(s) => Some(s.clone()),
            Value::Int(_) | Value::Float(_) => Some(v.to_string()),
            _ => None,
        })
    }

    /// A list of scalars, each as [`Value`].
    pub fn list(&mut self, path: &str) -> Result<Option<Vec<Value>>, ImportError> {
        self.typed(path, "a list", |v| match v {
            Value::List(items) => Some(items.clone()),
            _ => None,
        })
    }

    /// The keys of the mapping at `path` (not marking the entries used).
    pub fn keys(&self, path: &str) -> Vec<String> {
        let segs: Vec<&str> = path.split('.').collect();
        match self.composed.tree.at(&segs) {
            Some(Value::Map(entries)) => entries.iter().map(|(k, _)| k.clone()).collect(),
            _ => Vec::new(),
        }
    }

    /// Records a notice for `key`.
    pub fn notice(&mut self, kind: NoticeKind, key: &str, message: impl Into<String>) {
        self.notices.push(Notice {
            kind,
            key: key.to_string(),
            message: message.into(),
        });
    }

    /// Reports `path`, when present and not read, as a key ROLL does not read in this
    /// config either (e.g. a GiGPO setting with another estimator).
    pub fn unread_unless_used(&mut self, path: &str, why: &str) {
        if self.peek(path).is_some() && !self.used.contains(path) {
            self.account(NoticeKind::Unread, path, why);
        }
    }

    /// Reports `path` and everything under it with `kind` and the reason, as read.
    pub fn account(&mut self, kind: NoticeKind, path: &str, message: impl Into<String>) {
        self.used.insert(path.to_string());
        self.notice(kind, path, message);
    }

    /// Reports `path` as not supported unless its value is absent or `ok` accepts it.
    pub fn unsupported_unless(&mut self, path: &str, ok: impl Fn(&Value) -> bool, why: &str) {
        if let Some(v) = self.value(path) {
            if !ok(&v) {
                self.notice(NoticeKind::NotSupported, path, format!("`{v}`: {why}"));
            }
        }
    }

    /// Accounts for every key: the notices (sorted, grouped) or the unknown keys.
    pub fn finish(mut self) -> Result<Vec<Notice>, ImportError> {
        let tree = self.composed.tree.clone();
        let mut unknown = Vec::new();
        let mut grouped: Grouped = BTreeMap::new();
        let mut from_defaults: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
        self.walk(&tree, "", &mut unknown, &mut grouped, &mut from_defaults);
        let mut keys = Vec::new();
        for path in unknown {
            let key = self.suggest(path);
            // `name: ${other}` at the top, near no known key: a variable for
            // interpolations (ROLL's examples define some they never use); ROLL's config
            // classes drop it.
            if key.did_you_mean.is_none()
                && !key.path.contains('.')
                && self.composed.interpolated.contains(&key.path)
            {
                self.notices.push(Notice {
                    kind: NoticeKind::Unread,
                    key: key.path,
                    message: "a variable (its value is an interpolation) that nothing reads".into(),
                });
            } else {
                keys.push(key);
            }
        }
        if !keys.is_empty() {
            return Err(ImportError::UnknownKeys {
                file: self.file,
                keys,
            });
        }
        for ((kind, pattern, message), (first, n)) in grouped {
            let key = if n > 1 {
                format!("{pattern} ({n} keys)")
            } else {
                first
            };
            self.notices.push(Notice { kind, key, message });
        }
        for (file, keys) in from_defaults {
            let keys: Vec<String> = keys.into_iter().map(|k| format!("`{k}`")).collect();
            self.notices.push(Notice {
                kind: NoticeKind::Unread,
                key: keys.join(", "),
                message: format!(
                    "set only by the defaults file {} and never used",
                    file.display()
                ),
            });
        }
        for (entry, file) in &self.composed.missing_defaults {
            self.notices.push(Notice {
                kind: NoticeKind::Warning,
                key: format!("defaults entry `{entry}`"),
                message: format!(
                    "{} is missing; imported without it (no key it could supply is needed)",
                    file.display()
                ),
            });
        }
        for r in &self.composed.resolutions {
            self.notices.push(Notice {
                kind: NoticeKind::Resolver,
                key: r.key.clone(),
                message: format!("`{}` became {:?}: {}", r.expression, r.value, r.why),
            });
        }
        self.notices.sort();
        self.notices.dedup();
        Ok(self.notices)
    }

    fn walk(
        &self,
        value: &Value,
        path: &str,
        unknown: &mut Vec<String>,
        grouped: &mut Grouped,
        from_defaults: &mut BTreeMap<PathBuf, BTreeSet<String>>,
    ) {
        if !path.is_empty() {
            if self.used.contains(path) || self.composed.referenced.contains(path) {
                return;
            }
            for (kind, table) in [
                (NoticeKind::NotSupported, NOT_SUPPORTED),
                (NoticeKind::Ignored, IGNORED),
            ] {
                if let Some((pattern, why)) = matching(table, path) {
                    let entry = grouped.entry((kind, pattern.to_string(), why.to_string()));
                    entry.or_insert_with(|| (path.to_string(), 0)).1 += 1;
                    return;
                }
            }
        }
        match value {
            Value::Map(entries) if !entries.is_empty() => {
                for (key, child) in entries {
                    self.walk(child, &join(path, key), unknown, grouped, from_defaults);
                }
            }
            _ => {
                let top = path.split('.').next().unwrap_or_default();
                match self.composed.from_defaults.get(top) {
                    Some(file) => {
                        let shown: Vec<&str> = path.split('.').take(2).collect();
                        from_defaults
                            .entry(file.clone())
                            .or_default()
                            .insert(shown.join("."));
                    }
                    None => unknown.push(path.to_string()),
                }
            }
        }
    }

    fn suggest(&self, path: String) -> UnknownKey {
        let segs: Vec<&str> = path.split('.').collect();
        let patterns = IGNORED
            .iter()
            .chain(NOT_SUPPORTED)
            .filter(|(p, _)| {
                p.split('.').count() == segs.len()
                    && p.split('.')
                        .zip(&segs)
                        .all(|(p, s)| match p.strip_prefix('*') {
                            Some(suffix) => s.ends_with(suffix),
                            None => true,
                        })
            })
            .map(|(p, _)| {
                p.split('.')
                    .zip(&segs)
                    .map(|(p, s)| if p.starts_with('*') { *s } else { p })
                    .collect::<Vec<_>>()
                    .join(".")
            });
        let did_you_mean = self
            .asked
            .iter()
            .cloned()
            .chain(patterns)
            .map(|known| (strsim::normalized_levenshtein(&known, &path), known))
            .filter(|(score, _)| *score >= 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, known)| known);
        UnknownKey { path, did_you_mean }
    }
}
