//! The `adv` node's RON variants, one per estimator file, and their dispatch.
//!
//! `"adv": StarPO(norm: MeanStd, keep_top_std: 0.25)` deserialises into
//! [`AdvantageSpec::StarPo`]; each variant's contract and `apply` are its estimator's. The
//! variant names are the RON names users write; they map 1:1 to the files of this module.
//! Pipelines are read with ron's `UNWRAP_VARIANT_NEWTYPES` extension so a variant takes
//! its config's fields directly (`Gae(gamma: 1.0)`, not `Gae((gamma: 1.0))`).

use roll_flow_engine::{Batch, Contract};
use serde::Deserialize;

use super::agentic_reinforce::AgenticReinforce;
use super::bi_level_gae::BiLevelGae;
use super::error::AlgoError;
use super::estimator::{AdvantageEstimator, AdvantageState, AlgoStats};
use super::gae::Gae;
use super::gigpo::GiGpo;
use super::grpo::Grpo;
use super::reinforce::Reinforce;
use super::shaping::Shaping;
use super::starpo::StarPo;
use super::step_reinforce::StepReinforce;
use super::zero_advantage_filter::drop_zero_advantage;

/// Every advantage estimator a pipeline can name.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub enum AdvantageSpec {
    /// Token-level GAE with a critic.
    Gae(Gae),
    /// RAGEN's turn-level then token-level GAE.
    BiLevelGae(BiLevelGae),
    /// Group-normalised scores (GRPO).
    Grpo(Grpo),
    /// Scores with a batch-mean baseline (REINFORCE).
    Reinforce(Reinforce),
    /// RAGEN's StarPO / StarPO-S.
    #[serde(rename = "StarPO")]
    StarPo(StarPo),
    /// verl-agent's GiGPO.
    #[serde(rename = "GiGPO")]
    GiGpo(GiGpo),
    /// ROLL's step-REINFORCE.
    StepReinforce(StepReinforce),
    /// ROLL's agentic (turn-level) REINFORCE.
    AgenticReinforce(AgenticReinforce),
}

impl AdvantageSpec {
    /// All RON variant names, for "did you mean" advice and registries.
    pub const NAMES: [&'static str; 8] = [
        "Gae",
        "BiLevelGae",
        "Grpo",
        "Reinforce",
        "StarPO",
        "GiGPO",
        "StepReinforce",
        "AgenticReinforce",
    ];

    fn inner(&self) -> &dyn AdvantageEstimator {
        match self {
            AdvantageSpec::Gae(e) => e,
            AdvantageSpec::BiLevelGae(e) => e,
            AdvantageSpec::Grpo(e) => e,
            AdvantageSpec::Reinforce(e) => e,
            AdvantageSpec::StarPo(e) => e,
            AdvantageSpec::GiGpo(e) => e,
            AdvantageSpec::StepReinforce(e) => e,
            AdvantageSpec::AgenticReinforce(e) => e,
        }
    }
}

impl AdvantageEstimator for AdvantageSpec {
    fn kind(&self) -> &'static str {
        self.inner().kind()
    }

    fn contract(&self) -> Contract {
        self.inner().contract()
    }

    fn validate(&self) -> Result<(), AlgoError> {
        self.inner().validate()
    }

    fn shaping(&self) -> &Shaping {
        self.inner().shaping()
    }

    fn apply(&self, batch: &mut Batch, state: &mut AdvantageState) -> Result<AlgoStats, AlgoError> {
        self.inner().validate()?;
        let mut stats = self.inner().apply(batch, state)?;
        if self.shaping().drop_zero_advantage {
            drop_zero_advantage(batch, self.kind(), &mut stats)?;
        }
        Ok(stats)
    }
}

#[cfg(test)]
#[path = "adv_spec_tests.rs"]
mod tests;
