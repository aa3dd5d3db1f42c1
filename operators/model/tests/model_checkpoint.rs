//! Saving and loading Hugging Face directories: a saved checkpoint loads back bit-identically,
//! and broken directories fail with errors that say what is wrong.

mod common;

use std::path::Path;

use common::{device, fixture, B};
use roll_flow_model::build::load_model_path;
use roll_flow_model::config::{Qwen2Config, TinyArch};
use roll_flow_model::hf::{load_causal_lm, save_causal_lm};
use roll_flow_model::weights::TensorSink;
use roll_flow_model::Qwen2CausalLm;

fn tensors_of(model: &Qwen2CausalLm<B>) -> Vec<(String, Vec<usize>, Vec<u32>)> {
    let mut sink = TensorSink::default();
    model.save(&mut sink);
    sink.tensors
        .into_iter()
        .map(|(name, shape, values)| (name, shape, values.iter().map(|v| v.to_bits()).collect()))
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn load_error(dir: &Path) -> String {
    load_causal_lm::<B>(dir, &device()).unwrap_err().to_string()
}

#[test]
fn saved_checkpoint_loads_back_bit_identically() {
    for tied in [true, false] {
        let tiny = TinyArch {
            layers: 2,
            dim: 32,
            heads: 4,
            kv_heads: Some(2),
            tie_embeddings: tied,
            ..TinyArch::default()
        };
        let config = Qwen2Config::tiny(&tiny, 50);
        let model = Qwen2CausalLm::<B>::random(&config, 7, &device());
        let dir = tempfile::tempdir().unwrap();
        save_causal_lm(&model, dir.path()).unwrap();
        // Saved atomically twice (a re-save replaces the files): no temporary is left.
        save_causal_lm(&model, dir.path()).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["config.json", "model.safetensors"]);
        let loaded = load_causal_lm::<B>(dir.path(), &device()).unwrap();
        assert_eq!(loaded.config.tie_word_embeddings, tied);
        assert_eq!(tensors_of(&loaded), tensors_of(&model));
    }
}

/// Qwen2's optional `head_dim` (heads wider than `hidden_size / num_attention_heads`) shapes
/// the attention projections and survives the round trip through config.json.
#[test]
fn explicit_head_dim_shapes_the_projections_and_loads_back() {
    let tiny = TinyArch {
        layers: 1,
        dim: 32,
        heads: 4,
        kv_heads: Some(2),
        head_dim: Some(16),
        ..TinyArch::default()
    };
    let model = Qwen2CausalLm::<B>::random(&Qwen2Config::tiny(&tiny, 50), 7, &device());
    let dir = tempfile::tempdir().unwrap();
    save_causal_lm(&model, dir.path()).unwrap();
    let loaded = load_causal_lm::<B>(dir.path(), &device()).unwrap();
    assert_eq!(loaded.config.head_dim, Some(16));
    let tensors = tensors_of(&loaded);
    let shape = |suffix: &str| {
        let found = tensors.iter().find(|(name, ..)| name.ends_with(suffix));
        found.unwrap_or_else(|| panic!("no {suffix}")).1.clone()
    };
    // PyTorch layout [out, in]: 4 query heads and 2 key/value heads of width 16.
    assert_eq!(shape("self_attn.q_proj.weight"), vec![64, 32]);
    assert_eq!(shape("self_attn.k_proj.weight"), vec![32, 32]);
    assert_eq!(shape("self_attn.o_proj.weight"), vec![32, 64]);
    assert_eq!(tensors, tensors_of(&model));
}

#[test]
fn bf16_checkpoint_resaved_as_f32_loads_back_bit_identically() {
    let model = load_causal_lm::<B>(&fixture("tiny_qwen2_sharded_bf16"), &device()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    save_causal_lm(&model, dir.path()).unwrap();
    let loaded = load_causal_lm::<B>(dir.path(), &device()).unwrap();
    assert_eq!(tensors_of(&loaded), tensors_of(&model));
}

#[test]
fn missing_directory_and_config_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("nope");
    assert!(
        load_error(&absent).ends_with("nope does not exist"),
        "{}",
        load_error(&absent)
    );
    // A relative path is said to be read from the working directory; a file is no directory.
    let relative = load_error(Path::new("nope/model"));
    assert!(
        relative.contains(
            "does not exist (a relative model path is read from the directory \
                           roll-flow runs in,"
        ),
        "{relative}"
    );
    let file = dir.path().join("model.gguf");
    std::fs::write(&file, b"GGUF").unwrap();
    assert!(load_error(&file).ends_with(
        "is a file; `HfDir(..)` names a directory holding \
                                         config.json (a .gguf file is `Gguf(..)`)"
    ));
    assert!(roll_flow_model::gguf::GgufModel::open(dir.path())
        .err()
        .unwrap()
        .to_string()
        .contains("is a directory; `Gguf(..)` names a .gguf file"));
    copy_dir(&fixture("tiny_qwen2"), dir.path());
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    // The directory also holds model.gguf: the error names it as the model to load.
    let message = load_error(dir.path());
    assert!(message.contains("missing config.json"), "{message}");
    let named = format!("`--model FILE`): {}", file.display());
    assert!(
        message.contains("a GGUF model is named by its file") && message.contains(&named),
        "{message}"
    );
    std::fs::remove_file(&file).unwrap();
    let message = load_error(dir.path());
    assert!(message.ends_with("missing config.json (the model's architecture)"));
}

