//! Where each packed token belongs: the per-token sample and segment (turn) ids and the
//! response mask as tensors, plus the counts aggregation divides by.
//!
//! Losses run on packed 1-D token tensors (no padding, as the [`Batch`] stores them). The
//! layout is built once per micro-batch from host data, so the counts are constants and
//! never need a device round trip or a division by a zero count.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use roll_flow_engine::batch::column::TOKEN_TURN;
use roll_flow_engine::Batch;

use super::batch_read::{read_i64, read_mask};
use super::error::AlgoError;

/// Token → sample / segment maps and counts for one packed batch.
#[derive(Clone, Debug)]
pub struct PackedLayout<B: Backend> {
    /// Sample boundaries `[0, end₀, …, tokens]` (the fused kernels' packed layout).
    pub offsets: Vec<usize>,
    /// 1.0 on response (trained) tokens, 0.0 elsewhere.
    pub mask: Tensor<B, 1>,
    /// The sample each token belongs to.
    pub sample_of_token: Tensor<B, 1, Int>,
    /// Response tokens per sample.
    pub sample_counts: Vec<usize>,
    /// The segment (sample, turn) each token belongs to, dense ids; one segment per
    /// sample when no turns were given.
    pub segment_of_token: Tensor<B, 1, Int>,
    /// Response tokens per segment.
    pub segment_counts: Vec<usize>,
    /// Response tokens in the longest sample (the packed analogue of a padded width).
    pub max_response: usize,
}

impl<B: Backend> PackedLayout<B> {
    /// Builds the layout from sample offsets, the response mask and optional turn ids.
    pub fn new(
        offsets: &[usize],
        mask: &[bool],
        token_turn: Option<&[i64]>,
        device: &B::Device,
    ) -> Self {
        let n = mask.len();
        let mut sample_of = vec![0i64; n];
        let mut segment_of = vec![0i64; n];
        let mut sample_counts = Vec::new();
        let mut segment_counts: Vec<usize> = Vec::new();
        for (s, w) in offsets.windows(2).enumerate() {
            let mut count = 0;
            let mut current: Option<i64> = None;
            for t in w[0]..w[1] {
                let turn = token_turn.map_or(0, |tt| tt[t]);
                if current != Some(turn) {
                    current = Some(turn);
                    segment_counts.push(0);
                }
                sample_of[t] = s as i64;
                segment_of[t] = segment_counts.len() as i64 - 1;
                if mask[t] {
                    count += 1;
                    *segment_counts.last_mut().expect("pushed above") += 1;
                }
            }
            sample_counts.push(count);
        }
        let mask_f: Vec<f32> = mask.iter().map(|&m| if m { 1.0 } else { 0.0 }).collect();
        PackedLayout {
            offsets: offsets.to_vec(),
            mask: Tensor::from_data(TensorData::new(mask_f, [n]), device),
            sample_of_token: Tensor::from_data(TensorData::new(sample_of, [n]), device),
            max_response: sample_counts.iter().copied().max().unwrap_or(0),
            sample_counts,
            segment_of_token: Tensor::from_data(TensorData::new(segment_of, [n]), device),
            segment_counts,
        }
    }

    /// The layout of a [`Batch`]'s `response_mask` (and `token_turn`, when segments are
    /// wanted).
    pub fn from_batch(
        batch: &Batch,
        node: &'static str,
        with_turns: bool,
        device: &B::Device,
    ) -> Result<Self, AlgoError> {
        let mask = read_mask(batch, node)?;
        let turns = if with_turns {
            Some(read_i64(batch, node, &TOKEN_TURN)?)
        } else {
            None
        };
        Ok(Self::new(batch.offsets(), mask, turns, device))
    }

    pub fn num_tokens(&self) -> usize {
        self.mask.dims()[0]
    }

    pub fn num_samples(&self) -> usize {
        self.sample_counts.len()
    }

    /// Number of response tokens in the whole batch.
    pub fn response_tokens(&self) -> usize {
        self.sample_counts.iter().sum()
    }

    /// A float tensor from host values on this layout's device.
    pub fn constant(&self, values: Vec<f32>) -> Tensor<B, 1> {
        let n = values.len();
        Tensor::from_data(TensorData::new(values, [n]), &self.mask.device())
    }

    /// Sums `values` (one per token) into `groups` bins given by `ids` (differentiable).
    pub fn scatter_sum(
        &self,
        values: Tensor<B, 1>,
        ids: Tensor<B, 1, Int>,
        groups: usize,
    ) -> Tensor<B, 1> {
        Tensor::zeros([groups], &values.device()).select_assign(
            0,
            ids,
            values,
            burn::tensor::IndexingUpdateOp::Add,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    #[test]
    fn ids_and_counts_by_hand() {
        // Two samples: [p r r | o r] with turns [0 0 0 1 1], and [r] turn 0.
        let mask = [false, true, true, false, true, true];
        let turns = [0i64, 0, 0, 1, 1, 0];
        let l = PackedLayout::<Flex>::new(&[0, 5, 6], &mask, Some(&turns), &Default::default());
        assert_eq!(l.sample_counts, vec![3, 1]);
        assert_eq!(l.segment_counts, vec![2, 1, 1]);
        let seg = l
            .segment_of_token
            .to_data()
            .convert::<i64>()
            .to_vec::<i64>()
            .unwrap();
        assert_eq!(seg, vec![0, 0, 0, 1, 1, 2]);
        assert_eq!(l.max_response, 3);
        let sums = l.scatter_sum(l.mask.clone(), l.sample_of_token.clone(), 2);
        assert_eq!(sums.into_data().to_vec::<f32>().unwrap(), vec![3.0, 1.0]);
    }
}
