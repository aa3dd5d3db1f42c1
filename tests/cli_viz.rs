//! Seeing what training does, through the real binary: event files and plots after a run,
//! `report` over two runs, `play --policy`, `graph --png` and `export --hf`.

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_ok, roll_flow, run};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Width, height and the set of colours of a PNG.
fn decode_png(path: &Path) -> (u32, u32, HashSet<[u8; 3]>) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let colours = buf[..info.buffer_size()]
        .chunks_exact(channels)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    (info.width, info.height, colours)
}

/// The paths of the files under `dir`, relative to it, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    files.sort();
    files
}

fn pngs_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    files.sort();
    files
}

#[test]
fn a_run_leaves_event_files_plots_and_gifs_and_report_draws_two_runs_together() {
    let dir = tempfile::tempdir().unwrap();
    let (starpo, gigpo) = (dir.path().join("starpo"), dir.path().join("gigpo"));
    assert_ok(&run("pipelines/frozen_lake_starpo.ron", &starpo, &[]));
    assert_ok(&run("pipelines/frozen_lake_gigpo.ron", &gigpo, &[]));

    let events: Vec<_> = std::fs::read_dir(&starpo)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("events.out.tfevents."))
        .collect();
    assert_eq!(events.len(), 1, "one TensorBoard event file: {events:?}");

    let plots = pngs_in(&starpo.join("plots"));
    let names: Vec<_> = plots.iter().map(|p| p.file_name().unwrap()).collect();
    for want in [
        "val_success.png",
        "score.png",
        "entropy.png",
        "grad_norm.png",
    ] {
        assert!(names.iter().any(|n| *n == want), "{want} in {names:?}");
    }
    for plot in &plots {
        let (w, h, colours) = decode_png(plot);
        assert_eq!((w, h), (1200, 450));
        assert!(colours.len() > 10, "{plot:?} has more than a background");
    }
    let gif = std::fs::File::open(starpo.join("renders/step_0/val_0.gif")).unwrap();
    let mut frames = gif::DecodeOptions::new().read_info(gif).unwrap();
    assert!(
        frames.read_next_frame().unwrap().is_some(),
        "the GIF has frames"
    );
    let chat = std::fs::read_to_string(starpo.join("renders/step_0/val_0_chat.txt")).unwrap();
    for part in ["--- turn 1 ---", "reply: ", "action: ", "reward: "] {
        assert!(chat.contains(part), "transcript lacks {part:?}:\n{chat}");
    }

    let report = dir.path().join("report");
    let out = roll_flow(&[
        "report",
        starpo.to_str().unwrap(),
        gigpo.to_str().unwrap(),
        "--out",
        report.to_str().unwrap(),
    ]);
    assert_ok(&out);
    let (_, _, colours) = decode_png(&report.join("score.png"));
    let first_two_lines = [[31, 119, 180], [255, 127, 14]];
    assert!(
        first_two_lines.iter().all(|c| colours.contains(c)),
        "both runs are drawn on one chart"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        pngs_in(&report).len()
    );

    let out = roll_flow(&["report", starpo.to_str().unwrap(), gigpo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--out DIR"), "{}", stderr(&out));
}

#[test]
fn report_names_the_line_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("metrics.jsonl"),
        "{\"step\":0,\"rollout/score/mean\":1}\n{\"step\":1,\n",
    )
    .unwrap();
    let out = roll_flow(&["report", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let want = format!("{}:2: not JSON", dir.path().join("metrics.jsonl").display());
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"));
}

/// A run killed mid-line leaves an unfinished last line: report draws the rest and says
/// what it left out.
#[test]
fn report_leaves_out_an_unfinished_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("metrics.jsonl");
    let lines = "{\"step\":0,\"rollout/score/mean\":1}\n{\"step\":1,\"rollout/score/mean\":2}\n";
    std::fs::write(&file, format!("{lines}{{\"step\":2,\"rollout/sc")).unwrap();
    let out = roll_flow(&["report", dir.path().to_str().unwrap()]);
    assert_ok(&out);
    let note = format!("note: {}:3: an unfinished last line", file.display());
    assert!(stderr(&out).contains(&note), "{}", stderr(&out));
    assert!(!pngs_in(&dir.path().join("plots")).is_empty());
}

