//! Tests of [`super::BiLevelGae`]: RAGEN's example by hand, the fused batch against the
//! per-sample f64 reference, and step-wise samples chained into their trajectories.

use super::*;
use crate::gae::gae;
use crate::test_batches::{assert_close, f32s, get, u64s, with_masks};
use roll_flow_engine::batch::column::TRAJECTORY_ID;

/// γ 0.9, λ 0.8, γ_turn 0.95, λ_turn 0.6: no discount is 1 and no two are equal, so a
/// mix-up between them shows.
fn discounted_config() -> BiLevelGae {
    BiLevelGae {
        gamma: 0.9,
        lambda: 0.8,
        turn_gamma: 0.95,
        turn_lambda: Some(0.6),
        ..Default::default()
    }
}

/// Asserts the batch's advantages and returns against the f64 reference run on each
/// trajectory's response tokens (packed position, turn id); returns the advantages.
fn assert_matches_reference(
    b: &Batch,
    cfg: &BiLevelGae,
    trajectories: &[Vec<(usize, i64)>],
    rewards: &[f32],
    values: &[f32],
) -> Vec<f64> {
    let (mut want_adv, mut want_ret) = (vec![0.0; rewards.len()], vec![0.0; rewards.len()]);
    for pos in trajectories {
        let r: Vec<f64> = pos.iter().map(|&(t, _)| rewards[t] as f64).collect();
        let v: Vec<f64> = pos.iter().map(|&(t, _)| values[t] as f64).collect();
        let turns: Vec<i64> = pos.iter().map(|&(_, k)| k).collect();
        let (a, g) = cfg.sequence(&r, &v, &turns);
        for (k, &(t, _)) in pos.iter().enumerate() {
            (want_adv[t], want_ret[t]) = (a[k], g[k]);
        }
    }
    assert_close(&get(b, &ADVANTAGES), &want_adv, 1e-5);
    assert_close(&get(b, &RETURNS), &want_ret, 1e-5);
    want_adv
}

