//! play: JSON lines through the library, the interactive transcript, recordings.

use super::{as_answer, play_interactive, play_scripted, PlayOptions};
use crate::config::EnvConfig;

fn lines(output: &[u8]) -> Vec<serde_json::Value> {
    std::str::from_utf8(output)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn plain_lines_become_answers_and_tags_pass_verbatim() {
    assert_eq!(as_answer("Right\r\n"), "<answer>Right</answer>");
    assert_eq!(as_answer("  up "), "<answer>up</answer>");
    let raw = "<think>x</think><ANSWER>Left</ANSWER>";
    assert_eq!(as_answer(raw), raw);
}

#[test]
fn scripted_frozen_lake_prints_one_json_line_per_step() {
    let config = EnvConfig::parse("FrozenLake(size: 4)").unwrap();
    let options = PlayOptions {
        seed: 3,
        ..Default::default()
    };
    let mut out = Vec::new();
    let summary = play_scripted(&config, &options, "Right\nDown\n".as_bytes(), &mut out).unwrap();
    let json = lines(&out);
    assert!(!json.is_empty() && json.len() <= 3);
    assert_eq!(json[0]["seed"], 3);
    assert!(json[0]["instruction"]
        .as_str()
        .unwrap()
        .contains("FrozenLake"));
    assert_eq!(json[0]["obs"].as_str().unwrap().lines().count(), 4);
    for step in &json[1..] {
        for key in ["obs", "reward", "terminated", "truncated", "info"] {
            assert!(step.get(key).is_some(), "{key} missing in {step}");
        }
        assert_eq!(step["info"]["action_is_valid"], true);
        assert!(step["info"].get("action_is_effective").is_some());
        assert!(step["info"].get("format_penalty").is_some());
    }
    assert_eq!(summary.turns, json.len() - 1);
    // Same seed and lines → byte-identical output.
    let mut again = Vec::new();
    play_scripted(&config, &options, "Right\nDown\n".as_bytes(), &mut again).unwrap();
    assert_eq!(out, again);
}

#[test]
fn scripted_math_episode_stops_at_the_correct_answer() {
    let config = EnvConfig::parse("Math()").unwrap();
    let options = PlayOptions {
        seed: 9,
        ..Default::default()
    };
    let mut math = crate::math::MathConfig::default().build().unwrap();
    crate::Env::reset(&mut math, 9).unwrap();
    let answer = math.problem().unwrap().answer;
    let script = format!("garbage\n\\boxed{{{answer}}}\nnever read\n");
    let mut out = Vec::new();
    let summary = play_scripted(&config, &options, script.as_bytes(), &mut out).unwrap();
    let json = lines(&out);
    assert_eq!(json.len(), 3);
    assert_eq!(json[1]["reward"], -1.0);
    assert_eq!(json[2]["reward"], 1.0);
    assert_eq!(json[2]["terminated"], true);
    assert!(summary.success && summary.done);
    assert_eq!(summary.total_reward, 0.0);
}

#[test]
fn turn_limit_truncates_the_last_line() {
    let config = EnvConfig::parse("Math()").unwrap();
    let options = PlayOptions {
        seed: 1,
        max_turns: Some(2),
        ..Default::default()
    };
    let mut out = Vec::new();
    let summary = play_scripted(&config, &options, "x\ny\nz\n".as_bytes(), &mut out).unwrap();
    let json = lines(&out);
    assert_eq!(json.len(), 3);
    assert_eq!(json[2]["truncated"], true);
    assert_eq!(summary.turns, 2);
}

#[test]
fn interactive_session_shows_state_reward_and_end() {
    let config = EnvConfig::parse("Bandit()").unwrap();
    let options = PlayOptions {
        seed: 2,
        ..Default::default()
    };
    let mut out = Vec::new();
    play_interactive(&config, &options, "Dragon\n".as_bytes(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("== Bandit (seed 2) =="));
    assert!(text.contains("action> "));
    assert!(text.contains("You pulled Dragon"));
    assert!(text.contains("terminated"));
    assert!(text.contains("Episode over after 1 turns"));
}

#[test]
fn recording_writes_frames_gif_and_transcript() {
    let dir = std::env::temp_dir().join(format!("roll-flow-play-{}", std::process::id()));
    let config = EnvConfig::parse("Sokoban()").unwrap();
    let options = PlayOptions {
        seed: 4,
        record: Some(dir.clone()),
        ..Default::default()
    };
    let mut out = Vec::new();
    play_scripted(&config, &options, "Up\nLeft\n".as_bytes(), &mut out).unwrap();
    let gif = std::fs::read(dir.join("Sokoban_seed4.gif")).unwrap();
    assert_eq!(&gif[..6], b"GIF89a");
    let png = std::fs::read(dir.join("Sokoban_seed4_000.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(
        dir.join("Sokoban_seed4_002.png").exists(),
        "reset + 2 steps"
    );
    let transcript = std::fs::read_to_string(dir.join("Sokoban_seed4.txt")).unwrap();
    assert_eq!(transcript.matches("---").count(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn targets_resolve_from_spec_file_and_pipeline() {
    use crate::play::target::resolve;
    let plain = resolve("FrozenLake(size: 4)", None).unwrap();
    assert_eq!(
        (plain.config.name(), plain.max_turns, plain.seed),
        ("FrozenLake", None, None)
    );
    assert!(resolve("FrozenLake(size: 4)", Some("train")).is_err());
    assert!(resolve("FrozenLake(size: ", None)
        .unwrap_err()
        .to_string()
        .contains("env spec"));

    let dir = std::env::temp_dir().join(format!("roll-flow-target-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec_file = dir.join("env.ron");
    std::fs::write(&spec_file, "Sokoban(num_boxes: 1)\n").unwrap();
    let from_file = resolve(spec_file.to_str().unwrap(), None).unwrap();
    assert_eq!(from_file.config.name(), "Sokoban");
    // A path that names no file, or a folder: said so, not parsed as RON.
    let missing = resolve("nosuch.ron", None).unwrap_err().to_string();
    assert!(
        missing.contains("nosuch.ron: no such file; SPEC is a file"),
        "{missing}"
    );
    let folder = resolve(dir.to_str().unwrap(), None)
        .unwrap_err()
        .to_string();
    assert!(folder.contains("is a folder, not a file"), "{folder}");

    let pipeline = dir.join("pipeline.ron");
    std::fs::write(
        &pipeline,
        r#"Pipeline(
    name: "p", steps: 3, out_dir: "runs/p",
    models: { "policy": (arch: Tiny(layers: 2), optim: AdamW(lr: 1e-3)) },
    envs: {
        "train": (env: FrozenLake(size: 4, slippery: true), groups: 2, group_size: 4, max_turns: 6),
        "val": (env: Bandit(), groups: 8, seed: 123),
    },
    nodes: { "rollout": Rollout(envs: "train", samples: Step(history: 2)) },
    edges: [("rollout", "adv")],
)"#,
    )
    .unwrap();
    let path = pipeline.to_str().unwrap();
    let train = resolve(path, Some("train")).unwrap();
    assert_eq!(
        (train.config.name(), train.max_turns, train.seed),
        ("FrozenLake", Some(6), None)
    );
    let val = resolve(path, Some("val")).unwrap();
    assert_eq!((val.config.name(), val.seed), ("Bandit", Some(123)));
    let missing = resolve(path, None).unwrap_err().to_string();
    assert!(
        missing.contains("\"train\", \"val\"") && missing.contains("--env"),
        "{missing}"
    );
    let wrong = resolve(path, Some("test")).unwrap_err().to_string();
    assert!(wrong.contains("no env `test`"), "{wrong}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn spec_errors_are_said_once() {
    let message = super::resolve("FrozenLak(size: 4)", None)
        .unwrap_err()
        .to_string();
    assert_eq!(message.matches("env spec").count(), 1, "{message}");
    assert!(
        message.contains("FrozenLak") && message.contains("expected one of"),
        "{message}"
    );
}

#[test]
fn binary_junk_lines_are_penalised_actions_not_errors() {
    let config = EnvConfig::parse("FrozenLake()").unwrap();
    let options = PlayOptions {
        seed: 5,
        ..Default::default()
    };
    let input: &[u8] = b"\xff\xfe\x00\x1b[2J\n\n<answer>\xc3(</answer>\nLeft";
    let mut out = Vec::new();
    play_scripted(&config, &options, input, &mut out).unwrap();
    let json = lines(&out);
    assert_eq!(
        json.len(),
        5,
        "reset + 4 steps, the last line without a newline"
    );
    for step in &json[1..4] {
        assert_eq!(step["info"]["action_is_valid"], false);
        assert!((step["reward"].as_f64().unwrap() - -0.01).abs() < 1e-6);
    }
    assert_eq!(json[4]["info"]["action_is_valid"], true);
}
