//! The action parser every env shares.
//!
//! The model answers `<answer>Left</answer>`, optionally after `<think>…</think>`, and may
//! chain up to K actions with `||` (`<answer>Left || Up</answer>`), as RAGEN does. Rules:
//!
//! 1. The answer is the text between the first `<answer>` and the first `</answer>` after
//!    it; tags match case-insensitively. Anything before it (a think block, chatter) is
//!    ignored. No complete tag pair → [`ActionError::NoAnswer`].
//! 2. The answer is split on `||`; each part is trimmed of whitespace. Only the first K
//!    parts are kept (RAGEN's `actions[:max_actions]`).
//! 3. Each part must equal one of the env's action names, ignoring ASCII case. One unknown
//!    part makes the whole turn invalid ([`ActionError::Unknown`]) so a half-understood
//!    answer is never half executed; an empty part or an empty answer is
//!    [`ActionError::Empty`].
//!
//! The scan is byte-wise and linear, so any input (huge, unbalanced, unicode, control
//! bytes) is handled without panics: the tags are ASCII, so a match can never start inside
//! a multi-byte UTF-8 character.

/// Why an answer did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActionError {
    /// No `<answer>…</answer>` pair.
    NoAnswer,
    /// The answer, or one `||` part of it, is blank.
    Empty,
    /// A part is not an action name; holds the part (cut to 40 characters).
    Unknown(String),
}

impl std::fmt::Display for ActionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActionError::NoAnswer => write!(f, "no <answer>...</answer> in the response"),
            ActionError::Empty => write!(f, "empty answer"),
            ActionError::Unknown(part) => write!(f, "unknown action `{part}`"),
        }
    }
}

const OPEN: &str = "<answer>";
const CLOSE: &str = "</answer>";
const SHOWN_CHARS: usize = 40;

/// Finds `needle` (ASCII) in `haystack` from byte `from`, ignoring ASCII case.
fn find_ascii_ci(haystack: &str, needle: &str, from: usize) -> Option<usize> {
    let hay = haystack.as_bytes();
    let pat = needle.as_bytes();
    if from > hay.len() || pat.len() > hay.len() - from {
        return None;
    }
    (from..=hay.len() - pat.len()).find(|&i| hay[i..i + pat.len()].eq_ignore_ascii_case(pat))
}

/// The text inside the first complete `<answer>…</answer>` pair, if any.
pub fn extract_answer(text: &str) -> Option<&str> {
    let open = find_ascii_ci(text, OPEN, 0)?;
    let start = open + OPEN.len();
    let end = find_ascii_ci(text, CLOSE, start)?;
    Some(&text[start..end])
}

/// The instruction's sentence on the answer format, for `max_actions` actions a turn: one
/// action (`<answer>Left</answer>`) when it is 1, else up to `max_actions` joined by `||`
/// (`<answer>Left || Up</answer>`), the example taking `example`'s first action alone or
/// all of them. [`parse_actions`] reads both.
pub fn answer_instruction(max_actions: usize, example: &[&str]) -> String {
    match max_actions {
        1 => format!(
            "Answer with one action, for example <answer>{}</answer>.",
            example[0]
        ),
        k => format!(
            "Answer with up to {k} actions separated by ||, for example <answer>{}</answer>.",
            example.join(" || ")
        ),
    }
}

/// Parses `text` into indices into `names`, at most `max_actions` of them.
pub fn parse_actions(
    text: &str,
    names: &[&str],
    max_actions: usize,
) -> Result<Vec<usize>, ActionError> {
    let answer = extract_answer(text).ok_or(ActionError::NoAnswer)?;
    if answer.trim().is_empty() {
        return Err(ActionError::Empty);
    }
    answer
        .split("||")
        .take(max_actions)
        .map(|part| lookup(part.trim(), names))
        .collect()
}

fn lookup(part: &str, names: &[&str]) -> Result<usize, ActionError> {
    if part.is_empty() {
        return Err(ActionError::Empty);
    }
    names
        .iter()
        .position(|name| name.eq_ignore_ascii_case(part))
        .ok_or_else(|| ActionError::Unknown(part.chars().take(SHOWN_CHARS).collect()))
}

#[cfg(test)]
#[path = "action_tests.rs"]
mod tests;
