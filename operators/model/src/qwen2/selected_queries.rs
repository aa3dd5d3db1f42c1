//! The last decoder layer evaluated at a few positions only.
//!
//! Scoring a reply needs the final hidden state just before each decision token: in a
//! guided FrozenLake chat that is one position in about forty. Every layer below the last
//! must still run at every position (the last layer's keys and values read all of them),
//! but the last layer's query projection, attention output, output projection, MLP and the
//! final norm only matter where a score is read. [`SelectedQueries`] gathers those
//! positions per row (`[batch, most_per_row]`, short rows padded with column 0) together
//! with their rotary positions and an additive mask over the row's keys, built with the
//! same visibility rule as every other mask (`mask_value`: causal, right padding, sliding
//! window). The padded slots are computed and dropped; their mask is finite, so they
//! cannot turn into NaN.
//!
//! With two layers this removes close to half of a training pass's work, and the backward
//! pass comes from autodiff as before (`select` scatters its gradient back).
//!
//! On a backend with device memory the mask is computed there from the slots' columns
//! (`batch · per_row` integers uploaded) and one head is expanded over the others, as the
//! dense mask is (`attention_mask.rs`): when every response token is scored, as in a
//! reply-length policy-gradient step, the slots are nearly every position, and the host
//! mask at Qwen2.5-0.5B's training shape (8 × 2,048 tokens, 14 heads) was 1.9 GB written,
//! copied and uploaded every forward call, most of the 3.9 s an H200 step spent queuing
//! its forward (bench/history/gpu.md, run 7).

use burn::tensor::backend::Backend;
use burn::tensor::{DType, Int, Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::attention_mask::{additive_mask, in_dtype, within_window, AttentionLayout};
use super::mask_rule::row_mask_value;
use super::prefix_branches::PrefixBranches;
use roll_flow_kernels::host_transfer::upload;

/// Where the last layer's queries are read, for whole sequences without a cache: one
/// sequence a row from position 0 (`AttentionLayout::right_padded`), or prefix-grouped
/// rows ([`PrefixBranches`]).
#[derive(Clone, Debug)]
pub struct SelectedQueries<B: Backend> {
    /// Query slots per row (the most any row has).
    pub per_row: usize,
    /// Flat index `row·len + column` of every slot, `[batch·per_row]`.
    index: Tensor<B, 1, Int>,
    /// The rotary position of every slot, `[batch][per_row]`.
    pub positions: Vec<Vec<usize>>,
    /// Additive mask `[batch, heads, per_row, len]` of the keys each slot may read, in the
    /// compute dtype.
    pub mask: Tensor<B, 4>,
    /// For each requested position, in request order, its slot in `0..batch·per_row`.
    order: Tensor<B, 1, Int>,
}

impl<B: KernelBackend> SelectedQueries<B> {
    /// Slots for the `(row, column)` pairs `at` of a `[batch, len]` block, read by `heads`
    /// query heads through a layer with `window` (`None`: full causal attention), the
    /// mask in `dtype` where given (else the backend's float type).
    ///
    /// # Panics
    /// When a pair lies outside the block (a caller's bug, not user input).
    pub fn new(
        at: &[(usize, usize)],
        layout: &AttentionLayout,
        (batch, len): (usize, usize),
        heads: usize,
        window: Option<usize>,
        dtype: Option<DType>,
        device: &B::Device,
    ) -> Self {
        let mut columns: Vec<Vec<usize>> = vec![Vec::new(); batch];
        let mut slots = Vec::with_capacity(at.len());
        for &(row, column) in at {
            assert!(
                row < batch && column < len,
                "query ({row}, {column}) outside a [{batch}, {len}] block"
            );
            slots.push((row, columns[row].len()));
            columns[row].push(column);
        }
        let per_row = columns.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let order = slots.iter().map(|&(r, s)| (r * per_row + s) as i64);
        let padded: Vec<Vec<usize>> = columns
            .into_iter()
            .map(|mut c| {
                c.resize(per_row, 0);
                c
            })
            .collect();
        let index = padded
            .iter()
            .enumerate()
            .flat_map(|(r, c)| c.iter().map(move |&col| (r * len + col) as i64));
        let rule = QueryRule {
            window,
            branches: layout.branches.as_deref(),
        };
        let mask = match B::DEVICE_MEMORY && rule.branches.is_none() {
            true => query_mask_on_device(&padded, len, heads, window, dtype, device),
            false => in_dtype(query_mask(&padded, len, heads, rule, device), dtype),
        };
        let positions = (padded.iter().enumerate())
            .map(|(r, c)| c.iter().map(|&col| layout.positions[r][col]).collect())
            .collect();
        SelectedQueries {
            per_row,
            index: int_tensor(index.collect(), device),
            mask,
            positions,
            order: int_tensor(order.collect(), device),
        }
    }
}

impl<B: Backend> SelectedQueries<B> {
    /// The slots' rows of `x: [batch, len, hidden]` as `[batch, per_row, hidden]`.
    pub fn gather(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch, len, hidden] = x.dims();
        x.reshape([batch * len, hidden])
            .select(0, self.index.clone())
            .reshape([batch, self.per_row, hidden])
    }

    /// The requested positions of slot values `y: [batch, per_row, hidden]`, in request
    /// order: `[requested, hidden]`.
    pub fn in_request_order(&self, y: Tensor<B, 3>) -> Tensor<B, 2> {
        let [batch, per_row, hidden] = y.dims();
        y.reshape([batch * per_row, hidden])
            .select(0, self.order.clone())
    }
}

