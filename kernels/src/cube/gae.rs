//! CubeCL GAE: one cube per packed sequence, a parallel (associative) scan over its tokens.
//!
//! Formula as in [`crate::cpu::gae`] (δ_t = r_t + γV_next − V_t, A_t = δ_t + γλA_next,
//! returns = A + V, over response tokens only; 0 elsewhere), accumulated in the input
//! dtype. Source: Schulman et al. 2016 eq. 16; ROLL `compute_gae_advantage_return`.
//!
//! The reverse recurrence carries s = (V_next, A_next) from the end of the sequence. A
//! response token maps it affinely, s ↦ (V_t, γ·V_next + γλ·A_next + r_t − V_t); any other
//! token leaves it as it is. Affine maps compose associatively (Blelloch 1990, "Prefix sums
//! and their applications", §1.4 on first-order recurrences), so the cube scans in three
//! phases: each unit composes the maps of its contiguous chunk of the sequence; a
//! Hillis–Steele suffix scan over the units' maps in shared memory (log₂ units rounds)
//! gives each unit the composition of every chunk after its own, applied to the end state
//! (0, 0), that is the state entering its chunk; each unit then runs its chunk's
//! recurrence from that state and writes A and A + V. A map is kept as six numbers,
//! v' = p·v + q·a + e, a' = α·v + β·a + c.

use cubecl::prelude::*;

use super::cube_index::{cube_index, unit_chunk, UnitChunk};

/// Numbers per affine map in shared memory: p, q, e, α, β, c.
const MAP: usize = 6;

/// Writes the map (p, q, e, α, β, c) at slot offset `o`.
#[cube]
#[allow(clippy::too_many_arguments)]
fn publish<F: Float>(maps: &mut SharedMemory<F>, o: usize, p: F, q: F, e: F, al: F, be: F, c: F) {
    maps[o] = p;
    maps[o + 1] = q;
    maps[o + 2] = e;
    maps[o + 3] = al;
    maps[o + 4] = be;
    maps[o + 5] = c;
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn gae_scan_kernel<F: Float, I: Numeric>(
    rewards: &Tensor<F>,
    values: &Tensor<F>,
    mask: &Tensor<F>,
    offsets: &Tensor<I>,
    adv: &mut Tensor<F>,
    ret: &mut Tensor<F>,
    sequences: u32,
    gamma: f32,
    gamma_lambda: f32,
    #[comptime] units: u32,
    #[define(F, I)] _dtypes: [StorageType; 2],
) {
    let seq = cube_index(sequences);
    let start = u32::cast_from(offsets[seq]) as usize;
    let end = u32::cast_from(offsets[seq + 1]) as usize;
    let g = F::cast_from(gamma);
    let gl = F::cast_from(gamma_lambda);
    let (zero, one) = (F::new(0.0), F::new(1.0));
    let u = UNIT_POS_X as usize;
    let n = units as usize;
    let UnitChunk { lo, hi } = unit_chunk(start, end, units);

    // Phase 1: this chunk's map, the identity composed with each response token's map from
    // the chunk's last token back to its first.
    let mut p = one;
    let mut q = zero;
    let mut e = zero;
    let mut al = zero;
    let mut be = one;
    let mut c = zero;
    let mut t = hi;
    while t > lo {
        t -= 1;
        if mask[t] != zero {
            let vt = values[t];
            let (np, nq) = (g * p + gl * al, g * q + gl * be);
            c = g * e + gl * c + rewards[t] - vt;
            al = np;
            be = nq;
            p = zero;
            q = zero;
            e = vt;
        }
    }
    let mut maps = SharedMemory::<F>::new((units as usize) * MAP);
    let o = u * MAP;
    publish(&mut maps, o, p, q, e, al, be, c);
    sync_cube();

    // Phase 2: Hillis–Steele suffix scan; after it, unit u's slot holds chunk u's map
    // composed with those of every later chunk (applied first).
    let mut d = 1usize;
    while d < n {
        let later = u + d < n;
        if later {
            let l = (u + d) * MAP;
            let (lp, lq, le) = (maps[l], maps[l + 1], maps[l + 2]);
            let (la, lb, lc) = (maps[l + 3], maps[l + 4], maps[l + 5]);
            let (np, nq) = (p * lp + q * la, p * lq + q * lb);
            let ne = p * le + q * lc + e;
            let (na, nb) = (al * lp + be * la, al * lq + be * lb);
            let nc = al * le + be * lc + c;
            p = np;
            q = nq;
            e = ne;
            al = na;
            be = nb;
            c = nc;
        }
        sync_cube();
        if later {
            publish(&mut maps, o, p, q, e, al, be, c);
        }
        sync_cube();
        d *= 2;
    }

    // Phase 3: the state entering this chunk is the later chunks' map applied to (0, 0),
    // its constant part; the chunk's recurrence runs from it.
    let mut next_v = zero;
    let mut next_a = zero;
    if u + 1 < n {
        next_v = maps[o + MAP + 2];
        next_a = maps[o + MAP + 5];
    }
    t = hi;
    while t > lo {
        t -= 1;
        if mask[t] != zero {
            let vt = values[t];
            next_a = rewards[t] + g * next_v - vt + gl * next_a;
            adv[t] = next_a;
            ret[t] = next_a + vt;
            next_v = vt;
        } else {
            adv[t] = zero;
            ret[t] = zero;
        }
    }
}
