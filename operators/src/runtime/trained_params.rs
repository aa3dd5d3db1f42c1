//! The weights of a model whose base is frozen (LoRA) in a checkpoint: only the parameters
//! that train, as `trained.safetensors` ([`TRAINED_FILE`]), instead of the whole model. A
//! model no node trains (a KL reference) is frozen whole, and its file holds no tensor, only
//! the fingerprint.
//!
//! ROLL and verl save a LoRA run's adapters, not the base they apply to, and never the
//! reference model; so does this. The
//! file holds every parameter that requires a gradient, in the module's visiting order
//! (tensors `00000`, `00001`, …, F32), and in its metadata the parameter ids the optimizer
//! state is keyed by (`param_ids`), so a resumed run continues bit for bit, and a
//! fingerprint of the frozen weights (`frozen_fingerprint`, FNV-1a over their f32 bits):
//! the base is rebuilt from the model declaration (the GGUF file or HF directory it names)
//! and a base that no longer matches is an error, not a silently different run. For
//! SmolLM2-135M with rank-8 adapters on every projection that is 19 MB where the whole
//! model's burn record is 548 MB.

use std::collections::HashMap;
use std::path::Path;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};

use roll_flow_engine::stable_hash::{fnv1a, FNV_OFFSET};
use roll_flow_model::hf::safetensors_errors::describe;

pub use crate::run_layout::TRAINED_FILE;

const IDS_KEY: &str = "param_ids";
const FINGERPRINT_KEY: &str = "frozen_fingerprint";

/// Which parameters a visit reads.
#[derive(Clone, Copy, PartialEq)]
pub enum Params {
    All,
    Trained,
    Frozen,
}

impl Params {
    fn takes<B: Backend, const D: usize>(self, param: &Param<Tensor<B, D>>) -> bool {
        match self {
            Params::All => true,
            Params::Trained => param.val().is_require_grad(),
            Params::Frozen => !param.val().is_require_grad(),
        }
    }
}

/// Calls `each` with the id, shape and f32 values of every parameter `which` selects, in
/// visiting order.
fn for_each_param<B: Backend, M: Module<B>>(
    module: &M,
    which: Params,
    each: impl FnMut(ParamId, Vec<usize>, TensorData),
) {
    struct Visit<F, B> {
        which: Params,
        each: F,
        _backend: std::marker::PhantomData<B>,
    }
    impl<B: Backend, F: FnMut(ParamId, Vec<usize>, TensorData)> ModuleVisitor<B> for Visit<F, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if self.which.takes(param) {
                let value = param.val();
                let shape = value.dims().to_vec();
                (self.each)(param.id, shape, value.into_data().convert::<f32>());
            }
        }
    }
    module.visit(&mut Visit {
        which,
        each,
        _backend: std::marker::PhantomData,
    });
}

/// A hash of the bits of the parameters `which` selects (FNV-1a over their f32 values in
/// visiting order).
pub fn fingerprint<B: Backend, M: Module<B>>(module: &M, which: Params) -> u64 {
    let mut state = FNV_OFFSET;
    for_each_param(module, which, |_, _, data| {
        state = fnv1a(state, data.as_bytes());
    });
    state
}

/// Whether some parameter of `module` is frozen (requires no gradient).
pub fn has_frozen<B: Backend, M: Module<B>>(module: &M) -> bool {
    struct Any<B>(bool, std::marker::PhantomData<B>);
    impl<B: Backend> ModuleVisitor<B> for Any<B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0 |= Params::Frozen.takes(param);
        }
    }
    let mut any = Any(false, std::marker::PhantomData);
    module.visit(&mut any);
    any.0
}

/// The trained parameters of `module` as the bytes of [`TRAINED_FILE`] (module doc).
pub fn encode_trained<B: Backend, M: Module<B>>(module: &M) -> Result<Vec<u8>, String> {
    let mut tensors: Vec<(ParamId, Vec<usize>, TensorData)> = Vec::new();
    for_each_param(module, Params::Trained, |id, shape, data| {
        tensors.push((id, shape, data))
    });
    let ids: Vec<String> = tensors
        .iter()
        .map(|(id, ..)| id.val().to_string())
        .collect();
    let metadata = HashMap::from([
        (IDS_KEY.to_string(), ids.join(",")),
        (
            FINGERPRINT_KEY.to_string(),
            fingerprint(module, Params::Frozen).to_string(),
        ),
    ]);
    let views = tensors
        .iter()
        .enumerate()
        .map(|(i, (_, shape, data))| {
            let view = TensorView::new(Dtype::F32, shape.clone(), data.as_bytes());
            Ok((format!("{i:05}"), view.map_err(|e| format!("{e:?}"))?))
        })
        .collect::<Result<Vec<_>, String>>()?;
    safetensors::serialize(views, Some(metadata))
        .map_err(|e| format!("cannot encode the trained parameters: {e:?}"))
}

