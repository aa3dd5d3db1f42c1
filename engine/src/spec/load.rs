//! Reading a pipeline file: bytes → UTF-8 → `--set` overrides → `ron` → [`Pipeline`].
//!
//! Every failure becomes a [`Diagnostic`] naming the file and, where the file has a
//! place for it, the line and column; unknown names get a "did you mean" from the names
//! serde knows. Nothing here panics on any input.

use std::path::{Path, PathBuf};

use ron::error::{Error as RonError, SpannedError};
use ron::extensions::Extensions;

use super::diagnostic::{ByteSpan, Diagnostic, LineCol, Location};
use super::locate::last_token_end;
use super::overrides::apply_overrides;
use super::suggest::{did_you_mean, quoted_list};
use crate::dialect::{Catalog, Pipeline};

/// The text of a pipeline file, after overrides.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    pub path: PathBuf,
    pub text: String,
}

/// A parsed pipeline with the source it came from (for locating later diagnostics).
#[derive(Clone, Debug)]
pub struct Loaded<C: Catalog> {
    pub pipeline: Pipeline<C>,
    pub source: Source,
}

/// Reads and parses `path`, applying `--set key=value` overrides first.
pub fn load<C: Catalog>(path: &Path, overrides: &[String]) -> Result<Loaded<C>, Vec<Diagnostic>> {
    let bytes = std::fs::read(path).map_err(|e| {
        vec![
            Diagnostic::error(path, format!("cannot read pipeline file: {e}"))
                .help("check the path; pipelines shipped with roll-flow are in pipelines/"),
        ]
    })?;
    let text = decode_utf8(path, without_bom(bytes)).map_err(|d| vec![*d])?;
    load_text(path, &text, overrides)
}

/// Parses pipeline `text` (shown in diagnostics as `path`), applying `--set key=value`
/// overrides first: what [`load`] does once the file is read, for pipelines a program
/// writes itself.
pub fn load_text<C: Catalog>(
    path: &Path,
    text: &str,
    overrides: &[String],
) -> Result<Loaded<C>, Vec<Diagnostic>> {
    let edited = apply_overrides(path, text, overrides).map_err(|errors| {
        // The file itself may not be RON: its own error then says where, and no override
        // had a place to go in it.
        match parse::<C>(path, text) {
            Err(own) if super::locate::parse(text).is_none() => vec![*own],
            _ => errors,
        }
    })?;
    let pipeline = match parse::<C>(path, &edited) {
        Ok(pipeline) => pipeline,
        Err(d) => return Err(vec![blame_override::<C>(path, text, overrides, *d)]),
    };
    Ok(Loaded {
        pipeline,
        source: Source {
            path: path.to_path_buf(),
            text: edited,
        },
    })
}

/// The error of a pipeline that no longer parses once `overrides` are applied to `text`,
/// which parses alone: the first override after which it fails is named, since the line
/// the error shows is the file as the overrides edited it, not as written (`--set
/// envs.train.groups=abc` shows `groups: abc`). Any other `error` comes back as it is.
fn blame_override<C: Catalog>(
    path: &Path,
    text: &str,
    overrides: &[String],
    error: Diagnostic,
) -> Diagnostic {
    if overrides.is_empty() || parse::<C>(path, text).is_err() {
        return error;
    }
    for applied in 1..=overrides.len() {
        let Ok(edited) = apply_overrides(path, text, &overrides[..applied]) else {
            break;
        };
        if let Err(first) = parse::<C>(path, &edited) {
            let mut first = *first;
            first.message = format!("--set {}: {}", overrides[applied - 1], first.message);
            let shown = "the line shown is the file as this --set edits it";
            first.help = Some(match first.help {
                Some(help) => format!("{help} ({shown})"),
                None => format!("{shown}; a string value is quoted (`--set key=\"text\"`)"),
            });
            return first;
        }
    }
    error
}

/// `bytes` without a leading UTF-8 byte-order mark, which some editors write and which is
/// no part of the RON text (editors do not show it, so columns count from after it).
fn without_bom(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    bytes
}

