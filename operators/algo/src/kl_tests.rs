//! The KL estimators against hand-computed values, with the names verl users write (`K2`,
//! `LowVarKl`).

use burn::backend::{Autodiff, Flex};
use burn::tensor::Tensor;

use super::*;

type B = Flex;

#[test]
fn token_estimators_by_hand() {
    // d = ln 2.
    let (lp, rl) = (2f64.ln(), 0.0);
    let d = 2f64.ln();
    assert_eq!(KlEstimator::K1.token(lp, rl), Some(d));
    assert_eq!(KlEstimator::Abs.token(rl, lp), Some(d));
    assert!((KlEstimator::Mse.token(lp, rl).unwrap() - 0.5 * d * d).abs() < 1e-15);
    // k3 = 1/2 − 1 + ln 2.
    assert!((KlEstimator::K3.token(lp, rl).unwrap() - (-0.5 + d)).abs() < 1e-15);
    assert_eq!(KlEstimator::Full.token(lp, rl), None);
}

#[test]
fn tensor_matches_scalar() {
    let dev = Default::default();
    let lp = [-0.3f32, -2.0, -1.1];
    let rl = [-0.9f32, -1.5, -1.1];
    for est in [
        KlEstimator::K1,
        KlEstimator::Abs,
        KlEstimator::Mse,
        KlEstimator::K3,
    ] {
        let t = est
            .tensor(
                Tensor::<B, 1>::from_floats(lp, &dev),
                Tensor::<B, 1>::from_floats(rl, &dev),
            )
            .unwrap();
        let got = t.into_data().to_vec::<f32>().unwrap();
        for i in 0..3 {
            let want = est.token(lp[i] as f64, rl[i] as f64).unwrap();
            assert!((got[i] as f64 - want).abs() < 1e-6, "{est:?}");
        }
    }
}

#[test]
fn k2_is_the_name_of_mse() {
    let opts = roll_flow_engine::spec::ron_options();
    assert_eq!(
        opts.from_str::<KlEstimator>("K2").unwrap(),
        KlEstimator::Mse
    );
    assert_eq!(
        opts.from_str::<KlEstimator>("Mse").unwrap(),
        KlEstimator::Mse
    );
    // ½·d² with d = ln 2 − 0.
    let d = 2f64.ln();
    assert!((KlEstimator::Mse.token(d, 0.0).unwrap() - 0.5 * d * d).abs() < 1e-15);
}

#[test]
fn low_var_kl_is_k3_clamped_by_hand() {
    let opts = roll_flow_engine::spec::ron_options();
    let est: KlEstimator = opts.from_str("LowVarKl").unwrap();
    assert_eq!(est, KlEstimator::LowVarKl);
    // Inside the clamps it is k3: d = ln 2 → ½ − 1 + ln 2.
    let d = 2f64.ln();
    assert!((est.token(d, 0.0).unwrap() - (-0.5 + d)).abs() < 1e-15);
    // d = −3: k3 = e³ − 1 − 3 = 16.0855 → clamped to 10; d = 5: e⁻⁵ + 4 = 4.0067 (kept).
    assert_eq!(est.token(-3.0, 0.0), Some(10.0));
    assert!((est.token(5.0, 0.0).unwrap() - ((-5f64).exp() + 4.0)).abs() < 1e-15);
    // d = −30 is first clamped to −20, then the estimate to 10; d = 30 to 20 → 19 + e⁻²⁰,
    // then 10.
    assert_eq!(est.token(-30.0, 0.0), Some(10.0));
    assert_eq!(est.token(30.0, 0.0), Some(10.0));
    assert_eq!(KlEstimator::K3.token(-3.0, 0.0), Some(3f64.exp() - 4.0));
}

#[test]
fn low_var_kl_tensor_matches_the_scalar_and_stops_the_gradient_when_clamped() {
    type AD = Autodiff<Flex>;
    let dev = Default::default();
    let lp = [-0.3f32, -4.0, -1.1, 2.0];
    let rl = [-0.9f32, -1.0, -1.1, -3.0];
    let logp = Tensor::<AD, 1>::from_floats(lp, &dev).require_grad();
    let t = KlEstimator::LowVarKl
        .tensor(logp.clone(), Tensor::from_floats(rl, &dev))
        .unwrap();
    let got = t.clone().into_data().to_vec::<f32>().unwrap();
    for i in 0..4 {
        let want = KlEstimator::LowVarKl
            .token(lp[i] as f64, rl[i] as f64)
            .unwrap();
        assert!((got[i] as f64 - want).abs() < 1e-5, "{i}: {got:?}");
    }
    // d/dlogp of k3 = 1 − exp(−d); 0 where the estimate is clamped (token 1: d = −3).
    let g = crate::test_batches::gradient(&logp, &t.sum().reshape([1]));
    let d0 = (lp[0] - rl[0]) as f64;
    assert!((g[0] as f64 - (1.0 - (-d0).exp())).abs() < 1e-5, "{g:?}");
    assert_eq!(g[1], 0.0, "{g:?}");
    assert_eq!(g[2], 0.0, "d = 0: {g:?}");
    let d3 = (lp[3] - rl[3]) as f64;
    assert!((g[3] as f64 - (1.0 - (-d3).exp())).abs() < 1e-5, "{g:?}");
}
