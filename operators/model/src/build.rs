//! Turning a `models:` entry ([`ModelSpec`]) into a causal LM and its tokenizer: the Tiny
//! preset initialised from a seed with the built-in tokenizer, a Hugging Face directory or
//! a GGUF file loaded from disk (relative paths resolve against the pipeline file's
//! directory).

use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;

use super::config::Qwen2Config;
use super::error::ModelError;
use super::gguf::{load_gguf, GgufModel};
use super::hf::{load_causal_lm, load_model_dir, read_config, SafetensorsSource};
use super::qwen2::{Qwen2CausalLm, Qwen2ValueModel};
use super::spec::{ArchSpec, ModelSpec, TokenizerSpec};
use super::tokenizer::TextTokenizer;

/// Builds the model and tokenizer a spec describes; `seed` is used when the spec has none.
/// With `lora:` the model comes with fresh adapters and its base weights frozen
/// ([`crate::lora::attach_lora`]).
pub fn build_causal_lm<B: Backend>(
    spec: &ModelSpec,
    base_dir: &Path,
    seed: u64,
    device: &B::Device,
) -> Result<(Qwen2CausalLm<B>, TextTokenizer), ModelError> {
    let gguf = match &spec.arch {
        ArchSpec::Gguf(file) => Some(GgufModel::open(&resolve(base_dir, file))?),
        _ => None,
    };
    let tokenizer = match (tokenizer_source(spec, base_dir), &gguf) {
        (TokenizerSource::Gguf(_), Some(gguf)) => gguf.tokenizer()?,
        (source, _) => source.load()?,
    };
    let model = match (&spec.arch, &gguf) {
        (ArchSpec::HfDir(dir), _) => load_causal_lm(&resolve(base_dir, dir), device)?,
        (ArchSpec::Gguf(_), Some(gguf)) => gguf.causal_lm(device)?,
        _ => Qwen2CausalLm::random(
            &tiny_config(spec, &tokenizer)?,
            spec.seed.unwrap_or(seed),
            device,
        ),
    };
    let model = match &spec.lora {
        Some(lora) => crate::lora::attach_lora(model, lora, spec.seed.unwrap_or(seed)),
        None => model,
    }
    .with_compute_dtype(spec.precision.compute_dtype())
    .with_gradient_checkpointing(spec.gradient_checkpointing);
    if tokenizer.vocab_size() > model.config.vocab_size {
        return Err(ModelError::Config {
            path: PathBuf::from("models:"),
            message: format!(
                "the tokenizer has {} tokens but the model's vocab_size is {}",
                tokenizer.vocab_size(),
                model.config.vocab_size
            ),
        });
    }
    Ok((model, tokenizer))
}

/// The causal LM and tokenizer at `path`: a GGUF file (or a missing path named `*.gguf`,
/// so its error says the file is missing), or else a Hugging Face directory (what
/// `roll-flow generate --model PATH` loads).
pub fn load_model_path<B: Backend>(
    path: &Path,
    device: &B::Device,
) -> Result<(Qwen2CausalLm<B>, TextTokenizer), ModelError> {
    let named_gguf = !path.exists() && path.extension().is_some_and(|e| e == "gguf");
    match path.is_file() || named_gguf {
        true => load_gguf(path, device),
        false => load_model_dir(path, device),
    }
}

/// The architecture `spec` builds, read without loading any weights: the `Tiny` preset at
/// its vocabulary, an `HfDir`'s config.json, or a GGUF file's metadata.
pub fn model_config(spec: &ModelSpec, base_dir: &Path) -> Result<Qwen2Config, ModelError> {
    match &spec.arch {
        ArchSpec::HfDir(dir) => {
            Qwen2Config::from_json_file(&resolve(base_dir, dir).join("config.json"))
        }
        ArchSpec::Gguf(file) => GgufModel::open(&resolve(base_dir, file))?.config(),
        ArchSpec::Tiny(tiny) if tiny.vocab.is_some() => {
            tiny_config(spec, &TextTokenizer::builtin())
        }
        ArchSpec::Tiny(_) => tiny_config(spec, &tokenizer_source(spec, base_dir).load()?),
    }
}

/// Where a spec's tokenizer comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenizerSource {
    /// The built-in tokenizer of the Tiny preset.
    Builtin,
    /// A Hugging Face directory's `tokenizer.json` (+ `tokenizer_config.json`).
    HfDir(PathBuf),
    /// A GGUF file's metadata.
    Gguf(PathBuf),
}

impl TokenizerSource {
    /// Loads the tokenizer.
    pub fn load(&self) -> Result<TextTokenizer, ModelError> {
        match self {
            TokenizerSource::Builtin => Ok(TextTokenizer::builtin()),
            TokenizerSource::HfDir(dir) => TextTokenizer::from_model_dir(dir),
            TokenizerSource::Gguf(file) => GgufModel::open(file)?.tokenizer(),
        }
    }
}

/// Where a spec's tokenizer comes from, paths resolved against `base_dir`.
pub fn tokenizer_source(spec: &ModelSpec, base_dir: &Path) -> TokenizerSource {
    match (&spec.tokenizer, &spec.arch) {
        (TokenizerSpec::Builtin, _) | (TokenizerSpec::Auto, ArchSpec::Tiny(_)) => {
            TokenizerSource::Builtin
        }
        (TokenizerSpec::HfDir(dir), _) | (TokenizerSpec::Auto, ArchSpec::HfDir(dir)) => {
            TokenizerSource::HfDir(resolve(base_dir, dir))
        }
        (TokenizerSpec::Auto, ArchSpec::Gguf(file)) => {
            TokenizerSource::Gguf(resolve(base_dir, file))
        }
    }
}

