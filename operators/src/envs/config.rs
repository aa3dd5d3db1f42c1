//! [`EnvConfig`]: the `env:` value of a pipeline's `envs:` entries, as users write it:
//! `FrozenLake(size: 4, p: 0.8)`, `Sokoban(dim_room: (8, 8), num_boxes: 2)`, `Bandit()`,
//! `Math(operands: 3)`, or `Custom(name: "Maze", params: (...))` for a registered env.
//!
//! The variants wrap config structs, written without the inner parentheses; this needs
//! RON's `unwrap_variant_newtypes` extension, which [`ron_options`] enables and the
//! pipeline loader must enable too.

use roll_flow_engine::SettingProblem;
use serde::Deserialize;

use super::bandit::BanditConfig;
use super::frozen_lake::FrozenLakeConfig;
use super::math::MathConfig;
use super::registry;
use super::sokoban::SokobanConfig;
use super::{Env, EnvError};

fn unit() -> ron::Value {
    ron::Value::Unit
}

/// A registered custom env and its parameters.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomEnvConfig {
    /// The name it was registered under with `register_env`.
    pub name: String,
    /// Its parameters, handed to its factory as a RON value. Default `()`.
    #[serde(default = "unit")]
    pub params: ron::Value,
}

/// One environment and its parameters. (Named `env` for serde, so an unknown variant
/// reads "unknown env `FrozenLak`".)
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename = "env")]
pub enum EnvConfig {
    /// FrozenLake: `FrozenLake(size: 4, p: 0.8, slippery: false)`.
    FrozenLake(#[serde(default)] FrozenLakeConfig),
    /// Sokoban: `Sokoban(dim_room: (6, 6), num_boxes: 1, search_depth: 30)`.
    Sokoban(#[serde(default)] SokobanConfig),
    /// Two-armed bandit: `Bandit()`.
    Bandit(#[serde(default)] BanditConfig),
    /// Multi-turn arithmetic: `Math(operands: 3, max_operand: 20, max_turns: 5)`.
    Math(#[serde(default)] MathConfig),
    /// A user env registered with `register_env`.
    Custom(CustomEnvConfig),
}

/// RON options for env specs: newtype variants may omit their inner parentheses.
pub use roll_flow_engine::spec::ron_options;

impl EnvConfig {
    /// Parses an env spec such as `FrozenLake(size: 4)`.
    pub fn parse(spec: &str) -> Result<EnvConfig, EnvError> {
        ron_options()
            .from_str(spec)
            .map_err(|e| EnvError::Spec(format!("{e} in `{}`", spec.trim())))
    }

    /// The variant name as written in RON (the custom name for `Custom`).
    pub fn name(&self) -> &str {
        match self {
            EnvConfig::FrozenLake(_) => "FrozenLake",
            EnvConfig::Sokoban(_) => "Sokoban",
            EnvConfig::Bandit(_) => "Bandit",
            EnvConfig::Math(_) => "Math",
            EnvConfig::Custom(custom) => &custom.name,
        }
    }

    /// Checks the parameters without building an env, as `roll-flow validate` does. A
    /// `Custom` env's parameters are its factory's to check when the run builds it.
    pub fn validate(&self) -> Result<(), EnvError> {
        match self {
            EnvConfig::FrozenLake(c) => c.validate(),
            EnvConfig::Sokoban(c) => c.validate(),
            EnvConfig::Bandit(c) => c.validate(),
            EnvConfig::Math(c) => c.validate(),
            EnvConfig::Custom(_) => Ok(()),
        }
    }

    /// [`EnvConfig::validate`]'s problem for the pipeline validator, at the offending field.
    pub fn setting_problems(&self) -> Vec<SettingProblem> {
        let Err(e) = self.validate() else {
            return Vec::new();
        };
        let field = match &e {
            EnvError::InvalidConfig { field, .. } => vec![field.to_string()],
            _ => Vec::new(),
        };
        vec![SettingProblem {
            field,
            message: e.to_string(),
            help: None,
        }]
    }

    /// Validates the parameters and builds a fresh env (call `reset` before `step`).
    pub fn build(&self) -> Result<Box<dyn Env>, EnvError> {
        Ok(match self {
            EnvConfig::FrozenLake(c) => Box::new(c.build()?),
            EnvConfig::Sokoban(c) => Box::new(c.build()?),
            EnvConfig::Bandit(c) => Box::new(c.build()?),
            EnvConfig::Math(c) => Box::new(c.build()?),
            EnvConfig::Custom(c) => registry::build_custom(&c.name, &c.params)?,
        })
    }
}

#[cfg(test)]
mod tests;
