//! Errors of the model layer: loading a model directory, tokenizing, templating, generating.
//!
//! Every failure a user can cause (a wrong path, a broken checkpoint, a template that does not
//! render, a prompt longer than the model's context) becomes one of these variants with the
//! file and the offending names in the message, never a panic.

use std::path::{Path, PathBuf};

/// What went wrong in the model layer, with enough detail for the user to fix it.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The model directory does not exist; `why` says what is there instead
    /// ([`missing_path`]).
    #[error("model directory {dir} {why}")]
    MissingDir { dir: PathBuf, why: String },
    /// A file the model directory must contain is not there.
    #[error("model directory {dir}: missing {file} ({why})")]
    MissingFile {
        dir: PathBuf,
        file: String,
        why: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A JSON file (config.json, the shard index, tokenizer_config.json) does not parse.
    #[error("{path}: invalid JSON: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// config.json parses but describes something this model code does not implement.
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    /// A safetensors file is corrupt or truncated.
    #[error("{path}: not a valid safetensors file ({message})")]
    Safetensors { path: PathBuf, message: String },
    /// A GGUF file is corrupt, truncated, or describes something not supported.
    #[error("{path}: {message}")]
    Gguf { path: PathBuf, message: String },
    /// Tensors the architecture needs are absent from the checkpoint.
    #[error("{source_name}: missing tensors: {}", names.join(", "))]
    MissingTensors {
        source_name: String,
        names: Vec<String>,
    },
    /// The checkpoint holds tensors the architecture does not use.
    #[error("{source_name}: unexpected tensors (not part of a model with this config): {}", names.join(", "))]
    UnexpectedTensors {
        source_name: String,
        names: Vec<String>,
    },
    /// A tensor has a different shape than config.json implies.
    #[error(
        "{source_name}: tensor {name} has shape {found:?}, expected {expected:?} from config.json"
    )]
    ShapeMismatch {
        source_name: String,
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    /// A tensor is stored in a dtype that is not bf16, f16 or f32.
    #[error("{source_name}: tensor {name} has dtype {dtype}; supported: BF16, F16, F32")]
    UnsupportedDtype {
        source_name: String,
        name: String,
        dtype: String,
    },
    /// The tokenizer could not be loaded or could not encode/decode.
    #[error("tokenizer {origin}: {message}")]
    Tokenizer { origin: String, message: String },
    /// The chat template failed to compile or render.
    #[error("chat template: {message}")]
    ChatTemplate { message: String },
    /// A generation request is invalid (empty prompt, too long, bad sampling parameters).
    #[error("generation request: {message}")]
    Request { message: String },
}

/// Why a model path named as a `file` (else a directory) cannot be read as one: it is the
/// other kind (`Gguf` names a file, `HfDir` a directory), neither kind (a device such as
/// `/dev/null`), or it does not exist, and then a relative path is said to be read from the
/// working directory, which is named.
pub fn missing_path(path: &Path, file: bool) -> String {
    if path.exists() && !path.is_file() && !path.is_dir() {
        return "is neither a file nor a directory (a device, pipe or socket): a model is a \
                .gguf file or a Hugging Face model directory holding config.json"
            .into();
    }
    match (path.exists(), file) {
        (true, true) => "is a directory; `Gguf(..)` names a .gguf file (a Hugging Face model \
                         directory is `HfDir(..)`)"
            .into(),
        (true, false) => "is a file; `HfDir(..)` names a directory holding config.json (a \
                          .gguf file is `Gguf(..)`)"
            .into(),
        (false, _) if path.is_relative() => {
            let here = std::env::current_dir().map(|d| d.display().to_string());
            format!(
                "does not exist (a relative model path is read from the directory roll-flow \
                 runs in, {})",
                here.unwrap_or_else(|e| format!("unreadable: {e}"))
            )
        }
        (false, _) => "does not exist".into(),
    }
}

impl ModelError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ModelError::Io {
            path: path.into(),
            source,
        }
    }
}
