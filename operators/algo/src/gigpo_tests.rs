use proptest::prelude::*;
use roll_flow_engine::batch::column::{
    ADVANTAGES, EPISODE_RETURN, GROUP_ID, SCORE, STATE_HASH, STEP_INDEX, TRAJECTORY_ID,
};

use super::*;
use crate::test_batches::{assert_close, f32s, get, u64s, with_masks};

/// Rows: (group, trajectory, step, state hash, step reward, episode return); each step
/// sample is one prompt token and one response token.
fn step_batch(rows: &[(u64, u64, u64, u64, f32, f32)]) -> Batch {
    let masks: Vec<&[u8]> = rows.iter().map(|_| &[0u8, 1][..]).collect();
    let mut b = with_masks(&masks);
    u64s(
        &mut b,
        &GROUP_ID,
        &rows.iter().map(|r| r.0).collect::<Vec<_>>(),
    );
    u64s(
        &mut b,
        &TRAJECTORY_ID,
        &rows.iter().map(|r| r.1).collect::<Vec<_>>(),
    );
    u64s(
        &mut b,
        &STEP_INDEX,
        &rows.iter().map(|r| r.2).collect::<Vec<_>>(),
    );
    u64s(
        &mut b,
        &STATE_HASH,
        &rows.iter().map(|r| r.3).collect::<Vec<_>>(),
    );
    f32s(
        &mut b,
        &SCORE,
        &rows.iter().map(|r| r.4).collect::<Vec<_>>(),
    );
    f32s(
        &mut b,
        &EPISODE_RETURN,
        &rows.iter().map(|r| r.5).collect::<Vec<_>>(),
    );
    b
}

/// Group 0: trajectory 1 (2 steps, reaches the goal), trajectory 2 (3 steps, hits the turn
/// limit, return 0); both start in state 100. Group 1: one trajectory of one step, also in
/// state 100 (a different group, so not an anchor peer).
fn example() -> Batch {
    step_batch(&[
        (0, 1, 0, 100, 0.0, 1.0),
        (0, 1, 1, 200, 1.0, 1.0),
        (0, 2, 0, 100, 0.0, 0.0),
        (0, 2, 1, 300, 0.0, 0.0),
        (0, 2, 2, 400, 0.0, 0.0),
        (1, 3, 0, 100, 0.0, 2.0),
    ])
}

fn advantages(cfg: &GiGpo, mut b: Batch) -> Vec<f32> {
    cfg.apply(&mut b, &mut AdvantageState::default()).unwrap();
    get(&b, &ADVANTAGES)
        .chunks(2)
        .map(|c| {
            assert_eq!(c[0], 0.0, "prompt tokens get no advantage");
            c[1]
        })
        .collect()
}

#[test]
fn mean_mode_step_rows_by_hand() {
    // γ_s = 0.5: step returns traj 1 = [0.5, 1], traj 2 = [0, 0, 0].
    // Episode (step rows [1, 1, 0, 0, 0], mean 0.4): +0.6 / −0.4. Group of one: 2 − 0.
    // Anchor state 100 in group 0: returns [0.5, 0] → ±0.25; all other anchors singletons.
    let cfg = GiGpo {
        step_gamma: 0.5,
        ..Default::default()
    };
    assert_close(
        &advantages(&cfg, example()),
        &[0.85, 0.6, -0.65, -0.4, -0.4, 2.0],
        1e-6,
    );
}

#[test]
fn lone_multi_step_trajectory_is_a_group_of_one() {
    // One trajectory of two steps in its group: mean 0, std 1 in both modes → A^E = R.
    let rows = [(5, 1, 0, 1, 0.0, 0.5), (5, 1, 1, 2, 0.5, 0.5)];
    for stats in [EpisodeStats::StepRows, EpisodeStats::Trajectories] {
        let cfg = GiGpo {
            episode_stats: stats,
            ..Default::default()
        };
        assert_close(&advantages(&cfg, step_batch(&rows)), &[0.5, 0.5], 1e-7);
    }
}

#[test]
fn trajectory_stats_and_step_weight() {
    // Per trajectory returns [1, 0], mean 0.5; ω = 2.
    let cfg = GiGpo {
        step_gamma: 0.5,
        step_weight: 2.0,
        episode_stats: EpisodeStats::Trajectories,
        ..Default::default()
    };
    assert_close(
        &advantages(&cfg, example()),
        &[1.0, 0.5, -1.0, -0.5, -0.5, 2.0],
        1e-6,
    );
}

#[test]
fn mean_std_mode_by_hand() {
    // Episode rows [1, 1, 0, 0, 0]: mean 0.4, unbiased std sqrt(0.3).
    // Anchor [0.5, 0]: std sqrt(0.125). Group of one: 2/(1 + eps).
    let cfg = GiGpo {
        step_gamma: 0.5,
        norm: GigpoNorm::MeanStd,
        ..Default::default()
    };
    let e = 0.3f64.sqrt() + EPS;
    let s = 0.25 / (0.125f64.sqrt() + EPS);
    let want = [
        0.6 / e + s,
        0.6 / e,
        -0.4 / e - s,
        -0.4 / e,
        -0.4 / e,
        2.0 / (1.0 + EPS),
    ];
    assert_close(&advantages(&cfg, example()), &want, 1e-5);
}

