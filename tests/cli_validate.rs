//! `roll-flow validate` through the real binary, on the shipped pipelines and on a corpus
//! of malformed ones (tests/pipelines/invalid/): each must exit 1 with the right message,
//! location and advice, and nothing may panic.

use std::path::Path;
mod common;

use common::roll_flow;

/// (file stem, message, line:col, help)
const CASES: &[(&str, &str, &str, Option<&str>)] = &[
    (
        "syntax_missing_comma",
        "expected `,` after this value",
        "4:12",
        Some("separate fields and entries with `,`"),
    ),
    (
        "unknown_node_kind",
        "unknown node kind `GiGPOO`",
        "15:16",
        Some("did you mean `GiGPO`?"),
    ),
    (
        "misspelled_node_field",
        "unknown field `temprature` in `Rollout`",
        "13:61",
        Some("did you mean `temperature`?"),
    ),
    (
        "misspelled_pipeline_field",
        "unknown field `stpes` in `Pipeline`",
        "4:5",
        Some("did you mean `steps`?"),
    ),
    (
        "misspelled_env_set_field",
        "unknown field `grup_size` in `EnvSet`",
        "10:56",
        Some("did you mean `group_size`?"),
    ),
    (
        "unknown_env",
        "unknown env `FrozenLak`",
        "10:24",
        Some("did you mean `FrozenLake`?"),
    ),
    (
        "unknown_enum_value",
        "unknown Norm `MeanStdev`",
        "15:29",
        Some("did you mean `MeanStd`?"),
    ),
    (
        "cycle",
        "cycle in the per-step graph through old_logprob, adv, actor_step",
        "18:41",
        None,
    ),
    (
        "dangling_edge",
        "edge names unknown node `actor_stp`",
        "18:73",
        Some("did you mean `actor_step`?"),
    ),
    (
        "gae_without_values",
        "node `adv` (Gae) needs column `values`, which nothing upstream gives",
        "15:16",
        Some("add a Values node upstream"),
    ),
    (
        "gigpo_on_trajectories",
        "node `adv` (GiGPO) needs column `step_index`, which nothing upstream gives",
        "15:16",
        Some("GiGPO needs step-wise samples; set the rollout's `samples: Step(history: 2)`"),
    ),
    (
        "unknown_model",
        "node `actor_step` uses model `polcy`, which `models` does not declare",
        "16:40",
        Some("did you mean `policy`?"),
    ),
    (
        "unknown_env_set",
        "node `rollout` uses env set `training`, which `envs` does not declare",
        "13:34",
        Some("expected one of `train`"),
    ),
    (
        "duplicate_node",
        "node `adv` is defined twice",
        "16:9",
        Some("give each entry its own name"),
    ),
    (
        "missing_steps",
        "missing field `steps` in `Pipeline`",
        "18:1",
        Some("add `steps: ...`"),
    ),
    (
        "unclosed_bracket",
        "unexpected end of file",
        "18:88",
        Some("a bracket is not closed; open ones: `(`"),
    ),
    (
        "unclosed_comment",
        "unexpected end of file",
        "19:5",
        Some("the file ends inside a `/* ... */` comment: close it with `*/`"),
    ),
    ("wrong_type", "expected a whole number", "4:11", None),
    (
        "edge_into_source",
        "edge into source node `rollout`",
        "18:103",
        Some("`rollout` (Rollout) starts each step from the policy version; remove this edge"),
    ),
    (
        "unreachable_node",
        "node `eval_copy` is not reachable from any source, so it would never run",
        "17:9",
        Some("add an edge that leads to it, e.g. (\"rollout\", \"eval_copy\")"),
    ),
    (
        "zero_groups",
        "env set `train` has 0 groups",
        "10:53",
        Some("set `groups: 1` or more"),
    ),
    (
        "no_source",
        "the graph has no source node",
        "12:5",
        Some("add a `Rollout(...)` node; every step starts there"),
    ),
    (
        "actor_without_advantages",
        "node `actor_step` (ActorStep) needs column `advantages`, which nothing upstream gives",
        "16:23",
        Some("node `adv` gives it; add the edge (\"adv\", \"actor_step\")"),
    ),
    (
        "kl_without_reference",
        "node `actor_step` (ActorStep) needs column `ref_logprob`, which nothing upstream gives",
        "16:23",
        Some("the `kl` loss term needs a reference model; add a RefLogProb node upstream"),
    ),
    (
        "kl_full_vocabulary",
        "node `actor_step` (ActorStep): `kl: (estimator: Full)` is not supported: full-vocabulary KL needs the reference model's whole distribution at every response token, which the `RefLogProb` column does not hold; use `estimator: K3` (the default, low variance) or `K1`",
        "18:23",
        None,
    ),
    (
        "env_frozen_lake_size_1",
        "env set `train`: FrozenLake: invalid `size`: 1 is not in 2..=64",
        "10:41",
        None,
    ),
    (
        "env_sokoban_too_many_boxes",
        "env set `train`: Sokoban: invalid `num_boxes`: 9 boxes do not fit: need 1..=8 and fewer than 15 (inner cells − 1) for a 6×6 room",
        "10:43",
        None,
    ),
    (
        "model_dim_not_divisible_by_heads",
        "model `policy`: Tiny: hidden_size 130 is not divisible by num_attention_heads 4",
        "7:26",
        Some("in `Tiny(..)`, hidden_size is `dim`, num_attention_heads `heads`, num_key_value_heads `kv_heads`, num_hidden_layers `layers` and intermediate_size `ffn_dim`"),
    ),
    (
        "model_half_precision_on_the_cpu",
        "model `policy`: `precision: Bf16` computes in half precision on a GPU, and this pipeline runs on `device: Cpu`",
        "7:73",
        Some("use `precision: F32` (the default) on the CPU, or `device: Cuda(0)` (`Wgpu` for F16) with a build that has it"),
    ),
    (
        "model_negative_grad_clip",
        "model `policy`: optim: `grad_clip` must be > 0, got -1 (a negative norm reverses the update, 0 zeroes it); write `grad_clip: None` to turn clipping off",
        "7:96",
        None,
    ),
    (
        "eval_negative_temperature",
        "node `eval` (Eval): `temperature` must be >= 0 (0 is greedy), got -0.5",
        "16:17",
        None,
    ),
    (
        "wrong_struct_name",
        "expected `Pipeline(...)`, found `Pipline(...)`",
        "2:1",
        Some("a pipeline file starts with `Pipeline(`"),
    ),
    (
        "trailing_characters",
        "unexpected text after the end of the pipeline",
        "20:1",
        Some("a pipeline file holds exactly one `Pipeline(...)`"),
    ),
    (
        "non_utf8",
        "file is not valid UTF-8 (byte 0xFF)",
        "3:13",
        Some("pipeline files are UTF-8 text; re-save the file as UTF-8"),
    ),
];

