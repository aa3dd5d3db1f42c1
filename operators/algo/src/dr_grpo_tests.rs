use burn::backend::Flex;
use roll_flow_engine::batch::column::{ADVANTAGES, GROUP_ID, SCORE};

use super::*;
use crate::aggregation::{aggregate, LossAgg};
use crate::grpo::Grpo;
use crate::packed_layout::PackedLayout;
use crate::test_batches::{assert_close, f32s, get, u64s, with_masks};

#[test]
fn group_mean_without_std_by_hand() {
    // Group 0: scores [2, 0, 1] → mean 1 → A = [1, −1, 0]; GRPO would divide by the std
    // (1) + 1e-6. Group 5: [0.5, 0.5] → 0.
    let mut b = with_masks(&[&[1, 1], &[1], &[0, 1], &[1], &[1]]);
    f32s(&mut b, &SCORE, &[2.0, 0.0, 1.0, 0.5, 0.5]);
    u64s(&mut b, &GROUP_ID, &[0, 0, 0, 5, 5]);
    DrGrpo::default()
        .apply(&mut b, &mut AdvantageState::default())
        .unwrap();
    assert_close(
        &get(&b, &ADVANTAGES),
        &[1.0, 1.0, -1.0, 0.0, 0.0, 0.0, 0.0],
        1e-7,
    );
    // The same as GRPO with `norm: Mean`, which is what it is.
    let mut g = b.clone();
    Grpo {
        norm: Norm::Mean,
        ..Default::default()
    }
    .apply(&mut g, &mut AdvantageState::default())
    .unwrap();
    assert_eq!(get(&g, &ADVANTAGES), get(&b, &ADVANTAGES));
    // Scaling every score scales the advantages (no std division to undo it).
    let mut scaled = b.clone();
    f32s(&mut scaled, &SCORE, &[4.0, 0.0, 2.0, 1.0, 1.0]);
    DrGrpo::default()
        .apply(&mut scaled, &mut AdvantageState::default())
        .unwrap();
    assert_close(
        &get(&scaled, &ADVANTAGES),
        &[2.0, 2.0, -2.0, 0.0, 0.0, 0.0, 0.0],
        1e-7,
    );
}

#[test]
fn the_loss_aggregation_it_needs_sums_tokens_over_a_constant() {
    // Responses of 3 and 1 tokens with per-token losses [1, 2, 3] and [4]: Dr.GRPO's
    // Σ / L with L = 8 is 10/8, whatever the lengths; GRPO's seq-mean-token-mean is
    // (2 + 4)/2 = 3, which weighs the short response's token 3 times as much.
    let layout = PackedLayout::<Flex>::new(&[0, 3, 4], &[true; 4], None, &Default::default());
    let values = layout.constant(vec![1.0, 2.0, 3.0, 4.0]);
    let agg = |mode, norm| -> f32 { aggregate(values.clone(), &layout, mode, norm).into_scalar() };
    assert_eq!(agg(LossAgg::SeqMeanTokenSumNorm, Some(8)), 1.25);
    assert_eq!(agg(LossAgg::SeqMeanTokenMean, None), 3.0);
    let opts = roll_flow_engine::spec::ron_options();
    assert_eq!(opts.from_str::<DrGrpo>("()").unwrap(), DrGrpo::default());
    assert!(opts.from_str::<DrGrpo>("(norm: MeanStd)").is_err());
    assert!(DrGrpo::default().contract().group_normalised);
}
