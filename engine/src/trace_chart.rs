//! A run's timeline ([`crate::trace`], `run --trace FILE`) drawn as a PNG: `roll-flow report
//! --trace FILE`. One row per track (a node, a rollout thread), one bar per span, for a
//! few steps, so whether the next step's rollout runs beside the actor step is plain to
//! see. The file is read back as [`crate::trace`] writes it (complete events and thread
//! names); other Chrome traces are refused with what is missing.

use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value;

use crate::atomic_file::write_atomic;
use crate::metrics::plots::{bundled_font, encode_png, line_colour};
use crate::trace::Span;

/// Pixel size of the timeline image.
pub const WIDTH: u32 = 1200;
/// Height per track, plus room for the caption and the axis.
const ROW: u32 = 60;
const FRAME: u32 = 110;
/// The most tracks one image holds (about 30,000 pixels high).
pub const MAX_TRACKS: usize = 512;

/// The spans of a trace file written by `run --trace`.
pub fn read(path: &Path) -> Result<Vec<Span>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let bad = |why: &str| format!("{}: not a roll-flow trace: {why}", path.display());
    let trace: Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
    let events = trace["traceEvents"]
        .as_array()
        .ok_or_else(|| bad("no `traceEvents` list"))?;
    let names: std::collections::BTreeMap<i64, String> = events
        .iter()
        .filter(|e| e["ph"] == "M")
        .filter_map(|e| Some((e["tid"].as_i64()?, e["args"]["name"].as_str()?.to_string())))
        .collect();
    let mut spans = Vec::new();
    for (i, e) in events.iter().enumerate().filter(|(_, e)| e["ph"] == "X") {
        // Microseconds; a run's trace starts near 0 and spans hours, not ages.
        let field = |k: &str| match e[k].as_f64() {
            Some(v) if (0.0..=1e15).contains(&v) => Ok(v),
            Some(v) => Err(bad(&format!(
                "event {i}'s `{k}` is {v:e}, not a time from 0 to 1e15 microseconds"
            ))),
            None => Err(bad(&format!("an event lacks `{k}`"))),
        };
        let tid = e["tid"]
            .as_i64()
            .ok_or_else(|| bad("an event lacks `tid`"))?;
        spans.push(Span {
            track: names
                .get(&tid)
                .cloned()
                .unwrap_or_else(|| format!("thread {tid}")),
            name: e["name"].as_str().unwrap_or("?").to_string(),
            step: e["args"]["step"]
                .as_u64()
                .ok_or_else(|| bad("an event lacks its step"))?,
            start_us: field("ts")?,
            duration_us: field("dur")?,
        });
    }
    Ok(spans)
}

