//! The pre-flight memory estimate: before any model loads, the memory a run holds is
//! estimated from the file alone, and a pipeline that cannot fit the machine's available
//! memory is refused with the estimate and the fields that drive it (`roll-flow run
//! --no-memory-check` runs it anyway). Without it `envs.train.groups=10000000` started ten
//! million env threads and died on a failed allocation (exit 134).
//!
//! The estimate is a floor: what the run holds at least, whatever its replies turn out
//! to be, so a refused run could never have fitted, and a run that fits may still need
//! more. It counts, f32 throughout (what the CPU backend holds; on a GPU device only the
//! envs' host memory):
//! - **weights**: P parameters × 4 bytes per model. A trained model holds 8P: its training
//!   weights, their gradients, AdamW's two moments, the inference copy, and the copy of
//!   weights and moments the non-finite guard keeps during an update. With `lora:` the
//!   base is frozen: P, the adapted layers' weights again (the merged inference copy; the
//!   other weights it shares with the base) and 7 copies of the adapters' parameters (all
//!   of the above but the inference copy). Each of the process's workers (`-w`) holds its
//!   own models, so these count once per worker; `validate --memory` counts one.
//! - **playing** (one `Rollout` or `Eval` at a time; the larger counts): per env played at
//!   once, its own state, records and slot in the batch ([`ENV_BYTES`]), its logits row
//!   (vocab × 4 bytes) and its KV cache, layers × 2 × kv_heads × head_dim × 4 bytes per
//!   token, twice (the cache's spare capacity and the chat prefix kept for the next turn),
//!   over at least one token per turn (`max_turns`).
//! - **training** (one node at a time): per token of a micro-batch (`micro_batch`, else
//!   `mini_batch`, else the whole batch; samples of at least one token per turn), the
//!   activations backward keeps and their gradients, 2 × (8·dim + 4·ffn + 2·heads·L) floats
//!   per layer for samples of L tokens, and the logits, their log-softmax and gradient
//!   (3 × vocab floats; one float for a critic); as many micro-batches at once as cores.
//!   Under `max_tokens_per_micro_batch` a micro-batch holds at most budget / L samples.
//!   With `gradient_checkpointing`, two layers' worth (the top layer's graph and the one
//!   being run again) and each other layer's saved input, 2 × dim floats.
//! - the process itself, [`PROCESS_BYTES`].
//!
//! Floor = weights + the process + the larger of playing and training. The default
//! pipeline's floor is 33 MiB, and it holds about 1 GiB (bench/README.md, "Soak"): the
//! check stops runaway sizes, it does not budget a run.

use std::collections::BTreeMap;
use std::path::Path;

use roll_flow_engine::spec::Device;
use roll_flow_engine::Pipeline;
use roll_flow_model::build::model_config;
use roll_flow_model::lora_spec::LoraSpec;
use roll_flow_model::Qwen2Config;

use crate::nodes::kind::TrainedModel;
use crate::play_settings::SampleMode;
use crate::registry::RollFlowDialect;

/// An env's own state, its turn records and transcript, its slot in the batch, at least.
pub const ENV_BYTES: u64 = 16 << 10;
/// The binary and the runtime at start (the default pipeline's process holds 13 MiB
/// before it loads anything).
pub const PROCESS_BYTES: u64 = 12 << 20;

/// One part of the estimate.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    /// What it is, with the fields that drive it.
    pub what: String,
    pub bytes: u64,
}

/// The least memory the run holds, by part.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryEstimate {
    /// Held the whole run: weights, optimizer state, the process.
    pub resident: Vec<Part>,
    /// The playing or training node with the largest need, if any.
    pub largest_phase: Option<Part>,
}

impl MemoryEstimate {
    /// The least the run holds at its fullest.
    pub fn floor(&self) -> u64 {
        let resident: u64 = self.resident.iter().map(|p| p.bytes).sum();
        resident.saturating_add(self.largest_phase.as_ref().map_or(0, |p| p.bytes))
    }

    /// The parts, largest first, one per line.
    pub fn breakdown(&self) -> String {
        let mut parts: Vec<&Part> = self.resident.iter().chain(&self.largest_phase).collect();
        parts.sort_by_key(|p| std::cmp::Reverse(p.bytes));
        let lines: Vec<String> = (parts.iter())
            .map(|p| format!("  {:>10}  {}", gib(p.bytes), p.what))
            .collect();
        lines.join("\n")
    }
}

