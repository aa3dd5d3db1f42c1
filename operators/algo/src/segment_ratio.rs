//! Importance-ratio granularity: per token, one ratio per turn ("segment"), or one per
//! sample ("sequence").
//!
//! `Token`: log r_t = logp_t − old_t. `Segment` (turn-level ratio, as in ROLL's segment /
//! GSPO-style sequence ratios): log r_t = mean over the response tokens u of t's turn of
//! (logp_u − old_u), so every token of a turn shares exp(mean log-ratio). `Sequence`
//! (GSPO's s_i, Zheng et al. 2025 eq. 7): the mean over the response tokens of t's whole
//! sample, s_i = (π_θ(y_i)/π_old(y_i))^{1/|y_i|}. Differentiable through scatter-add and
//! gather: ∂ log r_t/∂ logp_u = 1/|segment| for every u of t's segment, so a segment's
//! loss reaches each of its tokens with the mean's weight (GSPO's gradient, eq. 11).

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};
use serde::Deserialize;

use super::packed_layout::PackedLayout;

/// One ratio per token, or one per turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum RatioLevel {
    #[default]
    Token,
    Segment,
    Sequence,
}

/// Per-token log-ratios at the given level; zero-count segments get 0.
pub fn log_ratio<B: Backend>(
    logp: Tensor<B, 1>,
    old: Tensor<B, 1>,
    layout: &PackedLayout<B>,
    level: RatioLevel,
) -> Tensor<B, 1> {
    let d = logp - old;
    match level {
        RatioLevel::Token => d,
        RatioLevel::Segment => segment_mean(
            d,
            layout,
            layout.segment_of_token.clone(),
            &layout.segment_counts,
        ),
        RatioLevel::Sequence => segment_mean(
            d,
            layout,
            layout.sample_of_token.clone(),
            &layout.sample_counts,
        ),
    }
}

/// Each token's value replaced by the mean over the response tokens of its segment (`ids`,
/// with `counts` response tokens each; a segment without any gets 0).
fn segment_mean<B: Backend>(
    d: Tensor<B, 1>,
    layout: &PackedLayout<B>,
    ids: Tensor<B, 1, Int>,
    counts: &[usize],
) -> Tensor<B, 1> {
    let masked = d * layout.mask.clone();
    let sums = layout.scatter_sum(masked, ids.clone(), counts.len());
    let inv: Vec<f32> = counts
        .iter()
        .map(|&c| if c == 0 { 0.0 } else { 1.0 / c as f32 })
        .collect();
    (sums * layout.constant(inv)).select(0, ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    #[test]
    fn segment_mean_by_hand() {
        // Sample 0 turns: turn 0 = tokens 0,1 (resp), turn 1 = token 2 (obs), 3 (resp).
        let mask = [true, true, false, true];
        let layout =
            PackedLayout::<Flex>::new(&[0, 4], &mask, Some(&[0, 0, 1, 1]), &Default::default());
        let logp = layout.constant(vec![-1.0, -2.0, -5.0, -0.5]);
        let old = layout.constant(vec![-1.5, -1.5, -9.0, -1.0]);
        let seg = log_ratio(logp.clone(), old.clone(), &layout, RatioLevel::Segment)
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        // turn 0: mean(0.5, −0.5) = 0; turn 1: 0.5 (obs token excluded).
        assert_eq!(seg, vec![0.0, 0.0, 0.5, 0.5]);
        let tok = log_ratio(logp, old, &layout, RatioLevel::Token)
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(tok, vec![0.5, -0.5, 4.0, 0.5]);
    }
}
