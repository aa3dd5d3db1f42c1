//! A module being trained: the weights, their AdamW state and the step that applies
//! accumulated gradients (global-norm clipping, then the scheduled learning rate).
//!
//! Both the actor (a [`Qwen2CausalLm`](roll_flow_model::Qwen2CausalLm)) and the critic (a
//! [`Qwen2ValueModel`](roll_flow_model::Qwen2ValueModel)) are trained through this one type, so
//! clipping, the schedule and checkpointing behave the same for both. AdamW is burn's
//! (decoupled weight decay, Loshchilov & Hutter 2019) configured from the model's
//! `optim: AdamW(..)`; clipping is [`roll_flow_algo::clip_grad_norm`] (PyTorch's
//! `clip_grad_norm_`). A non-finite gradient norm skips the update and is reported.
//!
//! Checkpoints are burn records in full precision (`BinBytesRecorder`), which keep the
//! parameter ids the optimizer state is keyed by, so a resumed run continues bit for bit.

use std::path::Path;

use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{AdamW, AdamWConfig, GradientsAccumulator, GradientsParams, Optimizer};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};

use burn::tensor::Tensor;

use super::backend::{RunBackend, TrainBackend};
use super::concurrent::part_gradients;
use super::lr_schedule::learning_rate;
use crate::run_layout::{MODEL_FILE, OPTIMIZER_FILE};
use roll_flow_algo::{clip_grad_norm, AlgoStats};
use roll_flow_model::spec::OptimSpec;
use roll_flow_model::CpuBackend;

type Record = BinBytesRecorder<FullPrecisionSettings>;

/// What one optimizer step did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpdateStats {
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// Learning rate used.
    pub lr: f64,
    /// The update was skipped because the gradient norm was not finite.
    pub skipped: bool,
}

/// Weights plus optimizer state.
pub struct Trainable<M: AutodiffModule<TrainBackend<B>>, B: RunBackend = CpuBackend> {
    module: Option<M>,
    optimizer: OptimizerAdaptor<AdamW, M, TrainBackend<B>>,
    accumulated: GradientsAccumulator<M>,
    pending: usize,
    optim: OptimSpec,
    total_steps: u64,
}

fn adamw<M: AutodiffModule<TrainBackend<B>>, B: RunBackend>(
    optim: &OptimSpec,
) -> OptimizerAdaptor<AdamW, M, TrainBackend<B>> {
    let OptimSpec::AdamW {
        betas,
        eps,
        weight_decay,
        ..
    } = optim;
    AdamWConfig::new()
        .with_beta_1(betas.0 as f32)
        .with_beta_2(betas.1 as f32)
        .with_epsilon(*eps as f32)
        .with_weight_decay(*weight_decay as f32)
        .init()
}

impl<M: AutodiffModule<TrainBackend<B>>, B: RunBackend> Trainable<M, B> {
    /// Fresh optimizer state for `module`; the schedule spans `total_steps`. Fails when a
    /// setting of `optim` is out of range ([`OptimSpec::validate`]).
    pub fn new(module: M, optim: OptimSpec, total_steps: u64) -> Result<Self, String> {
        optim
            .validate(total_steps)
            .map_err(|e| format!("optim: {e}"))?;
        Ok(Trainable {
            optimizer: adamw(&optim),
            module: Some(module),
            accumulated: GradientsAccumulator::new(),
            pending: 0,
            optim,
            total_steps,
        })
    }

    /// The current weights.
    pub fn module(&self) -> &M {
        self.module
            .as_ref()
            .expect("the module is only taken during a step")
    }

    /// Adds one micro-batch's gradients to the accumulated ones.
    pub fn accumulate(&mut self, grads: GradientsParams) {
        let module = self
            .module
            .as_ref()
            .expect("the module is only taken during a step");
        self.accumulated.accumulate(module, grads);
        self.pending += 1;
    }

