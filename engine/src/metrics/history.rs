//! A run's `metrics.jsonl` read back as series of (step, wall time, value), what the plots
//! of `roll-flow report` draw.
//!
//! Reading is strict about the file and lenient about its content: a line that is not a
//! JSON object with a numeric `step` is an error naming `file:line` (a plot of a silently
//! half-read file would mislead), while a metric missing from some steps, or null there
//! (a non-finite value), simply has no point at those steps.
//!
//! Wall time: `wall_s` counts from the start of the process, so a resumed run's clock
//! starts again near 0. The series continue it from the last record before the resume,
//! which makes "against wall time" read as the run's total time.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Why a run's metrics could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    // `io`, not `source`: the message holds it already, and as a source the CLI's error
    // chain printed it twice.
    #[error("{path}: {io} (is it a run directory? `roll-flow run` writes metrics.jsonl into out_dir)", path = path.display())]
    Io { path: PathBuf, io: std::io::Error },
    #[error("{path}:{line}: {message}", path = path.display())]
    Line {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// One point of a series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub step: f64,
    /// Seconds since the run started, continued across resumes.
    pub wall_s: f64,
    pub value: f64,
}

/// The records of one run.
#[derive(Debug)]
pub struct RunHistory {
    /// What legends call the run: its directory's name.
    pub name: String,
    records: Vec<Record>,
    /// The line left out as unfinished: a last line without its newline that is not a
    /// record (a run writing it, or killed while it did; `--resume` drops it too).
    pub torn_line: Option<usize>,
}

#[derive(Debug)]
struct Record {
    step: f64,
    wall_s: f64,
    values: Map<String, Value>,
}