/// `bytes` in GiB (or MiB when small), for people.
pub fn gib(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b => format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64),
    }
}

/// The memory floor of `pipeline` run by `workers` worker threads on this machine: its
/// cores, model directories relative to the working directory (what `run` and `validate
/// --memory` use).
pub fn estimate_here<C: RollFlowDialect>(
    pipeline: &Pipeline<C>,
    workers: usize,
) -> (MemoryEstimate, usize) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (estimate(pipeline, Path::new("."), cores, workers), cores)
}

/// The memory floor of `pipeline` on a machine with `cores`, run by `workers` worker
/// threads of one process (each holds its own models); model directories are read
/// relative to `base_dir` (config.json only). A model whose architecture cannot be read
/// counts nothing here (loading it reports the problem).
pub fn estimate<C: RollFlowDialect>(
    pipeline: &Pipeline<C>,
    base_dir: &Path,
    cores: usize,
    workers: usize,
) -> MemoryEstimate {
    let workers = workers.max(1) as u64;
    let each_worker = match workers {
        1 => String::new(),
        w => format!(", × {w} workers (`-w`), each holding its own"),
    };
    let on_cpu = pipeline.device == Device::Cpu;
    // Each model's architecture, read once (an `HfDir` config.json, a tokenizer for a Tiny
    // model's vocabulary).
    let configs: BTreeMap<&str, Qwen2Config> = (pipeline.models.iter())
        .filter_map(|(name, spec)| Some((name, model_config(spec, base_dir).ok()?)))
        .collect();
    let config = |name: &str| configs.get(name);
    let nodes: Vec<_> = pipeline.nodes.iter().map(|(_, n)| n).collect();
    let trained: Vec<_> = nodes.iter().filter_map(|n| n.trained()).collect();
    let mut estimate = MemoryEstimate::default();
    estimate.resident.push(Part {
        what: "the process (binary, runtime)".into(),
        bytes: PROCESS_BYTES,
    });
    if on_cpu {
        for (name, spec) in pipeline.models.iter() {
            let Some(c) = config(name) else { continue };
            let params = parameters(c);
            let ahead = (nodes.iter().filter_map(|n| n.plays()))
                .filter(|p| p.policy == *name)
                .map(|p| p.staleness)
                .sum::<u64>();
            if ahead > 0 {
                estimate.resident.push(Part {
                    what: format!(
                        "model `{name}`: the inference weights of {ahead} earlier step(s) \
                         (`staleness`), {params} parameters × 4 bytes each{each_worker}"
                    ),
                    bytes: params.saturating_mul(4 * ahead).saturating_mul(workers),
                });
            }
            const TRAINED: &str =
                "trained: weights, gradients, AdamW moments, inference copy, guard copy";
            let is_trained = trained.iter().any(|t| t.model == name);
            let (bytes, what) = match (is_trained, &spec.lora) {
                (false, _) => (
                    params * 4,
                    format!("{params} parameters × 4 bytes (frozen)"),
                ),
                (true, None) => (
                    params * 4 * 8,
                    format!("{params} parameters × 4 bytes × 8 ({TRAINED})"),
                ),
                (true, Some(lora)) => {
                    let (adapters, targeted) = lora_sizes(c, lora);
                    (
                        (params + targeted) * 4 + adapters * 4 * 7,
                        format!(
                            "{params} parameters × 4 bytes (the frozen base), {targeted} × 4 \
                             bytes (the merged inference copy of the adapted layers) and \
                             {adapters} LoRA parameters × 4 bytes × 7 (trained: weights, \
                             gradients, AdamW moments, guard copy)"
                        ),
                    )
                }
            };
            estimate.resident.push(Part {
                what: format!("model `{name}`: {what}{each_worker}"),
                bytes: bytes.saturating_mul(workers),
            });
        }
    }
    // What the rollouts give the training nodes: samples per step, and their least length.
    let (mut samples, mut sample_length) = (0u64, 0u64);
    let mut phases = Vec::new();
    for node in &nodes {
        let (policy, tags, limit, step_wise, ahead) = match (node.plays(), node.evaluates()) {
            (Some(play), _) => {
                let step = matches!(play.settings.samples, SampleMode::Step { .. });
                let limit = play.settings.sequence_length as u64;
                (play.policy, play.envs, limit, step, play.staleness > 0)
            }
            (None, Some(eval)) => (eval.policy, eval.envs, u64::MAX, false, false),
            (None, None) => continue,
        };
        let sets: Vec<(&String, u64, u64)> = (tags.iter())
            .filter_map(|t| pipeline.envs.get(t).map(|set| (t, set)))
            .map(|(t, set)| {
                let envs = (set.groups as u64).saturating_mul(set.group_size as u64);
                (t, envs, set.max_turns.unwrap_or(1) as u64)
            })
            .collect();
        let envs = sets.iter().map(|s| s.1).fold(0, u64::saturating_add);
        let turns = sets.iter().map(|s| s.2).max().unwrap_or(1);
        let c = config(&policy);
        let context = c
            .as_ref()
            .map_or(u64::MAX, |c| c.max_position_embeddings as u64);
        // At least one token per turn: a trajectory's sample holds every turn, a step's one.
        let length = limit.min(context).min(if step_wise { 1 } else { turns });
        if node.plays().is_some() {
            let per_env =
                |s: &(&String, u64, u64)| s.1.saturating_mul(if step_wise { s.2 } else { 1 });
            samples = samples.saturating_add(sets.iter().map(per_env).fold(0, u64::saturating_add));
            sample_length = sample_length.max(length);
        }
        let per_env = match (&c, on_cpu) {
            (Some(c), true) => {
                let kv = 2 * c.num_hidden_layers as u64 * 2 * kv_width(c) * 4;
                ENV_BYTES + kv.saturating_mul(length) + 4 * c.vocab_size as u64
            }
            _ => ENV_BYTES,
        };
        let drivers: Vec<String> = (sets.iter())
            .map(|(t, n, _)| format!("envs.{t}: {n} = groups × group_size"))
            .collect();
        let playing = Part {
            what: format!(
                "playing {envs} envs at once ({}), each of at least {length} tokens: KV \
                 cache, logits, env state{}",
                drivers.join(", "),
                if ahead {
                    ", while the steps before train (`staleness`)"
                } else {
                    ""
                }
            ),
            bytes: envs.saturating_mul(per_env),
        };
        // An asynchronous rollout plays beside training: its part adds to every phase.
        match ahead {
            true => estimate.resident.push(playing),
            false => phases.push(playing),
        }
    }
    if on_cpu {
        for t in &trained {
            if let Some(c) = config(&t.model) {
                let checkpointed =
                    (pipeline.models.get(&t.model)).is_some_and(|spec| spec.gradient_checkpointing);
                let shape = (samples, sample_length, cores as u64);
                phases.push(training(t, c, checkpointed, shape));
            }
        }
    }
    estimate.largest_phase = phases.into_iter().max_by_key(|p| p.bytes);
    estimate
}

