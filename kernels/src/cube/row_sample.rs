//! CubeCL next-token draw, one cube per logits row (formula and tie rules in
//! [`crate::row_sampling`]). Each unit takes a contiguous chunk of the vocabulary:
//! (1) the chunk's largest finite logit (first on ties) and its count of non-finite ones,
//! merged in shared memory by a tree; (2) the chunk's Σ e^{x/T − m}, and an inclusive
//! Hillis–Steele scan of those sums over the units gives each chunk the mass before it and
//! the row's total; (3) the unit whose mass interval holds the target u·total walks its
//! chunk to the first token where the running mass passes it. Sums in f32.

// `#[cube]` code is expanded to kernel IR by CubeCL's macro, which reads plain `if`s and
// arithmetic: no `&&`/`||` short-circuits folded into one condition.
#![allow(clippy::collapsible_if, clippy::if_same_then_else)]

use cubecl::prelude::*;

use super::cube_index::{cube_index, unit_chunk, UnitChunk};

/// Neither NaN nor ±∞ (bit tests, which no fast-math compiler folds away).
#[cube]
fn finite(x: f32) -> bool {
    let mut ok = true;
    if x.is_nan() {
        ok = false;
    }
    if x.is_inf() {
        ok = false;
    }
    ok
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn row_sample_kernel<F: Float, P: Float>(
    logits: &Tensor<F>,
    params: &Tensor<P>,
    out: &mut Tensor<P>,
    rows: u32,
    vocab: u32,
    #[comptime] units: u32,
    #[define(F, P)] _dtypes: [StorageType; 2],
) {
    let row = cube_index(rows);
    let v = vocab as usize;
    let none = vocab;
    let base = row * v;
    let greedy = params[row * 3usize + 2] != P::new(0.0);
    let mut inv_t = f32::cast_from(params[row * 3usize]);
    if greedy {
        inv_t = 1.0;
    }
    let draw = f32::cast_from(params[row * 3usize + 1]);
    let n = units as usize;
    let unit = UNIT_POS_X as usize;
    let UnitChunk { lo, hi } = unit_chunk(0, v, units);

    // (1) Largest finite logit, first on ties; non-finite logits counted.
    let mut best = f32::new(0.0);
    let mut arg = none;
    let mut bad = f32::new(0.0);
    let mut i = lo;
    while i < hi {
        let xf = f32::cast_from(logits[base + i]);
        if !finite(xf) {
            bad += 1.0;
        } else {
            if arg == none {
                best = xf;
                arg = i as u32;
            } else if xf > best {
                best = xf;
                arg = i as u32;
            }
        }
        i += 1;
    }
    let mut maxes = SharedMemory::<f32>::new(units as usize);
    let mut args = SharedMemory::<u32>::new(units as usize);
    let mut bads = SharedMemory::<f32>::new(units as usize);
    maxes[unit] = best;
    args[unit] = arg;
    bads[unit] = bad;
    sync_cube();
    let mut stride = CUBE_DIM_X as usize / 2;
    while stride > 0 {
        if unit < stride {
            let (other_max, other_arg) = (maxes[unit + stride], args[unit + stride]);
            // The tree merges interleaved chunks: on a tie the smaller index wins.
            if other_arg != none {
                if args[unit] == none {
                    maxes[unit] = other_max;
                    args[unit] = other_arg;
                } else if other_max > maxes[unit] {
                    maxes[unit] = other_max;
                    args[unit] = other_arg;
                } else if other_max == maxes[unit] {
                    if other_arg < args[unit] {
                        args[unit] = other_arg;
                    }
                }
            }
            bads[unit] += bads[unit + stride];
        }
        sync_cube();
        stride /= 2;
    }
    let m = maxes[0usize] * inv_t;
    let argmax = args[0usize];

    // (2) The chunk's mass, then the masses before each chunk.
    let mut mass = f32::new(0.0);
    i = lo;
    while i < hi {
        let x = f32::cast_from(logits[base + i]);
        if finite(x) {
            mass += (x * inv_t - m).exp();
        }
        i += 1;
    }
    let mut sums = SharedMemory::<f32>::new(units as usize);
    let mut chosen = SharedMemory::<u32>::new(1usize);
    sums[unit] = mass;
    if unit == 0 {
        chosen[0usize] = argmax;
    }
    sync_cube();
    let mut d = 1usize;
    while d < n {
        let mut add = f32::new(0.0);
        if unit >= d {
            add = sums[unit - d];
        }
        sync_cube();
        sums[unit] += add;
        sync_cube();
        d *= 2;
    }
    let total = sums[n - 1];
    let upto = sums[unit];
    let mut before = f32::new(0.0);
    if unit > 0 {
        before = sums[unit - 1];
    }

    // (3) The unit holding the target finds the token; its chunk's last token of nonzero
    // mass if rounding keeps the running sum below the target. A target at or past the
    // total (rounding of u·Z) belongs to the last chunk with mass (those after it add 0).
    let target = draw * total;
    let mut holds = target < upto;
    if upto == total {
        if mass > 0.0 {
            holds = true;
        }
    }
    if !greedy {
        if before <= target {
            if holds {
                let mut acc = before;
                let mut found = none;
                let mut last = none;
                i = lo;
                while i < hi {
                    let x = f32::cast_from(logits[base + i]);
                    if finite(x) {
                        let w = (x * inv_t - m).exp();
                        acc += w;
                        if w > 0.0 {
                            last = i as u32;
                        }
                        if found == none {
                            if acc > target {
                                found = i as u32;
                            }
                        }
                    }
                    i += 1;
                }
                if found == none {
                    found = last;
                }
                if found != none {
                    chosen[0usize] = found;
                }
            }
        }
    }
    sync_cube();
    if unit == 0 {
        let token = chosen[0usize];
        let mut logprob = f32::new(0.0);
        if token != none {
            let x = f32::cast_from(logits[base + token as usize]);
            logprob = x * inv_t - m - total.ln();
        }
        out[row * 3usize] = P::cast_from(token);
        out[row * 3usize + 1] = P::cast_from(logprob);
        out[row * 3usize + 2] = P::cast_from(bads[0usize]);
    }
}
