//! Two-armed bandit (RAGEN's `BanditEnv`): one turn, pick one of two named arms.
//!
//! - Arms "Phoenix" (low risk) and "Dragon" (high risk) by default, shown in a random
//!   order per episode so position carries no signal.
//! - Low-risk arm pays `low_risk_reward` (the StarPO paper: 0.15; RAGEN's code: 0.1);
//!   high-risk arm pays `high_risk_reward` = 1.0 with probability `high_risk_p` = 0.25,
//!   else 0. The expected payoffs (0.15 vs 0.25) favour the high-risk arm.
//! - `success` means the chosen arm has the higher expected payoff.
//! - An unparsable answer earns `format_penalty` (default 0) and ends the episode.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use crate::action::parse_actions;
use crate::env::{Env, EnvInfo, Reset, StepResult};
use crate::error::EnvError;
use crate::render::frame::{Frame, Shape, Tile};

/// `Bandit(low_risk_reward: 0.15, high_risk_p: 0.25)`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BanditConfig {
    /// Name of the low-risk arm. Default "Phoenix".
    pub low_risk_name: String,
    /// Name of the high-risk arm. Default "Dragon".
    pub high_risk_name: String,
    /// Certain payoff of the low-risk arm. Default 0.15 (StarPO paper).
    pub low_risk_reward: f32,
    /// Payoff of the high-risk arm when it pays. Default 1.0.
    pub high_risk_reward: f32,
    /// Probability that the high-risk arm pays, in [0, 1]. Default 0.25.
    pub high_risk_p: f64,
    /// Reward for an unparsable answer. Default 0.
    pub format_penalty: f32,
}

impl Default for BanditConfig {
    fn default() -> Self {
        BanditConfig {
            low_risk_name: "Phoenix".into(),
            high_risk_name: "Dragon".into(),
            low_risk_reward: 0.15,
            high_risk_reward: 1.0,
            high_risk_p: 0.25,
            format_penalty: 0.0,
        }
    }
}

fn invalid(field: &'static str, reason: String) -> EnvError {
    EnvError::InvalidConfig {
        env: "Bandit",
        field,
        reason,
    }
}

impl BanditConfig {
    /// Checks names and payoffs.
    pub fn validate(&self) -> Result<(), EnvError> {
        for (field, name) in [
            ("low_risk_name", &self.low_risk_name),
            ("high_risk_name", &self.high_risk_name),
        ] {
            if name.trim().is_empty() || name.contains("||") || name.trim() != name {
                return Err(invalid(field, format!("`{name}` must be a non-empty word")));
            }
        }
        if self
            .low_risk_name
            .eq_ignore_ascii_case(&self.high_risk_name)
        {
            return Err(invalid(
                "high_risk_name",
                "the two arms need different names".into(),
            ));
        }
        if !(0.0..=1.0).contains(&self.high_risk_p) {
            return Err(invalid(
                "high_risk_p",
                format!("{} is not in [0, 1]", self.high_risk_p),
            ));
        }
        let payoffs = [
            self.low_risk_reward,
            self.high_risk_reward,
            self.format_penalty,
        ];
        if payoffs.iter().any(|r| !r.is_finite()) {
            return Err(invalid("low_risk_reward", "rewards must be finite".into()));
        }
        Ok(())
    }