fn int_tensor<B: Backend>(values: Vec<i64>, device: &B::Device) -> Tensor<B, 1, Int> {
    let n = values.len();
    upload(TensorData::new(values, [n]), device)
}

/// Which keys a slot may read ([`row_mask_value`]): the layer's window, and in
/// prefix-grouped rows the branches.
#[derive(Clone, Copy)]
struct QueryRule<'a> {
    window: Option<usize>,
    branches: Option<&'a [PrefixBranches]>,
}

/// `[batch, heads, per_row, len]`: slot `(r, s)` at column `columns[r][s]` sees key `j`
/// by [`row_mask_value`] (rows start at column 0), repeated per head as the dense host
/// masks are.
fn query_mask<B: Backend>(
    columns: &[Vec<usize>],
    len: usize,
    heads: usize,
    rule: QueryRule<'_>,
    device: &B::Device,
) -> Tensor<B, 4> {
    let per_row = columns.first().map_or(0, Vec::len);
    let window = rule.window.unwrap_or(usize::MAX);
    let mut values = Vec::with_capacity(columns.len() * heads * per_row * len);
    for (r, row) in columns.iter().enumerate() {
        let start = values.len();
        let branches = rule.branches.map(|b| &b[r]);
        for &own in row {
            values.extend((0..len).map(|j| row_mask_value((own, j), 0, window, branches)));
        }
        for _ in 1..heads {
            values.extend_from_within(start..start + per_row * len);
        }
    }
    upload(
        TensorData::new(values, [columns.len(), heads, per_row, len]),
        device,
    )
}

/// [`query_mask`] computed on the device, in `dtype` where given: slot `(r, s)` at column
/// c sees key j when 0 ≤ c − j < window, one head expanded over the others.
fn query_mask_on_device<B: Backend>(
    columns: &[Vec<usize>],
    len: usize,
    heads: usize,
    window: Option<usize>,
    dtype: Option<DType>,
    device: &B::Device,
) -> Tensor<B, 4> {
    let (batch, per_row) = (columns.len(), columns.first().map_or(0, Vec::len));
    let own: Vec<i64> = columns.iter().flatten().map(|&c| c as i64).collect();
    let shape = [batch, per_row, len];
    let own: Tensor<B, 1, Int> = upload(TensorData::new(own, [batch * per_row]), device);
    let key = Tensor::<B, 1, Int>::arange(0..len as i64, device)
        .reshape([1, 1, len])
        .expand(shape);
    let back = own.reshape([batch, per_row, 1]).expand(shape) - key;
    additive_mask(within_window(back, window), dtype)
        .reshape([batch, 1, per_row, len])
        .expand([batch, heads, per_row, len])
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    type B = Flex;

    /// The device construction gives the host mask's values, every window, head count and
    /// dtype (both run on the CPU backend here).
    #[test]
    fn the_query_mask_built_on_the_device_is_the_host_mask() {
        let device = Default::default();
        let columns = vec![vec![0, 3, 4, 6], vec![2, 5, 0, 0], vec![7, 1, 1, 0]];
        let len = 8;
        let values = |m: Tensor<B, 4>| {
            let dims = m.dims();
            let dtype = m.dtype();
            let v = m.cast(DType::F32).into_data().to_vec::<f32>().unwrap();
            (dims, dtype, v)
        };
        for window in [None, Some(1), Some(3), Some(40)] {
            for (heads, dtype) in [
                (1, None),
                (3, None),
                (2, Some(DType::BF16)),
                (2, Some(DType::F16)),
            ] {
                let rule = QueryRule {
                    window,
                    branches: None,
                };
                let host = query_mask::<B>(&columns, len, heads, rule, &device);
                let host = values(in_dtype(host, dtype));
                let dev = query_mask_on_device::<B>(&columns, len, heads, window, dtype, &device);
                assert_eq!(
                    values(dev),
                    host,
                    "window {window:?}, {heads} heads, {dtype:?}"
                );
            }
        }
    }
}