    /// Adds the gradients of `scale[i] · loss(part[i])` for every part, computed
    /// concurrently on the CPU ([`super::concurrent::part_gradients`]) and accumulated in
    /// part order; returns what `loss` reported for each part.
    pub fn accumulate_parts<P: Sync>(
        &mut self,
        parts: &[P],
        scales: &[f32],
        loss: impl Fn(&M, &P) -> Result<(Tensor<TrainBackend<B>, 1>, AlgoStats), String> + Sync,
    ) -> Result<Vec<AlgoStats>, String>
    where
        M: Sync,
    {
        let results = part_gradients(self.module(), parts, scales, B::CONCURRENT_PASSES, loss)?;
        Ok(results
            .into_iter()
            .map(|(grads, stats)| {
                self.accumulate(grads);
                stats
            })
            .collect())
    }

    /// Applies the accumulated gradients at training step `step`.
    pub fn apply(&mut self, step: u64) -> UpdateStats {
        let mut grads = self.accumulated.grads();
        self.pending = 0;
        let OptimSpec::AdamW { grad_clip, .. } = self.optim;
        let module = self.module.take().expect("module present");
        let grad_norm = match grad_clip {
            Some(max) => clip_grad_norm(&module, &mut grads, max),
            None => roll_flow_algo::grad_norm(&module, &grads),
        };
        let lr = learning_rate(&self.optim, step, self.total_steps);
        if !grad_norm.is_finite() {
            self.module = Some(module);
            return UpdateStats {
                grad_norm,
                lr,
                skipped: true,
            };
        }
        self.module = Some(self.optimizer.step(lr, module, grads));
        UpdateStats {
            grad_norm,
            lr,
            skipped: false,
        }
    }

    /// Writes `model.bin` and `optimizer.bin` into `dir` (each atomically).
    pub fn save(&self, dir: &Path) -> Result<(), String> {
        let model = Record::default()
            .record(self.module().clone().into_record(), ())
            .map_err(|e| format!("cannot encode the weights: {e}"))?;
        let optimizer = Record::default()
            .record(self.optimizer.to_record(), ())
            .map_err(|e| format!("cannot encode the optimizer state: {e}"))?;
        write(dir, MODEL_FILE, &model)?;
        write(dir, OPTIMIZER_FILE, &optimizer)
    }

    /// Restores weights and optimizer state written by [`Trainable::save`], onto `device`.
    pub fn load(&mut self, dir: &Path, device: &B::Device) -> Result<(), String> {
        let model = Record::default()
            .load(read(dir, MODEL_FILE)?, device)
            .map_err(|e| format!("{}: {e}", dir.join(MODEL_FILE).display()))?;
        let optimizer = Record::default()
            .load(read(dir, OPTIMIZER_FILE)?, device)
            .map_err(|e| format!("{}: {e}", dir.join(OPTIMIZER_FILE).display()))?;
        let module = self.module.take().expect("module present");
        self.module = Some(module.load_record(model));
        let fresh = adamw::<M, B>(&self.optim);
        self.optimizer = fresh.load_record(optimizer);
        Ok(())
    }
}

/// Writes a small text file atomically.
pub fn write_text(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    write(dir, name, text.as_bytes())
}

/// Reads a small text file.
pub fn read_text(dir: &Path, name: &str) -> Result<String, String> {
    String::from_utf8(read(dir, name)?).map_err(|e| format!("{}: {e}", dir.join(name).display()))
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    roll_flow_engine::atomic_file::write_atomic(&dir.join(name), bytes)
        .map_err(|e| format!("cannot write {}: {e}", dir.join(name).display()))
}

fn read(dir: &Path, name: &str) -> Result<Vec<u8>, String> {
    std::fs::read(dir.join(name))
        .map_err(|e| format!("cannot read {}: {e}", dir.join(name).display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_out_of_range_optimizer_is_refused_before_any_step() {
        let model = crate::runtime::concurrent_tests::model();
        let mut optim = OptimSpec::default();
        let OptimSpec::AdamW { grad_clip, .. } = &mut optim;
        *grad_clip = Some(-1.0);
        let Err(err) = Trainable::<_, CpuBackend>::new(model.clone(), optim, 10) else {
            panic!("a negative clip norm was accepted");
        };
        assert!(
            err.starts_with("optim: `grad_clip` must be > 0, got -1"),
            "{err}"
        );
        assert!(Trainable::<_, CpuBackend>::new(model, OptimSpec::default(), 10).is_ok());
    }
}
