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
