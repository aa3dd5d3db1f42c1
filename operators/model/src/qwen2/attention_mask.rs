//! Which keys each query may attend to, for batches of sequences of different lengths.
//!
//! Every row of a batch is one sequence. A row's keys live in columns `key_start..` of the
//! key axis (columns before that are left padding, or cache slots of a row that joined a
//! running batch later) and a query at column `i` sees keys up to `i + (keys - queries)`
//! (causal). Right padding needs no extra rule: padded queries sit after the real ones and
//! real queries never see them. A sliding-window layer (Qwen2's `sliding_window`) also
//! hides keys `window` or more columns before the query's own; a row's columns are
//! consecutive positions, so columns count positions. The mask is additive: 0 where allowed
//! and a large negative number elsewhere, finite so that a fully masked padding row gives a
//! harmless uniform softmax instead of NaN.
//!
//! Whole sequences without a cache (training, log-probs) under a sliding window skip the
//! dense mask: [`LayerMask::Banded`] scores each query block against only the key blocks
//! that can hold its window (`banded_attention`). With a cache (the rollout's prefills and
//! decoding steps) the dense mask leaves out the key columns no query's window reaches:
//! every row's queries are its last columns, so one cut serves the whole batch, and a
//! turn late in a long chat scores about `window` keys instead of the whole chat.

use burn::tensor::backend::Backend;
use burn::tensor::{Bool, DType, Int, Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::banded_attention::BandedWindow;
use super::compute_dtype::{mask_like, F16_MASKED};
use super::mask_rule::{row_mask_value, MASKED};
use super::prefix_branches::PrefixBranches;
use roll_flow_kernels::host_transfer::upload;

/// The keys one layer's queries may read, in the form its attention computes with.
#[derive(Clone, Debug)]
pub enum LayerMask<B: Backend> {
    /// The additive mask `[batch, heads, queries, keys − first_key]` over key columns
    /// `first_key..` (0 without a window: every key).
    Dense {
        mask: Tensor<B, 4>,
        first_key: usize,
    },
    /// A sliding window over whole sequences, scored block by block.
    Banded(BandedWindow<B>),
}

/// Positions and visible key range of every row of one forward call.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionLayout {
    /// Rotary position of every query token, `[batch][queries]`.
    pub positions: Vec<Vec<usize>>,
    /// First key column that belongs to each row.
    pub key_start: Vec<usize>,
    /// Prefix-grouped rows ([`PrefixBranches`], whole rows without a cache): per row, the
    /// shared prefix and where each branch starts; `None` for one sequence a row.
    pub branches: Option<Vec<PrefixBranches>>,
}

impl AttentionLayout {
    /// Right-padded full sequences starting at position 0 (training, log-probs).
    pub fn right_padded(batch: usize, len: usize) -> Self {
        AttentionLayout {
            positions: vec![(0..len).collect(); batch],
            key_start: vec![0; batch],
            branches: None,
        }
    }

    /// Number of rows.
    pub fn batch(&self) -> usize {
        self.key_start.len()
    }

    /// Number of query tokens per row.
    pub fn queries(&self) -> usize {
        self.positions.first().map_or(0, Vec::len)
    }

    /// The mask of a layer with `window` (`None`: full causal attention) over `keys` keys for
    /// `heads` query heads on `kv_heads` key/value heads: banded when the rows are whole
    /// sequences from position 0 (no cache) and the band scores fewer keys per query than
    /// the dense mask, dense otherwise; prefix-grouped rows always dense, written on the host.
    /// In `dtype` where given (a model's compute dtype, [`super::compute_dtype`]), else the
    /// backend's float type.
    pub fn layer_mask<B: KernelBackend>(
        &self,
        keys: usize,
        (heads, kv_heads): (usize, usize),
        window: Option<usize>,
        dtype: Option<DType>,
        device: &B::Device,
    ) -> LayerMask<B> {
        if self.branches.is_some() {
            let mask = self.mask_on_host(keys, heads, window, device);
            return LayerMask::Dense {
                mask: in_dtype(mask, dtype),
                first_key: 0,
            };
        }
        match window {
            Some(w)
                if self.is_whole_sequences(keys) && BandedWindow::<B>::keys_per_query(w) < keys =>
            {
                let band = BandedWindow::new(self.batch(), keys, (heads, kv_heads), w, device);
                LayerMask::Banded(BandedWindow {
                    mask: in_dtype(band.mask, dtype),
                    ..band
                })
            }
            _ => LayerMask::Dense {
                mask: self.mask(keys, heads, window, dtype, device),
                first_key: self.first_visible_key(keys, window),
            },
        }
    }

