//! [`KernelBackend`] for burn's `CubeBackend` (wgpu, CUDA): launches the CubeCL kernels of
//! [`logprob`], [`gae`] and [`ppo`] (the RL losses), [`masked_softmax`], [`rms_norm`],
//! [`swiglu`], [`rotary`] and [`decode_attention`] (the model's ops, forward and backward),
//! [`rotate_into_cache`] (a cached step's q/k/v prologue), [`column_sums`] (a bias gradient),
//! and [`row_sample`] (a decode step's draw). Inputs are made contiguous first (but for
//! operands a kernel reads through their strides); outputs are fresh device tensors of the
//! input float dtype. Packed-sequence offsets are uploaded as a small u32 tensor per call.
//! On devices with TF32 tensor cores the f32 matrix product is [`f32_matmul`]'s, unless the
//! run allows TF32 ([`crate::allow_tf32`]); half-precision products take the cubek routine
//! [`crate::half_matmul`] names ([`half_matmul`]).

mod column_sums;
mod cube_index;
mod cube_reduce;
mod decode_attention;
mod dropout_mask;
mod f32_matmul;
mod gae;
mod half_matmul;
mod launch;
mod logprob;
mod masked_softmax;
mod ppo;
mod ppo_combine;
mod rms_norm;
mod rotary;
mod rotate_into_cache;
mod row_sample;
mod swiglu;

use burn::tensor::ops::{FloatTensor, FloatTensorOps, IntTensor};
use burn::tensor::DType;
use burn::tensor::TensorMetadata;
use burn_cubecl::element::BoolElement;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::prelude::*;

use crate::backend::{GaeTokens, KernelBackend, LogProbSaved, PpoForward, PpoSaved, PpoTokens};
use crate::cached_qkv::{CachedQkv, RotatedQkv};
use crate::ppo_clip::ClipSettings;
use launch::{check_offsets, empty, empty_of, grid, upload_offsets, widest_vector, ACCUMULATOR};

