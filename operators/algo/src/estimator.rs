//! The common shape of every advantage estimator, so the `adv` node is a thin wrapper.
//!
//! An estimator is a RON config struct in its own file. It declares its [`Contract`]
//! (columns needed and given) for graph validation, and `apply` fills `advantages` (and
//! `returns` where it has them) on a [`Batch`]. The only state kept across steps is the
//! adaptive KL coefficient, held by the node in an [`AdvantageState`]. The node registry
//! names the estimator's type once; nothing else lists the estimators.

use roll_flow_engine::{Batch, Contract};

use super::algo_stats::AlgoStats;
use super::error::AlgoError;
use super::kl_controller::KlController;
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

    /// What the `adv` node runs: the settings checked, [`AdvantageEstimator::apply`] (a
    /// missing column's error carrying the contract's advice for it), then the samples
    /// with no policy gradient dropped when `shaping.drop_zero_advantage` asks.
    fn estimate(
        &self,
        batch: &mut Batch,
        state: &mut AdvantageState,
    ) -> Result<AlgoStats, AlgoError> {
        self.validate()?;
        let mut stats = self
            .apply(batch, state)
            .map_err(|e| e.with_hint_from(&self.contract()))?;
        if self.shaping().drop_zero_advantage {
            drop_zero_advantage(batch, self.kind(), &mut stats)?;
        }
        Ok(stats)
    }
}
