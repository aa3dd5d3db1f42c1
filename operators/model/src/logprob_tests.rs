//! The uniform-prior KL of [`super::uniform_prior_kl`] against float64.

use super::*;
use burn::backend::{Autodiff, Flex};

type A = Autodiff<Flex>;

/// KL(U_A‖π) and its gradient in float64, straight from the definition.
fn reference(logits: &[f64], allowed: &[bool], t: f64) -> (f64, Vec<f64>) {
    let on: Vec<usize> = (0..logits.len()).filter(|&v| allowed[v]).collect();
    let lse = on.iter().map(|&v| (logits[v] / t).exp()).sum::<f64>().ln();
    let k = on.len() as f64;
    let kl = -k.ln() - on.iter().map(|&v| logits[v] / t - lse).sum::<f64>() / k;
    let grad = (0..logits.len())
        .map(|v| match allowed[v] {
            true => ((logits[v] / t - lse).exp() - 1.0 / k) / t,
            false => 0.0,
        })
        .collect();
    (kl, grad)
}

#[test]
fn uniform_prior_kl_and_its_gradient_match_a_float64_reference() {
    let rows = [[2.0f32, -1.0, 0.5, 3.0, 0.0], [0.1, 0.1, 0.1, 0.1, 0.1]];
    let allowed = [[true, false, true, true, false], [true; 5]];
    let device = Default::default();
    for temperature in [1.0f32, 0.7] {
        for guided in [true, false] {
            let flat: Vec<f32> = rows.iter().flatten().copied().collect();
            let logits =
                Tensor::<A, 2>::from_data(TensorData::new(flat, [2, 5]), &device).require_grad();
            let ruled: Vec<bool> = allowed.iter().flatten().map(|a| !a).collect();
            let ruled = Tensor::<A, 2, Bool>::from_data(TensorData::new(ruled, [2, 5]), &device);
            let (masked, ruled) = match guided {
                true => (
                    logits.clone().mask_fill(ruled.clone(), f32::NEG_INFINITY),
                    Some(ruled),
                ),
                false => (logits.clone(), None),
            };
            // Each row's target (an allowed token) and its log-prob from the fused kernel.
            let targets =
                Tensor::<A, 1, Int>::from_data(TensorData::new(vec![0i64, 2], [2]), &device);
            let logprob = roll_flow_kernels::token_logprob_entropy(
                masked.clone(),
                targets.clone(),
                temperature,
            )
            .unwrap()
            .logprob;
            let allowed_counts = match guided {
                true => vec![3.0, 5.0],
                false => vec![5.0, 5.0],
            };
            let prior = UniformPrior {
                targets,
                logprob,
                ruled_out: ruled,
                allowed_counts,
                temperature,
            };
            let kl = uniform_prior_kl(masked, prior);
            let grad = logits.grad(&kl.clone().sum().backward()).unwrap();
            let (kl, grad) = (kl.into_data().to_vec::<f32>().unwrap(), grad.into_data());
            let grad = grad.to_vec::<f32>().unwrap();
            for (r, row) in rows.iter().enumerate() {
                let on = if guided { allowed[r] } else { [true; 5] };
                let row: Vec<f64> = row.iter().map(|&x| x as f64).collect();
                let (want, want_grad) = reference(&row, &on, temperature as f64);
                assert!(
                    (kl[r] as f64 - want).abs() < 1e-5,
                    "row {r}: {} vs {want}",
                    kl[r]
                );
                for (g, w) in grad[r * 5..(r + 1) * 5].iter().zip(&want_grad) {
                    assert!(
                        (*g as f64 - w).abs() < 1e-5,
                        "row {r}: {grad:?} vs {want_grad:?}"
                    );
                }
            }
            assert!(kl[1].abs() < 1e-6, "a uniform policy is at zero");
        }
    }
}
