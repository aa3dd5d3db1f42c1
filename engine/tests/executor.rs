//! The timely executor, driven by the test catalog's recording operators.

mod common;

use std::sync::{Arc, Mutex};

use common::{loaded, trace_for, Event, TestCatalog};
use roll_flow_engine::{execute, validate, ExecutorOptions, StepReport};

/// rollout → {old_logprob, values} → adv → train, plus a checkpoint-like sink.
fn pipeline(name: &str, seed: u64, steps: u64, extra_nodes: &str, extra_edges: &str) -> String {
    format!(
        r#"Pipeline(
    name: "{name}", seed: {seed}, steps: {steps}, out_dir: "unused",
    models: {{ "policy": (), "critic": () }},
    envs: {{ "train": (env: Coin(), groups: 2, group_size: 2) }},
    nodes: {{
        "rollout": Rollout(envs: "train"),
        "old_logprob": LogProb(model: "policy"),
        "values": Values(model: "critic"),
        "adv": Gae(),
        "train": Train(model: "policy"),
        "sink": Sink(),
        {extra_nodes}
    }},
    edges: [("rollout", "old_logprob"), ("rollout", "values"), ("old_logprob", "adv"), ("values", "adv"),
            ("adv", "train"), ("train", "sink"), {extra_edges}],
)"#
    )
}

struct Run {
    result: Result<(), roll_flow_engine::ExecError>,
    events: Vec<Event>,
    reports: Vec<StepReport>,
}

fn run(text: &str, options: ExecutorOptions) -> Run {
    let loaded = loaded(text);
    let validation = validate(&loaded);
    let graph = validation
        .graph
        .unwrap_or_else(|| panic!("{:?}", validation.diagnostics));
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let trace = trace_for(&loaded.pipeline.name);
    trace.lock().unwrap().clear();
    let result = execute::<TestCatalog>(
        Arc::new(loaded.pipeline),
        Arc::new(graph),
        options,
        Arc::new(move |r| {
            sink.lock().unwrap().push(r);
            Ok(())
        }),
    );
    let events = trace.lock().unwrap().clone();
    let reports = reports.lock().unwrap().clone();
    Run {
        result,
        events,
        reports,
    }
}

fn position(events: &[Event], step: u64, node: &str) -> usize {
    events
        .iter()
        .position(|e| e.step == step && e.node == node)
        .unwrap_or_else(|| panic!("{node} did not run at step {step}"))
}

#[test]
fn nodes_run_in_dependency_order_every_step() {
    let run = run(&pipeline("order", 1, 3, "", ""), ExecutorOptions::default());
    run.result.unwrap();
    for step in 0..3 {
        let at = |n| position(&run.events, step, n);
        assert!(at("rollout") < at("old_logprob") && at("rollout") < at("values"));
        assert!(at("old_logprob") < at("adv") && at("values") < at("adv"));
        assert!(at("adv") < at("train") && at("train") < at("sink"));
        if step > 0 {
            assert!(
                position(&run.events, step - 1, "train") < at("rollout"),
                "synchronous: rollout waits for training"
            );
        }
    }
    // adv saw the merge of both branches.
    let adv = &run.events[position(&run.events, 0, "adv")];
    assert!(
        adv.columns.contains(&"old_logprob".to_string())
            && adv.columns.contains(&"values".to_string())
    );
}

#[test]
fn feedback_delivers_version_t_to_the_rollout_of_step_t_plus_one() {
    let run = run(
        &pipeline("feedback", 1, 4, "", ""),
        ExecutorOptions::default(),
    );
    run.result.unwrap();
    let versions: Vec<u64> = run
        .events
        .iter()
        .filter(|e| e.node == "rollout")
        .map(|e| e.policy_version)
        .collect();
    assert_eq!(versions, vec![0, 1, 2, 3]);
    // Downstream nodes see the version their samples were generated with.
    assert!(run.events.iter().all(|e| e.policy_version == e.step));
}

#[test]
fn staleness_lets_rollout_run_ahead_by_k_versions() {
    let options = ExecutorOptions {
        staleness: 1,
        ..ExecutorOptions::default()
    };
    let run = run(&pipeline("stale", 1, 5, "", ""), options);
    run.result.unwrap();
    let versions: Vec<(u64, u64)> = run
        .events
        .iter()
        .filter(|e| e.node == "rollout")
        .map(|e| (e.step, e.policy_version))
        .collect();
    assert_eq!(versions, vec![(0, 0), (1, 0), (2, 1), (3, 2), (4, 3)]);
}