/// A training node's part: `samples` of at least `length` tokens, micro-batch by
/// micro-batch, as many at once as `cores`; `checkpointed`: with gradient checkpointing.
fn training(
    t: &TrainedModel,
    c: &Qwen2Config,
    checkpointed: bool,
    (samples, length, cores): (u64, u64, u64),
) -> Part {
    // Samples of the least length fit a token budget that many at a time.
    let by_tokens = (t.max_tokens_per_micro_batch)
        .map_or(u64::MAX, |budget| (budget as u64 / length.max(1)).max(1));
    let per_micro = (t.micro_batch.map_or(samples, |m| m as u64))
        .min(by_tokens)
        .min(samples);
    let at_once = samples.div_ceil(per_micro.max(1)).clamp(1, cores);
    let tokens = per_micro.saturating_mul(length);
    let (dim, ffn, heads) = (
        c.hidden_size as u64,
        c.intermediate_size as u64,
        c.num_attention_heads as u64,
    );
    let layer = 2 * (8 * dim + 4 * ffn + 2 * heads * length);
    let head = if t.lm_head {
        3 * c.vocab_size as u64
    } else {
        1
    };
    let layers = c.num_hidden_layers as u64;
    let kept = match checkpointed {
        true => 2 * layer + layers.saturating_sub(1) * 2 * dim,
        false => layers * layer,
    };
    let per_token = 4 * (kept + head);
    Part {
        what: format!(
            "training `{}`: {at_once} micro-batch(es) at once of {per_micro} samples (the \
             trainer's micro_batch, mini_batch or max_tokens_per_micro_batch) of at least \
             {length} tokens: activations and logits{}",
            t.model,
            if checkpointed {
                " (gradient_checkpointing)"
            } else {
                ""
            }
        ),
        bytes: tokens.saturating_mul(per_token).saturating_mul(at_once),
    }
}

