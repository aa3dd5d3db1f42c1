//! The backends a run trains and generates on, chosen by the pipeline's `device:`.
//!
//! Every operator is generic over [`RunBackend`]: the CPU (`Flex`, the default build), and
//! with the `wgpu` or `cuda` feature burn's CubeCL backends, whose fused kernels
//! (log-prob + entropy, GAE, PPO loss) are `roll-flow-kernels`' CubeCL ones. The binary
//! picks the backend once, from `device:`, and runs the same graph of operators on it
//! (burn's habit: one generic code path, the backend a type parameter). Training runs on
//! `Autodiff<B>`, generation on `B`.

use burn::backend::{Autodiff, Flex};
use roll_flow_engine::spec::Device;
use roll_flow_kernels::KernelBackend;

/// The backend models train on: autodiff over the run's backend (the CPU by default).
pub type TrainBackend<B = Flex> = Autodiff<B>;
/// The backend of the inference copy that generates.
pub type InferBackend<B = Flex> = B;

/// A backend the operators run on: the fused kernels, plus the burn device a pipeline's
/// `device:` names on it.
pub trait RunBackend: KernelBackend {
    /// Whether independent passes (the micro-batches of a training step, the chunks of a
    /// scoring) run at once, one per rayon thread
    /// ([`super::concurrent::in_order`]). On the CPU they do: a pass splits only its
    /// matrix products over threads, so two passes keep two cores busy. On a GPU they do
    /// not: one pass's kernels already fill the device, and passes at once would each hold
    /// their activations in its memory (16 concurrent micro-batches at the Qwen2.5-0.5B
    /// shape, one per core of the host, ran an H100's 80 GB out; bench/history/gpu.md).
    const CONCURRENT_PASSES: bool;

    /// The device `device` names, or why this backend cannot serve it.
    fn device_for(device: Device) -> Result<Self::Device, String>;
}

impl RunBackend for Flex {
    const CONCURRENT_PASSES: bool = true;

    fn device_for(device: Device) -> Result<Self::Device, String> {
        match device {
            Device::Cpu => Ok(Default::default()),
            other => Err(wrong_backend(other, "CPU")),
        }
    }
}

/// burn's wgpu backend (CubeCL over Vulkan, Metal or DX12) without fusion, the type the
/// kernels are implemented for.
#[cfg(feature = "wgpu")]
pub type WgpuBackend =
    burn::backend::wgpu::CubeBackend<burn::backend::wgpu::WgpuRuntime, f32, i32, u32>;

#[cfg(feature = "wgpu")]
impl RunBackend for WgpuBackend {
    const CONCURRENT_PASSES: bool = false;

    fn device_for(device: Device) -> Result<Self::Device, String> {
        match device {
            Device::Wgpu => Ok(burn::backend::wgpu::WgpuDevice::default()),
            other => Err(wrong_backend(other, "wgpu")),
        }
    }
}

/// burn's CUDA backend (CubeCL; cudarc loads the driver at run time).
#[cfg(feature = "cuda")]
pub type CudaBackend = burn::backend::Cuda;

#[cfg(feature = "cuda")]
impl RunBackend for CudaBackend {
    const CONCURRENT_PASSES: bool = false;

    fn device_for(device: Device) -> Result<Self::Device, String> {
        match device {
            Device::Cuda(index) => Ok(burn::backend::cuda::CudaDevice { index }),
            other => Err(wrong_backend(other, "CUDA")),
        }
    }
}

fn wrong_backend(device: Device, backend: &str) -> String {
    format!("`device: {device:?}` cannot run on the {backend} backend")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_backend_serves_only_the_cpu_device() {
        assert!(Flex::device_for(Device::Cpu).is_ok());
        let err = Flex::device_for(Device::Cuda(1)).unwrap_err();
        assert_eq!(err, "`device: Cuda(1)` cannot run on the CPU backend");
        assert!(Flex::device_for(Device::Wgpu).is_err());
    }
}
