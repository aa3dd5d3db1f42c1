use std::collections::HashSet;

use super::*;

/// A run directory whose `metrics.jsonl` holds `steps` records with a few of the real keys.
fn synthetic_run(root: &Path, name: &str, steps: u64, slope: f64) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = String::new();
    for step in 0..steps {
        let s = step as f64;
        let mut record = serde_json::json!({
            "step": step,
            "wall_s": 2.0 * s + 1.0,
            "rollout/score/mean": slope * s,
            "actor_step/grad_norm": 1.0 / (1.0 + s),
            "actor_step/ppo_kl": 0.01 * s,
            "old_logprob/entropy": 1.0 - 0.05 * s,
        });
        if step % 2 == 0 {
            record["eval/val/success"] = (slope * s / 10.0).into();
        }
        text.push_str(&record.to_string());
        text.push('\n');
    }
    std::fs::write(dir.join("metrics.jsonl"), text).unwrap();
    dir
}

fn decode(path: &Path) -> (png::OutputInfo, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    (info, buf)
}

fn colours(rgb: &[u8]) -> HashSet<[u8; 3]> {
    rgb.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect()
}

#[test]
fn charts_pick_keys_by_metric_not_node_name() {
    let wants = |file: &str, key: &str| {
        let chart = CHARTS.iter().find(|c| c.file == file).unwrap();
        (chart.wants)(key)
    };
    assert!(wants("val_success.png", "eval/val/success"));
    assert!(wants("val_success.png", "my_eval/hard_levels/success"));
    assert!(!wants("val_success.png", "rollout/success"));
    assert!(wants("score.png", "rollout/score/mean"));
    assert!(!wants("score.png", "eval/val/score/mean"));
    assert!(wants("kl.png", "actor_step/ppo_kl"));
    assert!(wants("kl.png", "adv/kl/penalty_kl"));
    assert!(wants("entropy.png", "old_logprob/entropy"));
    assert!(wants("response_length.png", "rollout/response_length"));
    assert!(!wants("response_length.png", "eval/val/response_length"));
    assert!(wants("grad_norm.png", "critic_step/grad_norm"));
}

#[test]
fn two_runs_share_each_chart_and_missing_metrics_are_skipped() {
    let root = tempfile::tempdir().unwrap();
    let runs = [
        synthetic_run(root.path(), "starpo", 6, 1.0),
        synthetic_run(root.path(), "gigpo", 4, 2.0),
    ]
    .map(|dir| RunHistory::read(&dir).unwrap());
    let score = chart_lines(&CHARTS[1], &runs);
    let labels: Vec<&str> = score.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(
        labels,
        ["starpo", "gigpo"],
        "one line per run, named after its dir"
    );

    let out = root.path().join("report");
    let written = write_plots(&runs, &out).unwrap();
    let names: Vec<&str> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "val_success.png",
            "score.png",
            "kl.png",
            "entropy.png",
            "grad_norm.png"
        ],
        "no response_length in these runs, so no chart for it"
    );
    for path in &written {
        let (info, rgb) = decode(path);
        assert_eq!((info.width, info.height), (WIDTH, HEIGHT), "{path:?}");
        assert_eq!(info.color_type, png::ColorType::Rgb);
        let seen = colours(&rgb);
        assert!(seen.contains(&[255, 255, 255]), "white background");
        assert!(seen.contains(&[0, 0, 0]), "{path:?}: black axes and text");
        for run in 0..2 {
            let RGBColor(r, g, b) = line_colour(run);
            assert!(seen.contains(&[r, g, b]), "{path:?}: line of run {run}");
        }
    }
    let names_in_dir: HashSet<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names_in_dir.len(), written.len(), "no temp files left");
}

/// Values near f64's limits (a damaged or hand-edited metrics.jsonl) draw: the axis span
/// was infinite and the chart library never returned.
#[test]
fn values_near_the_float_limits_still_draw() {
    let point = |step: f64, value: f64| Point {
        step,
        wall_s: step,
        value,
    };
    let lines = [Line {
        label: "run".into(),
        points: vec![point(1.0, 1.7e308), point(2.0, -1.7e308), point(3.0, 0.5)],
    }];
    let png = render_png("huge", &lines).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let (x, y) = ranges([(1.0, 1.7e308), (2.0, -1.7e308)].into_iter());
    assert!((y.end - y.start).is_finite() && (x.end - x.start).is_finite());
}

#[test]
fn a_single_point_still_draws() {
    let lines = [Line {
        label: "run".into(),
        points: vec![Point {
            step: 0.0,
            wall_s: 0.0,
            value: 0.25,
        }],
    }];
    let png = render_png("one point", &lines).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.png");
    std::fs::write(&path, png).unwrap();
    let (_, rgb) = decode(&path);
    let RGBColor(r, g, b) = line_colour(0);
    assert!(colours(&rgb).contains(&[r, g, b]));
}

#[test]
fn the_legend_avoids_the_corner_where_the_curve_ends() {
    let (x, y) = (0.0..100.0, 0.0..1.0);
    let rising = (0..100).map(|i| (i as f64, i as f64 / 100.0));
    assert_eq!(
        legend_corner(rising, &x, &y),
        SeriesLabelPosition::LowerRight
    );
    let falling = (0..100).map(|i| (i as f64, 1.0 - i as f64 / 100.0));
    assert_eq!(
        legend_corner(falling, &x, &y),
        SeriesLabelPosition::UpperRight
    );
    // A flat curve in the upper quarter with a late rise: the lower corners are empty,
    // and the right one comes first.
    let high = (0..100).map(|i| (i as f64, 0.8 + 0.001 * i as f64));
    assert_eq!(legend_corner(high, &x, &y), SeriesLabelPosition::LowerRight);
    // No points: every corner ties, and the legend stays upper right.
    assert_eq!(
        legend_corner(std::iter::empty(), &x, &y),
        SeriesLabelPosition::UpperRight
    );
}
