//! Writing a model as a Hugging Face directory: `config.json` plus `model.safetensors`
//! (F32, Hugging Face names and `[out, in]` linear layout, `{"format": "pt"}` metadata), so
//! transformers' `from_pretrained` and our loader both read it back.

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::TensorView;
use safetensors::Dtype;

use super::safetensors_load::SINGLE_FILE;
use crate::model::config::Qwen2Config;
use crate::model::error::ModelError;
use crate::model::weights::TensorSink;

/// Writes `tensors` (from a model's `save`) and `config` into `dir` (created if needed).
///
/// Files are written under a temporary name and renamed, so an interrupted save never leaves
/// a half-written checkpoint under the final name.
pub fn save_model_dir(
    dir: &Path,
    config: &Qwen2Config,
    tensors: &TensorSink,
) -> Result<(), ModelError> {
    std::fs::create_dir_all(dir).map_err(|e| ModelError::io(dir, e))?;
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
                    path: dir.join(SINGLE_FILE),
                    message: format!("{name}: {e:?}"),
                }
            })?;
            Ok((name.clone(), view))
        })
        .collect::<Result<Vec<_>, ModelError>>()?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    let serialized =
        safetensors::serialize(views, Some(metadata)).map_err(|e| ModelError::Safetensors {
            path: dir.join(SINGLE_FILE),
            message: format!("{e:?}"),
        })?;
    write_atomically(&dir.join(SINGLE_FILE), &serialized)?;
    write_atomically(&dir.join("config.json"), config.to_json_string().as_bytes())
}

/// Writes `bytes` to `path` via a temporary sibling file and a rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ModelError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(|e| ModelError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| ModelError::io(path, e))
}
