//! [`KernelBackend`] for burn's `NdArray` CPU backend (feature `ndarray`): its tensors go
//! to the host as `TensorData`, through the fused Rust twins of the `Flex` backend, and
//! back (one copy each way). It exists so that code written against the kernels (the
//! model's log-prob path) also runs on `NdArray`, e.g. in the model throughput benchmark's
//! backend comparison; `Flex` is the fast CPU path.

use burn::backend::{Flex, NdArray};
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{Int, Tensor, TensorPrimitive};
use burn_flex::FlexTensor;

use crate::backend::{GaeTokens, KernelBackend, LogProbSaved, PpoForward, PpoTokens};
use crate::ppo_clip::ClipSettings;

fn to_flex<const D: usize>(t: FloatTensor<NdArray>) -> FlexTensor {
    let data = Tensor::<NdArray, D>::from_primitive(TensorPrimitive::Float(t)).into_data();
    FlexTensor::from_data(data)
}

fn int_to_flex(t: IntTensor<NdArray>) -> FlexTensor {
    FlexTensor::from_data(Tensor::<NdArray, 1, Int>::from_primitive(t).into_data())
}

fn from_flex<const D: usize>(t: FlexTensor) -> FloatTensor<NdArray> {
    let data = Tensor::<Flex, D>::from_primitive(TensorPrimitive::Float(t)).into_data();
    Tensor::<NdArray, D>::from_data(data, &Default::default())
        .into_primitive()
        .tensor()
}

impl KernelBackend for NdArray {
    fn logprob_entropy_forward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        temperature: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (out, lse) =
            Flex::logprob_entropy_forward(to_flex::<2>(logits), int_to_flex(targets), temperature);
        (from_flex::<2>(out), from_flex::<1>(lse))
    }

    fn logprob_entropy_backward(
        saved: LogProbSaved<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let saved = LogProbSaved {
            logits: to_flex::<2>(saved.logits),
            targets: int_to_flex(saved.targets),
            lse: to_flex::<1>(saved.lse),
            out: to_flex::<2>(saved.out),
            temperature: saved.temperature,
        };
        from_flex::<2>(Flex::logprob_entropy_backward(saved, to_flex::<2>(grad)))
    }

    fn gae(
        tokens: GaeTokens<Self>,
        offsets: &[usize],
        gamma: f32,
        lambda: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (a, r) = Flex::gae(tokens.map(to_flex::<1>), offsets, gamma, lambda);
        (from_flex::<1>(a), from_flex::<1>(r))
    }

    fn ppo_clip_forward(
        tokens: PpoTokens<Self>,
        offsets: &[usize],
        config: &ClipSettings,
    ) -> PpoForward<Self> {
        Flex::ppo_clip_forward(tokens.map(to_flex::<1>), offsets, config).map(from_flex::<1>)
    }

    fn ppo_clip_backward(
        tokens: PpoTokens<Self>,
        offsets: &[usize],
        forward: PpoForward<Self>,
        grad: FloatTensor<Self>,
        config: &ClipSettings,
    ) -> FloatTensor<Self> {
        from_flex::<1>(Flex::ppo_clip_backward(
            tokens.map(to_flex::<1>),
            offsets,
            forward.map(to_flex::<1>),
            to_flex::<1>(grad),
            config,
        ))
    }
}
