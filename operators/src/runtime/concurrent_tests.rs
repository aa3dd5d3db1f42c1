//! Micro-batches: the scaled gradients of a split mini-batch (cut in batch order or by
//! length) sum to the whole mini-batch's gradient in every aggregation mode, and
//! concurrent parts give bit-identical gradients to parts computed on one thread.
//!
//! The loss is the aggregated response-token log-prob of a tiny random Qwen2 (the terms
//! of the actor objective are aggregated this way). Tolerance: |split − whole| ≤ 1e-6 +
//! 1e-4·max |whole| per gradient (f32 sums in another order).

use std::collections::BTreeMap;

use burn::module::Param;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use roll_flow_engine::Batch;

use crate::runtime::scoring::{score_responses, token_column, ScoreOptions};
use crate::runtime::TrainBackend;
use crate::training::epochs::{loss_divisor, micro_batches, parts_of, MicroBatching};
use roll_flow_algo::aggregation::aggregate;
use roll_flow_algo::packed_layout::PackedLayout;
use roll_flow_algo::test_batches::with_masks;
use roll_flow_algo::LossAgg;
use roll_flow_model::config::{Qwen2Config, TinyArch};
use roll_flow_model::Qwen2CausalLm;

type Model = Qwen2CausalLm<TrainBackend>;

/// A one-layer 16-wide Qwen2 with large random weights (init std 0.2), so log-probs and
/// their gradients are far from uniform.
pub(crate) fn model() -> Model {
    let arch = TinyArch {
        layers: 1,
        dim: 16,
        heads: 2,
        max_positions: 64,
        ..Default::default()
    };
    let mut config = Qwen2Config::tiny(&arch, 64);
    config.initializer_range = 0.2;
    Qwen2CausalLm::random(&config, 3, &Default::default())
}

/// Four samples with 1, 4, 2 and 0 response tokens after prompts of different lengths.
/// Micro-batches of `samples` samples, cut by length.
fn count(samples: usize) -> MicroBatching {
    MicroBatching {
        samples: Some(samples),
        ..MicroBatching::default()
    }
}

fn batch() -> Batch {
    with_masks(&[
        &[0, 0, 1][..],
        &[0, 1, 1, 1, 1],
        &[0, 0, 0, 1, 1, 0],
        &[0, 0],
    ])
}

fn loss(
    agg: LossAgg,
    norm: Option<u32>,
) -> impl Fn(&Model, &Batch) -> Result<(Tensor<TrainBackend, 1>, ()), String> + Sync {
    loss_scored(agg, norm, ScoreOptions::default())
}

fn loss_scored(
    agg: LossAgg,
    norm: Option<u32>,
    options: ScoreOptions,
) -> impl Fn(&Model, &Batch) -> Result<(Tensor<TrainBackend, 1>, ()), String> + Sync {
    move |m, b| {
        let scored = score_responses(m, b, 1.0, &BTreeMap::new(), options)?;
        let logp = token_column(scored.logprobs, &scored.token_index, b.num_tokens());
        let layout = PackedLayout::from_batch(b, "test", false, &Default::default())
            .map_err(|e| e.to_string())?;
        Ok((aggregate(logp, &layout, agg, norm), ()))
    }
}

/// The summed gradients of the parts, in order.
fn summed(m: &Model, grads: Vec<(GradientsParams, ())>) -> GradientsParams {
    let mut acc = GradientsAccumulator::<Model>::new();
    for (g, ()) in grads {
        acc.accumulate(m, g);
    }
    acc.grads()
}

/// Host values of a parameter's gradient.
fn grad_of<const D: usize>(
    grads: &GradientsParams,
    param: &Param<Tensor<TrainBackend, D>>,
) -> Vec<f32> {
    let g: Tensor<<TrainBackend as AutodiffBackend>::InnerBackend, D> =
        grads.get(param.id).expect("a gradient for the parameter");
    g.into_data().into_vec::<f32>().unwrap()
}

fn probes(m: &Model, grads: &GradientsParams) -> Vec<Vec<f32>> {
    let layer = &m.model.layers[0];
    vec![
        grad_of(grads, &m.model.embed_tokens.weight),
        grad_of(grads, &m.model.norm.weight),
        grad_of(grads, &layer.self_attn.q_proj.weight),
        grad_of(grads, &layer.mlp.down_proj.weight),
    ]
}

/// The probed gradients of `split` parts equal the `whole` batch's within the stated
/// tolerance, and are not all zero.
fn assert_whole_batch_gradient(
    m: &Model,
    split: &GradientsParams,
    whole: &GradientsParams,
    what: &str,
) {
    for (got, want) in probes(m, split).iter().zip(probes(m, whole)) {
        let scale = want.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        assert!(scale > 1e-6, "{what}: the loss has a gradient");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-6 + 1e-4 * scale,
                "{what}: {g} vs whole batch {w}"
            );
        }
    }
}

