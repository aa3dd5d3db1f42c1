//! The real catalog: roll-flow's node kinds (the registry), model specs and env configs,
//! with operators that run on backend `B`.
//!
//! Reading, validating and drawing a pipeline only need the dialect, so they use
//! `RollFlow` (the CPU backend, the default type parameter). Running picks the backend from
//! the pipeline's `device:` and executes `Pipeline::recast::<RollFlow<B>>()` of the same
//! file.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use roll_flow_engine::batch_dump::DumpInput;
use roll_flow_engine::spec::Device;
use roll_flow_engine::{Catalog, Operator, Pipeline, SettingProblem, WorkerInfo};
use roll_flow_envs::config::EnvConfig;
use roll_flow_model::spec::{ModelSpec, Precision};
use roll_flow_model::CpuBackend;

use crate::registry::{run_plan, Node};
use crate::runtime::backend::RunBackend;
use crate::runtime::resources::Runtime;

/// The pipeline dialect `roll-flow` reads (`Pipeline<RollFlow>`), with operators on
/// backend `B`.
pub struct RollFlow<B: RunBackend = CpuBackend>(PhantomData<fn() -> B>);

impl<B: RunBackend> Clone for RollFlow<B> {
    fn clone(&self) -> Self {
        RollFlow(PhantomData)
    }
}

impl<B: RunBackend> fmt::Debug for RollFlow<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RollFlow")
    }
}

impl<B: RunBackend> Catalog for RollFlow<B> {
    type Node = Node;
    type Model = ModelSpec;
    type Env = EnvConfig;
    type Resources = Runtime<B>;

    fn check_model(model: &ModelSpec, pipeline: &Pipeline<Self>) -> Vec<SettingProblem> {
        let mut problems = model.setting_problems(pipeline.steps);
        if model.precision != Precision::F32 && pipeline.device == Device::Cpu {
            problems.push(SettingProblem {
                field: vec!["precision".into()],
                message: format!(
                    "`precision: {:?}` computes in half precision on a GPU, and this pipeline \
                     runs on `device: Cpu`",
                    model.precision
                ),
                help: Some(
                    "use `precision: F32` (the default) on the CPU, or `device: Cuda(0)` \
                     (`Wgpu` for F16) with a build that has it"
                        .into(),
                ),
            });
        }
        problems
    }

    fn check_env(env: &EnvConfig) -> Vec<SettingProblem> {
        env.setting_problems()
    }

    fn resources(pipeline: &Pipeline<Self>, worker: WorkerInfo) -> Result<Runtime<B>, String> {
        Runtime::new(Arc::new(run_plan(pipeline)), worker)
    }

    fn build(
        name: &str,
        node: &Node,
        _pipeline: &Pipeline<Self>,
        runtime: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String> {
        let operator = node.build(name, runtime)?;
        match &runtime.run.dump_dir {
            Some(dir) if node.trains() => Ok(Box::new(DumpInput {
                inner: operator,
                dir: dir.clone(),
                node: name.to_string(),
            })),
            _ => Ok(operator),
        }
    }
}
