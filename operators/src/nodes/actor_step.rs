//! `ActorStep`: the policy update of a PPO-style step (verl's and ROLL's actor update).
//!
//! For each of `ppo_epochs` passes over the batch, the batch is shuffled and cut into
//! mini-batches of `mini_batch` samples, one optimizer step each, and every mini-batch into
//! micro-batches of `micro_batch` samples; each micro-batch's objective (policy loss −
//! entropy bonus + uniform-prior KL + KL term, `actor_objective.rs`) is scaled by its share
//! of the mini-batch's loss divisor ([`crate::training::epochs::train_epochs`]) and back-propagated,
//! micro-batches concurrently ([`crate::runtime::concurrent`]); the gradients are accumulated, and
//! one AdamW step with global-norm clipping and the scheduled learning rate applies them.
//! Log-probs are recomputed under the current weights with the rollout's temperature and
//! answer guides, exactly as `LogProb` computed π_old. With `old_logprob: ThisStep` (one
//! optimizer step per batch, checked at validation) π_old is those log-probs detached: the
//! weights `LogProb` would have scored with are the ones about to be updated, so the ratio
//! is 1 and its gradient ∇log π, as with the column, and the `LogProb` pass is saved.
//! With `old_logprob: Behaviour` π_old is the rollout's log-probs: the weights of this
//! step too when the rollout is synchronous (it samples with the version the step starts
//! from), so mini-batches and several epochs can skip the `LogProb` pass as well. An
//! asynchronous rollout (`Rollout(staleness: N)`) samples with older weights: its samples
//! carry `policy_lag`, and only `DecoupledPpo` with π_old from `LogProb` (or `ThisStep`)
//! takes them (the contract refuses the rest, saying why).
//! With `target: Free` a guided rollout's samples train the unconstrained model instead
//! (scored without the guides; [`TargetPolicy::Free`]), so a `guide_steps` warm-up teaches
//! the free text validation plays.
//! A step whose gradient is 0 before it is computed (every advantage 0, no entropy or KL
//! term) takes its AdamW steps on zero gradients without the passes: the same weights.
//! The step does nothing while
//! `critic_warmup` steps have not passed. Afterwards the new weights are published to the
//! inference copy unless a `ModelUpdate` node does that.
//! With `adaptive_entropy` the bonus coefficient is the controller's
//! ([`roll_flow_algo::entropy_control`]), updated from the entropy each step measures and
//! saved by checkpoints (`actor/<node>.json`), so a resumed run continues it.
//!
//! RON: `"actor_step": ActorStep(model: "policy", loss: PpoClip(low: 0.2, high: 0.28), entropy: 0.001)`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use roll_flow_algo::{
    no_policy_gradient, AdaptiveEntropy, EntropyController, KlEstimator, KlLoss, PolicyLoss,
    RatioLevel,
};
use roll_flow_engine::batch::column::{
    ADVANTAGES, BEHAVIOUR_LOGPROB, REF_LOGPROB, RESPONSE_MASK, TOKEN_TURN,
};
use roll_flow_engine::collective::Collective;
use roll_flow_engine::{
    Batch, Column, Contract, Need, Operator, OperatorError, Reference, Role, StepContext,
};
use serde::Deserialize;

use super::actor_objective::ActorObjective;
use super::kind::{at_least_one, default_policy, model_ref, NodeKind, TrainedModel};
use super::pi_old::stale_sample_refusal;
pub use super::pi_old::{OldLogProb, TargetPolicy};
use crate::runtime::backend::RunBackend;
use crate::runtime::models::PolicyModel;
use crate::runtime::resources::{Guides, Runtime, NO_GUIDES};
use crate::training::epochs::{
    loss_divisor, train_epochs, EpochSchedule, MicroBatching, StatMeans,
};
use crate::training::loss_dump::LossDump;

