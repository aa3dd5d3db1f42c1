//! Typed access to a GGUF file's metadata: every accessor names the key and what it found
//! when the value is missing or of another kind.

use std::collections::BTreeMap;

use super::reader::GgufValue;

/// The metadata of one file, read by key.
pub struct Metadata<'a>(pub &'a BTreeMap<String, GgufValue>);

impl<'a> Metadata<'a> {
    /// The raw value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&'a GgufValue> {
        self.0.get(key)
    }

    fn required(&self, key: &str) -> Result<&'a GgufValue, String> {
        self.get(key)
            .ok_or_else(|| format!("metadata key {key} is missing"))
    }

    fn wrong(key: &str, wanted: &str, found: &GgufValue) -> String {
        format!(
            "metadata key {key} should be {wanted}, found a {}",
            found.kind()
        )
    }

    /// A required non-negative integer.
    pub fn usize(&self, key: &str) -> Result<usize, String> {
        let value = self.required(key)?;
        value
            .as_u64()
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| Self::wrong(key, "a non-negative integer", value))
    }

    /// An optional non-negative integer.
    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>, String> {
        self.get(key).map(|_| self.usize(key)).transpose()
    }

    /// An optional number.
    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>, String> {
        self.get(key)
            .map(|v| v.as_f64().ok_or_else(|| Self::wrong(key, "a number", v)))
            .transpose()
    }

    /// An optional bool.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, String> {
        self.get(key)
            .map(|v| match v {
                GgufValue::Bool(b) => Ok(*b),
                other => Err(Self::wrong(key, "a bool", other)),
            })
            .transpose()
    }

    /// A required string.
    pub fn str(&self, key: &str) -> Result<&'a str, String> {
        match self.required(key)? {
            GgufValue::String(s) => Ok(s),
            other => Err(Self::wrong(key, "a string", other)),
        }
    }

    /// An optional string.
    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>, String> {
        self.get(key).map(|_| self.str(key)).transpose()
    }

    /// A required array of strings.
    pub fn strings(&self, key: &str) -> Result<Vec<&'a str>, String> {
        self.array(key)?
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                GgufValue::String(s) => Ok(s.as_str()),
                other => Err(format!(
                    "metadata key {key}: element {i} should be a string, found a {}",
                    other.kind()
                )),
            })
            .collect()
    }

    /// An optional array of integers.
    pub fn opt_ints(&self, key: &str) -> Result<Option<Vec<i64>>, String> {
        let Some(_) = self.get(key) else {
            return Ok(None);
        };
        self.array(key)?
            .iter()
            .enumerate()
            .map(|(i, v)| match *v {
                GgufValue::Int(n) => Ok(n),
                GgufValue::Uint(n) => i64::try_from(n).map_err(|_| format!("{key}: {n} too large")),
                ref other => Err(format!(
                    "metadata key {key}: element {i} should be an integer, found a {}",
                    other.kind()
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// A required array of numbers.
    pub fn floats(&self, key: &str) -> Result<Vec<f64>, String> {
        self.array(key)?
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_f64().ok_or_else(|| {
                    format!(
                        "metadata key {key}: element {i} should be a number, found a {}",
                        v.kind()
                    )
                })
            })
            .collect()
    }

    fn array(&self, key: &str) -> Result<&'a [GgufValue], String> {
        match self.required(key)? {
            GgufValue::Array(items) => Ok(items),
            other => Err(Self::wrong(key, "an array", other)),
        }
    }
}