/// Parameters of a Qwen2 causal LM of this shape.
pub fn parameters(c: &Qwen2Config) -> u64 {
    let (d, f, v) = (
        c.hidden_size as u64,
        c.intermediate_size as u64,
        c.vocab_size as u64,
    );
    let q = (c.num_attention_heads * head_dim(c)) as u64;
    let kv = kv_width(c);
    // q, k, v (with biases in Qwen2), o (with a bias where `attention_bias`); gate, up,
    // down; two RMSNorms, plus Qwen3's per-head q/k norms.
    let (qkv_bias, o_bias) = (u64::from(c.qkv_bias()), u64::from(c.o_bias()));
    let head_norms = if c.qk_norm() {
        2 * head_dim(c) as u64
    } else {
        0
    };
    let layer = d * q
        + 2 * d * kv
        + qkv_bias * (q + 2 * kv)
        + q * d
        + o_bias * d
        + 3 * d * f
        + 2 * d
        + head_norms;
    let head = if c.tie_word_embeddings { 0 } else { v * d };
    c.num_hidden_layers as u64 * layer + v * d + head + d
}

/// Parameters of `lora`'s adapters on a model of this shape, rank × (inputs + outputs) of
/// each target layer (A and B), and of the weights they adapt, inputs × outputs, over
/// every decoder layer: merging allocates new weights for those alone
/// ([`roll_flow_model::lora::merge_lora`]; the others stay shared with the base).
fn lora_sizes(c: &Qwen2Config, lora: &LoraSpec) -> (u64, u64) {
    let (d, f) = (c.hidden_size as u64, c.intermediate_size as u64);
    let (q, kv) = ((c.num_attention_heads * head_dim(c)) as u64, kv_width(c));
    let shapes = (lora.targets.iter()).map(|target| match target.as_str() {
        "q_proj" => (d, q),
        "k_proj" | "v_proj" => (d, kv),
        "o_proj" => (q, d),
        "gate_proj" | "up_proj" => (d, f),
        "down_proj" => (f, d),
        _ => (0, 0),
    });
    let (adapters, targeted) = shapes.fold((0, 0), |(a, t), (i, o)| (a + i + o, t + i * o));
    let layers = c.num_hidden_layers as u64;
    (layers * lora.rank as u64 * adapters, layers * targeted)
}

fn head_dim(c: &Qwen2Config) -> usize {
    c.head_dim
        .unwrap_or(c.hidden_size / c.num_attention_heads.max(1))
}

/// Width of a layer's keys (= of its values): kv_heads × head_dim.
fn kv_width(c: &Qwen2Config) -> u64 {
    let kv_heads = c.num_key_value_heads.unwrap_or(c.num_attention_heads);
    (kv_heads * head_dim(c)) as u64
}

/// Memory a new allocation can get now: the kernel's `MemAvailable`, or less when the
/// process's cgroup (v2) limit leaves less; `None` where neither can be read.
pub fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let available = meminfo.as_deref().and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    });
    let read = |file: &str| -> Option<u64> {
        let text = std::fs::read_to_string(Path::new("/sys/fs/cgroup").join(file)).ok()?;
        text.trim().parse().ok()
    };
    let cgroup = match (read("memory.max"), read("memory.current")) {
        (Some(max), Some(current)) => Some(max.saturating_sub(current)),
        _ => None,
    };
    match (available, cgroup) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}

/// Refuses `estimate` when it exceeds `available`, with the parts and what to change.
pub fn check_fits(estimate: &MemoryEstimate, available: u64) -> Result<(), String> {
    let floor = estimate.floor();
    if floor <= available {
        return Ok(());
    }
    Err(format!(
        "this run needs at least {} of memory, and the machine has {} available; nothing \
         was started. The least it holds, largest part first:\n{}\n\
         Lower the fields named above (e.g. `--set envs.train.groups=N`, a smaller \
         `micro_batch` or `sequence_length`), or run it anyway with `--no-memory-check`",
        gib(floor),
        gib(available),
        estimate.breakdown()
    ))
}

#[cfg(test)]
#[path = "memory_estimate_tests.rs"]
mod tests;
