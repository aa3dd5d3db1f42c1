//! ROLL's `model_args.disable_gradient_checkpointing` as a trained model's
//! `gradient_checkpointing:`.
//!
//! ROLL's training workers (`actor_train`, `critic`) turn on the model's gradient
//! checkpointing unless `model_args.disable_gradient_checkpointing` is true (its
//! `ModelArguments` default is false, after LLaMA-Factory's), so an imported policy or
//! critic gets `gradient_checkpointing: true` unless the file turns it off: the same trade
//! (each layer's input kept, the layers run again in the backward pass) and the same
//! gradients. One exception: LoRA with dropout, which roll-flow refuses with checkpointing
//! (the second pass would draw other dropout masks; torch's checkpoint replays its RNG
//! state), is written without it and reported.

use super::config_reader::ConfigReader;
use super::import_error::ImportError;
use super::roll_keys::NoticeKind;

/// `, gradient_checkpointing: true` for `worker`'s trained model, or empty when its
/// `model_args.disable_gradient_checkpointing` is true or `lora_dropout` is above 0.
pub fn gradient_checkpointing(
    r: &mut ConfigReader,
    worker: &str,
    lora_dropout: f64,
) -> Result<&'static str, ImportError> {
    let key = format!("{worker}.model_args.disable_gradient_checkpointing");
    if r.flag(&key)?.unwrap_or(false) {
        return Ok("");
    }
    if lora_dropout > 0.0 {
        r.notice(
            NoticeKind::NotSupported,
            &key,
            format!(
                "false (ROLL's default) with lora_dropout {lora_dropout}: written without \
                 `gradient_checkpointing`, which roll-flow refuses beside LoRA dropout"
            ),
        );
        return Ok("");
    }
    Ok(", gradient_checkpointing: true")
}
