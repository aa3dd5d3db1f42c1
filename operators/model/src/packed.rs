//! Packed variable-length sequences (the layout of a `Batch`: all tokens back to back plus
//! offsets) and their conversion to the right-padded `[rows, max_len]` block the model runs on.
//!
//! Right padding needs only the causal mask (see `qwen2::attention_mask`), and outputs at
//! padded positions are simply never gathered back.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

use super::error::ModelError;

/// Sequences stored back to back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedSequences {
    /// All token ids, sequence after sequence.
    pub tokens: Vec<u32>,
    /// `offsets[i]..offsets[i + 1]` are the tokens of sequence `i`; starts at 0, ends at
    /// `tokens.len()`.
    pub offsets: Vec<usize>,
}

impl PackedSequences {
    /// Packs the given sequences.
    pub fn from_sequences<S: AsRef<[u32]>>(sequences: &[S]) -> Self {
        let mut tokens = Vec::new();
        let mut offsets = vec![0];
        for s in sequences {
            tokens.extend_from_slice(s.as_ref());
            offsets.push(tokens.len());
        }
        PackedSequences { tokens, offsets }
    }

    /// Checks that the offsets describe the token buffer.
    pub fn validate(&self) -> Result<(), ModelError> {
        let ok = self.offsets.first() == Some(&0)
            && self.offsets.last() == Some(&self.tokens.len())
            && self.offsets.windows(2).all(|w| w[0] <= w[1]);
        if ok {
            Ok(())
        } else {
            Err(ModelError::Request {
                message: format!(
                    "packed offsets {:?} do not describe {} tokens",
                    self.offsets,
                    self.tokens.len()
                ),
            })
        }
    }

    /// Number of sequences.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether there is no sequence.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tokens of sequence `i`.
    pub fn sequence(&self, i: usize) -> &[u32] {
        &self.tokens[self.offsets[i]..self.offsets[i + 1]]
    }

    /// Length of the longest sequence.
    pub fn max_len(&self) -> usize {
        (0..self.len())
            .map(|i| self.offsets[i + 1] - self.offsets[i])
            .max()
            .unwrap_or(0)
    }

    /// `(sequence, position in it)` of packed token `t`.
    pub fn locate(&self, t: usize) -> (usize, usize) {
        let seq = self.offsets.partition_point(|&o| o <= t) - 1;
        (seq, t - self.offsets[seq])
    }

    /// The right-padded `[rows, max_len]` id block (padding id 0).
    pub fn right_padded<B: Backend>(&self, device: &B::Device) -> Tensor<B, 2, Int> {
        let width = self.max_len();
        let ids = padded_ids((0..self.len()).map(|i| self.sequence(i)), width);
        Tensor::from_data(TensorData::new(ids, [self.len(), width]), device)
    }
}

/// The ids of `rows`, each right-padded with id 0 to `width` (at least its length), row
/// after row: a `[rows, width]` block, flat.
pub fn padded_ids<'a>(rows: impl IntoIterator<Item = &'a [u32]>, width: usize) -> Vec<i64> {
    let mut ids = Vec::new();
    for row in rows {
        let end = ids.len() + width;
        ids.extend(row.iter().map(|&t| t as i64));
        ids.resize(end, 0);
    }
    ids
}
