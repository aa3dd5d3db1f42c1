//! `roll-flow graph`, `run`, `generate` and `--help` through the real binary.

mod common;

use common::{assert_ok, metrics, roll_flow, run};
use std::process::Command;

#[test]
fn graph_prints_dot_that_graphviz_renders() {
    let out = roll_flow(&["graph", "pipelines/frozen_lake_ppo.ron"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dot = String::from_utf8(out.stdout).unwrap();
    assert!(dot.starts_with("digraph pipeline {"));
    assert!(
        dot.contains("adv : BiLevelGae|{needs\\nresponse_mask"),
        "{dot}"
    );
    assert!(
        dot.contains("[style=dashed, label=\"policy version\""),
        "the feedback edge is drawn"
    );
    assert_eq!(
        dot.matches(" -> ").count(),
        6 + 2,
        "six edges and the feedback edge to each source (rollout, eval)"
    );

    let dir = tempfile::tempdir().unwrap();
    let dot_file = dir.path().join("g.dot");
    std::fs::write(&dot_file, &dot).unwrap();
    let svg = Command::new("dot")
        .arg("-Tsvg")
        .arg(&dot_file)
        .output()
        .expect("graphviz's `dot` runs (apt-get install graphviz)");
    assert!(
        svg.status.success(),
        "{}",
        String::from_utf8_lossy(&svg.stderr)
    );
    let svg = String::from_utf8(svg.stdout).unwrap();
    assert!(svg.contains("<svg") && svg.contains("critic_step"));
}

#[test]
fn graph_of_an_invalid_file_fails_with_its_errors() {
    let out = roll_flow(&["graph", "tests/pipelines/invalid/cycle.ron"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("error: cycle in the per-step graph"));
}

#[test]
fn run_with_a_missing_model_directory_names_the_model_and_keeps_the_pipeline_copy() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let out = roll_flow(&[
        "run",
        "pipelines/frozen_lake_starpo.ron",
        "--steps",
        "2",
        "--out",
        out_dir.to_str().unwrap(),
        "--set",
        "envs.train.groups=2",
        "--set",
        "models.policy.arch=HfDir(\"no/such/model\")",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("model `policy`"), "{stderr}");
    assert!(stderr.contains("no/such/model"), "{stderr}");
    assert!(!stderr.contains("panicked"));
    let copy = std::fs::read_to_string(out_dir.join("pipeline.ron")).unwrap();
    assert!(
        copy.contains("steps: 2,") && copy.contains("groups: 2,"),
        "the copy holds the overrides:\n{copy}"
    );
}

#[test]
fn resume_before_the_first_checkpoint_starts_again_from_step_0_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    // Stopped after step 0 of 2, before any checkpoint (every 5 and at the last step).
    let stopped = run(
        "pipelines/frozen_lake_starpo.ron",
        &out_dir,
        &["--stop-after", "1", "--set", "nodes.checkpoint.every=5"],
    );
    assert_ok(&stopped);
    assert!(!out_dir.join("checkpoints/step_1").exists());
    let out = roll_flow(&["run", "--resume", out_dir.to_str().unwrap()]);
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("has no checkpoint yet")
            && stderr.contains("starting the run again from step 0 in place"),
        "{stderr}"
    );
    let steps: Vec<u64> = metrics(&out_dir)
        .iter()
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, vec![0, 1], "every step once");
    assert!(out_dir.join("checkpoints/step_2/meta.json").is_file());
    assert!(out_dir.join("metrics.jsonl.before-resume-0").is_file());
}

#[test]
fn resume_refuses_another_out_dir() {
    // A resumed run writes into its own directory; `--out` there would be ignored.
    let out = roll_flow(&["run", "--resume", "runs/some_run", "--out", "elsewhere"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    assert!(!std::path::Path::new("elsewhere").exists());
}

#[test]
fn run_refuses_an_invalid_file_before_writing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let out = roll_flow(&[
        "run",
        "tests/pipelines/invalid/gae_without_values.ron",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!out_dir.exists());
}

#[test]
fn every_command_has_help_and_bad_usage_exits_2() {
    for cmd in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["validate", "--help"],
        vec!["graph", "--help"],
        vec!["play", "--help"],
        vec!["generate", "--help"],
        vec!["report", "--help"],
        vec!["export", "--help"],
    ] {
        let out = roll_flow(&cmd);
        assert_eq!(out.status.code(), Some(0), "{cmd:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage: roll-flow"),
            "{cmd:?}"
        );
    }
    assert_eq!(roll_flow(&["validate"]).status.code(), Some(2));
    assert_eq!(roll_flow(&["frobnicate"]).status.code(), Some(2));
}

