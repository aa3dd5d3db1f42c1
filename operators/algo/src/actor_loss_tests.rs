//! Tests of the actor objective: each loss term by hand (value, aggregation, gradient),
//! the entropy stat, the errors that name a missing input, and the RON of DESIGN.md.

use super::*;
use crate::packed_layout::PackedLayout;
use burn::backend::{Autodiff, Flex};

type AD = Autodiff<Flex>;

#[test]
fn entropy_and_kl_terms_by_hand() {
    // One sample, two tokens, r = 1, A = [1, 1] → L_policy = −1.
    // Entropy [0.5, 1.5] → mean 1; coef 0.1 → −0.1.
    // KL k3 with d = logp − ref = [ln 2, 0]: k3 = [−0.5 + ln 2, 0] → mean; coef 0.5.
    let l = PackedLayout::<AD>::new(&[0, 2], &[true, true], None, &Default::default());
    let logp = l.constant(vec![2f32.ln() - 1.0, -1.0]).require_grad();
    let inputs = PolicyInputs {
        logprob: logp.clone(),
        old_logprob: l.constant(vec![2f32.ln() - 1.0, -1.0]),
        advantages: l.constant(vec![1.0, 1.0]),
        layout: &l,
    };
    let extras = ActorExtras {
        ref_logprob: Some(l.constant(vec![-1.0, -1.0])),
        entropy: Some(l.constant(vec![0.5, 1.5])),
        ..Default::default()
    };
    let kl = KlLoss {
        coef: 0.5,
        estimator: KlEstimator::K3,
    };
    let regularisers = Regularisers {
        entropy: 0.1,
        kl_loss: Some(&kl),
        ..Default::default()
    };
    let policy = PolicyLoss::PpoClip(PpoClip::default());
    let out = actor_objective(&policy, &inputs, extras, regularisers).unwrap();
    let k3 = (-0.5 + 2f64.ln()) / 2.0;
    let want = -1.0 - 0.1 + 0.5 * k3;
    assert!(
        (out.stats.clone().resolve()["actor_loss"] - want).abs() < 1e-5,
        "{:?}",
        out.stats
    );
    // d/dlogp_0: policy −A·r/2 = −0.5; KL: 0.5·(1 − exp(−d))/2 = 0.5·0.5/2 = 0.125.
    let g = crate::test_batches::gradient(&logp, &out.loss);
    assert!(
        (g[0] - (-0.5 + 0.125)).abs() < 1e-5 && (g[1] + 0.5).abs() < 1e-5,
        "{g:?}"
    );
}

#[test]
fn the_entropy_stat_is_the_token_mean_with_the_bonus_on_or_off() {
    // Two samples of 1 and 3 tokens, entropy [3 | 1, 1, 1], zero advantages (L_policy =
    // 0). Token mean 6/4 = 1.5; the loss's SeqMeanTokenMean (3 + 1)/2 = 2.
    let mask = [true; 4];
    let l = PackedLayout::<Flex>::new(&[0, 1, 4], &mask, None, &Default::default());
    let inputs = PolicyInputs {
        logprob: l.constant(vec![-1.0; 4]),
        old_logprob: l.constant(vec![-1.0; 4]),
        advantages: l.constant(vec![0.0; 4]),
        layout: &l,
    };
    for coef in [0.0, 0.1] {
        let extras = ActorExtras {
            entropy: Some(l.constant(vec![3.0, 1.0, 1.0, 1.0])),
            ..Default::default()
        };
        let policy = PolicyLoss::PpoClip(PpoClip::default());
        let regularisers = Regularisers {
            entropy: coef,
            ..Default::default()
        };
        let out = actor_objective(&policy, &inputs, extras, regularisers).unwrap();
        assert!(
            (out.stats.clone().resolve()["entropy"] - 1.5).abs() < 1e-6,
            "{:?}",
            out.stats
        );
        let want_loss = -(coef as f64) * 2.0;
        assert!(
            (out.stats.clone().resolve()["actor_loss"] - want_loss).abs() < 1e-6,
            "{coef}"
        );
    }
}

