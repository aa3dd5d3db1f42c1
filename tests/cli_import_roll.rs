//! `roll-flow import-roll`: ROLL agentic configs written in ROLL's format (here and in
//! tests/fixtures/roll/) import to the expected pipelines (compared field by field after
//! loading them as `roll-flow` does), `validate` accepts and `graph` draws every imported
//! file, and unknown keys are reported by path. tests/cli_import_roll_examples.rs runs
//! imported files and checks the shipped ROLL examples.

mod common;
mod roll_examples;

use std::path::{Path, PathBuf};

use common::roll_flow;
use roll_flow::algo::gigpo::{EpisodeStats, GiGpo, GigpoNorm};
use roll_flow::algo::Shaping;
use roll_flow::engine::dialect::Pipeline;
use roll_flow::engine::spec;
use roll_flow::envs::config::EnvConfig;
use roll_flow::model::spec::{ArchSpec, LrSchedule, OptimSpec};
use roll_flow::operators::catalog::RollFlow;
use roll_flow::operators::play_settings::SampleMode;
use roll_flow::operators::registry::Node;

/// ROLL's agent_val_frozen_lake.yaml, trimmed to the keys that matter, in ROLL's format.
const FROZEN_LAKE_GRPO: &str = include_str!("fixtures/roll/frozen_lake_grpo.yaml");

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `import-roll CONFIG -o OUT` with OUT the config's path as `.ron`: the result and OUT.
fn run_import(config: &Path) -> (std::process::Output, PathBuf) {
    let out = config.with_extension("ron");
    let result = roll_flow(&[
        "import-roll",
        config.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    (result, out)
}

/// Runs `import-roll CONFIG -o OUT`, checks `validate` and `graph` accept the output, and
/// loads it as the binary does.
fn import(config: &Path) -> (Pipeline<RollFlow>, String) {
    let (result, out) = run_import(config);
    let stderr = String::from_utf8_lossy(&result.stderr).to_string();
    assert!(result.status.success(), "import failed: {stderr}");
    let validate = roll_flow(&["validate", out.to_str().unwrap()]);
    assert!(
        validate.status.success(),
        "{}",
        String::from_utf8_lossy(&validate.stderr)
    );
    let graph = roll_flow(&["graph", out.to_str().unwrap()]);
    assert!(graph.status.success() && String::from_utf8_lossy(&graph.stdout).contains("digraph"));
    let loaded = spec::load::<RollFlow>(&out, &[]).unwrap_or_else(|d| panic!("{d:?}"));
    (loaded.pipeline, stderr)
}

fn node<'p>(p: &'p Pipeline<RollFlow>, name: &str) -> &'p Node {
    p.nodes
        .get(name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

#[test]
fn frozen_lake_grpo_imports_with_roll_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (p, report) = import(&write(dir.path(), "fl.yaml", FROZEN_LAKE_GRPO));
    assert_eq!(
        (p.name.as_str(), p.seed, p.steps),
        ("frozen_lake_grpo", 42, 1024)
    );
    roll_examples::assert_rolls_example_training(&p);
    let OptimSpec::AdamW { weight_decay, .. } = p.models.get("policy").unwrap().optim;
    assert_eq!(weight_decay, 0.0);
    let train = p.envs.get("train_FrozenLake").unwrap();
    assert_eq!((train.groups, train.group_size), (128, 8));
    let EnvConfig::FrozenLake(lake) = &train.env else {
        panic!("{:?}", train.env)
    };
    assert_eq!(
        (lake.slippery, lake.max_actions, lake.format_penalty),
        (false, 10, -0.15)
    );
    let val = p.envs.get("val_FrozenLake").unwrap();
    assert_eq!(
        (val.groups, val.group_size, val.seed),
        (256, 1, Some(10000))
    );
    let Node::Rollout(rollout) = node(&p, "rollout") else {
        panic!()
    };
    assert_eq!(rollout.samples, SampleMode::Trajectory);
    let Node::ActorStep(actor) = node(&p, "actor_step") else {
        panic!()
    };
    assert_eq!(actor.entropy, 0.0);
    // 2 × 64 × 8 devices = 1024 = the whole batch: one optimizer step, micro-batches of 2.
    assert_eq!((actor.mini_batch, actor.micro_batch), (None, Some(2)));
    let Node::Eval(eval) = node(&p, "eval") else {
        panic!()
    };
    assert_eq!(
        (eval.every, eval.temperature, eval.max_new_tokens),
        (10, 0.99, 64)
    );
    let Node::Checkpoint(checkpoint) = node(&p, "checkpoint") else {
        panic!()
    };
    assert_eq!(checkpoint.every, 10000);
    assert!(
        report.contains("ignored on this engine: actor_train.strategy_args"),
        "{report}"
    );
    assert!(
        !report.contains("env_instruction"),
        "it is mapped: {report}"
    );
    // The env_config's env_instruction replaces the env's, before the first turn.
    let (system, first) =
        roll_examples::rendered_turn(&p, "FrozenLake's own rules", 10, 0, "_P_G", Vec::new());
    assert_eq!(system.as_deref(), Some("You play FrozenLake."));
    assert_eq!(first, "Reach the goal\nTurn 1, 10 left:\n_P_G");
    let text = std::fs::read_to_string(dir.path().join("fl.ron")).unwrap();
    assert!(
        text.contains("// pretrain; actor_train.model_args.dtype, disable_gradient_checkpointing; actor_train.training_args"),
        "section comments name the ROLL keys"
    );
}

#[test]
fn sokoban_ppo_has_a_critic_gae_and_critic_warmup() {
    let dir = tempfile::tempdir().unwrap();
    let config = FROZEN_LAKE_GRPO
        .replace("adv_estimator: \"grpo\"", "adv_estimator: gae\ncritic_warmup: 5\nlambd: 0.9\ngamma: 0.99\nvalue_clip: 0.5\nreward_pretrain: Qwen/critic")
        .replace("tags: [FrozenLake]", "tags: [SimpleSokoban]")
        .replace("  FrozenLake:\n    env_type: frozen_lake", "  SimpleSokoban:\n    env_type: sokoban")
        .replace("is_slippery: false", "dim_x: 6, dim_y: 6, num_boxes: 1")
        + "critic:\n  training_args: {learning_rate: 1.0e-5, per_device_train_batch_size: 2, gradient_accumulation_steps: 64, lr_scheduler_type: constant}\n  device_mapping: list(range(0,8))\n";
    let (p, _) = import(&write(dir.path(), "sokoban.yaml", &config));
    let critic = p.models.get("critic").unwrap();
    assert_eq!(critic.arch, ArchSpec::HfDir("Qwen/critic".into()));
    let OptimSpec::AdamW { lr, schedule, .. } = critic.optim;
    assert_eq!((lr, schedule), (1e-5, LrSchedule::Constant));
    let EnvConfig::Sokoban(room) = &p.envs.get("train_SimpleSokoban").unwrap().env else {
        panic!()
    };
    assert_eq!(
        (room.dim_room, room.num_boxes, room.max_actions),
        ((6, 6), 1, 10)
    );
    let Node::Gae(gae) = node(&p, "adv") else {
        panic!()
    };
    assert_eq!((gae.gamma, gae.lambda), (0.99, 0.9));
    assert!(gae.shaping.whiten);
    let Node::Values(values) = node(&p, "values") else {
        panic!()
    };
    assert_eq!(values.model, "critic");
    let Node::CriticStep(step) = node(&p, "critic_step") else {
        panic!()
    };
    assert_eq!((step.loss.clip, step.ppo_epochs), (Some(0.5), 1));
    let Node::ActorStep(actor) = node(&p, "actor_step") else {
        panic!()
    };
    assert_eq!(actor.critic_warmup, 5);
    assert!(p.edges.contains(&("values".into(), "adv".into())));
    assert!(p.edges.contains(&("adv".into(), "critic_step".into())));
}

#[test]
fn gigpo_step_wise_config_gets_step_samples() {
    let dir = tempfile::tempdir().unwrap();
    let config = FROZEN_LAKE_GRPO
        .replace("adv_estimator: \"grpo\"", "adv_estimator: gigpo\nstep_reward_weight: 0.5\nstep_reward_gamma: 0.9\nepisode_reward_weight: 1.0\nbatch_adjust_mode: copy")
        .replace("method: mean_std", "method: mean")
        .replace("traj_env_manager.TrajEnvManager", "step_env_manager.StepEnvManager\n    history_length: 3")
        .replace("\"Turn {turn_idx}, {actions_left} left:\\n{observation}\"", "\"{current_observation}\"");
    let (p, report) = import(&write(dir.path(), "gigpo.yaml", &config));
    let Node::Rollout(rollout) = node(&p, "rollout") else {
        panic!()
    };
    // ROLL shows history_length − 1 earlier turns (`history[-3:-1]`).
    assert_eq!(rollout.samples, SampleMode::Step { history: 2 });
    let Node::GiGpo(gigpo) = node(&p, "adv") else {
        panic!()
    };
    let expected = GiGpo {
        step_gamma: 0.9,
        step_weight: 0.5,
        norm: GigpoNorm::Mean,
        episode_stats: EpisodeStats::Trajectories,
        shaping: Shaping {
            whiten: true,
            advantage_clip: Some(0.2),
            ..Shaping::default()
        },
        ..GiGpo::default()
    };
    assert_eq!(*gigpo, expected);
    assert!(
        report.contains("ignored on this engine: batch_adjust_mode"),
        "{report}"
    );
}

#[test]
fn two_tags_with_a_partition_become_one_env_set_each() {
    let dir = tempfile::tempdir().unwrap();
    let config = FROZEN_LAKE_GRPO.replace(
        "val_env_manager: {num_env_groups: 256, group_size: 1, tags: [FrozenLake], num_groups_partition: [256]}",
        "val_env_manager: {num_env_groups: 384, group_size: 1, tags: [FrozenLake, LargerSokoban], num_groups_partition: [128, 256]}",
    ) + "  LargerSokoban:\n    env_type: sokoban\n    max_tokens_per_step: 64\n    env_config: {dim_x: 8, dim_y: 8, num_boxes: 2, search_depth: 10, max_steps: 10}\n";
    let (p, _) = import(&write(dir.path(), "tags.yaml", &config));
    let names: Vec<&str> = p.envs.names().collect();
    assert_eq!(
        names,
        ["train_FrozenLake", "val_FrozenLake", "val_LargerSokoban"]
    );
    assert_eq!(p.envs.get("val_FrozenLake").unwrap().groups, 128);
    let larger = p.envs.get("val_LargerSokoban").unwrap();
    let EnvConfig::Sokoban(room) = &larger.env else {
        panic!()
    };
    assert_eq!(
        (
            larger.groups,
            room.dim_room,
            room.num_boxes,
            room.search_depth
        ),
        (256, (8, 8), 2, 10)
    );
    let Node::Eval(eval) = node(&p, "eval") else {
        panic!()
    };
    assert_eq!(eval.envs.0, ["val_FrozenLake", "val_LargerSokoban"]);
}

#[test]
fn defaults_list_and_interpolations_resolve() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "config/traj_envs.yaml",
        "max_tokens_per_step: 128\nmax_actions_per_traj: 7\nenv_manager_cls: roll.pipeline.agentic.env_manager.traj_env_manager.TrajEnvManager\n\
         custom_env:\n  FrozenLake:\n    env_type: frozen_lake\n    max_tokens_per_step: ${max_tokens_per_step}\n    env_manager_cls: ${env_manager_cls}\n\
         \x20   env_config: {max_steps: \"${max_actions_per_traj}\", is_slippery: true}\n  WebShopEnv:\n    env_type: webshop\n",
    );
    write(
        dir.path(),
        "config/deepspeed_zero2.yaml",
        "deepspeed_zero2:\n  zero_optimization: {stage: 2}\n",
    );
    let custom_envs = FROZEN_LAKE_GRPO.find("custom_envs:").unwrap();
    let config = format!(
        "defaults:\n  - ../config/traj_envs@_here_\n  - ../config/deepspeed_zero2@_here_\n{}max_tokens_per_step: 32\nexp_name: ${{pretrain_name}}_run\npretrain_name: lake\ncustom_envs:\n  FrozenLake: ${{custom_env.FrozenLake}}\n",
        &FROZEN_LAKE_GRPO[..custom_envs].replace("exp_name: frozen_lake_grpo\n", "")
    );
    let (p, report) = import(&write(dir.path(), "exp/interp.yaml", &config));
    assert_eq!(p.name, "lake_run");
    let EnvConfig::FrozenLake(lake) = &p.envs.get("train_FrozenLake").unwrap().env else {
        panic!()
    };
    assert_eq!((lake.max_actions, lake.slippery), (7, true));
    let Node::Rollout(rollout) = node(&p, "rollout") else {
        panic!()
    };
    assert_eq!(
        rollout.max_new_tokens, 32,
        "the file's max_tokens_per_step overrides the default's"
    );
    assert!(
        report.contains("`deepspeed_zero2.zero_optimization`: set only by the defaults file"),
        "{report}"
    );
    assert!(report.contains("`custom_env.WebShopEnv`"), "{report}");
}