/// `play --record` into a folder it cannot make stops before the episode, not after it.
#[test]
fn play_refuses_a_record_folder_it_cannot_make_before_playing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("taken");
    std::fs::write(&file, "").unwrap();
    let out = roll_flow(&[
        "play",
        "FrozenLake(size: 4)",
        "--record",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "--record {}: cannot make the folder",
            file.display()
        )),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("\"obs\""),
        "nothing played"
    );
}

#[test]
fn play_policy_shows_each_turn_with_its_reply_action_reward_and_logprobs() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    assert_ok(&run("pipelines/frozen_lake_starpo.ron", &run_dir, &[]));
    let run_arg = run_dir.to_str().unwrap();
    let record = dir.path().join("watch");
    let out = roll_flow(&[
        "play",
        "--policy",
        run_arg,
        "--checkpoint",
        "1",
        "--record",
        record.to_str().unwrap(),
    ]);
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    for part in [
        "checkpoints/step_1, greedy",
        "env val seed 10000",
        "--- turn 1 ---\nobservation (user message):\n",
        "reply: <answer>",
        "action: \"",
        "reward: ",
        "logprobs:\n  \"<answer>\"",
        "(sum)",
        "success: ",
    ] {
        assert!(text.contains(part), "missing {part:?} in:\n{text}");
    }
    assert!(record.join("val_seed10000.gif").is_file());

    let newest = roll_flow(&["play", "--policy", run_arg, "--seed", "3"]);
    assert_ok(&newest);
    let newest = String::from_utf8(newest.stdout).unwrap();
    assert!(newest.contains("checkpoints/step_2") && newest.contains("seed 3\n"));

    // A run made on a GPU in bf16 plays on the CPU in f32 (the CPU refuses half
    // precision): the same episode as this f32 run's.
    let saved = run_dir.join("pipeline.ron");
    let f32_text = std::fs::read_to_string(&saved).unwrap();
    let gpu_text = f32_text
        .replacen("device: Cpu,", "device: Cuda(0),", 1)
        .replacen("\"policy\": (", "\"policy\": (precision: Bf16, ", 1);
    assert!(gpu_text.contains("device: Cuda(0)") && gpu_text.contains("precision: Bf16"));
    std::fs::write(&saved, gpu_text).unwrap();
    let from_gpu = roll_flow(&["play", "--policy", run_arg, "--seed", "3"]);
    std::fs::write(&saved, f32_text).unwrap();
    assert_ok(&from_gpu);
    assert_eq!(String::from_utf8(from_gpu.stdout).unwrap(), newest);

    let out = roll_flow(&["play", "--policy", run_arg, "--checkpoint", "9"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("saved steps: 1, 2"),
        "{}",
        stderr(&out)
    );
    let out = roll_flow(&["play", "--policy", run_arg, "--env", "nope"]);
    assert!(
        stderr(&out).contains("it has: train, val"),
        "{}",
        stderr(&out)
    );
    let out = roll_flow(&["play", "FrozenLake(size: 4)", "--checkpoint", "1"]);
    assert_eq!(out.status.code(), Some(2), "--checkpoint without --policy");
}

