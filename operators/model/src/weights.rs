//! Where a model's weights come from: a checkpoint or a fresh random initialisation.
//!
//! Both go through the one [`WeightSource`] trait, keyed by Hugging Face tensor names and
//! shapes in Hugging Face's layout (`[out, in]` for linear weights), so the Tiny preset built
//! from scratch and a user's Qwen2.5 directory are assembled by the same code. Fresh weights
//! follow transformers' `Qwen2PreTrainedModel._init_weights`: linear and embedding weights
//! ~ N(0, initializer_range²), biases 0, RMSNorm weights 1.

use burn::module::Param;
use burn::nn::{Embedding, Linear};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::error::ModelError;

/// How a tensor is initialised when it is created fresh instead of loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Init {
    /// Normal with mean 0 and the config's `initializer_range` as standard deviation.
    Normal,
    /// All zeros (biases).
    Zeros,
    /// All ones (RMSNorm scales).
    Ones,
}

/// A provider of named f32 tensors in Hugging Face layout.
pub trait WeightSource {
    /// The tensor `name` with the given shape, as row-major f32 values.
    fn take(&mut self, name: &str, shape: &[usize], init: Init) -> Result<Vec<f32>, ModelError>;
}

/// Fresh weights from a seeded RNG (Hugging Face's Qwen2 initialisation).
pub struct RandomInit {
    rng: StdRng,
    std: f64,
}

impl RandomInit {
    /// A seeded initialiser with the given standard deviation for normal weights.
    pub fn new(seed: u64, std: f64) -> Self {
        RandomInit {
            rng: StdRng::seed_from_u64(seed),
            std,
        }
    }

    fn normal(&mut self) -> f32 {
        // Box-Muller: two uniforms on (0, 1] give one standard normal.
        let u1: f64 = 1.0 - self.rng.random::<f64>();
        let u2: f64 = self.rng.random::<f64>();
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos() * self.std) as f32
    }
}

impl WeightSource for RandomInit {
    fn take(&mut self, _name: &str, shape: &[usize], init: Init) -> Result<Vec<f32>, ModelError> {
        let n = shape.iter().product();
        Ok(match init {
            Init::Zeros => vec![0.0; n],
            Init::Ones => vec![1.0; n],
            Init::Normal => (0..n).map(|_| self.normal()).collect(),
        })
    }
}

/// Transposes a row-major `[rows, cols]` matrix.
pub fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = values[r * cols + c];
        }
    }
    out
}

/// A 1-D parameter (bias, norm scale).
pub fn vector_param<B: Backend>(
    source: &mut dyn WeightSource,
    name: &str,
    len: usize,
    init: Init,
    device: &B::Device,
) -> Result<Param<Tensor<B, 1>>, ModelError> {
    let values = source.take(name, &[len], init)?;
    let tensor = Tensor::from_data(TensorData::new(values, [len]), device);
    Ok(Param::from_tensor(tensor))
}

/// A linear layer from Hugging Face's `name.weight` `[out, in]` (and `name.bias` `[out]`).
///
/// burn's [`Linear`] computes `x @ W` with `W: [in, out]`, so the weight is transposed once
/// here (and back when saving) rather than on every forward pass.
pub fn linear<B: Backend>(
    source: &mut dyn WeightSource,
    name: &str,
    d_in: usize,
    d_out: usize,
    bias: bool,
    device: &B::Device,
) -> Result<Linear<B>, ModelError> {
    let hf = source.take(&format!("{name}.weight"), &[d_out, d_in], Init::Normal)?;
    let weight = Tensor::from_data(
        TensorData::new(transpose(&hf, d_out, d_in), [d_in, d_out]),
        device,
    );
    let bias = if bias {
        Some(vector_param(
            source,
            &format!("{name}.bias"),
            d_out,
            Init::Zeros,
            device,
        )?)
    } else {
        None
    };
    Ok(Linear {
        weight: Param::from_tensor(weight),
        bias,
    })
}

/// A token embedding `[vocab, hidden]` (same layout in burn and Hugging Face).
pub fn embedding<B: Backend>(
    source: &mut dyn WeightSource,
    name: &str,
    vocab: usize,
    hidden: usize,
    device: &B::Device,
) -> Result<Embedding<B>, ModelError> {
    let values = source.take(name, &[vocab, hidden], Init::Normal)?;
    let weight = Tensor::from_data(TensorData::new(values, [vocab, hidden]), device);
    Ok(Embedding {
        weight: Param::from_tensor(weight),
    })
}

/// Collects named tensors in Hugging Face layout for saving.
#[derive(Default)]
pub struct TensorSink {
    /// `(name, shape, row-major f32 values)` in the order the model emitted them.
    pub tensors: Vec<(String, Vec<usize>, Vec<f32>)>,
}

impl TensorSink {
    /// Adds a tensor of any rank as is.
    pub fn put<B: Backend, const D: usize>(&mut self, name: &str, tensor: &Tensor<B, D>) {
        let shape = tensor.dims().to_vec();
        self.tensors
            .push((name.to_string(), shape, to_f32_vec(tensor)));
    }

    /// Adds a burn linear layer as Hugging Face's `weight [out, in]` (+ `bias`).
    pub fn put_linear<B: Backend>(&mut self, name: &str, layer: &Linear<B>) {
        let [d_in, d_out] = layer.weight.val().dims();
        let values = transpose(&to_f32_vec(&layer.weight.val()), d_in, d_out);
        self.tensors
            .push((format!("{name}.weight"), vec![d_out, d_in], values));
        if let Some(bias) = &layer.bias {
            self.put(&format!("{name}.bias"), &bias.val());
        }
    }
}

/// A tensor's values as f32 on the host.
pub fn to_f32_vec<B: Backend, const D: usize>(tensor: &Tensor<B, D>) -> Vec<f32> {
    tensor
        .to_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .expect("converted to f32")
}
