//! The models of a run: a causal LM (policy or reference) with its inference copy and
//! policy version, and a value model (critic). Both train through [`Trainable`].
//!
//! The policy keeps two copies, as ROLL and verl keep a training engine and an inference
//! engine: the autodiff weights that `ActorStep` updates, and the plain-backend copy that
//! rollout and eval generate with. Publishing copies train → inference and bumps the
//! version; `ActorStep` publishes after its update unless a `ModelUpdate` node is in the
//! graph, which then decides when rollout sees new weights.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::module::{AutodiffModule, Module};

use super::backend::{InferBackend, RunBackend, TrainBackend};
use super::run_plan::RunInfo;
use super::saved_architecture::{check_saved_architecture, check_saved_lora};
use super::trainable::{load_weights, Trainable};
use super::trained_params::has_frozen;
use super::weight_versions::{inference_copy, WeightVersions};
use crate::run_layout::{PEFT_DIR, VERSION_FILE};
use roll_flow_model::build::{build_causal_lm, build_value_model};
use roll_flow_model::lora::merge_lora;
use roll_flow_model::spec::{ArchSpec, ModelSpec, Precision};
use roll_flow_model::{CpuBackend, ModelError};
use roll_flow_model::{Qwen2CausalLm, Qwen2Config, Qwen2ValueModel, TextTokenizer};

/// A causal LM: trained weights, the inference copy, tokenizer and version.
pub struct PolicyModel<B: RunBackend = CpuBackend> {
    pub name: String,
    pub tokenizer: Arc<TextTokenizer>,
    pub train: Trainable<Qwen2CausalLm<TrainBackend<B>>, B>,
    inference: Qwen2CausalLm<InferBackend<B>>,
    /// How many times weights were published to the inference copy.
    pub version: u64,
    /// Whether `ActorStep` publishes (no `ModelUpdate` node for this model).
    pub publish_on_train: bool,
    /// The inference weights of recent steps, when an asynchronous rollout plays this
    /// policy (`Rollout(staleness: N)`, N > 0); checkpoints save them.
    pub behind: Option<Arc<WeightVersions<B>>>,
    /// With `lora:`, the base model the adapters apply to (the model directory or GGUF
    /// file as the pipeline names it): checkpoints then also hold the adapters as a PEFT
    /// adapter directory under `peft/`, naming it.
    lora_base: Option<String>,
    /// With `lora:`, the trained weights (base and adapters) the inference copy was made
    /// from: an asynchronous rollout's checkpoint saves their adapters, not the merged copy.
    published_from: Option<Arc<Qwen2CausalLm<TrainBackend<B>>>>,
}

/// The causal LM `spec` declares (model paths relative to the current directory), built as
/// a run builds it: a model no node `trained` (a reference) is frozen whole, so checkpoints
/// hold a fingerprint of its weights, not a copy ([`super::trained_params`]).
fn build_as_run<B: RunBackend>(
    spec: &ModelSpec,
    seed: u64,
    trained: bool,
    device: &B::Device,
) -> Result<(Qwen2CausalLm<TrainBackend<B>>, TextTokenizer), ModelError> {
    let (model, tokenizer) =
        build_causal_lm::<TrainBackend<B>>(spec, Path::new("."), seed, device)?;
    let model = if trained { model } else { model.no_grad() };
    Ok((model, tokenizer))
}

fn model_error(name: &str, e: impl std::fmt::Display) -> String {
    format!("model `{name}`: {e}")
}

impl<B: RunBackend> PolicyModel<B> {
    pub(super) fn build(
        name: &str,
        spec: &ModelSpec,
        run: &RunInfo,
        device: &B::Device,
        publish_on_train: bool,
        trained: bool,
    ) -> Result<Self, String> {
        let (model, tokenizer) =
            build_as_run::<B>(spec, run.seed, trained, device).map_err(|e| model_error(name, e))?;
        let mut policy = PolicyModel {
            name: name.to_string(),
            tokenizer: Arc::new(tokenizer),
            inference: inference_copy(&model),
            train: Trainable::new(model, spec.optim.clone(), run.steps)
                .map_err(|e| model_error(name, e))?,
            version: 0,
            publish_on_train,
            behind: None,
            lora_base: spec.lora.as_ref().map(|_| match &spec.arch {
                ArchSpec::HfDir(path) | ArchSpec::Gguf(path) => path.clone(),
                ArchSpec::Tiny(_) => "Tiny".into(),
            }),
            published_from: None,
        };
        policy.keep_published_from();
        if let Some(dir) = run.resume_dir() {
            policy.restore(&dir, device)?;
        }
        Ok(policy)
    }