#[test]
fn ragen_example_by_hand() {
    // RAGEN's own example: rewards at tokens 4 and 9, values 0.1..1.0, γ = λ = 1,
    // γ_turn = 0.95. Turn level: Â_1 = 1 − 1.0 = 0, Â_0 = 1 + 0.95·1.0 − 0.5 = 1.45.
    // Token level: turn 1 tokens 5..8 add 0.1 per step back from 0; turn 0 from 1.45.
    let mut b = with_masks(&[&[1; 10]]);
    f32s(
        &mut b,
        &TOKEN_REWARD,
        &[0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    );
    f32s(
        &mut b,
        &VALUES,
        &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
    );
    b.set(&TOKEN_TURN, vec![0i64, 0, 0, 0, 0, 1, 1, 1, 1, 1])
        .unwrap();
    BiLevelGae::default()
        .apply(&mut b, &mut AdvantageState::default())
        .unwrap();
    let want = [1.85, 1.75, 1.65, 1.55, 1.45, 0.4, 0.3, 0.2, 0.1, 0.0];
    assert_close(&get(&b, &ADVANTAGES), &want, 1e-5);
    let values = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
    let ret: Vec<f64> = want.iter().zip(values).map(|(a, v)| a + v).collect();
    assert_close(&get(&b, &RETURNS), &ret, 1e-5);
}

#[test]
fn turn_lambda_zero_scores_a_move_by_the_next_state_value() {
    // Two turns of two tokens; γ = λ = 1 inside a reply, γ_turn = 0.9. Turn ends e_0 = 1,
    // e_1 = 3: Â_1 = 1 − 0.5 = 0.5; δ_0 = 0.9·0.5 − 0.6 = −0.15.
    // λ_turn = 0: Â_0 = −0.15, so the first token gets 0.6 − 0.2 − 0.15 = 0.25, which is
    // the one-step TD error γ_turn·V(e_1) − V_0 = 0.45 − 0.2.
    // λ_turn = λ = 1 (default): Â_0 = −0.15 + 0.9·0.5 = 0.3, the first token 0.7, which is
    // the Monte Carlo γ_turn·1 − V_0.
    let (rewards, values) = ([0.0, 0.0, 0.0, 1.0], [0.2, 0.6, 0.3, 0.5]);
    let run = |turn_lambda| {
        let mut b = with_masks(&[&[1; 4]]);
        f32s(&mut b, &TOKEN_REWARD, &rewards);
        f32s(&mut b, &VALUES, &values);
        b.set(&TOKEN_TURN, vec![0i64, 0, 1, 1]).unwrap();
        let cfg = BiLevelGae {
            turn_gamma: 0.9,
            turn_lambda,
            ..Default::default()
        };
        cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
        get(&b, &ADVANTAGES)
    };
    assert_close(&run(Some(0.0)), &[0.25, -0.15, 0.7, 0.5], 1e-6);
    assert_close(&run(None), &[0.7, 0.3, 0.7, 0.5], 1e-6);
    assert_close(&run(Some(1.0)), &[0.7, 0.3, 0.7, 0.5], 1e-6);
}

#[test]
fn turn_lambda_out_of_range_is_refused() {
    let cfg = BiLevelGae {
        turn_lambda: Some(1.5),
        ..Default::default()
    };
    let err = cfg.validate().unwrap_err().to_string();
    assert!(err.contains("turn_lambda"), "{err}");
}

#[test]
fn single_turn_is_plain_gae() {
    // One turn: the turn level gives r(e) − V(e), the token level is then GAE.
    let cfg = BiLevelGae {
        gamma: 0.9,
        lambda: 0.8,
        ..Default::default()
    };
    let (r, v) = ([0.0, 0.3, 1.0], [0.2, 0.5, 0.4]);
    let (a, _) = cfg.sequence(&r, &v, &[0, 0, 0]);
    let (want, _) = gae(&r, &v, cfg.gamma as f64, cfg.lambda as f64);
    for (x, y) in a.iter().zip(want) {
        assert!((x - y).abs() < 1e-12);
    }
}

#[test]
fn fused_batch_matches_per_sample_reference() {
    // Three samples: prompt, turns split by observation tokens, an empty response.
    let masks: [&[u8]; 3] = [&[0, 1, 1, 0, 1, 1, 1], &[0, 0, 1, 0, 1], &[0, 0]];
    let turns = [0i64, 0, 0, 1, 1, 1, 2, 0, 0, 0, 1, 1, 0, 0];
    let mut b = with_masks(&masks);
    let flat: Vec<u8> = masks.concat();
    let rewards: Vec<f32> = (0..flat.len())
        .map(|t| f32::from(flat[t]) * (0.3 * t as f32).sin())
        .collect();
    let values: Vec<f32> = (0..flat.len()).map(|t| (0.7 * t as f32).cos()).collect();
    f32s(&mut b, &TOKEN_REWARD, &rewards);
    f32s(&mut b, &VALUES, &values);
    b.set(&TOKEN_TURN, turns.to_vec()).unwrap();
    let cfg = discounted_config();
    cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
    let trajectories: Vec<Vec<(usize, i64)>> = b
        .offsets()
        .windows(2)
        .map(|w| {
            (w[0]..w[1])
                .filter(|&t| flat[t] == 1)
                .map(|t| (t, turns[t]))
                .collect()
        })
        .collect();
    assert_matches_reference(&b, &cfg, &trajectories, &rewards, &values);
}

#[test]
fn step_samples_chain_into_their_trajectory() {
    // Step-wise samples of two trajectories, out of order: (trajectory, step) =
    // (5, 1), (2, 0), (5, 0), (2, 2), (2, 1). Each is a prompt plus a one-turn reply.
    // The result must equal the trajectory-wise formula on each trajectory's replies
    // concatenated in step order, one turn per step.
    let masks: [&[u8]; 5] = [
        &[0, 1, 1],
        &[0, 0, 1],
        &[0, 1, 1, 1],
        &[0, 1],
        &[0, 0, 1, 1],
    ];
    let (traj, step) = ([5u64, 2, 5, 2, 2], [1u64, 0, 0, 2, 1]);
    let mut b = with_masks(&masks);
    let flat: Vec<u8> = masks.concat();
    let ends: Vec<bool> = (0..flat.len())
        .map(|t| flat[t] == 1 && b.offsets().contains(&(t + 1)))
        .collect();
    let rewards: Vec<f32> = (0..flat.len())
        .map(|t| if ends[t] { 0.5 + 0.25 * t as f32 } else { 0.0 })
        .collect();
    let values: Vec<f32> = (0..flat.len()).map(|t| (0.7 * t as f32).cos()).collect();
    f32s(&mut b, &TOKEN_REWARD, &rewards);
    f32s(&mut b, &VALUES, &values);
    b.set(&TOKEN_TURN, vec![0i64; flat.len()]).unwrap();
    u64s(&mut b, &TRAJECTORY_ID, &traj);
    u64s(&mut b, &STEP_INDEX, &step);
    let cfg = discounted_config();
    cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
    let offsets = b.offsets().to_vec();
    let trajectories: Vec<Vec<(usize, i64)>> = [[2usize, 0].as_slice(), &[1, 4, 3]]
        .iter()
        .map(|rows| {
            rows.iter()
                .flat_map(|&i| {
                    (offsets[i]..offsets[i + 1])
                        .filter(|&t| flat[t] == 1)
                        .map(move |t| (t, step[i] as i64))
                })
                .collect()
        })
        .collect();
    let want_adv = assert_matches_reference(&b, &cfg, &trajectories, &rewards, &values);
    // Chaining matters: the first step of trajectory 2 bootstraps from its second.
    let alone = cfg
        .sequence(&[rewards[5] as f64], &[values[5] as f64], &[0])
        .0[0];
    assert!(
        (want_adv[5] - alone).abs() > 0.1,
        "{} vs {alone}",
        want_adv[5]
    );
}

#[test]
fn step_samples_with_a_repeated_step_are_refused() {
    let mut b = with_masks(&[&[0, 1], &[0, 1]]);
    f32s(&mut b, &TOKEN_REWARD, &[0.0, 1.0, 0.0, 1.0]);
    f32s(&mut b, &VALUES, &[0.0; 4]);
    b.set(&TOKEN_TURN, vec![0i64; 4]).unwrap();
    u64s(&mut b, &TRAJECTORY_ID, &[3, 3]);
    u64s(&mut b, &STEP_INDEX, &[1, 1]);
    let err = BiLevelGae::default()
        .apply(&mut b, &mut AdvantageState::default())
        .unwrap_err();
    assert!(
        err.to_string().contains("trajectory 3 has step 1 twice"),
        "{err}"
    );
}

#[test]
fn zero_reward_turn_keeps_its_own_end() {
    // Two one-token turns, the first with reward 0 (RAGEN would merge them).
    // Â_1 = 1 − 0.5 = 0.5; Â_0 = 0 + 0.95·0.5 − 0.25 + 0.95·0.5 = 0.7.
    let (a, _) = BiLevelGae::default().sequence(&[0.0, 1.0], &[0.25, 0.5], &[0, 1]);
    assert!(
        (a[0] - 0.7).abs() < 1e-6 && (a[1] - 0.5).abs() < 1e-12,
        "{a:?}"
    );
}
