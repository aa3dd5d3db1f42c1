//! Prompt templates: what the model reads each turn, written as minijinja templates in the
//! pipeline file, like ROLL's `agent_system_template` / `agent_template`.
//!
//! RON: `Rollout(..., prompt: (system: "You play {{ env }}. {{ instruction }}",
//! turn: "Turn {{ turn }} of {{ max_turns }}.\n{{ observation }}"))`.
//!
//! - `system` renders once per episode into the system message. Variables: `instruction`
//!   (the env's reset text), `env` (the env set's tag), `max_turns`, `actions` (the env's
//!   fixed action names, empty for open-ended answers), `sample` (the episode's 0-based
//!   place in its group: the samples of a group share a seed, so this is what can make
//!   their prompts differ, e.g. `actions[sample % 4]` as the example answer).
//! - `turn` renders each turn into the user message. Variables: `observation`, `turn`
//!   (1-based), `turns_left` (after this one), `valid_actions` (what the current state
//!   accepts) and `history`, plus the system's. `history` holds the earlier turns a
//!   `Step(history: N)` prompt shows (the last N), each `{step, observation, action,
//!   reward}` with `reward` as the env gave it in text; a trajectory's chat already holds
//!   its turns, so there it is empty.
//!
//! - `reply_start` is text the assistant's reply opens with, put after the template's
//!   generation prompt so the model continues it (DeepSeek-R1's `<think>\n`, or `<answer>`
//!   for a model that never writes the tag by itself): the env reads it and the reply as one
//!   text, and it is prompt, not response, so no gradient flows through it. Plain text, no
//!   template variables.
//!
//! Undefined variables are errors (a misspelt name would silently print nothing), checked
//! with `roll-flow validate`. The defaults are today's prompts, byte for byte: the
//! instruction as the system message (none with `instruction: false`), the observation as
//! the user message, and for step-wise samples the history block GiGPO's prompts use.

use std::sync::Arc;

use minijinja::{context, Environment, UndefinedBehavior, Value};
use serde::{Deserialize, Serialize};

/// `Rollout`'s `prompt: (system: ..., turn: ...)` as written; each left out takes the
/// default.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSpec {
    #[serde(default)]
    pub system: Option<String>,
    #[serde(default)]
    pub turn: Option<String>,
    #[serde(default)]
    pub reply_start: Option<String>,
}

/// The system message of a trajectory-wise or step-wise prompt, by default.
const DEFAULT_SYSTEM: &str = "{{ instruction }}";
/// The user message of a trajectory's turn, by default.
const DEFAULT_TRAJECTORY_TURN: &str = "{{ observation }}";
/// The user message of a step-wise prompt, by default: the last turns, then the state.
const DEFAULT_STEP_TURN: &str = "{% for h in history %}Step {{ h.step }}: state\n\
    {{ h.observation }}\naction: {{ h.action }}\nreward: {{ h.reward }}\n\n{% endfor %}\
    {% if history %}Current state\n{% endif %}{{ observation }}";

/// One earlier turn as a template sees it.
#[derive(Clone, Debug, Serialize)]
pub struct HistoryTurn {
    /// 1-based turn number.
    pub step: usize,
    pub observation: String,
    pub action: String,
    pub reward: String,
}

/// What an episode's templates see that does not change from turn to turn.
#[derive(Clone, Debug, Serialize)]
pub struct EpisodeVars<'a> {
    pub instruction: &'a str,
    pub env: &'a str,
    pub max_turns: usize,
    pub actions: &'a [String],
    /// The episode's 0-based place in its group (`EnvSlot::index_in_group`).
    pub sample: usize,
}

/// What one turn's template sees besides [`EpisodeVars`].
#[derive(Clone, Debug)]
pub struct TurnVars<'a> {
    pub observation: &'a str,
    /// 0-based index of the turn about to be played.
    pub index: usize,
    pub valid_actions: Vec<String>,
    pub history: Vec<HistoryTurn>,
}

/// The compiled templates: the pipeline's own and the defaults, which apply where the
/// pipeline gives none. Parsing compiles and test-renders them, so a bad template is an
/// error at the `prompt:` field's line.
#[derive(Clone, Deserialize)]
#[serde(try_from = "PromptSpec")]
pub struct PromptTemplates {
    env: Arc<Environment<'static>>,
    spec: PromptSpec,
    /// The default system message is the instruction (`Rollout`'s `instruction`).
    instruction: bool,
    /// The default turn is the step-wise one (`samples: Step(..)`).
    step_wise: bool,
}

impl std::fmt::Debug for PromptTemplates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptTemplates")
            .field("spec", &self.spec)
            .field("instruction", &self.instruction)
            .field("step_wise", &self.step_wise)
            .finish()
    }
}

impl PartialEq for PromptTemplates {
    fn eq(&self, other: &Self) -> bool {
        (&self.spec, self.instruction, self.step_wise)
            == (&other.spec, other.instruction, other.step_wise)
    }
}

