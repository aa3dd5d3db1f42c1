//! Mixed precision (`qwen2::compute_dtype`) on wgpu, where lavapipe has f16 (bf16 is for
//! CUDA, the same code path): the `tiny_qwen2` fixture's parameters kept in f32, its
//! activations computed in f16, against the same model in f32 on the same device.
//!
//! - scoring: the log-probs of a packed batch (two sequences, right-padded rows) within
//!   0.05 of f32's (f16 carries 11 significant bits through 2 layers and the logits), and
//!   f32 log-probs out of the kernel;
//! - training: the gradient of −Σ log π reaches every parameter in f32 (autodiff casts it
//!   back), within 5% of f32's gradient in norm and at cosine ≥ 0.99 for the model's whole
//!   gradient;
//! - generation: a KV-cached greedy decode runs in f16 (the cache in f16) and its first
//!   token is f32's;
//! - an inference copy with its parameters stored in f16 scores and decodes exactly as one
//!   whose ops cast them.
#![cfg(feature = "wgpu")]

mod common;

use burn::backend::wgpu::{CubeBackend, WgpuDevice, WgpuRuntime};
use burn::backend::Autodiff;
use burn::module::Module;
use burn::tensor::DType;
use common::{fixture, request};
use roll_flow_model::generate::{ContinuousBatcher, SamplingParams};
use roll_flow_model::hf::load_causal_lm;
use roll_flow_model::logprob::response_logprobs;
use roll_flow_model::packed::PackedSequences;
use roll_flow_model::qwen2::Qwen2CausalLm;

type W = CubeBackend<WgpuRuntime, f32, i32, u32>;
type A = Autodiff<W>;

fn model<B: roll_flow_kernels::KernelBackend<Device = WgpuDevice>>(half: bool) -> Qwen2CausalLm<B> {
    let model = load_causal_lm::<B>(&fixture("tiny_qwen2"), &WgpuDevice::default()).unwrap();
    model.with_compute_dtype(half.then_some(DType::F16))
}

fn batch() -> (PackedSequences, Vec<bool>) {
    let sequences = vec![
        vec![1u32, 337, 262, 201, 50, 301, 7, 8],
        vec![50, 500, 482, 25],
    ];
    let packed = PackedSequences::from_sequences(&sequences);
    let mask = (0..packed.tokens.len())
        .map(|t| packed.locate(t).1 > 1)
        .collect();
    (packed, mask)
}

/// Every parameter's gradient of −Σ log π, flattened in module order, and their dtypes.
fn gradients(half: bool) -> (Vec<f32>, Vec<DType>) {
    let model = model::<A>(half);
    let (packed, mask) = batch();
    let out = response_logprobs(&model, &packed, &mask, 1.0).unwrap();
    let grads = out.logprobs.sum().neg().backward();
    let mut values = Vec::new();
    let mut dtypes = Vec::new();
    let mut collect = GradientCollector {
        grads: &grads,
        values: &mut values,
        dtypes: &mut dtypes,
    };
    model.visit(&mut collect);
    (values, dtypes)
}

struct GradientCollector<'a> {
    grads: &'a <A as burn::tensor::backend::AutodiffBackend>::Gradients,
    values: &'a mut Vec<f32>,
    dtypes: &'a mut Vec<DType>,
}

impl burn::module::ModuleVisitor<A> for GradientCollector<'_> {
    fn visit_float<const D: usize>(
        &mut self,
        param: &burn::module::Param<burn::tensor::Tensor<A, D>>,
    ) {
        if let Some(g) = param.val().grad(self.grads) {
            self.dtypes.push(g.dtype());
            self.values
                .extend(g.into_data().convert::<f32>().into_vec::<f32>().unwrap());
        }
    }
}

#[test]
fn f16_scoring_is_close_to_f32_and_returns_f32_logprobs() {
    let (packed, mask) = batch();
    let score = |half: bool| {
        let out = response_logprobs(&model::<W>(half), &packed, &mask, 1.0).unwrap();
        assert_eq!(
            out.logprobs.dtype(),
            DType::F32,
            "log-probs in f32 (half {half})"
        );
        out.logprobs
            .into_data()
            .convert::<f32>()
            .into_vec::<f32>()
            .unwrap()
    };
    let (full, half) = (score(false), score(true));
    assert_eq!(full.len(), half.len());
    for (i, (f, h)) in full.iter().zip(&half).enumerate() {
        assert!(
            (f - h).abs() <= 0.05,
            "log-prob {i}: f32 {f}, f16 compute {h}"
        );
    }
    let largest = full
        .iter()
        .zip(&half)
        .map(|(f, h)| (f - h).abs())
        .fold(0.0, f32::max);
    eprintln!("largest |f32 - f16 compute| log-prob: {largest:e}");
    assert!(largest > 0.0, "the f16 path ran (its rounding shows)");
}

