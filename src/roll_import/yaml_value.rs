//! The YAML of a ROLL config as a plain, ordered tree, read with yaml-rust2.
//!
//! Mapping keys become strings (ROLL's `grid_lookup` has integer keys), floats are parsed
//! and the order of keys is kept, so the importer reports keys in file order.

use std::fmt;
use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

use super::import_error::ImportError;

/// One YAML value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `~`, `null` or an empty value.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string (quoted or plain).
    Str(String),
    /// A sequence.
    List(Vec<Value>),
    /// A mapping, keys in file order.
    Map(Vec<(String, Value)>),
}

impl Value {
    /// The entry `key` of a mapping.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value at a dotted path of mapping keys.
    pub fn at(&self, path: &[&str]) -> Option<&Value> {
        path.iter().try_fold(self, |value, key| value.get(key))
    }

    /// A number as f64 (an integer too).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// What kind of value this is, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Str(_) => "a string",
            Value::List(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => write!(f, "null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => write!(f, "{s}"),
            Value::List(items) => {
                let parts: Vec<String> = items.iter().map(Value::to_string).collect();
                write!(f, "[{}]", parts.join(", "))
            }
            Value::Map(_) => write!(f, "{{..}}"),
        }
    }
}

/// Parses one YAML document; a syntax error names the file, line and column.
pub fn parse_yaml(path: &Path, text: &str) -> Result<Value, ImportError> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| ImportError::Yaml {
        file: path.to_path_buf(),
        line: e.marker().line(),
        column: e.marker().col() + 1,
        message: e.info().to_string(),
    })?;
    match docs.into_iter().next() {
        None => Ok(Value::Map(Vec::new())),
        Some(doc) => convert(path, doc),
    }
}

fn convert(path: &Path, yaml: Yaml) -> Result<Value, ImportError> {
    Ok(match yaml {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Integer(i) => Value::Int(i),
        Yaml::Real(text) => match text.parse::<f64>() {
            Ok(x) => Value::Float(x),
            Err(_) => Value::Str(text),
        },
        Yaml::String(s) => Value::Str(s),
        Yaml::Array(items) => Value::List(
            items
                .into_iter()
                .map(|item| convert(path, item))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Hash(entries) => {
            let mut map = Vec::with_capacity(entries.len());
            for (key, value) in entries {
                let key = match key {
                    Yaml::String(s) | Yaml::Real(s) => s,
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    other => {
                        return Err(ImportError::Config {
                            file: path.to_path_buf(),
                            message: format!("a mapping key must be a scalar, got {other:?}"),
                        })
                    }
                };
                map.push((key, convert(path, value)?));
            }
            Value::Map(map)
        }
        Yaml::Alias(_) | Yaml::BadValue => {
            return Err(ImportError::Config {
                file: path.to_path_buf(),
                message: "YAML aliases (`*name`) are not supported; write the value out".into(),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_key_order_types_and_integer_keys() {
        let v = parse_yaml(
            Path::new("c.yaml"),
            "b: 1\na: 2.5e-6\nc: {0: \"W\"}\nd: ~\ne: [x, true]\n",
        )
        .unwrap();
        let Value::Map(entries) = &v else { panic!() };
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "c", "d", "e"]);
        assert_eq!(v.get("a"), Some(&Value::Float(2.5e-6)));
        assert_eq!(v.at(&["c", "0"]), Some(&Value::Str("W".into())));
        assert_eq!(v.get("d"), Some(&Value::Null));
        assert_eq!(v.get("e").unwrap().to_string(), "[x, true]");
    }

    #[test]
    fn syntax_error_has_line_and_column() {
        let err = parse_yaml(Path::new("bad.yaml"), "a: 1\nb: [1, 2\n").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("bad.yaml:"), "{text}");
        assert!(matches!(err, ImportError::Yaml { line: 3, .. }), "{err:?}");
    }
}