/// Builds a critic (backbone + fresh value head) for a spec: a seeded Tiny network sized to
/// its tokenizer (as [`build_causal_lm`] sizes a Tiny policy), or a Hugging Face
/// directory's or GGUF file's backbone with a new head (its `lm_head` is not used).
pub fn build_value_model<B: Backend>(
    spec: &ModelSpec,
    base_dir: &Path,
    seed: u64,
    device: &B::Device,
) -> Result<Qwen2ValueModel<B>, ModelError> {
    let seed = spec.seed.unwrap_or(seed);
    if spec.lora.is_some() {
        return Err(ModelError::Config {
            path: PathBuf::from("models:"),
            message: "`lora:` is for a causal LM (policy); a value model (critic) trains every \
                      weight: remove `lora:` from the critic's entry"
                .into(),
        });
    }
    let model = match &spec.arch {
        ArchSpec::Tiny(_) => {
            let tokenizer = tokenizer_source(spec, base_dir).load()?;
            let config = tiny_config(spec, &tokenizer)?;
            Qwen2ValueModel::random(&config, seed, device)
        }
        ArchSpec::Gguf(file) => {
            GgufModel::open(&resolve(base_dir, file))?.value_model(seed, device)?
        }
        ArchSpec::HfDir(dir) => {
            let dir = resolve(base_dir, dir);
            let config = read_config(&dir)?;
            let mut source = SafetensorsSource::open(&dir)?;
            source.allow_unused("lm_head.weight");
            let model =
                Qwen2ValueModel::from_causal_lm_weights(&mut source, &config, seed, device)?;
            source.finish()?;
            model
        }
    };
    Ok(model
        .with_compute_dtype(spec.precision.compute_dtype())
        .with_gradient_checkpointing(spec.gradient_checkpointing))
}

fn tiny_config(spec: &ModelSpec, tokenizer: &TextTokenizer) -> Result<Qwen2Config, ModelError> {
    let tiny = spec.arch.tiny().expect("Tiny arch");
    let vocab = tiny.vocab.unwrap_or(tokenizer.vocab_size());
    let mut config = Qwen2Config::tiny(&tiny, vocab);
    config.validate().map_err(|message| ModelError::Config {
        path: PathBuf::from("models: Tiny(..)"),
        message,
    })?;
    config.eos_token_id = Some(tokenizer.stop_tokens().into());
    Ok(config)
}

fn resolve(base_dir: &Path, dir: &str) -> PathBuf {
    let path = Path::new(dir);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base_dir.join(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type B = burn::backend::Flex;

    #[test]
    fn tiny_spec_builds_a_seeded_model_with_the_builtin_tokenizer() {
        let spec: ModelSpec =
            crate::spec::tests::parse("(arch: Tiny(layers: 1, dim: 32, heads: 4, kv_heads: 2))")
                .unwrap();
        let (a, tokenizer) =
            build_causal_lm::<B>(&spec, Path::new("."), 3, &Default::default()).unwrap();
        let (b, _) = build_causal_lm::<B>(&spec, Path::new("."), 3, &Default::default()).unwrap();
        assert_eq!(a.config.vocab_size, tokenizer.vocab_size());
        assert_eq!((a.config.num_hidden_layers, a.config.kv_heads()), (1, 2));
        let weights = |m: &Qwen2CausalLm<B>| m.model.embed_tokens.weight.val().into_data();
        assert_eq!(weights(&a), weights(&b), "same seed, same weights");
    }

    /// A real model's vocabulary over the smaller builtin tokenizer (the Qwen2.5-0.5B shape
    /// of `bench/gpu`); one smaller than the tokenizer's is refused.
    #[test]
    fn tiny_vocab_sets_the_embedding_rows() {
        let parse = |text: &str| -> ModelSpec { crate::spec::tests::parse(text).unwrap() };
        let spec = parse("(arch: Tiny(layers: 1, dim: 16, heads: 2, vocab: 1000))");
        let (model, tokenizer) =
            build_causal_lm::<B>(&spec, Path::new("."), 0, &Default::default()).unwrap();
        assert!(tokenizer.vocab_size() < 1000);
        assert_eq!(model.config.vocab_size, 1000);
        assert_eq!(model.model.embed_tokens.weight.val().dims(), [1000, 16]);
        let small = parse("(arch: Tiny(layers: 1, dim: 16, heads: 2, vocab: 100))");
        let err = build_causal_lm::<B>(&small, Path::new("."), 0, &Default::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("but the model's vocab_size is 100"),
            "{err}"
        );
    }

    #[test]
    fn bad_tiny_shape_is_a_config_error() {
        let spec: ModelSpec = crate::spec::tests::parse("(arch: Tiny(dim: 30, heads: 4))").unwrap();
        let err = build_causal_lm::<B>(&spec, Path::new("."), 0, &Default::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("hidden_size 30 is not divisible by num_attention_heads 4"),
            "{err}"
        );
    }
}
