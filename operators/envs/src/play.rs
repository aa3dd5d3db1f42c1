//! `roll-flow play`: run one episode of any env by hand or from a script.
//!
//! - Scripted ([`play_scripted`]): reads one action text per line and writes JSON lines:
//!   first `{"obs", "instruction", "seed"}` for the reset, then one
//!   `{"obs", "reward", "terminated", "truncated", "info"}` per step, so other tools can
//!   drive any env. It stops at the end of the episode or of the input.
//! - Interactive ([`play_interactive`]): shows the instruction, the observation, the
//!   reward and whether the episode is done after each typed action.
//!
//! A line without an `<answer>` tag is taken as the answer itself (`Right` is played as
//! `<answer>Right</answer>`); lines with a tag are passed verbatim, so model outputs can
//! be replayed. `max_turns` (from a pipeline's env set) ends the episode as truncated.

mod target;

use std::io::{BufRead, Write};
use std::path::PathBuf;

use serde::Serialize;

use crate::config::EnvConfig;
use crate::env::{Env, EnvInfo, StepResult};
use crate::error::EnvError;
use crate::recording::EpisodeRecording;
pub use target::{resolve, PlayTarget};

/// How to play.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlayOptions {
    /// The reset seed.
    pub seed: u64,
    /// Turn limit; `None` plays until the env ends the episode or input runs out.
    pub max_turns: Option<usize>,
    /// Directory for the episode's PNG frames, GIF and transcript.
    pub record: Option<PathBuf>,
}

/// How the episode went.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EpisodeSummary {
    pub turns: usize,
    pub total_reward: f32,
    pub success: bool,
    pub done: bool,
}

/// Errors of `play`.
#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}

#[derive(Serialize)]
struct ResetLine<'a> {
    obs: &'a str,
    instruction: &'a str,
    seed: u64,
}

/// The action text a typed line stands for.
pub fn as_answer(line: &str) -> String {
    let line = line.trim_end_matches(['\r', '\n']);
    if line.to_ascii_lowercase().contains("<answer>") {
        line.to_string()
    } else {
        format!("<answer>{}</answer>", line.trim())
    }
}

/// The next input line (without its newline), decoding invalid UTF-8 lossily so any
/// bytes become an action text (and earn the format penalty) instead of an error.
fn read_line(input: &mut impl BufRead) -> Result<Option<String>, PlayError> {
    let mut bytes = Vec::new();
    if input.read_until(b'\n', &mut bytes)? == 0 {
        return Ok(None);
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// One episode in progress, shared by both modes.
struct Session {
    env: Box<dyn Env>,
    options: PlayOptions,
    summary: EpisodeSummary,
    recording: EpisodeRecording,
}

impl Session {
    fn start(
        config: &EnvConfig,
        options: &PlayOptions,
    ) -> Result<(Session, String, String), PlayError> {
        let mut env = config.build()?;
        let reset = env.reset(options.seed)?;
        let mut session = Session {
            env,
            options: options.clone(),
            summary: EpisodeSummary::default(),
            recording: EpisodeRecording::default(),
        };
        session.record()?;
        Ok((session, reset.observation, reset.instruction))
    }

    fn record(&mut self) -> Result<(), EnvError> {
        if self.options.record.is_some() {
            self.recording.capture(self.env.as_ref())?;
        }
        Ok(())
    }

    fn step(&mut self, line: &str) -> Result<StepResult, PlayError> {
        let mut result = self.env.step(&as_answer(line))?;
        self.summary.turns += 1;
        self.summary.total_reward += result.reward;
        self.summary.success |= result.info.success;
        let out_of_turns = self
            .options
            .max_turns
            .is_some_and(|m| self.summary.turns >= m);
        if out_of_turns && !result.done() {
            result.truncated = true;
        }
        self.summary.done = result.done();
        self.record()?;
        Ok(result)
    }

    fn finish(self) -> Result<EpisodeSummary, PlayError> {
        if let Some(dir) = &self.options.record {
            let stem = format!("{}_seed{}", self.env.name(), self.options.seed);
            self.recording.write(dir, &stem)?;
        }
        Ok(self.summary)
    }
}

/// Plays one episode from `input` lines, writing JSON lines to `output`.
pub fn play_scripted(
    config: &EnvConfig,
    options: &PlayOptions,
    mut input: impl BufRead,
    mut output: impl Write,
) -> Result<EpisodeSummary, PlayError> {
    let (mut session, obs, instruction) = Session::start(config, options)?;
    let reset = ResetLine {
        obs: &obs,
        instruction: &instruction,
        seed: options.seed,
    };
    writeln!(output, "{}", serde_json::to_string(&reset)?)?;
    while let Some(line) = read_line(&mut input)? {
        let result = session.step(&line)?;
        writeln!(output, "{}", serde_json::to_string(&result)?)?;
        if result.done() {
            break;
        }
    }
    output.flush()?;
    session.finish()
}

fn describe(info: &EnvInfo) -> String {
    let mut notes = Vec::new();
    if !info.action_is_valid {
        notes.push(format!(
            "invalid answer (format penalty {})",
            info.format_penalty
        ));
    } else if !info.action_is_effective {
        notes.push("no effect".to_string());
    }
    if info.success {
        notes.push("success".to_string());
    }
    notes.extend(
        info.metrics
            .iter()
            .map(|(name, value)| format!("{name} {value}")),
    );
    notes.join(", ")
}

/// Plays one episode interactively: prompts on `output`, reads actions from `input`.
pub fn play_interactive(
    config: &EnvConfig,
    options: &PlayOptions,
    mut input: impl BufRead,
    mut output: impl Write,
) -> Result<EpisodeSummary, PlayError> {
    let (mut session, obs, instruction) = Session::start(config, options)?;
    writeln!(
        output,
        "== {} (seed {}) ==\n{instruction}\n\n{obs}\n",
        config.name(),
        options.seed
    )?;
    loop {
        write!(output, "action> ")?;
        output.flush()?;
        let Some(line) = read_line(&mut input)? else {
            writeln!(output)?;
            break;
        };
        let result = session.step(&line)?;
        let state = match (result.terminated, result.truncated) {
            (true, _) => "terminated",
            (false, true) => "truncated",
            _ => "running",
        };
        writeln!(
            output,
            "\n{}\nreward {} | total {} | {state} {}\n",
            result.observation,
            result.reward,
            session.summary.total_reward,
            describe(&result.info)
        )?;
        if result.done() {
            break;
        }
    }
    let summary = session.finish()?;
    writeln!(
        output,
        "Episode over after {} turns: total reward {}, success {}.",
        summary.turns, summary.total_reward, summary.success
    )?;
    Ok(summary)
}

#[cfg(test)]
#[path = "play_tests.rs"]
mod tests;
