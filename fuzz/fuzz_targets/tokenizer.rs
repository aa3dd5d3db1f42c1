//! A model directory's tokenizer.json and tokenizer_config.json (the input is the two
//! files joined by a 0 byte): loading, encoding, decoding and the chat template give an
//! error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roll_flow::model::tokenizer::TextTokenizer;
use roll_flow::model::ChatMessage;

#[path = "scratch_dir.rs"]
mod scratch_dir;

fuzz_target!(|data: &[u8]| {
    // `TextTokenizer::from_bytes` catches the `tokenizers` crate's panics as errors; the
    // default hook (not libFuzzer's, which aborts on any panic) lets a caught one pass,
    // while a panic nothing catches still aborts the run as a crash.
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let _ = std::panic::take_hook();
    });
    let Some(split) = data.iter().position(|&b| b == 0) else {
        return;
    };
    let dir = scratch_dir::scratch_dir("tokenizer");
    std::fs::write(dir.join("tokenizer.json"), &data[..split]).expect("tokenizer.json written");
    std::fs::write(dir.join("tokenizer_config.json"), &data[split + 1..])
        .expect("tokenizer_config.json written");
    let Ok(tokenizer) = TextTokenizer::from_model_dir(&dir) else {
        return;
    };
    if let Ok(ids) = tokenizer.encode("a grid: _ G\n<|im_end|> ünïcode") {
        let _ = tokenizer.decode(&ids, false);
    }
    let _ = tokenizer.decode(&[0, 1, 2, u32::MAX], true);
    let _ = tokenizer.stop_tokens();
    let chat = [
        ChatMessage::new("system", "rules"),
        ChatMessage::new("user", "state"),
    ];
    let _ = tokenizer.apply_chat_template(&chat, true);
});
