//! A small catalog for testing the engine alone: its operators record what they saw.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use roll_flow_engine::batch::column::{ADVANTAGES, GROUP_ID, OLD_LOGPROB, SCORE, VALUES};
use roll_flow_engine::spec::{load, Diagnostic, Loaded, Source};
use roll_flow_engine::{
    Batch, Catalog, Column, Contract, Need, NodeSpec, Operator, OperatorError, Pipeline, Reference,
    Role, SettingProblem, StepContext, WorkerInfo,
};
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(rename = "node kind", deny_unknown_fields)]
pub enum TestNode {
    Rollout {
        envs: String,
        #[serde(default = "two")]
        samples: usize,
    },
    LogProb {
        model: String,
    },
    Values {
        model: String,
    },
    GroupAdv {},
    Gae {},
    Train {
        model: String,
    },
    Fail {
        at_step: u64,
        /// Panic instead of returning an error.
        #[serde(default)]
        panics: bool,
    },
    Sink {},
    /// Declares it gives `values` but passes its input on unchanged.
    Liar {},
}

fn two() -> usize {
    2
}

impl NodeSpec for TestNode {
    fn kind(&self) -> &'static str {
        match self {
            TestNode::Rollout { .. } => "Rollout",
            TestNode::LogProb { .. } => "LogProb",
            TestNode::Values { .. } => "Values",
            TestNode::GroupAdv {} => "GroupAdv",
            TestNode::Gae {} => "Gae",
            TestNode::Train { .. } => "Train",
            TestNode::Fail { .. } => "Fail",
            TestNode::Sink {} => "Sink",
            TestNode::Liar {} => "Liar",
        }
    }

    fn contract(&self) -> Contract {
        let c = |needs: Vec<Need>, gives: Vec<Column>| Contract {
            needs,
            gives,
            ..Contract::default()
        };
        match self {
            TestNode::Rollout { .. } => c(vec![], vec![SCORE, GROUP_ID]),
            TestNode::LogProb { .. } => c(vec![], vec![OLD_LOGPROB]),
            TestNode::Values { .. } => c(vec![], vec![VALUES]),
            TestNode::GroupAdv {} => Contract {
                group_normalised: true,
                ..c(vec![Need::column(SCORE)], vec![ADVANTAGES])
            },
            TestNode::Gae {} => c(
                vec![Need::with_hint(
                    VALUES,
                    "Gae needs a critic; add a Values node upstream",
                )],
                vec![ADVANTAGES],
            ),
            TestNode::Train { .. } => c(
                vec![Need::column(ADVANTAGES), Need::column(OLD_LOGPROB)],
                vec![],
            ),
            TestNode::Fail { .. } | TestNode::Sink {} => c(vec![], vec![]),
            TestNode::Liar {} => c(vec![], vec![VALUES]),
        }
    }

    fn role(&self) -> Role {
        match self {
            TestNode::Rollout { .. } => Role::Source,
            TestNode::Train { .. } => Role::PolicyUpdate,
            _ => Role::Transform,
        }
    }

    fn references(&self) -> Vec<Reference> {
        match self {
            TestNode::Rollout { envs, .. } => vec![Reference::Env {
                field: "envs",
                name: envs.clone(),
            }],
            TestNode::LogProb { model }
            | TestNode::Values { model }
            | TestNode::Train { model } => {
                vec![Reference::Model {
                    field: "model",
                    name: model.clone(),
                }]
            }
            _ => vec![],
        }
    }

    fn giver_of(column: &Column) -> Option<String> {
        [
            (OLD_LOGPROB, "a `LogProb` node"),
            (VALUES, "a `Values` node"),
            (ADVANTAGES, "a `GroupAdv` node"),
        ]
        .into_iter()
        .find(|(c, _)| c == column)
        .map(|(_, k)| k.to_string())
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestModel {
    #[serde(default)]
    pub lr: f64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename = "env")]
pub enum TestEnv {
    Coin(),
}

/// One operator call, as the tests see it.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub worker: usize,
    pub workers: usize,
    pub step: u64,
    pub node: String,
    pub policy_version: u64,
    pub seed: u64,
    pub columns: Vec<String>,
}

pub type Trace = Arc<Mutex<Vec<Event>>>;

/// Traces by pipeline name, so tests running in parallel do not mix.
pub fn trace_for(name: &str) -> Trace {
    static TRACES: OnceLock<Mutex<HashMap<String, Trace>>> = OnceLock::new();
    let mut all = TRACES.get_or_init(Default::default).lock().unwrap();
    all.entry(name.to_string()).or_default().clone()
}

#[derive(Clone, Debug)]
pub struct TestCatalog;

impl Catalog for TestCatalog {
    type Node = TestNode;
    type Model = TestModel;
    type Env = TestEnv;
    type Resources = Trace;

