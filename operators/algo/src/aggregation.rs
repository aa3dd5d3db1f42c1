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
//!
//! Every mode is Σ_s w_s Σ_t m·l with one weight per sequence; the weights come from the
//! kernels crate ([`roll_flow_kernels::sequence_weights`]), which the fused PPO loss uses
//! too, so the four modes are written once.

use burn::tensor::Tensor;

use super::packed_layout::PackedLayout;

/// How per-token losses become one scalar (the fused kernels' enum, RON names as above).
pub use roll_flow_kernels::LossAgg;

/// Aggregates per-token `values` to a `[1]` tensor (see the module docs): Σ_t u_t·v_t with
/// u_t = w_s·m_t, the per-sequence weights w_s of [`roll_flow_kernels::sequence_weights`]
/// (the same weights the fused PPO loss uses).
pub fn aggregate<B: roll_flow_kernels::KernelBackend>(
    values: Tensor<B, 1>,
    layout: &PackedLayout<B>,
    agg: LossAgg,
    norm_length: Option<u32>,
) -> Tensor<B, 1> {
    let counts: Vec<f64> = layout.sample_counts.iter().map(|&c| c as f64).collect();
    let seq_weights = roll_flow_kernels::sequence_weights(&counts, agg, norm_length);
    let mut token_weights = vec![0.0f32; layout.num_tokens()];
    for (w, &sw) in layout.offsets.windows(2).zip(&seq_weights) {
        token_weights[w[0]..w[1]].fill(sw as f32);
    }
    // Σ_t v_t·(m_t·w_t) in token order (the same bits on every CPU).
    roll_flow_kernels::weighted_sum(values, layout.mask.clone() * layout.constant(token_weights))
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
