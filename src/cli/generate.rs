//! `roll-flow generate`: complete a prompt with a model directory, the quick check a user
//! runs on a model before training with it. All behaviour lives in
//! `roll_flow::model::quick_generate` (and `model::prompt_logits` for
//! `--print-logits`); this file only maps arguments.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use roll_flow::model::generate::SamplingParams;
use roll_flow::model::prompt_logits::prompt_logits_in_model_dir;
use roll_flow::model::quick_generate::{complete_in_model_dir, QuickGenerate};
use roll_flow::model::CpuBackend;

/// Arguments of `roll-flow generate`.
#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    /// A Hugging Face model directory (config.json, *.safetensors, tokenizer.json) of a
    /// Qwen2, Llama or Qwen3 model, or a GGUF file.
    #[arg(long, value_name = "DIR|FILE")]
    pub model: PathBuf,
    /// Text to complete.
    #[arg(long, value_name = "TEXT")]
    pub prompt: String,
    /// Wrap the prompt in the model's chat template as one user message.
    #[arg(long)]
    pub chat: bool,
    /// Most tokens to generate.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_new_tokens: usize,
    /// Greedy decoding (argmax at every step).
    #[arg(long, conflicts_with_all = ["temperature", "top_p", "top_k"])]
    pub greedy: bool,
    /// Sampling temperature.
    #[arg(
        long,
        value_name = "T",
        default_value_t = 1.0,
        allow_negative_numbers = true
    )]
    pub temperature: f32,
    /// Nucleus sampling threshold in (0, 1].
    #[arg(
        long,
        value_name = "P",
        default_value_t = 1.0,
        allow_negative_numbers = true
    )]
    pub top_p: f32,
    /// Sample only among the K most likely tokens (0 = all).
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub top_k: usize,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Instead of generating, print the prompt's token ids and the logits at every
    /// position as JSON (`{"prompt_ids": [...], "logits": [[...], ...]}`), to compare the
    /// model with another implementation (tests/fixtures/check_export_with_transformers.py).
    #[arg(long)]
    pub print_logits: bool,
}

/// Loads the model, generates, and prints the completion to stdout (stats to stderr).
pub fn run(args: &GenerateArgs) -> anyhow::Result<()> {
    if args.print_logits {
        let logits = prompt_logits_in_model_dir::<CpuBackend>(
            &args.model,
            &args.prompt,
            args.chat,
            &Default::default(),
        )
        .with_context(|| format!("logits of {}", args.model.display()))?;
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, &logits)?;
        writeln!(out)?;
        return Ok(());
    }
    let sampling = if args.greedy {
        SamplingParams::greedy()
    } else {
        SamplingParams {
            temperature: args.temperature,
            top_p: args.top_p,
            top_k: args.top_k,
        }
    };
    let request = QuickGenerate {
        prompt: args.prompt.clone(),
        chat: args.chat,
        max_new_tokens: args.max_new_tokens,
        sampling,
        seed: args.seed,
    };
    let device = Default::default();
    let completion = complete_in_model_dir::<CpuBackend>(&args.model, &request, &device)
        .with_context(|| format!("generate with {}", args.model.display()))?;
    println!("{}", completion.text);
    eprintln!(
        "[{} prompt tokens, {} generated, finish: {:?}]",
        completion.prompt_tokens,
        completion.output.tokens.len(),
        completion.output.finish
    );
    Ok(())
}
