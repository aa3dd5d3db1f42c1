//! A LoRA policy through the binary: the default pipeline, shrunk, with
//! `lora: (rank: 2, .., dropout: 0.1)` trains its adapters (the checkpoint's PEFT directory
//! holds `A` and `B` of every targeted layer, `B` no longer zero), resumes exactly, gives
//! the same metrics with gradient checkpointing (the dropout masks are drawn from the step's
//! seed, and again in a checkpointed layer's second run), and exports as a
//! PEFT adapter (`--peft`) and as a merged HF model (`--hf`, the base rebuilt and the
//! adapters folded in: checkpoints hold no base); `--peft` of a run without adapters is
//! refused with the fix.

mod common;

use std::path::Path;

use common::{assert_ok, entry_names, roll_flow, run, untimed};
use serde_json::Value;

const LORA: &str =
    "models.policy.lora=(rank: 2, alpha: 4, targets: [\"q_proj\", \"v_proj\", \"down_proj\"], dropout: 0.1)";
const PIPELINE: &str = "pipelines/frozen_lake_starpo.ron";

/// A safetensors file's tensors: name, shape and F32 values.
fn safetensors(path: &Path) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, Value> =
        serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let data = &bytes[8 + header_len..];
    let mut tensors: Vec<_> = header
        .into_iter()
        .filter(|(name, _)| name != "__metadata__")
        .map(|(name, info)| {
            assert_eq!(info["dtype"], "F32", "{name}");
            let shape = info["shape"].as_array().unwrap();
            let shape: Vec<usize> = shape.iter().map(|d| d.as_u64().unwrap() as usize).collect();
            let offsets = info["data_offsets"].as_array().unwrap();
            let (start, end) = (
                offsets[0].as_u64().unwrap() as usize,
                offsets[1].as_u64().unwrap() as usize,
            );
            let values = data[start..end]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (name, shape, values)
        })
        .collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    tensors
}

#[test]
fn a_lora_policy_trains_its_adapters_resumes_and_exports_for_peft() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, split) = (dir.path().join("whole"), dir.path().join("split"));
    assert_ok(&run(PIPELINE, &whole, &["--set", LORA]));
    assert_ok(&run(
        PIPELINE,
        &split,
        &["--set", LORA, "--stop-after", "1"],
    ));
    assert_ok(&roll_flow(&["run", "--resume", split.to_str().unwrap()]));
    assert_eq!(
        untimed(&whole),
        untimed(&split),
        "the resumed run's metrics"
    );
    let checkpointed = dir.path().join("checkpointed");
    let on = "models.policy.gradient_checkpointing=true";
    assert_ok(&run(PIPELINE, &checkpointed, &["--set", LORA, "--set", on]));
    assert_eq!(
        untimed(&whole),
        untimed(&checkpointed),
        "the checkpointed run's metrics"
    );

    // The checkpoint holds the adapters, not the frozen base: their parameters (with the
    // ids the optimizer state is keyed by) and PEFT's copy; no model.bin, and of hf/ the
    // config alone.
    let folder = whole.join("checkpoints/step_2/models/policy");
    assert_eq!(
        entry_names(&folder),
        [
            "hf",
            "optimizer.bin",
            "peft",
            "trained.safetensors",
            "version"
        ]
    );
    let peft = folder.join("peft");
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(peft.join("adapter_config.json")).unwrap())
            .unwrap();
    assert_eq!(config["peft_type"], "LORA");
    assert_eq!(config["task_type"], "CAUSAL_LM");
    assert_eq!(
        (config["r"].as_u64(), config["lora_alpha"].as_f64()),
        (Some(2), Some(4.0))
    );
    assert_eq!(config["lora_dropout"].as_f64(), Some(0.1));
    assert_eq!(
        config["target_modules"],
        serde_json::json!(["q_proj", "v_proj", "down_proj"])
    );
    let tensors = safetensors(&peft.join("adapter_model.safetensors"));
    let names: Vec<&str> = tensors.iter().map(|t| t.0.as_str()).collect();
    let layer = "base_model.model.model.layers.0";
    assert_eq!(
        names,
        [
            format!("{layer}.mlp.down_proj.lora_A.weight"),
            format!("{layer}.mlp.down_proj.lora_B.weight"),
            format!("{layer}.self_attn.q_proj.lora_A.weight"),
            format!("{layer}.self_attn.q_proj.lora_B.weight"),
            format!("{layer}.self_attn.v_proj.lora_A.weight"),
            format!("{layer}.self_attn.v_proj.lora_B.weight"),
        ]
    );
    for (name, shape, values) in &tensors {
        let rank_at = if name.contains("lora_A") { 0 } else { 1 };
        assert_eq!(shape[rank_at], 2, "{name}: {shape:?}");
        assert!(
            values.iter().any(|v| *v != 0.0),
            "{name} is all zero: it did not train"
        );
    }

    let out = dir.path().join("adapter");
    let export = |format: &str, run_dir: &Path, out: &Path| {
        roll_flow(&[
            "export",
            run_dir.to_str().unwrap(),
            format,
            out.to_str().unwrap(),
        ])
    };
    assert_ok(&export("--peft", &whole, &out));
    assert_eq!(
        std::fs::read(out.join("adapter_model.safetensors")).unwrap(),
        std::fs::read(peft.join("adapter_model.safetensors")).unwrap()
    );
    assert!(out.join("adapter_config.json").is_file());
    let merged = dir.path().join("merged");
    assert_ok(&export("--hf", &whole, &merged));
    let weights = safetensors(&merged.join("model.safetensors"));
    assert!(
        weights.iter().all(|t| !t.0.contains("lora")),
        "the HF export holds merged weights only"
    );

    let plain = dir.path().join("plain");
    assert_ok(&run(PIPELINE, &plain, &["--steps", "1"]));
    let refused = export("--peft", &plain, &dir.path().join("none"));
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("model `policy` has no `lora:` in the run's `models:`")
            && stderr.contains("export the whole model with --hf"),
        "{stderr}"
    );
}

