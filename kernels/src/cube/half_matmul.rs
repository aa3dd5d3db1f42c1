//! The half-precision product with the cubek routine [`crate::half_matmul`] names.

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

use crate::half_matmul::HalfMatmul;

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
/// where it refuses the shapes or the device ([`crate::half_matmul_refusals`] counts it),
/// with [`HalfMatmul::DoubleCyclicMma`]'s; `None` when the choice is burn's or both refuse
/// (then burn's matmul runs it).
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
        .find_map(|choice| launch(&strategy(choice)?, lhs, rhs))
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
