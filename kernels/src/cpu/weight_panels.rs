//! A dense layer's weight packed once into the column panels that the few-rows kernel
//! reads, for the many products a generation runs against the same weights.
//!
//! The few-rows kernel (`few_rows_avx512::broadcast_form`) multiplies a decode step's rows
//! (one per running sequence) by W `[inner, cols]` in tiles of 48 columns, and for each
//! tile reads a 48-column panel of W along the inner axis. In burn's row-major layout the
//! panel's rows lie a whole W row apart (8 KB at 2,048 columns: a new page per inner
//! index), so without this the kernel copies each panel into a contiguous scratch panel on
//! every call: 37% of its samples in a profile of the `medium` model's generation
//! (`bench/model_throughput.rs`, 2026-11-27), spent waiting on W's scattered rows. Packed
//! here once, panel after panel, a decode step streams W in order.
//!
//! Layout: panel `p` (columns `48p .. 48p + 48`) is `inner × 48` floats, row-major,
//! starting at `p · inner · 48`; the last panel's columns past `cols` are zeros. The
//! products read the same values in the same order as from the scratch panel, so results
//! are bit-identical with and without packing.

/// Columns of one panel: the width of the few-rows kernel's broadcast tile.
pub const PANEL_COLS: usize = 48;

/// W `[inner, cols]` (row-major, burn's `Linear` layout) in column panels.
#[derive(Clone, Debug, PartialEq)]
pub struct WeightPanels {
    values: Vec<f32>,
    inner: usize,
    cols: usize,
}

impl WeightPanels {
    /// Packs row-major `w` `[inner, cols]`.
    ///
    /// # Panics
    /// If `w` does not hold `inner · cols` values.
    pub fn pack(w: &[f32], (inner, cols): (usize, usize)) -> WeightPanels {
        WeightPanels::filled(w.len(), (inner, cols), "", |panel, first, width| {
            for (row, packed) in w.chunks_exact(cols).zip(panel.chunks_exact_mut(PANEL_COLS)) {
                packed[..width].copy_from_slice(&row[first..first + width]);
            }
        })
    }

    /// Packs W `[inner, cols]` given as its transpose `wt` `[cols, inner]` (row-major:
    /// Hugging Face's out × in layout, the tied output head's token embedding), into the
    /// same panels [`WeightPanels::pack`] makes of W itself. The broadcast-form kernel then
    /// reads the head as it reads every other weight, where the transposed form reads it
    /// in place: at SmolLM2's shape (49,152 × 576, 32 rows a decode step) the transposed
    /// form ran at about 49 GFLOP/s a core, the broadcast form over these panels at 78
    /// (`perf`, 2 threads; bench/history/model_throughput.md).
    ///
    /// # Panics
    /// If `wt` does not hold `inner · cols` values.
    pub fn pack_transposed(wt: &[f32], (inner, cols): (usize, usize)) -> WeightPanels {
        let stored = " stored transposed";
        WeightPanels::filled(wt.len(), (inner, cols), stored, |panel, first, width| {
            // Column j of the panel is row `first + j` of wᵀ, read in order; the panel
            // (inner × 48 floats) stays in L2 while its columns are written.
            let rows = wt[first * inner..(first + width) * inner].chunks_exact(inner);
            for (j, column) in rows.enumerate() {
                for (packed, &v) in panel[j..].iter_mut().step_by(PANEL_COLS).zip(column) {
                    *packed = v;
                }
            }
        })
    }

    /// The panels of W `[inner, cols]` (given as `given` values, `stored` as the panic
    /// message says), zeros except where `fill(panel, first column, width)` writes each.
    fn filled(
        given: usize,
        (inner, cols): (usize, usize),
        stored: &str,
        fill: impl Fn(&mut [f32], usize, usize),
    ) -> WeightPanels {
        assert_eq!(
            given,
            inner * cols,
            "weight panels: {given} values for [{inner}, {cols}]{stored}"
        );
        let panels = cols.div_ceil(PANEL_COLS);
        let mut values = vec![0.0f32; panels * inner * PANEL_COLS];
        if inner > 0 {
            for (p, panel) in values.chunks_exact_mut(inner * PANEL_COLS).enumerate() {
                let first = p * PANEL_COLS;
                fill(panel, first, (cols - first).min(PANEL_COLS));
            }
        }
        WeightPanels {
            values,
            inner,
            cols,
        }
    }

    /// (inner, cols) of the packed W.
    pub fn dims(&self) -> (usize, usize) {
        (self.inner, self.cols)
    }

