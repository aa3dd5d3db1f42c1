//! The PPO clip loss, its statistics and its gradient against the reference, over every
//! aggregation, with and without dual clip.

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use roll_flow_kernels::{reference, ClipSettings, KernelBackend, LossAgg, PpoStats};

use super::gae::packed;
use super::{assert_close, assert_close_scaled, host, vector, Rng};

fn ppo_configs() -> Vec<ClipSettings> {
    let mut configs = Vec::new();
    for agg in [
        LossAgg::TokenMean,
        LossAgg::SeqMeanTokenSum,
        LossAgg::SeqMeanTokenMean,
        LossAgg::SeqMeanTokenSumNorm,
    ] {
        for (dual_clip, high) in [(None, 0.2), (Some(3.0), 0.28)] {
            configs.push(ClipSettings {
                low: 0.2,
                high,
                dual_clip,
                agg,
                norm_length: None,
            });
        }
    }
    configs.push(ClipSettings {
        agg: LossAgg::SeqMeanTokenSumNorm,
        norm_length: Some(700),
        ..Default::default()
    });
    configs
}

pub fn ppo_forward_backward<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    // 700 sequences: more than one block of the CubeCL combine (256 a block).
    let shapes = [(1, 9), (13, 50), (200, 600), (700, 30)];
    for (k, &(sequences, max_len)) in shapes.iter().enumerate() {
        let mut rng = Rng::new(300 + k as u64);
        let (offsets, mask) = packed(&mut rng, sequences, max_len);
        let n = mask.len();
        let old: Vec<f32> = (0..n).map(|_| -rng.unit() * 5.0).collect();
        let logp: Vec<f32> = old.iter().map(|&o| o + 0.3 * rng.normal()).collect();
        let adv: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
        // Token weights as decoupled PPO makes them: some masked to 0, the rest in [0, 2).
        let weight: Vec<f32> = (0..n)
            .map(|_| {
                if rng.below(5) == 0 {
                    0.0
                } else {
                    2.0 * rng.unit()
                }
            })
            .collect();
        for (c, config) in ppo_configs().into_iter().enumerate() {
            let weighted = c % 3 == 1;
            let what = format!("{sequences} seqs {config:?} weighted {weighted}");
            let run = |fused: bool| {
                let x = vector::<B>(logp.clone(), device).require_grad();
                let (o, a, m) = (
                    vector::<B>(old.clone(), device),
                    vector::<B>(adv.clone(), device),
                    vector::<B>(mask.clone(), device),
                );
                let w = weighted.then(|| vector::<B>(weight.clone(), device));
                let (loss, stats) = if fused {
                    let out = roll_flow_kernels::ppo_clip_loss_weighted(
                        x.clone(),
                        o,
                        a,
                        m,
                        w,
                        &offsets,
                        &config,
                    )
                    .unwrap();
                    (out.loss, PpoStats::from_tensor(out.stats))
                } else {
                    reference::ppo_clip_loss(x.clone(), o, a, m, w, &offsets, &config)
                };
                let grad = host(x.grad(&loss.clone().mul_scalar(1.5).backward()).unwrap());
                (host(loss), stats, grad)
            };
            let (loss, stats, grad) = run(true);
            let (ref_loss, ref_stats, ref_grad) = run(false);
            assert_close(&format!("loss {what}"), &loss, &ref_loss, 1e-5, 1e-4);
            assert_close(
                &format!("stats {what}"),
                &stats.to_vec(),
                &ref_stats.to_vec(),
                1e-5,
                1e-4,
            );
            assert_close_scaled(&format!("dlogp {what}"), &grad, &ref_grad, 1e-7, 1e-4);
        }
    }
}

/// The PPO backward from a forward that carries per-sequence weights (`PpoSaved::
/// SequenceWeights`, as the CPU backends keep and a caller building the forward's results
/// by hand passes) equals the backward from the backend's own forward: the CubeCL backward,
/// whose forward keeps token gradients instead, runs the partials again for them.
pub fn ppo_backward_without_the_saved_gradient<B: KernelBackend>(device: &B::Device) {
    use burn::tensor::TensorPrimitive;
    use roll_flow_kernels::{PpoForward, PpoSaved, PpoTokens};
    let mut rng = Rng::new(390);
    let (offsets, mask) = packed(&mut rng, 40, 30);
    let n = mask.len();
    let old: Vec<f32> = (0..n).map(|_| -rng.unit() * 5.0).collect();
    let logp: Vec<f32> = old.iter().map(|&o| o + 0.3 * rng.normal()).collect();
    let adv: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
    let column = |v: &[f32]| vector::<B>(v.to_vec(), device).into_primitive().tensor();
    let tokens = || PpoTokens::<B> {
        logp: column(&logp),
        old_logp: column(&old),
        advantages: column(&adv),
        mask: column(&mask),
        weight: None,
    };
    let config = ClipSettings {
        high: 0.28,
        dual_clip: Some(3.0),
        agg: LossAgg::SeqMeanTokenMean,
        ..Default::default()
    };
    let forward = B::ppo_clip_forward(tokens(), &offsets, &config);
    let counts: Vec<f64> = offsets
        .windows(2)
        .map(|w| mask[w[0]..w[1]].iter().map(|&m| f64::from(m)).sum())
        .collect();
    let weights = roll_flow_kernels::sequence_weights(&counts, config.agg, None);
    let weights: Vec<f32> = weights.iter().map(|&w| w as f32).collect();
    let by_hand = PpoForward {
        saved: PpoSaved::SequenceWeights(column(&weights)),
        ..forward.clone()
    };
    let backward = |f: PpoForward<B>| {
        let d = B::ppo_clip_backward(tokens(), &offsets, f, column(&[1.5]), &config);
        host(Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(d)))
    };
    let (own, given) = (backward(forward), backward(by_hand));
    assert_close_scaled("dlogp from given weights", &given, &own, 1e-7, 1e-6);
}