fn decode_utf8(path: &Path, bytes: Vec<u8>) -> Result<String, Box<Diagnostic>> {
    String::from_utf8(bytes).map_err(|e| {
        let bad_at = e.utf8_error().valid_up_to();
        let bytes = e.into_bytes();
        let valid = String::from_utf8_lossy(&bytes[..bad_at]);
        let line = valid.matches('\n').count() + 1;
        let line_start = valid.rfind('\n').map_or(0, |i| i + 1);
        let col = valid[line_start..].chars().count() + 1;
        let line_text = String::from_utf8_lossy(&bytes[line_start..])
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
        Diagnostic::error(
            path,
            format!("file is not valid UTF-8 (byte 0x{:02X})", bytes[bad_at]),
        )
        .at(Some(Location {
            start: LineCol { line, col },
            width: 1,
            line_text,
        }))
        .help("pipeline files are UTF-8 text; re-save the file as UTF-8")
        .into()
    })
}

/// The `ron` options pipeline files are read with: `Some(..)` may be left out, and a
/// variant wrapping a config takes its fields directly (`Gae(gamma: 1.0)`).
pub fn ron_options() -> ron::Options {
    ron::Options::default()
        .with_default_extension(Extensions::IMPLICIT_SOME)
        .with_default_extension(Extensions::UNWRAP_VARIANT_NEWTYPES)
}

/// Parses pipeline text.
pub fn parse<C: Catalog>(path: &Path, text: &str) -> Result<Pipeline<C>, Box<Diagnostic>> {
    if text.trim().is_empty() {
        return Err(Diagnostic::error(path, "the pipeline file is empty")
            .help("a pipeline file holds one `Pipeline(...)`; see pipelines/ for examples")
            .into());
    }
    ron_options()
        .from_str::<Pipeline<C>>(text)
        .map_err(|e| ron_diagnostic(path, text, &e).into())
}

/// Turns a `ron` error into a diagnostic with location and advice.
pub fn ron_diagnostic(path: &Path, text: &str, e: &SpannedError) -> Diagnostic {
    let (start, end) = (e.span.start, e.span.end);
    let mut location = Location::from_line_col(
        text,
        LineCol {
            line: start.line,
            col: start.col,
        },
    );
    if end.line == start.line && end.col > start.col {
        location.width = end.col - start.col;
    }
    let start_byte = byte_offset(text, start.line, start.col).unwrap_or(text.len());
    let at_end = byte_offset(text, end.line, end.col).is_none_or(|o| text[o..].trim().is_empty());
    let (message, help) = match &e.code {
        RonError::TrailingCharacters => {
            // Point at the extra text itself (its first character, which may take
            // several bytes), not at the end of the pipeline.
            let extra =
                start_byte + (text[start_byte..].len() - text[start_byte..].trim_start().len());
            let first = text[extra..].chars().next().map_or(0, char::len_utf8);
            location = Location::from_span(
                text,
                ByteSpan {
                    start: extra,
                    end: extra + first,
                },
            );
            describe(&e.code, text)
        }
        _ if at_end => describe(&RonError::Eof, text),
        RonError::ExpectedComma => {
            // The comma is missing after the previous value, which may be lines above
            // and followed by comments: point at the value's last character.
            let before = &text[..start_byte];
            let after = last_token_end(before).unwrap_or_else(|| before.trim_end().len());
            let last = before[..after]
                .char_indices()
                .next_back()
                .map_or(0, |(i, _)| i);
            location = Location::from_span(
                text,
                ByteSpan {
                    start: last,
                    end: after,
                },
            );
            (
                "expected `,` after this value".into(),
                Some("separate fields and entries with `,`".into()),
            )
        }
        RonError::IntegerOutOfBounds => {
            // Named by the field and value the location points at: ron says neither.
            // ron's span starts after a minus sign.
            let number = match text[..start_byte].ends_with('-') {
                true => start_byte - 1,
                false => start_byte,
            };
            let before = text[..number].trim_end();
            let field = before.strip_suffix(':').map(|b| {
                let b = b.trim_end();
                let start = b
                    .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .map_or(0, |i| i + 1);
                &b[start..]
            });
            let value: String = text[number..]
                .chars()
                .take_while(|c| !matches!(c, ',' | ')' | ']' | '}') && !c.is_whitespace())
                .collect();
            let named = match field {
                Some(f) if !f.is_empty() => format!("`{f}: {value}`"),
                _ => format!("`{value}`"),
            };
            (
                format!("{named} is out of range for this field's whole-number type"),
                Some(
                    "counts and sizes are whole numbers ≥ 0 (most at least 1); check the sign \
                     and the size"
                        .into(),
                ),
            )
        }
        code => describe(code, text),
    };
    Diagnostic::error(path, message)
        .at(Some(location))
        .help_opt(help)
}