/// Units per cube for the log-prob rows and the draw (a power of two).
const BLOCK: u32 = 256;
/// Units per cube for the GAE scan (one cube per sequence; a power of two): a sequence of
/// 8,192 tokens is 32 per unit.
const SCAN_UNITS: u32 = 256;

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> KernelBackend
    for CubeBackend<R, F, I, BT>
{
    const DEVICE_MEMORY: bool = true;

    fn matmul_forward(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        let f32 = lhs.dtype == DType::F32 && rhs.dtype == DType::F32;
        let half = matches!(lhs.dtype, DType::BF16 | DType::F16) && lhs.dtype == rhs.dtype;
        if f32 && !crate::tf32_allowed() && f32_matmul::has_tf32(&lhs.client) {
            f32_matmul::f32_matmul(lhs, rhs)
        } else if let Some(out) = half
            .then(|| half_matmul::half_matmul(crate::half_matmul(), &lhs, &rhs))
            .flatten()
        {
            out
        } else {
            Self::float_matmul(lhs, rhs)
        }
    }

    fn column_sums(x: FloatTensor<Self>) -> FloatTensor<Self> {
        column_sums::column_sums(x)
    }

    fn dropout_mask(
        like: FloatTensor<Self>,
        draw: crate::dropout_mask::MaskDraw,
    ) -> FloatTensor<Self> {
        dropout_mask::mask(like, draw)
    }

    fn swiglu_forward(gate: FloatTensor<Self>, up: FloatTensor<Self>) -> FloatTensor<Self> {
        swiglu::forward(gate, up)
    }

    fn swiglu_backward(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        swiglu::backward(gate, up, grad)
    }

    fn masked_softmax_forward(
        scores: FloatTensor<Self>,
        mask: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        masked_softmax::forward(scores, mask)
    }

    fn masked_softmax_backward(
        probs: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        masked_softmax::backward(probs, grad)
    }

    fn rms_norm_forward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        rms_norm::forward(x, weight, eps)
    }

    fn add_rms_norm(
        x: FloatTensor<Self>,
        delta: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        Some(rms_norm::add_forward(x, delta, weight, eps))
    }

    fn rms_norm_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        eps: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        rms_norm::backward(x, weight, grad, eps)
    }

    fn rotary_forward(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        rotary::rotate(x, cos, sin, false)
    }

    fn rotary_backward(
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        rotary::rotate(grad, cos, sin, true)
    }

    fn rotate_into_cache(step: CachedQkv<Self>) -> RotatedQkv<Self> {
        rotate_into_cache::launch(step)
    }

    fn decode_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: FloatTensor<Self>,
    ) -> Option<FloatTensor<Self>> {
        decode_attention::launch(q, k, v, mask)
    }

    fn logprob_entropy_forward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        temperature: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let x = RowsLaunch::new(logits, targets);
        let (rows, vocab) = (x.rows, x.vocab);
        let out = empty_of(&x.logits, &[rows, 2], ACCUMULATOR);
        let lse = empty_of(&x.logits, &[rows, 2], ACCUMULATOR);
        logprob::logprob_forward_kernel::launch::<R>(
            &x.client,
            grid(rows),
            CubeDim::new_1d(BLOCK),
            x.vector_size,
            x.logits.into_tensor_arg(),
            x.targets.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            lse.clone().into_tensor_arg(),
            rows as u32,
            vocab as u32,
            x.row_vectors,
            1.0 / temperature,
            BLOCK,
            x.dtypes,
        );
        (out, lse)
    }

    fn logprob_entropy_backward(
        saved: LogProbSaved<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let x = RowsLaunch::new(saved.logits, saved.targets);
        let (rows, vocab) = (x.rows, x.vocab);
        let dlogits = empty(&x.logits, &[rows, vocab]);
        logprob::logprob_backward_kernel::launch::<R>(
            &x.client,
            grid(rows),
            CubeDim::new_1d(BLOCK),
            x.vector_size,
            x.logits.into_tensor_arg(),
            x.targets.into_tensor_arg(),
            into_contiguous(saved.lse).into_tensor_arg(),
            into_contiguous(as_accumulator(grad)).into_tensor_arg(),
            dlogits.clone().into_tensor_arg(),
            rows as u32,
            vocab as u32,
            x.row_vectors,
            1.0 / saved.temperature,
            x.dtypes,
        );
        dlogits
    }

    fn sample_rows(logits: FloatTensor<Self>, params: FloatTensor<Self>) -> FloatTensor<Self> {
        let (logits, params) = (into_contiguous(logits), into_contiguous(params));
        let [rows, vocab] = logits.shape().dims::<2>();
        let out = empty(&params, &[rows, 3]);
        let dtypes = [logits.dtype.into(), params.dtype.into()];
        let client = logits.client.clone();
        row_sample::row_sample_kernel::launch::<R>(
            &client,
            grid(rows),
            CubeDim::new_1d(BLOCK),
            logits.into_tensor_arg(),
            params.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            rows as u32,
            vocab as u32,
            BLOCK,
            dtypes,
        );
        out
    }

    fn gae(
        tokens: GaeTokens<Self>,
        offsets: &[usize],
        gamma: f32,
        lambda: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let rewards = into_contiguous(tokens.rewards);
        let n = rewards.shape().num_elements();
        check_offsets(offsets, n, "gae");
        let sequences = offsets.len() - 1;
        let offs = upload_offsets::<R, F, I, BT>(offsets, &rewards.device);
        let (adv, ret) = (empty(&rewards, &[n]), empty(&rewards, &[n]));
        let dtypes = [rewards.dtype.into(), offs.dtype.into()];
        let client = rewards.client.clone();
        gae::gae_scan_kernel::launch::<R>(
            &client,
            grid(sequences),
            CubeDim::new_1d(SCAN_UNITS),
            rewards.into_tensor_arg(),
            into_contiguous(tokens.values).into_tensor_arg(),
            into_contiguous(tokens.mask).into_tensor_arg(),
            offs.into_tensor_arg(),
            adv.clone().into_tensor_arg(),
            ret.clone().into_tensor_arg(),
            sequences as u32,
            gamma,
            gamma * lambda,
            SCAN_UNITS,
            dtypes,
        );
        (adv, ret)
    }

    fn ppo_clip_forward(
        tokens: PpoTokens<Self>,
        offsets: &[usize],
        config: &ClipSettings,
    ) -> PpoForward<Self> {
        let x = ppo::PpoLaunch::new::<F, I, BT>(tokens, offsets);
        let [loss, stats, weight, token_grad] = ppo::forward(x, config);
        PpoForward {
            loss,
            stats,
            saved: PpoSaved::TokenGradients { token_grad, weight },
        }
    }

    fn ppo_clip_backward(
        tokens: PpoTokens<Self>,
        offsets: &[usize],
        forward: PpoForward<Self>,
        grad: FloatTensor<Self>,
        config: &ClipSettings,
    ) -> FloatTensor<Self> {
        // A forward that came with per-sequence weights (built by hand, or the CPU
        // backends' kind) instead of the token gradients: run the partials for them.
        let (token_grad, weight) = match forward.saved {
            PpoSaved::TokenGradients { token_grad, weight } => (token_grad, weight),
            PpoSaved::SequenceWeights(_) => {
                let x = ppo::PpoLaunch::new::<F, I, BT>(tokens, offsets);
                let [_, _, weight, token_grad] = ppo::forward(x, config);
                (token_grad, weight)
            }
        };
        ppo::backward(token_grad, weight, grad)
    }
}

