//! GGUF model files (llama.cpp's format): a Llama, Qwen2 or Qwen3 model with its weights
//! (quantised or not), tokenizer and chat template in one file, loaded as the same
//! [`Qwen2CausalLm`] an HF directory gives, weights dequantised to f32 at load.
//!
//! [`reader`] parses the container, [`dequant`] decodes the tensor types, [`config`] reads
//! the architecture from the metadata, [`weights`] serves the tensors under Hugging Face
//! names, [`tokenizer`] rebuilds the tokenizer.

pub mod config;
pub mod dequant;
pub mod metadata;
pub mod reader;
pub mod sentencepiece;
pub mod tokenizer;
pub mod weights;

use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;

use crate::config::Qwen2Config;
use crate::error::ModelError;
use crate::family::Family;
use crate::qwen2::{Qwen2CausalLm, Qwen2ValueModel};
use crate::tokenizer::TextTokenizer;
use metadata::Metadata;
use reader::GgufFile;
use weights::GgufSource;

/// A parsed GGUF file and its path.
pub struct GgufModel {
    /// Where it was read from (named in errors).
    pub path: PathBuf,
    /// The parsed file.
    pub file: GgufFile,
}

impl GgufModel {
    /// Reads and parses `path`; a file that is not valid GGUF is an error naming what is wrong.
    pub fn open(path: &Path) -> Result<Self, ModelError> {
        if !path.is_file() {
            return Err(ModelError::Gguf {
                path: path.to_path_buf(),
                message: crate::error::missing_path(path, true),
            });
        }
        let bytes = std::fs::read(path).map_err(|e| ModelError::io(path, e))?;
        let file = GgufFile::parse(bytes).map_err(|message| ModelError::Gguf {
            path: path.to_path_buf(),
            message,
        })?;
        Ok(GgufModel {
            path: path.to_path_buf(),
            file,
        })
    }

    fn error(&self, message: String) -> ModelError {
        ModelError::Gguf {
            path: self.path.clone(),
            message,
        }
    }

    fn metadata(&self) -> Metadata<'_> {
        Metadata(&self.file.metadata)
    }

    /// The model's architecture, from the metadata.
    pub fn config(&self) -> Result<Qwen2Config, ModelError> {
        config::config_from_metadata(&self.metadata(), &self.file.tensors)
            .map_err(|m| self.error(m))
    }

    /// The tokenizer and chat template of the metadata.
    pub fn tokenizer(&self) -> Result<TextTokenizer, ModelError> {
        let origin = self.path.display().to_string();
        tokenizer::tokenizer_from_metadata(&self.metadata(), &origin).map_err(|m| self.error(m))
    }

    /// The causal LM, every tensor of the file used.
    pub fn causal_lm<B: Backend>(
        &self,
        device: &B::Device,
    ) -> Result<Qwen2CausalLm<B>, ModelError> {
        let config = self.config()?;
        let mut source = self.source(&config);
        let model = Qwen2CausalLm::load(&mut source, &config, device)?;
        source.finish()?;
        Ok(model)
    }

    /// A critic: the file's backbone and a fresh value head seeded with `head_seed`.
    pub fn value_model<B: Backend>(
        &self,
        head_seed: u64,
        device: &B::Device,
    ) -> Result<Qwen2ValueModel<B>, ModelError> {
        let config = self.config()?;
        let mut source = self.source(&config);
        source.allow_unused("output.weight");
        let model =
            Qwen2ValueModel::from_causal_lm_weights(&mut source, &config, head_seed, device)?;
        source.finish()?;
        Ok(model)
    }

    /// The tokenizer as a Hugging Face directory holds it: `tokenizer.json` and
    /// `tokenizer_config.json` (chat template, special tokens), as `(file name, text)`.
    pub fn hf_tokenizer_files(&self) -> Result<[(&'static str, String); 2], ModelError> {
        let meta = self.metadata();
        let json = tokenizer::tokenizer_json(&meta).map_err(|m| self.error(m))?;
        let tokens = meta
            .strings("tokenizer.ggml.tokens")
            .map_err(|m| self.error(m))?;
        let token = |key: &str| -> Result<serde_json::Value, ModelError> {
            let id = meta
                .opt_usize(&format!("tokenizer.ggml.{key}"))
                .map_err(|m| self.error(m))?;
            Ok(id
                .and_then(|id| tokens.get(id))
                .map_or(serde_json::Value::Null, |t| (*t).into()))
        };
        let (add_bos, add_eos) = tokenizer::adds_bos_eos(&meta).map_err(|m| self.error(m))?;
        let template = meta
            .opt_str("tokenizer.chat_template")
            .map_err(|m| self.error(m))?;
        let config = serde_json::json!({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "chat_template": template,
            "bos_token": token("bos_token_id")?,
            "eos_token": token("eos_token_id")?,
            "pad_token": token("padding_token_id")?,
            "unk_token": token("unknown_token_id")?,
            "add_bos_token": add_bos,
            "add_eos_token": add_eos,
            "clean_up_tokenization_spaces": false,
        });
        let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).expect("JSON prints");
        Ok([
            ("tokenizer.json", pretty(&json)),
            ("tokenizer_config.json", pretty(&config)),
        ])
    }

    fn source(&self, config: &Qwen2Config) -> GgufSource<'_> {
        let unpermute = (config.family() == Family::Llama)
            .then(|| (config.num_attention_heads, config.kv_heads()));
        GgufSource::new(&self.file, &self.path.display().to_string(), unpermute)
    }
}

/// The causal LM and tokenizer of a GGUF file, the tokenizer checked to fit the vocabulary.
pub fn load_gguf<B: Backend>(
    path: &Path,
    device: &B::Device,
) -> Result<(Qwen2CausalLm<B>, TextTokenizer), ModelError> {
    let gguf = GgufModel::open(path)?;
    let tokenizer = gguf.tokenizer()?;
    let model = gguf.causal_lm(device)?;
    if tokenizer.vocab_size() > model.config.vocab_size {
        return Err(gguf.error(format!(
            "the tokenizer has {} tokens but the model's vocab_size is {}",
            tokenizer.vocab_size(),
            model.config.vocab_size
        )));
    }
    Ok((model, tokenizer))
}
