//! The estimators, losses, corrections and the sampling of issue 60 through the real
//! binary: each a `--set` of the bandit GRPO pipeline, two steps at tiny size with
//! `--dump-batches`, and from the dumps alone a reader recomputes what each did (the
//! advantages from the scores and groups, the ratios from the log-probs, the correction's
//! weights from π_old and the sampler's log-probs). Dynamic sampling also runs twice with
//! one seed and gives the same metrics.

mod common;

use std::collections::BTreeMap;

use common::{assert_ok, metrics, roll_flow, run, untimed};
use roll_flow_engine::batch::column::{
    ADVANTAGES, BEHAVIOUR_LOGPROB, GROUP_ID, OLD_LOGPROB, RESPONSE_MASK, SCORE,
};
use roll_flow_engine::{Batch, Column};
use serde_json::Value;

const FILE: &str = "pipelines/bandit_grpo.ron";

/// Runs the bandit pipeline with `sets` for two steps, dumping batches; the metrics and
/// the step-1 dumps of `actor_step` (its input and what its loss made of it).
fn run_with(sets: &[&str]) -> (Vec<serde_json::Map<String, Value>>, Batch, Batch) {
    let dir = tempfile::tempdir().unwrap();
    let (out_dir, dumps) = (dir.path().join("run"), dir.path().join("dumps"));
    let mut args = vec!["--dump-batches", dumps.to_str().unwrap()];
    for set in sets {
        args.extend(["--set", set]);
    }
    let out = run(FILE, &out_dir, &args);
    assert_ok(&out);
    let records = metrics(&out_dir);
    assert_eq!(records.len(), 2, "{sets:?}: one record per step");
    for r in &records {
        for key in [
            "actor_step/grad_norm",
            "actor_step/pg_loss",
            "rollout/score/mean",
        ] {
            let v = r.get(key).and_then(Value::as_f64);
            assert!(
                v.is_some_and(f64::is_finite),
                "{sets:?}: no finite `{key}`: {r:?}"
            );
        }
    }
    let step = dumps.join("step_000001");
    let read = |f: &str| roll_flow_engine::batch_dump::read(&step.join(f)).unwrap();
    (
        records,
        read("actor_step.json"),
        read("actor_step.loss.json"),
    )
}

fn f32s(batch: &Batch, column: &Column) -> Vec<f64> {
    batch
        .f32s(column)
        .unwrap()
        .iter()
        .map(|&x| x as f64)
        .collect()
}

/// Each sample's response-token positions.
fn responses(batch: &Batch) -> Vec<Vec<usize>> {
    let mask = batch.bools(&RESPONSE_MASK).unwrap();
    (0..batch.num_samples())
        .map(|i| batch.sample_range(i).filter(|&t| mask[t]).collect())
        .collect()
}

/// Each sample's score and the scores of its group.
fn groups(batch: &Batch) -> (Vec<f64>, Vec<Vec<f64>>) {
    let scores = f32s(batch, &SCORE);
    let ids = batch.u64s(&GROUP_ID).unwrap();
    let mut by_group: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for (&g, &s) in ids.iter().zip(&scores) {
        by_group.entry(g).or_default().push(s);
    }
    let members = ids.iter().map(|g| by_group[g].clone()).collect();
    (scores, members)
}

/// Asserts every response token of sample i has advantage `want[i]`.
fn assert_advantages(batch: &Batch, want: &[f64], what: &str) {
    let adv = f32s(batch, &ADVANTAGES);
    for (tokens, w) in responses(batch).iter().zip(want) {
        for &t in tokens {
            assert!(
                (adv[t] - w).abs() < 1e-5,
                "{what}: token {t}: {} vs {w}",
                adv[t]
            );
        }
    }
}

