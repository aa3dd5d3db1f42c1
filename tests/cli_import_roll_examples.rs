//! Imported ROLL configs that run, and the ROLL examples shipped as pipelines: the imported
//! FrozenLake config runs its first steps on a Tiny model, and
//! pipelines/qwen2.5-0.5b_sokoban.ron is, below its header, exactly what `import-roll` writes
//! from ROLL's agentic_val_sokoban.yaml (tests/fixtures/roll/, with its Hydra defaults file);
//! it validates, carries ROLL's settings, and its first step runs on the CPU with a Tiny model.

mod common;
mod roll_examples;

use std::path::Path;

use common::roll_flow;
use roll_flow::engine::spec;
use roll_flow::envs::config::EnvConfig;
use roll_flow::envs::sokoban::Vocabulary;
use roll_flow::operators::catalog::RollFlow;

const FROZEN_LAKE_GRPO: &str = "tests/fixtures/roll/frozen_lake_grpo.yaml";
const SOKOBAN_YAML: &str = "tests/fixtures/roll/qwen2.5-0.5B-agentic/agentic_val_sokoban.yaml";
const SOKOBAN_RON: &str = "pipelines/qwen2.5-0.5b_sokoban.ron";

/// `import-roll CONFIG -o OUT` (CONFIG relative to the repository root); its report.
fn import_to(config: &str, out: &Path) -> String {
    let result = roll_flow(&["import-roll", config, "-o", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&result.stderr).to_string();
    assert!(result.status.success(), "import failed: {stderr}");
    stderr
}

/// `roll-flow run PIPELINE --steps N` with `sets` as `--set` overrides; the steps recorded.
fn run_steps(pipeline: &Path, run_dir: &Path, steps: &str, sets: &[&str]) -> Vec<u64> {
    let mut args = vec![
        "run",
        pipeline.to_str().unwrap(),
        "--steps",
        steps,
        "--out",
        run_dir.to_str().unwrap(),
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    let result = roll_flow(&args);
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    common::metrics(run_dir)
        .iter()
        .filter_map(|r| r.get("step").and_then(|s| s.as_u64()))
        .collect()
}

#[test]
fn imported_frozen_lake_runs_its_first_steps_on_a_tiny_model() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = dir.path().join("fl.ron");
    import_to(FROZEN_LAKE_GRPO, &pipeline);
    let steps = run_steps(
        &pipeline,
        &dir.path().join("run"),
        "2",
        &[
            "device=Cpu",
            "models.policy.arch=Tiny(layers: 1, dim: 32, heads: 2)",
            "models.policy.tokenizer=Builtin",
            "models.policy.optim.warmup_steps=1",
            "envs.train_FrozenLake.groups=2",
            "envs.train_FrozenLake.group_size=2",
            "envs.val_FrozenLake.groups=2",
            "nodes.rollout.max_new_tokens=8",
            "nodes.rollout.sequence_length=512",
            "nodes.eval.max_new_tokens=8",
        ],
    );
    assert!(
        steps.contains(&0) && steps.contains(&1),
        "steps recorded: {steps:?}"
    );
}

#[test]
fn shipped_sokoban_is_the_import_of_rolls_example() {
    let dir = tempfile::tempdir().unwrap();
    let imported = dir.path().join("sokoban.ron");
    let report = import_to(SOKOBAN_YAML, &imported);
    let imported = std::fs::read_to_string(&imported).unwrap();
    let shipped = std::fs::read_to_string(SOKOBAN_RON).unwrap();
    let header = shipped.strip_suffix(imported.as_str()).unwrap_or_else(|| {
        panic!("{SOKOBAN_RON} is not header + import-roll's output; re-import {SOKOBAN_YAML}")
    });
    assert!(
        header.lines().all(|l| l.starts_with("// ")) && header.contains("Reaches: not run yet"),
        "{header}"
    );
    for notice in [
        "ignored on this engine: custom_envs.FrozenLakeThink: no env manager plays this tag",
        "ignored on this engine: reward_pretrain",
        "not supported: custom_envs.*.agent_template (4 keys)",
    ] {
        assert!(report.contains(notice), "missing {notice} in\n{report}");
    }
    let validate = roll_flow(&["validate", SOKOBAN_RON]);
    assert!(
        validate.status.success(),
        "{}",
        String::from_utf8_lossy(&validate.stderr)
    );

    let p = spec::load::<RollFlow>(Path::new(SOKOBAN_RON), &[])
        .unwrap_or_else(|d| panic!("{d:?}"))
        .pipeline;
    assert_eq!((p.seed, p.steps), (42, 1024));
    roll_examples::assert_rolls_example_training(&p);
    let names: Vec<&str> = p.envs.names().collect();
    assert_eq!(
        names,
        [
            "train_SimpleSokoban",
            "val_SimpleSokoban",
            "val_LargerSokoban",
            "val_SokobanDifferentGridVocab",
            "val_FrozenLake"
        ]
    );
    let train = p.envs.get("train_SimpleSokoban").unwrap();
    assert_eq!((train.groups, train.group_size), (128, 8));
    let sokoban = |name: &str| match &p.envs.get(name).unwrap().env {
        EnvConfig::Sokoban(room) => (
            room.dim_room,
            room.num_boxes,
            room.vocabulary,
            room.max_actions,
            room.format_penalty,
        ),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        sokoban("train_SimpleSokoban"),
        ((6, 6), 1, Vocabulary::Standard, 10, -0.15)
    );
    assert_eq!(
        sokoban("val_LargerSokoban"),
        ((10, 10), 2, Vocabulary::Standard, 10, -0.15)
    );
    assert_eq!(
        sokoban("val_SokobanDifferentGridVocab"),
        ((6, 6), 1, Vocabulary::Letters, 10, -0.15)
    );
    let val_lake = p.envs.get("val_FrozenLake").unwrap();
    let EnvConfig::FrozenLake(lake) = &val_lake.env else {
        panic!("{:?}", val_lake.env)
    };
    assert_eq!(
        (lake.slippery, lake.max_actions, lake.format_penalty),
        (false, 10, -0.01),
        "the env_config's penalty, not the val manager's (none)"
    );
    assert_eq!((val_lake.groups, val_lake.group_size), (256, 1));
}

#[test]
fn shipped_sokoban_first_step_runs_on_a_tiny_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut sets = vec![
        "device=Cpu",
        "models.policy.arch=Tiny(layers: 1, dim: 32, heads: 2)",
        "models.policy.tokenizer=Builtin",
        "models.policy.optim.warmup_steps=1",
        "envs.train_SimpleSokoban.groups=2",
        "envs.train_SimpleSokoban.group_size=2",
        "nodes.rollout.max_new_tokens=8",
        "nodes.rollout.sequence_length=512",
        "nodes.eval.max_new_tokens=8",
    ];
    let val_sets = [
        "envs.val_SimpleSokoban.groups=1",
        "envs.val_LargerSokoban.groups=1",
        "envs.val_SokobanDifferentGridVocab.groups=1",
        "envs.val_FrozenLake.groups=1",
    ];
    sets.extend(val_sets);
    let steps = run_steps(Path::new(SOKOBAN_RON), &dir.path().join("run"), "1", &sets);
    assert!(steps.contains(&0), "steps recorded: {steps:?}");
}
