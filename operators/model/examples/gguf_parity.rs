//! roll-flow against transformers on a real GGUF model (dev-time check; see
//! `tests/fixtures/gguf_reference_with_transformers.py`, which writes the reference):
//!
//!     cargo run --release -p roll-flow-model --example gguf_parity -- MODEL.gguf REFERENCE.json
//!
//! Prints the tokenizer's agreement on each prompt and on a multilingual sample, the largest
//! difference of the last-position logits, and whether each 32-token greedy continuation
//! (through the KV cache) equals transformers'.

use std::path::Path;
use std::time::Instant;

use roll_flow_model::generate::{ContinuousBatcher, GenerationRequest, SamplingParams};
use roll_flow_model::gguf::load_gguf;
use roll_flow_model::prompt_logits::logits_of;
use roll_flow_model::CpuBackend;

fn ids(value: &serde_json::Value) -> Vec<u32> {
    let items = value.as_array().expect("an array of ids");
    items
        .iter()
        .map(|v| v.as_u64().expect("an id") as u32)
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, model_path, reference_path] = args.as_slice() else {
        eprintln!("usage: gguf_parity MODEL.gguf REFERENCE.json");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(reference_path).expect("reference readable");
    let reference: serde_json::Value = serde_json::from_str(&text).expect("reference is JSON");
    let device = Default::default();
    let start = Instant::now();
    let (model, tokenizer) =
        load_gguf::<CpuBackend>(Path::new(model_path), &device).expect("model loads");
    println!("loaded in {:.1}s", start.elapsed().as_secs_f64());

    let prompts = reference["prompts"].as_array().expect("prompts");
    let mut worst: f32 = 0.0;
    for ((prompt, hf_ids), hf_last) in prompts
        .iter()
        .zip(reference["prompt_ids"].as_array().expect("ids"))
        .zip(reference["last_logits"].as_array().expect("logits"))
    {
        let ours = tokenizer
            .encode(prompt.as_str().expect("text"))
            .expect("encodes");
        let same_ids = ours == ids(hf_ids);
        let logits = logits_of(&model, &ids(hf_ids), &device);
        let last = logits.last().expect("a position");
        let diff = last
            .iter()
            .zip(hf_last.as_array().expect("a row"))
            .map(|(a, b)| (a - b.as_f64().expect("a number") as f32).abs())
            .fold(0.0, f32::max);
        worst = worst.max(diff);
        println!("ids equal: {same_ids}, last-position max |Δlogit| = {diff:.3e}");
    }
    println!("next-token logits: max |Δlogit| over prompts = {worst:.3e}");

    let sample = reference["sample"].as_str().expect("sample");
    let ours = tokenizer.encode(sample).expect("encodes");
    let theirs = ids(&reference["sample_ids"]);
    let first_difference = ours.iter().zip(&theirs).position(|(a, b)| a != b);
    println!(
        "multilingual sample: {} ids (transformers {}), equal: {}, first difference at {:?}",
        ours.len(),
        theirs.len(),
        ours == theirs,
        first_difference
    );
    assert_eq!(tokenizer.decode(&ours, false).expect("decodes"), sample);

    for (text, hf_ids) in reference["chat_texts"]
        .as_array()
        .expect("chat texts")
        .iter()
        .zip(reference["greedy_prompt_ids"].as_array().expect("ids"))
    {
        let ours = tokenizer
            .encode(text.as_str().expect("text"))
            .expect("encodes");
        assert_eq!(ours, ids(hf_ids), "chat prompt ids");
    }
    let start = Instant::now();
    let mut batcher = ContinuousBatcher::<CpuBackend>::new(8, &device);
    for prompt in reference["greedy_prompt_ids"].as_array().expect("ids") {
        let request = GenerationRequest {
            prompt: ids(prompt),
            max_new_tokens: 32,
            sampling: SamplingParams::greedy(),
            stop_tokens: vec![],
            seed: 0,
            guide: None,
        };
        batcher.submit(&model, request).expect("request accepted");
    }
    let outputs = batcher.run_to_completion(&model);
    println!(
        "greedy: 8 x 32 tokens in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    let mut equal = 0;
    for (output, hf) in outputs
        .iter()
        .zip(reference["greedy"].as_array().expect("greedy"))
    {
        let same = output.tokens == ids(hf);
        equal += usize::from(same);
        let text = tokenizer.decode(&output.tokens, true).expect("decodes");
        println!("greedy equal: {same}: {text:?} {:?}", output.tokens);
    }
    println!("greedy continuations equal: {equal} of {}", outputs.len());
}
