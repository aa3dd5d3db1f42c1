//! [`WeightVersions`]: the policy's inference weights at the start of each recent step,
//! shared between the trainer and an asynchronous rollout thread.
//!
//! With `Rollout(staleness: N)` the rollout of step t plays with the weights step
//! max(0, t − N) started from, never "whatever is newest", so a run is reproducible: the
//! trainer publishes the weights of step t when step t starts ([`WeightVersions::publish`]),
//! the rollout thread waits for the step it needs ([`WeightVersions::wait`]), and the
//! weights no later rollout needs are dropped ([`WeightVersions::drop_before`]). A
//! checkpoint saves the ones still held and a resumed run reads them back
//! ([`WeightVersions::save`], [`WeightVersions::restore`]), so rollouts after a resume play
//! with the same weights as without it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use burn::module::AutodiffModule;
use burn::tensor::DType;
use roll_flow_model::hf::{load_causal_lm, save_causal_lm};
use roll_flow_model::lora::merge_lora;
use roll_flow_model::Qwen2CausalLm;

use super::backend::{InferBackend, RunBackend, TrainBackend};
use super::record_files::{read_count, write_bytes, write_text};
use super::trainable::load_weights;
use super::trained_params::encode_trained;
use crate::run_layout::{TRAINED_FILE, VERSION_FILE};

/// The copy rollout and eval generate with: LoRA adapters folded into the weights, the
/// weights stored in the model's compute dtype where it has one (cast once a publication,
/// not once a forward call) and, on a GPU, the projections that share an input side by
/// side (`Qwen2CausalLm::for_generation`).
pub fn inference_copy<B: RunBackend>(
    model: &Qwen2CausalLm<TrainBackend<B>>,
) -> Qwen2CausalLm<InferBackend<B>> {
    merge_lora(&model.valid()).for_generation()
}

/// The inference weights a step started from, and their policy version (publish count).
pub struct StepWeights<B: RunBackend> {
    pub version: u64,
    pub model: Arc<Qwen2CausalLm<InferBackend<B>>>,
    /// For a LoRA policy, the trained weights `model` was made from: a checkpoint saves
    /// their adapters (`trained.safetensors`) instead of the merged model, and a resume
    /// folds them into the rebuilt base again.
    pub trained_from: Option<Arc<Qwen2CausalLm<TrainBackend<B>>>>,
}

impl<B: RunBackend> Clone for StepWeights<B> {
    fn clone(&self) -> Self {
        StepWeights {
            version: self.version,
            model: self.model.clone(),
            trained_from: self.trained_from.clone(),
        }
    }
}

struct Held<B: RunBackend> {
    by_step: BTreeMap<u64, StepWeights<B>>,
    closed: bool,
}

/// The weights of recent steps, by step; see the module doc.
pub struct WeightVersions<B: RunBackend> {
    held: Mutex<Held<B>>,
    published: Condvar,
}

/// The folder of a checkpoint that holds the earlier steps' weights of a policy.
pub fn behind_dir(model_dir: &Path) -> PathBuf {
    model_dir.join("behind")
}

impl<B: RunBackend> Default for WeightVersions<B> {
    fn default() -> Self {
        WeightVersions {
            held: Mutex::new(Held {
                by_step: BTreeMap::new(),
                closed: false,
            }),
            published: Condvar::new(),
        }
    }
}

impl<B: RunBackend> WeightVersions<B> {
    fn held(&self) -> MutexGuard<'_, Held<B>> {
        // A poisoned lock means a holder panicked between two plain map operations; the
        // map is still whole.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the weights step `step` starts from (a step published twice keeps the first).
    pub fn publish(&self, step: u64, weights: StepWeights<B>) {
        self.held().by_step.entry(step).or_insert(weights);
        self.published.notify_all();
    }