    /// Whether every row is a whole sequence: no cached keys, positions `0..queries` from
    /// key column 0 (the layout of [`AttentionLayout::right_padded`]).
    fn is_whole_sequences(&self, keys: usize) -> bool {
        let queries = self.queries();
        keys == queries
            && self.key_start.iter().all(|&s| s == 0)
            && self
                .positions
                .iter()
                .all(|p| p.iter().enumerate().all(|(i, &q)| q == i))
    }

    /// The first key column any query of this call can see: with a `window`, the first
    /// query's own column (`keys − queries`) less `window − 1`; 0 without one. The queries
    /// are the last `queries` columns of every row, so the cut is the same for all rows.
    pub fn first_visible_key(&self, keys: usize, window: Option<usize>) -> usize {
        window.map_or(0, |w| {
            keys.saturating_sub(self.queries() + w.saturating_sub(1))
        })
    }

    /// The additive mask `[batch, heads, queries, keys − first]` over key columns
    /// `first..keys`, `first` the [`first_visible_key`](Self::first_visible_key), the same
    /// for every head; with a `window`, a query sees only its last `window` keys (itself
    /// included), as transformers' `sliding_window_overlay`.
    ///
    /// On the host it is repeated per head rather than broadcast: burn-flex adds same-shape
    /// tensors in a flat SIMD loop but walks a broadcast over the head axis element by
    /// element. On the device it is one head expanded over the others (a stride-0 view the
    /// CubeCL softmax and decode attention read in place: at Qwen2.5-0.5B's training shape,
    /// 8 × 2,048 tokens and 14 heads, the repeated mask was 1.9 GB written and read every
    /// forward call). Built once per forward call and window, and shared by the layers with
    /// that window, in `dtype` where given (else the backend's float type).
    pub fn mask<B: KernelBackend>(
        &self,
        keys: usize,
        heads: usize,
        window: Option<usize>,
        dtype: Option<DType>,
        device: &B::Device,
    ) -> Tensor<B, 4> {
        match B::DEVICE_MEMORY {
            true => self.mask_on_device(keys, heads, window, dtype, device),
            false => in_dtype(self.mask_on_host(keys, heads, window, device), dtype),
        }
    }

    /// The mask's extent over `keys` keys with `window`: (rows, queries, the first query's
    /// own column, the first visible key column, the visible width `keys − first`).
    fn extent(&self, keys: usize, window: Option<usize>) -> (usize, usize, usize, usize, usize) {
        let (batch, queries) = (self.batch(), self.queries());
        let first = self.first_visible_key(keys, window);
        (batch, queries, keys - queries, first, keys - first)
    }

    /// [`mask`](Self::mask) written on the host and uploaded whole
    /// (`batch · heads · queries · width` floats).
    pub fn mask_on_host<B: Backend>(
        &self,
        keys: usize,
        heads: usize,
        window: Option<usize>,
        device: &B::Device,
    ) -> Tensor<B, 4> {
        let (batch, queries, offset, first, width) = self.extent(keys, window);
        let window = window.unwrap_or(usize::MAX);
        let mut values = Vec::with_capacity(batch * heads * queries * width);
        for (row, &start) in self.key_start.iter().enumerate() {
            let row_start = values.len();
            let branches = self.branches.as_ref().map(|b| &b[row]);
            for i in 0..queries {
                let own = i + offset;
                values.extend(
                    (first..keys).map(|j| row_mask_value((own, j), start, window, branches)),
                );
            }
            for _ in 1..heads {
                values.extend_from_within(row_start..row_start + queries * width);
            }
        }
        upload(
            TensorData::new(values, [batch, heads, queries, width]),
            device,
        )
    }