/// `module` with its trained parameters (values and ids) read from `bytes`, the contents of
/// the file `path` written by [`encode_trained`]. A file that does not fit the module (a
/// different count or shape of trained tensors: another `lora:`) or a module whose frozen
/// weights differ from those it was written with is an error naming `path`; the module is
/// changed only when everything fits.
pub fn decode_trained<B: Backend, M: Module<B>>(
    module: M,
    bytes: &[u8],
    path: &Path,
) -> Result<M, String> {
    let fail = |what: String| format!("{}: {what}", path.display());
    // What no run writes: the fix is the checkpoint before this one.
    let damaged = |what: String| {
        fail(format!(
            "{what}; the file is damaged: move this checkpoint's folder out of checkpoints/ \
             to use the one before it"
        ))
    };
    let unreadable = |e| {
        damaged(format!(
            "not a readable safetensors file ({})",
            describe(&e, bytes)
        ))
    };
    let (_, header) = SafeTensors::read_metadata(bytes).map_err(unreadable)?;
    let file = SafeTensors::deserialize(bytes).map_err(unreadable)?;
    let metadata = header.metadata().clone().unwrap_or_default();
    let field = |key: &str| {
        (metadata.get(key)).ok_or_else(|| damaged(format!("no `{key}` in its metadata")))
    };
    let ids: Vec<u64> = match field(IDS_KEY)?.as_str() {
        "" => Vec::new(),
        listed => (listed.split(',').map(str::parse).collect::<Result<_, _>>())
            .map_err(|e| damaged(format!("bad `{IDS_KEY}`: {e}")))?,
    };
    let mut wanted: Vec<Vec<usize>> = Vec::new();
    for_each_param(&module, Params::Trained, |_, shape, _| wanted.push(shape));
    if file.len() != wanted.len() {
        return Err(fail(format!(
            "holds {} trained tensors, the model has {}; use the `lora:` the run was started \
             with",
            file.len(),
            wanted.len()
        )));
    }
    let distinct: std::collections::BTreeSet<&u64> = ids.iter().collect();
    if ids.len() != file.len() || distinct.len() != ids.len() {
        return Err(damaged(format!(
            "`{IDS_KEY}` lists {} ids ({} distinct) for {} tensors",
            ids.len(),
            distinct.len(),
            file.len()
        )));
    }
    let mut saved = Vec::with_capacity(ids.len());
    for (i, (id, shape)) in ids.into_iter().zip(&wanted).enumerate() {
        let tensor = (file.tensor(&format!("{i:05}"))).map_err(|e| damaged(format!("{e:?}")))?;
        if tensor.dtype() != Dtype::F32 || tensor.shape() != shape.as_slice() {
            return Err(fail(format!(
                "trained tensor {i} is {:?} {:?}, the model's is F32 {shape:?}; use the `lora:` \
                 the run was started with",
                tensor.dtype(),
                tensor.shape()
            )));
        }
        let data = TensorData::from_bytes_vec(tensor.data().to_vec(), shape.clone(), {
            burn::tensor::DType::F32
        });
        saved.push((ParamId::from(id), data));
    }
    let frozen = fingerprint(&module, Params::Frozen).to_string();
    if field(FINGERPRINT_KEY)? != &frozen {
        return Err(fail(
            "the frozen weights differ from those the run trained on (the model file the \
             pipeline names has changed, or a Tiny model's seed); use the model the run was \
             started with"
                .into(),
        ));
    }
    Ok(module.map(&mut Restore {
        saved: saved.into_iter(),
    }))
}

/// Puts the saved values and ids into the trained parameters, in visiting order.
struct Restore<I> {
    saved: I,
}

impl<B: Backend, I: Iterator<Item = (ParamId, TensorData)>> ModuleMapper<B> for Restore<I> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        if !Params::Trained.takes(&param) {
            return param;
        }
        let (id, data) = (self.saved.next()).expect("decode_trained counted the tensors");
        let value = param.val();
        let tensor = Tensor::from_data(data.convert_dtype(value.dtype()), &value.device());
        param.transform_for_load(tensor, id)
    }
}

#[cfg(test)]
#[path = "trained_params_tests.rs"]
mod tests;
