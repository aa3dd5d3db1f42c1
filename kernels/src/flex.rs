//! [`KernelBackend`] for burn's CPU backend `Flex`: the fused Rust twins of [`crate::cpu`],
//! reading the tensors' storage in place (no copy for contiguous f32 tensors).

use std::borrow::Cow;

use burn::backend::Flex;
use burn::tensor::TensorData;
use burn_flex::FlexTensor;

use crate::backend::{KernelBackend, PpoForward};
use crate::{cpu, PpoClipConfig};

/// The tensor's values as f32: borrowed when contiguous f32, converted otherwise.
fn host_f32(t: &FlexTensor) -> Cow<'_, [f32]> {
    match t.as_slice::<f32>() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(
            t.clone()
                .into_data()
                .convert::<f32>()
                .into_vec::<f32>()
                .expect("converted to f32"),
        ),
    }
}

/// The values of an int tensor as indices (negative values panic with a message).
fn host_index(t: &FlexTensor) -> Vec<usize> {
    let data = t.clone().into_data().convert::<i64>();
    data.iter::<i64>()
        .map(|v| usize::try_from(v).unwrap_or_else(|_| panic!("negative index {v}")))
        .collect()
}

fn tensor(values: Vec<f32>, shape: &[usize]) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape.to_vec()))
}

impl KernelBackend for Flex {
    fn logprob_entropy_forward(
        logits: FlexTensor,
        targets: FlexTensor,
        temperature: f32,
    ) -> (FlexTensor, FlexTensor) {
        let targets = host_index(&targets);
        let n = targets.len();
        let (out, lse) =
            cpu::logprob::logprob_entropy_forward(&host_f32(&logits), &targets, temperature);
        (tensor(out, &[n, 2]), tensor(lse, &[n]))
    }

    fn logprob_entropy_backward(
        logits: FlexTensor,
        targets: FlexTensor,
        lse: FlexTensor,
        out: FlexTensor,
        grad: FlexTensor,
        temperature: f32,
    ) -> FlexTensor {
        let shape = burn::tensor::TensorMetadata::shape(&logits);
        let targets = host_index(&targets);
        let d = cpu::logprob::logprob_entropy_backward(
            &host_f32(&logits),
            &targets,
            &host_f32(&lse),
            &host_f32(&out),
            &host_f32(&grad),
            temperature,
        );
        tensor(d, &shape)
    }

    fn gae(
        rewards: FlexTensor,
        values: FlexTensor,
        mask: FlexTensor,
        offsets: &[usize],
        gamma: f32,
        lambda: f32,
    ) -> (FlexTensor, FlexTensor) {
        let (adv, ret) = cpu::gae::gae(
            &host_f32(&rewards),
            &host_f32(&values),
            &host_f32(&mask),
            offsets,
            gamma,
            lambda,
        );
        let n = adv.len();
        (tensor(adv, &[n]), tensor(ret, &[n]))
    }

    fn ppo_clip_forward(
        logp: FlexTensor,
        old_logp: FlexTensor,
        advantages: FlexTensor,
        mask: FlexTensor,
        offsets: &[usize],
        config: &PpoClipConfig,
    ) -> PpoForward<Self> {
        let (loss, stats, weights) = cpu::ppo::ppo_clip_forward(
            &host_f32(&logp),
            &host_f32(&old_logp),
            &host_f32(&advantages),
            &host_f32(&mask),
            offsets,
            config,
        );
        let s = weights.len();
        PpoForward {
            loss: tensor(vec![loss], &[1]),
            stats: tensor(stats.to_vec(), &[4]),
            seq_weight: tensor(weights, &[s]),
        }
    }

    fn ppo_clip_backward(
        logp: FlexTensor,
        old_logp: FlexTensor,
        advantages: FlexTensor,
        mask: FlexTensor,
        offsets: &[usize],
        seq_weight: FlexTensor,
        grad: FlexTensor,
        config: &PpoClipConfig,
    ) -> FlexTensor {
        let d = cpu::ppo::ppo_clip_backward(
            &host_f32(&logp),
            &host_f32(&old_logp),
            &host_f32(&advantages),
            &host_f32(&mask),
            offsets,
            &host_f32(&seq_weight),
            host_f32(&grad)[0],
            config,
        );
        let n = d.len();
        tensor(d, &[n])
    }
}
