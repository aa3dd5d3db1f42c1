//! `Batch`: the only thing that moves along the pipeline's edges.
//!
//! A batch is a set of samples stored column-wise and packed: the token ids of all samples
//! are concatenated into one vector and `offsets` marks where each sample starts, so no
//! padding is ever stored or computed on. A sample is a whole trajectory (trajectory-wise)
//! or one step (step-wise). Token-level columns have one value per token (aligned with
//! `tokens`); sample-level columns have one value per sample.
//!
//! Splitting and concatenating by sample are cheap slice copies, which is what sharding
//! env groups across workers and micro-batching need.

pub mod column;

mod packed;
mod values;

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

pub use column::{Column, Level};
pub use values::Values;

/// An error from a batch access: a missing column, a wrong length or a wrong type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BatchError {
    #[error("batch has no {level:?}-level column `{name}`")]
    Missing { name: String, level: Level },
    #[error("column `{name}` has {found} values but the batch has {expected} {level:?}s")]
    Length {
        name: String,
        level: Level,
        expected: usize,
        found: usize,
    },
    #[error("column `{name}` holds {found} values, not {expected}")]
    Type {
        name: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("cannot join batches: {0}")]
    Mismatch(String),
    /// A batch read from a file whose parts do not fit together.
    #[error("not a well-formed batch: {0}")]
    Malformed(String),
}

/// Columnar, packed, variable-length samples. See the module docs. Read back (serde), a
/// batch is checked whole (`packed.rs`), so no access can fail on its shape.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "packed::PackedBatch")]
pub struct Batch {
    tokens: Vec<u32>,
    /// `offsets[i]..offsets[i + 1]` is sample `i`'s token range; always starts with 0.
    offsets: Vec<usize>,
    token_columns: BTreeMap<String, Values>,
    sample_columns: BTreeMap<String, Values>,
}

macro_rules! typed_getters {
    ($($fn_name:ident => $variant:ident, $t:ty, $tname:literal;)*) => {$(
        #[doc = concat!("The column's values as `", $tname, "`; errors when missing or of another type.")]
        pub fn $fn_name(&self, column: &Column) -> Result<&[$t], BatchError> {
            match self.column(column)? {
                Values::$variant(v) => Ok(v),
                other => Err(BatchError::Type {
                    name: column.name().to_string(),
                    expected: $tname,
                    found: other.type_name(),
                }),
            }
        }
    )*};
}

impl Batch {
    /// A batch with no samples.
    pub fn new() -> Self {
        Batch {
            tokens: Vec::new(),
            offsets: vec![0],
            ..Default::default()
        }
    }

    /// A batch from each sample's token ids.
    pub fn from_sequences<I, S>(sequences: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u32]>,
    {
        let mut batch = Batch::new();
        for seq in sequences {
            batch.tokens.extend_from_slice(seq.as_ref());
            batch.offsets.push(batch.tokens.len());
        }
        batch
    }

    pub fn num_samples(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn num_tokens(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.num_samples() == 0
    }

    /// All token ids, packed.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Sample boundaries: `num_samples() + 1` entries starting at 0.
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// The token range of sample `i`.
    pub fn sample_range(&self, i: usize) -> Range<usize> {
        self.offsets[i]..self.offsets[i + 1]
    }

    /// The token ids of sample `i`.
    pub fn sample_tokens(&self, i: usize) -> &[u32] {
        &self.tokens[self.sample_range(i)]
    }

    /// Sample lengths in tokens.
    pub fn lengths(&self) -> impl Iterator<Item = usize> + '_ {
        self.offsets.windows(2).map(|w| w[1] - w[0])
    }

