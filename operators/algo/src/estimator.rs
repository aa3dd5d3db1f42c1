//! The common shape of every advantage estimator, so the `adv` node is a thin wrapper.
//!
//! An estimator is a RON config struct in its own file. It declares its [`Contract`]
//! (columns needed and given) for graph validation, and `apply` fills `advantages` (and
//! `returns` where it has them) on a [`Batch`]. The only state kept across steps is the
//! adaptive KL coefficient, held by the node in an [`AdvantageState`]. The node registry
//! names the estimator's type once; nothing else lists the estimators.

use roll_flow_engine::batch::column::{GROUP_ID, OUTCOME};
use roll_flow_engine::{Batch, Contract, Need};

use super::algo_stats::AlgoStats;
use super::error::AlgoError;
use super::kl_controller::KlController;
use super::repeat_penalty::penalise_repeats;
use super::shaping::Shaping;
use super::zero_advantage_filter::drop_zero_advantage;

/// State an `adv` node keeps between steps (serialisable, for checkpoints).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdvantageState {
    /// The KL penalty's coefficient controller, created on first use from the config.
    pub kl: Option<KlController>,
}

/// An advantage estimator configured from RON.
pub trait AdvantageEstimator {
    /// The RON variant name, e.g. `"GiGPO"`.
    fn kind(&self) -> &'static str;
    /// The columns needed and given, as configured.
    fn contract(&self) -> Contract;
    /// Checks the settings' ranges (run at graph validation and before every
    /// [`AdvantageEstimator::estimate`]).
    fn validate(&self) -> Result<(), AlgoError> {
        Ok(())
    }
    /// The reward and advantage shaping this estimator was configured with.
    fn shaping(&self) -> &Shaping;
    /// Computes the advantages of `batch` in place. May drop samples (StarPO-S filtering).
    fn apply(&self, batch: &mut Batch, state: &mut AdvantageState) -> Result<AlgoStats, AlgoError>;

    /// The contract with what the shaping also reads: the estimator's own, plus `outcome`
    /// and `group_id` under `shaping.repeat_penalty`. What graph validation checks.
    fn full_contract(&self) -> Contract {
        let mut contract = self.contract();
        if self.shaping().repeat_penalty.is_some() {
            for column in [OUTCOME, GROUP_ID] {
                if !contract.needs.iter().any(|need| need.column == column) {
                    contract.needs.push(Need::column(column));
                }
            }
        }
        contract
    }

    /// What the `adv` node runs: the settings checked, the scores' repetition penalty when
    /// `shaping.repeat_penalty` asks, [`AdvantageEstimator::apply`] (a missing column's
    /// error carrying the contract's advice for it), then the samples with no policy
    /// gradient dropped when `shaping.drop_zero_advantage` asks.
    fn estimate(
        &self,
        batch: &mut Batch,
        state: &mut AdvantageState,
    ) -> Result<AlgoStats, AlgoError> {
        self.validate()?;
        let mut penalty_stats = AlgoStats::new();
        if let Some(c) = self.shaping().repeat_penalty {
            penalise_repeats(batch, c, self.kind(), &mut penalty_stats)
                .map_err(|e| e.with_hint_from(&self.full_contract()))?;
        }
        let mut stats = self
            .apply(batch, state)
            .map_err(|e| e.with_hint_from(&self.full_contract()))?;
        stats.extend(penalty_stats);
        if self.shaping().drop_zero_advantage {
            drop_zero_advantage(batch, self.kind(), &mut stats)?;
        }
        Ok(stats)
    }
}