    /// A validated env.
    pub fn build(&self) -> Result<Bandit, EnvError> {
        self.validate()?;
        Ok(Bandit {
            config: self.clone(),
            rng: ChaCha8Rng::seed_from_u64(0),
            low_first: true,
            state: BanditState::Fresh,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum BanditState {
    Fresh,
    Ready,
    Pulled {
        high_risk: Option<bool>,
        reward: f32,
    },
}

/// A one-turn bandit episode.
pub struct Bandit {
    config: BanditConfig,
    rng: ChaCha8Rng,
    low_first: bool,
    state: BanditState,
}

impl Bandit {
    /// The arm names in the order shown this episode.
    pub fn arms(&self) -> [&str; 2] {
        let (low, high) = (
            self.config.low_risk_name.as_str(),
            self.config.high_risk_name.as_str(),
        );
        if self.low_first {
            [low, high]
        } else {
            [high, low]
        }
    }

    fn high_is_better(&self) -> bool {
        self.config.high_risk_p * f64::from(self.config.high_risk_reward)
            > f64::from(self.config.low_risk_reward)
    }

    /// Pulls one arm and draws its payoff.
    fn pull(&mut self, high_risk: bool) -> f32 {
        if !high_risk {
            return self.config.low_risk_reward;
        }
        if self.rng.random::<f64>() < self.config.high_risk_p {
            self.config.high_risk_reward
        } else {
            0.0
        }
    }
}

impl Env for Bandit {
    fn name(&self) -> &'static str {
        "Bandit"
    }

    fn reset(&mut self, seed: u64) -> Result<Reset, EnvError> {
        self.rng = ChaCha8Rng::seed_from_u64(seed);
        self.low_first = self.rng.random::<bool>();
        self.state = BanditState::Ready;
        let [a, b] = self.arms();
        Ok(Reset {
            observation: self.observation(),
            instruction: format!(
                "You are facing two slot machines, {a} and {b}. Each pull of an arm gives a \
                 reward; the arms differ in how they pay. Pick the arm you think is best.\n\
                 Answer with exactly one arm name, for example <answer>{a}</answer>. You may \
                 think first inside <think>...</think>."
            ),
        })
    }

    fn step(&mut self, action_text: &str) -> Result<StepResult, EnvError> {
        match self.state {
            BanditState::Fresh => return Err(EnvError::NotReset("Bandit")),
            BanditState::Pulled { .. } => return Err(EnvError::EpisodeOver("Bandit")),
            BanditState::Ready => {}
        }
        let arms = self.arms().map(str::to_string);
        let names = [arms[0].as_str(), arms[1].as_str()];
        let mut info = EnvInfo::default();
        let (high_risk, reward) = match parse_actions(action_text, &names, 1) {
            Ok(choice) => {
                let high_risk = (choice[0] == 0) != self.low_first;
                info.action_is_valid = true;
                info.action_is_effective = true;
                info.success = high_risk == self.high_is_better();
                (Some(high_risk), self.pull(high_risk))
            }
            Err(_) => {
                info.format_penalty = self.config.format_penalty;
                (None, self.config.format_penalty)
            }
        };
        self.state = BanditState::Pulled { high_risk, reward };
        Ok(StepResult {
            observation: self.observation(),
            reward,
            terminated: true,
            truncated: false,
            info,
        })
    }

    fn observation(&self) -> String {
        let [a, b] = self.arms();
        match self.state {
            BanditState::Fresh => String::new(),
            BanditState::Ready => format!("Arms: {a}, {b}. Which arm do you pull?"),
            BanditState::Pulled {
                high_risk: None, ..
            } => {
                format!("Arms: {a}, {b}. No arm was pulled: the answer named no arm.")
            }
            BanditState::Pulled {
                high_risk: Some(high),
                reward,
            } => {
                let name = if high {
                    &self.config.high_risk_name
                } else {
                    &self.config.low_risk_name
                };
                format!("Arms: {a}, {b}. You pulled {name} and received {reward}.")
            }
        }
    }

    fn render_frame(&self) -> Result<Frame, EnvError> {
        let pulled_position = match self.state {
            BanditState::Pulled {
                high_risk: Some(high),
                reward,
            } => Some((usize::from(high == self.low_first), reward > 0.0)),
            _ => None,
        };
        let colours = [[200, 120, 40], [120, 40, 160]];
        Frame::from_tiles(1, 2, |_, c| {
            let low = (c == 0) == self.low_first;
            let background = colours[usize::from(!low)];
            match pulled_position {
                Some((position, paid)) if position == c => {
                    let marker = if paid { [250, 210, 40] } else { [60, 60, 60] };
                    Tile::marked(background, Shape::Disc, marker)
                }
                _ => Tile::plain(background),
            }
        })
    }

    fn default_max_turns(&self) -> usize {
        1
    }

    /// Both arm names, low-risk first (the set, not this episode's display order).
    fn action_names(&self) -> Vec<String> {
        vec![
            self.config.low_risk_name.clone(),
            self.config.high_risk_name.clone(),
        ]
    }
}

#[cfg(test)]
#[path = "bandit_tests.rs"]
mod tests;