/// A device whose backend this build lacks (`wgpu`, or `cuda` in a `wgpu` build such as
/// `./test.sh`'s) is refused before the run, naming the feature to build with.
#[cfg(not(all(feature = "wgpu", feature = "cuda")))]
#[test]
fn run_names_the_missing_backend_feature() {
    let (device, feature) = if cfg!(feature = "wgpu") {
        ("Cuda(0)", "cuda")
    } else {
        ("Wgpu", "wgpu")
    };
    let dir = tempfile::tempdir().unwrap();
    let out = roll_flow(&[
        "run",
        "pipelines/frozen_lake_starpo.ron",
        "--out",
        dir.path().to_str().unwrap(),
        "--set",
        &format!("device={device}"),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    let want = format!(
        "built without the `{feature}` feature; rebuild with `cargo build --release --features {feature}`"
    );
    assert!(stderr.contains(&want), "{stderr}");
}

#[test]
fn run_and_validate_read_a_file_saved_with_a_byte_order_mark() {
    // `--steps` and `--out` are `--set` overrides, which must find their place in the file
    // past the mark; non-ASCII text after the pipeline is reported, not a panic.
    let dir = tempfile::tempdir().unwrap();
    let shipped = std::fs::read_to_string("pipelines/frozen_lake_starpo.ron").unwrap();
    let file = dir.path().join("bom.ron");
    std::fs::write(&file, format!("\u{feff}{shipped}")).unwrap();
    let out_dir = dir.path().join("run");
    let ran = common::run(file.to_str().unwrap(), &out_dir, &["--steps", "1"]);
    common::assert_ok(&ran);
    assert_eq!(common::metrics(&out_dir).len(), 1);

    let trailing = dir.path().join("trailing.ron");
    std::fs::write(&trailing, format!("\u{feff}{shipped}…\n")).unwrap();
    let out = roll_flow(&["validate", trailing.to_str().unwrap(), "--set", "steps=5"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = shipped.lines().count() + 1;
    let pad = " ".repeat(line.to_string().len());
    let want = format!(
        "error: unexpected text after the end of the pipeline\n{pad}--> {}:{line}:1\n",
        trailing.display()
    );
    assert!(stderr.contains(&want), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `generate --greedy` on the `tiny_qwen2` fixture continues each of its prompts with
/// transformers' 24 greedy tokens (`expected.json`, made by
/// tests/fixtures/make_tiny_qwen2.py); the text printed is those tokens decoded by the
/// fixture's tokenizer, special tokens skipped.
#[test]
fn generate_greedy_continues_the_fixture_prompts_as_transformers_does() {
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny_qwen2");
    let text = std::fs::read_to_string(fixture.join("expected.json")).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    let tokenizer = roll_flow_model::TextTokenizer::from_model_dir(&fixture).unwrap();
    let new_tokens = expected["greedy_new_tokens"].as_u64().unwrap();
    let prompts = expected["prompts"].as_array().unwrap();
    assert_eq!(prompts.len(), 3);
    for (k, prompt) in prompts.iter().enumerate() {
        let greedy: Vec<u32> = expected["greedy"][k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(greedy.len() as u64, new_tokens);
        let out = roll_flow(&[
            "generate",
            "--model",
            "tests/fixtures/tiny_qwen2",
            "--prompt",
            prompt.as_str().unwrap(),
            "--greedy",
            "--max-new-tokens",
            &new_tokens.to_string(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let want = tokenizer.decode(&greedy, true).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{want}\n"),
            "prompt {k}"
        );
        let prompt_tokens = expected["prompt_ids"][k].as_array().unwrap().len();
        assert!(
            stderr.contains(&format!(
                "[{prompt_tokens} prompt tokens, {new_tokens} generated, finish: Length]"
            )),
            "{stderr}"
        );
    }
}

/// `generate --greedy` on the tiny Llama GGUF fixture (tests/fixtures/make_tiny_gguf.py)
/// prints transformers' 16 greedy tokens of its first prompt, and `--chat` renders the
/// prompt with the file's own chat template.
#[test]
fn generate_reads_a_gguf_file() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text =
        std::fs::read_to_string(root.join("tests/fixtures/tiny_gguf/tiny_llama.json")).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    let model = "tests/fixtures/tiny_gguf/tiny_llama.gguf";
    let gguf = roll_flow_model::gguf::GgufModel::open(&root.join(model)).unwrap();
    let tokenizer = gguf.tokenizer().unwrap();
    let greedy: Vec<u32> = expected["greedy"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    let prompt = expected["prompts"][0].as_str().unwrap();
    let out = roll_flow(&[
        "generate",
        "--model",
        model,
        "--prompt",
        prompt,
        "--greedy",
        "--max-new-tokens",
        "16",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let want = tokenizer.decode(&greedy, true).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{want}\n"));
    let out = roll_flow(&[
        "generate",
        "--model",
        model,
        "--prompt",
        "Hi",
        "--chat",
        "--greedy",
        "--max-new-tokens",
        "4",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let chat = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    let prompt_tokens = tokenizer.encode(chat).unwrap().len();
    assert!(
        stderr.contains(&format!("[{prompt_tokens} prompt tokens")),
        "{stderr}"
    );
    // A negative value is the sampling check's to refuse, not taken for a flag.
    let args = [
        "generate",
        "--model",
        model,
        "--prompt",
        "Hi",
        "--temperature",
        "-1",
    ];
    let out = roll_flow(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("temperature -1 must be finite and >= 0"),
        "{stderr}"
    );
}

/// A `--trace` file that cannot be written is refused before the run, not after it.
#[test]
fn an_unwritable_trace_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let result = roll_flow(&[
        "run",
        "pipelines/bandit_grpo.ron",
        "--out",
        out.to_str().unwrap(),
        "--trace",
        "/dev/null/trace.json",
    ]);
    assert_eq!(result.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        stderr
            .contains("cannot write the trace /dev/null/trace.json: /dev/null is not a directory"),
        "{stderr}"
    );
    assert!(!out.join("metrics.jsonl").exists(), "the run did not start");
}
