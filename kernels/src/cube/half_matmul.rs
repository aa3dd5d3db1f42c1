//! The half-precision product with the cubek routine [`crate::half_matmul`] names.
//!
//! A routine that refuses a product refuses it again for the same device, dtype, operand
//! shapes, strides and start alignment (its setup checks those and the device's features,
//! nothing else), so each refusal is remembered, and the same product after it goes to the
//! fallback at once instead of setting the routine up again: on a GPU without Hopper's
//! tensor memory accelerator every product was refused afresh by the default routine, on
//! wgpu by both (bench/history/gpu.md, run 7's notes).

use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;
use cubek::matmul::components::tile::TileMatmulKind::{Cmma, Mma};
use cubek::matmul::definition::{MatmulElems, MatmulGlobalElems};
use cubek::matmul::launch::{launch_ref, Strategy};
use cubek::matmul::routines::double_buffering::DoubleBufferingArgs;
use cubek::matmul::routines::ordered_double_buffering::OrderedSelectionArgs;
use cubek::matmul::routines::simple::SimpleArgs;
use cubek::matmul::routines::BlueprintStrategy::Inferred;

use std::any::TypeId;
use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use burn::tensor::DType;
use cubecl::device::Device;

use crate::half_matmul::HalfMatmul;

/// What decides whether a routine takes a product: the runtime and device, the routine,
/// the dtype, each operand's shape and strides, and where each starts modulo 256 bytes.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Setup {
    runtime: TypeId,
    device: (u16, u16),
    routine: HalfMatmul,
    dtype: DType,
    operands: [(Vec<usize>, Vec<usize>, u64); 2],
}

/// Routines' refusals so far, in this process.
static REFUSED: Mutex<Option<HashSet<Setup>>> = Mutex::new(None);

impl Setup {
    fn of<R: CubeRuntime>(routine: HalfMatmul, lhs: &CubeTensor<R>, rhs: &CubeTensor<R>) -> Self {
        let operand = |t: &CubeTensor<R>| {
            (
                t.meta.shape().to_vec(),
                t.meta.strides().to_vec(),
                t.handle.offset_start.unwrap_or(0) % 256,
            )
        };
        let id = lhs.device.to_id();
        Setup {
            runtime: TypeId::of::<R>(),
            device: (id.type_id, id.index_id),
            routine,
            dtype: lhs.dtype,
            operands: [operand(lhs), operand(rhs)],
        }
    }

    fn refused_before(&self) -> bool {
        let refused = REFUSED.lock().unwrap_or_else(PoisonError::into_inner);
        refused.as_ref().is_some_and(|r| r.contains(self))
    }

    fn remember_refusal(self) {
        let mut refused = REFUSED.lock().unwrap_or_else(PoisonError::into_inner);
        refused.get_or_insert_with(HashSet::new).insert(self);
    }
}

/// cubek's strategy for `choice` (`None` for burn's own).
fn strategy(choice: HalfMatmul) -> Option<Strategy> {
    let double = |specialized, tile_matmul| DoubleBufferingArgs {
        specialized,
        tile_matmul,
    };
    Some(match choice {
        HalfMatmul::Burn => return None,
        HalfMatmul::SimpleMultiRowsMma => Strategy::SimpleCyclicMma(Inferred(SimpleArgs {
            multi_rows: true,
            tile_matmul: Mma,
        })),
        HalfMatmul::DoubleCyclicCmma => Strategy::DoubleCyclicCmma(Inferred(double(false, Cmma))),
        HalfMatmul::DoubleCyclicMma => Strategy::DoubleCyclicMma(Inferred(double(false, Mma))),
        HalfMatmul::DoubleSpecializedMma => Strategy::DoubleCyclicMma(Inferred(double(true, Mma))),
        HalfMatmul::OrderedDoubleMma => {
            Strategy::OrderedDoubleMma(Inferred(OrderedSelectionArgs {
                partition_k: Some(2),
                row_count: Some(4),
                rows_per_plane: Some(2),
                tile_matmul: Mma,
            }))
        }
        HalfMatmul::SimpleTmaMma => Strategy::SimpleTmaMma(Inferred(SimpleArgs {
            multi_rows: false,
            tile_matmul: Mma,
        })),
        HalfMatmul::SpecializedTmaMma => Strategy::SpecializedTmaMma(Inferred(().into())),
    })
}

