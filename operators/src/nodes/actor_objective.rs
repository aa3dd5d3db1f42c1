//! One micro-batch's objective in `ActorStep` (`actor_step.rs`, which fills it from its
//! settings): the policy's
//! log-probs recomputed under the current weights (with the rollout's temperature and, for
//! a guided target, its answer guides), π_old from the step's source, and
//! [`roll_flow_algo::actor_objective`] (policy loss − entropy bonus + uniform-prior KL + KL
//! term) over them; `--dump-batches` records what the loss made of each token.

use burn::tensor::Tensor;
use roll_flow_algo::{
    actor_objective, ActorBatch, ActorExtras, KlLoss, PolicyInputs, PolicyLoss, Regularisers,
};
use roll_flow_engine::{Batch, Column, Contract};
use roll_flow_model::weights::to_f32_vec;
use roll_flow_model::Qwen2CausalLm;

use crate::runtime::backend::{RunBackend, TrainBackend};
use crate::runtime::resources::Guides;
use crate::runtime::scoring::{score_responses, token_column, ScoreOptions};
use crate::runtime::trainable::PartStats;
use crate::training::loss_dump::LossDump;

/// What a micro-batch's objective needs, shareable across the threads that train
/// micro-batches concurrently.
pub(super) struct ActorObjective<'a> {
    /// The step's settings: its loss, KL term, uniform-prior KL coefficient, and whether
    /// a group's samples are scored as one prefix-grouped row.
    pub loss: &'a PolicyLoss,
    pub kl: Option<&'a KlLoss>,
    pub uniform_kl: f32,
    pub prefix_grouped: bool,
    /// The column π_old comes from (`None`: this step's own log-probs, detached).
    pub old_logprob: Option<Column>,
    /// The node's contract, whose hints a missing column's error carries.
    pub contract: Contract,
    pub guides: &'a Guides,
    pub temperature: f32,
    pub entropy_coef: f32,
    pub dump: Option<&'a LossDump>,
}

impl ActorObjective<'_> {
    /// The objective of one micro-batch under `policy` (log-probs recomputed), with its
    /// statistics.
    pub fn loss<B: RunBackend>(
        &self,
        policy: &Qwen2CausalLm<TrainBackend<B>>,
        batch: &Batch,
    ) -> Result<(Tensor<TrainBackend<B>, 1>, PartStats<B>), String> {
        let device = policy.device();
        let old = self.old_logprob.as_ref();
        let inputs = ActorBatch::from_batch(batch, self.loss, self.kl, old, &device)
            .map_err(|e| e.with_hint_from(&self.contract).to_string())?;
        let options = ScoreOptions {
            uniform_kl: self.uniform_kl != 0.0,
            prefix_grouped: self.prefix_grouped,
        };
        let scored = score_responses(policy, batch, self.temperature, self.guides, options)?;
        let n = batch.num_tokens();
        let logprob = token_column(scored.logprobs, &scored.token_index, n);
        let entropy = token_column(scored.entropy, &scored.token_index, n);
        let uniform_kl = scored
            .uniform_kl
            .map(|u| token_column(u, &scored.token_index, n));
        let old_logprob = match &inputs.old_logprob {
            Some(old) => old.clone(),
            None => logprob.clone().detach(),
        };
        let policy_inputs = PolicyInputs {
            logprob,
            old_logprob,
            advantages: inputs.advantages.clone(),
            layout: &inputs.layout,
        };
        if let Some(dump) = self.dump {
            let behaviour = inputs.behaviour_logprob.clone();
            let mut columns = vec![("policy_logprob", policy_inputs.logprob.clone().detach())];
            columns.extend(self.loss.token_diagnostics(&policy_inputs, behaviour));
            let columns: Vec<(&str, Vec<f32>)> = (columns.iter())
                .map(|(name, t)| (*name, to_f32_vec(t)))
                .collect();
            dump.record(batch, &columns)?;
        }
        let extras = ActorExtras {
            behaviour_logprob: inputs.behaviour_logprob.clone(),
            ref_logprob: inputs.ref_logprob.clone(),
            entropy: Some(entropy),
            uniform_kl,
        };
        let regularisers = Regularisers {
            entropy: self.entropy_coef,
            uniform_kl: self.uniform_kl,
            kl_loss: self.kl,
        };
        let out = actor_objective(self.loss, &policy_inputs, extras, regularisers)
            .map_err(|e| e.to_string())?;
        Ok((out.loss, out.stats))
    }
}