impl RunHistory {
    /// Reads `run_dir/metrics.jsonl`.
    pub fn read(run_dir: &Path) -> Result<Self, HistoryError> {
        let path = run_dir.join("metrics.jsonl");
        let bytes = std::fs::read(&path).map_err(|io| HistoryError::Io {
            path: path.clone(),
            io,
        })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            HistoryError::Line {
                path: path.clone(),
                line: valid.iter().filter(|&&b| b == b'\n').count() + 1,
                message: "not UTF-8 text (metrics.jsonl holds JSON lines)".into(),
            }
        })?;
        let name = std::fs::canonicalize(run_dir)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| run_dir.display().to_string());
        Self::parse(name, &path, &text)
    }

    /// Parses the text of a `metrics.jsonl`; `path` names it in errors.
    pub fn parse(name: String, path: &Path, text: &str) -> Result<Self, HistoryError> {
        let mut records = Vec::new();
        let (mut offset, mut last_raw, mut last_wall) = (0.0, 0.0, 0.0);
        let lines = text.lines().count();
        let mut torn_line = None;
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let error = |message: String| HistoryError::Line {
                path: path.to_path_buf(),
                line: index + 1,
                message,
            };
            let values = match serde_json::from_str::<Value>(line) {
                Ok(Value::Object(map)) => map,
                // The last line, without its newline: still being written, or torn.
                _ if index + 1 == lines && !text.ends_with('\n') => {
                    torn_line = Some(index + 1);
                    continue;
                }
                Ok(_) => return Err(error("expected one JSON object per line".into())),
                Err(e) => return Err(error(format!("not JSON: {e}"))),
            };
            let step = values
                .get("step")
                .and_then(Value::as_f64)
                .ok_or_else(|| error("the record has no numeric `step`".into()))?;
            let raw = values.get("wall_s").and_then(Value::as_f64).unwrap_or(0.0);
            if raw < last_raw {
                offset = last_wall;
            }
            last_raw = raw;
            last_wall = raw + offset;
            records.push(Record {
                step,
                wall_s: last_wall,
                values,
            });
        }
        Ok(RunHistory {
            name,
            records,
            torn_line,
        })
    }

    /// Every key that has a number at some step.
    pub fn keys(&self) -> BTreeSet<&str> {
        self.records
            .iter()
            .flat_map(|r| r.values.iter())
            .filter(|(_, v)| v.is_number())
            .map(|(k, _)| k.as_str())
            .collect()
    }

    /// The points of `key`, in file order; steps without a number are left out.
    pub fn series(&self, key: &str) -> Vec<Point> {
        self.records
            .iter()
            .filter_map(|r| {
                Some(Point {
                    step: r.step,
                    wall_s: r.wall_s,
                    value: r.values.get(key)?.as_f64()?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RunHistory, HistoryError> {
        RunHistory::parse("run".into(), Path::new("runs/a/metrics.jsonl"), text)
    }

    #[test]
    fn series_skip_missing_and_null_values() {
        let history = parse(
            "{\"step\":0,\"wall_s\":1.0,\"a/x\":0.5}\n\n{\"step\":1,\"wall_s\":2.0,\"a/x\":null}\n{\"step\":2,\"wall_s\":3.0,\"a/x\":1.5,\"b\":\"text\"}\n",
        )
        .unwrap();
        assert_eq!(history.keys(), BTreeSet::from(["a/x", "step", "wall_s"]));
        let xs = history.series("a/x");
        assert_eq!(xs.len(), 2);
        assert_eq!((xs[1].step, xs[1].wall_s, xs[1].value), (2.0, 3.0, 1.5));
        assert!(history.series("absent").is_empty());
    }

    #[test]
    fn wall_time_continues_across_a_resume() {
        let history = parse(
            "{\"step\":0,\"wall_s\":10.0}\n{\"step\":1,\"wall_s\":20.0}\n{\"step\":2,\"wall_s\":4.0}\n{\"step\":3,\"wall_s\":9.0}\n",
        )
        .unwrap();
        let walls: Vec<f64> = history.series("step").iter().map(|p| p.wall_s).collect();
        assert_eq!(walls, vec![10.0, 20.0, 24.0, 29.0]);
    }

    /// A last line without its newline that is not a record is left out (a run writing it,
    /// or killed mid-line); the same line with its newline is an error, as is one earlier.
    #[test]
    fn an_unfinished_last_line_is_left_out() {
        let history = parse("{\"step\":0,\"a\":1}\n{\"step\":1,\"a\":2}\n{\"step\":2,\"a").unwrap();
        assert_eq!(history.torn_line, Some(3));
        assert_eq!(history.series("a").len(), 2);
        assert_eq!(parse("{\"step\":0}\n").unwrap().torn_line, None);
        assert!(parse("{\"step\":0}\n{\"step\":1,\n{\"step\":2}").is_err());
    }

    #[test]
    fn non_utf8_text_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = b"{\"step\":0}\n{\"step\":1,\"a\":\"\xff\"}\n";
        std::fs::write(dir.path().join("metrics.jsonl"), bytes).unwrap();
        let err = RunHistory::read(dir.path()).unwrap_err().to_string();
        assert!(
            err.ends_with("metrics.jsonl:2: not UTF-8 text (metrics.jsonl holds JSON lines)"),
            "{err}"
        );
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        let err = parse("{\"step\":0}\n{\"step\":1,\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("runs/a/metrics.jsonl:2: not JSON:"),
            "{err}"
        );
        let err = parse("[1]\n").unwrap_err().to_string();
        assert_eq!(
            err,
            "runs/a/metrics.jsonl:1: expected one JSON object per line"
        );
        let err = parse("{\"wall_s\":1}\n").unwrap_err().to_string();
        assert_eq!(
            err,
            "runs/a/metrics.jsonl:1: the record has no numeric `step`"
        );
        let missing = RunHistory::read(Path::new("/no/such/run")).unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("/no/such/run/metrics.jsonl: "),
            "{missing}"
        );
        // No source to print again after the message.
        assert!(std::error::Error::source(&missing).is_none());
    }
}