#[test]
fn rloo_dr_grpo_and_reinforce_plus_plus_advantages_recompute_from_the_dump() {
    // RLOO: s − mean of the group's other scores.
    let (_, input, _) = run_with(&["nodes.adv=Rloo()"]);
    let (scores, members) = groups(&input);
    let want: Vec<f64> = (scores.iter().zip(&members))
        .map(|(s, g)| match g.len() {
            1 => 0.0,
            n => s - (g.iter().sum::<f64>() - s) / (n - 1) as f64,
        })
        .collect();
    assert_advantages(&input, &want, "Rloo");
    // Dr.GRPO: s − the group's mean, with its Σ/L loss.
    let (_, input, _) = run_with(&[
        "nodes.adv=DrGrpo()",
        "nodes.actor_step.loss=PpoClip(agg: SeqMeanTokenSumNorm, norm_length: 8)",
    ]);
    let (scores, members) = groups(&input);
    let want: Vec<f64> = (scores.iter().zip(&members))
        .map(|(s, g)| s - g.iter().sum::<f64>() / g.len() as f64)
        .collect();
    assert_advantages(&input, &want, "DrGrpo");
    // REINFORCE++-baseline: s − the group's mean on every token, whitened over the batch.
    let (_, input, _) = run_with(&["nodes.adv=ReinforcePlusPlus(baseline: true)"]);
    let (scores, members) = groups(&input);
    let centred: Vec<f64> = (scores.iter().zip(&members))
        .map(|(s, g)| {
            if g.len() < 2 {
                0.0
            } else {
                s - g.iter().sum::<f64>() / g.len() as f64
            }
        })
        .collect();
    let tokens: Vec<f64> = (responses(&input).iter().zip(&centred))
        .flat_map(|(t, &c)| std::iter::repeat_n(c, t.len()))
        .collect();
    let n = tokens.len() as f64;
    let mean = tokens.iter().sum::<f64>() / n;
    let var = tokens.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let want: Vec<f64> = centred
        .iter()
        .map(|c| (c - mean) / (var + 1e-8).sqrt())
        .collect();
    if var > 0.0 {
        assert_advantages(&input, &want, "ReinforcePlusPlus");
    }
}

#[test]
fn gspo_and_cispo_ratios_recompute_from_the_dump() {
    // GSPO: one ratio per sample, exp of the mean log-ratio of its response tokens.
    let (records, _, loss) = run_with(&["nodes.actor_step.loss=Gspo()"]);
    let (logp, old) = (
        f32s(&loss, &Column::token("policy_logprob")),
        f32s(&loss, &OLD_LOGPROB),
    );
    let ratio = f32s(&loss, &Column::token("policy_ratio"));
    for tokens in responses(&loss) {
        let mean = tokens.iter().map(|&t| logp[t] - old[t]).sum::<f64>() / tokens.len() as f64;
        for &t in &tokens {
            assert!((ratio[t] - mean.exp()).abs() < 1e-5, "GSPO token {t}");
        }
    }
    assert!(records[1].contains_key("actor_step/pg_clipfrac"));
    // CISPO: the token's own ratio.
    let (_, _, loss) = run_with(&["nodes.actor_step.loss=Cispo()"]);
    let (logp, old) = (
        f32s(&loss, &Column::token("policy_logprob")),
        f32s(&loss, &OLD_LOGPROB),
    );
    let ratio = f32s(&loss, &Column::token("policy_ratio"));
    for t in responses(&loss).concat() {
        assert!(
            (ratio[t] - (logp[t] - old[t]).exp()).abs() < 1e-5,
            "CISPO token {t}"
        );
    }
}

#[test]
fn mismatch_weights_recompute_from_the_dump() {
    // TIS at 2 and IcePop's token mask [0.5, 2] from π_old (LogProb) and the sampler's
    // log-probs, both in the input dump.
    let (records, input, loss) = run_with(&[
        "nodes.actor_step.loss=PpoClip(correction: (tis: 2.0, mask: Token(low: 0.5, high: 2.0)))",
    ]);
    let (old, behave) = (f32s(&input, &OLD_LOGPROB), f32s(&input, &BEHAVIOUR_LOGPROB));
    let weight = f32s(&loss, &Column::token("mismatch_weight"));
    for t in responses(&input).concat() {
        let rho = (old[t] - behave[t]).exp();
        let want = if (0.5..=2.0).contains(&rho) {
            rho.min(2.0)
        } else {
            0.0
        };
        assert!(
            (weight[t] - want).abs() < 1e-5,
            "token {t}: {} vs {want}",
            weight[t]
        );
    }
    for r in &records {
        let w = r["actor_step/mismatch/weight_mean"].as_f64().unwrap();
        assert!(
            (w - 1.0).abs() < 1e-3,
            "on the CPU the sampler is the trainer: {w}"
        );
    }
}

