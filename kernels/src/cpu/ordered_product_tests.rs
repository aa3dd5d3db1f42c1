//! Tests of the ordered product: every kernel against the written-out FMA chain, bit for bit.

use super::*;
use crate::cpu::ordered_product_plain::plain_tile;

/// Deterministic values in [-1, 1).
fn values(n: usize, salt: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + salt * 104_729) % 20_011) as f32 / 10_005.5) - 1.0)
        .collect()
}

/// The order of the module docs, written out: one `mul_add` per inner index.
fn chain(
    (rows, inner, cols): (usize, usize, usize),
    a: Operand<'_>,
    b: Operand<'_>,
    start: &[f32],
) -> Vec<f32> {
    let at = |(d, rs, cs): Operand<'_>, r: usize, c: usize| d[r * rs as usize + c * cs as usize];
    let mut out = start.to_vec();
    for i in 0..rows {
        for j in 0..cols {
            out[i * cols + j] = (0..inner).fold(start[i * cols + j], |s, p| {
                at(a, i, p).mul_add(at(b, p, j), s)
            });
        }
    }
    out
}

/// The kernels this CPU can run.
fn isas() -> Vec<Isa> {
    let mut isas = vec![Isa::Generic];
    if super::super::simd::has_avx2_fma() {
        isas.push(Isa::Avx2);
    }
    if super::super::simd::has_avx512() {
        isas.push(Isa::Avx512);
    }
    isas
}

/// Every tile tail (rows and columns around each kernel's tile and cache block), inner
/// lengths across the KC blocks, both operands row-major or transposed, with and without
/// a start value: each kernel equals the written-out chain bit for bit, in a pool of one
/// thread and of three (the split over outputs changes nothing).
#[test]
fn every_kernel_gives_the_written_out_chain_bit_for_bit() {
    let shapes = [
        (1, 1, 1),
        (3, 5, 7),
        (8, 130, 48),
        (9, 257, 49),
        (13, 300, 17),
        (65, 64, 96),
        (16, 70, 64),
        (10, 40, 80),
        (130, 520, 33),
        // Packed a and b: rows 1,024 floats apart (a's and b's share L1 sets), a
        // transposed a over many column panels, more columns than a chunk's.
        (20, 1024, 200),
        (17, 130, 1024),
        (9, 40, 1000),
    ];
    for threads in [1, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        for &(rows, inner, cols) in &shapes {
            let (av, bv) = (values(rows * inner, 1), values(inner * cols, 2));
            let start = values(rows * cols, 3);
            for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
                let a: Operand<'_> = match a_t {
                    false => (&av, inner as isize, 1),
                    true => (&av, 1, rows as isize),
                };
                let b: Operand<'_> = match b_t {
                    false => (&bv, cols as isize, 1),
                    true => (&bv, 1, inner as isize),
                };
                for accumulate in [false, true] {
                    let zeros = vec![0.0; rows * cols];
                    let from = if accumulate { &start } else { &zeros };
                    let want = chain((rows, inner, cols), a, b, from);
                    for isa in isas() {
                        let mut got = if accumulate {
                            start.clone()
                        } else {
                            vec![f32::NAN; rows * cols]
                        };
                        // SAFETY: got holds rows · cols floats; the operands fit the dims.
                        pool.install(|| unsafe {
                            ordered_product_with(
                                isa,
                                got.as_mut_ptr(),
                                (rows, inner, cols),
                                a,
                                b,
                                accumulate,
                            )
                        });
                        let same = got
                            .iter()
                            .zip(&want)
                            .all(|(g, w)| g.to_bits() == w.to_bits());
                        assert!(
                            same,
                            "{isa:?} {rows}×{inner}×{cols} a_t {a_t} b_t {b_t} accumulate {accumulate} \
                             {threads} threads"
                        );
                    }
                }
            }
        }
    }
}

/// [`Plain`] with the emulated FMA (what a CPU without FMA runs).
struct PlainEmulated;

