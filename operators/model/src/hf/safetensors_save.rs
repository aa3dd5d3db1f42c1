//! Writing a model as a Hugging Face directory: `config.json` plus `model.safetensors`
//! (F32, Hugging Face names and `[out, in]` linear layout, `{"format": "pt"}` metadata), so
//! transformers' `from_pretrained` and our loader both read it back.

use std::collections::HashMap;
use std::path::Path;

use roll_flow_engine::atomic_file::write_atomic;
use safetensors::tensor::TensorView;
use safetensors::Dtype;

use super::safetensors_load::SINGLE_FILE;
use crate::config::Qwen2Config;
use crate::error::ModelError;
use crate::weights::TensorSink;

/// Writes `tensors` (from a model's `save`) and `config` into `dir` (created if needed).
///
/// Each file is written atomically (a unique temporary sibling, fsync, rename:
/// [`write_atomic`]), so an interrupted save never leaves a half-written file under the
/// final name.
pub fn save_model_dir(
    dir: &Path,
    config: &Qwen2Config,
    tensors: &TensorSink,
) -> Result<(), ModelError> {
    std::fs::create_dir_all(dir).map_err(|e| ModelError::io(dir, e))?;
    write_safetensors(&dir.join(SINGLE_FILE), tensors)?;
    write_file(&dir.join("config.json"), config.to_json_string().as_bytes())
}

/// Writes `tensors` as one F32 safetensors file at `path` (atomically), with the
/// `{"format": "pt"}` metadata transformers and PEFT expect.
pub(crate) fn write_safetensors(path: &Path, tensors: &TensorSink) -> Result<(), ModelError> {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .tensors
        .iter()
        .map(|(name, shape, values)| {
            let raw = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (name.clone(), shape.clone(), raw)
        })
        .collect();
    let views = bytes
        .iter()
        .map(|(name, shape, raw)| {
            let view = TensorView::new(Dtype::F32, shape.clone(), raw).map_err(|e| {
                ModelError::Safetensors {
                    path: path.to_path_buf(),
                    message: format!("{name}: {e:?}"),
                }
            })?;
            Ok((name.clone(), view))
        })
        .collect::<Result<Vec<_>, ModelError>>()?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    let serialized =
        safetensors::serialize(views, Some(metadata)).map_err(|e| ModelError::Safetensors {
            path: path.to_path_buf(),
            message: format!("{e:?}"),
        })?;
    write_file(path, &serialized)
}

pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ModelError> {
    write_atomic(path, bytes).map_err(|e| ModelError::io(path, e))
}