    /// The packed values (panel after panel).
    pub fn values(&self) -> &[f32] {
        &self.values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// W `[2, 50]` = 0, 1, 2, …: panel 0 holds columns 0-47 of both rows, panel 1
    /// columns 48-49 and 46 zeros per row.
    #[test]
    fn panels_hold_columns_in_order_and_zeros_past_the_last() {
        let w: Vec<f32> = (0..100).map(|v| v as f32).collect();
        let panels = WeightPanels::pack(&w, (2, 50));
        assert_eq!(panels.dims(), (2, 50));
        let v = panels.values();
        assert_eq!(v.len(), 2 * 2 * PANEL_COLS);
        assert_eq!(v[..48], w[..48]);
        assert_eq!(v[48..96], w[50..98]);
        assert_eq!(v[96..98], [48.0, 49.0]);
        assert!(v[98..144].iter().all(|&x| x == 0.0));
        assert_eq!(v[144..146], [98.0, 99.0]);
        assert!(v[146..].iter().all(|&x| x == 0.0));
    }

    /// The packed product gives the unpacked one's values bit for bit, at every row count
    /// of the few-rows kernel's tiles and column tails, with and without a bias, on one
    /// thread and split over three (where the kernels run: AVX-512); W stored transposed
    /// too.
    #[test]
    fn packed_products_equal_unpacked_ones_bit_for_bit() {
        use crate::cpu::linear::{linear_forward, linear_forward_panels, WeightLayout};
        let values = |n: usize, salt: usize| -> Vec<f32> {
            (0..n)
                .map(|i| ((i * 7919 + salt * 104_729) % 2000) as f32 / 1000.0 - 1.0)
                .collect()
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let mut checked = 0;
        for (n, k, m) in [
            (1, 17, 5),
            (2, 64, 48),
            (5, 33, 49),
            (8, 100, 97),
            (9, 16, 96),
            (32, 512, 533),
            (33, 300, 1000),
            (64, 200, 47),
        ] {
            let (x, w, b) = (values(n * k, 1), values(k * m, 2), values(m, 3));
            // W stored as it is, and transposed (a tied head): panels from either against
            // the unpacked product (the transposed form for the second).
            let wt: Vec<f32> = (0..m * k).map(|i| w[(i % k) * m + i / k]).collect();
            let stored = [
                (WeightPanels::pack(&w, (k, m)), &w, WeightLayout::InOut),
                (
                    WeightPanels::pack_transposed(&wt, (k, m)),
                    &wt,
                    WeightLayout::OutIn,
                ),
            ];
            for bias in [None, Some(&b[..])] {
                for threads in [1, 3] {
                    for (panels, weight, layout) in &stored {
                        let run = || {
                            (
                                linear_forward_panels(&x, panels, bias, n),
                                linear_forward(&x, (weight, *layout), bias, (n, k, m)),
                            )
                        };
                        let (packed, unpacked) = if threads == 1 {
                            run()
                        } else {
                            pool.install(run)
                        };
                        if let Some(packed) = packed {
                            let with_bias = bias.is_some();
                            assert_eq!(
                                packed, unpacked,
                                "{n}x{k}x{m} {layout:?}, bias {with_bias}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked == 0 || checked == 64);
        assert!(
            linear_forward_panels(
                &values(65, 0),
                &WeightPanels::pack(&[1.0], (1, 1)),
                None,
                65
            )
            .is_none(),
            "more rows than the few-rows kernel takes"
        );
    }

    /// W packed from its transpose holds the panels of W itself: the same values at the
    /// same places, zeros past the last column included.
    #[test]
    fn packing_the_transpose_gives_the_same_panels() {
        for (inner, cols) in [(1, 1), (3, 50), (17, 48), (5, 97)] {
            let w: Vec<f32> = (0..inner * cols).map(|v| v as f32 * 0.5 - 3.0).collect();
            let wt: Vec<f32> = (0..cols * inner)
                .map(|i| w[(i % inner) * cols + i / inner])
                .collect();
            assert_eq!(
                WeightPanels::pack_transposed(&wt, (inner, cols)),
                WeightPanels::pack(&w, (inner, cols)),
                "[{inner}, {cols}]"
            );
        }
        assert!(WeightPanels::pack_transposed(&[], (0, 5))
            .values()
            .is_empty());
    }

    #[test]
    fn an_empty_weight_packs_to_nothing() {
        assert!(WeightPanels::pack(&[], (0, 5)).values().is_empty());
        assert!(WeightPanels::pack(&[], (3, 0)).values().is_empty());
    }
}
