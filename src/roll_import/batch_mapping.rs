//! ROLL's training batch keys as a trainer's `mini_batch` and `micro_batch`: one optimizer
//! step takes `per_device_train_batch_size × gradient_accumulation_steps` samples on each
//! data-parallel rank (the worker's `device_mapping` over its tensor × pipeline parallel
//! sizes), and each forward/backward pass `per_device_train_batch_size`; a size that
//! covers the step's samples is left out. With `use_dynamic_batching_in_train` ROLL cuts
//! the passes by a token budget instead (`max_tokens_per_microbatch_in_train`, samples
//! sorted by length): `max_tokens_per_micro_batch`.

use super::config_reader::ConfigReader;
use super::import_error::ImportError;
use super::roll_keys::NoticeKind;
use super::yaml_value::Value;

/// Mini-batch (one optimizer step) and micro-batch sizes of `worker`'s training args.
pub fn batches(r: &mut ConfigReader, worker: &str, samples: u64) -> Result<String, ImportError> {
    let per_device = r.count(&format!(
        "{worker}.training_args.per_device_train_batch_size"
    ))?;
    let accumulation = r
        .count(&format!(
            "{worker}.training_args.gradient_accumulation_steps"
        ))?
        .unwrap_or(1);
    let budget = token_budget(r, worker)?;
    let mut out = String::new();
    if let Some(per_device) = per_device {
        let mini = per_device * accumulation * data_parallel(r, worker);
        if mini < samples {
            out.push_str(&format!(", mini_batch: {mini}"));
        }
        if budget.is_none() && per_device < mini.min(samples) {
            out.push_str(&format!(", micro_batch: {per_device}"));
        }
    }
    if let Some(tokens) = budget {
        out.push_str(&format!(", max_tokens_per_micro_batch: {tokens}"));
    }
    Ok(out)
}

/// `worker`'s dynamic batching budget: `max_tokens_per_microbatch_in_train` where
/// `use_dynamic_batching_in_train` is on (ROLL reads it only then, and refuses 0).
fn token_budget(r: &mut ConfigReader, worker: &str) -> Result<Option<u64>, ImportError> {
    let on = format!("{worker}.use_dynamic_batching_in_train");
    let tokens = format!("{worker}.max_tokens_per_microbatch_in_train");
    if !r.flag(&on)?.unwrap_or(false) {
        r.unread_unless_used(
            &tokens,
            "read only with use_dynamic_batching_in_train: true",
        );
        return Ok(None);
    }
    match r.count(&tokens)? {
        Some(budget) if budget > 0 => {
            r.notice(
                NoticeKind::NotSupported,
                &on,
                "`true`: approximated: ROLL's optimizer steps under dynamic batching each take \
                 gradient_accumulation_steps consecutive micro-batches of the length-sorted \
                 batch; here each takes mini_batch samples (per_device_train_batch_size × \
                 gradient_accumulation_steps × data-parallel devices, shuffled) cut within \
                 the same budget, so the updates split the batch elsewhere unless one takes \
                 it all",
            );
            Ok(Some(budget))
        }
        _ => Err(r.error(
            &tokens,
            "dynamic batching is on, but no token budget is set".into(),
            "set it to the most tokens a micro-batch may hold (ROLL suggests sequence_length × \
             2 × per_device_train_batch_size), or turn use_dynamic_batching_in_train off",
        )),
    }
}

/// Data-parallel ranks of `worker`: its devices over tensor × pipeline parallel sizes.
fn data_parallel(r: &ConfigReader, worker: &str) -> u64 {
    let devices = match r.peek(&format!("{worker}.device_mapping")) {
        Some(Value::List(items)) => items.len() as u64,
        Some(Value::Str(text)) => range_len(&text).unwrap_or(1),
        _ => 1,
    };
    let parallel: u64 = ["tensor_model_parallel_size", "pipeline_model_parallel_size"]
        .iter()
        .filter_map(|k| r.peek(&format!("{worker}.strategy_args.strategy_config.{k}")))
        .filter_map(|v| v.as_f64())
        .map(|x| x.max(1.0) as u64)
        .product();
    (devices / parallel.max(1)).max(1)
}

/// The length of ROLL's `list(range(a,b))` device mappings.
fn range_len(text: &str) -> Option<u64> {
    let inner = text
        .trim()
        .strip_prefix("list(range(")?
        .strip_suffix("))")?;
    let bounds: Vec<u64> = inner
        .split(',')
        .map(|s| s.trim().parse().ok())
        .collect::<Option<_>>()?;
    match bounds.as_slice() {
        [end] => Some(*end),
        [start, end] => Some(end.saturating_sub(*start)),
        _ => None,
    }
}
