//! The item a cube works on when a kernel launches one cube per row or sequence over the
//! (x, y) grid of `grid` (in `mod.rs`); cubes past the last item stop at once.

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
