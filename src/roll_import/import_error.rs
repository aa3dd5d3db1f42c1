//! Why an import failed: each error names the file and the line:column or key path, and
//! says what to do.

use std::fmt;
use std::path::PathBuf;

/// A key of the config that is neither read by the importer nor listed as ignored or
/// unsupported.
#[derive(Clone, Debug, PartialEq)]
pub struct UnknownKey {
    /// The dotted key path, e.g. `actor_train.training_args.learning_rat`.
    pub path: String,
    /// The known key closest to it, if one is close.
    pub did_you_mean: Option<String>,
}

/// An import that could not produce a pipeline.
#[derive(Clone, Debug, PartialEq)]
pub enum ImportError {
    /// A file could not be read.
    Read { file: PathBuf, message: String },
    /// YAML syntax.
    Yaml {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// The config's structure (defaults list, interpolation, a missing file).
    Config { file: PathBuf, message: String },
    /// A value of the wrong type or out of range, at a key path.
    Value {
        file: PathBuf,
        key: String,
        message: String,
        help: String,
    },
    /// Keys the importer does not know.
    UnknownKeys {
        file: PathBuf,
        keys: Vec<UnknownKey>,
    },
    /// `--strict`: keys ROLL reads that the pipeline does not use, as `(key, why)`.
    KnownUnused {
        file: PathBuf,
        keys: Vec<(String, String)>,
    },
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::Read { file, message } => {
                write!(f, "{}: cannot read: {message}", file.display())
            }
            ImportError::Yaml {
                file,
                line,
                column,
                message,
            } => write!(
                f,
                "{}:{line}:{column}: YAML syntax error: {message}",
                file.display()
            ),
            ImportError::Config { file, message } => write!(f, "{}: {message}", file.display()),
            ImportError::Value {
                file,
                key,
                message,
                help,
            } => write!(f, "{}: `{key}`: {message}\n  help: {help}", file.display()),
            ImportError::UnknownKeys { file, keys } => {
                write!(f, "{}: {} unknown key(s):", file.display(), keys.len())?;
                for key in keys {
                    write!(f, "\n  unknown key `{}`", key.path)?;
                    if let Some(near) = &key.did_you_mean {
                        write!(f, " (did you mean `{near}`?)")?;
                    }
                }
                write!(
                    f,
                    "\n  help: fix the spelling, or remove keys ROLL does not read either; \
                     docs/roll-import.md lists every key the importer knows"
                )
            }
            ImportError::KnownUnused { file, keys } => {
                write!(
                    f,
                    "{}: --strict: {} key(s) ROLL reads that the pipeline would not use:",
                    file.display(),
                    keys.len()
                )?;
                for (key, why) in keys {
                    write!(f, "\n  {key}: {why}")?;
                }
                write!(
                    f,
                    "\n  help: remove these keys from the config, or import without --strict \
                     (the written file's header lists them)"
                )
            }
        }
    }
}

impl std::error::Error for ImportError {}
