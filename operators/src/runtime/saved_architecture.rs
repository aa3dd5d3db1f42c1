//! Resuming checks that a checkpoint's weights fit the model the pipeline builds before
//! they are loaded: burn's `load_record` panics on a tensor of another shape, e.g. after
//! `--resume RUN --set models.policy.arch=Tiny(layers: 3, ..)` on a 2-layer run.
//!
//! The checkpoint's architecture is the `config.json` the checkpoint node writes next to
//! the weights (`hf/config.json`, see `crate::checkpoint`). Its `lora:` settings are those
//! of the PEFT adapter it writes beside them (`peft/adapter_config.json`): adapters of
//! another target, scale or dropout would load without a shape error and train or merge
//! as something else, so they are compared too ([`check_saved_lora`]).

use std::path::Path;

use crate::run_layout::{PEFT_DIR, TRAINED_FILE};
use roll_flow_model::hf::peft_adapter::ADAPTER_CONFIG;
use roll_flow_model::hf::read_peft_settings;
use roll_flow_model::lora_spec::LoraSpec;
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

/// Compares the `lora:` settings of the PEFT adapter a model's checkpoint folder `dir`
/// holds (its checkpoint writes one under `peft/` when it has adapters) with `built`,
/// those of the model the pipeline asks for; an error names the folder, both settings and
/// the fix.
pub fn check_saved_lora(dir: &Path, built: Option<&LoraSpec>) -> Result<(), String> {
    let peft = dir.join(PEFT_DIR);
    let saved = read_peft_settings(&peft).map_err(|e| e.to_string())?;
    let problem = match (&saved, built) {
        (None, None) => return Ok(()),
        (Some(saved), Some(built)) if saved.same_as(built) => return Ok(()),
        (Some(saved), Some(built)) => format!(
            "the checkpoint's adapters were trained with `lora: {saved}`, the pipeline's \
             model has `lora: {built}`; use the `lora:` the run was started with"
        ),
        (Some(saved), None) => format!(
            "the checkpoint's adapters were trained with `lora: {saved}`, the pipeline's \
             model has no `lora:`; use the `lora:` the run was started with"
        ),
        (None, Some(_)) if dir.join(TRAINED_FILE).is_file() => format!(
            "no {ADAPTER_CONFIG}, which a checkpoint of adapters holds, so what they were \
             trained with is unknown; the checkpoint is incomplete: move its folder out of \
             checkpoints/ to use the one before it"
        ),
        (None, Some(built)) => format!(
            "no adapters here: the checkpoint's model trained without `lora:`, the \
             pipeline's has `lora: {built}`; remove it to resume (to train adapters on \
             these weights, `export --hf` them and start a run from that directory)"
        ),
    };
    Err(format!("{}: {problem}", peft.display()))
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

    /// Every pairing of saved and built settings, the adapter config written as PEFT's.
    #[test]
    fn lora_settings_other_than_the_checkpoints_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let peft = dir.path().join(PEFT_DIR);
        let spec = LoraSpec {
            rank: 4,
            alpha: 8.0,
            targets: vec!["q_proj".into(), "v_proj".into()],
            dropout: 0.0,
        };
        assert_eq!(check_saved_lora(dir.path(), None), Ok(()), "nothing saved");
        let err = check_saved_lora(dir.path(), Some(&spec)).unwrap_err();
        assert!(err.contains("trained without `lora:`"), "{err}");
        std::fs::write(dir.path().join(TRAINED_FILE), b"").unwrap();
        let err = check_saved_lora(dir.path(), Some(&spec)).unwrap_err();
        assert!(
            err.contains("no adapter_config.json") && err.contains("incomplete"),
            "{err}"
        );

        std::fs::create_dir(&peft).unwrap();
        let config = r#"{"peft_type": "LORA", "r": 4, "lora_alpha": 8.0, "lora_dropout": 0.0,
            "target_modules": ["v_proj", "q_proj"], "bias": "none"}"#;
        std::fs::write(peft.join(ADAPTER_CONFIG), config).unwrap();
        assert_eq!(
            check_saved_lora(dir.path(), Some(&spec)),
            Ok(()),
            "targets as a set"
        );
        let err = check_saved_lora(dir.path(), None).unwrap_err();
        assert!(err.contains("the pipeline's model has no `lora:`"), "{err}");
        let wider = LoraSpec {
            rank: 8,
            ..spec.clone()
        };
        assert_eq!(
            check_saved_lora(dir.path(), Some(&wider)).unwrap_err(),
            format!(
                "{}: the checkpoint's adapters were trained with `lora: (rank: 4, alpha: 8, \
                 targets: [\"v_proj\", \"q_proj\"], dropout: 0)`, the pipeline's model has \
                 `lora: (rank: 8, alpha: 8, targets: [\"q_proj\", \"v_proj\"], dropout: 0)`; \
                 use the `lora:` the run was started with",
                peft.display()
            )
        );
        std::fs::write(peft.join(ADAPTER_CONFIG), "{").unwrap();
        let err = check_saved_lora(dir.path(), Some(&spec)).unwrap_err();
        assert!(err.contains("invalid JSON"), "{err}");
    }
}