/// `ActorStep`'s settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ActorStepSpec {
    /// The model trained (default `"policy"`).
    pub model: String,
    /// The policy loss: `PpoClip(...)` (default), `DecoupledPpo(...)`, `Gspo(...)` or
    /// `Cispo(...)` ([`PolicyLoss`]).
    pub loss: PolicyLoss,
    /// Entropy bonus coefficient (default 0); with `adaptive_entropy`, its initial value.
    pub entropy: f32,
    /// Moves the entropy coefficient each step to hold a target entropy (Skywork-OR1's
    /// adaptive entropy control, [`roll_flow_algo::entropy_control`]; default off).
    pub adaptive_entropy: Option<AdaptiveEntropy>,
    /// Coefficient of KL(U_A‖π), the divergence of the uniform distribution over each
    /// decision's allowed tokens from the policy (label smoothing's regulariser; keeps every
    /// state's actions from saturating, [`roll_flow_algo::actor_loss`]; default 0, off).
    pub uniform_kl: f32,
    /// KL to the reference model as a loss term (default off).
    pub kl: Option<KlLoss>,
    /// Passes over the batch per step (default 1).
    pub ppo_epochs: usize,
    /// Samples per optimizer step (verl's `ppo_mini_batch_size`); each epoch shuffles
    /// the batch and takes one AdamW step per mini-batch (default: the whole batch).
    pub mini_batch: Option<usize>,
    /// Samples per gradient-accumulation micro-batch within a mini-batch (default: the
    /// whole mini-batch).
    pub micro_batch: Option<usize>,
    /// Padded tokens per micro-batch at most (rows × the longest row): the mini-batch's
    /// samples, sorted by length, packed into micro-batches within this budget, so short
    /// samples share one and a long one gets its own (ROLL's `use_dynamic_batching_in_train`
    /// with `max_tokens_per_microbatch_in_train`, verl's `use_dynamic_bsz` with
    /// `ppo_max_token_len_per_gpu`; [`crate::training::epochs::micro_batches`]). It bounds
    /// the activation memory of a step whose sample lengths vary, and with `micro_batch`
    /// both limits hold; not with `prefix_grouper`. The same gradient whatever the cut
    /// (default: no limit).
    pub max_tokens_per_micro_batch: Option<usize>,
    /// Steps to wait while the critic warms up (default 0).
    pub critic_warmup: u64,
    /// Where π_old comes from: `Column` (default), the `old_logprobs` of a `LogProb` node
    /// upstream; `ThisStep`, the step's own log-probs, detached; `Behaviour`, the rollout's
    /// log-probs. All three are the weights the step starts from: `ThisStep` only with one
    /// optimizer step per batch (`ppo_epochs: 1`, no `mini_batch`), where it gives the same
    /// update bit for bit; `Behaviour` only when the rollout is synchronous (`staleness:
    /// 0`, the default; validation refuses it otherwise) (its recomputation
    /// differs by float rounding, about 5e-6 in a FrozenLake run,
    /// `old_logprob/behaviour_gap_max`), with any mini-batches or epochs (AReaL's
    /// `recompute_logprob: false`). Both save the `LogProb` pass.
    pub old_logprob: OldLogProb,
    /// Score the samples that share a prompt as one row, the prompt computed once (Prefix
    /// Grouper; verl's `use_prefix_grouper`, [`roll_flow_model::prefix_grouped`]), and keep
    /// them in one micro-batch (make `micro_batch` a multiple of the group size). The same
    /// log-probs and gradients up to float rounding, for less work where prompts are long
    /// and replies short; a group whose dense row would hold more than its samples apart
    /// (long multi-turn replies) is scored one sample a row (default false).
    pub prefix_grouper: bool,
    /// The policy the update improves where the rollout guided the replies: `Guided`
    /// (default), the model under the answer guide, as it sampled; `Free`, the model
    /// unconstrained, the guided replies taken as off-policy samples (needs `old_logprob:
    /// Behaviour`, the guided log-probs as the behaviour policy; [`TargetPolicy`]).
    pub target: TargetPolicy,
}

