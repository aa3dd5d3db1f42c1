//! The sum and the max of one value per unit over a cube, the reductions the row kernels
//! share: one tree in shared memory, `log2(units)` steps.

use cubecl::prelude::*;

/// Σ of `value` over the cube's units, returned to every unit: a tree in `shared` (one
/// slot per unit; `CUBE_DIM_X` a power of two), `log2(units)` steps, each unit adding the
/// slot `stride` above its own. The order of the additions depends only on the cube size,
/// so a row's sum is the same on every run. `shared` may be reused after the call.
#[cube]
pub(crate) fn cube_sum<A: Float>(shared: &mut SharedMemory<A>, value: A) -> A {
    cube_tree(shared, value, false)
}

/// The max of `value` over the cube's units, returned to every unit: the same tree as
/// [`cube_sum`] (a max is exact, so its order changes nothing). Replaces a scan in which
/// every unit read every slot (256 reads a unit at 256 units).
#[cube]
pub(crate) fn cube_max<A: Float>(shared: &mut SharedMemory<A>, value: A) -> A {
    cube_tree(shared, value, true)
}

/// The tree of [`cube_sum`], taking the max instead with `max`.
#[cube]
fn cube_tree<A: Float>(shared: &mut SharedMemory<A>, value: A, #[comptime] max: bool) -> A {
    let u = UNIT_POS_X as usize;
    shared[u] = value;
    sync_cube();
    let mut stride = CUBE_DIM_X as usize / 2;
    while stride > 0 {
        if u < stride {
            let other = shared[u + stride];
            if max {
                shared[u] = A::max(shared[u], other);
            } else {
                shared[u] += other;
            }
        }
        sync_cube();
        stride /= 2;
    }
    let total = shared[0];
    sync_cube();
    total
}