#[test]
fn the_uniform_prior_term_is_added_with_the_loss_aggregation() {
    // One sample, two tokens, zero advantages: L = 0.5 · mean([0.2, 0.6]) = 0.2, and
    // its gradient on each token's KL is 0.5 / 2.
    let l = PackedLayout::<AD>::new(&[0, 2], &[true, true], None, &Default::default());
    let zeros = || l.constant(vec![0.0, 0.0]);
    let inputs = PolicyInputs {
        logprob: zeros(),
        old_logprob: zeros(),
        advantages: zeros(),
        layout: &l,
    };
    let kl = l.constant(vec![0.2, 0.6]).require_grad();
    let extras = || ActorExtras {
        uniform_kl: Some(kl.clone()),
        ..Default::default()
    };
    let policy = PolicyLoss::PpoClip(PpoClip::default());
    let with = |coef| Regularisers {
        uniform_kl: coef,
        ..Default::default()
    };
    let off = actor_objective(&policy, &inputs, extras(), with(0.0)).unwrap();
    assert!(
        (off.stats.clone().resolve()["uniform_kl"] - 0.4).abs() < 1e-6,
        "reported when off"
    );
    assert!(off.stats.clone().resolve()["actor_loss"].abs() < 1e-7);
    let on = actor_objective(&policy, &inputs, extras(), with(0.5)).unwrap();
    assert!(
        (on.stats.clone().resolve()["actor_loss"] - 0.2).abs() < 1e-6,
        "{:?}",
        on.stats
    );
    let g = crate::test_batches::gradient(&kl, &on.loss);
    assert!(g.iter().all(|g| (g - 0.25).abs() < 1e-6), "{g:?}");
    let err = actor_objective(&policy, &inputs, ActorExtras::default(), with(0.5));
    assert!(err.unwrap_err().to_string().contains("uniform_kl"));
}

#[test]
fn missing_inputs_are_named() {
    let l = PackedLayout::<Flex>::new(&[0, 1], &[true], None, &Default::default());
    let inputs = PolicyInputs {
        logprob: l.constant(vec![0.0]),
        old_logprob: l.constant(vec![0.0]),
        advantages: l.constant(vec![1.0]),
        layout: &l,
    };
    let err = actor_objective(
        &PolicyLoss::DecoupledPpo(DecoupledPpo::default()),
        &inputs,
        ActorExtras::default(),
        Regularisers::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("behaviour_logprob"), "{err}");
}

use roll_flow_engine::spec::ron_options;

#[test]
fn parses_design_doc_ron() {
    let opts = ron_options();
    let l: PolicyLoss = opts.from_str("PpoClip(low: 0.2, high: 0.28, dual_clip: Some(3.0), ratio: Token, agg: SeqMeanTokenMean)").unwrap();
    assert_eq!(
        l,
        PolicyLoss::PpoClip(PpoClip {
            high: 0.28,
            dual_clip: Some(3.0),
            ..Default::default()
        })
    );
    let l: PolicyLoss = opts.from_str("PpoClip(dual_clip: 3.0)").unwrap();
    assert_eq!(
        l,
        PolicyLoss::PpoClip(PpoClip {
            dual_clip: Some(3.0),
            ..Default::default()
        })
    );
    assert!(opts.from_str::<PolicyLoss>("PpoClip(lo: 0.2)").is_err());
    let d: PolicyLoss = opts
        .from_str("DecoupledPpo(behaviour_cap: Clamp(5.0))")
        .unwrap();
    assert!(matches!(
        d,
        PolicyLoss::DecoupledPpo(DecoupledPpo {
            behaviour_cap: crate::BehaviourCap::Clamp(5.0),
            ..
        })
    ));
}
