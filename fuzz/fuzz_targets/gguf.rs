//! A GGUF model file: parsing, the config and tokenizer from its metadata, dequantising and
//! loading the model give an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roll_flow::model::gguf::GgufModel;
use roll_flow::model::CpuBackend;

#[path = "scratch_dir.rs"]
mod scratch_dir;

fuzz_target!(|data: &[u8]| {
    // The tokenizer is built through `TextTokenizer::from_bytes`, which catches the
    // `tokenizers` crate's panics as errors; the default hook lets a caught one pass.
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let _ = std::panic::take_hook();
    });
    let dir = scratch_dir::scratch_dir("gguf");
    let path = dir.join("model.gguf");
    std::fs::write(&path, data).expect("model.gguf written");
    let Ok(gguf) = GgufModel::open(&path) else {
        return;
    };
    if let Ok(tokenizer) = gguf.tokenizer() {
        if let Ok(ids) = tokenizer.encode("a grid: _ G\n<|im_end|> ünïcode 123") {
            let _ = tokenizer.decode(&ids, false);
        }
    }
    let _ = gguf.hf_tokenizer_files();
    // Only models small enough to build quickly: a fuzzer's file claims any size.
    if let Ok(config) = gguf.config() {
        let params = (config.vocab_size.saturating_mul(config.hidden_size)).saturating_add(
            config
                .num_hidden_layers
                .saturating_mul(config.hidden_size)
                .saturating_mul(config.intermediate_size),
        );
        if params < 1 << 22 {
            let _ = gguf.causal_lm::<CpuBackend>(&Default::default());
        }
    }
});
