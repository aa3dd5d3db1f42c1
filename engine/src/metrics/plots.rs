//! PNG charts of training metrics: `roll-flow report RUN_DIR...` and the end of every run.
//!
//! One image per quantity users watch (validation success, score, KL, entropy, response
//! length, grad norm), each with two panels: against step and against wall time. Keys are
//! matched by their metric part, not the node name, since a pipeline names its nodes: e.g.
//! validation success is every `<eval node>/<env set>/success`. With several runs, each
//! line is one run (and key, when a chart holds several keys per run), so StarPO and
//! GiGPO runs land side by side on the same axes. A chart with no matching key in any run
//! is skipped: not every pipeline has a critic, a KL term or an eval node.
//!
//! Drawing uses plotters' bitmap backend into a memory buffer, encoded with `png` and
//! written atomically. Text uses a small DejaVu Sans subset compiled into the binary
//! (`engine/assets/`), so plots look the same on machines without system fonts.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use super::history::{Point, RunHistory};
use crate::atomic_file::write_atomic;

/// Pixel size of one chart image (two panels side by side).
pub const WIDTH: u32 = 1200;
pub const HEIGHT: u32 = 450;

const FONT: &str = "roll-flow-sans";
const FONT_BYTES: &[u8] = include_bytes!("../../assets/DejaVuSans-ASCII.ttf");

/// Line colours (Tableau 10): distinguishable, and none too pale on white.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of a chart's `index`-th line.
pub fn line_colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// One chart: its file name, its title and which metric keys it draws.
pub struct Chart {
    pub file: &'static str,
    pub title: &'static str,
    pub wants: fn(&str) -> bool,
}

fn segments(key: &str) -> Vec<&str> {
    key.split('/').collect()
}

/// The charts `report` draws, in order.
pub const CHARTS: [Chart; 6] = [
    Chart {
        file: "val_success.png",
        title: "validation success",
        wants: |k| matches!(segments(k)[..], [_, _, "success"]),
    },
    Chart {
        file: "score.png",
        title: "rollout score (mean)",
        wants: |k| matches!(segments(k)[..], [_, "score", "mean"]),
    },
    Chart {
        file: "kl.png",
        title: "KL",
        wants: |k| {
            matches!(
                segments(k)[..],
                [_, "ppo_kl" | "kl_loss"] | [_, "kl", "penalty_kl"]
            )
        },
    },
    Chart {
        file: "entropy.png",
        title: "entropy",
        wants: |k| matches!(segments(k)[..], [_, "entropy"]),
    },
    Chart {
        file: "response_length.png",
        title: "response length (tokens per turn)",
        wants: |k| matches!(segments(k)[..], [_, "response_length"]),
    },
    Chart {
        file: "grad_norm.png",
        title: "grad norm",
        wants: |k| matches!(segments(k)[..], [_, "grad_norm"]),
    },
];

/// A chart could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("plot {path}: {message}", path = path.display())]
pub struct PlotError {
    pub path: PathBuf,
    pub message: String,
}

/// Why `report` failed: a run's metrics could not be read, or a chart not written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    History(#[from] super::history::HistoryError),
    #[error(transparent)]
    Plot(#[from] PlotError),
}

/// What [`report`] wrote.
#[derive(Debug, Default)]
pub struct Report {
    /// The charts (none when no run has a plotted metric yet).
    pub written: Vec<PathBuf>,
    /// What was left out of the runs' files, for people: an unfinished last line.
    pub notes: Vec<String>,
}

/// Reads the metrics of every run directory and draws them together into `out_dir`.
pub fn report(run_dirs: &[PathBuf], out_dir: &Path) -> Result<Report, ReportError> {
    let runs = run_dirs
        .iter()
        .map(|dir| RunHistory::read(dir))
        .collect::<Result<Vec<_>, _>>()?;
    let notes = (run_dirs.iter().zip(&runs))
        .filter_map(|(dir, run)| {
            let line = run.torn_line?;
            Some(format!(
                "{}:{line}: an unfinished last line (a run writing it, or killed mid-line), \
                 left out",
                dir.join("metrics.jsonl").display()
            ))
        })
        .collect();
    let written = write_plots(&runs, out_dir)?;
    Ok(Report { written, notes })
}

/// One line of a chart.
pub struct Line {
    pub label: String,
    pub points: Vec<Point>,
}

/// The lines `chart` draws for `runs`: one per run and matching key.
pub fn chart_lines(chart: &Chart, runs: &[RunHistory]) -> Vec<Line> {
    let mut lines = Vec::new();
    for run in runs {
        let keys: Vec<&str> = run
            .keys()
            .into_iter()
            .filter(|k| (chart.wants)(k))
            .collect();
        for key in &keys {
            let label = match (runs.len(), keys.len()) {
                (1, _) => key.to_string(),
                (_, 1) => run.name.clone(),
                _ => format!("{}: {key}", run.name),
            };
            lines.push(Line {
                label,
                points: run.series(key),
            });
        }
    }
    lines
}