    /// Sample indices ordered by sample length, shortest first (ties in batch order): the
    /// order to cut a batch in when each part is padded to its longest sample.
    pub fn indices_by_length(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.num_samples()).collect();
        order.sort_by_key(|&i| self.offsets[i + 1] - self.offsets[i]);
        order
    }

    fn expected_len(&self, level: Level) -> usize {
        match level {
            Level::Token => self.num_tokens(),
            Level::Sample => self.num_samples(),
        }
    }

    fn columns_of(&self, level: Level) -> &BTreeMap<String, Values> {
        match level {
            Level::Token => &self.token_columns,
            Level::Sample => &self.sample_columns,
        }
    }

    /// Sets (or replaces) a column; its length must match the column's level.
    pub fn set(&mut self, column: &Column, values: impl Into<Values>) -> Result<(), BatchError> {
        let values = values.into();
        let expected = self.expected_len(column.level);
        if values.len() != expected {
            return Err(BatchError::Length {
                name: column.name().to_string(),
                level: column.level,
                expected,
                found: values.len(),
            });
        }
        let map = match column.level {
            Level::Token => &mut self.token_columns,
            Level::Sample => &mut self.sample_columns,
        };
        map.insert(column.name().to_string(), values);
        Ok(())
    }

    /// Builder-style [`Batch::set`].
    pub fn with(mut self, column: &Column, values: impl Into<Values>) -> Result<Self, BatchError> {
        self.set(column, values)?;
        Ok(self)
    }

    pub fn has(&self, column: &Column) -> bool {
        self.columns_of(column.level).contains_key(column.name())
    }

    /// Removes a column, returning its values.
    pub fn remove(&mut self, column: &Column) -> Option<Values> {
        match column.level {
            Level::Token => self.token_columns.remove(column.name()),
            Level::Sample => self.sample_columns.remove(column.name()),
        }
    }

    /// The untyped values of a column.
    pub fn column(&self, column: &Column) -> Result<&Values, BatchError> {
        self.columns_of(column.level)
            .get(column.name())
            .ok_or_else(|| BatchError::Missing {
                name: column.name().to_string(),
                level: column.level,
            })
    }

    typed_getters! {
        f32s => F32, f32, "f32";
        i64s => I64, i64, "i64";
        u64s => U64, u64, "u64";
        bools => Bool, bool, "bool";
        strs => Str, String, "string";
    }

    /// Names of all columns, token-level first.
    pub fn column_names(&self) -> impl Iterator<Item = (Level, &str)> {
        let tok = self
            .token_columns
            .keys()
            .map(|k| (Level::Token, k.as_str()));
        tok.chain(
            self.sample_columns
                .keys()
                .map(|k| (Level::Sample, k.as_str())),
        )
    }

    /// The samples at `indices`, in that order, with every column.
    pub fn select(&self, indices: &[usize]) -> Batch {
        let mut out = Batch::new();
        let mut token_columns: BTreeMap<String, Values> = self
            .token_columns
            .iter()
            .map(|(k, v)| (k.clone(), v.empty_like()))
            .collect();
        let mut sample_columns: BTreeMap<String, Values> = self
            .sample_columns
            .iter()
            .map(|(k, v)| (k.clone(), v.empty_like()))
            .collect();
        for &i in indices {
            let range = self.sample_range(i);
            out.tokens.extend_from_slice(&self.tokens[range.clone()]);
            out.offsets.push(out.tokens.len());
            for (name, dst) in token_columns.iter_mut() {
                dst.extend_from(&self.token_columns[name], range.clone());
            }
            for (name, dst) in sample_columns.iter_mut() {
                dst.extend_from(&self.sample_columns[name], i..i + 1);
            }
        }
        out.token_columns = token_columns;
        out.sample_columns = sample_columns;
        out
    }

    /// Splits into `parts` contiguous pieces whose sample counts differ by at most one.
    pub fn split(&self, parts: usize) -> Vec<Batch> {
        let parts = parts.max(1);
        let n = self.num_samples();
        (0..parts)
            .map(|p| {
                let indices: Vec<usize> = (p * n / parts..(p + 1) * n / parts).collect();
                self.select(&indices)
            })
            .collect()
    }

    /// Concatenates batches sample-wise. Every batch must have the same columns with the
    /// same types (an empty batch with no columns joins anything).
    pub fn concat(batches: &[Batch]) -> Result<Batch, BatchError> {
        let mut parts = batches
            .iter()
            .filter(|b| !(b.is_empty() && b.column_names().next().is_none()));
        let Some(first) = parts.next() else {
            return Ok(Batch::new());
        };
        let mut out = first.clone();
        for b in parts {
            out.append(b)?;
        }
        Ok(out)
    }

    fn append(&mut self, other: &Batch) -> Result<(), BatchError> {
        let names = |b: &Batch| {
            b.column_names()
                .map(|(l, n)| (l, n.to_string()))
                .collect::<Vec<_>>()
        };
        if names(self) != names(other) {
            return Err(BatchError::Mismatch(format!(
                "columns differ: {:?} vs {:?}",
                names(self),
                names(other)
            )));
        }
        let base = self.tokens.len();
        self.tokens.extend_from_slice(&other.tokens);
        self.offsets
            .extend(other.offsets[1..].iter().map(|o| o + base));
        for (own, theirs) in [
            (&mut self.token_columns, &other.token_columns),
            (&mut self.sample_columns, &other.sample_columns),
        ] {
            for (name, dst) in own.iter_mut() {
                let src = &theirs[name];
                if !dst.extend_from(src, 0..src.len()) {
                    return Err(BatchError::Mismatch(format!(
                        "column `{name}` changes type"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Joins two batches holding the same samples (as two branches of the graph produce):
    /// the result has the union of their columns. A column present in both must be equal.
    pub fn merge(mut self, other: Batch) -> Result<Batch, BatchError> {
        if self.tokens != other.tokens || self.offsets != other.offsets {
            return Err(BatchError::Mismatch(
                "branches carry different samples; only batches of the same samples merge".into(),
            ));
        }
        for (own, theirs) in [
            (&mut self.token_columns, other.token_columns),
            (&mut self.sample_columns, other.sample_columns),
        ] {
            for (name, values) in theirs {
                match own.get(&name) {
                    Some(existing) if *existing != values => {
                        return Err(BatchError::Mismatch(format!(
                            "column `{name}` differs between branches"
                        )))
                    }
                    _ => {
                        own.insert(name, values);
                    }
                }
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
