//! The fused token log-prob and entropy against the reference: forward, gradient, and logits
//! that guided decoding masked to −∞.

use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use roll_flow_kernels::{reference, KernelBackend};

use super::{assert_close, assert_close_scaled, host, vector, Rng};

const LOGPROB_SHAPES: [(usize, usize); 6] = [
    (1, 1),
    (3, 7),
    (5, 1000),
    (33, 4097),
    (4, 32000),
    (2, 151_936),
];

pub fn logits_and_targets<B: Backend>(
    rows: usize,
    vocab: usize,
    seed: u64,
    device: &B::Device,
) -> (Tensor<B, 2>, Tensor<B, 1, Int>) {
    B::seed(device, seed);
    let logits = Tensor::random([rows, vocab], Distribution::Normal(0.0, 3.0), device);
    let mut rng = Rng::new(seed);
    let targets: Vec<i64> = (0..rows).map(|_| rng.below(vocab) as i64).collect();
    (
        logits,
        Tensor::from_data(TensorData::new(targets, [rows]), device),
    )
}

pub fn logprob_forward<B: KernelBackend>(device: &B::Device) {
    for (k, &(rows, vocab)) in LOGPROB_SHAPES.iter().enumerate() {
        for temperature in [1.0, 0.7] {
            let (logits, targets) = logits_and_targets::<B>(rows, vocab, 11 + k as u64, device);
            let fused = roll_flow_kernels::token_logprob_entropy(
                logits.clone(),
                targets.clone(),
                temperature,
            )
            .unwrap();
            let (lp, h) = reference::logprob_entropy(logits, targets, temperature);
            let what = format!("{rows}x{vocab} T={temperature}");
            assert_close(
                &format!("logp {what}"),
                &host(fused.logprob),
                &host(lp),
                2e-4,
                2e-4,
            );
            assert_close(
                &format!("entropy {what}"),
                &host(fused.entropy),
                &host(h),
                2e-4,
                2e-4,
            );
        }
    }
}

pub fn logprob_backward<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    for (k, &(rows, vocab)) in LOGPROB_SHAPES.iter().enumerate() {
        let temperature = 0.8;
        let (logits, targets) = logits_and_targets::<B>(rows, vocab, 40 + k as u64, device);
        let mut rng = Rng::new(k as u64);
        let weights =
            |rng: &mut Rng| vector::<B>((0..rows).map(|_| rng.normal()).collect(), device);
        let (w_lp, w_h) = (weights(&mut rng), weights(&mut rng));

        let x = logits.clone().detach().require_grad();
        // Odd shapes hand the kernel logits nothing else holds (the output of an op, as in
        // the model), which a backend may overwrite with their gradient.
        let input = if k % 2 == 1 {
            x.clone().mul_scalar(1.0)
        } else {
            x.clone()
        };
        let fused =
            roll_flow_kernels::token_logprob_entropy(input, targets.clone(), temperature).unwrap();
        let loss = (fused.logprob * w_lp.clone() + fused.entropy * w_h.clone()).sum();
        let got = host(x.grad(&loss.backward()).unwrap());

        let x = logits.detach().require_grad();
        let (lp, h) = reference::logprob_entropy(x.clone(), targets, temperature);
        let loss = (lp * w_lp + h * w_h).sum();
        let want = host(x.grad(&loss.backward()).unwrap());
        assert_close_scaled(&format!("dlogits {rows}x{vocab}"), &got, &want, 1e-6, 2e-3);
    }
}

/// Guided decoding rules tokens out by masking their logits to −∞ before the kernel.
/// Forward values and gradients must match the reference on the same logits masked to a
/// finite −1e9 (whose softmax weight is exactly 0 in f32), including a row where only the
/// target is allowed (log-prob 0, entropy 0, zero gradient).
pub fn logprob_masked_logits<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    for (k, &(rows, vocab)) in [(4, 9), (6, 1000), (3, 151_936)].iter().enumerate() {
        let temperature = 0.7;
        let (logits, targets) = logits_and_targets::<B>(rows, vocab, 70 + k as u64, device);
        let target_ids: Vec<i64> = targets.to_data().convert::<i64>().to_vec().unwrap();
        let mut rng = Rng::new(80 + k as u64);
        let ruled_out: Vec<bool> = (0..rows * vocab)
            .map(|i| {
                let (row, v) = (i / vocab, i % vocab);
                v as i64 != target_ids[row] && (row == 0 || rng.below(3) != 0)
            })
            .collect();
        let ruled_out = Tensor::<B, 2, burn::tensor::Bool>::from_data(
            TensorData::new(ruled_out, [rows, vocab]),
            device,
        );
        let mut rng = Rng::new(90 + k as u64);
        let (w_lp, w_h) = (
            vector::<B>((0..rows).map(|_| rng.normal()).collect(), device),
            vector::<B>((0..rows).map(|_| rng.normal()).collect(), device),
        );
        let run = |fused: bool| {
            let x = logits.clone().detach().require_grad();
            let (lp, h) = if fused {
                let masked = x.clone().mask_fill(ruled_out.clone(), f32::NEG_INFINITY);
                let out =
                    roll_flow_kernels::token_logprob_entropy(masked, targets.clone(), temperature)
                        .unwrap();
                (out.logprob, out.entropy)
            } else {
                let masked = x.clone().mask_fill(ruled_out.clone(), -1e9);
                reference::logprob_entropy(masked, targets.clone(), temperature)
            };
            let loss = (lp.clone() * w_lp.clone() + h.clone() * w_h.clone()).sum();
            let grad = host(x.grad(&loss.backward()).unwrap());
            (host(lp), host(h), grad)
        };
        let (lp, h, grad) = run(true);
        let (ref_lp, ref_h, ref_grad) = run(false);
        let what = format!("{rows}x{vocab} masked");
        assert!(
            lp.iter().chain(&h).chain(&grad).all(|x| x.is_finite()),
            "{what}: not finite"
        );
        assert!(
            lp[0].abs() < 1e-6 && h[0].abs() < 1e-6,
            "{what}: forced row {} {}",
            lp[0],
            h[0]
        );
        assert_close(&format!("logp {what}"), &lp, &ref_lp, 2e-4, 2e-4);
        assert_close(&format!("entropy {what}"), &h, &ref_h, 2e-4, 2e-4);
        assert_close_scaled(&format!("dlogits {what}"), &grad, &ref_grad, 1e-6, 2e-3);
    }
}
