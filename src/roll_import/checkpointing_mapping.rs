//! ROLL's `model_args.disable_gradient_checkpointing` as a trained model's
//! `gradient_checkpointing:`.
//!
//! ROLL's training workers (`actor_train`, `critic`) turn on the model's gradient
//! checkpointing unless `model_args.disable_gradient_checkpointing` is true (its
//! `ModelArguments` default is false, after LLaMA-Factory's), so an imported policy or
//! critic gets `gradient_checkpointing: true` unless the file turns it off: the same trade
//! (each layer's input kept, the layers run again in the backward pass) and the same
//! gradients, LoRA's dropout included (a layer's second run draws its first run's masks,
//! as torch's checkpoint replays its RNG state).

use super::config_reader::ConfigReader;
use super::import_error::ImportError;

/// `, gradient_checkpointing: true` for `worker`'s trained model, or empty when its
/// `model_args.disable_gradient_checkpointing` is true.
pub fn gradient_checkpointing(
    r: &mut ConfigReader,
    worker: &str,
) -> Result<&'static str, ImportError> {
    let key = format!("{worker}.model_args.disable_gradient_checkpointing");
    match r.flag(&key)?.unwrap_or(false) {
        true => Ok(""),
        false => Ok(", gradient_checkpointing: true"),
    }
}
