//! Imported ROLL configs that run, and the ROLL examples shipped as pipelines: the imported
//! FrozenLake config runs its first steps on a Tiny model, and
//! pipelines/qwen2.5-0.5b_sokoban.ron is, below its header, exactly what `import-roll` writes
//! from ROLL's agentic_val_sokoban.yaml (tests/fixtures/roll/, with its Hydra defaults file);
//! it validates, carries ROLL's settings and prompts, and its first step runs on the CPU with a
//! Tiny model. ROLL-format configs of a GEM game and of WebShop import to Process and WebShop
//! envs with ROLL's templates.

mod common;
mod roll_examples;

use std::path::Path;

use common::roll_flow;
use roll_flow::algo::grouping::{Grouping, Norm};
use roll_flow::engine::spec;
use roll_flow::envs::config::EnvConfig;
use roll_flow::envs::sokoban::Vocabulary;
use roll_flow::envs::webshop::CatalogSource;
use roll_flow::operators::catalog::RollFlow;
use roll_flow::operators::play_settings::SampleMode;
use roll_flow::operators::prompt::HistoryTurn;
use roll_flow::operators::registry::Node;

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
            "models.policy.precision=F32",
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
        "not read by ROLL either: custom_envs.FrozenLakeThink: no env manager plays this tag",
        "ignored on this engine: reward_pretrain",
        "ignored on this engine: *.strategy_args (3 keys): distributed strategy",
    ] {
        assert!(report.contains(notice), "missing {notice} in\n{report}");
    }
    assert!(
        !report.contains(".agent_template"),
        "the templates are mapped: {report}"
    );
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
    // ROLL's TrajEnvManager: the system template, then the instruction and a newline before
    // the first turn's `agent_template`; actions_left counts this turn (10 − 0 at turn 1).
    let (system, first) =
        roll_examples::rendered_turn(&p, "Push the boxes.", 10, 0, "#P_X_O#", Vec::new());
    assert_eq!(
        system.as_deref(),
        Some("You're a helpful assistant. You are a good game player. You are aiming to get high reward in the game.")
    );
    assert_eq!(
        first,
        "Push the boxes.\nTurn 1:\nObservation:\n#P_X_O#\nStrictly follow this format:\n1. output format is '<answer> [your answer] </answer>' with no extra text. \n2. You have 10 actions left. \n3. Max response length: 64 words (tokens).\nDecide the next action:\n"
    );
    let (_, fourth) =
        roll_examples::rendered_turn(&p, "Push the boxes.", 10, 3, "#_PXO#", Vec::new());
    assert!(
        fourth.starts_with("Turn 4:\n") && fourth.contains("You have 7 actions left."),
        "{fourth}"
    );
}

