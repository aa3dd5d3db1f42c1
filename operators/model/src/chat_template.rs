//! Chat templates: the Jinja template in `tokenizer_config.json` (`chat_template`), rendered
//! with minijinja the way transformers' `apply_chat_template` renders it with jinja2:
//! `trim_blocks` and `lstrip_blocks` on, `loopcontrols`, variables `messages`,
//! `add_generation_prompt`, `bos_token`, `eos_token`, the `raise_exception(msg)` helper and
//! `tojson`, plus Python string/dict methods (`.startswith`, `.strip`, `.items`, ...) that
//! real templates call.

use minijinja::{Environment, Error, ErrorKind};
use serde::Serialize;

use super::error::ModelError;

/// One chat turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// "system", "user", "assistant" or "tool".
    pub role: String,
    /// The text of the turn.
    pub content: String,
}

impl ChatMessage {
    /// A message with the given role and text.
    pub fn new(role: &str, content: &str) -> Self {
        ChatMessage {
            role: role.to_string(),
            content: content.to_string(),
        }
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").finish_non_exhaustive()
    }
}

const NAME: &str = "chat_template";

impl ChatTemplate {
    /// Compiles `source`; `bos_token`/`eos_token` are exposed to it as variables.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self, ModelError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |message: String| -> Result<String, Error> {
                Err(Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        env.add_template_owned(NAME, source.to_string())
            .map_err(|e| ModelError::ChatTemplate {
                message: describe(&e),
            })?;
        Ok(ChatTemplate {
            env,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// Renders the conversation; with `add_generation_prompt` the text ends where the
    /// assistant's reply begins.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ModelError> {
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| ModelError::ChatTemplate {
                message: describe(&e),
            })?;
        template
            .render(minijinja::context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            })
            .map_err(|e| ModelError::ChatTemplate {
                message: describe(&e),
            })
    }
}

/// minijinja's error with its line and cause chain.
fn describe(error: &Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}
