//! ROLL's prompt templates as `Rollout(prompt: (system, turn))`: `agent_system_template`,
//! `agent_template` (Python `str.format` templates), `env_config.env_instruction` and
//! `env_config.action_pattern` of a `custom_envs` tag, translated to the minijinja
//! templates of roll-flow's `operators/src/prompt.rs`.
//!
//! What ROLL's env managers fill in (`roll/pipeline/agentic/env_manager/`), and what each
//! becomes:
//!
//! - `TrajEnvManager.format_messages`: the system message is `agent_system_template`; the
//!   first user message starts with the env's instruction and a newline; each user message
//!   is `agent_template` with `observation` → `{{ observation }}`, `turn_idx` (1-based) →
//!   `{{ turn }}`, `actions_left` (this turn included) → `{{ turns_left + 1 }}`,
//!   `max_response_length` → the tag's `max_tokens_per_step`, `suffix` (GEM's
//!   `info["suffix"]`) → nothing (reported: the env protocol does not carry it).
//! - `StepEnvManager.format_messages` (one prompt per step): `env_instruction` →
//!   `{{ instruction }}`, `history` → the earlier turns as `(step: K, observation: O,
//!   action: A, reward: R)` joined by `, `, `step_count` → `{{ turn - 1 }}`,
//!   `history_length` → `{{ history | length }}`, `current_step` → `{{ turn }}`,
//!   `current_observation` → `{{ observation }}`, `max_response_length` as above.
//! - `StepConcatEnvManager.format_messages` (GEM's concatenated observations): `history` →
//!   the earlier observations joined by newlines, `current_observation` → the observation,
//!   a newline and GEM's suffix (reported as above).
//!
//! A variable the manager does not fill is an error (ROLL's `format` raises `KeyError`).
//! `{{` and `}}` are literal braces; literal text holding a brace is written inside
//! `{% raw %}`. A template ending in a newline keeps it (minijinja drops a final newline).
//! `agent_system_template: null` means no system message (`instruction: false`). A
//! `env_instruction` in the env config replaces the env's own instruction, as ROLL's envs
//! do. `action_pattern` `<answer>(.*?)</answer>` is roll-flow's parser; another pattern is
//! reported (roll-flow reads the first `<answer>` pair whatever precedes it).

use super::config_reader::ConfigReader;
use super::import_error::ImportError;
use super::roll_keys::NoticeKind;

/// Which of ROLL's env managers plays a tag (its `env_manager_cls`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Manager {
    /// `TrajEnvManager` (ROLL's default) or the agent runner's `ProxyEnvManager`.
    Trajectory,
    /// `StepEnvManager`.
    Step,
    /// `StepConcatEnvManager`.
    StepConcat,
}

/// One tag's prompt, as the `Rollout` fields it becomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagPrompt {
    /// `prompt.system`; `None` writes `instruction: false` (no system message).
    pub system: Option<String>,
    /// `prompt.turn`.
    pub turn: String,
}

/// The action pattern roll-flow's parser implements.
const ANSWER_PATTERN: &str = "<answer>(.*?)</answer>";

/// The prompt of the tag at `base` (`custom_envs.<tag>`), or `None` without an
/// `agent_template` (the default prompts then apply, reported). `gem`: the tag is a GEM
/// env (its `suffix` is reported when a template asks for it).
pub fn tag_prompt(
    r: &mut ConfigReader,
    base: &str,
    manager: Manager,
    max_tokens_per_step: Option<u64>,
    gem: bool,
) -> Result<Option<TagPrompt>, ImportError> {
    let config = format!("{base}.env_config");
    let pattern_key = format!("{config}.action_pattern");
    if let Some(pattern) = r.text(&pattern_key)?.filter(|p| p != ANSWER_PATTERN) {
        r.notice(NoticeKind::NotSupported, &pattern_key, format!("`{pattern}`: roll-flow reads the first `<answer>…</answer>` of a reply whatever precedes it (ROLL's pattern asks for more)"));
    }
    let instruction = r
        .text(&format!("{config}.env_instruction"))?
        .map(|text| literal(&text));
    let system_key = format!("{base}.agent_system_template");
    let system = r.text(&system_key)?;
    let template_key = format!("{base}.agent_template");
    let Some(template) = r.text(&template_key)? else {
        r.notice(
            NoticeKind::NotSupported,
            &template_key,
            "missing (ROLL's env managers need one): roll-flow's default prompts apply",
        );
        return Ok(None);
    };
    let vars = Vars {
        manager,
        instruction: instruction
            .clone()
            .unwrap_or_else(|| "{{ instruction }}".into()),
        max_tokens_per_step,
    };
    let translated = translate(&template, &vars)
        .map_err(|message| r.error(&template_key, message.text, &message.help))?;
    if translated.suffix && gem {
        r.notice(NoticeKind::NotSupported, &template_key, "GEM's `suffix` (the answer-format hint in its info) does not reach the prompt: the env protocol carries the observation, not that info; the template renders it empty");
    }
    let mut turn = translated.text;
    if manager == Manager::Trajectory {
        let first = match &instruction {
            Some(text) => format!("{{% if turn == 1 %}}{text}\n{{% endif %}}"),
            None => "{% if turn == 1 and instruction %}{{ instruction }}\n{% endif %}".into(),
        };
        turn = first + &turn;
    }
    Ok(Some(TagPrompt {
        system: system.map(|s| keep_final_newline(literal(&s))),
        turn,
    }))
}