    /// The copy rollout and eval generate with.
    pub fn inference(&self) -> &Qwen2CausalLm<InferBackend<B>> {
        &self.inference
    }

    /// Copies the trained weights to the inference copy as a new version; LoRA adapters are
    /// folded into the weights there, so generation pays nothing for them.
    pub fn publish(&mut self) {
        self.inference = inference_copy(self.train.module());
        self.keep_published_from();
        self.version += 1;
    }

    /// With `lora:`, keeps the trained weights the inference copy was just made from (a
    /// handle: the next update writes new tensors, not into these).
    fn keep_published_from(&mut self) {
        if self.lora_base.is_some() {
            self.published_from = Some(Arc::new(self.train.module().clone()));
        }
    }

    /// With `lora:`, the trained weights the inference copy was made from
    /// ([`super::weight_versions::StepWeights::trained_from`]).
    pub fn published_from(&self) -> Option<Arc<Qwen2CausalLm<TrainBackend<B>>>> {
        self.published_from.clone()
    }

    /// This model's folder inside a checkpoint directory.
    pub fn checkpoint_dir(&self, checkpoint: &Path) -> PathBuf {
        checkpoint.join("models").join(&self.name)
    }

    /// Saves weights, optimizer and version, and the weights in a form other tools read:
    /// with `lora:`, the adapters as PEFT's under `peft/`; for a model that trains whole,
    /// the model as an HF directory under `hf/`. (A model with frozen weights, LoRA's base
    /// or a reference, has its trained parameters alone saved, [`super::trained_params`],
    /// and only `hf/config.json`; `export --hf` merges a LoRA policy's on demand.)
    pub fn save(&self, checkpoint: &Path) -> Result<(), String> {
        let dir = self.checkpoint_dir(checkpoint);
        self.train.save(&dir)?;
        if let Some(base) = &self.lora_base {
            let peft = dir.join(PEFT_DIR);
            roll_flow_model::hf::save_peft_adapter(self.train.module(), &peft, base)
                .map_err(|e| model_error(&self.name, e))?;
        }
        if !has_frozen(self.train.module()) {
            // In full precision: with a compute dtype the inference copy's weights are
            // rounded to it, and the trained ones (as the last update left them) are saved
            // instead; where a `ModelUpdate` node publishes later than the update, hf/ then
            // runs ahead of the version file, which counts publications. (Resuming reads
            // model.bin.)
            let full_precision = match self.inference.model.compute {
                None => self.inference.clone(),
                Some(_) => self.train.module().valid(),
            };
            roll_flow_model::hf::save_causal_lm(&full_precision, &dir.join("hf"))
                .map_err(|e| model_error(&self.name, e))?;
        } else {
            // The architecture alone, which a resume checks before it reads the weights.
            let config = self.train.module().config.to_json_string();
            super::record_files::write_text(&dir.join("hf"), "config.json", &config)?;
        }
        if let Some(behind) = &self.behind {
            behind.save(&dir).map_err(|e| model_error(&self.name, e))?;
        }
        super::record_files::write_text(&dir, VERSION_FILE, &self.version.to_string())
    }

    fn restore(&mut self, checkpoint: &Path, device: &B::Device) -> Result<(), String> {
        let dir = self.checkpoint_dir(checkpoint);
        check_saved_lora(&dir, self.train.module().lora.as_ref())
            .map_err(|e| model_error(&self.name, e))?;
        let built = self.train.module().config.clone();
        load_checked(&mut self.train, &built, &dir, device)
            .map_err(|e| model_error(&self.name, e))?;
        self.inference = inference_copy(self.train.module());
        self.keep_published_from();
        self.version = super::record_files::read_count(&dir, VERSION_FILE)
            .map_err(|e| model_error(&self.name, e))?;
        Ok(())
    }
}

