//! CubeCL GAE reverse scan: one unit per packed sequence, a serial scan over its tokens.
//!
//! Formula as in [`crate::cpu::gae`] (δ_t = r_t + γV_next − V_t, A_t = δ_t + γλA_next,
//! returns = A + V, over response tokens only; 0 elsewhere), accumulated in f32.
//! Source: Schulman et al. 2016 eq. 16; ROLL `compute_gae_advantage_return`.

use cubecl::prelude::*;

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn gae_kernel<F: Float, I: Numeric>(
    rewards: &Tensor<F>,
    values: &Tensor<F>,
    mask: &Tensor<F>,
    offsets: &Tensor<I>,
    adv: &mut Tensor<F>,
    ret: &mut Tensor<F>,
    sequences: u32,
    gamma: f32,
    gamma_lambda: f32,
    #[define(F, I)] _dtypes: [StorageType; 2],
) {
    let seq = ABSOLUTE_POS;
    if seq >= sequences as usize {
        terminate!();
    }
    let start = u32::cast_from(offsets[seq]) as usize;
    let mut t = u32::cast_from(offsets[seq + 1]) as usize;
    let g = F::cast_from(gamma);
    let gl = F::cast_from(gamma_lambda);
    let mut next_v = F::new(0.0);
    let mut next_a = F::new(0.0);
    while t > start {
        t -= 1;
        if mask[t] != F::new(0.0) {
            let vt = values[t];
            next_a = rewards[t] + g * next_v - vt + gl * next_a;
            adv[t] = next_a;
            ret[t] = next_a + vt;
            next_v = vt;
        } else {
            adv[t] = F::new(0.0);
            ret[t] = F::new(0.0);
        }
    }
}
