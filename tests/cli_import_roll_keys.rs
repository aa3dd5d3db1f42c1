//! `roll-flow import-roll`'s three classes of keys on configs in ROLL's format
//! (tests/fixtures/roll/agentic_demo/): keys ROLL reads that roll-flow does not use are
//! listed with why in the report and the file's header (and refused with `--strict`),
//! resolvers become stated constants, a missing defaults file is a warning unless a key
//! it might supply is needed, unknown keys are refused with "did you mean", and env types
//! and managers roll-flow does not have are refused with what they would need.

mod common;
mod import_roll_fixtures;

use std::path::Path;
use std::process::Output;

use import_roll_fixtures::{fixtures_with, import_roll, stderr, DEMO};
use roll_flow::engine::spec;
use roll_flow::operators::catalog::RollFlow;
use roll_flow::operators::registry::Node;

#[test]
fn known_unused_keys_resolvers_and_a_missing_default_are_reported_and_written_in_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo.ron");
    let result = import_roll(&[DEMO, "-o", out.to_str().unwrap()]);
    let report = stderr(&result);
    assert!(result.status.success(), "{report}");
    let ron = std::fs::read_to_string(&out).unwrap();
    let expected = [
        "not supported: actor_train.pg_variant: `topr` (tapered off-policy REINFORCE (TOPR)): roll-flow has no such loss yet; wrote the PPO clip loss",
        "ignored on this engine: *.model_args.flash_attn (2 keys): attention implementation (flash-attn, sdpa)",
        "ignored on this engine: actor_train.model_args.ulysses_size: Ulysses sequence parallelism across GPUs",
        "ignored on this engine: actor_train.use_remove_padding: FSDP's padding-free attention",
        "ignored on this engine: actor_train.sequence_length_round_in_train: padding a micro-batch's length to a multiple",
        "not supported: actor_train.use_dynamic_batching_in_train: `true`: approximated: ROLL's optimizer steps under dynamic batching",
        "ignored on this engine: rpc_timeout: ROLL's Ray RPC and scheduling",
        "ignored on this engine: profiler_memory: ROLL's profiler",
        "ignored on this engine: system_envs: environment variables of ROLL's workers",
        "ignored on this engine: actor_train.system_envs: environment variables of ROLL's workers",
        "ignored on this engine: *.device_mapping (2 keys): GPU placement",
        "not read by ROLL either: `all_response_pattern`, `custom_env.FrozenLakeThink`,",
        "resolver: exp_name: `${now:%Y%m%d_%H%M%S}` became \"19700101_000000\": Hydra's `now` taken at 1970-01-01 00:00:00 UTC",
        "resolver: tracker_kwargs.api_key: `${oc.env:WANDB_API_KEY}` became \"\": the environment variable WANDB_API_KEY is not read",
        "warning: defaults entry `../config/deepspeed_zero2@_here_`:",
        "deepspeed_zero2.yaml is missing; imported without it (no key it could supply is needed)",
    ];
    for line in expected {
        assert!(report.contains(line), "report lacks {line:?}:\n{report}");
        // The header holds the same lines, as comments (`key: why`, without the label).
        let rest = line.split_once(": ").map_or(line, |(_, rest)| rest);
        assert!(
            ron.contains(&format!("//   {rest}")) || ron.contains(rest),
            "header lacks {rest:?}:\n{ron}"
        );
    }
    for heading in [
        "// Not supported (ROLL reads these; here the run differs from ROLL's):",
        "// Ignored on this engine (ROLL reads these for its own machinery):",
        "// Resolvers, replaced by stated constants:",
        "// Warnings:",
    ] {
        assert!(ron.contains(heading), "{heading}\n{ron}");
    }
    assert!(!ron.contains("secret-key-123") && !report.contains("secret-key-123"));
    let validate = common::roll_flow(&["validate", out.to_str().unwrap()]);
    assert!(validate.status.success(), "{}", stderr(&validate));
    let p = spec::load::<RollFlow>(&out, &[])
        .unwrap_or_else(|d| panic!("{d:?}"))
        .pipeline;
    assert_eq!(
        (p.name.as_str(), p.steps),
        ("frozen_lake-19700101_000000", 100)
    );
    let Node::ActorStep(actor) = p.nodes.get("actor_step").unwrap() else {
        panic!()
    };
    assert!(matches!(
        actor.loss,
        roll_flow::algo::PolicyLoss::PpoClip(_)
    ));
    // 2 × 16 × 2 devices = 64 = the whole batch (8 groups × 8): no mini-batch; dynamic
    // batching cuts the micro-batches by its token budget, not per_device_train_batch_size.
    assert_eq!((actor.mini_batch, actor.micro_batch), (None, None));
    assert_eq!(actor.max_tokens_per_micro_batch, Some(8192));
    assert!(
        !report.contains("max_tokens_per_microbatch_in_train"),
        "{report}"
    );
    // lora_target: all-linear, lora_rank: 32, lora_alpha: 32 (no longer reported)
    assert!(!report.contains("lora_"), "{report}");
    let lora = p.models.get("policy").unwrap().lora.clone().unwrap();
    assert_eq!((lora.rank, lora.alpha, lora.dropout), (32, 32.0, 0.0));
    // all-linear: every layer an adapter may target, the import's list being the model's
    use roll_flow::model::lora_spec::TARGET_NAMES;
    assert_eq!(
        roll_flow::roll_import::lora_mapping::ALL_LINEAR,
        TARGET_NAMES
    );
    assert_eq!(lora.targets, TARGET_NAMES);
}

