//! ROLL's `model_args.dtype` as a model's `precision:`.
//!
//! ROLL (`roll/configs/model_args.py`) loads each worker's model in its `dtype`: `fp32`,
//! `bf16` (the default) or `fp16`; `null` keeps config.json's `torch_dtype`. roll-flow keeps
//! parameters, gradients and optimizer state in f32 and computes in the model's
//! `precision:` (on a GPU, `Bf16` is bf16 activations and tensor-core products, as ROLL's
//! bf16 workers beside their f32 optimizer copy), so `bf16` becomes `precision: Bf16`,
//! `fp16` `precision: F16` (reported: roll-flow has no loss scaling) and `fp32` the default,
//! F32. Half precision is refused on the CPU, so a CPU run of an imported file sets
//! `precision=F32` with `device=Cpu`.

use super::config_reader::ConfigReader;
use super::import_error::ImportError;
use super::roll_keys::NoticeKind;
use super::yaml_value::Value;

/// ROLL's `dtype` when a worker's `model_args` leaves it out.
const ROLL_DEFAULT: &str = "bf16";

/// `, precision: ..` for `worker`'s model (empty for f32), from `worker.model_args.dtype`.
pub fn model_precision(r: &mut ConfigReader, worker: &str) -> Result<&'static str, ImportError> {
    let key = format!("{worker}.model_args.dtype");
    if matches!(r.peek(&key), Some(Value::Null)) {
        r.account(
            NoticeKind::NotSupported,
            &key,
            "null (config.json's torch_dtype): the model computes in f32; write `precision: Bf16` for bf16",
        );
        return Ok("");
    }
    match r.text(&key)?.as_deref().unwrap_or(ROLL_DEFAULT) {
        "bf16" => Ok(", precision: Bf16"),
        "fp16" => {
            r.notice(
                NoticeKind::NotSupported,
                &key,
                "fp16: written as `precision: F16`, without the loss scaling ROLL's strategies add (small gradients may underflow); `precision: Bf16` needs none",
            );
            Ok(", precision: F16")
        }
        "fp32" => Ok(""),
        other => Err(r.error(
            &key,
            format!("`{other}` is not one of ROLL's dtypes"),
            "write fp32, bf16 or fp16",
        )),
    }
}