#[test]
fn graph_png_draws_the_pipeline_or_says_graphviz_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("graph.png");
    let out = roll_flow(&[
        "graph",
        "pipelines/frozen_lake_ppo.ron",
        "--png",
        png.to_str().unwrap(),
    ]);
    assert_ok(&out);
    let (w, h, colours) = decode_png(&png);
    assert!(w > 100 && h > 100 && colours.len() > 2);

    let out = Command::new(env!("CARGO_BIN_EXE_roll-flow"))
        .args(["graph", "pipelines/frozen_lake_ppo.ron", "--png"])
        .arg(dir.path().join("none.png"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PATH", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("graphviz's `dot` is not on PATH"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("none.png").exists());
}

#[test]
fn an_export_loads_back_with_the_logits_of_the_trained_policy() {
    use roll_flow_engine::WorkerInfo;
    use roll_flow_model::prompt_logits::{logits_of, prompt_logits_in_model_dir};
    use roll_flow_model::quick_generate::prompt_text;
    use roll_flow_model::CpuBackend;
    use roll_flow_operators::catalog::RollFlow;
    use roll_flow_operators::registry::run_plan;
    use roll_flow_operators::runtime::Runtime;

    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    assert_ok(&run("pipelines/frozen_lake_starpo.ron", &run_dir, &[]));
    let hf = dir.path().join("hf");
    let out = export_hf(&run_dir, &hf);
    assert_ok(&out);
    for file in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ] {
        assert!(hf.join(file).is_file(), "export lacks {file}");
    }
    // A second export replaces the first; one into the run directory is refused and
    // leaves it as it was.
    let export_to = |out: &Path| export_hf(&run_dir, out);
    assert_ok(&export_to(&hf));
    assert_eq!(
        files_under(&hf),
        [
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json"
        ]
    );
    let before = files_under(&run_dir);
    for out in [run_dir.clone(), run_dir.join("hf")] {
        let refused = export_to(&out);
        assert_eq!(refused.status.code(), Some(1));
        assert!(
            stderr(&refused).contains("lies inside the run directory"),
            "{}",
            stderr(&refused)
        );
    }
    assert_eq!(
        files_under(&run_dir),
        before,
        "the run directory is untouched"
    );

    // The policy as a resumed run would restore it: burn records of the newest checkpoint.
    let overrides = [format!("out_dir={run_dir:?}")];
    let loaded =
        roll_flow_engine::spec::load::<RollFlow>(&run_dir.join("pipeline.ron"), &overrides)
            .unwrap();
    let worker = WorkerInfo::single(2);
    let plan = std::sync::Arc::new(run_plan(&loaded.pipeline));
    let mut runtime = Runtime::<CpuBackend>::new(plan, worker).unwrap();
    let policy = runtime.policy("policy").unwrap();
    let policy = policy.borrow();
    let device = Default::default();
    let exported =
        prompt_logits_in_model_dir::<CpuBackend>(&hf, "__P_\n_OG_", true, &device).unwrap();
    let prompt = prompt_text(&policy.tokenizer, "__P_\n_OG_", true).unwrap();
    let ids = policy.tokenizer.encode(&prompt).unwrap();
    assert_eq!(
        exported.prompt_ids, ids,
        "the exported tokenizer tokenizes alike"
    );
    let trained = logits_of(policy.inference(), &ids, &device);
    let diff = trained
        .iter()
        .flatten()
        .zip(exported.logits.iter().flatten())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert_eq!(trained.len(), exported.logits.len());
    assert!(diff < 1e-6, "max |Δlogit| = {diff}");
}

/// A checkpoint whose weights file is damaged is refused by `export`, naming the file and
/// an earlier checkpoint as the fix, and no export is written.
#[test]
fn export_refuses_a_damaged_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    assert_ok(&run(
        "pipelines/frozen_lake_starpo.ron",
        &run_dir,
        &["--steps", "1"],
    ));
    let weights = run_dir.join("checkpoints/step_1/models/policy/hf/model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let hf = dir.path().join("hf");
    let out = export_hf(&run_dir, &hf);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "{}: not a valid safetensors file: the file is {} bytes, not the length its \
             header describes (cut short?); the checkpoint is damaged: export an earlier one \
             (`--checkpoint STEP`)",
            weights.display(),
            bytes.len() / 2
        )),
        "{}",
        stderr(&out)
    );
    assert!(!hf.exists(), "nothing exported");
}

/// `roll-flow export RUN_DIR --hf OUT`.
fn export_hf(run_dir: &Path, out: &Path) -> std::process::Output {
    roll_flow(&[
        "export",
        run_dir.to_str().unwrap(),
        "--hf",
        out.to_str().unwrap(),
    ])
}
