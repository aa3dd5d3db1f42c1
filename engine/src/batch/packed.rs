//! A [`Batch`] as a file holds it, checked before it becomes one: `offsets` start at 0,
//! never decrease and end at the token count, and every column has one value per token or
//! per sample. A batch dump edited by hand or cut short is an error, never a panic later.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Batch, BatchError, Level, Values};

/// The fields of a serialized [`Batch`], unchecked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PackedBatch {
    tokens: Vec<u32>,
    offsets: Vec<usize>,
    #[serde(default)]
    token_columns: BTreeMap<String, Values>,
    #[serde(default)]
    sample_columns: BTreeMap<String, Values>,
}

impl TryFrom<PackedBatch> for Batch {
    type Error = BatchError;

    fn try_from(p: PackedBatch) -> Result<Batch, BatchError> {
        let malformed = |m: String| Err(BatchError::Malformed(m));
        if p.offsets.first() != Some(&0) {
            return malformed("`offsets` must start with 0".into());
        }
        if let Some(i) = p.offsets.windows(2).position(|w| w[1] < w[0]) {
            return malformed(format!(
                "`offsets` must not decrease, but entry {} is {} after {}",
                i + 1,
                p.offsets[i + 1],
                p.offsets[i]
            ));
        }
        let last = p.offsets[p.offsets.len() - 1];
        if last != p.tokens.len() {
            return malformed(format!(
                "`offsets` ends at {last}, but there are {} tokens",
                p.tokens.len()
            ));
        }
        let samples = p.offsets.len() - 1;
        for (columns, level, expected) in [
            (&p.token_columns, Level::Token, p.tokens.len()),
            (&p.sample_columns, Level::Sample, samples),
        ] {
            if let Some((name, values)) = columns.iter().find(|(_, v)| v.len() != expected) {
                return Err(BatchError::Length {
                    name: name.clone(),
                    level,
                    expected,
                    found: values.len(),
                });
            }
        }
        Ok(Batch {
            tokens: p.tokens,
            offsets: p.offsets,
            token_columns: p.token_columns,
            sample_columns: p.sample_columns,
        })
    }
}
