//! `--set key=value` overrides, applied to the pipeline text before parsing.
//!
//! Overrides edit the RON source rather than the typed pipeline, so they work the same for
//! every field of every node, model and env, including fields the file leaves at their
//! default, and the value is checked by the same parser with the same error messages.
//!
//! Keys are dotted paths through the file: `steps=5`, `envs.train.groups=2`,
//! `nodes.rollout.temperature=0.7`, `models.policy.optim.lr=3e-4`. A segment names a map
//! entry when the value there is a `{ }` map, and a field otherwise. A field the file does
//! not spell out is inserted.

use std::path::Path;

use super::diagnostic::Diagnostic;
use super::locate::{parse, Body, Node, Seg};
use super::suggest::did_you_mean;

/// Applies each `key=value` in order and returns the edited text.
pub fn apply_overrides(
    path: &Path,
    text: &str,
    overrides: &[String],
) -> Result<String, Vec<Diagnostic>> {
    let mut text = text.to_string();
    let mut errors = Vec::new();
    for item in overrides {
        match apply_one(&text, item) {
            Ok(edited) => text = edited,
            Err(message) => errors.push(
                Diagnostic::error(path, format!("--set {item}: {}", message.0)).help_opt(message.1),
            ),
        }
    }
    if errors.is_empty() {
        Ok(text)
    } else {
        Err(errors)
    }
}

struct Problem(String, Option<String>);

fn apply_one(text: &str, item: &str) -> Result<String, Problem> {
    let Some((key, value)) = item.split_once('=') else {
        return Err(Problem(
            "expected `key=value`".into(),
            Some("e.g. --set steps=5".into()),
        ));
    };
    let (key, value) = (key.trim(), value.trim());
    if key.is_empty() || value.is_empty() {
        return Err(Problem(
            "expected `key=value`".into(),
            Some("e.g. --set envs.train.groups=2".into()),
        ));
    }
    let root = parse(text).ok_or_else(|| {
        Problem(
            "the pipeline file does not parse; fix it first (see `roll-flow validate`)".into(),
            None,
        )
    })?;
    let segments: Vec<&str> = key.split('.').collect();
    let mut node = &root;
    for (i, name) in segments.iter().enumerate() {
        let seg = segment_for(node, name);
        match node.child(&seg) {
            Some(child) => node = child,
            None if i + 1 == segments.len() => {
                return checked(insert_field(text, node, name, value)?, key, value)
            }
            None => return Err(missing(node, name, &segments[..i])),
        }
    }
    let span = node.span;
    let edited = format!("{}{}{}", &text[..span.start], value, &text[span.end..]);
    checked(edited, key, value)
}

/// `edited` if it still parses: a value that is not RON (an unquoted path) is reported
/// here, under its own `--set`, rather than as a broken file under the next override.
fn checked(edited: String, key: &str, value: &str) -> Result<String, Problem> {
    if parse(&edited).is_some() {
        return Ok(edited);
    }
    let bare_text = !value.starts_with(['"', '(', '[', '{']);
    Err(Problem(
        format!("`{value}` is not a RON value"),
        bare_text.then(|| format!("strings need quotes: --set '{key}=\"{value}\"'")),
    ))
}

fn segment_for(node: &Node, name: &str) -> Seg {
    match &node.body {
        Body::Map(_) => Seg::Key(name.to_string(), 0),
        Body::Seq(_) if name.parse::<usize>().is_ok() => Seg::Index(name.parse().unwrap_or(0)),
        _ => Seg::Field(name.to_string()),
    }
}

/// Adds `name: value,` as the first field of a struct that leaves `name` at its default.
fn insert_field(text: &str, node: &Node, name: &str, value: &str) -> Result<String, Problem> {
    let open = match &node.body {
        Body::Struct { open, .. } => *open,
        // `Gae()` or `Checkpoint()`: an empty struct-like value.
        Body::Seq(items)
            if items.is_empty() && text[node.head.start..node.span.end].ends_with(')') =>
        {
            text[..node.span.end]
                .rfind('(')
                .map(|i| i + 1)
                .unwrap_or(node.span.end)
        }
        Body::Map(_) => {
            return Err(Problem(
                format!("no entry `{name}` here"),
                Some(entries_help(node, name)),
            ))
        }
        _ => {
            return Err(Problem(
                format!("cannot set field `{name}` on this value"),
                None,
            ))
        }
    };
    Ok(format!(
        "{}{name}: {value}, {}",
        &text[..open],
        &text[open..]
    ))
}

fn missing(node: &Node, name: &str, parents: &[&str]) -> Problem {
    let place = if parents.is_empty() {
        "the pipeline".to_string()
    } else {
        format!("`{}`", parents.join("."))
    };
    Problem(
        format!("`{name}` is not in {place}"),
        Some(entries_help(node, name)),
    )
}

fn entries_help(node: &Node, name: &str) -> String {
    let names: Vec<&str> = match &node.body {
        Body::Struct { fields, .. } => fields.iter().map(|(n, _, _)| n.as_str()).collect(),
        Body::Map(entries) => entries.iter().map(|(k, _, _)| k.as_str()).collect(),
        _ => Vec::new(),
    };
    did_you_mean(name, &names)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"Pipeline(name: "x", steps: 100, envs: { "train": (env: Bandit(), groups: 4) },
  nodes: { "adv": Gae(), "ckpt": Checkpoint(every: 5) })"#;

    fn set(item: &str) -> Result<String, String> {
        apply_one(SRC, item).map_err(|p| format!("{} / {}", p.0, p.1.unwrap_or_default()))
    }

    #[test]
    fn replaces_existing_values() {
        assert!(set("steps=2").unwrap().contains("steps: 2,"));
        assert!(set("envs.train.groups=1").unwrap().contains("groups: 1)"));
        assert!(set("nodes.ckpt.every=1")
            .unwrap()
            .contains("Checkpoint(every: 1)"));
    }

    #[test]
    fn inserts_fields_left_at_default() {
        assert!(set("envs.train.group_size=2")
            .unwrap()
            .contains("(group_size: 2, env: Bandit()"));
        assert!(set("nodes.adv.gamma=0.9")
            .unwrap()
            .contains("Gae(gamma: 0.9, )"));
        assert!(set("seed=3").unwrap().contains("Pipeline(seed: 3, name"));
    }

    #[test]
    fn explains_bad_keys() {
        assert_eq!(
            set("envs.trian.groups=2").unwrap_err(),
            "`trian` is not in `envs` / did you mean `train`?"
        );
        assert!(set("steps")
            .unwrap_err()
            .starts_with("expected `key=value`"));
        assert!(set("=3").is_err());
    }

    #[test]
    fn explains_values_that_are_not_ron() {
        assert_eq!(
            set("nodes.ckpt.every=/tmp/x").unwrap_err(),
            "`/tmp/x` is not a RON value / strings need quotes: --set 'nodes.ckpt.every=\"/tmp/x\"'"
        );
        assert_eq!(
            set("envs.train.group_size=/tmp/x").unwrap_err(),
            "`/tmp/x` is not a RON value / strings need quotes: --set 'envs.train.group_size=\"/tmp/x\"'"
        );
        assert!(set("envs.train.groups=(1").unwrap_err().ends_with(" / "));
    }
}