impl Default for ActorStepSpec {
    fn default() -> Self {
        ActorStepSpec {
            model: default_policy(),
            loss: PolicyLoss::default(),
            entropy: 0.0,
            adaptive_entropy: None,
            uniform_kl: 0.0,
            kl: None,
            ppo_epochs: 1,
            mini_batch: None,
            micro_batch: None,
            max_tokens_per_micro_batch: None,
            critic_warmup: 0,
            old_logprob: OldLogProb::Column,
            prefix_grouper: false,
            target: TargetPolicy::Guided,
        }
    }
}

/// Why `ActorStep(kl: (estimator: Full))` is refused (verl raises NotImplementedError for
/// it too).
const FULL_KL_REFUSAL: &str = "`kl: (estimator: Full)` is not supported: full-vocabulary KL \
    needs the reference model's whole distribution at every response token, which the \
    `RefLogProb` column does not hold; use `estimator: K3` (the default, low variance) or `K1`";

impl NodeKind for ActorStepSpec {
    fn contract(&self) -> Contract {
        let mut needs = vec![Need::column(RESPONSE_MASK), Need::column(ADVANTAGES)];
        needs.extend(self.old_logprob.column().map(Need::column));
        if self.kl.is_some() {
            needs.push(Need::with_hint(
                REF_LOGPROB,
                "the `kl` loss term needs a reference model; add a RefLogProb node upstream",
            ));
        }
        let behaviour_read = self.old_logprob == OldLogProb::Behaviour;
        if self.loss.reads_behaviour() && !behaviour_read {
            needs.push(Need::column(BEHAVIOUR_LOGPROB));
        }
        if self.loss.ratio() == RatioLevel::Segment {
            needs.push(Need::with_hint(TOKEN_TURN, "segment ratios need turn ids"));
        }
        Contract {
            needs,
            refuses: stale_sample_refusal(&self.loss, self.old_logprob)
                .into_iter()
                .collect(),
            ..Contract::default()
        }
    }

    fn may_give() -> Vec<Column> {
        Vec::new()
    }

    fn role(&self) -> Role {
        Role::PolicyUpdate
    }

    fn references(&self) -> Vec<Reference> {
        model_ref(&self.model)
    }

    fn check(&self) -> Result<(), String> {
        at_least_one("ppo_epochs", self.ppo_epochs as u64)?;
        at_least_one("micro_batch", self.micro_batch.unwrap_or(1) as u64)?;
        at_least_one("mini_batch", self.mini_batch.unwrap_or(1) as u64)?;
        at_least_one(
            "max_tokens_per_micro_batch",
            self.max_tokens_per_micro_batch.unwrap_or(1) as u64,
        )?;
        if !(self.entropy.is_finite() && self.entropy >= 0.0) {
            return Err(format!("`entropy` must be >= 0, got {}", self.entropy));
        }
        if !(self.uniform_kl.is_finite() && self.uniform_kl >= 0.0) {
            return Err(format!(
                "`uniform_kl` must be >= 0, got {}",
                self.uniform_kl
            ));
        }
        if let Some(adaptive) = &self.adaptive_entropy {
            adaptive.validate()?;
        }
        if self
            .kl
            .as_ref()
            .is_some_and(|k| k.estimator == KlEstimator::Full)
        {
            return Err(FULL_KL_REFUSAL.into());
        }
        if self.old_logprob == OldLogProb::ThisStep
            && (self.ppo_epochs > 1 || self.mini_batch.is_some())
        {
            return Err(
                "`old_logprob: ThisStep` needs one optimizer step per batch (`ppo_epochs: 1`, \
                        no `mini_batch`): after the first step the weights are no longer π_old; \
                        remove it and add a LogProb node upstream"
                    .into(),
            );
        }
        if self.prefix_grouper && self.max_tokens_per_micro_batch.is_some() {
            return Err(
                "`max_tokens_per_micro_batch` counts rows × the longest row, but `prefix_grouper` \
                 scores a group as one row as wide as its prompt and every reply; use one of \
                 them (with `prefix_grouper`, bound memory with `micro_batch`, a multiple of the \
                 group size)"
                    .into(),
            );
        }
        if self.loss.correction().is_some() && self.old_logprob == OldLogProb::Behaviour {
            return Err(
                "`correction` weighs each token by π_old/π_behave, which is 1 when π_old is the \
                 rollout's own log-probs (`old_logprob: Behaviour`); remove `old_logprob: \
                 Behaviour` and add a LogProb node upstream (or use `old_logprob: ThisStep`), \
                 or remove the correction"
                    .into(),
            );
        }
        if self.target == TargetPolicy::Free && self.old_logprob != OldLogProb::Behaviour {
            return Err(
                "`target: Free` weighs each guided token by π_free / π_guide, which needs the \
                 guided rollout's own log-probs as π_old; add `old_logprob: Behaviour`"
                    .into(),
            );
        }
        self.loss.validate().map_err(|e| e.to_string())
    }

