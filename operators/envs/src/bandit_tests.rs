//! Bandit: payoff frequencies, arm order, parsing.

use super::{Bandit, BanditConfig};
use crate::env::Env;
use crate::error::EnvError;

fn pull(env: &mut Bandit, seed: u64, arm: &str) -> f32 {
    env.reset(seed).unwrap();
    env.step(&format!("<answer>{arm}</answer>")).unwrap().reward
}

#[test]
fn high_risk_arm_pays_one_a_quarter_of_the_time() {
    let mut env = BanditConfig::default().build().unwrap();
    let n = 20_000;
    let mut paid = 0;
    for seed in 0..n {
        let reward = pull(&mut env, seed, "dragon");
        assert!(reward == 0.0 || reward == 1.0);
        paid += usize::from(reward == 1.0);
    }
    // p = 0.25, σ = sqrt(p(1−p)/n) ≈ 0.0031; allow 4σ.
    let rate = paid as f64 / n as f64;
    assert!(
        (rate - 0.25).abs() < 4.0 * (0.25f64 * 0.75 / n as f64).sqrt(),
        "{rate}"
    );
}

#[test]
fn low_risk_arm_always_pays_its_fixed_reward() {
    let mut env = BanditConfig::default().build().unwrap();
    for seed in 0..500 {
        assert_eq!(pull(&mut env, seed, "PHOENIX"), 0.15);
        let step_again = env.step("<answer>Phoenix</answer>");
        assert_eq!(step_again, Err(EnvError::EpisodeOver("Bandit")));
    }
}

#[test]
fn arm_order_is_random_per_episode_and_fixed_per_seed() {
    let mut env = BanditConfig::default().build().unwrap();
    let mut phoenix_first = 0;
    for seed in 0..2_000 {
        let reset = env.reset(seed).unwrap();
        let again = env.reset(seed).unwrap();
        assert_eq!(reset, again);
        phoenix_first += usize::from(env.arms()[0] == "Phoenix");
        assert!(reset.instruction.contains("Phoenix") && reset.instruction.contains("Dragon"));
    }
    assert!((800..1200).contains(&phoenix_first), "{phoenix_first}");
}

#[test]
fn success_means_the_better_arm_in_expectation() {
    let mut env = BanditConfig::default().build().unwrap();
    env.reset(1).unwrap();
    let step = env
        .step("<think>risk it</think><answer>Dragon</answer>")
        .unwrap();
    assert!(step.info.success && step.terminated);
    env.reset(1).unwrap();
    assert!(!env.step("<answer>Phoenix</answer>").unwrap().info.success);
}

#[test]
fn unparsable_answer_ends_with_the_penalty() {
    let config = BanditConfig {
        format_penalty: -0.5,
        ..Default::default()
    };
    let mut env = config.build().unwrap();
    assert_eq!(env.step("x"), Err(EnvError::NotReset("Bandit")));
    env.reset(3).unwrap();
    let step = env.step("<answer>Phoenix || Dragon</answer>").unwrap();
    assert!(
        step.info.action_is_valid,
        "only the first of K=1 actions is kept"
    );
    env.reset(3).unwrap();
    let step = env.step("<answer>Unicorn</answer>").unwrap();
    assert_eq!((step.reward, step.info.format_penalty), (-0.5, -0.5));
    assert!(step.terminated && !step.info.action_is_valid);
}

#[test]
fn bad_configs_are_refused() {
    let bad = [
        BanditConfig {
            high_risk_p: 1.5,
            ..Default::default()
        },
        BanditConfig {
            high_risk_name: "phoenix".into(),
            ..Default::default()
        },
        BanditConfig {
            low_risk_name: " ".into(),
            ..Default::default()
        },
        BanditConfig {
            low_risk_reward: f32::NAN,
            ..Default::default()
        },
    ];
    for config in bad {
        assert!(config.build().is_err(), "{config:?}");
    }
}
