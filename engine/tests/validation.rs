//! Graph validation with the test catalog: each check, with its message and location.

mod common;

use common::{load_text, loaded, VALID};
use roll_flow_engine::spec::{Diagnostic, Severity};
use roll_flow_engine::validate;

fn diagnostics(text: &str) -> Vec<Diagnostic> {
    validate(&loaded(text)).diagnostics
}

/// (message, line, col) of each diagnostic.
fn summary(text: &str) -> Vec<(String, usize, usize)> {
    diagnostics(text)
        .into_iter()
        .map(|d| {
            let at = d
                .location
                .map(|l| (l.start.line, l.start.col))
                .unwrap_or((0, 0));
            (d.message, at.0, at.1)
        })
        .collect()
}

#[test]
fn a_valid_pipeline_has_no_diagnostics_and_a_graph() {
    let v = validate(&loaded(VALID));
    assert!(v.diagnostics.is_empty(), "{:?}", v.diagnostics);
    let g = v.graph.unwrap();
    assert_eq!(g.order, vec![0, 1, 2, 3]);
    assert_eq!(g.feedback_from, vec![3]);
}

#[test]
fn dangling_edge_points_at_the_name_with_a_suggestion() {
    let text = VALID.replace(r#"("adv", "train")]"#, r#"("adv", "trian")]"#);
    let d = diagnostics(&text);
    let edge = d
        .iter()
        .find(|d| d.message == "edge names unknown node `trian`")
        .unwrap();
    assert_eq!(edge.help.as_deref(), Some("did you mean `train`?"));
    let loc = edge.location.as_ref().unwrap();
    assert_eq!((loc.start.line, loc.start.col, loc.width), (11, 73, 7));
    assert!(d
        .iter()
        .any(|d| d.message.starts_with("node `train` is not reachable")));
}

#[test]
fn cycles_are_refused_with_their_members() {
    let text = VALID.replace(
        r#"("adv", "train")]"#,
        r#"("adv", "train"), ("train", "old_logprob")]"#,
    );
    let s = summary(&text);
    assert_eq!(
        s[0].0,
        "cycle in the per-step graph through old_logprob, adv, train"
    );
    assert_eq!(
        (s[0].1, s[0].2),
        (11, 41),
        "points at the cycle's first edge"
    );
    let self_loop = VALID.replace(
        r#"("adv", "train")]"#,
        r#"("adv", "train"), ("adv", "adv")]"#,
    );
    assert_eq!(
        summary(&self_loop)[0].0,
        "cycle in the per-step graph through adv"
    );
}

#[test]
fn unmet_needs_name_the_column_and_the_giver() {
    let text = VALID.replace(
        r#"("rollout", "old_logprob"), ("old_logprob", "adv")"#,
        r#"("rollout", "old_logprob"), ("rollout", "adv")"#,
    );
    let d = diagnostics(&text);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        d[0].message,
        "node `train` (Train) needs column `old_logprob`, which nothing upstream gives"
    );
    assert_eq!(
        d[0].help.as_deref(),
        Some("node `old_logprob` gives it; add the edge (\"old_logprob\", \"train\")")
    );
    let gae = VALID.replace("GroupAdv()", "Gae()");
    let d = diagnostics(&gae);
    assert_eq!(
        d[0].message,
        "node `adv` (Gae) needs column `values`, which nothing upstream gives"
    );
    assert_eq!(
        d[0].help.as_deref(),
        Some("Gae needs a critic; add a Values node upstream")
    );
}