#[test]
fn dynamic_sampling_runs_reproducibly_and_says_what_it_drew() {
    // GRPO without the bandit file's zero-advantage filter, so the dump holds every group.
    let sets = [
        "nodes.rollout.dynamic_sampling=(extra_rounds: 3)",
        "nodes.adv=Grpo()",
    ];
    let (records, input, _) = run_with(&sets);
    for r in &records {
        let drawn = r["rollout/dynamic_sampling/groups_drawn"].as_f64().unwrap();
        let rounds = r["rollout/dynamic_sampling/rounds"].as_f64().unwrap();
        let filled = r["rollout/dynamic_sampling/filled_groups"]
            .as_f64()
            .unwrap();
        assert_eq!(drawn, 2.0 * (rounds + 1.0), "2 groups a round: {r:?}");
        assert!(rounds <= 3.0 && filled <= 2.0, "{r:?}");
    }
    // The step trains on 2 groups of 2; those not filled in have rewards that differ.
    assert_eq!(input.num_samples(), 4);
    let (_, members) = groups(&input);
    let uniform = members.iter().filter(|g| g[0] == g[1]).count() / 2;
    let filled = records[1]["rollout/dynamic_sampling/filled_groups"]
        .as_f64()
        .unwrap();
    assert_eq!(uniform as f64, filled);
    // The same seed, the same run.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let set = ["--set", sets[0], "--set", sets[1]];
    assert_ok(&run(FILE, &a, &set));
    assert_ok(&run(FILE, &b, &set));
    assert_eq!(untimed(&a), untimed(&b));
}

#[test]
fn validation_accepts_the_kl_names_and_refuses_what_cannot_run() {
    let validate = |sets: &[&str]| {
        let mut args = vec!["validate", "pipelines/qwen2.5-0.5b_frozen_lake.ron"];
        for set in sets {
            args.extend(["--set", set]);
        }
        roll_flow(&args)
    };
    for estimator in ["K2", "LowVarKl"] {
        let set = format!("nodes.actor_step.kl=(coef: 0.001, estimator: {estimator})");
        assert_ok(&validate(&[&set]));
    }
    let out = validate(&["nodes.rollout.dynamic_sampling=(extra_rounds: 0)"]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`dynamic_sampling.extra_rounds` must be in 1..=1024, got 0"),
        "{stderr}"
    );
}

#[test]
fn updates_with_no_policy_gradient_skip_their_passes_and_train_alike() {
    // GRPO over groups of one sample: each sample is its own group's mean, so every
    // advantage is 0 and the bandit file's objective (PPO clip, no entropy or KL term) has
    // no gradient. After the first update (which makes the optimizer's state) the actor
    // adds zero gradients without its passes; `--dump-batches` keeps the passes, and the
    // two runs must agree bit for bit in everything both report.
    let dir = tempfile::tempdir().unwrap();
    let go = |name: &str, extra: &[&str]| {
        let out_dir = dir.path().join(name);
        let mut args = vec!["--steps", "3", "--set", "envs.train.group_size=1"];
        args.extend(["--set", "nodes.eval.every=1"]);
        // A constant rate: the weights move on every step (AdamW's weight decay).
        args.extend([
            "--set",
            "models.policy.optim=AdamW(lr: 1e-3, schedule: Constant)",
        ]);
        args.extend(extra);
        assert_ok(&run(FILE, &out_dir, &args));
        untimed(&out_dir)
    };
    let dumps = dir.path().join("dumps");
    let skipped = go("skipped", &[]);
    let computed = go("computed", &["--dump-batches", dumps.to_str().unwrap()]);
    assert_eq!((skipped.len(), computed.len()), (3, 3));
    for (step, (skipped, computed)) in skipped.iter().zip(&computed).enumerate() {
        let get = |record: &[(String, Value)], key: &str| {
            let found = record.iter().find(|(k, _)| k == key);
            found.and_then(|(_, v)| v.as_f64())
        };
        let zero = get(skipped, "actor_step/zero_gradient_updates");
        assert_eq!(zero, (step > 0).then_some(1.0), "step {step}");
        assert_eq!(get(computed, "actor_step/zero_gradient_updates"), None);
        assert_eq!(get(computed, "actor_step/grad_norm"), Some(0.0));
        assert!(get(computed, "actor_step/update_norm").is_some_and(|u| u > 0.0));
        assert!(get(computed, "eval/val/success").is_some(), "{computed:?}");
        let has_loss = get(skipped, "actor_step/pg_loss").is_some();
        assert_eq!(has_loss, step == 0, "step {step}: the loss ran");
        for (key, value) in skipped {
            if key != "actor_step/zero_gradient_updates" {
                let theirs = computed.iter().find(|(k, _)| k == key).map(|(_, v)| v);
                assert_eq!(Some(value), theirs, "step {step}: `{key}`");
            }
        }
        let shared = (computed.iter())
            .filter(|(k, _)| skipped.iter().any(|(s, _)| s == k))
            .count();
        assert!(shared > 10, "step {step}: {shared} shared metrics");
    }
}
