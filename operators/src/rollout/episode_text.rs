//! An episode as text for people: what the eval renders save as `<tag>_<i>_chat.txt` and
//! what `roll-flow play --policy` prints. One formatter for both, so a transcript on disk
//! reads the same as the live view.
//!
//! Per turn: the prompt (trajectory-wise episodes grow one chat, so a turn's new prompt
//! text is its user message, the observation; step-wise episodes build a whole prompt
//! each turn, shown decoded), the model's raw reply, the action parsed from it (the
//! `<answer>` text, with whether the env accepted it and whether it changed the state),
//! the reward, the env's own metrics when it reports some (WebShop's reward parts on a
//! purchase) and, when asked, every reply token with its log-prob.

use std::fmt::Write as _;

use super::episode::{Episode, TurnRecord};
use roll_flow_envs::action::extract_answer;
use roll_flow_model::TextTokenizer;

/// What to include beyond the prompt, reply, action and reward of each turn.
#[derive(Clone, Copy, Debug, Default)]
pub struct TextOptions {
    /// Every reply token with its log-prob under the policy.
    pub token_logprobs: bool,
}

/// The whole episode: header (env, seed, the system message the model read), turns,
/// outcome.
pub fn episode_text(episode: &Episode, tokenizer: &TextTokenizer, options: TextOptions) -> String {
    let system = episode.system.as_deref().unwrap_or("(no system message)");
    let mut text = format!(
        "env {} seed {}\n\n{system}\n",
        episode.slot.env_tag, episode.slot.seed
    );
    for (k, turn) in episode.turns.iter().enumerate() {
        text.push_str(&turn_text(k, turn, tokenizer, options));
    }
    let _ = write!(
        text,
        "\nsuccess: {} | total reward: {} | turns: {}{}\n",
        episode.success,
        episode.total_reward(),
        episode.turns.len(),
        if episode.truncated {
            " (truncated)"
        } else {
            ""
        }
    );
    text
}

/// One turn (`index` counts from 0; shown from 1).
pub fn turn_text(
    index: usize,
    turn: &TurnRecord,
    tokenizer: &TextTokenizer,
    options: TextOptions,
) -> String {
    let mut text = format!("\n--- turn {} ---\n", index + 1);
    if turn.prompt.is_empty() {
        let _ = writeln!(text, "observation (user message):\n{}", turn.observation);
    } else {
        let prompt = tokenizer
            .decode(&turn.prompt, false)
            .unwrap_or_else(|e| format!("(cannot decode the prompt: {e})"));
        let _ = writeln!(text, "prompt ({} tokens):\n{prompt}", turn.prompt.len());
    }
    let action = match extract_answer(&turn.reply_text) {
        Some(answer) => format!("{:?}", answer.trim()),
        // Envs with a format of their own (Math's `\boxed{}`) read the reply as written;
        // `valid` below says whether the env understood it.
        None => "no <answer>...</answer> tag; the env read the reply as written".to_string(),
    };
    let _ = write!(
        text,
        "reply: {}\naction: {action} | valid: {} | effective: {}\nreward: {}\n",
        turn.reply_text, turn.info.action_is_valid, turn.info.action_is_effective, turn.reward
    );
    if !turn.info.metrics.is_empty() {
        let parts: Vec<String> = turn
            .info
            .metrics
            .iter()
            .map(|(name, value)| format!("{name} {value}"))
            .collect();
        let _ = writeln!(text, "env metrics: {}", parts.join(" | "));
    }
    if options.token_logprobs {
        text.push_str(&logprob_lines(turn, tokenizer));
    }
    text
}

/// `logprobs:` and one `token  log-prob` line per reply token, then their sum.
fn logprob_lines(turn: &TurnRecord, tokenizer: &TextTokenizer) -> String {
    let mut text = String::from("logprobs:\n");
    for (&id, &logprob) in turn.reply.iter().zip(&turn.logprobs) {
        let token = tokenizer
            .decode(&[id], false)
            .unwrap_or_else(|_| format!("<id {id}>"));
        let _ = writeln!(text, "  {:<16} {logprob:>9.4}", format!("{token:?}"));
    }
    let total: f32 = turn.logprobs.iter().sum();
    let _ = writeln!(text, "  {:<16} {total:>9.4}", "(sum)");
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use roll_flow_envs::{EnvInfo, EnvSlot};

    fn episode(tokenizer: &TextTokenizer, step_wise: bool) -> Episode {
        let reply_text = "<answer>Left</answer>".to_string();
        let mut reply = tokenizer.encode(&reply_text).unwrap();
        reply.push(tokenizer.token_id("<|im_end|>").unwrap());
        let logprobs = vec![-0.25; reply.len()];
        Episode {
            slot: EnvSlot {
                env_tag: "val".into(),
                group_id: 0,
                group_in_tag: 0,
                index_in_group: 0,
                seed: 10_000,
                max_turns: 5,
            },
            instruction: "Reach the goal.".into(),
            system: Some("Reach the goal in as few moves as you can.".into()),
            turns: vec![TurnRecord {
                observation: "P_\n_G".into(),
                prompt: if step_wise {
                    tokenizer
                        .encode("<|im_start|>user\nP_\n_G<|im_end|>\n")
                        .unwrap()
                } else {
                    Vec::new()
                },
                reply,
                logprobs,
                reply_text,
                reward: 1.0,
                info: EnvInfo {
                    success: true,
                    action_is_valid: true,
                    action_is_effective: true,
                    format_penalty: 0.0,
                    ..Default::default()
                },
                policy_version: 0,
            }],
            transcript: None,
            success: true,
            truncated: false,
            recording: None,
            first_prompt_without_room: None,
        }
    }

    #[test]
    fn a_turn_shows_prompt_reply_action_reward_and_logprobs() {
        let tokenizer = TextTokenizer::builtin();
        let options = TextOptions {
            token_logprobs: true,
        };
        let text = episode_text(&episode(&tokenizer, false), &tokenizer, options);
        for part in [
            "env val seed 10000\n\nReach the goal in as few moves as you can.\n",
            "--- turn 1 ---\nobservation (user message):\nP_\n_G\n",
            "reply: <answer>Left</answer>\n",
            "action: \"Left\" | valid: true | effective: true\nreward: 1\n",
            "logprobs:\n  \"<answer>\"",
            "\"<|im_end|>\"",
            "success: true | total reward: 1 | turns: 1\n",
        ] {
            assert!(text.contains(part), "missing {part:?} in:\n{text}");
        }
        let reply_tokens = episode(&tokenizer, false).turns[0].reply.len();
        assert_eq!(text.matches("-0.2500").count(), reply_tokens);
        assert!(text.contains("(sum)"));
        let plain = episode_text(
            &episode(&tokenizer, false),
            &tokenizer,
            TextOptions::default(),
        );
        assert!(!plain.contains("logprobs:"));
    }

    #[test]
    fn step_wise_turns_show_the_decoded_prompt_and_a_missing_answer_says_so() {
        let tokenizer = TextTokenizer::builtin();
        let mut episode = episode(&tokenizer, true);
        episode.turns[0].reply_text = "Left".into();
        let text = episode_text(&episode, &tokenizer, TextOptions::default());
        assert!(
            text.contains("prompt (") && text.contains("<|im_start|>user\nP_\n_G<|im_end|>"),
            "{text}"
        );
        assert!(text.contains(
            "action: no <answer>...</answer> tag; the env read the reply as written | valid: "
        ));
    }
}