/// The spans of `steps` as PNG bytes: tracks in the order of their first span, time in
/// seconds from the first span shown, each bar labelled with its step.
pub fn render(spans: &[Span], steps: Range<u64>) -> Result<Vec<u8>, String> {
    let shown: Vec<&Span> = spans.iter().filter(|s| steps.contains(&s.step)).collect();
    if shown.is_empty() {
        return Err(format!(
            "the trace has no span of steps {}-{}",
            steps.start,
            steps.end.saturating_sub(1)
        ));
    }
    let mut tracks: Vec<&str> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for span in &shown {
        if seen.insert(span.track.as_str()) {
            tracks.push(&span.track);
        }
    }
    if tracks.len() > MAX_TRACKS {
        return Err(format!(
            "steps {}-{} of the trace have {} tracks (threads); the timeline draws at most \
             {MAX_TRACKS}: a run with fewer env threads (`Rollout(env_threads)`) writes fewer",
            steps.start,
            steps.end.saturating_sub(1),
            tracks.len()
        ));
    }
    let origin = shown.iter().map(|s| s.start_us).fold(f64::MAX, f64::min);
    let end = (shown.iter())
        .map(|s| s.start_us + s.duration_us)
        .fold(f64::MIN, f64::max);
    let seconds = |us: f64| (us - origin) / 1e6;
    let height = FRAME + ROW * tracks.len() as u32;
    let font = bundled_font();
    let mut rgb = vec![0u8; (WIDTH * height * 3) as usize];
    {
        let err = |e: DrawingAreaErrorKind<_>| e.to_string();
        let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let rows = tracks.len() as i32;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("timeline of steps {}-{}", steps.start, steps.end - 1),
                (font, 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(170)
            .build_cartesian_2d(0.0..seconds(end).max(1e-6), (0..rows).into_segmented())
            .map_err(err)?;
        let label = |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) => tracks.get(*i as usize).unwrap_or(&"").to_string(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("seconds")
            .y_label_formatter(&label)
            .label_style((font, 13))
            .axis_desc_style((font, 15))
            .draw()
            .map_err(err)?;
        for span in &shown {
            let row = tracks.iter().position(|t| *t == span.track).unwrap_or(0) as i32;
            let colour = line_colour(row as usize);
            let (x0, x1) = (
                seconds(span.start_us),
                seconds(span.start_us + span.duration_us),
            );
            let bar = Rectangle::new(
                [
                    (x0, SegmentValue::Exact(row)),
                    (x1, SegmentValue::Exact(row + 1)),
                ],
                colour
                    .mix(if span.name.starts_with("wait") {
                        0.25
                    } else {
                        0.8
                    })
                    .filled(),
            );
            chart.draw_series(std::iter::once(bar)).map_err(err)?;
            let text = Text::new(
                format!("{}", span.step),
                (x0, SegmentValue::CenterOf(row)),
                (font, 12).into_font().color(&BLACK),
            );
            chart.draw_series(std::iter::once(text)).map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    encode_png(&rgb, WIDTH, height)
}

/// Draws `trace`'s steps `steps` into `out_dir/timeline.png` (written atomically).
pub fn draw(trace: &Path, out_dir: &Path, steps: Range<u64>) -> Result<PathBuf, String> {
    let png = render(&read(trace)?, steps)?;
    let path = out_dir.join("timeline.png");
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    write_atomic(&path, &png).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(track: &str, name: &str, step: u64, start: f64, duration: f64) -> Span {
        Span {
            track: track.into(),
            name: name.into(),
            step,
            start_us: start,
            duration_us: duration,
        }
    }

    #[test]
    fn a_written_trace_reads_back_and_draws() {
        let spans = vec![
            span("rollout", "rollout", 1, 0.0, 1e5),
            span("rollout (ahead)", "play", 2, 1e5, 8e5),
            span("actor_step", "actor_step", 1, 2e5, 6e5),
            span("actor_step", "actor_step", 9, 9e6, 1e5),
        ];
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("trace.json");
        let text = serde_json::to_vec(&crate::trace::chrome_trace(&spans)).unwrap();
        std::fs::write(&file, text).unwrap();
        assert_eq!(read(&file).unwrap(), spans);
        let png = draw(&file, dir.path(), 1..3).unwrap();
        let bytes = std::fs::read(png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        // Three tracks: the image grows by a row each.
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let info = decoder.read_info().unwrap();
        assert_eq!(info.info().height, FRAME + 3 * ROW);
        assert!(render(&spans, 20..30)
            .unwrap_err()
            .contains("no span of steps"));
        std::fs::write(&file, "{\"traceEvents\": [{\"ph\": \"X\"}]}").unwrap();
        assert!(read(&file).unwrap_err().contains("not a roll-flow trace"));
    }

    /// Times near f64's limit drew an infinite axis that never returned; more threads than
    /// an image holds overflowed its pixel count and panicked.
    #[test]
    fn absurd_times_and_too_many_tracks_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("trace.json");
        let event =
            r#"{"ph": "X", "tid": 1, "name": "a", "args": {"step": 1}, "ts": 1e308, "dur": 1}"#;
        std::fs::write(&file, format!("{{\"traceEvents\": [{event}]}}")).unwrap();
        let e = read(&file).unwrap_err();
        assert!(e.contains("event 0's `ts` is 1e308, not a time"), "{e}");
        let spans: Vec<Span> = (0..=MAX_TRACKS)
            .map(|i| span(&format!("thread {i}"), "play", 1, i as f64, 1.0))
            .collect();
        let e = render(&spans, 1..2).unwrap_err();
        assert!(e.contains("have 513 tracks (threads)"), "{e}");
    }
}
