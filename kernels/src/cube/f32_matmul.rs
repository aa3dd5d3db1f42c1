//! The f32 matrix product on devices with TF32 tensor cores (CUDA from Ampere on). There
//! burn's matmul multiplies f32 in TF32 (cubek-matmul's `adjust_dtypes` picks TF32 stages
//! whenever the device has them, as PyTorch with `allow_tf32`), which moved a Qwen2
//! fixture's logits 0.02-0.04 from transformers' on an H100 and a PPO critic's values by
//! 1.5e-3 relative from the CPU's. [`f32_matmul`] launches cubek's unit matmul instead
//! (each unit a register tile of f32 products on the CUDA cores): PyTorch's default
//! precision. Devices without TF32 and runs that allow TF32 (`crate::tf32`) keep burn's
//! matmul; bf16 and f16 take the routine `crate::half_matmul` names.

use burn::tensor::DType;
use burn_cubecl::kernel::matmul::init_matmul_output;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;

/// Whether burn's matmul would multiply f32 in TF32 on this device.
pub(super) fn has_tf32<R: CubeRuntime>(client: &ComputeClient<R>) -> bool {
    client
        .properties()
        .supports_type(cubecl::prelude::tf32::as_type_native_unchecked().storage_type())
}

/// `lhs · rhs` in f32 with cubek's unit matmul (Naive where the unit one cannot be set up
/// for the shapes).
pub(super) fn f32_matmul<R: CubeRuntime>(lhs: CubeTensor<R>, rhs: CubeTensor<R>) -> CubeTensor<R> {
    use cubek::matmul::definition::{MatmulElems, MatmulGlobalElems};
    use cubek::matmul::launch::{launch_ref, Strategy};
    use cubek::matmul::routines::BlueprintStrategy;
    use cubek::std::InputBinding;
    let out = init_matmul_output(&lhs, &rhs, DType::F32);
    let client = out.client.clone();
    let f32_type: StorageType = DType::F32.into();
    let launch = |strategy: &Strategy| {
        let mut dtypes = MatmulElems::from_globals(&MatmulGlobalElems {
            lhs: f32_type,
            rhs: f32_type,
            out: f32_type,
        });
        launch_ref(
            strategy,
            &client,
            InputBinding::new(lhs.clone().binding(), f32_type),
            InputBinding::new(rhs.clone().binding(), f32_type),
            out.clone().binding(),
            &mut dtypes,
        )
    };
    let unit = Strategy::SimpleUnit(BlueprintStrategy::Inferred(Default::default()));
    if let Err(unit_error) = launch(&unit) {
        launch(&Strategy::Naive).unwrap_or_else(|naive_error| {
            panic!("f32 matmul: the unit matmul ({unit_error:?}) and the naive one ({naive_error:?}) refused the shapes")
        });
    }
    out
}

/// The f32 matmul runs only where TF32 exists (CUDA), so it is checked here on wgpu
/// directly, against burn's matmul on the same device (lavapipe multiplies f32 exactly).
#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use burn::backend::wgpu::{CubeBackend, WgpuDevice, WgpuRuntime};
    use burn::tensor::{Distribution, Tensor};

    type W = CubeBackend<WgpuRuntime, f32, i32, u32>;

    #[test]
    fn the_f32_matmul_matches_burns_on_a_device_without_tf32() {
        let device = WgpuDevice::default();
        let lhs = Tensor::<W, 4>::random([2, 3, 33, 40], Distribution::Normal(0.0, 1.0), &device);
        let rhs = Tensor::<W, 4>::random([2, 3, 17, 40], Distribution::Normal(0.0, 1.0), &device)
            .swap_dims(2, 3);
        let want = lhs
            .clone()
            .matmul(rhs.clone())
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let got = super::f32_matmul(lhs.into_primitive().tensor(), rhs.into_primitive().tensor());
        let got = Tensor::<W, 4>::from_primitive(burn::tensor::TensorPrimitive::Float(got))
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "[{i}]: {g} vs {w}");
        }
    }
}
