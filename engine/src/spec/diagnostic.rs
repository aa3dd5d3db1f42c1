//! Diagnostics: errors and warnings about a pipeline file, rendered rustc-style.
//!
//! ```text
//! error: unknown node kind `GiGPOO`
//!   --> pipelines/bad.ron:12:16
//!    |
//! 12 |         "adv": GiGPOO(step_gamma: 0.95),
//!    |                ^^^^^^
//!    = help: did you mean `GiGPO`?
//! ```
//!
//! Every diagnostic carries the file it is about; the location is optional only for
//! problems that have no place in the file (an unreadable file).

use std::fmt;
use std::path::{Path, PathBuf};

/// A 1-based line and column (columns count characters, not bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LineCol {
    pub line: usize,
    pub col: usize,
}

/// Byte range into a source text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSpan {
    pub start: usize,
    pub end: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

/// One problem found in a pipeline file.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub file: PathBuf,
    /// Where in the file, with the source line for the snippet.
    pub location: Option<Location>,
    /// Advice, e.g. "did you mean `GiGPO`?".
    pub help: Option<String>,
}

/// A resolved place in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Location {
    pub start: LineCol,
    /// Number of characters to underline on the start line (at least 1).
    pub width: usize,
    /// The text of the start line.
    pub line_text: String,
}

impl Location {
    /// Resolves a byte span of `text` to a location. A span end inside a multi-byte
    /// character is widened to take the whole character, a start is moved back to its
    /// first byte, so no byte offset can make this panic.
    pub fn from_span(text: &str, span: ByteSpan) -> Location {
        let start = text.floor_char_boundary(span.start);
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let line = text[..start].matches('\n').count() + 1;
        let col = text[line_start..start].chars().count() + 1;
        let end = text.ceil_char_boundary(span.end.clamp(start, line_end));
        let width = text[start..end].chars().count().max(1);
        let line_text = text[line_start..line_end]
            .trim_end_matches('\r')
            .to_string();
        Location {
            start: LineCol { line, col },
            width,
            line_text,
        }
    }

    /// A location from a line and column (ron's error positions).
    pub fn from_line_col(text: &str, at: LineCol) -> Location {
        let line_text = text.lines().nth(at.line.saturating_sub(1)).unwrap_or("");
        Location {
            start: at,
            width: 1,
            line_text: line_text.trim_end_matches('\r').to_string(),
        }
    }
}

impl Diagnostic {
    pub fn error(file: &Path, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            file: file.to_path_buf(),
            location: None,
            help: None,
        }
    }

    pub fn warning(file: &Path, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(file, message)
        }
    }

    pub fn at(mut self, location: Option<Location>) -> Self {
        self.location = location;
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn help_opt(mut self, help: Option<String>) -> Self {
        self.help = help;
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        writeln!(f, "{label}: {}", self.message)?;
        match &self.location {
            Some(loc) => {
                let num = loc.start.line.to_string();
                let pad = " ".repeat(num.len());
                writeln!(
                    f,
                    "{pad}--> {}:{}:{}",
                    self.file.display(),
                    loc.start.line,
                    loc.start.col
                )?;
                writeln!(f, "{pad} |")?;
                writeln!(f, "{num} | {}", loc.line_text)?;
                let lead: String = loc
                    .line_text
                    .chars()
                    .take(loc.start.col.saturating_sub(1))
                    .map(|c| if c == '\t' { '\t' } else { ' ' })
                    .collect();
                writeln!(f, "{pad} | {lead}{}", "^".repeat(loc.width))?;
                if let Some(help) = &self.help {
                    writeln!(f, "{pad} = help: {help}")?;
                }
            }
            None => {
                writeln!(f, " --> {}", self.file.display())?;
                if let Some(help) = &self.help {
                    writeln!(f, "  = help: {help}")?;
                }
            }
        }
        Ok(())
    }
}

/// Renders diagnostics one after another, errors and warnings in file order.
pub fn render_all(diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}