/// Dynamic batching's switch without a budget is refused at the budget's key; a budget
/// without the switch is left unread, as ROLL leaves it; a reference worker's is ignored.
#[test]
fn dynamic_batching_needs_its_budget_and_its_switch() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.ron");
    let config = |actor: &str| {
        format!(
            "max_steps: 3\npretrain: models/tiny\nadv_estimator: grpo\nactor_train:\n  training_args: {{learning_rate: 1.0e-6}}\n{actor}\
             reference:\n  use_dynamic_batching_in_train: true\n\
             train_env_manager: {{num_env_groups: 2, group_size: 4, tags: [Lake]}}\n\
             custom_envs:\n  Lake:\n    env_type: frozen_lake\n    max_steps: 5\n"
        )
    };
    let refused = fixtures_with(
        dir.path(),
        "exp/refused.yaml",
        &config("  use_dynamic_batching_in_train: true\n"),
    );
    let result = import_roll(&[refused.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let err = stderr(&result);
    assert!(!result.status.success());
    assert!(
        err.contains("actor_train.max_tokens_per_microbatch_in_train")
            && err.contains("dynamic batching is on, but no token budget is set"),
        "{err}"
    );
    assert!(!out.exists());
    let unread = fixtures_with(
        dir.path(),
        "exp/unread.yaml",
        &config("  max_tokens_per_microbatch_in_train: 4096\n"),
    );
    let result = import_roll(&[unread.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let report = stderr(&result);
    assert!(result.status.success(), "{report}");
    assert!(
        report.contains("actor_train.max_tokens_per_microbatch_in_train: read only with use_dynamic_batching_in_train: true")
            && report.contains("reference.use_dynamic_batching_in_train: dynamic batching of a worker roll-flow does not train"),
        "{report}"
    );
    assert!(!std::fs::read_to_string(&out)
        .unwrap()
        .contains("max_tokens_per_micro_batch: "));
}

#[test]
fn strict_refuses_keys_roll_reads_that_the_pipeline_would_not_use() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo.ron");
    let result = import_roll(&[DEMO, "--strict", "-o", out.to_str().unwrap()]);
    let err = stderr(&result);
    assert!(!result.status.success());
    assert!(
        err.contains("agent_val_frozen_lake_demo.yaml: --strict:"),
        "{err}"
    );
    assert!(
        err.contains("key(s) ROLL reads that the pipeline would not use"),
        "{err}"
    );
    assert!(
        err.contains("\n  actor_train.pg_variant: `topr` (tapered off-policy REINFORCE (TOPR))"),
        "{err}"
    );
    assert!(err.contains("\n  rpc_timeout: ROLL's Ray RPC"), "{err}");
    assert!(
        !err.contains("resolver"),
        "resolvers and warnings are not keys left unused: {err}"
    );
    assert!(
        err.contains("help: remove these keys from the config, or import without --strict"),
        "{err}"
    );
    assert!(!out.exists());
    // A config of mapped keys only passes --strict.
    let clean = fixtures_with(
        dir.path(),
        "exp/clean.yaml",
        "max_steps: 3\npretrain: models/tiny\nadv_estimator: grpo\nactor_train:\n  training_args: {learning_rate: 1.0e-6, lr_scheduler_type: constant}\nactor_infer:\n  generating_args: {temperature: 0.7, max_new_tokens: 32}\n\
         train_env_manager: {num_env_groups: 2, group_size: 4, tags: [Lake]}\n\
         custom_envs:\n  Lake:\n    env_type: frozen_lake\n    max_steps: 5\n    max_tokens_per_step: 32\n    agent_system_template: Play.\n    agent_template: '{observation}'\n",
    );
    let result = import_roll(&[
        clean.to_str().unwrap(),
        "--strict",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(result.status.success(), "{}", stderr(&result));
}

#[test]
fn a_missing_defaults_file_stops_the_import_only_where_a_needed_key_would_come_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let demo = std::fs::read_to_string(DEMO).unwrap();
    let path = dir.path().join("agentic_demo/demo.yaml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &demo).unwrap();
    // No config/traj_envs.yaml beside it: `custom_envs.FrozenLake` needs its `custom_env`.
    let result = import_roll(&[path.to_str().unwrap()]);
    let err = stderr(&result);
    assert!(!result.status.success());
    assert!(
        err.contains("`custom_envs.FrozenLake`")
            && err.contains("`${custom_env.FrozenLake}` names no key (`custom_env` is missing)")
            && err.contains(
                "the defaults entry `../config/traj_envs@_here_` may supply it, but its file"
            )
            && err.contains("traj_envs.yaml is missing"),
        "{err}"
    );
    // A needed plain key: `pretrain`, with both defaults files missing.
    std::fs::write(
        &path,
        demo.replace("pretrain: Qwen/Qwen2.5-0.5B-Instruct\n", ""),
    )
    .unwrap();
    let dir2 = tempfile::tempdir().unwrap();
    let copy = fixtures_with(
        dir2.path(),
        "agentic_demo/demo.yaml",
        &std::fs::read_to_string(&path).unwrap(),
    );
    let err = stderr(&import_roll(&[copy.to_str().unwrap()]));
    assert!(
        err.contains("`pretrain`: missing; the defaults entry `../config/deepspeed_zero2@_here_` may supply it, but its file"),
        "{err}"
    );
}

#[test]
fn unknown_keys_get_did_you_mean_among_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let typo = std::fs::read_to_string(DEMO)
        .unwrap()
        .replace("    ulysses_size: 2", "    ulysses_sze: 2")
        .replace("rpc_timeout: 72000", "rpc_timout: 72000");
    let path = fixtures_with(dir.path(), "agentic_demo/typo.yaml", &typo);
    let err = stderr(&import_roll(&[path.to_str().unwrap()]));
    assert!(
        err.contains("unknown key `actor_train.model_args.ulysses_sze` (did you mean `actor_train.model_args.ulysses_size`?)"),
        "{err}"
    );
    assert!(
        err.contains("unknown key `rpc_timout` (did you mean `rpc_timeout`?)"),
        "{err}"
    );
}

/// The demo with its FrozenLake tag replaced by `tag` (YAML under `custom_envs:`).
fn with_tag(dir: &Path, tag: &str) -> Output {
    let demo = std::fs::read_to_string(DEMO).unwrap();
    let main = demo.replace("  FrozenLake:\n    ${custom_env.FrozenLake}\n", tag);
    let path = fixtures_with(dir, "agentic_demo/tag.yaml", &main);
    import_roll(&[path.to_str().unwrap()])
}

#[test]
fn env_types_and_managers_roll_flow_lacks_are_refused_with_what_they_need() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "  FrozenLake:\n    env_type: sokoban_sandbox\n    max_steps: 5\n    env_config: {dim_room: [6, 6]}\n",
            "`custom_envs.FrozenLake.env_type`: env_type `sokoban_sandbox` is not supported: Sokoban run inside ROLL's remote sandbox service",
        ),
        (
            "  FrozenLake:\n    env_type: \"math:ASDiv2K\"\n    env_config: {dataset_name: axon-rl/ASDIV-2k}\n",
            "env_type `math:ASDiv2K` is not supported: a dataset-backed GEM env",
        ),
        (
            "  FrozenLake:\n    env_type: rock_tb_native_env\n",
            "terminal and SWE tasks in ROCK sandboxes",
        ),
        (
            "  FrozenLake:\n    env_type: maze\n",
            "env_type `maze` is not supported\n  help: roll-flow maps frozen_lake, sokoban, webshop and GEM's games",
        ),
        (
            "  FrozenLake:\n    env_type: sokoban\n    env_manager_cls: roll.pipeline.agentic.env_manager.vl_traj_env_manager.VLTrajEnvManager\n",
            "`custom_envs.FrozenLake.env_manager_cls`: `roll.pipeline.agentic.env_manager.vl_traj_env_manager.VLTrajEnvManager`: ROLL's vision-language env manager",
        ),
    ];
    for (tag, expected) in cases {
        let result = with_tag(dir.path(), tag);
        let err = stderr(&result);
        assert!(
            !result.status.success() && err.contains(expected),
            "{expected}\n{err}"
        );
    }
}