impl Default for PromptTemplates {
    fn default() -> Self {
        PromptTemplates::try_from(PromptSpec::default()).expect("the default templates compile")
    }
}

impl TryFrom<PromptSpec> for PromptTemplates {
    type Error = String;

    fn try_from(spec: PromptSpec) -> Result<Self, String> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        let sources = [
            ("system", spec.system.as_deref().unwrap_or(DEFAULT_SYSTEM)),
            (
                "turn",
                spec.turn.as_deref().unwrap_or(DEFAULT_TRAJECTORY_TURN),
            ),
            (
                "step_turn",
                spec.turn.as_deref().unwrap_or(DEFAULT_STEP_TURN),
            ),
        ];
        for (name, source) in sources {
            env.add_template_owned(name, source.to_string())
                .map_err(|e| describe(name, &e))?;
        }
        let templates = PromptTemplates {
            env: Arc::new(env),
            spec,
            instruction: true,
            step_wise: false,
        };
        for step_wise in [false, true] {
            templates
                .played(true, step_wise)
                .check_with_sample_values()?;
        }
        Ok(templates)
    }
}

/// A template error as `prompt.FIELD`, the template's line, what is wrong.
fn describe(name: &str, error: &minijinja::Error) -> String {
    let line = error
        .line()
        .map(|l| format!(" line {l}"))
        .unwrap_or_default();
    let detail = error.detail().map(|d| format!(": {d}")).unwrap_or_default();
    let field = field_of(name);
    let known = match (error.kind(), field) {
        (minijinja::ErrorKind::UndefinedError, "system") => {
            "; the system template knows instruction, env, max_turns, actions, sample"
        }
        (minijinja::ErrorKind::UndefinedError, _) => {
            "; the turn template knows observation, turn, turns_left, valid_actions, \
             history (each step, observation, action, reward), instruction, env, max_turns, \
             actions, sample"
        }
        _ => "",
    };
    format!("`prompt.{field}`{line}: {}{detail}{known}", error.kind())
}

/// The `prompt:` field a compiled template comes from.
fn field_of(name: &str) -> &str {
    match name {
        "step_turn" => "turn",
        other => other,
    }
}

impl PromptTemplates {
    /// These templates as a rollout plays them: with `instruction` false and no `system`
    /// template there is no system message; `step_wise` picks the default turn.
    pub fn played(&self, instruction: bool, step_wise: bool) -> Self {
        PromptTemplates {
            instruction,
            step_wise,
            ..self.clone()
        }
    }

    /// The text every reply opens with (`prompt.reply_start`), empty by default.
    pub fn reply_start(&self) -> &str {
        self.spec.reply_start.as_deref().unwrap_or("")
    }

    /// `instruction: false` with a `system` template is a contradiction.
    pub fn check_instruction(&self, instruction: bool) -> Result<(), String> {
        match (&self.spec.system, instruction) {
            (Some(_), false) => Err("`prompt.system` and `instruction: false` disagree: a \
                 system template replaces the instruction; drop one of them"
                .into()),
            _ => Ok(()),
        }
    }

    /// Renders both templates once with made-up values, so a misspelt variable is a
    /// validation error rather than a failure at the first rollout.
    fn check_with_sample_values(&self) -> Result<(), String> {
        let actions = ["Left".to_string()];
        let episode = EpisodeVars {
            instruction: "instruction",
            env: "train",
            max_turns: 2,
            actions: &actions,
            sample: 1,
        };
        let turn = TurnVars {
            observation: "observation",
            index: 1,
            valid_actions: vec!["Left".into()],
            history: vec![HistoryTurn {
                step: 1,
                observation: "observation".into(),
                action: "Left".into(),
                reward: "0".into(),
            }],
        };
        self.system(&episode)?;
        self.turn(&episode, &turn)?;
        Ok(())
    }

    /// The system message, or none.
    pub fn system(&self, episode: &EpisodeVars) -> Result<Option<String>, String> {
        if self.spec.system.is_none() && !self.instruction {
            return Ok(None);
        }
        self.render("system", Value::from_serialize(episode))
            .map(Some)
    }

    /// The user message of a turn.
    pub fn turn(&self, episode: &EpisodeVars, turn: &TurnVars) -> Result<String, String> {
        let vars = context! {
            observation => turn.observation,
            turn => turn.index + 1,
            turns_left => episode.max_turns.saturating_sub(turn.index + 1),
            valid_actions => turn.valid_actions,
            history => turn.history,
            ..Value::from_serialize(episode)
        };
        match self.step_wise {
            true => self.render("step_turn", vars),
            false => self.render("turn", vars),
        }
    }

    fn render(&self, name: &str, vars: Value) -> Result<String, String> {
        let template = self.env.get_template(name).map_err(|e| e.to_string())?;
        template.render(vars).map_err(|e| describe(name, &e))
    }
}

#[cfg(test)]
#[path = "prompt_tests.rs"]
mod tests;