/// Adapters of other targets or another scale have the same shapes (k and v, gate and up),
/// so they would load and train or merge as something else: a resume or export under
/// `lora:` settings other than the checkpoint's is refused with both settings named, as is
/// adding `lora:` to a run that trained without; the run itself is left to resume.
#[test]
fn a_resume_or_export_under_other_lora_settings_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lora = |targets: &str, alpha: u32| {
        format!("models.policy.lora=(rank: 2, alpha: {alpha}, targets: [{targets}])")
    };
    let qv = "\"q_proj\", \"v_proj\"";
    let trained = "`lora: (rank: 2, alpha: 4, targets: [\"q_proj\", \"v_proj\"], dropout: 0)`";
    let split = dir.path().join("split");
    let set = lora(qv, 4);
    assert_ok(&run(
        PIPELINE,
        &split,
        &["--set", &set, "--stop-after", "1"],
    ));
    let resume = |extra: &[&str]| {
        let mut args = vec!["run", "--resume", split.to_str().unwrap()];
        args.extend(extra);
        roll_flow(&args)
    };
    let refused = |out: std::process::Output, wanted: &str| {
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(wanted), "{stderr}");
    };
    let peft = split.join("checkpoints/step_1/models/policy/peft");
    for (other, named) in [
        (
            lora("\"k_proj\", \"o_proj\"", 4),
            "alpha: 4, targets: [\"k_proj\", \"o_proj\"]",
        ),
        (lora(qv, 64), "alpha: 64, targets: [\"q_proj\", \"v_proj\"]"),
    ] {
        refused(
            resume(&["--set", &other]),
            &format!(
                "model `policy`: {}: the checkpoint's adapters were trained with {trained}, the \
                 pipeline's model has `lora: (rank: 2, {named}, dropout: 0)`; use the `lora:` \
                 the run was started with",
                peft.display()
            ),
        );
    }
    // Export reads the settings from the run's pipeline.ron: edited, it is refused too.
    let pipeline = split.join("pipeline.ron");
    let text = std::fs::read_to_string(&pipeline).unwrap();
    std::fs::write(&pipeline, text.replace("alpha: 4", "alpha: 64")).unwrap();
    let out = dir.path().join("merged");
    let export = || {
        roll_flow(&[
            "export",
            split.to_str().unwrap(),
            "--hf",
            out.to_str().unwrap(),
        ])
    };
    refused(
        export(),
        &format!("the checkpoint's adapters were trained with {trained}"),
    );
    std::fs::write(&pipeline, text).unwrap();
    assert_ok(&export());
    assert_ok(&resume(&[]));

    let plain = dir.path().join("plain");
    assert_ok(&run(PIPELINE, &plain, &["--stop-after", "1"]));
    let added = roll_flow(&["run", "--resume", plain.to_str().unwrap(), "--set", &set]);
    refused(
        added,
        "no adapters here: the checkpoint's model trained without `lora:`, the pipeline's has \
         `lora: (rank: 2, alpha: 4",
    );
}
