//! The register-tile kernel interface of [`super::ordered_product`], in a module of its
//! own so that the driver and the x86 tiles (`super::ordered_product_x86`) both import it
//! and not each other.

/// A tile's rows of `a`: value (i, p), row i and inner index p, at `at[i·row + p·step]`.
/// A packed panel (`row` 1, `step` MR) at a product's row edge, else a's own storage at its
/// strides: whole row panels are read where they lie, not copied first.
#[derive(Clone, Copy)]
pub(super) struct Rows {
    pub(super) at: *const f32,
    pub(super) row: usize,
    pub(super) step: usize,
}

/// A tile's columns of `b`: `NR` (or `width`) consecutive values per inner index, inner
/// index p's at `at[p·step]`: a packed panel (`step` NR) at a product's column edge or when
/// b is transposed, else b's own rows (`step` its row stride).
#[derive(Clone, Copy)]
pub(super) struct Columns {
    pub(super) at: *const f32,
    pub(super) step: usize,
}

/// A register-tile kernel: `MR × NR` outputs from rows of `a` and a packed panel of `b`.
pub(super) trait Kernel {
    /// Rows of a tile (values per inner index in a packed `a` panel).
    const MR: usize;
    /// Columns of a tile (values per inner index in a packed `b` panel).
    const NR: usize;
    /// Inner-axis block: a `KC × NR` panel of `b` stays in L1 while every row panel reads it.
    const KC: usize;
    /// Rows of `a` a block covers at once (a multiple of `MR`; their `MC × KC` values stay
    /// in L2 while every column panel reads them).
    const MC: usize;
    /// Columns of `b` a chunk covers at once (a multiple of `NR`): its `KC × NC` packed
    /// block stays in L2 while every row block reads it, and the chunk's outputs stay
    /// cached across the inner blocks (a 49,152-wide head's would not).
    const NC: usize = 960;

    /// The tile at `dst` (row stride `stride`, all `MR × NR` values writable) :=
    /// chain over `kc` inner indices of `a` (`MR` rows) and `b` (`NR` columns), starting from
    /// dst's values when `load`, from 0 otherwise.
    ///
    /// # Safety
    /// The instruction set the kernel is compiled for must be available; the pointers hold
    /// what is described.
    unsafe fn tile(kc: usize, a: Rows, b: Columns, dst: *mut f32, stride: usize, load: bool);

    /// A packed panel row from a contiguous run: `row[..live]` := `live` values from
    /// `from`, the rest of `row` zero.
    ///
    /// # Safety
    /// `from` must be valid for `live` reads, `live <= row.len()`.
    #[inline(always)]
    unsafe fn copy_padded(row: &mut [f32], from: *const f32, live: usize) {
        // SAFETY: as the caller guarantees.
        unsafe { copy_padded_elements(row, from, live) }
    }

    /// A packed panel across strided lines (a row-major `a`'s rows, a transposed `b`'s
    /// columns): `panel[p · width + i]` := `from[i · line + p · step]` for `i < live` and
    /// `p < kc`, the rest of each panel row zero.
    ///
    /// # Safety
    /// `from` must be valid for those reads, `live <= width`, `panel.len() >= kc · width`.
    #[inline(always)]
    unsafe fn pack_lines(
        panel: &mut [f32],
        width: usize,
        from: *const f32,
        (line, step): (usize, usize),
        (live, kc): (usize, usize),
    ) {
        // SAFETY: as the caller guarantees.
        unsafe { pack_lines_elements(panel, width, from, (line, step), (live, kc)) }
    }

    /// Column granularity of [`Kernel::tile_width`]: the vector width.
    const LANES: usize = Self::NR;

    /// [`Kernel::tile`] for the first `width` columns only (a multiple of
    /// [`Kernel::LANES`], at most `NR`; `b`'s panel keeps its `NR` stride): a product's
    /// column edge without computing padding. Each output's chain is the one the full tile
    /// gives it, so the width changes no bit.
    ///
    /// # Safety
    /// As [`Kernel::tile`], for `MR × width` values at `dst`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile_width(
        kc: usize,
        a: Rows,
        b: Columns,
        dst: *mut f32,
        stride: usize,
        load: bool,
        width: usize,
    ) {
        debug_assert_eq!(width, Self::NR, "a kernel without narrower tiles");
        // SAFETY: as the caller guarantees.
        unsafe { Self::tile(kc, a, b, dst, stride, load) }
    }
}

/// [`Kernel::copy_padded`] value by value. A whole row copies in a loop of the kernel's
/// constant length (inlined, vectorised), not through a `memcpy` call per panel row.
///
/// # Safety
/// As [`Kernel::copy_padded`].
#[inline(always)]
pub(super) unsafe fn copy_padded_elements(row: &mut [f32], from: *const f32, live: usize) {
    if live == row.len() {
        for (i, value) in row.iter_mut().enumerate() {
            // SAFETY: i < live.
            *value = unsafe { *from.add(i) };
        }
    } else {
        for (i, value) in row[..live].iter_mut().enumerate() {
            // SAFETY: i < live.
            *value = unsafe { *from.add(i) };
        }
        row[live..].fill(0.0);
    }
}

/// [`Kernel::pack_lines`] value by value.
///
/// # Safety
/// As [`Kernel::pack_lines`].
#[inline(always)]
pub(super) unsafe fn pack_lines_elements(
    panel: &mut [f32],
    width: usize,
    from: *const f32,
    (line, step): (usize, usize),
    (live, kc): (usize, usize),
) {
    for (p, row) in panel.chunks_exact_mut(width).take(kc).enumerate() {
        for (i, value) in row[..live].iter_mut().enumerate() {
            // SAFETY: i < live, p < kc.
            *value = unsafe { *from.add(i * line + p * step) };
        }
        row[live..].fill(0.0);
    }
}