#[test]
fn f16_training_step_gives_f32_gradients_close_to_f32s() {
    let (full, full_dtypes) = gradients(false);
    let (half, half_dtypes) = gradients(true);
    assert!(!full.is_empty());
    assert_eq!(
        full_dtypes.len(),
        half_dtypes.len(),
        "every parameter gets a gradient"
    );
    assert!(
        half_dtypes.iter().all(|d| *d == DType::F32),
        "{half_dtypes:?}"
    );
    let dot: f64 = full
        .iter()
        .zip(&half)
        .map(|(a, b)| *a as f64 * *b as f64)
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let (nf, nh) = (norm(&full), norm(&half));
    assert!(
        (nf - nh).abs() <= 0.05 * nf,
        "gradient norms: f32 {nf}, f16 compute {nh}"
    );
    let cosine = dot / (nf * nh);
    eprintln!("gradient norms f32 {nf:e}, f16 compute {nh:e}; cosine {cosine}");
    assert!(cosine >= 0.99, "cosine of the two gradients: {cosine}");
    assert!(full != half, "the f16 path ran (its rounding shows)");
}

/// The inference copy a trainer publishes (`valid()`, adapters merged) computes in the
/// same dtype as the model it came from.
#[test]
fn the_published_copy_keeps_the_compute_dtype() {
    use burn::module::AutodiffModule;
    let trained = model::<A>(true);
    let published = roll_flow_model::lora::merge_lora(&trained.valid());
    assert_eq!(published.model.compute, Some(DType::F16));
}

#[test]
fn f16_generation_decodes_with_an_f16_cache() {
    let first = |half: bool| {
        let model = model::<W>(half);
        let mut batcher = ContinuousBatcher::<W>::new(2, &WgpuDevice::default());
        for (i, prompt) in [&[1u32, 337, 262, 201][..], &[50, 500]].iter().enumerate() {
            let r = request(prompt, 5, SamplingParams::greedy(), i as u64);
            batcher.submit(&model, r).unwrap();
        }
        let mut outputs = batcher.run_to_completion(&model);
        outputs.sort_by_key(|o| o.id);
        outputs
    };
    let (full, half) = (first(false), first(true));
    for (f, h) in full.iter().zip(&half) {
        assert_eq!(h.tokens.len(), 5);
        assert_eq!(f.tokens[0], h.tokens[0], "first greedy token");
    }
}

/// Every float parameter's dtype, in module order.
struct ParamDtypes(Vec<DType>);

impl burn::module::ModuleVisitor<W> for ParamDtypes {
    fn visit_float<const D: usize>(
        &mut self,
        param: &burn::module::Param<burn::tensor::Tensor<W, D>>,
    ) {
        self.0.push(param.val().dtype());
    }
}

/// An inference copy whose parameters are stored in f16 (`with_params_in_compute_dtype`,
/// what a trainer publishes) scores exactly as one whose ops cast its f32 parameters, and
/// decodes the same tokens: the cast is the same rounding wherever it runs.
#[test]
fn parameters_stored_in_f16_give_what_casting_them_per_op_gives() {
    let stored = model::<W>(true).with_params_in_compute_dtype();
    let mut dtypes = ParamDtypes(Vec::new());
    stored.visit(&mut dtypes);
    assert!(
        dtypes.0.len() > 10 && dtypes.0.iter().all(|d| *d == DType::F16),
        "{:?}",
        dtypes.0
    );
    let cast_per_op = model::<W>(true);
    let (packed, mask) = batch();
    let score = |m: &Qwen2CausalLm<W>| {
        let out = response_logprobs(m, &packed, &mask, 1.0).unwrap();
        out.logprobs
            .into_data()
            .convert::<f32>()
            .into_vec::<f32>()
            .unwrap()
    };
    assert_eq!(score(&stored), score(&cast_per_op));
    let decode = |m: &Qwen2CausalLm<W>| {
        let mut batcher = ContinuousBatcher::<W>::new(2, &WgpuDevice::default());
        for (i, prompt) in [&[1u32, 337, 262, 201][..], &[50, 500]].iter().enumerate() {
            let r = request(prompt, 6, SamplingParams::greedy(), i as u64);
            batcher.submit(m, r).unwrap();
        }
        let mut outputs = batcher.run_to_completion(m);
        outputs.sort_by_key(|o| o.id);
        outputs.into_iter().map(|o| o.tokens).collect::<Vec<_>>()
    };
    assert_eq!(decode(&stored), decode(&cast_per_op));
    // Without a compute dtype the model is left as it is.
    let mut dtypes = ParamDtypes(Vec::new());
    model::<W>(false)
        .with_params_in_compute_dtype()
        .visit(&mut dtypes);
    assert!(dtypes.0.iter().all(|d| *d == DType::F32));
}