    /// [`mask`](Self::mask) computed on the device by `mask_rule.rs`'s visibility rule from
    /// one upload of `batch + width + queries` integers: each row's first key column, the key
    /// columns `first..keys` and the queries' own columns. At Qwen2.5-0.5B's shape (14 heads) a
    /// decode step of 128 rows over 1,024 keys uploads 9 KB instead of 7.3 MB (issue 59).
    pub fn mask_on_device<B: Backend>(
        &self,
        keys: usize,
        heads: usize,
        window: Option<usize>,
        dtype: Option<DType>,
        device: &B::Device,
    ) -> Tensor<B, 4> {
        let (batch, queries, offset, first, width) = self.extent(keys, window);
        let columns: Vec<i64> = self
            .key_start
            .iter()
            .copied()
            .chain(first..keys)
            .chain(offset..keys)
            .map(|c| c as i64)
            .collect();
        let shape = [batch, queries, width];
        let columns: Tensor<B, 1, Int> =
            upload(TensorData::new(columns, [batch + width + queries]), device);
        let part = |from: usize, n: usize, dims: [usize; 3]| {
            columns
                .clone()
                .narrow(0, from, n)
                .reshape(dims)
                .expand(shape)
        };
        let row_start = part(0, batch, [batch, 1, 1]);
        let key = part(batch, width, [1, 1, width]);
        let own = part(batch + width, queries, [1, queries, 1]);
        let allowed = key
            .clone()
            .greater_equal(row_start)
            .bool_and(within_window(own - key, window));
        additive_mask(allowed, dtype)
            .reshape([batch, 1, queries, width])
            .expand([batch, heads, queries, width])
    }
}

/// Whether a query sees a key `back` columns behind it (0 ≤ back, and back < `window` with
/// one): [`mask_value`](super::mask_rule::mask_value)'s rule for a key at or after the row's start, on the device.
pub(super) fn within_window<B: Backend>(
    back: Tensor<B, 3, Int>,
    window: Option<usize>,
) -> Tensor<B, 3, Bool> {
    let seen = back.clone().greater_equal_elem(0);
    match window {
        Some(w) => seen.bool_and(back.lower_elem(w as i64)),
        None => seen,
    }
}

/// The additive mask of the keys `allowed` lets each query see, in `dtype` where given:
/// masked − masked·allowed, exactly 0 where a key is visible and exactly the masked value
/// ([`MASKED`], [`F16_MASKED`] in f16) where it is not, as [`mask_value`](super::mask_rule::mask_value) writes on the
/// host. Arithmetic rather than `mask_fill`, which CUDA ran at 0.1 s for the
/// [8, 2,048, 2,048] mask of a training step (bench/history/gpu.md, run 7) where each of
/// these elementwise ops takes well under a millisecond.
pub(super) fn additive_mask<B: Backend>(
    allowed: Tensor<B, 3, Bool>,
    dtype: Option<DType>,
) -> Tensor<B, 3> {
    let masked = match dtype {
        Some(DType::F16) => F16_MASKED,
        _ => MASKED,
    };
    let mask = allowed.float().mul_scalar(-masked).add_scalar(masked);
    match dtype {
        Some(dtype) => mask.cast(dtype),
        None => mask,
    }
}

/// `mask` in `dtype` where given ([`mask_like`]).
pub(super) fn in_dtype<B: Backend, const D: usize>(
    mask: Tensor<B, D>,
    dtype: Option<DType>,
) -> Tensor<B, D> {
    match dtype {
        Some(dtype) => mask_like(mask, dtype),
        None => mask,
    }
}

#[cfg(test)]
#[path = "attention_mask_tests.rs"]
mod tests;
