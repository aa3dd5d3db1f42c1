//! The four loss aggregation modes (verl/ROLL `agg_loss`), on packed token tensors.
//!
//! With m the response mask, l the per-token loss, and sequences with ≥ 1 response token
//! counted as valid:
//! - `TokenMean`: Σ m·l / Σ m over the whole batch;
//! - `SeqMeanTokenSum`: mean over valid sequences of Σ_t m·l;
//! - `SeqMeanTokenMean` (ROLL default): mean over valid sequences of Σ_t m·l / Σ_t m;
//! - `SeqMeanTokenSumNorm` (Dr. GRPO): Σ m·l / L, L a constant length (`norm_length`,
//!   by default the longest response in the batch, the packed analogue of verl's padded
//!   response width).
//!
//! A batch without response tokens aggregates to 0 (with zero gradient), never NaN.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use serde::Deserialize;

use super::packed_layout::PackedLayout;

/// How per-token losses become one scalar.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum LossAgg {
    TokenMean,
    SeqMeanTokenSum,
    #[default]
    SeqMeanTokenMean,
    SeqMeanTokenSumNorm,
}

/// Aggregates per-token `values` to a `[1]` tensor (see the module docs).
pub fn aggregate<B: Backend>(
    values: Tensor<B, 1>,
    layout: &PackedLayout<B>,
    agg: LossAgg,
    norm_length: Option<u32>,
) -> Tensor<B, 1> {
    let masked = values * layout.mask.clone();
    match agg {
        LossAgg::TokenMean => masked
            .sum()
            .div_scalar(layout.response_tokens().max(1) as f32),
        LossAgg::SeqMeanTokenSumNorm => {
            let len = norm_length.map_or(layout.max_response, |l| l as usize);
            masked.sum().div_scalar(len.max(1) as f32)
        }
        LossAgg::SeqMeanTokenSum | LossAgg::SeqMeanTokenMean => {
            let seq =
                layout.scatter_sum(masked, layout.sample_of_token.clone(), layout.num_samples());
            let valid = layout.sample_counts.iter().filter(|&&c| c > 0).count();
            let weights: Vec<f32> = layout
                .sample_counts
                .iter()
                .map(|&c| match (c, agg) {
                    (0, _) => 0.0,
                    (_, LossAgg::SeqMeanTokenMean) => 1.0 / c as f32,
                    _ => 1.0,
                })
                .collect();
            (seq * layout.constant(weights))
                .sum()
                .div_scalar(valid.max(1) as f32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    fn agg(mode: LossAgg, norm: Option<u32>) -> f32 {
        // Sample 0: losses [9 (prompt), 1, 2, 3]; sample 1: [4]; sample 2: empty mask [7].
        let mask = [false, true, true, true, true, false];
        let layout = PackedLayout::<Flex>::new(&[0, 4, 5, 6], &mask, None, &Default::default());
        let values = layout.constant(vec![9.0, 1.0, 2.0, 3.0, 4.0, 7.0]);
        aggregate(values, &layout, mode, norm).into_scalar()
    }

    #[test]
    fn four_modes_by_hand() {
        assert_eq!(agg(LossAgg::TokenMean, None), 10.0 / 4.0);
        // Sequence sums 6 and 4 over 2 valid sequences.
        assert_eq!(agg(LossAgg::SeqMeanTokenSum, None), 5.0);
        // Sequence means 2 and 4.
        assert_eq!(agg(LossAgg::SeqMeanTokenMean, None), 3.0);
        // Σ = 10 over the longest response (3) or a given length.
        assert!((agg(LossAgg::SeqMeanTokenSumNorm, None) - 10.0 / 3.0).abs() < 1e-6);
        assert_eq!(agg(LossAgg::SeqMeanTokenSumNorm, Some(8)), 1.25);
    }

    #[test]
    fn no_response_tokens_is_zero_not_nan() {
        let layout = PackedLayout::<Flex>::new(&[0, 2], &[false, false], None, &Default::default());
        for mode in [
            LossAgg::TokenMean,
            LossAgg::SeqMeanTokenSum,
            LossAgg::SeqMeanTokenMean,
            LossAgg::SeqMeanTokenSumNorm,
        ] {
            let v = aggregate(layout.constant(vec![1.0, 2.0]), &layout, mode, None).into_scalar();
            assert_eq!(v, 0.0, "{mode:?}");
        }
    }
}
