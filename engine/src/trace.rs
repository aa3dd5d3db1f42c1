//! A timeline of a run (`roll-flow run --trace FILE`): one span per node and step, one per
//! step an asynchronous rollout played on its own thread, written as a Chrome trace
//! (the Trace Event Format's complete events, `"ph": "X"`), which Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open: one track per node and per thread, so an
//! overlap of rollout and training shows as two bars side by side.
//!
//! Recording is off unless [`start`] was called; a span then costs a lock and a push.
//! The timeline is process-wide, as the threads that record into it are.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use serde_json::{json, Value};

use crate::atomic_file::write_atomic;

/// One span: its track, what ran, the step, and when (µs since the timeline started).
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub track: String,
    pub name: String,
    pub step: u64,
    pub start_us: f64,
    pub duration_us: f64,
}

struct Timeline {
    origin: Instant,
    spans: Mutex<Vec<Span>>,
}

static TIMELINE: OnceLock<Timeline> = OnceLock::new();

/// Starts recording (once per process; later calls change nothing).
pub fn start() {
    TIMELINE.get_or_init(|| Timeline {
        origin: Instant::now(),
        spans: Mutex::new(Vec::new()),
    });
}

/// Records that `name` ran on `track` for `step` from `started` until now.
pub fn span(track: &str, name: &str, step: u64, started: Instant) {
    let Some(timeline) = TIMELINE.get() else {
        return;
    };
    let end = Instant::now();
    let start_us = started
        .saturating_duration_since(timeline.origin)
        .as_secs_f64()
        * 1e6;
    let duration_us = end.saturating_duration_since(started).as_secs_f64() * 1e6;
    let span = Span {
        track: track.to_string(),
        name: name.to_string(),
        step,
        start_us,
        duration_us,
    };
    timeline
        .spans
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(span);
}

/// The spans recorded so far, in the order they ended.
pub fn spans() -> Vec<Span> {
    TIMELINE.get().map_or_else(Vec::new, |t| {
        t.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    })
}

/// The spans as a Chrome trace: tracks become threads of process 1, numbered in the order
/// of their first span and named by metadata events.
pub fn chrome_trace(spans: &[Span]) -> Value {
    let mut tracks: BTreeMap<&str, usize> = BTreeMap::new();
    let mut events = Vec::new();
    for span in spans {
        let next = tracks.len() + 1;
        let tid = *tracks.entry(span.track.as_str()).or_insert(next);
        events.push(json!({
            "name": span.name,
            "cat": span.track,
            "ph": "X",
            "pid": 1,
            "tid": tid,
            "ts": span.start_us,
            "dur": span.duration_us,
            "args": {"step": span.step},
        }));
    }
    for (track, tid) in tracks {
        events.push(json!({
            "name": "thread_name",
            "ph": "M",
            "pid": 1,
            "tid": tid,
            "args": {"name": track},
        }));
    }
    json!({"traceEvents": events, "displayTimeUnit": "ms"})
}

/// Writes the spans recorded so far to `path` (atomically).
pub fn write(path: &Path) -> std::io::Result<()> {
    let text = serde_json::to_vec(&chrome_trace(&spans()))?;
    write_atomic(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_become_complete_events_on_named_tracks() {
        let spans = [
            Span {
                track: "rollout".into(),
                name: "rollout".into(),
                step: 0,
                start_us: 10.0,
                duration_us: 5.0,
            },
            Span {
                track: "rollout (ahead)".into(),
                name: "play".into(),
                step: 1,
                start_us: 12.0,
                duration_us: 7.5,
            },
            Span {
                track: "rollout".into(),
                name: "rollout".into(),
                step: 1,
                start_us: 20.0,
                duration_us: 1.0,
            },
        ];
        let trace = chrome_trace(&spans);
        let events = trace["traceEvents"].as_array().unwrap();
        assert_eq!(events.len(), 5);
        assert_eq!(events[1]["tid"], 2);
        assert_eq!(events[1]["ts"], 12.0);
        assert_eq!(events[1]["dur"], 7.5);
        assert_eq!(events[1]["args"]["step"], 1);
        assert_eq!(events[2]["tid"], 1);
        let names: Vec<&Value> = events[3..].iter().map(|e| &e["args"]["name"]).collect();
        assert_eq!(names, [&json!("rollout"), &json!("rollout (ahead)")]);
    }
}