/// A value model and its optimizer.
pub struct CriticModel<B: RunBackend = CpuBackend> {
    pub name: String,
    pub train: Trainable<Qwen2ValueModel<TrainBackend<B>>, B>,
}

impl<B: RunBackend> CriticModel<B> {
    pub(super) fn build(
        name: &str,
        spec: &ModelSpec,
        run: &RunInfo,
        device: &B::Device,
    ) -> Result<Self, String> {
        let model = build_value_model::<TrainBackend<B>>(spec, Path::new("."), run.seed, device)
            .map_err(|e| model_error(name, e))?;
        let mut critic = CriticModel {
            name: name.to_string(),
            train: Trainable::new(model, spec.optim.clone(), run.steps)
                .map_err(|e| model_error(name, e))?,
        };
        if let Some(dir) = run.resume_dir() {
            let dir = critic.checkpoint_dir(&dir);
            let built = critic.train.module().config.clone();
            load_checked(&mut critic.train, &built, &dir, device)
                .map_err(|e| model_error(name, e))?;
        }
        Ok(critic)
    }

    /// This model's folder inside a checkpoint directory.
    pub fn checkpoint_dir(&self, checkpoint: &Path) -> PathBuf {
        checkpoint.join("critics").join(&self.name)
    }

    /// Saves weights and optimizer; also the weights as safetensors under `hf/` (backbone
    /// plus `score.*`, transformers' token-classification layout).
    pub fn save(&self, checkpoint: &Path) -> Result<(), String> {
        let dir = self.checkpoint_dir(checkpoint);
        self.train.save(&dir)?;
        let model = self.train.module();
        let mut sink = roll_flow_model::weights::TensorSink::default();
        model.save(&mut sink);
        roll_flow_model::hf::save_model_dir(&dir.join("hf"), &model.config, &sink)
            .map_err(|e| model_error(&self.name, e))
    }
}

/// A causal LM with frozen weights as its checkpoint folder `dir` holds it, the adapters
/// folded into the weights: the model rebuilt from `spec` (the model the pipeline names, in
/// f32 on the CPU) with `seed`, frozen whole unless a node `trained` it (as the run built
/// it), what trained read back ([`load_weights`]) once its `lora:` is found to be the
/// checkpoint's ([`check_saved_lora`]). What `export --hf` writes for a LoRA
/// policy or a reference.
pub fn merged_policy(
    spec: &ModelSpec,
    seed: u64,
    trained: bool,
    dir: &Path,
) -> Result<Qwen2CausalLm<CpuBackend>, String> {
    let spec = ModelSpec {
        precision: Precision::F32,
        ..spec.clone()
    };
    let device = Default::default();
    let (model, _) =
        build_as_run::<CpuBackend>(&spec, seed, trained, &device).map_err(|e| e.to_string())?;
    check_saved_lora(dir, model.lora.as_ref())?;
    let model = load_weights(model, dir, &device)?;
    Ok(merge_lora(&model.valid()))
}

/// Restores weights and optimizer state from a model's checkpoint folder `dir`, after
/// checking that the architecture saved beside them fits `built`, the config of the model
/// built ([`check_saved_architecture`]; burn's `load_record` would panic on another shape).
fn load_checked<M: AutodiffModule<TrainBackend<B>>, B: RunBackend>(
    train: &mut Trainable<M, B>,
    built: &Qwen2Config,
    dir: &Path,
    device: &B::Device,
) -> Result<(), String> {
    check_saved_architecture(&dir.join("hf").join("config.json"), built)?;
    train.load(dir, device)
}

/// Refuses a critic whose vocabulary is smaller than the tokenizer of a policy whose
/// samples it scores: those token ids would index past its embedding rows.
pub(super) fn check_critic_vocab<B: RunBackend>(
    critic: &CriticModel<B>,
    policy: &PolicyModel<B>,
) -> Result<(), String> {
    let vocab = critic.train.module().config.vocab_size;
    let tokens = policy.tokenizer.vocab_size();
    if vocab < tokens {
        return Err(format!(
            "critic `{}` has vocab_size {vocab}, but policy `{}`'s tokenizer has {tokens} token \
             ids, which the critic reads; give the critic the policy's tokenizer (the same \
             `tokenizer:`, or an `HfDir` model with that vocabulary)",
            critic.name, policy.name
        ));
    }
    Ok(())
}