#[test]
fn an_empty_config_is_refused_and_a_rollout_only_one_plays_without_training() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("agentic_val_webshop.yaml");
    std::fs::write(&empty, "").unwrap();
    let err = stderr(&import_roll(&[empty.to_str().unwrap()]));
    assert!(
        err.contains("the config has no keys (ROLL has nothing to run either"),
        "{err}"
    );
    // ROLL's rollout-only pipeline (start_agentic_rollout_pipeline.py): no actor_train
    let demo = std::fs::read_to_string(DEMO).unwrap();
    let start = demo.find("actor_train:").unwrap();
    let end = demo.find("actor_infer:").unwrap();
    let rollout_only =
        format!("{}{}", &demo[..start], &demo[end..]).replace("  pg_variant: topr\n", "");
    let path = fixtures_with(dir.path(), "agentic_demo/rollout.yaml", &rollout_only);
    let out = dir.path().join("rollout.ron");
    let result = import_roll(&[path.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(result.status.success(), "{}", stderr(&result));
    assert!(
        stderr(&result).contains(
            "val_env_manager: ROLL's rollout pipeline plays train_env_manager's tags only"
        ),
        "{}",
        stderr(&result)
    );
    let p = spec::load::<RollFlow>(&out, &[])
        .unwrap_or_else(|d| panic!("{d:?}"))
        .pipeline;
    let nodes: Vec<&str> = p.nodes.iter().map(|(name, _)| name).collect();
    assert_eq!(nodes, ["rollout"]);
    assert!(p.models.get("policy").unwrap().lora.is_none());
    // It plays: two steps on the CPU with a Tiny policy in place of the model directory.
    let run_dir = dir.path().join("run");
    let run = common::roll_flow(&[
        "run",
        out.to_str().unwrap(),
        "--steps",
        "2",
        "--out",
        run_dir.to_str().unwrap(),
        "--set",
        "device=Cpu",
        "--set",
        "models.policy.precision=F32",
        "--set",
        "models.policy.arch=Tiny(layers: 1, dim: 32, heads: 2)",
        "--set",
        "nodes.rollout.max_new_tokens=8",
        "--set",
        "nodes.rollout.sequence_length=512",
    ]);
    common::assert_ok(&run);
    let records = common::metrics(&run_dir);
    assert_eq!(records.len(), 2);
    assert!(
        records[1].contains_key("rollout/success"),
        "{:?}",
        records[1]
    );
    assert!(!records[1].keys().any(|k| k.starts_with("actor")));
}

#[test]
fn pg_variant_cispo_becomes_the_cispo_loss_with_roll_s_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let demo = std::fs::read_to_string(DEMO).unwrap().replace(
        "  pg_variant: topr\n",
        "  pg_variant: cispo\n  cispo_epsilon_high: 0.28\n",
    );
    let path = fixtures_with(dir.path(), "agentic_demo/cispo.yaml", &demo);
    let out = dir.path().join("cispo.ron");
    let result = import_roll(&[path.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(result.status.success(), "{}", stderr(&result));
    let ron = std::fs::read_to_string(&out).unwrap();
    // ROLL's cispo_epsilon_low default 0.1, the file's ε_high, the run's loss_agg_mode
    assert!(
        ron.contains("loss: Cispo(low: 0.1, high: 0.28, agg: SeqMeanTokenSum)"),
        "{ron}"
    );
    assert!(
        !stderr(&result).contains("pg_variant"),
        "{}",
        stderr(&result)
    );
    let p = spec::load::<RollFlow>(&out, &[])
        .unwrap_or_else(|d| panic!("{d:?}"))
        .pipeline;
    let Node::ActorStep(actor) = p.nodes.get("actor_step").unwrap() else {
        panic!()
    };
    assert!(matches!(actor.loss, roll_flow::algo::PolicyLoss::Cispo(_)));
}