    fn trained(&self) -> Option<TrainedModel> {
        Some(TrainedModel {
            model: self.model.clone(),
            micro_batch: self.micro_batch.or(self.mini_batch),
            max_tokens_per_micro_batch: self.max_tokens_per_micro_batch,
            lm_head: true,
        })
    }

    fn build<B: RunBackend>(
        &self,
        name: &str,
        runtime: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String> {
        Ok(Box::new(ActorStepNode {
            collective: runtime.worker.collective.clone(),
            spec: self.clone(),
            policy: runtime.policy(&self.model)?,
            guides: runtime.guides.clone(),
            temperature: runtime.plan.wiring.sampling_temperature(&self.model),
            entropy_control: runtime.saved_state("actor", name)?,
            dump: (runtime.run.dump_dir.clone()).map(|dir| LossDump::new(dir, name)),
        }))
    }
}

struct ActorStepNode<B: RunBackend> {
    /// The workers that share each step's micro-batches.
    collective: Collective,
    spec: ActorStepSpec,
    policy: Rc<RefCell<PolicyModel<B>>>,
    guides: Rc<RefCell<Guides>>,
    temperature: f32,
    entropy_control: Rc<RefCell<EntropyController>>,
    /// What the loss made of each token, for `--dump-batches`.
    dump: Option<LossDump>,
}

impl<B: RunBackend> ActorStepNode<B> {
    /// This step's entropy bonus coefficient: fixed, or the controller's.
    fn entropy_coef(&self) -> f32 {
        match &self.spec.adaptive_entropy {
            None => self.spec.entropy,
            Some(settings) => {
                let initial = self.spec.entropy as f64;
                self.entropy_control.borrow().bonus(settings, initial) as f32
            }
        }
    }

    /// Whether this step's gradient is 0 before it is computed: every advantage is 0
    /// ([`no_policy_gradient`]; each policy loss sums A_t times a function of the token's
    /// ratio) and the objective has no other term (no entropy bonus at `entropy_coef` nor
    /// its controller, no uniform-prior or reference KL), nor a `--dump-batches` record to
    /// write. The update then adds zero gradients instead of the passes
    /// ([`crate::runtime::trainable::Trainable::accumulate_zero`]): the same weights and
    /// optimizer state, without the loss's statistics (entropy, clip fractions), and
    /// `zero_gradient_updates` counts its optimizer steps. GRPO-style runs reach such steps
    /// once every group's samples score alike (`drop_zero_advantage` then keeps the batch
    /// whole), a quarter to a third of `smollm2_frozen_lake_free.ron`'s time.
    fn gradient_is_zero(&self, batch: &Batch, entropy_coef: f32) -> Result<bool, OperatorError> {
        let spec = &self.spec;
        let other_terms = entropy_coef != 0.0
            || spec.adaptive_entropy.is_some()
            || spec.uniform_kl != 0.0
            || spec.kl.is_some()
            || self.dump.is_some();
        if other_terms {
            return Ok(false);
        }
        no_policy_gradient(batch, "ActorStep").map_err(|e| OperatorError(e.to_string()))
    }

