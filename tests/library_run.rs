//! The run as a library, in-process: a pipeline a program writes itself, on an env it
//! registers (the `Corridor` of `examples/custom_env`), through `roll_flow::run::Run`; and
//! what the library refuses before it writes anything.

#[path = "../examples/custom_env/corridor.rs"]
mod corridor;

use std::sync::{Arc, Mutex};

use roll_flow::envs::error::EnvError;
use roll_flow::run::{Run, RunError};

fn pipeline(out_dir: &std::path::Path, env: &str) -> String {
    format!(
        r#"Pipeline(
    name: "corridor", seed: 3, steps: 4, out_dir: "{}",
    models: {{ "policy": (arch: Tiny(layers: 1, dim: 16, heads: 2)) }},
    envs: {{
        "train": (env: Custom(name: "{env}", params: (length: 4)), groups: 2, group_size: 2),
        "val": (env: Custom(name: "{env}", params: (length: 4)), groups: 2, seed: 9),
    }},
    nodes: {{
        "rollout": Rollout(envs: "train", guide: Actions, instruction: false, max_new_tokens: 8),
        "adv": StarPO(norm: Mean),
        "actor_step": ActorStep(old_logprob: Behaviour),
        "eval": Eval(envs: "val", every: 2, max_new_tokens: 8),
        "checkpoint": Checkpoint(every: 2),
    }},
    edges: [("rollout", "adv"), ("adv", "actor_step"), ("actor_step", "checkpoint")],
)"#,
        out_dir.display()
    )
}

fn lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_program_trains_on_its_own_env_and_resumes_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let summary = Run::from_text("corridor.ron", &pipeline(&out, "Corridor"), &[])
        .unwrap()
        .env("Corridor", corridor::build)
        .stop_after(2)
        .on_step(Arc::new(move |report, _| {
            record.lock().unwrap().push(report.step)
        }))
        .execute()
        .unwrap();
    assert_eq!((summary.first_step, summary.steps_done), (0, 2));
    assert_eq!(*seen.lock().unwrap(), [0, 1]);
    let records = lines(&out.join("metrics.jsonl"));
    assert_eq!(records.len(), 2);
    for r in &records {
        let success = r["rollout/success"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&success), "{r:?}");
        assert!(r["actor_step/grad_norm"].as_f64().unwrap().is_finite());
    }
    assert!(records[0]["eval/val/success"].is_number());
    assert!(out.join("checkpoints/step_2/meta.json").is_file());
    assert!(out.join("pipeline.ron").is_file());

    // The rest of the run, resumed from the step-2 checkpoint in this process.
    let resumed = Run::resume(&out, &[])
        .unwrap()
        .env("Corridor", corridor::build)
        .execute()
        .unwrap();
    assert_eq!((resumed.first_step, resumed.steps_done), (2, 2));
    let steps: Vec<u64> = lines(&out.join("metrics.jsonl"))
        .iter()
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [0, 1, 2, 3]);
}

#[test]
fn an_unregistered_custom_env_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let err = Run::from_text("maze.ron", &pipeline(&out, "Maze"), &[])
        .unwrap()
        .execute()
        .unwrap_err();
    let RunError::Refused(message) = err else {
        panic!("refused, not {err:?}");
    };
    assert!(
        message.starts_with("env set `train`: no custom env `Maze` is registered"),
        "{message}"
    );
    assert!(message.contains("Run::env(\"Maze\", factory)"), "{message}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn an_invalid_pipeline_comes_back_as_every_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    let text = pipeline(&dir.path().join("run"), "Corridor").replace("StarPO(", "StarPOO(");
    let Err(RunError::Invalid(diagnostics)) = Run::from_text("bad.ron", &text, &[]) else {
        panic!("an invalid pipeline");
    };
    let shown = diagnostics[0].to_string();
    assert!(shown.contains("bad.ron:"), "{shown}");
    assert!(shown.contains("StarPO"), "did you mean: {shown}");
}

/// The Corridor, except that its third step panics (a bug in a user's env).
struct PanickingCorridor {
    inner: Box<dyn roll_flow::envs::Env>,
    steps: usize,
}

impl roll_flow::envs::Env for PanickingCorridor {
    fn name(&self) -> &'static str {
        "PanickingCorridor"
    }
    fn reset(&mut self, seed: u64) -> Result<roll_flow::envs::env::Reset, EnvError> {
        self.inner.reset(seed)
    }
    fn step(&mut self, action: &str) -> Result<roll_flow::envs::env::StepResult, EnvError> {
        self.steps += 1;
        assert!(self.steps < 3, "the corridor's floor gave way");
        self.inner.step(action)
    }
    fn observation(&self) -> String {
        self.inner.observation()
    }
    fn render_frame(&self) -> Result<roll_flow::envs::render::frame::Frame, EnvError> {
        self.inner.render_frame()
    }
    fn default_max_turns(&self) -> usize {
        self.inner.default_max_turns()
    }
    fn action_names(&self) -> Vec<String> {
        self.inner.action_names()
    }
}

fn panicking(value: &ron::Value) -> Result<Box<dyn roll_flow::envs::Env>, EnvError> {
    Ok(Box::new(PanickingCorridor {
        inner: corridor::build(value)?,
        steps: 0,
    }))
}

#[test]
fn a_panicking_env_stops_the_run_with_an_error_naming_the_node_and_step() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let Err(err) = Run::from_text("corridor.ron", &pipeline(&out, "PanickingCorridor"), &[])
        .unwrap()
        .env("PanickingCorridor", panicking)
        .execute()
    else {
        panic!("a panicking env ran to the end");
    };
    let message = err.to_string();
    assert!(
        message.contains("node `rollout` at step 0")
            && message.contains("the corridor's floor gave way"),
        "{message}"
    );
}
