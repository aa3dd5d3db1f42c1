//! GAE over packed sequences against the burn-ops loop and the f64 host oracle.

use roll_flow_kernels::{reference, KernelBackend};

use super::{assert_close, host, vector, Rng};

/// Random packed sequences: a prompt (masked out), then turns of response tokens separated
/// by observation tokens; some sequences are empty or have no response token, and about one
/// in four is response tokens only (a single-turn reply, which the CPU GAE scans in place).
pub fn packed(rng: &mut Rng, sequences: usize, max_len: usize) -> (Vec<usize>, Vec<f32>) {
    let mut offsets = vec![0];
    let mut mask = Vec::new();
    for _ in 0..sequences {
        let len = match rng.below(10) {
            0 => 0,
            1 => 1,
            _ => 1 + rng.below(max_len),
        };
        let dense = rng.below(4) == 0;
        let prompt = if dense { 0 } else { rng.below(len.max(1)) };
        let no_response = !dense && rng.below(12) == 0;
        for t in 0..len {
            let response = dense || (!no_response && t >= prompt && rng.below(6) != 0);
            mask.push(if response { 1.0 } else { 0.0 });
        }
        offsets.push(mask.len());
    }
    (offsets, mask)
}

pub fn gae_forward<B: KernelBackend>(device: &B::Device) {
    // The last case's sequences run to 6,000 tokens: a CubeCL scan unit then walks a
    // chunk of up to 24 tokens, and chunks begin and end inside masked runs. The burn-ops
    // loop (one set of launches per time step) is too slow there; the f64 oracle checks it.
    let cases = [
        (1, 5, 1.0, 0.95),
        (7, 40, 0.99, 0.9),
        (64, 300, 1.0, 1.0),
        (256, 512, 0.95, 0.95),
        (6, 6000, 0.99, 0.95),
    ];
    for (k, &(sequences, max_len, gamma, lambda)) in cases.iter().enumerate() {
        let mut rng = Rng::new(100 + k as u64);
        let (offsets, mask) = packed(&mut rng, sequences, max_len);
        let n = mask.len();
        let rewards: Vec<f32> = mask.iter().map(|&m| m * rng.normal()).collect();
        let values: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
        let (r, v, m) = (
            vector::<B>(rewards.clone(), device),
            vector::<B>(values.clone(), device),
            vector::<B>(mask.clone(), device),
        );
        let (adv, ret) =
            roll_flow_kernels::gae(r.clone(), v.clone(), m.clone(), &offsets, gamma, lambda)
                .unwrap();
        let (adv, ret) = (host(adv), host(ret));
        let what = format!("{sequences} seqs of up to {max_len}");
        if max_len <= 512 {
            // The unfused burn-ops loop (`reference::gae`, the benchmark's baseline).
            let (ref_adv, ref_ret) = reference::gae(r, v, m, &offsets, gamma, lambda);
            assert_close(
                &format!("adv vs burn ops {what}"),
                &adv,
                &host(ref_adv),
                1e-4,
                1e-4,
            );
            assert_close(
                &format!("ret vs burn ops {what}"),
                &ret,
                &host(ref_ret),
                1e-4,
                1e-4,
            );
        }
        // The f64 oracle of roll-flow-operators, over each sequence's response tokens.
        let (mut oracle_adv, mut oracle_ret) = (vec![0.0f32; n], vec![0.0f32; n]);
        for w in offsets.windows(2) {
            let pos: Vec<usize> = (w[0]..w[1]).filter(|&t| mask[t] != 0.0).collect();
            let r: Vec<f64> = pos.iter().map(|&t| rewards[t] as f64).collect();
            let v: Vec<f64> = pos.iter().map(|&t| values[t] as f64).collect();
            let (a, g) = reference::gae_sequence(&r, &v, gamma as f64, lambda as f64);
            for (j, &t) in pos.iter().enumerate() {
                oracle_adv[t] = a[j] as f32;
                oracle_ret[t] = g[j] as f32;
            }
        }
        assert_close(
            &format!("adv vs oracle {what}"),
            &adv,
            &oracle_adv,
            1e-4,
            1e-4,
        );
        assert_close(
            &format!("ret vs oracle {what}"),
            &ret,
            &oracle_ret,
            1e-4,
            1e-4,
        );
    }
}