impl Kernel for PlainEmulated {
    const MR: usize = Plain::MR;
    const NR: usize = Plain::NR;
    const KC: usize = Plain::KC;
    const MC: usize = Plain::MC;

    unsafe fn tile(kc: usize, a: Rows, b: Columns, dst: *mut f32, stride: usize, load: bool) {
        unsafe { plain_tile::<false>(kc, a, b, dst, stride, load) }
    }
}

/// The plain kernel on a CPU without FMA (the emulation) gives the written-out chain
/// of instruction FMAs bit for bit.
#[test]
fn the_plain_kernel_without_the_instruction_gives_the_same_bits() {
    for &(rows, inner, cols) in &[(3, 5, 7), (9, 300, 17), (65, 64, 33)] {
        let (av, bv) = (values(rows * inner, 7), values(inner * cols, 8));
        let start = values(rows * cols, 9);
        let (a, b): (Operand<'_>, Operand<'_>) =
            ((&av, inner as isize, 1), (&bv, 1, inner as isize));
        let want = chain((rows, inner, cols), a, b, &start);
        let mut got = start.clone();
        let job = Job {
            dst: got.as_mut_ptr() as usize,
            dims: (rows, inner, cols),
            a: Raw::of(a),
            b: Raw::of(b),
            accumulate: true,
        };
        // SAFETY: got holds rows · cols floats; the operands fit the dims.
        unsafe { job.run::<PlainEmulated>() };
        assert!(
            got.iter()
                .zip(&want)
                .all(|(g, w)| g.to_bits() == w.to_bits()),
            "{rows}×{inner}×{cols}"
        );
    }
}

/// The few-rows kernels (AVX-512, at most 64 rows) sum in the same order: the dense
/// layer gives the same bits whichever of the two computes it.
#[test]
fn the_few_rows_kernels_sum_in_the_same_order() {
    if !super::super::few_rows::few_rows_kernels_run() {
        return;
    }
    for &(rows, inner, cols) in &[(1, 64, 100), (5, 33, 48), (9, 200, 97), (64, 130, 50)] {
        let (av, bv) = (values(rows * inner, 4), values(inner * cols, 5));
        let start = values(rows * cols, 6);
        for b_t in [false, true] {
            let a: Operand<'_> = (&av, inner as isize, 1);
            let b: Operand<'_> = match b_t {
                false => (&bv, cols as isize, 1),
                true => (&bv, 1, inner as isize),
            };
            for accumulate in [false, true] {
                let fresh = || {
                    if accumulate {
                        start.clone()
                    } else {
                        vec![0.0; rows * cols]
                    }
                };
                let run = |few: bool| {
                    let mut out = fresh();
                    // SAFETY: as above.
                    unsafe {
                        let dims = (rows, inner, cols);
                        if !few
                            || !super::super::few_rows::few_rows_product(
                                out.as_mut_ptr(),
                                dims,
                                a,
                                b,
                                accumulate,
                            )
                        {
                            ordered_product(out.as_mut_ptr(), dims, a, b, accumulate);
                        }
                    }
                    out
                };
                let (few, ordered) = (run(true), run(false));
                let same = few
                    .iter()
                    .zip(&ordered)
                    .all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(
                    same,
                    "{rows}×{inner}×{cols} b_t {b_t} accumulate {accumulate}"
                );
                if !b_t {
                    // W packed once in panels, as a generation's decode steps read it.
                    let panels =
                        super::super::weight_panels::WeightPanels::pack(&bv, (inner, cols));
                    let mut packed = fresh();
                    // SAFETY: packed holds rows · cols floats, av rows · inner.
                    unsafe {
                        super::super::few_rows::panels_product(
                            packed.as_mut_ptr(),
                            &av,
                            &panels,
                            rows,
                            accumulate,
                        )
                    };
                    assert!(
                        packed
                            .iter()
                            .zip(&ordered)
                            .all(|(x, y)| x.to_bits() == y.to_bits()),
                        "panels {rows}×{inner}×{cols} accumulate {accumulate}"
                    );
                }
            }
        }
    }
}