    /// The weights step `step` started from, once published; `None` once closed.
    pub fn wait(&self, step: u64) -> Option<StepWeights<B>> {
        let mut held = self.held();
        loop {
            if held.closed {
                return None;
            }
            if let Some(weights) = held.by_step.get(&step) {
                return Some(weights.clone());
            }
            held = self.published.wait(held).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Drops the weights of steps before `step`.
    pub fn drop_before(&self, step: u64) {
        let mut held = self.held();
        held.by_step = held.by_step.split_off(&step);
    }

    /// Wakes every waiter with `None`: the run is over.
    pub fn close(&self) {
        self.held().closed = true;
        self.published.notify_all();
    }

    /// The steps whose weights are held, oldest first.
    #[cfg(test)]
    fn steps(&self) -> Vec<u64> {
        self.held().by_step.keys().copied().collect()
    }

    /// Saves the held weights under `behind_dir(model_dir)`, one HF folder per step (as f32:
    /// in mixed precision the values of the bf16 copies, which come back exactly) with its
    /// version. A checkpoint at the end of step t holds the steps from
    /// t + 1 − N to t: what the rollouts after t play with.
    pub fn save(&self, model_dir: &Path) -> Result<(), String> {
        let held: Vec<(u64, StepWeights<B>)> = self
            .held()
            .by_step
            .iter()
            .map(|(s, w)| (*s, w.clone()))
            .collect();
        for (step, weights) in held {
            let dir = behind_dir(model_dir).join(step.to_string());
            match &weights.trained_from {
                Some(trained) => write_bytes(&dir, TRAINED_FILE, &encode_trained(&**trained)?)?,
                None => {
                    save_causal_lm(&weights.model, &dir).map_err(|e| format!("step {step}: {e}"))?
                }
            }
            write_text(&dir, VERSION_FILE, &weights.version.to_string())?;
        }
        Ok(())
    }

    /// Reads back the weights of steps `from..to` saved by [`save`](Self::save), as
    /// inference copies computing in `compute` (the policy's compute dtype); a LoRA
    /// policy's adapters are read into `lora` (the policy's trained weights, whose frozen
    /// base they share) and merged as publishing merges them. A step with nothing saved is
    /// an error naming the folder.
    pub fn restore(
        &self,
        model_dir: &Path,
        from: u64,
        to: u64,
        compute: Option<DType>,
        lora: Option<&Qwen2CausalLm<TrainBackend<B>>>,
        device: &B::Device,
    ) -> Result<(), String> {
        for step in from..to {
            let dir = behind_dir(model_dir).join(step.to_string());
            let (model, trained_from) = match lora {
                Some(policy) if dir.join(TRAINED_FILE).is_file() => {
                    let trained = load_weights(policy.clone(), &dir, device)?;
                    (inference_copy(&trained), Some(Arc::new(trained)))
                }
                _ => {
                    let model = load_causal_lm::<InferBackend<B>>(&dir, device).map_err(|e| {
                        format!(
                            "the checkpoint lacks the weights of step {step}, which an \
                             asynchronous rollout (`staleness`) resumes with: {e}; resume from \
                             a checkpoint written with the same `staleness`"
                        )
                    })?;
                    (model.with_compute_dtype(compute).for_generation(), None)
                }
            };
            let version = read_count(&dir, VERSION_FILE)?;
            self.publish(
                step,
                StepWeights {
                    version,
                    model: Arc::new(model),
                    trained_from,
                },
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roll_flow_model::CpuBackend;

    fn tiny() -> Qwen2CausalLm<CpuBackend> {
        let config = roll_flow_model::Qwen2Config::tiny(&Default::default(), 600);
        Qwen2CausalLm::random(&config, 3, &Default::default())
    }

    fn values(model: &Qwen2CausalLm<CpuBackend>) -> Vec<(String, Vec<usize>, Vec<f32>)> {
        let mut sink = roll_flow_model::weights::TensorSink::default();
        model.save(&mut sink);
        sink.tensors
    }

    fn weights(version: u64, model: &Arc<Qwen2CausalLm<CpuBackend>>) -> StepWeights<CpuBackend> {
        StepWeights {
            version,
            model: model.clone(),
            trained_from: None,
        }
    }

    #[test]
    fn a_waiter_gets_exactly_the_step_it_asked_for() {
        let store = Arc::new(WeightVersions::<CpuBackend>::default());
        let model = Arc::new(tiny());
        let waiter = {
            let store = store.clone();
            std::thread::spawn(move || store.wait(2).map(|w| w.version))
        };
        store.publish(1, weights(10, &model));
        store.publish(2, weights(20, &model));
        store.publish(2, weights(99, &model)); // the first publish of a step stays
        assert_eq!(waiter.join().unwrap(), Some(20));
        store.drop_before(2);
        assert_eq!(store.steps(), vec![2]);
        let closed = {
            let store = store.clone();
            std::thread::spawn(move || store.wait(5).is_none())
        };
        store.close();
        assert!(closed.join().unwrap());
    }

    #[test]
    fn saved_weights_come_back_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        let store = WeightVersions::<CpuBackend>::default();
        let model = Arc::new(tiny());
        store.publish(4, weights(3, &model));
        store.save(dir.path()).unwrap();
        let back = WeightVersions::<CpuBackend>::default();
        back.restore(dir.path(), 4, 5, None, None, &Default::default())
            .unwrap();
        let restored = back.wait(4).unwrap();
        assert_eq!(restored.version, 3);
        assert_eq!(values(&restored.model), values(&model));
        // Step 5 was not saved: restoring it names what is missing.
        let err = back
            .restore(dir.path(), 5, 6, None, None, &Default::default())
            .unwrap_err();
        assert!(err.contains("step 5") && err.contains("staleness"), "{err}");
    }

    /// A mixed-precision policy's published copies (weights stored in bf16) come back as
    /// such: the same values, stored in bf16, computing in bf16.
    #[test]
    fn mixed_precision_weights_come_back_in_their_compute_dtype() {
        let dir = tempfile::tempdir().unwrap();
        let bf16 = Some(DType::BF16);
        let model = Arc::new(
            tiny()
                .with_compute_dtype(bf16)
                .with_params_in_compute_dtype(),
        );
        let store = WeightVersions::<CpuBackend>::default();
        store.publish(4, weights(3, &model));
        store.save(dir.path()).unwrap();
        let back = WeightVersions::<CpuBackend>::default();
        back.restore(dir.path(), 4, 5, bf16, None, &Default::default())
            .unwrap();
        let restored = back.wait(4).unwrap().model;
        assert_eq!(restored.model.compute, bf16);
        let embedding = restored.model.embed_tokens.weight.val();
        assert_eq!(embedding.dtype(), DType::BF16);
        assert_eq!(values(&restored), values(&model));
    }
}