    /// Feeds the entropy measured in this step to the controller; reports its coefficient.
    fn control_entropy(&self, metrics: &mut BTreeMap<String, f64>) {
        let Some(settings) = &self.spec.adaptive_entropy else {
            return;
        };
        let mut control = self.entropy_control.borrow_mut();
        if let Some(&entropy) = metrics.get("entropy") {
            control.update(settings, self.spec.entropy as f64, entropy);
        }
        metrics.insert("entropy/coef".into(), control.coef.unwrap_or(0.0));
    }
}

impl<B: RunBackend> Operator for ActorStepNode<B> {
    fn process(&mut self, ctx: &mut StepContext, batch: Batch) -> Result<Batch, OperatorError> {
        if ctx.step < self.spec.critic_warmup {
            ctx.metrics.insert("warming_up".into(), 1.0);
            return Ok(batch);
        }
        let policy_cell = self.policy.clone();
        let shared = self.guides.borrow();
        let objective = ActorObjective {
            loss: &self.spec.loss,
            kl: self.spec.kl.as_ref(),
            uniform_kl: self.spec.uniform_kl,
            prefix_grouped: self.spec.prefix_grouper,
            old_logprob: self.spec.old_logprob.column(),
            contract: self.spec.contract(),
            guides: match self.spec.target {
                TargetPolicy::Guided => &shared,
                TargetPolicy::Free => &NO_GUIDES,
            },
            temperature: self.temperature,
            entropy_coef: self.entropy_coef(),
            dump: self.dump.as_ref(),
        };
        ctx.metrics
            .insert("entropy/bonus".into(), objective.entropy_coef as f64);
        let (agg, norm_length) = self.spec.loss.agg();
        let mut stats = StatMeans::default();
        let step = ctx.step;
        let indexed = match &self.dump {
            Some(dump) => Some(dump.indexed(&batch).map_err(OperatorError)?),
            None => None,
        };
        let known_zero = self.gradient_is_zero(&batch, objective.entropy_coef)?;
        let mut zero_updates = 0;
        train_epochs(
            indexed.as_ref().unwrap_or(&batch),
            EpochSchedule {
                epochs: self.spec.ppo_epochs,
                mini_batch: self.spec.mini_batch,
                micro: MicroBatching {
                    samples: self.spec.micro_batch,
                    tokens: self.spec.max_tokens_per_micro_batch,
                    by_prompt: self.spec.prefix_grouper,
                },
                seed: ctx.seed,
                collective: &self.collective,
            },
            &mut stats,
            |part| loss_divisor(part, agg, norm_length),
            |parts, scales, seeds| {
                let mut policy = policy_cell.borrow_mut();
                if known_zero && policy.train.accumulate_zero() {
                    zero_updates += 1;
                    return Ok(Vec::new());
                }
                policy
                    .train
                    .accumulate_parts(parts, scales, seeds, |m, p| objective.loss(m, p))
            },
            || policy_cell.borrow_mut().train.apply(step),
        )
        .map_err(OperatorError)?;
        if let Some(dump) = &self.dump {
            (dump.write(step, &batch, &self.collective)).map_err(OperatorError)?;
        }
        let mut policy = self.policy.borrow_mut();
        if policy.publish_on_train {
            policy.publish();
        }
        stats.into_metrics(&mut ctx.metrics);
        if zero_updates > 0 {
            ctx.metrics
                .insert("zero_gradient_updates".into(), zero_updates as f64);
        }
        self.control_entropy(&mut ctx.metrics);
        ctx.metrics
            .insert("policy_version".into(), policy.version as f64);
        Ok(batch)
    }
}
