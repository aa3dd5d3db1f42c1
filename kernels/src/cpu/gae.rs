//! GAE reverse scan over packed variable-length sequences, on the CPU.
//!
//! Per sequence, over its response tokens only (mask ≠ 0), last to first
//! (Schulman et al. 2016 eq. 16; ROLL `compute_gae_advantage_return`; oracle
//! `roll-flow-operators` `algo::gae::gae`):
//! - δ_t = r_t + γ·V_next − V_t, V_next = V of the next *response* token of the same
//!   sequence (observation tokens in between are skipped), 0 after the last one;
//! - A_t = δ_t + γλ·A_next;
//! - returns_t = A_t + V_t.
//!
//! Tokens outside the mask get advantage 0 and return 0, and their rewards are ignored.
//!
//! Sequences run in parallel (rayon), each a serial scan accumulating in f64 like the
//! oracle, one fused multiply-add per token, the same bits on every CPU. (A vectorised f32
//! scan for AVX-512 computed other roundings than the AVX2 and plain paths, so a run's
//! numbers depended on the CPU: removed.)

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::simd::{isa_copies, Isa};

/// Checks that `offsets` = [0, …, len] is non-decreasing.
pub(crate) fn check_offsets(offsets: &[usize], len: usize, what: &str) {
    assert!(
        offsets.first() == Some(&0) && offsets.last() == Some(&len),
        "{what}: offsets must start at 0 and end at the token count {len}, got {:?}…{:?}",
        offsets.first(),
        offsets.last()
    );
    assert!(
        offsets.windows(2).all(|w| w[0] <= w[1]),
        "{what}: offsets must be non-decreasing"
    );
}

/// Splits `out` into one slice per sequence of `offsets`.
pub(crate) fn split_sequences<'a, T>(mut out: &'a mut [T], offsets: &[usize]) -> Vec<&'a mut [T]> {
    let mut parts = Vec::with_capacity(offsets.len().saturating_sub(1));
    for w in offsets.windows(2) {
        let (head, rest) = out.split_at_mut(w[1] - w[0]);
        parts.push(head);
        out = rest;
    }
    parts
}

/// The reverse scan of one sequence; its critical path is one multiply-add per token.
/// Writes every element of `adv` and `ret`.
#[inline(always)]
fn scan<const FMA: bool>(
    r: &[f32],
    v: &[f32],
    m: &[f32],
    adv: &mut [MaybeUninit<f32>],
    ret: &mut [MaybeUninit<f32>],
    g: f64,
    gl: f64,
) {
    let (mut next_v, mut next_a) = (0.0f64, 0.0f64);
    for t in (0..r.len()).rev() {
        if m[t] != 0.0 {
            let vt = v[t] as f64;
            let delta = r[t] as f64 + g * next_v - vt;
            next_a = gl.mul_add(next_a, delta);
            adv[t].write(next_a as f32);
            ret[t].write((next_a + vt) as f32);
            next_v = vt;
        } else {
            adv[t].write(0.0);
            ret[t].write(0.0);
        }
    }
}

isa_copies!(avx2, "avx2,fma":
    scan(
        r: &[f32],
        v: &[f32],
        m: &[f32],
        adv: &mut [MaybeUninit<f32>],
        ret: &mut [MaybeUninit<f32>],
        g: f64,
        gl: f64
    );
);

/// (advantages, returns) of packed sequences `offsets` (length = sequences + 1).
pub fn gae(
    rewards: &[f32],
    values: &[f32],
    mask: &[f32],
    offsets: &[usize],
    gamma: f32,
    lambda: f32,
) -> (Vec<f32>, Vec<f32>) {
    let n = rewards.len();
    assert!(
        values.len() == n && mask.len() == n,
        "gae: rewards, values and mask differ in length"
    );
    check_offsets(offsets, n, "gae");
    let (g, gl) = (gamma as f64, gamma as f64 * lambda as f64);
    let isa = Isa::detect();
    // Every element is written by the scans below: no zeroing pass.
    let mut adv = super::buffer::uninit(n);
    let mut ret = super::buffer::uninit(n);
    type Out<'a> = &'a mut [MaybeUninit<f32>];
    let seqs: Vec<(Out, Out)> = split_sequences(&mut adv.spare_capacity_mut()[..n], offsets)
        .into_iter()
        .zip(split_sequences(&mut ret.spare_capacity_mut()[..n], offsets))
        .collect();
    seqs.into_par_iter()
        .zip(offsets.par_windows(2))
        .with_min_len(16)
        .for_each(|((a, rt), w)| {
            let (s, e) = (w[0], w[1]);
            let (r, v, m) = (&rewards[s..e], &values[s..e], &mask[s..e]);
            match isa {
                // SAFETY: `Isa::detect` found AVX2 and FMA (AVX-512 implies them) at run time.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 | Isa::Avx2 => unsafe { avx2::scan(r, v, m, a, rt, g, gl) },
                _ => scan::<false>(r, v, m, a, rt, g, gl),
            }
        });
    // SAFETY: the sequences cover [0, n) (`check_offsets`), and each scan wrote all of its
    // sequence's elements.
    unsafe {
        adv.set_len(n);
        ret.set_len(n);
    }
    (adv, ret)
}
