//! Which keys a query may read: the one visibility rule of the dense and the banded
//! attention masks (`mask_value`), and of prefix-grouped rows (`row_mask_value`).

use super::prefix_branches::PrefixBranches;

/// Added to the scores of forbidden keys (transformers uses `finfo(float32).min`).
pub(super) const MASKED: f32 = -1.0e30;

/// The additive mask value of key column `key` for a query whose own column is `own`, in a
/// row whose keys start at column `first`: 0 when the key is the row's, not after the
/// query, and fewer than `window` columns back; [`MASKED`] otherwise. The one visibility
/// rule of the dense and the banded masks.
pub(super) fn mask_value(own: isize, key: isize, first: isize, window: usize) -> f32 {
    let back = own - key;
    if key >= first && back >= 0 && (back as usize) < window {
        0.0
    } else {
        MASKED
    }
}

/// [`mask_value`] for a query at column `own` and key column `key` of a row starting at
/// column `first`, in a prefix-grouped row (`branches`) also [`MASKED`] where the key lies
/// in another branch ([`PrefixBranches::sees`]).
pub(super) fn row_mask_value(
    (own, key): (usize, usize),
    first: usize,
    window: usize,
    branches: Option<&PrefixBranches>,
) -> f32 {
    match branches {
        Some(b) if !b.sees(own, key) => MASKED,
        _ => mask_value(own as isize, key as isize, first as isize, window),
    }
}