#[test]
fn each_invalid_pipeline_exits_1_with_message_location_and_advice() {
    for (stem, message, at, help) in CASES {
        let file = format!("tests/pipelines/invalid/{stem}.ron");
        let out = roll_flow(&["validate", &file]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stem}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stem}: {stderr}");
        let block = stderr
            .split("\n\n")
            .find(|b| b.starts_with(&format!("error: {message}\n")))
            .unwrap_or_else(|| panic!("{stem}: no `error: {message}` in\n{stderr}"));
        assert!(
            block.contains(&format!("--> {file}:{at}\n")),
            "{stem}: wrong location in\n{block}"
        );
        if let Some(help) = help {
            assert!(
                block.contains(&format!("= help: {help}")),
                "{stem}: wrong help in\n{block}"
            );
        }
        assert!(
            block
                .lines()
                .any(|l| l.trim_start().starts_with('|') && l.contains('^')),
            "{stem}: no caret in\n{block}"
        );
    }
}

#[test]
fn the_corpus_covers_every_file_in_the_folder() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pipelines/invalid");
    let mut stems: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    stems.sort();
    let mut covered: Vec<String> = CASES
        .iter()
        .map(|c| c.0.to_string())
        .chain(["empty".into(), "several_errors".into()])
        .collect();
    covered.sort();
    assert_eq!(stems, covered);
    assert!(stems.len() >= 20);
}

#[test]
fn an_empty_file_is_named_as_such() {
    let out = roll_flow(&["validate", "tests/pipelines/invalid/empty.ron"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.starts_with(
            "error: the pipeline file is empty\n --> tests/pipelines/invalid/empty.ron\n"
        ),
        "{stderr}"
    );
}

#[test]
fn every_error_of_a_file_is_reported_at_once() {
    let out = roll_flow(&["validate", "tests/pipelines/invalid/several_errors.ron"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    for message in [
        "error: env set `train` has 0 groups",
        "error: node `actor_step` uses model `polcy`, which `models` does not declare",
        "error: edge names unknown node `ghost`",
    ] {
        assert!(stderr.contains(message), "missing {message} in\n{stderr}");
    }
}

#[test]
fn shipped_pipelines_validate_and_a_bad_one_fails_the_batch() {
    let out = roll_flow(&[
        "validate",
        "pipelines/frozen_lake_starpo.ron",
        "pipelines/frozen_lake_gigpo.ron",
        "pipelines/frozen_lake_ppo.ron",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ok: pipelines/frozen_lake_starpo.ron (5 nodes, 3 edges)"),
        "{stdout}"
    );
    let mixed = roll_flow(&[
        "validate",
        "pipelines/frozen_lake_starpo.ron",
        "tests/pipelines/invalid/cycle.ron",
    ]);
    assert_eq!(mixed.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&mixed.stderr).contains("1 of 2 pipeline files are invalid"));
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let out = roll_flow(&["validate", "pipelines/nope.ron"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.starts_with("error: cannot read pipeline file: No such file or directory"),
        "{stderr}"
    );
}

/// `run --resume`, `export` and `play --policy` on a folder no run wrote say so and what to
/// name instead (they said where shipped pipelines are).
#[test]
fn a_folder_that_is_not_a_run_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().to_str().unwrap();
    let hf = dir.path().join("hf");
    for args in [
        vec!["run", "--resume", folder],
        vec!["export", folder, "--hf", hf.to_str().unwrap()],
        vec!["play", "--policy", folder],
    ] {
        let out = roll_flow(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "error: {folder} is not a run directory: it has no pipeline.ron"
            )) && stderr.contains("name the folder a run wrote into"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn set_overrides_are_validated_like_the_file() {
    let out = roll_flow(&[
        "validate",
        "pipelines/frozen_lake_starpo.ron",
        "--set",
        "envs.trian.groups=2",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("error: --set envs.trian.groups=2: `trian` is not in `envs`"),
        "{stderr}"
    );
    assert!(stderr.contains("= help: did you mean `train`?"), "{stderr}");
    let out = roll_flow(&[
        "validate",
        "pipelines/frozen_lake_starpo.ron",
        "--set",
        "nodes.rollout.temperature=-1.0",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error: node `rollout` (Rollout): `temperature` must be >= 0, got -1"),
        "{stderr}"
    );
}
