//! The resolvers ROLL's configs use (`${name:args}`), evaluated without reading the clock
//! or the shell, so that importing the same file gives the same pipeline everywhere:
//!
//! - `${now:FORMAT}` (Hydra's, ROLL's demos name runs with it): FORMAT applied to the fixed
//!   instant 1970-01-01 00:00:00 UTC, e.g. `%Y%m%d_%H%M%S` → `19700101_000000`.
//! - `${oc.env:VAR}` / `${oc.env:VAR,DEFAULT}` (OmegaConf's): the environment is not read
//!   (its value, often a key, would be written into the pipeline file); the default when
//!   given, else an empty string.
//! - `${oc.select:KEY,DEFAULT}` (OmegaConf's): KEY's value, or the default when KEY is
//!   absent (resolved by `hydra_compose`, which holds the tree).
//!
//! Each use is reported with the constant written. OmegaConf has no arithmetic of its own
//! (`${a}+1` is the string `10+1`, as here) and ROLL registers no resolvers; any other
//! resolver is refused with the key that uses it.

use super::yaml_value::Value;

/// What a resolver gave and why that value.
pub struct Evaluated {
    pub value: Value,
    pub why: String,
}

/// The fixed instant `now` is formatted at.
const EPOCH: &str = "1970-01-01 00:00:00 UTC";

/// Evaluates `name:args` for the resolvers that need no config tree (`now`, `oc.env`);
/// `None` for any other name.
pub fn evaluate(name: &str, args: &str) -> Option<Evaluated> {
    match name {
        "now" => Some(Evaluated {
            value: Value::Str(format_epoch(args)),
            why: format!(
                "Hydra's `now` taken at {EPOCH}, a stated constant, so the import is reproducible"
            ),
        }),
        "oc.env" => {
            let (var, default) = split_default(args);
            let why = format!(
                "the environment variable {var} is not read (its value would be written into the pipeline file)"
            );
            Some(match default {
                Some(default) => Evaluated {
                    value: Value::Str(unquote(default).to_string()),
                    why: format!("{why}; wrote its default"),
                },
                None => Evaluated {
                    value: Value::Str(String::new()),
                    why: format!("{why}; wrote an empty string"),
                },
            })
        }
        _ => None,
    }
}

/// `KEY,DEFAULT` → (`KEY`, `Some(DEFAULT)`), trimmed.
pub fn split_default(args: &str) -> (&str, Option<&str>) {
    match args.split_once(',') {
        Some((key, default)) => (key.trim(), Some(default.trim())),
        None => (args.trim(), None),
    }
}

/// A default written in quotes (`'x'`, `"x"`) without them.
pub fn unquote(text: &str) -> &str {
    for q in ['\'', '"'] {
        if let Some(inner) = text.strip_prefix(q).and_then(|t| t.strip_suffix(q)) {
            return inner;
        }
    }
    text
}

/// `format` (Python's strftime directives) at 1970-01-01 00:00:00 UTC, a Thursday; an
/// unknown directive is kept as written.
fn format_epoch(format: &str) -> String {
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(directive) = chars.next() else {
            out.push('%');
            break;
        };
        out.push_str(match directive {
            'Y' => "1970",
            'y' => "70",
            'm' | 'd' => "01",
            'H' | 'M' | 'S' => "00",
            'I' => "12",
            'p' => "AM",
            'j' => "001",
            'f' => "000000",
            'a' => "Thu",
            'A' => "Thursday",
            'b' => "Jan",
            'B' => "January",
            'z' => "+0000",
            'Z' => "UTC",
            's' => "0",
            '%' => "%",
            other => {
                out.push('%');
                out.push(other);
                continue;
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_formats_the_epoch_and_keeps_unknown_directives() {
        let now = evaluate("now", "%Y%m%d_%H%M%S").unwrap();
        assert_eq!(now.value, Value::Str("19700101_000000".into()));
        assert!(now.why.contains("1970-01-01 00:00:00 UTC"), "{}", now.why);
        assert_eq!(
            format_epoch("%Y-%m-%dT%H:%M %a %q 100%%"),
            "1970-01-01T00:00 Thu %q 100%"
        );
    }

    #[test]
    fn env_is_not_read() {
        std::env::var("PATH").expect("PATH is set here");
        let env = evaluate("oc.env", "PATH").unwrap();
        assert_eq!(env.value, Value::Str(String::new()));
        let with_default = evaluate("oc.env", "PATH, '/opt/models'").unwrap();
        assert_eq!(with_default.value, Value::Str("/opt/models".into()));
        assert!(
            with_default.why.contains("PATH is not read"),
            "{}",
            with_default.why
        );
        assert!(evaluate("oc.decode", "x").is_none());
    }
}
