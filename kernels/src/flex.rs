//! [`KernelBackend`] for burn's CPU backend `Flex`: the fused Rust twins of [`crate::cpu`],
//! reading the tensors' storage in place (no copy for contiguous f32 tensors).

use std::borrow::Cow;

use burn::backend::Flex;
use burn::tensor::{DType, TensorData};
use burn_flex::FlexTensor;

use crate::backend::{
    GaeTokens, KernelBackend, LogProbSaved, PpoForward, PpoSaved, PpoTokens, SquareSum,
};
use crate::cpu;
use crate::cpu::linear::WeightLayout;
use crate::cpu::ppo::PpoSlices;
use crate::ppo_clip::ClipSettings;
use crate::unfused::DenseGradients;

/// The tensor's values as f32: borrowed when contiguous f32, copied block by block when an
/// f32 view has a unit-stride axis ([`contiguous_rows`]), converted by burn otherwise.
fn host_f32(t: &FlexTensor) -> Cow<'_, [f32]> {
    if let Some(s) = t.as_slice::<f32>() {
        return Cow::Borrowed(s);
    }
    match contiguous_rows(t) {
        Some(v) => Cow::Owned(v),
        None => Cow::Owned(
            t.clone()
                .into_data()
                .convert::<f32>()
                .into_vec::<f32>()
                .expect("converted to f32"),
        ),
    }
}

/// A dense layer's weight `[k, m]` as f32 and how it lies: in place when contiguous, or
/// when it is the transpose of a contiguous `[m, k]` matrix (a tied output head's view of
/// the embedding), a copy otherwise.
fn host_weight(t: &FlexTensor) -> (Cow<'_, [f32]>, WeightLayout) {
    let layout = t.layout();
    if let (DType::F32, &[k, m], &[1, row]) =
        (t.dtype(), layout.shape().as_slice(), layout.strides())
    {
        let start = layout.start_offset();
        if row == k as isize && k > 1 && m > 1 {
            let storage = t.storage::<f32>();
            return (
                Cow::Borrowed(&storage[start..start + k * m]),
                WeightLayout::OutIn,
            );
        }
    }
    (host_f32(t), WeightLayout::InOut)
}