/// `lhs · rhs` (both of one half-precision dtype) with `choice`'s routine, in that dtype;
/// where it refuses the shapes or the device, now or before ([`crate::half_matmul_refusals`]
/// counts it each time), with [`HalfMatmul::DoubleCyclicMma`]'s; `None` when the choice is
/// burn's or both refuse (then burn's matmul runs it).
pub(super) fn half_matmul<R: CubeRuntime>(
    choice: HalfMatmul,
    lhs: &CubeTensor<R>,
    rhs: &CubeTensor<R>,
) -> Option<CubeTensor<R>> {
    if choice == HalfMatmul::Burn {
        return None;
    }
    let fallback = (choice != HalfMatmul::DoubleCyclicMma).then_some(HalfMatmul::DoubleCyclicMma);
    [Some(choice), fallback]
        .into_iter()
        .flatten()
        .find_map(|choice| {
            let setup = Setup::of(choice, lhs, rhs);
            if setup.refused_before() {
                crate::half_matmul::count_refusal();
                return None;
            }
            let out = launch(&strategy(choice)?, lhs, rhs);
            if out.is_none() {
                setup.remember_refusal();
            }
            out
        })
}

/// One launch of `strategy`; `None` (counted) when it refuses.
fn launch<R: CubeRuntime>(
    strategy: &Strategy,
    lhs: &CubeTensor<R>,
    rhs: &CubeTensor<R>,
) -> Option<CubeTensor<R>> {
    // Compact rows, not the padded ones burn's output would have: at the model's width
    // (896 bf16, 1,792 bytes, padded to 2,048) an op after the product that wants
    // contiguous rows copies them first (run 7's profile counted 466 copies in a training
    // step; how many came from padded rows is for the next lend to measure).
    let shape = cubecl::zspace::calculate_matmul_output(lhs.meta.shape(), rhs.meta.shape())
        .expect("the product's shapes were checked");
    let out =
        empty_device_contiguous_dtype(lhs.client.clone(), lhs.device.clone(), shape, lhs.dtype);
    let dtype: StorageType = lhs.dtype.into();
    let mut dtypes = MatmulElems::from_globals(&MatmulGlobalElems {
        lhs: dtype,
        rhs: dtype,
        out: dtype,
    });
    let launched = launch_ref(
        strategy,
        &out.client,
        cubek::std::InputBinding::new(lhs.clone().binding(), dtype),
        cubek::std::InputBinding::new(rhs.clone().binding(), dtype),
        out.clone().binding(),
        &mut dtypes,
    );
    match launched {
        Ok(()) => Some(out),
        Err(_) => {
            crate::half_matmul::count_refusal();
            None
        }
    }
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use burn::backend::wgpu::{CubeBackend, WgpuDevice, WgpuRuntime};
    use burn::tensor::{DType, Distribution, Tensor};
    use burn_cubecl::tensor::CubeTensor;

    // The module's own items by their full path (`super::*` reads as the parent module's
    // to tools/module_cycles.py).
    use crate::cube::half_matmul::{half_matmul, Setup};
    use crate::half_matmul::HalfMatmul;

    type B = CubeBackend<WgpuRuntime, f32, i32, u32>;

    /// On wgpu (lavapipe in CI, no tensor cores) both routines refuse an f16 product: each
    /// refusal is remembered for that product's setup and for no other, and the product,
    /// run again, is refused without a new setup (then burn's matmul runs it).
    #[test]
    fn a_refused_setup_is_remembered() {
        let device = WgpuDevice::default();
        let operand = |shape: [usize; 2]| {
            Tensor::<B, 2>::random(shape, Distribution::Default, &device)
                .cast(DType::F16)
                .into_primitive()
                .tensor()
        };
        // A shape no other test multiplies, so the memo starts without it.
        let (lhs, rhs) = (operand([37, 53]), operand([53, 29]));
        let other = operand([53, 31]);
        let setup = |routine, rhs: &CubeTensor<WgpuRuntime>| Setup::of(routine, &lhs, rhs);
        let routines = [HalfMatmul::SimpleTmaMma, HalfMatmul::DoubleCyclicMma];
        assert!(routines.iter().all(|&r| !setup(r, &rhs).refused_before()));
        if half_matmul(HalfMatmul::SimpleTmaMma, &lhs, &rhs).is_some() {
            println!("this wgpu device takes the routine: nothing refused to remember");
            return;
        }
        assert!(routines.iter().all(|&r| setup(r, &rhs).refused_before()));
        assert!(routines.iter().all(|&r| !setup(r, &other).refused_before()));
        assert!(half_matmul(HalfMatmul::SimpleTmaMma, &lhs, &rhs).is_none());
    }
}
