//! Fused kernels vs the unfused burn path, on the CPU backend (`Flex`), in one run.
//!
//! `cargo bench -p roll-flow-kernels --bench kernels` (add `-- --quick` for fewer
//! repetitions, `-- --parts` for the CPU twins alone on host slices, part by part, to see
//! what the tensor API and autodiff add). Prints median wall times, the PyTorch eager peers
//! of docs/REFERENCE.md (measured on the same 2-core machine) and the memory floor at 20 GB/s.

use std::hint::black_box;
use std::time::{Duration, Instant};

use burn::backend::{Autodiff, Flex};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use roll_flow_kernels::{reference, ClipSettings, PpoStats};

type B = Flex;
type A = Autodiff<Flex>;

const FLOOR_BYTES_PER_S: f64 = 20e9;

fn median(mut f: impl FnMut(), reps: usize) -> Duration {
    f(); // warm-up
    let mut times: Vec<Duration> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[reps / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn row(what: &str, fused: Duration, unfused: Duration, peer_ms: f64, floor_bytes: f64) {
    let floor = floor_bytes / FLOOR_BYTES_PER_S * 1e3;
    println!(
        "| {what} | {:.3} | {:.3} | {:.1}x | {peer_ms} | {:.1}x | {:.3} | {:.2}x |",
        ms(fused),
        ms(unfused),
        ms(unfused) / ms(fused),
        peer_ms / ms(fused),
        floor,
        ms(fused) / floor,
    );
}

fn lcg(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 40) as f32 / (1u64 << 24) as f32
}

/// The PPO benchmark batch: 2048 sequences × 512 tokens (the first 64 of each masked
/// out), ratios within ±0.2 of 1 in log space, advantages in ±0.5; ε 0.2/0.28, dual clip 3.
struct PpoBatch {
    offsets: Vec<usize>,
    old: Vec<f32>,
    logp: Vec<f32>,
    adv: Vec<f32>,
    mask: Vec<f32>,
    config: ClipSettings,
}

fn ppo_batch(seed: &mut u64) -> PpoBatch {
    let (s, t) = (2048, 512);
    let n = s * t;
    let old: Vec<f32> = (0..n).map(|_| -5.0 * lcg(seed)).collect();
    PpoBatch {
        offsets: (0..=s).map(|i| i * t).collect(),
        logp: old.iter().map(|&o| o + 0.4 * (lcg(seed) - 0.5)).collect(),
        old,
        adv: (0..n).map(|_| lcg(seed) - 0.5).collect(),
        mask: (0..n).map(|i| if i % t < 64 { 0.0 } else { 1.0 }).collect(),
        config: ClipSettings {
            high: 0.28,
            dual_clip: Some(3.0),
            ..Default::default()
        },
    }
}

/// The CPU twins on host slices: log-prob forward and backward, GAE, PPO forward and
/// backward (same shapes as the table).
fn print_parts(logits: &Tensor<B, 2>, reps: usize) {
    use roll_flow_kernels::cpu;
    let [n, v] = logits.dims();
    let host: Vec<f32> = logits.clone().into_data().into_vec().unwrap();
    let t: Vec<usize> = (0..n).map(|i| (i * 7919) % v).collect();
    let fwd = median(
        || {
            black_box(cpu::logprob::logprob_entropy_forward(&host, &t, 1.0));
        },
        reps,
    );
    let (out, lse) = cpu::logprob::logprob_entropy_forward(&host, &t, 1.0);
    let grad: Vec<f32> = (0..2 * n).map(|i| (i % 3) as f32 - 1.0).collect();
    let bwd = median(
        || {
            black_box(cpu::logprob::logprob_entropy_backward(
                &host, &t, &lse, &out, &grad, 1.0,
            ));
        },
        reps,
    );
    let mut scratch = host.clone();
    let in_place = median(
        || {
            cpu::logprob::logprob_entropy_backward_in_place(
                &mut scratch,
                &t,
                &lse,
                &out,
                &grad,
                1.0,
            );
        },
        reps,
    );
    println!(
        "log-prob slices: forward {:.3} ms, backward {:.3} ms, backward in place {:.3} ms",
        ms(fwd),
        ms(bwd),
        ms(in_place)
    );
    let mut seed = 3u64;
    let (s, len) = (256, 512);
    let offsets: Vec<usize> = (0..=s).map(|i| i * len).collect();
    let r: Vec<f32> = (0..s * len).map(|_| lcg(&mut seed) - 0.5).collect();
    let vals: Vec<f32> = (0..s * len).map(|_| lcg(&mut seed) - 0.5).collect();
    let mask = vec![1.0f32; s * len];
    let gae = median(
        || {
            black_box(cpu::gae::gae(&r, &vals, &mask, &offsets, 1.0, 0.95));
        },
        reps * 10,
    );
    let device = Default::default();
    let column =
        |v: &Vec<f32>| Tensor::<B, 1>::from_data(TensorData::new(v.clone(), [v.len()]), &device);
    let (rt, vt, mt) = (column(&r), column(&vals), column(&mask));
    let api = median(
        || {
            black_box(
                roll_flow_kernels::gae(rt.clone(), vt.clone(), mt.clone(), &offsets, 1.0, 0.95)
                    .unwrap(),
            );
        },
        reps * 10,
    );
    let api_data = median(
        || {
            let (a, g) =
                roll_flow_kernels::gae(rt.clone(), vt.clone(), mt.clone(), &offsets, 1.0, 0.95)
                    .unwrap();
            black_box((a.into_data(), g.into_data()));
        },
        reps * 10,
    );
    println!(
        "GAE slices: {:.3} ms, tensor API {:.3} ms, + into_data {:.3} ms",
        ms(gae),
        ms(api),
        ms(api_data)
    );
    let batch = ppo_batch(&mut seed);
    let x = cpu::ppo::PpoSlices {
        logp: &batch.logp,
        old_logp: &batch.old,
        advantages: &batch.adv,
        mask: &batch.mask,
        weight: None,
    };
    let (offsets, config) = (&batch.offsets, &batch.config);
    let fwd = median(
        || {
            black_box(cpu::ppo::ppo_clip_forward(x, offsets, config));
        },
        reps,
    );
    let (_, _, weights) = cpu::ppo::ppo_clip_forward(x, offsets, config);
    let bwd = median(
        || {
            black_box(cpu::ppo::ppo_clip_backward(
                x, offsets, &weights, 1.0, config,
            ));
        },
        reps,
    );
    println!(
        "PPO slices: forward {:.3} ms, backward {:.3} ms",
        ms(fwd),
        ms(bwd)
    );
}

fn main() {
    // glibc with raised mmap/trim thresholds (ROLL_FLOW_DEFAULT_MALLOC=1 keeps its defaults);
    // the roll-flow binary itself uses mimalloc (src/allocator.rs).
    roll_flow_kernels::cpu::keep_freed_buffers_for_reuse();
    let quick = std::env::args().any(|a| a == "--quick");
    let parts = std::env::args().any(|a| a == "--parts");
    let reps = if quick { 3 } else { 11 };
    let device = Default::default();
    println!("| kernel | fused ms | unfused burn ms | fused vs unfused | PyTorch ms | vs PyTorch | floor ms | fused / floor |");
    println!("|---|---|---|---|---|---|---|---|");

    // Token log-prob + entropy, 2048 × 32000 f32 logits, forward.
    let (n, v) = (2048, 32_000);
    let logits = Tensor::<B, 2>::random([n, v], Distribution::Normal(0.0, 3.0), &device);
    let mut seed = 7u64;
    let targets: Vec<i64> = (0..n)
        .map(|_| (lcg(&mut seed) * v as f32) as i64 % v as i64)
        .collect();
    let targets = Tensor::<B, 1, Int>::from_data(TensorData::new(targets, [n]), &device);
    let fused = median(
        || {
            let out =
                roll_flow_kernels::token_logprob_entropy(logits.clone(), targets.clone(), 1.0)
                    .unwrap();
            black_box(out.logprob.into_data());
        },
        reps,
    );
    if parts {
        print_parts(&logits, reps);
        return;
    }
    let unfused = median(
        || {
            let (lp, h) = reference::logprob_entropy(logits.clone(), targets.clone(), 1.0);
            black_box((lp.into_data(), h.into_data()));
        },
        reps.min(5),
    );
    row(
        "log-prob + entropy fwd, 2048×32000",
        fused,
        unfused,
        190.0,
        (n * v * 4) as f64,
    );

    // The same, forward + backward (dlogits), under autodiff.
    let logits_a = Tensor::<A, 2>::from_inner(logits.clone());
    let targets_a = Tensor::<A, 1, Int>::from_inner(targets.clone());
    let fused_bwd = median(
        || {
            let x = logits_a.clone().require_grad();
            let out = roll_flow_kernels::token_logprob_entropy(x.clone(), targets_a.clone(), 1.0)
                .unwrap();
            let g = (out.logprob + out.entropy.mul_scalar(0.01))
                .sum()
                .backward();
            black_box(x.grad(&g));
        },
        reps.min(5),
    );
    let unfused_bwd = median(
        || {
            let x = logits_a.clone().require_grad();
            let (lp, h) = reference::logprob_entropy(x.clone(), targets_a.clone(), 1.0);
            let g = (lp + h.mul_scalar(0.01)).sum().backward();
            black_box(x.grad(&g));
        },
        3,
    );
    println!(
        "| log-prob + entropy fwd+bwd, 2048×32000 | {:.3} | {:.3} | {:.1}x | – | – | {:.3} | {:.2}x |",
        ms(fused_bwd),
        ms(unfused_bwd),
        ms(unfused_bwd) / ms(fused_bwd),
        (3 * n * v * 4) as f64 / FLOOR_BYTES_PER_S * 1e3,
        ms(fused_bwd) / ((3 * n * v * 4) as f64 / FLOOR_BYTES_PER_S * 1e3),
    );
    drop((logits, logits_a));

    // GAE, 256 sequences × 512 tokens (all response tokens).
    let (s, t) = (256, 512);
    let offsets: Vec<usize> = (0..=s).map(|i| i * t).collect();
    let rand = |seed: &mut u64| -> Vec<f32> { (0..s * t).map(|_| lcg(seed) - 0.5).collect() };
    let vec1 = |v: Vec<f32>| Tensor::<B, 1>::from_data(TensorData::new(v, [s * t]), &device);
    let (r, vals, mask) = (
        vec1(rand(&mut seed)),
        vec1(rand(&mut seed)),
        vec1(vec![1.0; s * t]),
    );
    let fused = median(
        || {
            let (a, g) =
                roll_flow_kernels::gae(r.clone(), vals.clone(), mask.clone(), &offsets, 1.0, 0.95)
                    .unwrap();
            black_box((a.into_data(), g.into_data()));
        },
        reps * 10,
    );
    let unfused = median(
        || {
            let (a, g) = reference::gae(r.clone(), vals.clone(), mask.clone(), &offsets, 1.0, 0.95);
            black_box((a.into_data(), g.into_data()));
        },
        reps.min(5),
    );
    row("GAE, 256×512", fused, unfused, 18.0, (5 * s * t * 4) as f64);

    // PPO clipped loss, 1M tokens (2048 sequences × 512), forward + backward.
    let batch = ppo_batch(&mut seed);
    let n = batch.logp.len();
    let vec_a = |v: &Vec<f32>| Tensor::<A, 1>::from_data(TensorData::new(v.clone(), [n]), &device);
    let (lp, o, a) = (vec_a(&batch.logp), vec_a(&batch.old), vec_a(&batch.adv));
    let m = vec_a(&batch.mask);
    let (offsets, config) = (&batch.offsets, &batch.config);
    let fused = median(
        || {
            let x = lp.clone().require_grad();
            let out = roll_flow_kernels::ppo_clip_loss(
                x.clone(),
                o.clone(),
                a.clone(),
                m.clone(),
                offsets,
                config,
            )
            .unwrap();
            let g = out.loss.backward();
            black_box((x.grad(&g), PpoStats::from_tensor(out.stats)));
        },
        reps,
    );
    let unfused = median(
        || {
            let x = lp.clone().require_grad();
            let (loss, stats) = reference::ppo_clip_loss(
                x.clone(),
                o.clone(),
                a.clone(),
                m.clone(),
                None,
                offsets,
                config,
            );
            let g = loss.backward();
            black_box((x.grad(&g), stats));
        },
        reps.min(5),
    );
    row(
        "PPO clip loss fwd+bwd, 1M tokens",
        fused,
        unfused,
        240.0,
        (9 * n * 4) as f64,
    );
}