/// A row-major copy of an f32 view with an axis of stride 1 ([`cpu::strided_copy`]).
fn contiguous_rows(t: &FlexTensor) -> Option<Vec<f32>> {
    if t.dtype() != burn::tensor::DType::F32 {
        return None;
    }
    let layout = t.layout();
    cpu::strided_copy::contiguous_copy(
        t.storage::<f32>(),
        layout.start_offset(),
        layout.shape(),
        layout.strides(),
    )
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
    /// f32 products through [`cpu::batched_matmul`] (each output summed in order, the same
    /// bits on every CPU); burn-flex's matmul for other dtypes and for shapes it refuses.
    fn matmul_forward(lhs: FlexTensor, rhs: FlexTensor) -> FlexTensor {
        let f32_pair = lhs.dtype() == DType::F32 && rhs.dtype() == DType::F32;
        let ordered = f32_pair.then(|| {
            fn view(t: &FlexTensor) -> (&[f32], usize, Vec<usize>, Vec<isize>) {
                let layout = t.layout();
                let strides = layout.strides().to_vec();
                (t.storage::<f32>(), layout.start_offset(), dims(t), strides)
            }
            let ((a, a_at, a_shape, a_strides), (b, b_at, b_shape, b_strides)) =
                (view(&lhs), view(&rhs));
            // Leading axes broadcast (a size-1 axis takes the other side's size); when the
            // shapes do not multiply, `batched_matmul` refuses before this shape is used.
            let rank = a_shape.len();
            let out_shape: Vec<usize> = (0..rank.saturating_sub(2))
                .map(|axis| a_shape[axis].max(b_shape.get(axis).copied().unwrap_or(1)))
                .chain(a_shape.get(rank.wrapping_sub(2)).copied())
                .chain(b_shape.last().copied())
                .collect();
            let lhs = cpu::batched_matmul::View {
                storage: a,
                offset: a_at,
                shape: &a_shape,
                strides: &a_strides,
            };
            let rhs = cpu::batched_matmul::View {
                storage: b,
                offset: b_at,
                shape: &b_shape,
                strides: &b_strides,
            };
            cpu::batched_matmul::batched_matmul(&lhs, &rhs).map(|out| tensor(out, &out_shape))
        });
        match ordered.flatten() {
            Some(out) => out,
            None => <Flex as burn::tensor::ops::FloatTensorOps<Flex>>::float_matmul(lhs, rhs),
        }
    }

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

    fn logprob_entropy_backward(saved: LogProbSaved<Self>, grad: FlexTensor) -> FlexTensor {
        let shape = burn::tensor::TensorMetadata::shape(&saved.logits);
        let targets = host_index(&saved.targets);
        let (lse, out, grad) = (host_f32(&saved.lse), host_f32(&saved.out), host_f32(&grad));
        let mut logits = saved.logits;
        // Logits nobody else holds (the usual case: the autodiff state owned the last
        // reference) become their own gradient: no second [N, V] buffer.
        let whole = logits
            .as_slice::<f32>()
            .is_some_and(|z| z.len() == logits.storage::<f32>().len());
        if whole {
            if let Some(z) = logits.try_storage_mut::<f32>() {
                cpu::logprob::logprob_entropy_backward_in_place(
                    z,
                    &targets,
                    &lse,
                    &out,
                    &grad,
                    saved.temperature,
                );
                return logits;
            }
        }
        let d = cpu::logprob::logprob_entropy_backward(
            &host_f32(&logits),
            &targets,
            &lse,
            &out,
            &grad,
            saved.temperature,
        );
        tensor(d, &shape)
    }

    fn gae(
        tokens: GaeTokens<Self>,
        offsets: &[usize],
        gamma: f32,
        lambda: f32,
    ) -> (FlexTensor, FlexTensor) {
        let (adv, ret) = cpu::gae::gae(
            &host_f32(&tokens.rewards),
            &host_f32(&tokens.values),
            &host_f32(&tokens.mask),
            offsets,
            gamma,
            lambda,
        );
        let n = adv.len();
        (tensor(adv, &[n]), tensor(ret, &[n]))
    }

    fn ppo_clip_forward(
        tokens: PpoTokens<Self>,
        offsets: &[usize],
        config: &ClipSettings,
    ) -> PpoForward<Self> {
        let (loss, stats, weights) =
            with_slices(&tokens, |x| cpu::ppo::ppo_clip_forward(x, offsets, config));
        let s = weights.len();
        PpoForward {
            loss: tensor(vec![loss], &[1]),
            stats: tensor(stats.to_vec(), &[4]),
            saved: PpoSaved::SequenceWeights(tensor(weights, &[s])),
        }
    }

    fn ppo_clip_backward(
        tokens: PpoTokens<Self>,
        offsets: &[usize],
        forward: PpoForward<Self>,
        grad: FlexTensor,
        config: &ClipSettings,
    ) -> FlexTensor {
        let seq_weight = match forward.saved {
            PpoSaved::SequenceWeights(w) => host_f32(&w).into_owned(),
            // A forward that kept its token gradients (the CubeCL kernels' kind) instead:
            // the weights are this backend's own forward's.
            PpoSaved::TokenGradients { .. } => {
                let (_, _, weights) =
                    with_slices(&tokens, |x| cpu::ppo::ppo_clip_forward(x, offsets, config));
                weights
            }
        };
        let d = with_slices(&tokens, |x| {
            cpu::ppo::ppo_clip_backward(x, offsets, &seq_weight, host_f32(&grad)[0], config)
        });
        let n = d.len();
        tensor(d, &[n])
    }

    fn swiglu_forward(gate: FlexTensor, up: FlexTensor) -> FlexTensor {
        let shape = dims(&gate);
        tensor(
            cpu::swiglu::swiglu_forward(&host_f32(&gate), &host_f32(&up)),
            &shape,
        )
    }

    fn swiglu_backward(
        gate: FlexTensor,
        up: FlexTensor,
        grad: FlexTensor,
    ) -> (FlexTensor, FlexTensor) {
        let shape = dims(&gate);
        let (dg, du) =
            cpu::swiglu::swiglu_backward(&host_f32(&gate), &host_f32(&up), &host_f32(&grad));
        (tensor(dg, &shape), tensor(du, &shape))
    }

    fn rms_norm_forward(x: FlexTensor, weight: FlexTensor, eps: f32) -> FlexTensor {
        let shape = dims(&x);
        let y = cpu::rms_norm::rms_norm_forward(&host_f32(&x), &host_f32(&weight), eps);
        tensor(y, &shape)
    }

    fn rms_norm_backward(
        x: FlexTensor,
        weight: FlexTensor,
        grad: FlexTensor,
        eps: f32,
    ) -> (FlexTensor, FlexTensor) {
        let (shape, h) = (dims(&x), dims(&weight));
        let (x, w, dy) = (host_f32(&x), host_f32(&weight), host_f32(&grad));
        let (dx, dw) = cpu::rms_norm::rms_norm_backward(&x, &w, &dy, eps);
        (tensor(dx, &shape), tensor(dw, &h))
    }

    fn rotary_forward(x: FlexTensor, cos: FlexTensor, sin: FlexTensor) -> FlexTensor {
        let shape = dims(&x);
        let (x, cos, sin) = (host_f32(&x), host_f32(&cos), host_f32(&sin));
        let y = cpu::rotary::rotary_forward(&x, &cos, &sin, shape[shape.len() - 1]);
        tensor(y, &shape)
    }

    fn rotary_backward(cos: FlexTensor, sin: FlexTensor, grad: FlexTensor) -> FlexTensor {
        let shape = dims(&grad);
        let (cos, sin, dy) = (host_f32(&cos), host_f32(&sin), host_f32(&grad));
        let dx = cpu::rotary::rotary_backward(&dy, &cos, &sin, shape[shape.len() - 1]);
        tensor(dx, &shape)
    }

    /// Inside a [`crate::with_packed_weights`] scope, a product of few rows reads its
    /// weight's packed panels, a weight stored transposed (a tied head) included.
    fn dense_forward(x: FlexTensor, weight: FlexTensor, bias: Option<FlexTensor>) -> FlexTensor {
        let (n, k, m) = linear_dims(&x, &weight);
        let bias = bias.as_ref().map(host_f32);
        let (w, layout) = host_weight(&weight);
        let few_rows = n <= cpu::few_rows::FEW_ROWS && cpu::few_rows::few_rows_kernels_run();
        if let (true, Cow::Borrowed(values)) = (few_rows, &w) {
            let transposed = layout == WeightLayout::OutIn;
            let panels = crate::packed_weights::active_panels(&weight, values, transposed);
            let y = panels.and_then(|panels| {
                cpu::linear::linear_forward_panels(&host_f32(&x), &panels, bias.as_deref(), n)
            });
            if let Some(y) = y {
                return tensor(y, &[n, m]);
            }
        }
        let y =
            cpu::linear::linear_forward(&host_f32(&x), (&w, layout), bias.as_deref(), (n, k, m));
        tensor(y, &[n, m])
    }

    fn dense_backward(
        x: FlexTensor,
        weight: FlexTensor,
        grad: FlexTensor,
        with_bias: bool,
    ) -> DenseGradients<Self> {
        let (n, k, m) = linear_dims(&x, &weight);
        let ((w, layout), x, dy) = (host_weight(&weight), host_f32(&x), host_f32(&grad));
        let (dx, dw, db) =
            cpu::linear::linear_backward(&x, (&w, layout), &dy, (n, k, m), with_bias);
        let dw = match layout {
            WeightLayout::InOut => tensor(dw, &[k, m]),
            // dWᵀ, stored as the weight is: its `[k, m]` view.
            WeightLayout::OutIn => tensor(dw, &[m, k]).transpose(0, 1),
        };
        (tensor(dx, &[n, k]), dw, db.map(|db| tensor(db, &[m])))
    }

    fn block_write(mut tensor: FlexTensor, starts: &[usize], value: FlexTensor) -> FlexTensor {
        let f32_pair = tensor.dtype() == DType::F32 && value.dtype() == DType::F32;
        let (shape, block) = (dims(&tensor), dims(&value));
        let owned =
            f32_pair && tensor.as_slice::<f32>().map(<[f32]>::len) == Some(shape.iter().product());
        match owned.then(|| tensor.try_storage_mut::<f32>()).flatten() {
            Some(dst) => {
                let src = host_f32(&value);
                cpu::block_write::write_block(dst, &shape, starts, &src, &block);
                tensor
            }
            None => crate::unfused::slice_assign_block::<Flex>(tensor, starts, value),
        }
    }

    /// f32 in one pass that multiplies each value by its mask value
    /// ([`crate::dropout_mask::MaskDraw::apply`]) without making the mask as a tensor.
    fn dropout(x: FlexTensor, draw: crate::dropout_mask::MaskDraw) -> FlexTensor {
        if x.dtype() != DType::F32 {
            let mask = Self::dropout_mask(x.clone(), draw);
            return <Self as burn::tensor::ops::FloatTensorOps<Self>>::float_mul(x, mask);
        }
        tensor(draw.apply(&host_f32(&x)), &dims(&x))
    }

    fn square_sum(x: FlexTensor) -> SquareSum<Self> {
        SquareSum::Host(cpu::sum_of_squares::sum_of_squares(&host_f32(&x)))
    }

    fn contiguous(x: FlexTensor) -> FlexTensor {
        if x.as_slice::<f32>().is_some() {
            return x;
        }
        match contiguous_rows(&x) {
            Some(values) => tensor(values, &dims(&x)),
            None => x,
        }
    }

    fn masked_softmax_forward(scores: FlexTensor, mask: FlexTensor) -> FlexTensor {
        let shape = dims(&scores);
        let keys = shape[shape.len() - 1];
        let y = cpu::softmax::masked_softmax_forward(&host_f32(&scores), &host_f32(&mask), keys);
        tensor(y, &shape)
    }

    fn masked_softmax_backward(probs: FlexTensor, grad: FlexTensor) -> FlexTensor {
        let shape = dims(&probs);
        let keys = shape[shape.len() - 1];
        let dx = cpu::softmax::masked_softmax_backward(&host_f32(&probs), &host_f32(&grad), keys);
        tensor(dx, &shape)
    }
}

/// (n, k, m) of a dense layer's `x: [n, k]` and `weight: [k, m]`.
fn linear_dims(x: &FlexTensor, weight: &FlexTensor) -> (usize, usize, usize) {
    let (x, w) = (dims(x), dims(weight));
    assert!(
        x.len() == 2 && w.len() == 2 && x[1] == w[0],
        "linear: x {x:?} and weight {w:?} are not [n, k] and [k, m]"
    );
    (x[0], x[1], w[1])
}

fn dims(t: &FlexTensor) -> Vec<usize> {
    burn::tensor::TensorMetadata::shape(t).to_vec()
}

/// Runs `f` on the host views of the PPO inputs.
fn with_slices<T>(t: &PpoTokens<Flex>, f: impl FnOnce(PpoSlices<'_>) -> T) -> T {
    let (logp, old_logp) = (host_f32(&t.logp), host_f32(&t.old_logp));
    let (advantages, mask) = (host_f32(&t.advantages), host_f32(&t.mask));
    let weight = t.weight.as_ref().map(host_f32);
    f(PpoSlices {
        logp: &logp,
        old_logp: &old_logp,
        advantages: &advantages,
        mask: &mask,
        weight: weight.as_deref(),
    })
}