#[test]
fn shipped_sokoban_first_step_runs_on_a_tiny_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut sets = vec![
        "device=Cpu",
        "models.policy.precision=F32",
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

const GEM_YAML: &str = "tests/fixtures/roll/qwen3_agentic_gem/gem_game_guess_the_number.yaml";
const WEBSHOP_YAML: &str =
    "tests/fixtures/roll/qwen2.5-7B-agentic_megatron/agentic_val_webshop.yaml";

/// Imports `config`, validates the output and loads it.
fn import_and_load(
    config: &str,
    dir: &Path,
) -> (roll_flow::engine::dialect::Pipeline<RollFlow>, String) {
    let out = dir.join("imported.ron");
    let report = import_to(config, &out);
    let validate = roll_flow(&["validate", out.to_str().unwrap()]);
    assert!(
        validate.status.success(),
        "{}",
        String::from_utf8_lossy(&validate.stderr)
    );
    let p = spec::load::<RollFlow>(&out, &[])
        .unwrap_or_else(|d| panic!("{d:?}"))
        .pipeline;
    (p, report)
}

#[test]
fn gem_game_imports_as_a_process_env_with_step_reinforce() {
    let dir = tempfile::tempdir().unwrap();
    let (p, report) = import_and_load(GEM_YAML, dir.path());
    let train = p.envs.get("train_GuessTheNumber").unwrap();
    let EnvConfig::Process(server) = &train.env else {
        panic!("{:?}", train.env)
    };
    assert_eq!(
        server.command,
        [
            "python3",
            "-m",
            "roll_flow_env.gem",
            "game:GuessTheNumber-v0",
            "--kwarg",
            "min_number=1",
            "--kwarg",
            "max_number=20",
            "--kwarg",
            "max_turns=20",
        ]
    );
    assert_eq!(
        (train.groups, train.group_size, train.max_turns),
        (128, 1, Some(20))
    );
    assert_eq!(p.envs.get("val_GuessTheNumber").unwrap().seed, Some(10000));
    let Node::StepReinforce(adv) = p.nodes.get("adv").unwrap() else {
        panic!("{:?}", p.nodes.get("adv"))
    };
    assert_eq!(
        (adv.gamma, adv.group_by, adv.norm),
        (1.0, Grouping::Batch, Norm::MeanStd)
    );
    assert_eq!(adv.shaping.advantage_clip, Some(20.0));
    let Node::Rollout(rollout) = p.nodes.get("rollout").unwrap() else {
        panic!()
    };
    // StepConcatEnvManager with history_length 20 shows the 19 turns before the current one.
    assert_eq!(rollout.samples, SampleMode::Step { history: 19 });
    assert_eq!(
        (rollout.top_k, rollout.instruction, rollout.max_new_tokens),
        (None, false, 512)
    );
    let Node::ActorStep(actor) = p.nodes.get("actor_step").unwrap() else {
        panic!()
    };
    assert_eq!(actor.ppo_epochs, 2);
    // No system message (agent_system_template: ~); earlier observations joined by
    // newlines, then the current one and GEM's suffix (empty here).
    let history = vec![HistoryTurn {
        step: 1,
        observation: "Guess a number between 1 and 20.".into(),
        action: "\\boxed{10}".into(),
        reward: "0".into(),
    }];
    let (system, turn) = roll_examples::rendered_turn(&p, "", 20, 1, "Too high.", history);
    assert_eq!(system, None);
    assert_eq!(
        turn,
        "You are playing language games. Make valid actions to win.\nObservation:\nGuess a number between 1 and 20.\nToo high.\n\nPlease reason step by step, and put your final answer within \\\\boxed{}.\n"
    );
    assert!(
        report.contains("not supported: custom_envs.GuessTheNumber.agent_template: GEM's `suffix`"),
        "{report}"
    );
    assert!(
        report.contains("not read by ROLL either: `gem_games.GuessTheNumber`"),
        "{report}"
    );
}

#[test]
fn gem_keywords_pass_as_integers_and_booleans_as_0_or_1() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(GEM_YAML)
        .unwrap()
        .replace("tags: [GuessTheNumber]", "tags: [Mastermind]")
        .replace("adv_estimator: \"step_reinforce\"", "adv_estimator: grpo")
        .replace(
            "step_concat_env_manager.StepConcatEnvManager",
            "traj_env_manager.TrajEnvManager",
        );
    let custom = text.find("custom_envs:").unwrap();
    let text = format!(
        "{}custom_envs:\n  Mastermind: ${{gem_games.Mastermind}}\n",
        &text[..custom]
    );
    let path = dir.path().join("qwen3_agentic_gem/mastermind.yaml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    let config_dir = dir.path().join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::copy(
        "tests/fixtures/roll/config/traj_envs_gem_games.yaml",
        config_dir.join("traj_envs_gem_games.yaml"),
    )
    .unwrap();
    let (p, report) = import_and_load(path.to_str().unwrap(), dir.path());
    let EnvConfig::Process(server) = &p.envs.get("train_Mastermind").unwrap().env else {
        panic!()
    };
    assert_eq!(
        server.command[3..],
        [
            "game:Mastermind-v0",
            "--kwarg",
            "code_length=4",
            "--kwarg",
            "num_numbers=6",
            "--kwarg",
            "max_turns=20",
            "--kwarg",
            "duplicate_numbers=0"
        ]
    );
    // TrajEnvManager with `{suffix}` in the template: reported, rendered empty.
    assert!(report.contains("GEM's `suffix`"), "{report}");
    let Node::Rollout(rollout) = p.nodes.get("rollout").unwrap() else {
        panic!()
    };
    assert_eq!(rollout.samples, SampleMode::Trajectory);
    let (system, turn) = roll_examples::rendered_turn(&p, "", 20, 0, "Crack the code.", Vec::new());
    assert_eq!(
        system.as_deref(),
        Some("You're a helpful assistant. You are a good game player.")
    );
    assert_eq!(turn, "Crack the code.\n\n");
}

#[test]
fn webshop_imports_with_rolls_env_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (p, report) = import_and_load(WEBSHOP_YAML, dir.path());
    let train = p.envs.get("train_WebShopEnv").unwrap();
    let EnvConfig::WebShop(shop) = &train.env else {
        panic!("{:?}", train.env)
    };
    assert_eq!(
        (shop.max_turns, shop.format_penalty, shop.show_attrs),
        (10, -0.05, false)
    );
    assert_eq!(
        shop.catalog,
        CatalogSource::Generated {
            products: 1000,
            seed: 0
        }
    );
    assert_eq!((train.groups, train.group_size), (8, 8));
    assert_eq!(p.envs.get("val_WebShopEnv").unwrap().groups, 64);
    let Node::Grpo(adv) = p.nodes.get("adv").unwrap() else {
        panic!()
    };
    assert_eq!(adv.shaping.reward_clip, Some(20.0));
    for notice in [
        "not supported: custom_envs.WebShopEnv.env_config: ROLL plays webshop-minimal's product files; wrote roll-flow's generated catalog of 1000 products",
        "ignored on this engine: custom_envs.WebShopEnv.max_env_step_concurrent",
    ] {
        assert!(report.contains(notice), "missing {notice} in\n{report}");
    }
    let (_, first) =
        roll_examples::rendered_turn(&p, "Buy a red mug.", 10, 0, "[Search]", Vec::new());
    assert!(
        first.starts_with("Buy a red mug.\nTurn 1:\nObservation:\n[Search]\n")
            && first.contains("You have 10 actions left.")
            && first.contains("Max response length: 128 words"),
        "{first}"
    );
}