#[test]
fn unknown_keys_are_reported_by_path_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let config = FROZEN_LAKE_GRPO
        .replace("    learning_rate: 1.0e-6", "    learning_rat: 1.0e-6")
        .replace(
            "whiten_advantages: true",
            "whiten_advantages: true\nmystery_knob: 3",
        )
        + "    env_config_extra: 1\n";
    let path = write(dir.path(), "unknown.yaml", &config);
    let out = dir.path().join("unknown.ron");
    let result = roll_flow(&[
        "import-roll",
        path.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success());
    assert!(stderr.contains("unknown key `actor_train.training_args.learning_rat` (did you mean `actor_train.training_args.learning_rate`?)"), "{stderr}");
    assert!(stderr.contains("unknown key `mystery_knob`"), "{stderr}");
    assert!(
        stderr.contains("unknown key `custom_envs.FrozenLake.env_config_extra`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("unknown.yaml") && stderr.contains("help:"),
        "{stderr}"
    );
    assert!(!out.exists());
    let bad = write(dir.path(), "bad.yaml", "max_steps: [1, 2\n");
    let stderr =
        String::from_utf8_lossy(&roll_flow(&["import-roll", bad.to_str().unwrap()]).stderr)
            .to_string();
    assert!(
        stderr.contains("bad.yaml:2:") && stderr.contains("YAML syntax error"),
        "{stderr}"
    );
}

#[test]
fn without_actor_infer_generating_args_each_env_manager_brings_its_own() {
    // ROLL's agent_val_frozen_lake.yaml of late 2025 sets sampling per env manager.
    let text = FROZEN_LAKE_GRPO
        .replace(
            "actor_infer:\n  generating_args: {max_new_tokens: 128, top_p: 0.99, top_k: 100, num_beams: 1, temperature: 0.99}\n",
            "",
        )
        .replace(
            "train_env_manager: {",
            "train_env_manager: {generating_args: {max_new_tokens: 128, top_p: 0.99, top_k: 100, temperature: 0.99}, ",
        )
        .replace(
            "val_env_manager: {",
            "val_env_manager: {generating_args: {max_new_tokens: 128, top_p: 0.99, top_k: 100, temperature: 0.2}, ",
        );
    assert!(
        !text.contains("num_beams"),
        "the actor_infer line was removed"
    );
    let dir = tempfile::tempdir().unwrap();
    let (p, _) = import(&write(dir.path(), "frozen_lake.yaml", &text));
    let Node::Rollout(rollout) = node(&p, "rollout") else {
        panic!()
    };
    assert_eq!(
        (rollout.temperature, rollout.top_p, rollout.top_k),
        (0.99, 0.99, Some(100))
    );
    let Node::Eval(eval) = node(&p, "eval") else {
        panic!()
    };
    assert_eq!(eval.temperature, 0.2);
}

/// A config whose values make a pipeline `run` would refuse (ROLL's `top_p` of 2) is
/// imported, written, and reported with the validator's error and a pointer to the ROLL
/// keys, exiting 1 (it exited 0 and left the error to `run`).
#[test]
fn an_import_that_does_not_validate_exits_with_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "fl.yaml",
        &FROZEN_LAKE_GRPO.replace("top_p: 0.99", "top_p: 2"),
    );
    let (result, out) = run_import(&config);
    assert_eq!(result.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        stderr.contains("`top_p` must be in (0, 1], got 2")
            && stderr.contains("is not valid; the comment above each entry names the ROLL keys"),
        "{stderr}"
    );
    assert!(
        out.is_file(),
        "the pipeline is written, as the error's location names it"
    );
}