#[test]
fn undeclared_models_and_envs_are_refused_at_the_field() {
    let text = VALID
        .replace(r#"Train(model: "policy")"#, r#"Train(model: "polcy")"#)
        .replace(r#"Rollout(envs: "train")"#, r#"Rollout(envs: "val")"#);
    let s = summary(&text);
    assert_eq!(
        s[0],
        (
            "node `rollout` uses env set `val`, which `envs` does not declare".to_string(),
            6,
            34
        )
    );
    assert_eq!(
        s[1],
        (
            "node `train` uses model `polcy`, which `models` does not declare".to_string(),
            9,
            31
        )
    );
    assert_eq!(
        diagnostics(&text)[1].help.as_deref(),
        Some("did you mean `policy`?")
    );
}

#[test]
fn model_settings_are_checked_at_the_setting_or_its_nearest_written_parent() {
    // Line 3 is `    models: { "policy": (lr: -1.0) },`: the value -1.0 is at column 30.
    let text = VALID.replace(r#""policy": ()"#, r#""policy": (lr: -1.0)"#);
    assert_eq!(
        summary(&text),
        vec![("model `policy`: `lr` must be >= 0".to_string(), 3, 30)]
    );
    assert_eq!(diagnostics(&text)[0].help.as_deref(), Some("lower it"));
    // `schedule` is not in the file: the entry `(lr: 2.0)` itself is shown (column 25).
    let text = VALID.replace(r#""policy": ()"#, r#""policy": (lr: 2.0)"#);
    assert_eq!(
        summary(&text),
        vec![(
            "model `policy`: `lr` above 1 needs a warmup".to_string(),
            3,
            25
        )]
    );
}

#[test]
fn duplicate_names_are_refused_at_the_second_one() {
    let text = VALID.replace(
        r#""adv": GroupAdv(),"#,
        r#""adv": GroupAdv(), "adv": Gae(),"#,
    );
    let s = summary(&text);
    assert_eq!(s[0], ("node `adv` is defined twice".to_string(), 8, 28));
}

#[test]
fn sources_take_no_input_and_something_must_start_the_step() {
    let into_source = VALID.replace(
        r#"("adv", "train")]"#,
        r#"("adv", "train"), ("train", "rollout")]"#,
    );
    let s = summary(&into_source);
    assert!(
        s.iter().any(|d| d.0 == "edge into source node `rollout`"),
        "{s:?}"
    );
    let no_source = VALID
        .replace(r#""rollout": Rollout(envs: "train"),"#, "")
        .replace(r#"("rollout", "old_logprob"), "#, "");
    assert_eq!(summary(&no_source)[0].0, "the graph has no source node");
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = VALID
        .replace("steps: 2", "steps: 0")
        .replace(r#"Train(model: "policy")"#, r#"Train(model: "nope")"#)
        .replace(r#"("adv", "train")]"#, r#"("adv", "train"), ("x", "y")]"#);
    let errors: Vec<String> = diagnostics(&text)
        .into_iter()
        .filter(Diagnostic::is_error)
        .map(|d| d.message)
        .collect();
    assert_eq!(errors.len(), 4, "{errors:?}");
}

#[test]
fn group_normalisation_over_groups_of_one_is_a_warning() {
    let text = VALID.replace("group_size: 4", "group_size: 1");
    let v = validate(&loaded(&text));
    assert!(v.graph.is_some(), "a warning does not block the run");
    let w: Vec<&Diagnostic> = v.warnings().collect();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].severity, Severity::Warning);
    assert!(w[0]
        .message
        .contains("env set `train` has group_size 1: every advantage will be 0"));
}

#[test]
fn rendered_diagnostics_show_file_line_and_caret() {
    let text = VALID.replace(r#"("adv", "train")]"#, r#"("adv", "trian")]"#);
    let rendered = diagnostics(&text)
        .iter()
        .find(|d| d.message.contains("trian"))
        .unwrap()
        .to_string();
    let expected = "error: edge names unknown node `trian`\n  --> test.ron:11:73\n   |\n11 |     edges: [(\"rollout\", \"old_logprob\"), (\"old_logprob\", \"adv\"), (\"adv\", \"trian\")],\n   |                                                                         ^^^^^^^\n   = help: did you mean `train`?\n";
    assert_eq!(rendered, expected);
}

#[test]
fn syntax_and_serde_errors_come_with_positions() {
    let first = |t: &str| load_text(t).expect_err("should fail").remove(0);
    let d = first(&VALID.replace("GroupAdv()", "GroupAdvv()"));
    assert_eq!(d.message, "unknown node kind `GroupAdvv`");
    assert_eq!(d.help.as_deref(), Some("did you mean `GroupAdv`?"));
    assert_eq!(d.location.unwrap().start.line, 8);
    let d = first(&VALID.replace("group_size: 4", "grup_size: 4"));
    assert_eq!(d.message, "unknown field `grup_size` in `EnvSet`");
    assert_eq!(d.help.as_deref(), Some("did you mean `group_size`?"));
    let d = first(&VALID.replace("steps: 2,", ""));
    assert_eq!(d.message, "missing field `steps` in `Pipeline`");
    let d = first("");
    assert_eq!(d.message, "the pipeline file is empty");
    let d = first(&VALID[..VALID.len() - 3]);
    assert_eq!(d.message, "unexpected end of file", "{d}");
}

/// `tf32:` is off unless the file turns it on (PyTorch's default), and `--set tf32=true`
/// turns it on; a value that is not a boolean is refused at its place.
#[test]
fn tf32_is_off_unless_the_file_allows_it() {
    assert!(!loaded(VALID).pipeline.tf32);
    let on = VALID.replace("steps: 2,", "steps: 2, tf32: true,");
    assert!(loaded(&on).pipeline.tf32);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("valid.ron");
    std::fs::write(&path, VALID).unwrap();
    let set = roll_flow_engine::spec::load::<common::TestCatalog>(&path, &["tf32=true".into()]);
    assert!(set.unwrap().pipeline.tf32);
    let d = load_text(&VALID.replace("steps: 2,", "steps: 2, tf32: 1,"))
        .expect_err("a number is not a boolean")
        .remove(0);
    let at = d.location.expect("a location").start;
    assert_eq!(d.message, "expected `true` or `false`");
    assert_eq!((at.line, at.col), (2, 35));
}

/// `--set` overrides: a file that is not RON keeps its own error and place (the overrides
/// have nowhere to go in it); a value an override writes that does not parse is named as
/// that override's, since the line shown is the edited one.
#[test]
fn override_errors_name_the_override_and_file_errors_keep_their_place() {
    let path = std::path::Path::new("p.ron");
    let load = |text: &str, overrides: &[&str]| {
        let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let Err(errors) =
            roll_flow_engine::spec::load_text::<common::TestCatalog>(path, text, &overrides)
        else {
            panic!("{text} with {overrides:?} loaded");
        };
        assert_eq!(errors.len(), 1, "{errors:?}");
        let d = errors.into_iter().next().unwrap();
        let at = d.location.map(|l| (l.start.line, l.start.col));
        (d.message, at, d.help.unwrap_or_default())
    };
    let broken = VALID.replacen("steps: 2,", "steps: 2", 1);
    assert_eq!(
        load(&broken, &["steps=3"]),
        load(&broken, &[]),
        "the file's own error, with or without an override"
    );
    assert_eq!(load(&broken, &[]).1, Some((2, 27)));

    let (message, at, help) = load(VALID, &["steps=3", "envs.train.groups=abc"]);
    assert_eq!(
        message,
        "--set envs.train.groups=abc: Invalid digit 'a' for base 10 integers"
    );
    assert_eq!(at, Some((4, 44)));
    assert!(
        help.starts_with("the line shown is the file as this --set edits it"),
        "{help}"
    );
}

/// A whole number out of its field's range (a negative count) names the field and value,
/// which ron's "Integer is out of bounds" does not.
#[test]
fn an_out_of_range_number_names_the_field() {
    let negative = VALID.replace("group_size: 4", "group_size: -1");
    let Err(errors) = load_text(&negative) else {
        panic!("a negative group_size loaded");
    };
    assert_eq!(
        errors[0].message,
        "`group_size: -1` is out of range for this field's whole-number type"
    );
    assert!(errors[0]
        .help
        .as_deref()
        .unwrap_or_default()
        .contains("check the sign"));
}