/// Draws every chart with data into `out_dir`; returns the files written.
pub fn write_plots(runs: &[RunHistory], out_dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut written = Vec::new();
    for chart in &CHARTS {
        let lines = chart_lines(chart, runs);
        if lines.iter().all(|l| l.points.is_empty()) {
            continue;
        }
        let path = out_dir.join(chart.file);
        let error = |message: String| PlotError {
            path: path.clone(),
            message,
        };
        let png = render_png(chart.title, &lines).map_err(error)?;
        write_atomic(&path, &png).map_err(|e| error(e.to_string()))?;
        written.push(path);
    }
    Ok(written)
}

/// Registers the bundled font under [`FONT`] (once per process).
pub(crate) fn bundled_font() -> &'static str {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // The font is compiled in and known to parse; a failure would only lose text.
        let _ = register_font(FONT, FontStyle::Normal, FONT_BYTES);
    });
    FONT
}

/// The chart as PNG bytes.
pub fn render_png(title: &str, lines: &[Line]) -> Result<Vec<u8>, String> {
    bundled_font();
    let mut rgb = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (left, right) = root.split_horizontally(WIDTH / 2);
        draw_panel(&left, title, "step", lines, |p| p.step)?;
        draw_panel(&right, title, "wall time (s)", lines, |p| p.wall_s)?;
        root.present().map_err(|e| e.to_string())?;
    }
    encode_png(&rgb, WIDTH, HEIGHT)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x_label: &str,
    lines: &[Line],
    x_of: fn(&Point) -> f64,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let points = lines.iter().flat_map(|l| l.points.iter());
    let (x_range, y_range) = ranges(points.map(|p| (x_of(p), p.value)));
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{title} vs {x_label}"), (FONT, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range.clone(), y_range.clone())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(err)?;
    for (i, line) in lines.iter().enumerate() {
        let colour = line_colour(i);
        let xy: Vec<(f64, f64)> = line.points.iter().map(|p| (x_of(p), p.value)).collect();
        chart
            .draw_series(LineSeries::new(xy.clone(), colour.stroke_width(2)))
            .map_err(err)?
            .label(line.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
        chart
            .draw_series(xy.into_iter().map(|p| Circle::new(p, 2, colour.filled())))
            .map_err(err)?;
    }
    let corner = legend_corner(
        lines
            .iter()
            .flat_map(|l| l.points.iter())
            .map(|p| (x_of(p), p.value)),
        &x_range,
        &y_range,
    );
    chart
        .configure_series_labels()
        .position(corner)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// The legend goes in the corner with the fewest points under it (a third of the width,
/// a quarter of the height), upper right on a tie: a rising success curve ends in the
/// upper right, where a fixed legend hid its last evaluations.
fn legend_corner(
    points: impl Iterator<Item = (f64, f64)>,
    x: &std::ops::Range<f64>,
    y: &std::ops::Range<f64>,
) -> SeriesLabelPosition {
    let corners = [
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::LowerLeft, false, false),
    ];
    let (x_span, y_span) = (x.end - x.start, y.end - y.start);
    let mut under = [0usize; 4];
    for (px, py) in points {
        let (fx, fy) = ((px - x.start) / x_span, (py - y.start) / y_span);
        for (count, (_, right, upper)) in under.iter_mut().zip(&corners) {
            let in_x = if *right {
                fx > 2.0 / 3.0
            } else {
                fx < 1.0 / 3.0
            };
            let in_y = if *upper { fy > 0.75 } else { fy < 0.25 };
            *count += usize::from(in_x && in_y);
        }
    }
    let best = (0..4).min_by_key(|&i| (under[i], i)).unwrap_or(0);
    corners[best].0.clone()
}

/// Axis ranges covering every point, padded so lines do not sit on the frame; a flat or
/// single-point series still gets a visible range.
fn ranges(
    points: impl Iterator<Item = (f64, f64)>,
) -> (std::ops::Range<f64>, std::ops::Range<f64>) {
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in points.filter(|(x, y)| x.is_finite() && y.is_finite()) {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if x0 > x1 {
        return (0.0..1.0, 0.0..1.0);
    }
    let pad = |lo: f64, hi: f64| {
        // Within a quarter of f64's range, so the span and the padding stay finite (an
        // infinite axis hung the chart library on values near 1.8e308).
        let limit = f64::MAX / 4.0;
        let (lo, hi) = (lo.clamp(-limit, limit), hi.clamp(-limit, limit));
        let span = if hi > lo { hi - lo } else { lo.abs().max(1.0) };
        (lo - 0.05 * span)..(hi + 0.05 * span)
    };
    (pad(x0, x1), pad(y0, y1))
}

/// RGB pixels, `width × height`, as PNG bytes.
pub(crate) fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer.write_image_data(rgb).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(bytes)
}

#[cfg(test)]
#[path = "plots_tests.rs"]
mod tests;
