//! Token-level transcripts of multi-turn chats, built without re-tokenizing what the model
//! generated (docs/REFERENCE.md, "Sample construction").
//!
//! - Trajectory-wise: turn 1 is the system prompt (the env's instruction) plus the first
//!   observation as a user message; each later turn appends only the new observation.
//!   Generated tokens go in exactly as sampled; only the text around them (the end of the
//!   assistant message, the next user message and the generation prompt) is tokenized.
//! - That text is found by rendering the chat template for the conversation before and
//!   after a message and taking the difference, so any template that extends a rendered
//!   prefix (ChatML, Qwen2.5's) works, and a template that does not is reported.
//! - A reply start (`prompt.reply_start`, e.g. `<answer>`) follows each generation prompt
//!   as prompt tokens; the assistant message is the reply start and the reply together.

use roll_flow_model::{ChatMessage, TextTokenizer};

/// A chat as tokens, with which tokens the policy generated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Transcript {
    pub tokens: Vec<u32>,
    /// True on generated tokens (the ones trained on).
    pub response: Vec<bool>,
    /// Turn index of each token (prompt text before a reply belongs to that reply's turn).
    pub turn: Vec<i64>,
    /// Behaviour log-prob of generated tokens, 0 elsewhere.
    pub behaviour: Vec<f32>,
    /// Index of the last generated token of each reply (where a turn's reward goes).
    pub reply_ends: Vec<usize>,
    messages: Vec<ChatMessage>,
    rendered: String,
    current_turn: i64,
    /// Text each reply opens with, in the prompt (`prompt.reply_start`).
    reply_start: String,
}

/// A template whose renderings of a chat and of that chat extended do not agree (the
/// model layer's own errors already say "chat template:").
fn template_error(why: &str) -> String {
    format!("chat template: {why}")
}

impl Transcript {
    /// A chat opened with an optional system message and the first user message, ready
    /// for the first reply, which opens with `reply_start`.
    pub fn start(
        tokenizer: &TextTokenizer,
        system: Option<&str>,
        user: &str,
        reply_start: &str,
    ) -> Result<Self, String> {
        let mut transcript = Transcript {
            reply_start: reply_start.to_string(),
            ..Transcript::default()
        };
        if let Some(system) = system {
            transcript.messages.push(ChatMessage::new("system", system));
        }
        transcript.add_user(tokenizer, user)?;
        Ok(transcript)
    }

    /// Appends a user message, the generation prompt and the reply start.
    pub fn add_user(&mut self, tokenizer: &TextTokenizer, user: &str) -> Result<(), String> {
        self.messages.push(ChatMessage::new("user", user));
        let full = tokenizer
            .apply_chat_template(&self.messages, true)
            .map_err(|e| e.to_string())?;
        let suffix = full
            .strip_prefix(self.rendered.as_str())
            .ok_or_else(|| template_error("rendering a longer chat changed its beginning"))?;
        let ids = tokenizer.encode(suffix).map_err(|e| e.to_string())?;
        self.push_prompt(&ids);
        if !self.reply_start.is_empty() {
            let ids = tokenizer
                .encode(&self.reply_start)
                .map_err(|e| e.to_string())?;
            self.push_prompt(&ids);
        }
        self.rendered = full;
        Ok(())
    }

    /// Appends a generated reply: `tokens` as sampled (ending in `stop` when the model
    /// stopped itself), whose text without the stop token is `content`, then whatever the
    /// template puts after an assistant message (whose text is the reply start and
    /// `content`).
    pub fn add_reply(
        &mut self,
        tokenizer: &TextTokenizer,
        tokens: &[u32],
        logprobs: &[f32],
        stop: Option<u32>,
        content: &str,
    ) -> Result<(), String> {
        let stopped = stop.filter(|&s| tokens.last() == Some(&s));
        for (&t, &lp) in tokens.iter().zip(logprobs) {
            self.tokens.push(t);
            self.response.push(true);
            self.turn.push(self.current_turn);
            self.behaviour.push(lp);
        }
        if !tokens.is_empty() {
            self.reply_ends.push(self.tokens.len() - 1);
        }
        let message = format!("{}{content}", self.reply_start);
        self.messages.push(ChatMessage::new("assistant", &message));
        let full = tokenizer
            .apply_chat_template(&self.messages, false)
            .map_err(|e| e.to_string())?;
        let after = full
            .strip_prefix(self.rendered.as_str())
            .and_then(|rest| rest.strip_prefix(message.as_str()))
            .ok_or_else(|| template_error("the assistant message is not rendered verbatim"))?;
        let stop_text = match stopped {
            Some(s) => tokenizer.decode(&[s], false).map_err(|e| e.to_string())?,
            None => String::new(),
        };
        let glue = after.strip_prefix(stop_text.as_str()).unwrap_or(after);
        let ids = tokenizer.encode(glue).map_err(|e| e.to_string())?;
        self.current_turn += 1;
        self.push_prompt(&ids);
        self.rendered = full;
        Ok(())
    }