fn describe(code: &RonError, text: &str) -> (String, Option<String>) {
    match code {
        RonError::NoSuchEnumVariant {
            expected,
            found,
            outer,
        } => {
            let what = outer.as_deref().unwrap_or("variant");
            (
                format!("unknown {what} `{found}`"),
                Some(did_you_mean(found, expected)),
            )
        }
        RonError::NoSuchStructField {
            expected,
            found,
            outer,
        } => {
            let inside = outer
                .as_deref()
                .map(|o| format!(" in `{o}`"))
                .unwrap_or_default();
            (
                format!("unknown field `{found}`{inside}"),
                Some(did_you_mean(found, expected)),
            )
        }
        RonError::MissingStructField { field, outer } => {
            let inside = outer
                .as_deref()
                .map(|o| format!(" in `{o}`"))
                .unwrap_or_default();
            (
                format!("missing field `{field}`{inside}"),
                Some(format!("add `{field}: ...`")),
            )
        }
        RonError::DuplicateStructField { field, outer } => {
            let inside = outer
                .as_deref()
                .map(|o| format!(" in `{o}`"))
                .unwrap_or_default();
            (
                format!("field `{field}` is given twice{inside}"),
                Some("keep one of them".into()),
            )
        }
        RonError::ExpectedDifferentStructName { expected, found } => (
            format!("expected `{expected}(...)`, found `{found}(...)`"),
            Some(format!("a pipeline file starts with `{expected}(`")),
        ),
        RonError::Eof => {
            let open = unclosed(text);
            let help = if ends_in_comment(text) {
                "the file ends inside a `/* ... */` comment: close it with `*/`".into()
            } else if open.is_empty() {
                "the file ends before its last value, string or comment does".into()
            } else {
                format!("a bracket is not closed; open ones: {}", quoted_list(&open))
            };
            ("unexpected end of file".into(), Some(help))
        }
        RonError::InvalidValueForType { expected, found } => {
            (format!("expected {expected}, found {found}"), None)
        }
        RonError::TrailingCharacters => (
            "unexpected text after the end of the pipeline".into(),
            Some("a pipeline file holds exactly one `Pipeline(...)`".into()),
        ),
        RonError::ExpectedInteger => ("expected a whole number".into(), None),
        RonError::ExpectedFloat => ("expected a number".into(), None),
        RonError::ExpectedBoolean => ("expected `true` or `false`".into(), None),
        RonError::ExpectedString | RonError::ExpectedStringEnd => {
            ("expected a string in double quotes".into(), None)
        }
        other => (other.to_string(), None),
    }
}

/// The byte offset of a 1-based line and (character) column.
fn byte_offset(text: &str, line: usize, col: usize) -> Option<usize> {
    let line_start = if line <= 1 {
        0
    } else {
        text.match_indices('\n').nth(line - 2).map(|(i, _)| i + 1)?
    };
    let rest = &text[line_start..];
    let within = rest
        .char_indices()
        .nth(col.saturating_sub(1))
        .map_or(rest.len(), |(i, _)| i);
    Some(line_start + within)
}

/// Whether `text` ends inside a block comment (its last `/*` has no `*/` after it).
fn ends_in_comment(text: &str) -> bool {
    text.rfind("/*")
        .is_some_and(|open| !text[open + 2..].contains("*/"))
}

/// The brackets left open at the end of `text` (ignoring strings roughly).
fn unclosed(text: &str) -> Vec<&'static str> {
    let mut stack = Vec::new();
    let mut in_string = false;
    let mut prev = ' ';
    for c in text.chars() {
        match c {
            '"' if prev != '\\' => in_string = !in_string,
            '(' | '[' | '{' if !in_string => stack.push(c),
            ')' | ']' | '}' if !in_string => {
                stack.pop();
            }
            _ => {}
        }
        prev = c;
    }
    stack
        .into_iter()
        .map(|c| match c {
            '(' => "(",
            '[' => "[",
            _ => "{",
        })
        .collect()
}