/// `t` in the accumulator type (the log-prob output's, which its gradient has when it comes
/// through autodiff; a caller's own gradient may be of the logits' type).
fn as_accumulator<R: CubeRuntime>(t: CubeTensor<R>) -> CubeTensor<R> {
    match t.dtype == ACCUMULATOR {
        true => t,
        false => burn_cubecl::kernel::cast(t, ACCUMULATOR),
    }
}

/// Logits and targets ready for a one-cube-per-row launch: rows of unit stride (padded rows
/// as CUDA lays them out are read in place, `logprob.rs`), targets contiguous, with their
/// sizes, dtypes and client.
struct RowsLaunch<R: CubeRuntime> {
    logits: CubeTensor<R>,
    targets: CubeTensor<R>,
    rows: usize,
    vocab: usize,
    /// Vectors of `vector_size` from one row's start to the next's.
    row_vectors: u32,
    /// (logits, the accumulator, targets).
    dtypes: [StorageType; 3],
    /// Logits a load: the widest the device favours for their type that divides `vocab`,
    /// the row stride and the view's offset (so that every load is aligned).
    vector_size: usize,
    client: ComputeClient<R>,
}

impl<R: CubeRuntime> RowsLaunch<R> {
    fn new(logits: CubeTensor<R>, targets: CubeTensor<R>) -> Self {
        let logits = if reads_rows_in_place(&logits) {
            logits
        } else {
            into_contiguous(logits)
        };
        let targets = into_contiguous(targets);
        let [rows, vocab] = logits.shape().dims::<2>();
        let row_stride = if rows > 1 {
            logits.meta.strides()[0]
        } else {
            vocab
        };
        let vector_size = widest_vector(&logits, &[vocab, row_stride]);
        RowsLaunch {
            row_vectors: (row_stride / vector_size) as u32,
            vector_size,
            dtypes: [
                logits.dtype.into(),
                ACCUMULATOR.into(),
                targets.dtype.into(),
            ],
            client: logits.client.clone(),
            logits,
            targets,
            rows,
            vocab,
        }
    }
}

/// Whether `[rows, vocab]` logits can be read where they lie: each row's elements side by
/// side, rows apart by at least a row (CUDA's padded rows, a view of a wider tensor's
/// leading columns).
fn reads_rows_in_place<R: CubeRuntime>(logits: &CubeTensor<R>) -> bool {
    let [rows, vocab] = logits.shape().dims::<2>();
    let strides = logits.meta.strides();
    (vocab <= 1 || strides[1] == 1) && (rows <= 1 || strides[0] >= vocab)
}