    /// `lr` must be >= 0 (reported at `lr`); above 1 it is reported at a `schedule.warmup`
    /// field that no file writes, so the diagnostic falls back to the model entry.
    fn check_model(model: &TestModel, _pipeline: &Pipeline<Self>) -> Vec<SettingProblem> {
        let problem = |field: &[&str], message: &str| SettingProblem {
            field: field.iter().map(|f| f.to_string()).collect(),
            message: message.into(),
            help: Some("lower it".into()),
        };
        if model.lr < 0.0 {
            vec![problem(&["lr"], "`lr` must be >= 0")]
        } else if model.lr > 1.0 {
            vec![problem(
                &["schedule", "warmup"],
                "`lr` above 1 needs a warmup",
            )]
        } else {
            Vec::new()
        }
    }

    fn resources(pipeline: &Pipeline<Self>, _worker: WorkerInfo) -> Result<Trace, String> {
        Ok(trace_for(&pipeline.name))
    }

    fn build(
        name: &str,
        node: &TestNode,
        _p: &Pipeline<Self>,
        trace: &mut Trace,
    ) -> Result<Box<dyn Operator>, String> {
        let (name, node, trace) = (name.to_string(), node.clone(), trace.clone());
        Ok(Box::new(move |ctx: &mut StepContext, batch: Batch| {
            let columns = batch.column_names().map(|(_, n)| n.to_string()).collect();
            trace.lock().unwrap().push(Event {
                worker: ctx.worker,
                workers: ctx.workers,
                step: ctx.step,
                node: name.clone(),
                policy_version: ctx.policy_version,
                seed: ctx.seed,
                columns,
            });
            process(&node, ctx, batch)
        }))
    }
}

fn process(node: &TestNode, ctx: &mut StepContext, batch: Batch) -> Result<Batch, OperatorError> {
    let per_token = |b: &Batch, k: f32| {
        b.tokens()
            .iter()
            .map(|&t| t as f32 * k)
            .collect::<Vec<f32>>()
    };
    Ok(match node {
        TestNode::Rollout { samples, .. } => {
            let seqs =
                (0..*samples).map(|i| vec![ctx.step as u32, ctx.policy_version as u32, i as u32]);
            let b = Batch::from_sequences(seqs);
            let scores: Vec<f32> = (0..*samples)
                .map(|i| (ctx.seed % 7) as f32 + i as f32)
                .collect();
            b.with(&SCORE, scores)?
                .with(&GROUP_ID, vec![0u64; *samples])?
        }
        TestNode::LogProb { .. } => {
            let v = per_token(&batch, 0.5);
            batch.with(&OLD_LOGPROB, v)?
        }
        TestNode::Values { .. } => {
            let v = per_token(&batch, 0.25);
            batch.with(&VALUES, v)?
        }
        TestNode::GroupAdv {} | TestNode::Gae {} => {
            let v = per_token(&batch, 1.0);
            batch.with(&ADVANTAGES, v)?
        }
        TestNode::Train { .. } => {
            ctx.metrics.insert(
                "loss".into(),
                batch.f32s(&ADVANTAGES)?.iter().map(|&a| f64::from(a)).sum(),
            );
            batch
        }
        TestNode::Fail { at_step, panics } if ctx.step == *at_step => {
            if *panics {
                panic!("deliberate panic at step {at_step}");
            }
            return Err(OperatorError(format!(
                "deliberate failure at step {at_step}"
            )));
        }
        TestNode::Fail { .. } | TestNode::Sink {} | TestNode::Liar {} => batch,
    })
}

/// Loads pipeline text through a temp file, as the CLI does.
/// A valid pipeline of the test catalog's nodes, which tests edit into invalid ones.
pub const VALID: &str = r#"Pipeline(
    name: "valid", steps: 2, out_dir: "unused",
    models: { "policy": () },
    envs: { "train": (env: Coin(), groups: 2, group_size: 4) },
    nodes: {
        "rollout": Rollout(envs: "train"),
        "old_logprob": LogProb(model: "policy"),
        "adv": GroupAdv(),
        "train": Train(model: "policy"),
    },
    edges: [("rollout", "old_logprob"), ("old_logprob", "adv"), ("adv", "train")],
)"#;

pub fn load_text(text: &str) -> Result<Loaded<TestCatalog>, Vec<Diagnostic>> {
    let dir = std::env::temp_dir().join(format!("roll-flow-engine-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{:x}.ron", fxhash(text)));
    std::fs::write(&path, text).unwrap();
    load::<TestCatalog>(&path, &[])
}

/// Parses text directly (no file).
pub fn loaded(text: &str) -> Loaded<TestCatalog> {
    let path = Path::new("test.ron");
    let pipeline =
        roll_flow_engine::spec::parse::<TestCatalog>(path, text).unwrap_or_else(|d| panic!("{d}"));
    Loaded {
        pipeline,
        source: Source {
            path: path.to_path_buf(),
            text: text.to_string(),
        },
    }
}

fn fxhash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