#[test]
fn split_micro_batches_give_the_whole_batch_gradient() {
    let (m, b) = (model(), batch());
    let modes = [
        (LossAgg::TokenMean, None),
        (LossAgg::SeqMeanTokenSum, None),
        (LossAgg::SeqMeanTokenMean, None),
        (LossAgg::SeqMeanTokenSumNorm, None),
        (LossAgg::SeqMeanTokenSumNorm, Some(8)),
    ];
    for (agg, norm) in modes {
        let whole = summed(
            &m,
            part_gradients(&m, std::slice::from_ref(&b), &[1.0], true, loss(agg, norm)).unwrap(),
        );
        let cuts = [1, 3].into_iter().flat_map(|size| {
            [
                (size, "in batch order", parts_of(&b, Some(size))),
                (size, "by length", micro_batches(&b, count(size))),
            ]
        });
        // Token budgets over lengths 2, 3, 5, 6: 10 cuts (2, 3), (5), (6); 4 one sample a
        // part.
        let budgets = [4, 10].into_iter().map(|tokens| {
            let cut = MicroBatching {
                tokens: Some(tokens),
                ..MicroBatching::default()
            };
            (tokens, "within a token budget", micro_batches(&b, cut))
        });
        let cuts = cuts.chain(budgets);
        for (size, how, parts) in cuts {
            let total = loss_divisor(&b, agg, norm).unwrap();
            let scales: Vec<f32> = parts
                .iter()
                .map(|p| (loss_divisor(p, agg, norm).unwrap() / total) as f32)
                .collect();
            let split = summed(
                &m,
                part_gradients(&m, &parts, &scales, true, loss(agg, norm)).unwrap(),
            );
            let what = format!("{agg:?} norm {norm:?}, parts of {size} {how}");
            assert_whole_batch_gradient(&m, &split, &whole, &what);
        }
    }
}

/// Two prompts' samples, interleaved: prompt `[5, 6, 7]` with replies `[1, 2, 3]`,
/// `[1, 3]`, `[4]` (longest 6 tokens); prompt `[8, 9]` with replies `[1]`, `[2, 2, 2]`,
/// `[3, 1]` (longest 5).
fn grouped_batch() -> Batch {
    let samples: [(&[u32], &[u32]); 6] = [
        (&[5, 6, 7], &[1, 2, 3]),
        (&[8, 9], &[1]),
        (&[5, 6, 7], &[1, 3]),
        (&[8, 9], &[2, 2, 2]),
        (&[5, 6, 7], &[4]),
        (&[8, 9], &[3, 1]),
    ];
    let seqs = samples.iter().map(|(p, r)| [*p, *r].concat());
    let mut batch = Batch::from_sequences(seqs.collect::<Vec<_>>());
    let mask = (samples.iter())
        .flat_map(|(p, r)| p.iter().map(|_| false).chain(r.iter().map(|_| true)))
        .collect::<Vec<bool>>();
    batch
        .set(&roll_flow_engine::batch::column::RESPONSE_MASK, mask)
        .unwrap();
    batch
}

/// `ActorStep(prefix_grouper: true)`: micro-batches of 3 hold one prompt's samples each
/// (the group with the shorter longest sample first), and scoring them prefix-grouped gives the gradient of the whole
/// batch scored one sample a row.
#[test]
fn prefix_grouped_micro_batches_give_the_whole_batch_gradient() {
    let (m, b) = (model(), grouped_batch());
    let cut = MicroBatching {
        by_prompt: true,
        ..count(3)
    };
    let parts = micro_batches(&b, cut);
    let firsts: Vec<Vec<u32>> = (parts.iter())
        .map(|p| (0..3).map(|i| p.tokens()[p.sample_range(i)][0]).collect())
        .collect();
    assert_eq!(firsts, [[8, 8, 8], [5, 5, 5]]);
    let grouped = ScoreOptions {
        prefix_grouped: true,
        ..ScoreOptions::default()
    };
    for agg in [LossAgg::TokenMean, LossAgg::SeqMeanTokenMean] {
        let whole = part_gradients(&m, std::slice::from_ref(&b), &[1.0], true, loss(agg, None));
        let whole = summed(&m, whole.unwrap());
        let total = loss_divisor(&b, agg, None).unwrap();
        let scales: Vec<f32> = (parts.iter())
            .map(|p| (loss_divisor(p, agg, None).unwrap() / total) as f32)
            .collect();
        let split = part_gradients(&m, &parts, &scales, true, loss_scored(agg, None, grouped));
        let split = summed(&m, split.unwrap());
        let what = format!("{agg:?}, prefix-grouped parts");
        assert_whole_batch_gradient(&m, &split, &whole, &what);
    }
}

