//! [`Trainable::accumulate_zero`] against the passes it replaces: after a first update,
//! an update whose PPO advantages are all 0, computed through the real loss (scoring,
//! clipped surrogate, backward), and one from `accumulate_zero` leave the same weights and
//! AdamW state bit for bit, with a full model and with LoRA adapters (whose frozen base
//! weights get no zero gradient). Neither update is a no-op: AdamW's moments move the
//! weights.

use super::lora_tests::params;
use super::*;
use crate::runtime::scoring::{score_responses, token_column, ScoreOptions};
use roll_flow_algo::packed_layout::PackedLayout;
use roll_flow_algo::test_batches::with_masks;
use roll_flow_algo::{actor_objective, ActorExtras, PolicyInputs, PolicyLoss, Regularisers};
use roll_flow_engine::Batch;
use roll_flow_model::lora::attach_lora;
use roll_flow_model::lora_spec::{LoraSpec, TARGET_NAMES};

type Model = roll_flow_model::Qwen2CausalLm<TrainBackend<CpuBackend>>;
type Loss = Tensor<TrainBackend<CpuBackend>, 1>;

/// Every float parameter's bits, in visiting order.
fn bits(model: &Model) -> Vec<Vec<u32>> {
    let values = params(model).into_iter().map(|(_, values)| values);
    values
        .map(|v| v.iter().map(|x| x.to_bits()).collect())
        .collect()
}

/// Each parameter's optimizer state as the bytes a checkpoint writes (none where it has
/// none), in visiting order (the checkpoint's map is keyed by ids, which differ between
/// two models built alike).
fn state_bytes(train: &Trainable<Model, CpuBackend>) -> Vec<Option<Vec<u8>>> {
    let mut state = train.optimizer.to_record();
    (params(train.module()).into_iter())
        .map(|(id, _)| state.remove(&id))
        .map(|s| s.map(|s| Record::default().record(s, ()).unwrap()))
        .collect()
}

/// Three samples with 1, 4 and 2 response tokens.
fn batch() -> Batch {
    with_masks(&[&[0, 0, 1][..], &[0, 1, 1, 1, 1], &[0, 0, 0, 1, 1, 0]])
}

/// The default PPO clip loss with every advantage `a` and π_old the current log-probs.
fn ppo_loss(
    a: f32,
) -> impl Fn(&Model, &Batch) -> Result<(Loss, PartStats<CpuBackend>), String> + Sync {
    move |m, b| {
        let scored = score_responses(m, b, 1.0, &Default::default(), ScoreOptions::default())?;
        let n = b.num_tokens();
        let logprob = token_column(scored.logprobs, &scored.token_index, n);
        let layout =
            PackedLayout::from_batch(b, "test", false, &m.device()).map_err(|e| e.to_string())?;
        let inputs = PolicyInputs {
            old_logprob: logprob.clone().detach(),
            logprob,
            advantages: Tensor::full([n], a, &m.device()),
            layout: &layout,
        };
        let extras = ActorExtras {
            behaviour_logprob: None,
            ref_logprob: None,
            entropy: None,
            uniform_kl: None,
        };
        let out = actor_objective(
            &PolicyLoss::default(),
            &inputs,
            extras,
            Regularisers::default(),
        )
        .map_err(|e| e.to_string())?;
        Ok((out.loss, out.stats))
    }
}

fn trainable(lora: bool) -> Trainable<Model, CpuBackend> {
    let mut model = crate::runtime::concurrent::tests::model();
    if lora {
        let spec = LoraSpec {
            rank: 2,
            alpha: 4.0,
            targets: TARGET_NAMES.iter().map(|t| t.to_string()).collect(),
            dropout: 0.0,
        };
        model = attach_lora(model, &spec, 5);
    }
    Trainable::new(model, OptimSpec::default(), 10).unwrap()
}

#[test]
fn zero_gradients_update_as_a_zero_advantage_loss_does() {
    for lora in [false, true] {
        let parts = vec![batch()];
        let (mut passes, mut zeros) = (trainable(lora), trainable(lora));
        assert!(!zeros.accumulate_zero(), "no state before the first update");
        for train in [&mut passes, &mut zeros] {
            train
                .accumulate_parts(&parts, &[1.0], &[0], ppo_loss(1.0))
                .unwrap();
            assert!(train.apply(0).unwrap().grad_norm > 0.0);
        }
        assert!(bits(passes.module()) == bits(zeros.module()));
        let before = bits(passes.module());

        passes
            .accumulate_parts(&parts, &[1.0], &[0], ppo_loss(0.0))
            .unwrap();
        let by_passes = passes.apply(1).unwrap();
        assert!(zeros.accumulate_zero());
        let by_zeros = zeros.apply(1).unwrap();

        assert_eq!(by_passes, by_zeros, "lora {lora}");
        assert_eq!(by_passes.grad_norm, 0.0);
        assert!(by_passes.update_norm > 0.0, "{by_passes:?}");
        assert!(bits(passes.module()) == bits(zeros.module()), "lora {lora}");
        assert!(
            bits(passes.module()) != before,
            "the update moved no weight"
        );
        let state = state_bytes(&passes);
        assert!(
            state == state_bytes(&zeros),
            "lora {lora}: the optimizer states differ"
        );
        let held = state.iter().filter(|s| s.is_some()).count();
        assert_eq!(held, if lora { 14 } else { state.len() }, "lora {lora}");
    }
}
