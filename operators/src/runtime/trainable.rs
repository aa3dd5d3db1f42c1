//! A module being trained: the weights, their AdamW state and the step that applies
//! accumulated gradients (global-norm clipping, then the scheduled learning rate).
//!
//! Both the actor (a [`Qwen2CausalLm`](roll_flow_model::Qwen2CausalLm)) and the critic (a
//! [`Qwen2ValueModel`](roll_flow_model::Qwen2ValueModel)) are trained through this one type, so
//! clipping, the schedule and checkpointing behave the same for both. AdamW is burn's
//! (decoupled weight decay, Loshchilov & Hutter 2019) configured from the model's
//! `optim: AdamW(..)`; clipping is [`roll_flow_algo::clip_grad_norm`] (PyTorch's
//! `clip_grad_norm_`).
//!
//! A non-finite update is skipped: a gradient norm that is not finite, or an update whose
//! norm ‖θ_after − θ_before‖ is not finite (an lr of 1e30 makes one from finite
//! gradients), leaves the weights and the optimizer state as they were before the step and
//! is counted; `max_nonfinite` such updates in a row stop the run with an error, so no
//! checkpoint or export ever holds a non-finite weight.
//!
//! Checkpoints keep the parameter ids the optimizer state is keyed by, so a resumed run
//! continues bit for bit: the weights as a burn record in full precision
//! (`BinBytesRecorder`), or, for a model with a frozen base (LoRA), only the parameters that
//! train ([`super::trained_params`]); the optimizer state as a burn record.

use std::path::Path;

use burn::module::{AutodiffModule, Module, ModuleVisitor, Param, ParamId};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{AdamW, AdamWConfig, GradientsAccumulator, GradientsParams, Optimizer};
use burn::record::Recorder;

use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::Tensor;

use super::backend::{RunBackend, TrainBackend};
use super::concurrent::part_gradients;
use super::lr_schedule::learning_rate;
use super::record_files::{read_bytes, read_record, write_bytes};
use super::trained_params::{decode_trained, encode_trained, fingerprint, has_frozen, Params};
use crate::run_layout::{MODEL_FILE, OPTIMIZER_FILE, TRAINED_FILE};
use roll_flow_algo::{clip_grad_norm, flatten_grads, unflatten_grads, AlgoStats, DeviceStats};
use roll_flow_engine::collective::Collective;
use roll_flow_model::qwen2::dropout_masks;
use roll_flow_model::spec::OptimSpec;
use roll_flow_model::CpuBackend;

use super::record_files::Record;

/// What a micro-batch's loss reports, still on the training device.
pub type PartStats<B> = DeviceStats<TrainBackend<B>>;

/// What one optimizer step did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpdateStats {
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// Learning rate used.
    pub lr: f64,
    /// ‖θ_after − θ_before‖ of the update (0 when skipped).
    pub update_norm: f64,
    /// The update was skipped: the gradient norm or the update norm was not finite.
    pub skipped: bool,
}