#[test]
fn concurrent_parts_match_one_thread_and_one_after_another_bit_for_bit() {
    let (m, b) = (model(), batch());
    let parts = parts_of(&b, Some(2));
    let scales = [0.25f32, 0.75];
    let run = |threads: usize, concurrent: bool| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let loss = loss(LossAgg::TokenMean, None);
            let grads = part_gradients(&m, &parts, &scales, concurrent, loss);
            probes(&m, &summed(&m, grads.unwrap()))
        })
    };
    let sequential = run(2, false);
    assert_eq!(run(1, true), sequential);
    assert_eq!(run(2, true), sequential);
}

/// Every part's gradients and report, in part order ([`super::part_gradients`] into a vector).
fn part_gradients<B, M, P, S>(
    module: &M,
    parts: &[P],
    scales: &[f32],
    concurrent: bool,
    loss: impl Fn(&M, &P) -> Result<(Tensor<B, 1>, S), String> + Sync,
) -> Result<Vec<(GradientsParams, S)>, String>
where
    B: AutodiffBackend + roll_flow_kernels::KernelBackend,
    M: burn::module::AutodiffModule<B> + Sync,
    P: Sync,
    S: Send,
{
    let mut all = Vec::new();
    super::part_gradients(module, parts, scales, concurrent, loss, |p| all.push(p))?;
    Ok(all)
}

/// The actor objective's statistics are not read inside a micro-batch: they come back as
/// [`DeviceStats`](roll_flow_algo::DeviceStats), which hold no host value until resolved
/// (on a GPU a read in the forward would wait for it before the backward is queued), so
/// every part's loss and backward make no counted download; the trainer then reads every
/// part's statistics in one download, the same values each part's own read gives.
#[test]
fn loss_statistics_wait_for_the_backward_passes_and_come_back_in_one_download() {
    use roll_flow_algo::{actor_objective, ActorExtras, DeviceStats, PolicyInputs, PolicyLoss};
    use roll_flow_algo::{PpoClip, Regularisers};
    use roll_flow_kernels::host_transfer::transfers;
    let (m, b) = (model(), batch());
    let parts = parts_of(&b, Some(2));
    let objective = |m: &Model, b: &Batch| {
        let scored = score_responses(m, b, 1.0, &BTreeMap::new(), ScoreOptions::default())?;
        let n = b.num_tokens();
        let logprob = token_column(scored.logprobs, &scored.token_index, n);
        let entropy = token_column(scored.entropy, &scored.token_index, n);
        let layout = PackedLayout::from_batch(b, "test", false, &Default::default())
            .map_err(|e| e.to_string())?;
        let advantages: Vec<f32> = (0..n).map(|t| t as f32 * 0.5 - 1.0).collect();
        let inputs = PolicyInputs {
            old_logprob: logprob.clone().detach().add_scalar(0.3),
            logprob,
            advantages: layout.constant(advantages),
            layout: &layout,
        };
        let extras = ActorExtras {
            entropy: Some(entropy),
            ..Default::default()
        };
        let regularisers = Regularisers {
            entropy: 0.01,
            ..Default::default()
        };
        let loss = PolicyLoss::PpoClip(PpoClip::default());
        let out =
            actor_objective(&loss, &inputs, extras, regularisers).map_err(|e| e.to_string())?;
        Ok((out.loss, out.stats))
    };
    let before = transfers();
    let computed = part_gradients(&m, &parts, &[0.5, 0.5], false, objective).unwrap();
    assert_eq!(
        transfers().since(before).downloads,
        0,
        "a read inside a micro-batch"
    );
    let stats: Vec<DeviceStats<TrainBackend>> = computed.into_iter().map(|(_, s)| s).collect();
    let each: Vec<_> = stats.iter().map(|s| s.clone().resolve()).collect();
    let before = transfers();
    let all = DeviceStats::resolve_all(stats);
    assert_eq!(transfers().since(before).downloads, 1);
    assert_eq!(all, each);
    for part in &all {
        for key in ["pg_loss", "actor_loss", "entropy", "pg_clipfrac", "ppo_kl"] {
            assert!(part[key].is_finite(), "{key}: {part:?}");
        }
        // π_old = π + 0.3 everywhere: ppo_kl, the mean of old − logp, is 0.3.
        assert!((part["ppo_kl"] - 0.3).abs() < 1e-5, "{part:?}");
    }
}
