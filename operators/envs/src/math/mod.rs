//! Multi-turn math (AReaL's multi-turn math agent), with procedurally generated problems.
//!
//! - Turn 1 shows an arithmetic problem with an exact answer ([`problem`]).
//! - After each answer the verifier ([`verifier`]) reads the final number (boxed or
//!   plain): correct → "Congratulations! You are correct!", reward +1, the episode ends;
//!   wrong (or no number) → "Unfortunately your answer is wrong. Let's try again.",
//!   reward −1, and another turn, up to `max_turns` (AReaL: 5; the last wrong answer
//!   truncates the episode).
//! - AReaL discounts the per-turn rewards backward, G_t = r_t + γ·G_{t+1}, with γ = 0.9
//!   in its multi-turn math example (`apply_reward_discount(turn_discount=0.9)`). The env
//!   only gives each turn's reward; the discount is the advantage estimator's,
//!   `"adv": AgenticReinforce(gamma: 0.9)` (`roll_flow_algo::agentic_reinforce`), as
//!   `pipelines/math_multi_turn.ron` sets it.

pub mod problem;
pub mod rational;
pub mod verifier;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use crate::render::frame::Shape;

use crate::env::{Env, EnvInfo, Reset, StepResult};
use crate::error::EnvError;
use crate::render::frame::{Frame, Tile};
pub use problem::Problem;
pub use rational::Rational;

/// AReaL's feedback after a correct answer.
pub const CORRECT_FEEDBACK: &str = "Congratulations! You are correct!";
/// AReaL's feedback after a wrong answer.
pub const WRONG_FEEDBACK: &str = "Unfortunately your answer is wrong. Let's try again.";

/// Most answers a problem may allow (each is a turn and a tile of the rendered frame).
pub const MAX_TURNS: usize = 1000;

/// `Math(operands: 3, max_operand: 20, max_turns: 5)`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MathConfig {
    /// Numbers per problem, 2..=8. Default 3.
    pub operands: usize,
    /// Largest number drawn (numbers are 1..=max_operand), 1..=10000. Default 20.
    pub max_operand: i64,
    /// Answers allowed per problem (AReaL: 5), 1..=1000. Default 5.
    pub max_turns: usize,
}

impl Default for MathConfig {
    fn default() -> Self {
        MathConfig {
            operands: 3,
            max_operand: 20,
            max_turns: 5,
        }
    }
}

fn invalid(field: &'static str, reason: String) -> EnvError {
    EnvError::InvalidConfig {
        env: "Math",
        field,
        reason,
    }
}

impl MathConfig {
    /// Checks every parameter's range.
    pub fn validate(&self) -> Result<(), EnvError> {
        if !(2..=8).contains(&self.operands) {
            return Err(invalid(
                "operands",
                format!("{} is not in 2..=8", self.operands),
            ));
        }
        if !(1..=10_000).contains(&self.max_operand) {
            return Err(invalid(
                "max_operand",
                format!("{} is not in 1..=10000", self.max_operand),
            ));
        }
        if !(1..=MAX_TURNS).contains(&self.max_turns) {
            return Err(invalid(
                "max_turns",
                format!("{} is not in 1..={MAX_TURNS}", self.max_turns),
            ));
        }
        Ok(())
    }

    /// A validated env.
    pub fn build(&self) -> Result<Math, EnvError> {
        self.validate()?;
        Ok(Math {
            config: self.clone(),
            problem: None,
            verdicts: Vec::new(),
        })
    }
}

/// A multi-turn math episode.
pub struct Math {
    config: MathConfig,
    problem: Option<Problem>,
    /// Correct/wrong per answered turn.
    verdicts: Vec<bool>,
}

impl Math {
    /// The current problem (after `reset`).
    pub fn problem(&self) -> Option<&Problem> {
        self.problem.as_ref()
    }

    fn problem_text(problem: &Problem) -> String {
        format!("Compute {}.", problem.expression)
    }
}

impl Env for Math {
    fn name(&self) -> &'static str {
        "Math"
    }

    fn reset(&mut self, seed: u64) -> Result<Reset, EnvError> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let problem = problem::generate(self.config.operands, self.config.max_operand, &mut rng);
        self.problem = Some(problem);
        self.verdicts.clear();
        Ok(Reset {
            observation: self.observation(),
            instruction: format!(
                "Solve the arithmetic problem. * is multiplication and / is exact division. \
                 Give the exact result as an integer or a reduced fraction (like -7/3), and \
                 put the final answer in \\boxed{{}}. You have {} attempts; after each one you \
                 are told whether it is correct.",
                self.config.max_turns
            ),
        })
    }

    fn step(&mut self, action_text: &str) -> Result<StepResult, EnvError> {
        let Some(problem) = &self.problem else {
            return Err(EnvError::NotReset("Math"));
        };
        let answered_correctly = self.verdicts.last() == Some(&true);
        if answered_correctly || self.verdicts.len() >= self.config.max_turns {
            return Err(EnvError::EpisodeOver("Math"));
        }
        let parsed = verifier::final_answer(action_text);
        let correct = parsed == Some(problem.answer);
        self.verdicts.push(correct);
        let out_of_turns = !correct && self.verdicts.len() >= self.config.max_turns;
        Ok(StepResult {
            observation: self.observation(),
            reward: if correct { 1.0 } else { -1.0 },
            terminated: correct,
            truncated: out_of_turns,
            info: EnvInfo {
                success: correct,
                action_is_valid: parsed.is_some(),
                action_is_effective: parsed.is_some(),
                format_penalty: 0.0,
                ..Default::default()
            },
        })
    }

    fn observation(&self) -> String {
        match (&self.problem, self.verdicts.last()) {
            (None, _) => String::new(),
            (Some(problem), None) => Self::problem_text(problem),
            (Some(_), Some(true)) => CORRECT_FEEDBACK.to_string(),
            (Some(_), Some(false)) => WRONG_FEEDBACK.to_string(),
        }
    }

    /// One tile per allowed turn: green for a correct answer, red for a wrong one, grey
    /// for turns not taken.
    fn render_frame(&self) -> Result<Frame, EnvError> {
        Frame::from_tiles(1, self.config.max_turns, |_, c| {
            match self.verdicts.get(c) {
                Some(true) => Tile::marked([230, 230, 230], Shape::Disc, [40, 170, 60]),
                Some(false) => Tile::marked([230, 230, 230], Shape::Cross, [210, 40, 40]),
                None => Tile::plain([200, 200, 200]),
            }
        })
    }

    fn default_max_turns(&self) -> usize {
        self.config.max_turns
    }
}

#[cfg(test)]
mod tests;
