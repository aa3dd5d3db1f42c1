//! The common shape of every advantage estimator, so the `adv` node is a thin wrapper.
//!
//! An estimator is a RON config struct. It declares its [`Contract`] (columns needed and
//! given) for graph validation, and `apply` fills `advantages` (and `returns` where it has
//! them) on a [`Batch`]. The only state kept across steps is the adaptive KL coefficient,
//! held by the node in an [`AdvantageState`].

use std::collections::BTreeMap;

use roll_flow_engine::{Batch, Contract};

use super::error::AlgoError;
use super::kl_controller::KlController;

/// Scalar metrics of one estimator call (e.g. `adv/mean`, `kl/beta`), for tracking.
pub type AlgoStats = BTreeMap<String, f64>;

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
    /// Checks the settings' ranges (run at graph validation and before every `apply`
    /// through [`super::AdvantageSpec`]).
    fn validate(&self) -> Result<(), AlgoError> {
        Ok(())
    }
    /// The reward and advantage shaping this estimator was configured with.
    fn shaping(&self) -> &super::shaping::Shaping;
    /// Computes the advantages of `batch` in place. May drop samples (StarPO-S filtering).
    fn apply(&self, batch: &mut Batch, state: &mut AdvantageState) -> Result<AlgoStats, AlgoError>;
}
