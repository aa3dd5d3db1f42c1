//! Where `ActorStep` takes π_old from ([`OldLogProb`]), and which sources are wrong for
//! the samples of an asynchronous rollout ([`stale_sample_refusal`]).

use roll_flow_algo::PolicyLoss;
use roll_flow_engine::batch::column::{BEHAVIOUR_LOGPROB, OLD_LOGPROB, POLICY_LAG};
use roll_flow_engine::{Column, Refusal};
use serde::Deserialize;

/// The source of π_old in the PPO ratio,
/// [`ActorStepSpec::old_logprob`](super::actor_step::ActorStepSpec::old_logprob).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum OldLogProb {
    /// The `old_logprobs` column, from a `LogProb` node upstream.
    #[default]
    Column,
    /// The step's own log-probs, detached (ratio 1 at the one optimizer step).
    ThisStep,
    /// The rollout's `behaviour_logprob` column.
    Behaviour,
}

impl OldLogProb {
    /// The batch column π_old is read from (`None` for `ThisStep`).
    pub fn column(self) -> Option<Column> {
        match self {
            OldLogProb::Column => Some(OLD_LOGPROB),
            OldLogProb::ThisStep => None,
            OldLogProb::Behaviour => Some(BEHAVIOUR_LOGPROB),
        }
    }
}

/// The policy `ActorStep` improves where the rollout guided the replies
/// ([`ActorStepSpec::target`](super::actor_step::ActorStepSpec::target)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum TargetPolicy {
    /// The model under the env tag's answer guide, as the rollout sampled it: a token's
    /// log-prob is renormalised over the tokens the guide allowed (0 where it forced one),
    /// so the ratio starts at 1.
    #[default]
    Guided,
    /// The model unconstrained, as free text plays it (and free-text validation measures
    /// it): guided replies are then the samples of another policy (off-policy data), and
    /// with π_old the rollout's guided log-probs each token's ratio is the importance
    /// weight π_θ / π_guide of the classic behaviour/target split (Sutton & Barto 2018,
    /// §5.5). A forced token has π_guide = 1, so its ratio is the free model's probability
    /// of writing it: the clip (`PpoClip(low: ε)`) zeroes the gradient of a negative
    /// advantage once that ratio is below 1 − ε, and a positive one raises it, so the
    /// closing tags of rewarded replies are learnt, which a `Guided` target never trains
    /// (their log-prob is 0 whatever the weights). The entropy bonus is then the free
    /// model's, over the whole vocabulary, against a policy term the small ratios keep
    /// weak: on SmolLM2's FrozenLake a bonus of 0.01 spread the free distribution (entropy
    /// 2.3 → 7.8 a token in 11 steps, every free reply malformed), so the shipped warm-up
    /// trains without one (bench/history/smollm2.md).
    Free,
}

/// Why samples of an asynchronous rollout or of a partial rollout that carries groups over
/// (`policy_lag`) would be trained wrong, if they would: their weights are older than the
/// step's, so their log-probs are not
/// π_old of this step, and only the decoupled loss corrects for the gap (AReaL: π_old
/// recomputed under this step's weights as the proximal policy, the behaviour
/// importance weight capped).
pub fn stale_sample_refusal(loss: &PolicyLoss, old: OldLogProb) -> Option<Refusal> {
    let reason = match (loss.corrects_stale_samples(), old) {
        (true, OldLogProb::Column | OldLogProb::ThisStep) => return None,
        (true, OldLogProb::Behaviour) => {
            "`old_logprob: Behaviour` with `DecoupledPpo` takes the rollout's log-probs as \
             the proximal policy too, so the behaviour correction is always 1, but the \
             rollout's samples are older than this step (`staleness` > 0, or a partial \
             rollout's carried groups); add a LogProb node upstream and remove `old_logprob`"
                .to_string()
        }
        (false, OldLogProb::Behaviour) => {
            "the rollout's samples are older than this step (`staleness` > 0, or a partial \
             rollout's carried groups), so their log-probs come from older weights and are \
             not π_old of this step (`old_logprob: Behaviour` is right \
             only for synchronous rollouts); add a LogProb node upstream, remove \
             `old_logprob` and use `loss: DecoupledPpo()` (AReaL's decoupled PPO: π_old \
             recomputed as the proximal policy, the behaviour importance weight capped)"
                .to_string()
        }
        (false, _) => {
            let this_loss = match loss {
                PolicyLoss::PpoClip(_) => "the plain PPO clip".to_string(),
                other => format!("`{}`", other.name()),
            };
            format!(
                "the rollout's samples are older than this step (`staleness` > 0, or a \
                 partial rollout's carried groups), and {this_loss} does not correct for \
                 that; use `loss: DecoupledPpo()` (AReaL's decoupled PPO: the behaviour \
                 importance weight, capped) with π_old from a LogProb node upstream"
            )
        }
    };
    Some(Refusal {
        column: POLICY_LAG,
        reason,
    })
}
