use proptest::prelude::*;
use roll_flow_engine::batch::column::{
    ADVANTAGES, OLD_LOGPROB, REF_LOGPROB, RETURNS, TOKEN_REWARD, VALUES,
};

use super::*;
use crate::test_batches::{assert_close, f32s, get, with_masks};

fn run(gae_cfg: &Gae, masks: &[&[u8]], rewards: &[f32], values: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let mut b = with_masks(masks);
    f32s(&mut b, &TOKEN_REWARD, rewards);
    f32s(&mut b, &VALUES, values);
    gae_cfg
        .apply(&mut b, &mut AdvantageState::default())
        .unwrap();
    (get(&b, &ADVANTAGES), get(&b, &RETURNS))
}

#[test]
fn single_turn_by_hand() {
    // γ = 1, λ = 0.95; response values 0.5, 0.6, 0.7; reward 1 at the end.
    let (a, r) = run(
        &Gae::default(),
        &[&[0, 1, 1, 1]],
        &[0.0, 0.0, 0.0, 1.0],
        &[9.0, 0.5, 0.6, 0.7],
    );
    assert_close(&a, &[0.0, 0.46575, 0.385, 0.3], 1e-6);
    assert_close(&r, &[0.0, 0.96575, 0.985, 1.0], 1e-6);
}

#[test]
fn multi_turn_skips_observation_tokens() {
    let cfg = Gae {
        gamma: 0.9,
        lambda: 0.8,
        ..Default::default()
    };
    let (a, r) = run(
        &cfg,
        &[&[1, 1, 0, 1]],
        &[0.0, 0.5, 0.0, 1.0],
        &[0.2, 0.4, 9.0, 0.3],
    );
    assert_close(&a, &[0.78928, 0.874, 0.0, 0.7], 1e-6);
    assert_close(&r, &[0.98928, 1.274, 0.0, 1.0], 1e-6);
}

#[test]
fn edges_empty_mask_single_token_turn_limit() {
    // Sample 0: no response token. Sample 1: one response token. Sample 2: hit the turn
    // limit with no reward: treated as terminal, so returns are 0 and A = −V chain.
    let cfg = Gae {
        gamma: 1.0,
        lambda: 1.0,
        ..Default::default()
    };
    let (a, r) = run(
        &cfg,
        &[&[0, 0], &[0, 1], &[1, 0, 1]],
        &[0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        &[0.3, 0.3, 0.0, 0.25, 0.5, 0.0, 0.5],
    );
    assert_close(&a, &[0.0, 0.0, 0.0, 0.75, -0.5, 0.0, -0.5], 1e-6);
    assert_close(&r, &[0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0], 1e-6);
}

#[test]
/// The advice comes from the contract's need, as graph validation gives it.
fn missing_values_says_add_values_node() {
    let mut b = with_masks(&[&[1]]);
    f32s(&mut b, &TOKEN_REWARD, &[1.0]);
    let err = Gae::default()
        .estimate(&mut b, &mut AdvantageState::default())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Gae needs column `values`; add a Values node upstream"
    );
    let need = Gae::default()
        .contract()
        .needs
        .into_iter()
        .find(|n| n.column == VALUES)
        .unwrap();
    assert_eq!(need.hint.as_deref(), Some("add a Values node upstream"));
}

#[test]
fn reward_outside_response_is_refused() {
    let mut b = with_masks(&[&[1, 0]]);
    f32s(&mut b, &TOKEN_REWARD, &[0.0, 1.0]);
    f32s(&mut b, &VALUES, &[0.0, 0.0]);
    let err = Gae::default()
        .estimate(&mut b, &mut AdvantageState::default())
        .unwrap_err();
    assert!(err.to_string().contains("outside `response_mask`"), "{err}");
}

#[test]
fn kl_penalty_reduces_token_rewards() {
    // β = 0.1, K1: d = old − ref = [0.5, −1.0] → r = [−0.05, 1 + 0.1].
    let cfg = Gae {
        gamma: 1.0,
        lambda: 1.0,
        kl_penalty: Some(KlPenalty {
            estimator: crate::KlEstimator::K1,
            coef: 0.1,
            target: None,
            horizon: 1e4,
        }),
        ..Default::default()
    };
    let mut b = with_masks(&[&[1, 1]]);
    f32s(&mut b, &TOKEN_REWARD, &[0.0, 1.0]);
    f32s(&mut b, &VALUES, &[0.0, 0.0]);
    f32s(&mut b, &OLD_LOGPROB, &[-0.5, -2.0]);
    f32s(&mut b, &REF_LOGPROB, &[-1.0, -1.0]);
    let mut state = AdvantageState::default();
    let stats = cfg.apply(&mut b, &mut state).unwrap();
    assert_close(&get(&b, &ADVANTAGES), &[1.05, 1.1], 1e-6);
    assert!((stats["kl/penalty_kl"] + 0.25).abs() < 1e-9);
    assert_eq!(stats["kl/beta"], 0.1f32 as f64);
    let need_names: Vec<_> = cfg
        .contract()
        .needs
        .iter()
        .map(|n| n.column.name().to_string())
        .collect();
    assert!(need_names.contains(&"ref_logprob".to_string()));
}

proptest! {
    /// γ = λ = 1: GAE advantages equal reward-to-go minus values.
    #[test]
    fn unit_gamma_lambda_is_reward_to_go_minus_values(
        rv in prop::collection::vec((-2.0f64..2.0, -2.0f64..2.0), 1..40)
    ) {
        let r: Vec<f64> = rv.iter().map(|p| p.0).collect();
        let v: Vec<f64> = rv.iter().map(|p| p.1).collect();
        let (a, g) = gae(&r, &v, 1.0, 1.0);
        for t in 0..r.len() {
            let to_go: f64 = r[t..].iter().sum();
            prop_assert!((a[t] - (to_go - v[t])).abs() < 1e-9);
            prop_assert!((g[t] - to_go).abs() < 1e-9);
        }
    }
}
