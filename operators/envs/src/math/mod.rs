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
//!   `"adv": AgenticReinforce(gamma: 0.9)` (`roll_flow_algo::agentic_reinforce`).
//!   `pipelines/math_multi_turn.ron` uses GRPO's group baseline instead: an episode's
//!   score (+1 first try, 0 second, −1 third, −3 never) already ranks sooner answers
//!   higher (bench/history/learning_curve_math.md).
//! - With integer answers only (`operators` without `/`), the env names its answers as
//!   actions: every integer the problems can have ([`answer_range`]), so `guide: Actions`
//!   constrains a reply to `<answer>N</answer>` and a model trained from scratch answers
//!   at all.
//! - Per step it reports `info/first_attempt_correct` (the first turn only) and
//!   `info/repeated_wrong` (retries only: the answer is one already called wrong), so a
//!   run shows whether the model reads the feedback.

pub mod problem;
pub mod rational;
pub mod verifier;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use crate::render::frame::Shape;

use crate::env::{Env, EnvInfo, Reset, StepMetrics, StepResult};
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

/// `Math(operands: 3, max_operand: 20, max_turns: 5, operators: "+-*/")`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MathConfig {
    /// Numbers per problem, 2..=8. Default 3.
    pub operands: usize,
    /// Largest number drawn (numbers are 1..=max_operand), 1..=10000. Default 20.
    pub max_operand: i64,
    /// Answers allowed per problem (AReaL: 5), 1..=1000. Default 5.
    pub max_turns: usize,
    /// The operators problems draw from, a subset of `+-*/`. Default all four; without
    /// `/` every answer is an integer and the env names its answers for `guide: Actions`.
    pub operators: String,
}

impl Default for MathConfig {
    fn default() -> Self {
        MathConfig {
            operands: 3,
            max_operand: 20,
            max_turns: 5,
            operators: "+-*/".into(),
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
        let mut seen = Vec::new();
        for op in self.operators.chars() {
            if !problem::OPERATORS.contains(&op) || seen.contains(&op) {
                return Err(invalid(
                    "operators",
                    format!(
                        "\"{}\" must be distinct operators out of \"+-*/\"",
                        self.operators
                    ),
                ));
            }
            seen.push(op);
        }
        if seen.is_empty() {
            return Err(invalid(
                "operators",
                "\"\" names no operator; e.g. \"+-\"".into(),
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
        let operators: Vec<char> = self.operators.chars().collect();
        Ok(Math {
            answers: answer_range(self.operands, self.max_operand, &operators),
            operators,
            config: self.clone(),
            problem: None,
            answered: Vec::new(),
        })
    }
}

/// Most answers the env names as actions (a wider range leaves `guide: Actions` out).
pub const MAX_NAMED_ANSWERS: i64 = 1000;

/// The integers every problem's answer lies in, when all answers are integers (no `/`)
/// and there are at most [`MAX_NAMED_ANSWERS`]: interval arithmetic over every way of
/// splitting the operands (the tree shapes [`problem::generate`] draws), so the range
/// may be wider than the answers drawn, never narrower. Two operands up to 9 with `+-`:
/// −8..=18.
pub fn answer_range(
    operands: usize,
    max_operand: i64,
    operators: &[char],
) -> Option<std::ops::RangeInclusive<i64>> {
    if operators.contains(&'/') {
        return None;
    }
    // ranges[n]: the interval of every expression of n operands.
    let mut ranges: Vec<(i128, i128)> = vec![(0, 0), (1, max_operand.into())];
    for n in 2..=operands {
        let mut lo_hi: Option<(i128, i128)> = None;
        for left in 1..n {
            let (a, b) = (ranges[left], ranges[n - left]);
            for op in operators {
                let (lo, hi) = match op {
                    '+' => (a.0.checked_add(b.0)?, a.1.checked_add(b.1)?),
                    '-' => (a.0.checked_sub(b.1)?, a.1.checked_sub(b.0)?),
                    _ => {
                        let corners = [
                            a.0.checked_mul(b.0)?,
                            a.0.checked_mul(b.1)?,
                            a.1.checked_mul(b.0)?,
                            a.1.checked_mul(b.1)?,
                        ];
                        (*corners.iter().min()?, *corners.iter().max()?)
                    }
                };
                lo_hi = Some(lo_hi.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))));
            }
        }
        ranges.push(lo_hi?);
    }
    let (lo, hi) = ranges[operands];
    let (lo, hi) = (i64::try_from(lo).ok()?, i64::try_from(hi).ok()?);
    (hi - lo < MAX_NAMED_ANSWERS).then_some(lo..=hi)
}

/// A multi-turn math episode.
pub struct Math {
    config: MathConfig,
    operators: Vec<char>,
    /// Every possible answer, when the env names them ([`answer_range`]).
    answers: Option<std::ops::RangeInclusive<i64>>,
    problem: Option<Problem>,
    /// Each answered turn's parsed answer and whether it was correct.
    answered: Vec<(Option<Rational>, bool)>,
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
        let problem = problem::generate(
            self.config.operands,
            self.config.max_operand,
            &self.operators,
            &mut rng,
        );
        self.problem = Some(problem);
        self.answered.clear();
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
        let answered_correctly = self.answered.last().is_some_and(|a| a.1);
        if answered_correctly || self.answered.len() >= self.config.max_turns {
            return Err(EnvError::EpisodeOver("Math"));
        }
        let parsed = verifier::final_answer(action_text);
        let correct = parsed == Some(problem.answer);
        let mut metrics = StepMetrics::default();
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        if self.answered.is_empty() {
            metrics.push("first_attempt_correct", flag(correct));
        } else {
            let repeated = parsed.is_some() && self.answered.iter().any(|a| a.0 == parsed);
            metrics.push("repeated_wrong", flag(repeated));
        }
        self.answered.push((parsed, correct));
        let out_of_turns = !correct && self.answered.len() >= self.config.max_turns;
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
                metrics,
            },
        })
    }

    fn observation(&self) -> String {
        match (&self.problem, self.answered.last()) {
            (None, _) => String::new(),
            (Some(problem), None) => Self::problem_text(problem),
            (Some(_), Some((_, true))) => CORRECT_FEEDBACK.to_string(),
            (Some(_), Some((_, false))) => WRONG_FEEDBACK.to_string(),
        }
    }

    /// One tile per allowed turn: green for a correct answer, red for a wrong one, grey
    /// for turns not taken.
    fn render_frame(&self) -> Result<Frame, EnvError> {
        Frame::from_tiles(1, self.config.max_turns, |_, c| {
            match self.answered.get(c).map(|a| a.1) {
                Some(true) => Tile::marked([230, 230, 230], Shape::Disc, [40, 170, 60]),
                Some(false) => Tile::marked([230, 230, 230], Shape::Cross, [210, 40, 40]),
                None => Tile::plain([200, 200, 200]),
            }
        })
    }

    fn default_max_turns(&self) -> usize {
        self.config.max_turns
    }

    /// Every possible answer as an integer, when all answers are integers and few enough
    /// ([`answer_range`]); none otherwise.
    fn action_names(&self) -> Vec<String> {
        (self.answers.clone())
            .map(|range| range.map(|n| n.to_string()).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
#[path = "math_tests.rs"]
mod tests;
