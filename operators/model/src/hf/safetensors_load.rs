//! Reading Hugging Face safetensors checkpoints: one `model.safetensors`, or shards listed in
//! `model.safetensors.index.json` (`weight_map`: tensor name -> shard file). BF16, F16 and F32
//! tensors are converted to f32 (the model then holds them in the backend's float type).
//!
//! Every file is validated when opened (a truncated or corrupt file fails there, naming the
//! file). Tensors are handed out by name; a tensor the model asks for that the checkpoint lacks
//! is recorded and reported together with all others by [`SafetensorsSource::finish`], which
//! also lists tensors the model never asked for.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors};

use super::safetensors_errors::explain;
use crate::error::ModelError;
use crate::weights::{Init, WeightSource};

/// Single-file checkpoint name.
pub const SINGLE_FILE: &str = "model.safetensors";
/// Sharded checkpoint index name.
pub const INDEX_FILE: &str = "model.safetensors.index.json";

/// Where one tensor lives.
struct Entry {
    file: usize,
    dtype: Dtype,
    shape: Vec<usize>,
    start: usize,
    end: usize,
}

/// All tensors of a checkpoint directory, served by name.
pub struct SafetensorsSource {
    dir: PathBuf,
    files: Vec<Vec<u8>>,
    entries: BTreeMap<String, Entry>,
    taken: BTreeSet<String>,
    missing: Vec<String>,
    ignorable: BTreeSet<String>,
}

impl SafetensorsSource {
    /// Opens `dir/model.safetensors` or the shards of `dir/model.safetensors.index.json`.
    pub fn open(dir: &Path) -> Result<Self, ModelError> {
        let shard_names = shard_files(dir)?;
        let mut source = SafetensorsSource {
            dir: dir.to_path_buf(),
            files: Vec::new(),
            entries: BTreeMap::new(),
            taken: BTreeSet::new(),
            missing: Vec::new(),
            ignorable: BTreeSet::new(),
        };
        for name in shard_names {
            source.add_file(&dir.join(name))?;
        }
        Ok(source)
    }

    /// Marks a tensor that may stay unused without an error (e.g. a redundant
    /// `lm_head.weight` in a checkpoint with tied embeddings).
    pub fn allow_unused(&mut self, name: &str) {
        self.ignorable.insert(name.to_string());
    }

    /// Names of all tensors in the checkpoint.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Fails if the model asked for tensors that were absent, or left tensors unused.
    pub fn finish(self) -> Result<(), ModelError> {
        let source_name = self.dir.display().to_string();
        if !self.missing.is_empty() {
            return Err(ModelError::MissingTensors {
                source_name,
                names: self.missing,
            });
        }
        let unused: Vec<String> = self
            .entries
            .keys()
            .filter(|n| !self.taken.contains(*n) && !self.ignorable.contains(*n))
            .filter(|n| !n.ends_with(".rotary_emb.inv_freq"))
            .cloned()
            .collect();
        if !unused.is_empty() {
            return Err(ModelError::UnexpectedTensors {
                source_name,
                names: unused,
            });
        }
        Ok(())
    }

    fn add_file(&mut self, path: &Path) -> Result<(), ModelError> {
        let bytes = std::fs::read(path).map_err(|e| ModelError::io(path, e))?;
        let invalid = |message: String| ModelError::Safetensors {
            path: path.to_path_buf(),
            message,
        };
        let file = self.files.len();
        {
            let tensors =
                SafeTensors::deserialize(&bytes).map_err(|e| invalid(explain(&e, &bytes)))?;
            let base = bytes.as_ptr() as usize;
            for (name, view) in tensors.iter() {
                let start = view.data().as_ptr() as usize - base;
                let entry = Entry {
                    file,
                    dtype: view.dtype(),
                    shape: view.shape().to_vec(),
                    start,
                    end: start + view.data().len(),
                };
                self.entries.insert(name.to_string(), entry);
            }
        }
        self.files.push(bytes);
        Ok(())
    }
}

impl WeightSource for SafetensorsSource {
    fn take(&mut self, name: &str, shape: &[usize], _init: Init) -> Result<Vec<f32>, ModelError> {
        let source_name = self.dir.display().to_string();
        let Some(entry) = self.entries.get(name) else {
            self.missing.push(name.to_string());
            return Ok(vec![0.0; shape.iter().product()]);
        };
        if entry.shape != shape {
            return Err(ModelError::ShapeMismatch {
                source_name,
                name: name.to_string(),
                expected: shape.to_vec(),
                found: entry.shape.clone(),
            });
        }
        let bytes = &self.files[entry.file][entry.start..entry.end];
        let values = decode(bytes, entry.dtype).ok_or_else(|| ModelError::UnsupportedDtype {
            source_name,
            name: name.to_string(),
            dtype: format!("{:?}", entry.dtype),
        })?;
        self.taken.insert(name.to_string());
        Ok(values)
    }
}

/// Little-endian BF16/F16/F32 bytes to f32 values; `None` for other dtypes.
fn decode(bytes: &[u8], dtype: Dtype) -> Option<Vec<f32>> {
    let halves = |f: fn([u8; 2]) -> f32| bytes.chunks_exact(2).map(|c| f([c[0], c[1]])).collect();
    match dtype {
        Dtype::F32 => Some(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        Dtype::BF16 => Some(halves(|b| half::bf16::from_le_bytes(b).to_f32())),
        Dtype::F16 => Some(halves(|b| half::f16::from_le_bytes(b).to_f32())),
        _ => None,
    }
}

/// The checkpoint files of `dir`: the shards named by the index, or the single file.
fn shard_files(dir: &Path) -> Result<Vec<String>, ModelError> {
    let index_path = dir.join(INDEX_FILE);
    if index_path.is_file() {
        let text =
            std::fs::read_to_string(&index_path).map_err(|e| ModelError::io(&index_path, e))?;
        let index: serde_json::Value =
            serde_json::from_str(&text).map_err(|source| ModelError::Json {
                path: index_path.clone(),
                source,
            })?;
        let Some(map) = index.get("weight_map").and_then(|m| m.as_object()) else {
            return Err(ModelError::Config {
                path: index_path,
                message: "no \"weight_map\" object".into(),
            });
        };
        let files: BTreeSet<String> = map
            .values()
            .filter_map(|v| v.as_str().map(String::from))
            .collect();
        for file in &files {
            if !dir.join(file).is_file() {
                return Err(ModelError::MissingFile {
                    dir: dir.to_path_buf(),
                    file: file.clone(),
                    why: "a shard listed in model.safetensors.index.json".into(),
                });
            }
        }
        return Ok(files.into_iter().collect());
    }
    if dir.join(SINGLE_FILE).is_file() {
        return Ok(vec![SINGLE_FILE.to_string()]);
    }
    Err(ModelError::MissingFile {
        dir: dir.to_path_buf(),
        file: format!("{SINGLE_FILE} or {INDEX_FILE}"),
        why: "the model weights".into(),
    })
}
