//! Turning a `models:` entry ([`ModelSpec`]) into a causal LM and its tokenizer: the Tiny
//! preset initialised from a seed with the built-in tokenizer, or a Hugging Face directory
//! loaded from disk (relative paths resolve against the pipeline file's directory).

use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;

use super::config::Qwen2Config;
use super::error::ModelError;
use super::hf::{load_causal_lm, read_config, SafetensorsSource};
use super::qwen2::{Qwen2CausalLm, Qwen2ValueModel};
use super::spec::{ArchSpec, ModelSpec, TokenizerSpec};
use super::tokenizer::TextTokenizer;

/// Builds the model and tokenizer a spec describes; `seed` is used when the spec has none.
pub fn build_causal_lm<B: Backend>(
    spec: &ModelSpec,
    base_dir: &Path,
    seed: u64,
    device: &B::Device,
) -> Result<(Qwen2CausalLm<B>, TextTokenizer), ModelError> {
    let tokenizer = match tokenizer_dir(spec, base_dir) {
        None => TextTokenizer::builtin(),
        Some(dir) => TextTokenizer::from_model_dir(&dir)?,
    };
    let model = match &spec.arch {
        ArchSpec::HfDir(dir) => load_causal_lm(&resolve(base_dir, dir), device)?,
        ArchSpec::Tiny(_) => Qwen2CausalLm::random(
            &tiny_config(spec, &tokenizer)?,
            spec.seed.unwrap_or(seed),
            device,
        ),
    };
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

/// The architecture `spec` builds, read without loading any weights: the `Tiny` preset at
/// its vocabulary, or an `HfDir`'s config.json.
pub fn model_config(spec: &ModelSpec, base_dir: &Path) -> Result<Qwen2Config, ModelError> {
    match &spec.arch {
        ArchSpec::HfDir(dir) => {
            Qwen2Config::from_json_file(&resolve(base_dir, dir).join("config.json"))
        }
        ArchSpec::Tiny(tiny) if tiny.vocab.is_some() => {
            tiny_config(spec, &TextTokenizer::builtin())
        }
        ArchSpec::Tiny(_) => {
            let tokenizer = match tokenizer_dir(spec, base_dir) {
                None => TextTokenizer::builtin(),
                Some(dir) => TextTokenizer::from_model_dir(&dir)?,
            };
            tiny_config(spec, &tokenizer)
        }
    }
}

/// The directory a spec's tokenizer comes from; `None` for the built-in tokenizer.
pub fn tokenizer_dir(spec: &ModelSpec, base_dir: &Path) -> Option<PathBuf> {
    match (&spec.tokenizer, &spec.arch) {
        (TokenizerSpec::Builtin, _) | (TokenizerSpec::Auto, ArchSpec::Tiny(_)) => None,
        (TokenizerSpec::HfDir(dir), _) | (TokenizerSpec::Auto, ArchSpec::HfDir(dir)) => {
            Some(resolve(base_dir, dir))
        }
    }
}

/// Builds a critic (backbone + fresh value head) for a spec: a seeded Tiny network sized to
/// its tokenizer (as [`build_causal_lm`] sizes a Tiny policy), or a Hugging Face
/// directory's backbone with a new head (its `lm_head` is not used).
pub fn build_value_model<B: Backend>(
    spec: &ModelSpec,
    base_dir: &Path,
    seed: u64,
    device: &B::Device,
) -> Result<Qwen2ValueModel<B>, ModelError> {
    let seed = spec.seed.unwrap_or(seed);
    match &spec.arch {
        ArchSpec::Tiny(_) => {
            let tokenizer = match tokenizer_dir(spec, base_dir) {
                None => TextTokenizer::builtin(),
                Some(dir) => TextTokenizer::from_model_dir(&dir)?,
            };
            let config = tiny_config(spec, &tokenizer)?;
            Ok(Qwen2ValueModel::random(&config, seed, device))
        }
        ArchSpec::HfDir(dir) => {
            let dir = resolve(base_dir, dir);
            let config = read_config(&dir)?;
            let mut source = SafetensorsSource::open(&dir)?;
            source.allow_unused("lm_head.weight");
            let model =
                Qwen2ValueModel::from_causal_lm_weights(&mut source, &config, seed, device)?;
            source.finish()?;
            Ok(model)
        }
    }
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
