//! Text <-> token ids through Hugging Face's `tokenizers` crate, plus the chat template.
//!
//! A model directory provides `tokenizer.json` (required) and `tokenizer_config.json`
//! (optional: `chat_template`, `eos_token`, `bos_token`). The Tiny preset's tokenizer is also a
//! `tokenizer.json` (a small byte-level BPE shipped in `operators/model/assets/`, made by
//! `assets/make_tiny_tokenizer.py`) with a Qwen-style ChatML template, so both go through
//! the same code.

use std::path::Path;

use super::chat_template::{ChatMessage, ChatTemplate};
use super::error::ModelError;

/// The built-in tokenizer of the Tiny preset (the `tokenizer.json` an HF export ships).
pub const BUILTIN_TOKENIZER: &str = include_str!("../assets/tiny_tokenizer.json");

/// ChatML (Qwen's format) for the built-in tokenizer.
pub const BUILTIN_CHAT_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// Tokens that end a reply when present in the vocabulary.
const CHAT_STOP_TOKENS: [&str; 2] = ["<|im_end|>", "<|endoftext|>"];

/// A tokenizer with its (optional) chat template and stop tokens.
#[derive(Debug)]
pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
    origin: String,
    chat: Option<ChatTemplate>,
    eos_token: Option<String>,
}

impl TextTokenizer {
    /// The Tiny preset's built-in tokenizer and ChatML template.
    pub fn builtin() -> Self {
        let mut t = Self::from_bytes(BUILTIN_TOKENIZER.as_bytes(), "builtin")
            .expect("the built-in tokenizer.json is valid");
        t.chat = Some(
            ChatTemplate::new(BUILTIN_CHAT_TEMPLATE, "", "<|im_end|>")
                .expect("built-in template compiles"),
        );
        t.eos_token = Some("<|im_end|>".into());
        t
    }

    /// A tokenizer from the bytes of a `tokenizer.json`; `origin` names it in errors.
    pub fn from_bytes(bytes: &[u8], origin: &str) -> Result<Self, ModelError> {
        let error = |message: String| ModelError::Tokenizer {
            origin: origin.to_string(),
            message,
        };
        // The text and its JSON are checked first: the `tokenizers` crate (0.22) panics on a
        // syntax error or invalid UTF-8 inside `decoder` ("Helper"), and this error names
        // the line and column. Its other panics are caught as errors too.
        let text = std::str::from_utf8(bytes).map_err(|e| error(format!("not UTF-8 text: {e}")))?;
        serde_json::from_str::<serde::de::IgnoredAny>(text)
            .map_err(|e| error(format!("not valid JSON: {e}")))?;
        let inner = std::panic::catch_unwind(|| tokenizers::Tokenizer::from_bytes(bytes))
            .map_err(|_| error("the tokenizers library could not read it (it panicked)".into()))?
            .map_err(|e| error(e.to_string()))?;
        Ok(TextTokenizer {
            inner,
            origin: origin.to_string(),
            chat: None,
            eos_token: None,
        })
    }

    /// `dir/tokenizer.json` plus the template and special tokens of `dir/tokenizer_config.json`.
    pub fn from_model_dir(dir: &Path) -> Result<Self, ModelError> {
        let path = dir.join("tokenizer.json");
        if !path.is_file() {
            return Err(ModelError::MissingFile {
                dir: dir.to_path_buf(),
                file: "tokenizer.json".into(),
                why: "the tokenizer".into(),
            });
        }
        let bytes = std::fs::read(&path).map_err(|e| ModelError::io(&path, e))?;
        let mut tokenizer = Self::from_bytes(&bytes, &path.display().to_string())?;
        let config_path = dir.join("tokenizer_config.json");
        if config_path.is_file() {
            tokenizer.read_config(&config_path)?;
        }
        Ok(tokenizer)
    }

