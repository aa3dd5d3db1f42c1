//! Which query positions a forward pass produces: one entry point for the full pass, a
//! prefill's last column and the scoring of chosen positions, instead of a
//! `forward`/`forward_last`/`forward_at` trio per layer.
//!
//! Every layer but the last runs at every position (the next layer's keys and values read
//! all of them); the last layer, the final norm and whatever head follows run only where
//! outputs are asked for.

use burn::tensor::backend::Backend;

use super::attention_mask::LayerMask;
use super::rotary::RotaryAngles;
use super::selected_queries::SelectedQueries;

/// The positions whose final hidden states a backbone pass returns, one row each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queries<'a> {
    /// Every position: `batch·len` rows, row-major over `(row, column)`.
    All,
    /// Every row's last column: `batch` rows (what a prefill reads its next-token
    /// logits from). The cache, if any, still grows by every column.
    Last,
    /// The `(row, column)` pairs, in the order given: `pairs.len()` rows. Only for whole
    /// right-padded sequences starting at position 0 (`AttentionLayout::right_padded`)
    /// and no cache: what scoring reads at decision positions.
    At(&'a [(usize, usize)]),
}

/// How one layer runs its queries, with what it needs for them.
#[derive(Clone, Debug)]
pub enum QueryRows<'a, B: Backend> {
    /// Every column, attending under the layer's mask; output `[batch, len, hidden]`.
    All(&'a LayerMask<B>),
    /// The last column only (under the mask's last query row); output `[batch, 1, hidden]`.
    Last(&'a LayerMask<B>),
    /// The selected slots with their rotary tables (their mask is their own); output
    /// `[batch, per_row, hidden]`.
    At(&'a SelectedQueries<B>, &'a RotaryAngles<B>),
}
