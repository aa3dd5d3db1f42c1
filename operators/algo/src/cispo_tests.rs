use burn::backend::{Autodiff, Flex};

use super::*;
use crate::packed_layout::PackedLayout;
use crate::ppo_loss::PpoClip;
use crate::test_batches::gradient;
use crate::AlgoStats;

type AD = Autodiff<Flex>;

/// One sample of four response tokens with ratios r = [1.5, 1.1, 0.5, 1.0] against π_old.
fn inputs_of(l: &PackedLayout<AD>, logp: burn::tensor::Tensor<AD, 1>) -> PolicyInputs<'_, AD> {
    let ratios = [1.5f64, 1.1, 0.5, 1.0];
    let old: Vec<f32> = LOGP
        .iter()
        .zip(ratios)
        .map(|(&lp, r)| (lp - r.ln()) as f32)
        .collect();
    PolicyInputs {
        logprob: logp,
        old_logprob: l.constant(old),
        advantages: l.constant(ADV.iter().map(|&a| a as f32).collect()),
        layout: l,
    }
}

const LOGP: [f64; 4] = [-0.5, -1.0, -2.0, -0.25];
const ADV: [f64; 4] = [1.0, 2.0, -1.0, 0.5];

fn run(cfg: &Cispo) -> (f64, Vec<f64>, AlgoStats) {
    let l = PackedLayout::<AD>::new(&[0, 4], &[true; 4], None, &Default::default());
    let logp = l
        .constant(LOGP.iter().map(|&x| x as f32).collect())
        .require_grad();
    let inputs = inputs_of(&l, logp.clone());
    let out = cfg.loss(&inputs, None).unwrap();
    let g = gradient(&logp, &out.loss);
    let value: f32 = out.loss.into_scalar();
    (
        value as f64,
        g.iter().map(|&x| x as f64).collect(),
        out.stats.resolve(),
    )
}

#[test]
fn clipped_weights_keep_every_tokens_gradient_by_hand() {
    // ε_low = ε_high = 0.2: w = clip(r, 0.8, 1.2) = [1.2, 1.1, 0.8, 1.0] (float64 below).
    // L = mean_t(−w_t·A_t·logp_t); ∂L/∂logp_t = −w_t·A_t/4, also on the clipped tokens 0
    // and 2, where PPO's clip gives 0.
    let cfg = Cispo {
        low: 0.2,
        high: 0.2,
        ..Default::default()
    };
    let (loss, g, stats) = run(&cfg);
    let w = [1.2, 1.1, 0.8, 1.0];
    let want: f64 = (0..4).map(|t| -w[t] * ADV[t] * LOGP[t]).sum::<f64>() / 4.0;
    assert!((loss - want).abs() < 1e-6, "{loss} vs {want}");
    for t in 0..4 {
        assert!((g[t] + w[t] * ADV[t] / 4.0).abs() < 1e-6, "{g:?}");
    }
    assert!((stats["pg_clipfrac"] - 0.5).abs() < 1e-6, "{stats:?}");
    // ppo_kl = mean(old − logp) = −mean(ln r) = −ln(1.5·1.1·0.5)/4.
    let kl = -(1.5f64 * 1.1 * 0.5).ln() / 4.0;
    assert!((stats["ppo_kl"] - kl).abs() < 1e-6, "{stats:?}");
    // PPO's clip on the same tokens: tokens 0 (r > 1.2, A > 0) and 2 (r < 0.8, A < 0)
    // lose their gradient.
    let l = PackedLayout::<AD>::new(&[0, 4], &[true; 4], None, &Default::default());
    let logp = l
        .constant(LOGP.iter().map(|&x| x as f32).collect())
        .require_grad();
    let ppo = PpoClip {
        agg: crate::LossAgg::TokenMean,
        ..Default::default()
    };
    let out = ppo.loss(&inputs_of(&l, logp.clone())).unwrap();
    let ppo_g = gradient(&logp, &out.loss);
    assert_eq!((ppo_g[0], ppo_g[2]), (0.0, 0.0), "{ppo_g:?}");
}

#[test]
fn defaults_have_no_lower_bound() {
    // ε_low = 1, ε_high = 0.2: w = [1.2, 1.1, 0.5, 1.0]; only token 0 is clipped.
    let (loss, g, stats) = run(&Cispo::default());
    let w = [1.2, 1.1, 0.5, 1.0];
    let want: f64 = (0..4).map(|t| -w[t] * ADV[t] * LOGP[t]).sum::<f64>() / 4.0;
    assert!((loss - want).abs() < 1e-6);
    for t in 0..4 {
        assert!((g[t] + w[t] * ADV[t] / 4.0).abs() < 1e-6, "{g:?}");
    }
    assert!((stats["pg_clipfrac"] - 0.25).abs() < 1e-6);
    assert_eq!(Cispo::default().agg, LossAgg::TokenMean);
}

#[test]
fn settings_parse_and_the_dual_clip_is_refused() {
    let opts = roll_flow_engine::spec::ron_options();
    assert_eq!(opts.from_str::<Cispo>("()").unwrap(), Cispo::default());
    let c: Cispo = opts
        .from_str("(high: 0.28, agg: SeqMeanTokenMean)")
        .unwrap();
    assert_eq!(
        (c.low, c.high, c.agg),
        (1.0, 0.28, LossAgg::SeqMeanTokenMean)
    );
    let err = Cispo {
        dual_clip: Some(3.0),
        ..Default::default()
    }
    .validate()
    .unwrap_err();
    assert!(
        err.to_string().contains("`dual_clip` has no meaning"),
        "{err}"
    );
    assert!(Cispo {
        high: -0.1,
        ..Default::default()
    }
    .validate()
    .is_err());
}