/// Weights plus optimizer state.
pub struct Trainable<M: AutodiffModule<TrainBackend<B>>, B: RunBackend = CpuBackend> {
    module: Option<M>,
    optimizer: OptimizerAdaptor<AdamW, M, TrainBackend<B>>,
    accumulated: GradientsAccumulator<M>,
    optim: OptimSpec,
    total_steps: u64,
    /// Non-finite updates since the last finite one.
    nonfinite_in_a_row: usize,
    /// The workers whose gradients each step sums (data-parallel training).
    collective: Collective,
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
            optim,
            total_steps,
            nonfinite_in_a_row: 0,
            collective: Collective::single(),
        })
    }

    /// Each step applies the sum of every worker's accumulated gradients (the workers of
    /// `collective` hold the same weights and optimizer state, so they take the same step).
    pub fn share_gradients(&mut self, collective: Collective) {
        self.collective = collective;
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
    }

    /// Adds a gradient of zeros for every parameter the optimizer holds state for: what a
    /// micro-batch whose loss is identically 0 adds (every parameter that had a gradient
    /// before has one now, of zeros; AdamW's moments decay and the weights still move by
    /// them), without its forward and backward passes. False, adding nothing, before the
    /// first update: which parameters a backward reaches is not known yet.
    pub fn accumulate_zero(&mut self) -> bool {
        let state = self.optimizer.to_record();
        if state.is_empty() {
            return false;
        }
        let module = (self.module.as_ref()).expect("the module is only taken during a step");
        let mut zeros = ZeroGradients {
            grads: GradientsParams::new(),
            has_state: |id| state.contains_key(&id),
        };
        module.visit(&mut zeros);
        self.accumulated.accumulate(module, zeros.grads);
        true
    }

    /// Adds the gradients of `scale[i] · loss(part[i])` for every part, its LoRA dropout
    /// masks drawn from `seeds[i]` ([`roll_flow_model::qwen2::dropout_masks`]), computed
    /// concurrently on the CPU ([`super::concurrent::part_gradients`]) and added to the sum
    /// in part order as each is done (so the step holds a few parts' gradients at a time);
    /// returns what `loss` reported for each part, read from the device once every part's
    /// backward is queued, in one download ([`DeviceStats::resolve_all`]). On an error the
    /// gradients summed since the last update are dropped: the step cannot be applied.
    pub fn accumulate_parts<P: Sync>(
        &mut self,
        parts: &[P],
        scales: &[f32],
        seeds: &[u64],
        loss: impl Fn(&M, &P) -> Result<(Tensor<TrainBackend<B>, 1>, PartStats<B>), String> + Sync,
    ) -> Result<Vec<AlgoStats>, String>
    where
        M: Sync,
    {
        let module = (self.module.as_ref()).expect("the module is only taken during a step");
        let (accumulated, mut stats) = (&mut self.accumulated, Vec::with_capacity(parts.len()));
        let seeded: Vec<(&P, u64)> = parts.iter().zip(seeds.iter().copied()).collect();
        let summed = part_gradients(
            module,
            &seeded,
            scales,
            B::CONCURRENT_PASSES,
            |m, &(part, seed)| dropout_masks::with_seed(seed, || loss(m, part)),
            |(grads, part_stats)| {
                accumulated.accumulate(module, grads);
                stats.push(part_stats);
            },
        );
        if let Err(e) = summed {
            self.accumulated = GradientsAccumulator::new();
            return Err(e);
        }
        Ok(DeviceStats::resolve_all(stats))
    }

    /// Applies the accumulated gradients at training step `step`, or skips a non-finite
    /// update (module doc); the error says `max_nonfinite` were skipped in a row.
    pub fn apply(&mut self, step: u64) -> Result<UpdateStats, String> {
        let mut grads = self.accumulated.grads();
        if self.collective.peers() > 1 {
            let flat = flatten_grads(self.module(), &grads);
            let summed = (self.collective.sum(flat))
                .map_err(|e| format!("summing the workers' gradients: {e}"))?;
            grads = unflatten_grads(self.module(), &summed);
        }
        let OptimSpec::AdamW {
            grad_clip,
            max_nonfinite,
            ..
        } = self.optim;
        let module = self.module.take().expect("module present");
        let grad_norm = match grad_clip {
            Some(max) => clip_grad_norm(&module, &mut grads, max),
            None => roll_flow_algo::grad_norm(&module, &grads),
        };
        let lr = learning_rate(&self.optim, step, self.total_steps);
        let mut stats = UpdateStats {
            grad_norm,
            lr,
            update_norm: 0.0,
            skipped: true,
        };
        let what = if grad_norm.is_finite() {
            // Handles, not copies: the step writes new tensors, these keep the old ones.
            let before = (module.clone(), self.optimizer.clone());
            let updated = self.optimizer.step(lr, module, grads);
            let update_norm = roll_flow_algo::update_norm(&before.0, &updated);
            if update_norm.is_finite() {
                self.module = Some(updated);
                self.nonfinite_in_a_row = 0;
                stats.update_norm = update_norm;
                stats.skipped = false;
                return Ok(stats);
            }
            (self.module, self.optimizer) = (Some(before.0), before.1);
            format!("the update norm was {update_norm} (gradient norm {grad_norm:.4e}, lr {lr:e})")
        } else {
            self.module = Some(module);
            format!("the gradient norm was {grad_norm}")
        };
        self.nonfinite_in_a_row += 1;
        if self.nonfinite_in_a_row >= max_nonfinite {
            return Err(format!(
                "{} non-finite updates in a row (`max_nonfinite` of the model's optim), the \
                 last at step {step}: {what}; each was skipped, so the weights and \
                 every checkpoint are the last finite ones; lower the model's `lr` and \
                 `--resume`",
                self.nonfinite_in_a_row
            ));
        }
        Ok(stats)
    }

    /// A hash of the weights' bits (FNV-1a over every float parameter in visiting order):
    /// the workers of a data-parallel run compare theirs at each checkpoint.
    pub fn fingerprint(&self) -> u64 {
        fingerprint(self.module(), Params::All)
    }

    /// Writes the weights (`model.bin`, or `trained.safetensors` for a model with a frozen
    /// base) and `optimizer.bin` into `dir` (each atomically).
    pub fn save(&self, dir: &Path) -> Result<(), String> {
        let (file, model) = if has_frozen(self.module()) {
            (TRAINED_FILE, encode_trained(self.module())?)
        } else {
            let record = Record::default().record(self.module().clone().into_record(), ());
            (
                MODEL_FILE,
                record.map_err(|e| format!("cannot encode the weights: {e}"))?,
            )
        };
        let optimizer = Record::default()
            .record(self.optimizer.to_record(), ())
            .map_err(|e| format!("cannot encode the optimizer state: {e}"))?;
        write_bytes(dir, file, &model)?;
        write_bytes(dir, OPTIMIZER_FILE, &optimizer)
    }

    /// Restores weights and optimizer state written by [`Trainable::save`], onto `device`
    /// (a frozen base stays as built: [`load_weights`]).
    pub fn load(&mut self, dir: &Path, device: &B::Device) -> Result<(), String> {
        let optimizer = read_record(dir, OPTIMIZER_FILE, device)?;
        // Handles: on an error the weights as they were stay.
        self.module = Some(load_weights(self.module().clone(), dir, device)?);
        let fresh = adamw::<M, B>(&self.optim);
        self.optimizer = fresh.load_record(optimizer);
        Ok(())
    }
}