#[test]
fn zero_std_episode_group_and_similarity_anchors() {
    // Two trajectories with equal returns (every action invalid, −0.1 each): A^E = 0.
    // Observations differ in one character: exact anchors are singletons, similarity
    // anchors (ratio 0.9) merge them.
    let mut b = step_batch(&[(0, 1, 0, 11, -0.1, -0.1), (0, 2, 0, 12, -0.3, -0.1)]);
    b.set(
        &roll_flow_engine::batch::column::OBSERVATION,
        vec!["abcdefghij".to_string(), "abcdefghiX".to_string()],
    )
    .unwrap();
    let exact = GiGpo {
        norm: GigpoNorm::MeanStd,
        ..Default::default()
    };
    assert_close(&advantages(&exact, b.clone()), &[0.0, 0.0], 1e-7);
    let similar = GiGpo {
        anchor: AnchorMode::Similarity { threshold: 0.9 },
        ..Default::default()
    };
    assert_close(&advantages(&similar, b), &[0.1, -0.1], 1e-6);
}

#[test]
fn trajectory_wise_samples_are_refused_clearly() {
    let mut b = with_masks(&[&[1, 1]]);
    f32s(&mut b, &SCORE, &[1.0]);
    let err = GiGpo::default()
        .estimate(&mut b, &mut AdvantageState::default())
        .unwrap_err()
        .to_string();
    assert_eq!(err, format!("GiGPO needs column `step_index`; {STEP_HINT}"));
    let need = GiGpo::default()
        .contract()
        .needs
        .into_iter()
        .find(|n| n.column == STATE_HASH)
        .unwrap();
    assert_eq!(need.hint.as_deref(), Some(STEP_HINT));
}

#[test]
fn inconsistent_input_is_refused() {
    let dup = step_batch(&[(0, 1, 0, 1, 0.0, 1.0), (0, 1, 0, 2, 0.0, 1.0)]);
    let err = GiGpo::default()
        .apply(&mut dup.clone(), &mut AdvantageState::default())
        .unwrap_err();
    assert!(err.to_string().contains("step 0 twice"), "{err}");
    let mixed = step_batch(&[(0, 1, 0, 1, 0.0, 1.0), (0, 1, 1, 2, 0.0, 0.5)]);
    let err = GiGpo::default()
        .apply(&mut mixed.clone(), &mut AdvantageState::default())
        .unwrap_err();
    assert!(
        err.to_string().contains("differing `episode_return`"),
        "{err}"
    );
}

#[test]
fn parses_from_ron() {
    let cfg: GiGpo =
        ron::from_str("(step_gamma: 0.9, norm: MeanStd, anchor: Similarity(threshold: 0.8))")
            .unwrap();
    assert_eq!(cfg.anchor, AnchorMode::Similarity { threshold: 0.8 });
    let cfg: GiGpo = ron::from_str("(anchor: Similarity())").unwrap();
    assert_eq!(cfg.anchor, AnchorMode::Similarity { threshold: 0.9 });
}

proptest! {
    /// With no repeated states, every anchor group is a singleton and GiGPO equals its
    /// episode advantage.
    #[test]
    fn no_repeated_states_equals_episode_advantage(
        trajs in prop::collection::vec((0u64..3, 1usize..5, -1.0f32..1.0), 1..8),
        mean_std in any::<bool>(),
        per_traj in any::<bool>(),
    ) {
        let mut rows = Vec::new();
        for (t, (g, len, ret)) in trajs.iter().enumerate() {
            for s in 0..*len {
                let hash = rows.len() as u64;
                rows.push((*g, t as u64, s as u64, hash, ret / *len as f32, *ret));
            }
        }
        let cfg = GiGpo {
            norm: if mean_std { GigpoNorm::MeanStd } else { GigpoNorm::Mean },
            episode_stats: if per_traj { EpisodeStats::Trajectories } else { EpisodeStats::StepRows },
            ..Default::default()
        };
        let got = advantages(&cfg, step_batch(&rows));
        let returns: Vec<f64> = rows.iter().map(|r| r.5 as f64).collect();
        let groups = dense_ids(&rows.iter().map(|r| r.0).collect::<Vec<_>>());
        let ids: Vec<u64> = rows.iter().map(|r| r.1).collect();
        let want = cfg.episode_advantages(&returns, &groups, &ids);
        for (g, w) in got.iter().zip(&want) {
            prop_assert!((*g as f64 - w).abs() < 1e-4, "{} vs {}", g, w);
        }
    }
}
