//! Picking the backend a pipeline's `device:` names, among those this build has.

use std::sync::Arc;

use roll_flow_engine::executor::StepCallback;
use roll_flow_engine::spec::Device;
use roll_flow_engine::{execute, ExecError, ExecutorOptions, Pipeline, PipelineGraph};
use roll_flow_model::CpuBackend;

use crate::catalog::RollFlow;
use crate::runtime::backend::RunBackend;

/// Why this build cannot run on `device`, when it was built without its backend.
pub fn missing_backend(device: Device) -> Option<String> {
    let (feature, built) = match device {
        Device::Cpu => return None,
        Device::Wgpu => ("wgpu", cfg!(feature = "wgpu")),
        Device::Cuda(_) => ("cuda", cfg!(feature = "cuda")),
    };
    (!built).then(|| {
        format!(
            "the pipeline asks for `device: {device:?}`, but this roll-flow was built without the `{feature}` feature; \
             rebuild with `cargo build --release --features {feature}`, or run with `--set device=Cpu`"
        )
    })
}

/// Runs the pipeline's graph on the backend its `device:` names (`missing_backend` has
/// already refused one this build lacks), with f32 products in TF32 where it says
/// `tf32: true` and the device has them.
pub fn execute_on_device(
    pipeline: Pipeline<RollFlow>,
    graph: Arc<PipelineGraph>,
    options: ExecutorOptions,
    on_step: StepCallback,
) -> Result<(), ExecError> {
    fn on<B: RunBackend>(
        pipeline: Pipeline<RollFlow>,
        graph: Arc<PipelineGraph>,
        options: ExecutorOptions,
        on_step: StepCallback,
    ) -> Result<(), ExecError> {
        let pipeline = Arc::new(pipeline.recast::<RollFlow<B>>());
        execute::<RollFlow<B>>(pipeline, graph, options, on_step)
    }
    roll_flow_kernels::allow_tf32(pipeline.tf32);
    match pipeline.device {
        #[cfg(feature = "wgpu")]
        Device::Wgpu => {
            on::<crate::runtime::backend::WgpuBackend>(pipeline, graph, options, on_step)
        }
        #[cfg(feature = "cuda")]
        Device::Cuda(_) => {
            on::<crate::runtime::backend::CudaBackend>(pipeline, graph, options, on_step)
        }
        _ => on::<CpuBackend>(pipeline, graph, options, on_step),
    }
}
