//! Resuming checks that a checkpoint's weights fit the model the pipeline builds before
//! they are loaded: burn's `load_record` panics on a tensor of another shape, e.g. after
//! `--resume RUN --set models.policy.arch=Tiny(layers: 3, ..)` on a 2-layer run.
//!
//! The checkpoint's architecture is the `config.json` the checkpoint node writes next to
//! the weights (`hf/config.json`, see `crate::checkpoint`).

use std::path::Path;

use roll_flow_model::Qwen2Config;

/// The fields that fix the shapes of a Qwen2 model's weights, with their values.
fn shape_fields(config: &Qwen2Config) -> [(&'static str, String); 8] {
    [
        ("vocab_size", config.vocab_size.to_string()),
        ("hidden_size", config.hidden_size.to_string()),
        ("intermediate_size", config.intermediate_size.to_string()),
        ("num_hidden_layers", config.num_hidden_layers.to_string()),
        (
            "num_attention_heads",
            config.num_attention_heads.to_string(),
        ),
        ("num_key_value_heads", config.kv_heads().to_string()),
        ("head_dim", config.head_dim().to_string()),
        (
            "tie_word_embeddings",
            config.tie_word_embeddings.to_string(),
        ),
    ]
}

/// Compares the architecture saved in `config_json` with `built`, the model the pipeline
/// asks for; an error names the file and every differing field. A checkpoint without the
/// file (written before it was saved) is not checked.
pub fn check_saved_architecture(config_json: &Path, built: &Qwen2Config) -> Result<(), String> {
    if !config_json.is_file() {
        return Ok(());
    }
    let saved = Qwen2Config::from_json_file(config_json).map_err(|e| e.to_string())?;
    let differences: Vec<String> = shape_fields(&saved)
        .into_iter()
        .zip(shape_fields(built))
        .filter(|((_, s), (_, b))| s != b)
        .map(|((field, s), (_, b))| {
            format!("checkpoint has {field} {s}, the pipeline asks for {b}")
        })
        .collect();
    if differences.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{}: the checkpoint's model does not fit the pipeline's: {}; resume with the \
         architecture the run was started with",
        config_json.display(),
        differences.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use roll_flow_model::TinyArch;

    #[test]
    fn every_differing_shape_field_is_named_and_a_missing_file_passes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let two = Qwen2Config::tiny(&TinyArch::default(), 100);
        assert_eq!(check_saved_architecture(&path, &two), Ok(()), "no file");
        std::fs::write(&path, two.to_json_string()).unwrap();
        assert_eq!(check_saved_architecture(&path, &two), Ok(()));
        let wider = Qwen2Config::tiny(
            &TinyArch {
                layers: 3,
                heads: 8,
                ..TinyArch::default()
            },
            100,
        );
        // Default Tiny: 2 layers, dim 128, 4 heads of 32; 8 heads of 128 / 8 = 16.
        let err = check_saved_architecture(&path, &wider).unwrap_err();
        assert_eq!(
            err,
            format!(
                "{}: the checkpoint's model does not fit the pipeline's: checkpoint has \
                 num_hidden_layers 2, the pipeline asks for 3; checkpoint has \
                 num_attention_heads 4, the pipeline asks for 8; checkpoint has \
                 num_key_value_heads 4, the pipeline asks for 8; checkpoint has head_dim 32, \
                 the pipeline asks for 16; resume with the architecture the run was started with",
                path.display()
            )
        );
    }
}
