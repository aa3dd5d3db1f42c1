//! A model directory's chat template (tokenizer_config.json's `chat_template`): compiling
//! and rendering give an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roll_flow::model::chat_template::ChatTemplate;
use roll_flow::model::ChatMessage;

fuzz_target!(|data: &[u8]| {
    if let Ok(source) = std::str::from_utf8(data) {
        if let Ok(template) = ChatTemplate::new(source, "<s>", "</s>") {
            let chat = [
                ChatMessage::new("system", "rules"),
                ChatMessage::new("user", "state"),
            ];
            let _ = template.render(&chat, true);
        }
    }
});