#[test]
fn runs_exactly_n_steps_and_reports_each_in_order() {
    let run = run(
        &pipeline("n-steps", 1, 5, "", ""),
        ExecutorOptions::default(),
    );
    run.result.unwrap();
    for node in ["rollout", "old_logprob", "values", "adv", "train", "sink"] {
        let steps: Vec<u64> = run
            .events
            .iter()
            .filter(|e| e.node == node)
            .map(|e| e.step)
            .collect();
        assert_eq!(steps, vec![0, 1, 2, 3, 4], "{node}");
    }
    let steps: Vec<u64> = run.reports.iter().map(|r| r.step).collect();
    assert_eq!(steps, vec![0, 1, 2, 3, 4]);
    let report = &run.reports[2];
    assert_eq!(report.nodes.len(), 6);
    let train = report.nodes.iter().find(|n| n.name == "train").unwrap();
    assert_eq!((train.samples, train.tokens), (2, 6));
    // Advantages are the token ids (Gae in the test catalog); step 2, version 2, ids 0 and 1.
    assert_eq!(train.metrics["loss"], (2.0 + 2.0 + 0.0) + (2.0 + 2.0 + 1.0));
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    let strip = |events: Vec<Event>| {
        events
            .into_iter()
            .map(|e| (e.step, e.node, e.policy_version, e.seed))
            .collect::<Vec<_>>()
    };
    let a = run(
        &pipeline("seed-a", 42, 3, "", ""),
        ExecutorOptions::default(),
    );
    let b = run(
        &pipeline("seed-b", 42, 3, "", ""),
        ExecutorOptions::default(),
    );
    let c = run(
        &pipeline("seed-c", 43, 3, "", ""),
        ExecutorOptions::default(),
    );
    let (a, b, c) = (strip(a.events), strip(b.events), strip(c.events));
    assert_eq!(a, b);
    assert_ne!(a, c);
    let seeds: std::collections::BTreeSet<u64> = a.iter().map(|e| e.3).collect();
    assert_eq!(seeds.len(), a.len(), "every (node, step) gets its own seed");
}

/// The test suites run debug builds, in which an operator that breaks its contract fails
/// where it does (release builds skip the check).
#[test]
#[cfg(debug_assertions)]
fn an_operator_that_does_not_give_what_its_contract_declares_fails_in_debug_builds() {
    let run = run(
        &pipeline("liar", 1, 3, r#""liar": Liar(),"#, r#"("rollout", "liar")"#),
        ExecutorOptions::default(),
    );
    assert_eq!(
        run.result.unwrap_err().to_string(),
        "node `liar` at step 0: Liar gave no `values` column although its contract declares it (a bug in the operator)"
    );
}

#[test]
fn an_operator_error_stops_the_run_and_names_node_and_step() {
    let run = run(
        &pipeline(
            "fail",
            1,
            6,
            r#""boom": Fail(at_step: 2),"#,
            r#"("adv", "boom")"#,
        ),
        ExecutorOptions::default(),
    );
    let err = run.result.unwrap_err();
    assert_eq!(
        err.to_string(),
        "node `boom` at step 2: deliberate failure at step 2"
    );
    assert!(
        run.events.iter().all(|e| e.step <= 2),
        "no step after the failure starts"
    );
    // Nothing ran after the failing node: the jobs queued behind it were dropped.
    let last = run.events.last().expect("events");
    assert_eq!((last.node.as_str(), last.step), ("boom", 2));
}

#[test]
fn an_operator_that_panics_stops_the_run_with_an_error_naming_node_and_step() {
    let run = run(
        &pipeline(
            "panic",
            1,
            6,
            r#""boom": Fail(at_step: 3, panics: true),"#,
            r#"("adv", "boom")"#,
        ),
        ExecutorOptions::default(),
    );
    let err = run.result.unwrap_err();
    assert_eq!(
        err.to_string(),
        "node `boom` at step 3: panicked: deliberate panic at step 3"
    );
    assert!(run.events.iter().all(|e| e.step <= 3));
}

#[test]
fn a_step_callback_that_fails_stops_the_run_at_that_step() {
    let loaded = loaded(&pipeline("sink_fails", 1, 8, "", ""));
    let graph = validate(&loaded).graph.unwrap();
    let trace = trace_for(&loaded.pipeline.name);
    trace.lock().unwrap().clear();
    let handed = Arc::new(Mutex::new(Vec::new()));
    let sink = handed.clone();
    let result = execute::<TestCatalog>(
        Arc::new(loaded.pipeline),
        Arc::new(graph),
        ExecutorOptions::default(),
        Arc::new(move |r| {
            sink.lock().unwrap().push(r.step);
            match r.step {
                2 => Err("cannot append to metrics.jsonl: No space left on device".into()),
                _ => Ok(()),
            }
        }),
    );
    assert_eq!(
        result.unwrap_err().to_string(),
        "step 2: cannot append to metrics.jsonl: No space left on device"
    );
    let events = trace.lock().unwrap().clone();
    assert!(
        events.iter().all(|e| e.step <= 3),
        "no step starts after the one in flight: {:?}",
        events.iter().map(|e| e.step).max()
    );
    assert_eq!(
        *handed.lock().unwrap(),
        vec![0, 1, 2],
        "no report after the refused one, so the record has no hole"
    );
}

#[test]
fn several_workers_each_run_every_step_deterministically() {
    let options = ExecutorOptions {
        threads: 2,
        ..ExecutorOptions::default()
    };
    let per_worker = |events: &[Event], w: usize| {
        let mut v: Vec<(u64, String, u64)> = events
            .iter()
            .filter(|e| e.worker == w)
            .map(|e| (e.step, e.node.clone(), e.seed))
            .collect();
        v.sort();
        v
    };
    let a = run(&pipeline("workers-a", 9, 3, "", ""), options.clone());
    let b = run(&pipeline("workers-b", 9, 3, "", ""), options);
    a.result.unwrap();
    b.result.unwrap();
    assert!(a.events.iter().all(|e| e.workers == 2));
    for w in 0..2 {
        assert_eq!(per_worker(&a.events, w).len(), 3 * 6);
        assert_eq!(per_worker(&a.events, w), per_worker(&b.events, w));
    }
    assert_eq!(
        per_worker(&a.events, 0),
        per_worker(&a.events, 1),
        "every worker gets the step's seed: a result does not depend on the worker count"
    );
}