    fn push_prompt(&mut self, ids: &[u32]) {
        for &t in ids {
            self.tokens.push(t);
            self.response.push(false);
            self.turn.push(self.current_turn);
            self.behaviour.push(0.0);
        }
    }

    /// Drops trailing prompt tokens after the last reply (the glue no reply follows).
    pub fn trim_after_last_reply(&mut self) {
        let keep = self.reply_ends.last().map_or(self.tokens.len(), |&e| e + 1);
        self.tokens.truncate(keep);
        self.response.truncate(keep);
        self.turn.truncate(keep);
        self.behaviour.truncate(keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_turns_keep_generated_tokens_and_tokenize_only_the_glue() {
        let tok = TextTokenizer::builtin();
        let mut t = Transcript::start(&tok, Some("rules"), "P_\n_G", "").unwrap();
        let first_prompt = tok
            .encode("<|im_start|>system\nrules<|im_end|>\n<|im_start|>user\nP_\n_G<|im_end|>\n<|im_start|>assistant\n")
            .unwrap();
        assert_eq!(t.tokens, first_prompt);
        let reply = tok.encode("<answer>Right</answer>").unwrap();
        let end = tok.token_id("<|im_end|>").unwrap();
        let mut generated = reply.clone();
        generated.push(end);
        let lps = vec![-0.5; generated.len()];
        t.add_reply(&tok, &generated, &lps, Some(end), "<answer>Right</answer>")
            .unwrap();
        t.add_user(&tok, "_P\n_G").unwrap();
        let glue = tok
            .encode("\n<|im_start|>user\n_P\n_G<|im_end|>\n<|im_start|>assistant\n")
            .unwrap();
        let mut want = first_prompt.clone();
        want.extend(&generated);
        want.extend(&glue);
        assert_eq!(t.tokens, want);
        let n0 = first_prompt.len();
        assert!(t.response[n0..n0 + generated.len()].iter().all(|&r| r));
        assert_eq!(t.response.iter().filter(|&&r| r).count(), generated.len());
        assert_eq!(t.reply_ends, vec![n0 + generated.len() - 1]);
        assert_eq!(t.turn[n0 + generated.len()], 1, "glue opens turn 1");
        assert_eq!(t.behaviour[n0], -0.5);
    }

    #[test]
    fn a_reply_cut_by_the_length_limit_gets_the_end_of_message_text() {
        let tok = TextTokenizer::builtin();
        let mut t = Transcript::start(&tok, None, "obs", "").unwrap();
        let reply = tok.encode("<answer>Le").unwrap();
        let end = tok.token_id("<|im_end|>").unwrap();
        t.add_reply(
            &tok,
            &reply,
            &vec![0.0; reply.len()],
            Some(end),
            "<answer>Le",
        )
        .unwrap();
        let tail = &t.tokens[t.reply_ends[0] + 1..];
        assert_eq!(tail, tok.encode("<|im_end|>\n").unwrap().as_slice());
        t.trim_after_last_reply();
        assert_eq!(t.tokens.len(), t.reply_ends[0] + 1);
    }

    #[test]
    fn a_reply_start_is_prompt_and_the_message_holds_it_with_the_reply() {
        let tok = TextTokenizer::builtin();
        let mut t = Transcript::start(&tok, None, "P_\n_G", "<answer>").unwrap();
        let mut want = tok
            .encode("<|im_start|>user\nP_\n_G<|im_end|>\n<|im_start|>assistant\n")
            .unwrap();
        want.extend(tok.encode("<answer>").unwrap());
        assert_eq!(t.tokens, want);
        assert!(
            t.response.iter().all(|&r| !r),
            "the reply start is not trained on"
        );
        let end = tok.token_id("<|im_end|>").unwrap();
        let mut generated = tok.encode("Right</answer>").unwrap();
        generated.push(end);
        let lps = vec![-0.25; generated.len()];
        t.add_reply(&tok, &generated, &lps, Some(end), "Right</answer>")
            .unwrap();
        t.add_user(&tok, "_P\n_G").unwrap();
        want.extend(&generated);
        want.extend(
            tok.encode("\n<|im_start|>user\n_P\n_G<|im_end|>\n<|im_start|>assistant\n")
                .unwrap(),
        );
        want.extend(tok.encode("<answer>").unwrap());
        assert_eq!(t.tokens, want);
        assert_eq!(t.response.iter().filter(|&&r| r).count(), generated.len());
        assert_eq!(
            t.messages[1].content, "<answer>Right</answer>",
            "the assistant message is the reply start and the reply"
        );
    }
}