#[test]
fn a_device_is_neither_model_kind() {
    let device_file = Path::new("/dev/null");
    let neither = "is neither a file nor a directory (a device, pipe or socket)";
    assert!(load_error(device_file).contains(neither));
    let gguf = roll_flow_model::gguf::GgufModel::open(device_file);
    assert!(gguf.err().unwrap().to_string().contains(neither));
    let path = load_model_path::<B>(device_file, &device()).err().unwrap();
    assert!(path.to_string().contains(neither), "{path}");
    // A missing path named like a GGUF file is reported as a missing file, not directory.
    let missing = load_model_path::<B>(Path::new("/nonexistent/m.gguf"), &device());
    let message = missing.err().unwrap().to_string();
    assert_eq!(message, "/nonexistent/m.gguf: does not exist");
}

#[test]
fn missing_weights_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("tiny_qwen2"), dir.path());
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let message = load_error(dir.path());
    assert!(
        message.contains("missing model.safetensors or model.safetensors.index.json"),
        "{message}"
    );
}

#[test]
fn missing_shard_is_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("tiny_qwen2_sharded_bf16"), dir.path());
    std::fs::remove_file(dir.path().join("model-00003-of-00005.safetensors")).unwrap();
    let message = load_error(dir.path());
    assert!(
        message.contains("missing model-00003-of-00005.safetensors"),
        "{message}"
    );
}

/// Rewrites `dir/model.safetensors` through `edit` on its `(name, shape, f32 values)` list.
fn rewrite(dir: &Path, edit: impl FnOnce(&mut Vec<(String, Vec<usize>, Vec<f32>)>)) {
    let model = load_causal_lm::<B>(dir, &device()).unwrap();
    let mut sink = TensorSink::default();
    model.save(&mut sink);
    edit(&mut sink.tensors);
    roll_flow_model::hf::save_model_dir(dir, &model.config, &sink).unwrap();
}

#[test]
fn missing_tensors_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("tiny_qwen2"), dir.path());
    rewrite(dir.path(), |tensors| {
        tensors.retain(|(n, _, _)| {
            n != "model.layers.1.self_attn.k_proj.bias" && n != "model.norm.weight"
        })
    });
    let message = load_error(dir.path());
    assert!(
        message
            .contains("missing tensors: model.layers.1.self_attn.k_proj.bias, model.norm.weight"),
        "{message}"
    );
}

#[test]
fn unexpected_tensors_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("tiny_qwen2"), dir.path());
    rewrite(dir.path(), |tensors| {
        tensors.push(("model.extra.weight".into(), vec![2], vec![1.0, 2.0]))
    });
    let message = load_error(dir.path());
    assert!(message.contains("unexpected tensors"), "{message}");
    assert!(message.contains("model.extra.weight"), "{message}");
}

#[test]
fn wrong_shape_says_expected_and_found() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("tiny_qwen2"), dir.path());
    rewrite(dir.path(), |tensors| {
        let entry = tensors
            .iter_mut()
            .find(|(n, _, _)| n == "model.layers.0.mlp.up_proj.weight")
            .unwrap();
        entry.1 = vec![64, 128];
    });
    let message = load_error(dir.path());
    assert!(
        message.contains(
            "tensor model.layers.0.mlp.up_proj.weight has shape [64, 128], expected [128, 64]"
        ),
        "{message}"
    );
}

#[test]
fn truncated_safetensors_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("tiny_qwen2"), dir.path());
    let path = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let message = load_error(dir.path());
    assert!(
        message.contains("model.safetensors: not a valid safetensors file"),
        "{message}"
    );
    std::fs::write(&path, &bytes[..4]).unwrap();
    let message = load_error(dir.path());
    assert!(
        message.contains("not a valid safetensors file"),
        "{message}"
    );
}

#[test]
fn unsupported_dtype_is_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("tiny_qwen2"), dir.path());
    let path = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let tensors = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let converted: Vec<(String, Vec<usize>, safetensors::Dtype, Vec<u8>)> = tensors
        .iter()
        .map(|(name, view)| {
            if name == "model.norm.weight" {
                // The same values as f64: a dtype the loader does not take.
                let values: Vec<u8> = view
                    .data()
                    .chunks_exact(4)
                    .flat_map(|c| {
                        (f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).to_le_bytes()
                    })
                    .collect();
                (
                    name.to_string(),
                    view.shape().to_vec(),
                    safetensors::Dtype::F64,
                    values,
                )
            } else {
                (
                    name.to_string(),
                    view.shape().to_vec(),
                    view.dtype(),
                    view.data().to_vec(),
                )
            }
        })
        .collect();
    let views: Vec<_> = converted
        .iter()
        .map(|(n, s, d, b)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap(),
            )
        })
        .collect();
    std::fs::write(&path, safetensors::serialize(views, None).unwrap()).unwrap();
    let message = load_error(dir.path());
    assert!(
        message.contains("tensor model.norm.weight has dtype F64; supported: BF16, F16, F32"),
        "{message}"
    );
}

#[test]
fn unsupported_config_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("tiny_qwen2"), dir.path());
    let path = dir.path().join("config.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\""),
    )
    .unwrap();
    let message = load_error(dir.path());
    assert!(
        message.contains("hidden_act \"gelu\" is not supported"),
        "{message}"
    );
    std::fs::write(&path, "{ not json").unwrap();
    let message = load_error(dir.path());
    assert!(message.contains("config.json: invalid JSON"), "{message}");
}
