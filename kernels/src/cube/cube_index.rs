//! What a cube and each of its units work on: the item (row or sequence) of a kernel that
//! launches one cube per item over the (x, y) grid of `grid` (in `mod.rs`), cubes past
//! the last item stopping at once; and a unit's contiguous chunk of that item.

use cubecl::prelude::*;

/// This cube's item, `CUBE_POS_Y · CUBE_COUNT_X + CUBE_POS_X`; terminates the cube when it
/// is not below `items`.
#[cube]
pub(crate) fn cube_index(items: u32) -> usize {
    let item = CUBE_POS_Y * CUBE_COUNT_X + CUBE_POS_X;
    if item >= items {
        terminate!();
    }
    item as usize
}

/// Unit `UNIT_POS_X`'s part `[lo, hi)` of `[start, end)`.
#[derive(CubeType)]
pub(crate) struct UnitChunk {
    pub lo: usize,
    pub hi: usize,
}

/// Contiguous chunks of ⌈(end − start) / units⌉ in unit order (the last ones short or
/// empty), so a unit's chunk follows the chunks of the units before it.
#[cube]
#[allow(clippy::manual_div_ceil)] // no `div_ceil` in `#[cube]` code
pub(crate) fn unit_chunk(start: usize, end: usize, #[comptime] units: u32) -> UnitChunk {
    let n = units as usize;
    let chunk = (end - start + n - 1) / n;
    let mut lo = start + UNIT_POS_X as usize * chunk;
    if lo > end {
        lo = end;
    }
    let mut hi = lo + chunk;
    if hi > end {
        hi = end;
    }
    UnitChunk { lo, hi }
}

/// This unit's element of a one-unit-per-element launch (`grid` over ⌈n / units⌉ cubes);
/// terminates the unit when it is not below `n`.
#[cube]
pub(crate) fn element_index(n: usize) -> usize {
    let cube = (CUBE_POS_Y * CUBE_COUNT_X + CUBE_POS_X) as usize;
    let i = cube * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    if i >= n {
        terminate!();
    }
    i
}

/// Where row `row` of `t` starts, the rows being `t`'s last axis in row-major order of the
/// leading axes: the row index split over the leading axes' sizes, each part times its
/// stride. So a strided view (an expanded mask, whose broadcast axes have stride 0) is read
/// in place, without a copy.
#[cube]
pub(crate) fn row_offset<F: Numeric>(t: &Tensor<F>, row: usize) -> usize {
    let mut rest = row;
    let mut offset = 0usize;
    let mut axis = t.rank() - 1;
    while axis > 0 {
        axis -= 1;
        let size = t.shape(axis);
        offset += (rest % size) * t.stride(axis);
        rest /= size;
    }
    offset
}