    fn read_config(&mut self, path: &Path) -> Result<(), ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        let config: serde_json::Value =
            serde_json::from_str(&text).map_err(|source| ModelError::Json {
                path: path.to_path_buf(),
                source,
            })?;
        let token = |key: &str| match config.get(key) {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Object(o)) => {
                o.get("content").and_then(|c| c.as_str()).map(String::from)
            }
            _ => None,
        };
        self.eos_token = token("eos_token");
        if let Some(source) = template_source(&config) {
            let bos = token("bos_token").unwrap_or_default();
            let eos = self.eos_token.clone().unwrap_or_default();
            let chat = ChatTemplate::new(&source, &bos, &eos).map_err(|e| ModelError::Config {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
            self.chat = Some(chat);
        }
        Ok(())
    }

    /// Sets the chat template (`None` keeps the current one) with the bos and eos strings
    /// it sees; the eos token also ends generation ([`stop_tokens`](Self::stop_tokens)).
    pub fn set_chat(
        &mut self,
        template: Option<&str>,
        bos_token: Option<&str>,
        eos_token: Option<&str>,
    ) -> Result<(), ModelError> {
        self.eos_token = eos_token.map(String::from);
        if let Some(source) = template {
            let (bos, eos) = (bos_token.unwrap_or(""), eos_token.unwrap_or(""));
            self.chat = Some(ChatTemplate::new(source, bos, eos)?);
        }
        Ok(())
    }

    /// Token ids of `text` (special tokens written in the text are recognised; nothing is
    /// added around it, as for Qwen's tokenizer).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        let encoding = self.inner.encode(text, false).map_err(|e| self.error(e))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Token ids of `text` with the tokens the tokenizer adds around a text (its
    /// post-processor: a Llama 2 vocabulary's bos, say; nothing for Qwen's), as
    /// transformers' `tokenizer(text)` gives them. For a raw prompt; a chat template writes
    /// its special tokens itself, so its rendering goes through [`TextTokenizer::encode`].
    pub fn encode_adding_special_tokens(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        let encoding = self.inner.encode(text, true).map_err(|e| self.error(e))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Text of `ids`; with `skip_special_tokens`, special tokens are left out.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, ModelError> {
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|e| self.error(e))
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Id of a token string, if it is in the vocabulary.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Whether a chat template is available.
    pub fn has_chat_template(&self) -> bool {
        self.chat.is_some()
    }

    /// Renders a conversation with the chat template.
    pub fn apply_chat_template(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ModelError> {
        let template = self.chat.as_ref().ok_or_else(|| ModelError::ChatTemplate {
            message: format!(
                "{} has no chat_template (tokenizer_config.json)",
                self.origin
            ),
        })?;
        template
            .render(messages, add_generation_prompt)
            .map_err(|e| match e {
                ModelError::ChatTemplate { message } => ModelError::ChatTemplate {
                    message: format!("{message} (the template loaded with {})", self.origin),
                },
                other => other,
            })
    }

    /// Ids that end generation: the configured eos token and ChatML's end tokens.
    pub fn stop_tokens(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .eos_token
            .iter()
            .map(String::as_str)
            .chain(CHAT_STOP_TOKENS)
            .filter_map(|t| self.token_id(t))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn error(&self, e: tokenizers::Error) -> ModelError {
        ModelError::Tokenizer {
            origin: self.origin.clone(),
            message: e.to_string(),
        }
    }
}

/// `chat_template` as a string, or the "default" entry of a list of named templates.
fn template_source(config: &serde_json::Value) -> Option<String> {
    match config.get("chat_template")? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(items) => items
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
            .and_then(|t| t.get("template"))
            .and_then(|t| t.as_str())
            .map(String::from),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_tokenizer_round_trips_env_text_and_knows_chat_tokens() {
        let t = TextTokenizer::builtin();
        let text =
            "<|im_start|>user\nP_O\n√#S<|im_end|>\n<think>go</think><answer>Left</answer> 42";
        let ids = t.encode(text).unwrap();
        assert_eq!(t.decode(&ids, false).unwrap(), text);
        assert_eq!(t.token_id("<|im_start|>"), Some(1));
        assert_eq!(ids[0], 1, "special token recognised in text");
        assert_eq!(
            t.token_id("<answer>").map(|id| ids.contains(&id)),
            Some(true)
        );
        assert_eq!(t.stop_tokens(), vec![0, 2]);
        assert_eq!(t.vocab_size(), 516);
    }

    /// A syntax error or invalid UTF-8 inside `decoder` made the `tokenizers` crate panic
    /// (found by `fuzz/run.sh`, seeds `fuzz/seeds/tokenizer/decoder_*`); each is an error,
    /// naming the line and column where it can.
    #[test]
    fn a_broken_tokenizer_json_is_an_error_not_a_panic() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/tiny_qwen2/tokenizer.json");
        let good = std::fs::read_to_string(dir).unwrap();
        let broken = good.replacen(
            "\"add_prefix_space\": true",
            "\"add_prefix_space\": urue",
            1,
        );
        assert_ne!(good, broken);
        let Err(e) = TextTokenizer::from_bytes(broken.as_bytes(), "t.json") else {
            panic!("a broken tokenizer.json loaded");
        };
        let message = e.to_string();
        assert!(
            message.contains("t.json") && message.contains("not valid JSON"),
            "{message}"
        );
        assert!(message.contains("line "), "{message}");
        // Invalid UTF-8 inside the decoder's type, `decoder_invalid_utf8`.
        let mut bytes = good.clone().into_bytes();
        let at = good.find("\"ByteLevel\"").unwrap() + 6;
        bytes[at] = 0x92;
        let Err(e) = TextTokenizer::from_bytes(&bytes, "t.json") else {
            panic!("a tokenizer.json that is not UTF-8 loaded");
        };
        assert!(e.to_string().contains("not UTF-8 text"), "{e}");
        assert!(TextTokenizer::from_bytes(good.as_bytes(), "t.json").is_ok());
    }

    /// Every grid cell and line break of the envs' boards is one token, so a small model sees
    /// each cell at a regular position (`assets/make_tiny_tokenizer.py` filters the merges).
    #[test]
    fn builtin_tokenizer_gives_one_token_per_grid_cell() {
        use roll_flow_envs::frozen_lake::FrozenLakeConfig;
        use roll_flow_envs::sokoban::{SokobanConfig, Vocabulary};
        use roll_flow_envs::Env;

        let t = TextTokenizer::builtin();
        let lakes = [4, 6, 8].map(|size| FrozenLakeConfig {
            size,
            ..Default::default()
        });
        let rooms = [Vocabulary::Standard, Vocabulary::Letters].map(|vocabulary| SokobanConfig {
            dim_room: (7, 6),
            vocabulary,
            ..Default::default()
        });
        let mut envs: Vec<Box<dyn Env>> = Vec::new();
        envs.extend(
            lakes
                .iter()
                .map(|c| Box::new(c.build().unwrap()) as Box<dyn Env>),
        );
        envs.extend(
            rooms
                .iter()
                .map(|c| Box::new(c.build().unwrap()) as Box<dyn Env>),
        );
        let moves = [
            "Left", "Down", "Right", "Up", "Down", "Down", "Right", "Right",
        ];
        let mut seen = std::collections::HashSet::new();
        for env in &mut envs {
            for seed in 0..12 {
                let mut observations = vec![env.reset(seed).unwrap().observation];
                for m in moves {
                    let step = env.step(&format!("<answer>{m}</answer>")).unwrap();
                    observations.push(step.observation);
                    if step.terminated || step.truncated {
                        break;
                    }
                }
                for text in observations {
                    let ids = t.encode(&text).unwrap();
                    let lines: Vec<&str> = text.split('\n').collect();
                    let cells: usize = lines.iter().map(|l| l.chars().count()).sum();
                    assert_eq!(ids.len(), cells + lines.len() - 1, "{text:?}");
                    assert_eq!(t.decode(&ids, false).unwrap(), text);
                    seen.extend(text.chars());
                }
            }
        }
        for symbol in "P_OGX√#S\n".chars() {
            assert!(seen.contains(&symbol), "no observation showed {symbol:?}");
        }
        for word in ["Left", "Down", "Right", "Up", "left", "down", "right", "up"] {
            assert_eq!(t.encode(word).unwrap().len(), 1, "{word} is one token");
        }
    }

    #[test]
    fn builtin_chat_template_is_chatml() {
        let t = TextTokenizer::builtin();
        let messages = [
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", "Hi"),
        ];
        let text = t.apply_chat_template(&messages, true).unwrap();
        assert_eq!(
            text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn template_errors_are_reported() {
        let err = ChatTemplate::new("{% if %}", "", "")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("chat template:"), "{err}");
        let raising =
            ChatTemplate::new("{{ raise_exception('roles must alternate') }}", "", "").unwrap();
        let err = raising.render(&[], false).unwrap_err().to_string();
        assert!(err.contains("roles must alternate"), "{err}");
        let t = TextTokenizer::from_bytes(include_bytes!("../assets/tiny_tokenizer.json"), "test")
            .unwrap();
        let err = t.apply_chat_template(&[], true).unwrap_err().to_string();
        assert!(err.contains("has no chat_template"), "{err}");
        // A render error names where the tokenizer and its template were loaded from.
        let mut t = t;
        let raise = "{{ raise_exception('roles must alternate') }}";
        t.set_chat(Some(raise), None, None).unwrap();
        let err = t.apply_chat_template(&[], true).unwrap_err().to_string();
        assert!(
            err.starts_with("chat template: ") && err.ends_with("(the template loaded with test)"),
            "{err}"
        );
        let err = TextTokenizer::from_bytes(b"{}", "broken.json")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("tokenizer broken.json:"), "{err}");
    }
}