/// What a template's variables become.
struct Vars {
    manager: Manager,
    /// The instruction: `{{ instruction }}` or the config's `env_instruction`, written out.
    instruction: String,
    max_tokens_per_step: Option<u64>,
}

/// A translation error: the message and the fix.
pub struct Refusal {
    text: String,
    help: String,
}

/// A translated template and whether it asked for GEM's `suffix` (`{suffix}`, or
/// StepConcatEnvManager's `current_observation`, which ends with it).
struct Translated {
    text: String,
    suffix: bool,
}

const STEP_HISTORY: &str = "{% for h in history %}{% if not loop.first %}, {% endif %}(step: {{ h.step }}, observation: {{ h.observation }}, action: {{ h.action }}, reward: {{ h.reward }}){% endfor %}";
const CONCAT_HISTORY: &str =
    "{% for h in history %}{% if not loop.first %}\n{% endif %}{{ h.observation }}{% endfor %}";

impl Vars {
    /// The names the manager fills, for error messages.
    fn names(&self) -> &'static str {
        match self.manager {
            Manager::Trajectory => "observation, turn_idx, actions_left, max_response_length, suffix",
            Manager::Step => "env_instruction, history, step_count, history_length, current_step, current_observation, max_response_length",
            Manager::StepConcat => "history, current_observation",
        }
    }

    /// The minijinja text of `{name}` (GEM's suffix renders empty).
    fn field(&self, name: &str) -> Result<String, Refusal> {
        let max_response = || {
            match self.max_tokens_per_step {
            Some(n) => Ok(n.to_string()),
            None => Err(Refusal {
                text: "`{max_response_length}` needs the tag's `max_tokens_per_step`, which ROLL fills it with".into(),
                help: "set `max_tokens_per_step` on the tag".into(),
            }),
        }
        };
        let text = match (self.manager, name) {
            (Manager::Trajectory, "observation") => "{{ observation }}",
            (Manager::Trajectory, "turn_idx") => "{{ turn }}",
            (Manager::Trajectory, "actions_left") => "{{ turns_left + 1 }}",
            (Manager::Trajectory, "suffix") => "",
            (Manager::Trajectory | Manager::Step, "max_response_length") => return max_response(),
            (Manager::Step, "env_instruction") => return Ok(self.instruction.clone()),
            (Manager::Step, "history") => STEP_HISTORY,
            (Manager::Step, "step_count") => "{{ turn - 1 }}",
            (Manager::Step, "history_length") => "{{ history | length }}",
            (Manager::Step, "current_step") => "{{ turn }}",
            (Manager::Step, "current_observation") => "{{ observation }}",
            (Manager::StepConcat, "history") => CONCAT_HISTORY,
            (Manager::StepConcat, "current_observation") => "{{ observation }}\n",
            _ => {
                return Err(Refusal {
                    text: format!(
                        "`{{{name}}}` is not a variable ROLL's {:?} env manager fills ({}); ROLL's `format` would raise KeyError",
                        self.manager,
                        self.names()
                    ),
                    help: "use one of those names, or write `{{`/`}}` for a literal brace".into(),
                })
            }
        };
        Ok(text.to_string())
    }
}

/// `template` (Python `str.format`) as minijinja, per `vars`.
fn translate(template: &str, vars: &Vars) -> Result<Translated, Refusal> {
    let mut out = String::new();
    let mut literal_run = String::new();
    let mut suffix = false;
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                literal_run.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                literal_run.push('}');
            }
            '{' => {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) => name.push(c),
                        None => return Err(bad_brace(template)),
                    }
                }
                if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || name.is_empty() {
                    return Err(Refusal {
                        text: format!("`{{{name}}}`: only plain `{{name}}` fields are translated (no format specs, conversions, indices or positional fields)"),
                        help: "write the field as `{name}`".into(),
                    });
                }
                out.push_str(&literal(&std::mem::take(&mut literal_run)));
                out.push_str(&vars.field(&name)?);
                suffix |= name == "suffix"
                    || (vars.manager == Manager::StepConcat && name == "current_observation");
            }
            '}' => return Err(bad_brace(template)),
            other => literal_run.push(other),
        }
    }
    out.push_str(&literal(&literal_run));
    Ok(Translated {
        text: keep_final_newline(out),
        suffix,
    })
}

fn bad_brace(template: &str) -> Refusal {
    Refusal {
        text: format!("`{template}` has an unmatched brace (Python's `format` raises ValueError)"),
        help: "write a literal brace as `{{` or `}}`".into(),
    }
}

/// minijinja drops a template's final newline; ROLL's text keeps it: written as an
/// expression.
fn keep_final_newline(mut source: String) -> String {
    if source.ends_with('\n') {
        source.pop();
        source.push_str("{{ \"\\n\" }}");
    }
    source
}

/// `text` as minijinja source that renders to itself.
fn literal(text: &str) -> String {
    if text.contains('{') {
        format!("{{% raw %}}{text}{{% endraw %}}")
    } else {
        text.to_string()
    }
}

#[cfg(test)]
#[path = "prompt_templates_tests.rs"]
mod tests;