/// `module` with the weights saved in checkpoint folder `dir` by [`Trainable::save`]: the
/// trained parameters into a model with a frozen base ([`decode_trained`]: the base stays
/// as built), else the whole model from `model.bin`.
pub fn load_weights<BK: Backend, M: Module<BK>>(
    module: M,
    dir: &Path,
    device: &BK::Device,
) -> Result<M, String> {
    if dir.join(TRAINED_FILE).is_file() {
        let bytes = read_bytes(dir, TRAINED_FILE)?;
        return decode_trained(module, &bytes, &dir.join(TRAINED_FILE));
    }
    Ok(module.load_record(read_record(dir, MODEL_FILE, device)?))
}

/// Zero gradients for the parameters `has_state` names ([`Trainable::accumulate_zero`]).
struct ZeroGradients<F> {
    grads: GradientsParams,
    has_state: F,
}

impl<B: AutodiffBackend, F: Fn(ParamId) -> bool> ModuleVisitor<B> for ZeroGradients<F> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if (self.has_state)(param.id) {
            let zeros = param.val().inner().zeros_like();
            self.grads.register::<B::InnerBackend, D>(param.id, zeros);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_out_of_range_optimizer_is_refused_before_any_step() {
        let model = crate::runtime::concurrent::tests::model();
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

    type Model = roll_flow_model::Qwen2CausalLm<TrainBackend<CpuBackend>>;

    fn embeddings(model: &Model) -> Vec<f32> {
        let weight = model.model.embed_tokens.weight.val();
        weight.into_data().into_vec::<f32>().unwrap()
    }

    /// A Trainable at constant `lr` with the gradient of sum(embeddings) (all ones on the
    /// embedding table, 64 × 16) accumulated.
    fn with_unit_gradient(train: &mut Trainable<Model, CpuBackend>) {
        let model = train.module().clone();
        let grads = model.model.embed_tokens.weight.val().sum().backward();
        train.accumulate(GradientsParams::from_grads(grads, &model));
    }

    fn trainable(lr: f64) -> Trainable<Model, CpuBackend> {
        let mut optim = OptimSpec::default();
        let OptimSpec::AdamW {
            lr: rate, schedule, ..
        } = &mut optim;
        (*rate, *schedule) = (lr, roll_flow_model::spec::LrSchedule::Constant);
        Trainable::new(crate::runtime::concurrent::tests::model(), optim, 10).unwrap()
    }

    #[test]
    fn a_finite_update_reports_its_norm() {
        // AdamW's first step moves each weight with a gradient by lr (m̂/√v̂ = 1), plus the
        // decay lr·0.01·θ: 1024 weights, so the norm is 1e-3·√1024 = 0.032 within 1e-5.
        let mut train = trainable(1e-3);
        with_unit_gradient(&mut train);
        let stats = train.apply(0).unwrap();
        assert!(!stats.skipped);
        assert!((stats.update_norm - 0.032).abs() < 1e-5, "{stats:?}");
    }

    #[test]
    fn non_finite_updates_are_skipped_then_stop_the_run() {
        let mut train = trainable(1e30);
        let before = embeddings(train.module());
        for step in 0..2 {
            with_unit_gradient(&mut train);
            let stats = train.apply(step).unwrap();
            assert!(stats.skipped, "step {step}: {stats:?}");
            assert_eq!(embeddings(train.module()), before, "the weights are kept");
        }
        with_unit_gradient(&mut train);
        let error = train.apply(2).unwrap_err();
        assert!(
            error.starts_with("3 non-finite updates in a row (`max_nonfinite`")
                && error.contains("the last at step 2: the update norm was inf"),
            "{error}"
        );
        assert_eq!(embeddings(train.module()), before);
        // The optimizer state is the one before the skipped steps: a sane rate now moves
        // the weights by its own first step, as in a fresh optimizer.
        let OptimSpec::AdamW { lr, .. } = &mut train.optim;
        *lr = 1e-3;
        train.nonfinite_in_a_row = 0;
        with_unit_gradient(&mut train);
        let stats = train.apply(3).unwrap();
        assert!((stats.update_norm - 0.032).abs() < 1e-5, "{stats:?}");
    }
}

#[cfg(test)]
#[path = "trainable_lora_tests.rs"]
pub(super) mod lora_tests;

#[cfg(test)]
#[path = "trainable_zero_tests.rs"]
mod zero_tests;
