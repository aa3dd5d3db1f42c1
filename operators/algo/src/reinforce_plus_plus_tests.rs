use roll_flow_engine::batch::column::{ADVANTAGES, GROUP_ID, RETURNS, SCORE};

use super::*;
use crate::test_batches::{assert_close, f32s, get, u64s, with_masks};

/// Three samples: a prompt token and two response tokens, one response token, two
/// response tokens; groups [0, 0, 1].
fn batch(scores: &[f32]) -> Batch {
    let mut b = with_masks(&[&[0, 1, 1], &[1], &[1, 1]]);
    f32s(&mut b, &SCORE, scores);
    u64s(&mut b, &GROUP_ID, &[0, 0, 1]);
    b
}

/// Masked whitening in float64: (x − mean)/sqrt(var + 1e-8), var unbiased, over the
/// response tokens; the prompt token (index 0) stays 0.
fn whitened(tokens: &[f64]) -> Vec<f64> {
    let valid = &tokens[1..];
    let n = valid.len() as f64;
    let mean = valid.iter().sum::<f64>() / n;
    let var = valid.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let mut out = vec![0.0];
    out.extend(valid.iter().map(|x| (x - mean) / (var + 1e-8).sqrt()));
    out
}

#[test]
fn returns_whitened_over_the_batch_by_hand() {
    // γ = 1: every response token's return is its sample's score, [1, 1 | 0 | 2, 2];
    // mean 1.2, unbiased var 2.8/4 = 0.7.
    let mut b = batch(&[1.0, 0.0, 2.0]);
    ReinforcePlusPlus::default()
        .apply(&mut b, &mut AdvantageState::default())
        .unwrap();
    let returns = [0.0, 1.0, 1.0, 0.0, 2.0, 2.0];
    assert_close(&get(&b, &RETURNS), &returns, 1e-7);
    let want = whitened(&returns);
    let s = 0.7f64.sqrt();
    assert!((want[1] - (1.0 - 1.2) / s).abs() < 1e-7);
    assert_close(&get(&b, &ADVANTAGES), &want, 1e-6);
    assert!(!ReinforcePlusPlus::default().contract().group_normalised);
}

#[test]
fn the_baseline_subtracts_the_group_mean_before_whitening() {
    // Group 0 = [1, 0] → ŝ = [0.5, −0.5]; group 1 is a group of one → 0. Returns
    // [0.5, 0.5 | −0.5 | 0, 0], mean 0.1, var 0.7/4.
    let mut b = batch(&[1.0, 0.0, 2.0]);
    let cfg: ReinforcePlusPlus = roll_flow_engine::spec::ron_options()
        .from_str("(baseline: true)")
        .unwrap();
    cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
    let returns = [0.0, 0.5, 0.5, -0.5, 0.0, 0.0];
    assert_close(&get(&b, &RETURNS), &returns, 1e-7);
    assert_close(&get(&b, &ADVANTAGES), &whitened(&returns), 1e-6);
    assert!(cfg.contract().group_normalised);
}

#[test]
fn discount_then_whiten_then_clip() {
    // γ = 0.5, scores [1, 0, 2]: returns [0.5, 1 | 0 | 1, 2]; whitened, then clipped at 1.
    let mut b = batch(&[1.0, 0.0, 2.0]);
    let cfg = ReinforcePlusPlus {
        gamma: 0.5,
        shaping: Shaping {
            advantage_clip: Some(1.0),
            ..Default::default()
        },
        ..Default::default()
    };
    let stats = cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
    let returns = [0.0, 0.5, 1.0, 0.0, 1.0, 2.0];
    let want: Vec<f64> = whitened(&returns)
        .iter()
        .map(|a| a.clamp(-1.0, 1.0))
        .collect();
    assert!(want.contains(&-1.0) && want.contains(&1.0), "{want:?}");
    assert_close(&get(&b, &ADVANTAGES), &want, 1e-6);
    assert_eq!(stats["adv/whitened"], 1.0);
    let opts = roll_flow_engine::spec::ron_options();
    assert_eq!(
        opts.from_str::<ReinforcePlusPlus>("()").unwrap(),
        ReinforcePlusPlus::default()
    );
    assert!(opts.from_str::<ReinforcePlusPlus>("(norm: Mean)").is_err());
}
