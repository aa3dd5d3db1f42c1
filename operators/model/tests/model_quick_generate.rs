//! The text-level generation behind `roll-flow generate`: chat templating, tokenizing,
//! generating and decoding a model directory's completion.

mod common;

use common::{device, expected, fixture, ids, B};
use roll_flow_model::generate::{FinishReason, SamplingParams};
use roll_flow_model::quick_generate::{complete_in_model_dir, QuickGenerate};
use roll_flow_model::TextTokenizer;

fn request(prompt: &str, chat: bool) -> QuickGenerate {
    QuickGenerate {
        prompt: prompt.into(),
        chat,
        max_new_tokens: 24,
        sampling: SamplingParams::greedy(),
        seed: 0,
    }
}

/// Each fixture prompt (the first already in chat form, special tokens included) is
/// continued with transformers' greedy tokens, cut at the first stop token.
#[test]
fn plain_prompt_gives_transformers_greedy_continuation() {
    let expected = expected("tiny_qwen2");
    let tokenizer = TextTokenizer::from_model_dir(&fixture("tiny_qwen2")).unwrap();
    let prompts = expected["prompts"].as_array().unwrap();
    assert_eq!(prompts.len(), 3);
    for (k, prompt) in prompts.iter().enumerate() {
        let prompt = prompt.as_str().unwrap();
        let completion =
            complete_in_model_dir::<B>(&fixture("tiny_qwen2"), &request(prompt, false), &device())
                .unwrap();
        assert_eq!(completion.prompt_text, prompt);
        assert_eq!(
            completion.prompt_tokens,
            ids(&expected["prompt_ids"][k]).len()
        );
        let hf = ids(&expected["greedy"][k]);
        assert_eq!(hf.len(), 24);
        // The fixture's stop tokens (<|endoftext|> = 0, <|im_end|> = 2) end generation early.
        let stop = hf
            .iter()
            .position(|t| *t == 0 || *t == 2)
            .map_or(hf.len(), |i| i + 1);
        assert_eq!(completion.output.tokens, hf[..stop].to_vec(), "prompt {k}");
        assert_eq!(
            completion.text,
            tokenizer.decode(&hf[..stop], true).unwrap()
        );
        let finish = if stop < hf.len() {
            FinishReason::Stop
        } else {
            FinishReason::Length
        };
        assert_eq!(completion.output.finish, finish);
    }
}

/// `chat: true` renders the prompt as transformers' `apply_chat_template` does with
/// `add_generation_prompt=True` (the fixture's one-user-message renderings), and tokenizes
/// that text.
#[test]
fn chat_prompt_is_rendered_as_transformers_renders_it() {
    let expected = expected("tiny_qwen2");
    let tokenizer = TextTokenizer::from_model_dir(&fixture("tiny_qwen2")).unwrap();
    let cases: Vec<&serde_json::Value> = expected["chat"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|case| {
            let messages = case["messages"].as_array().unwrap();
            case["add_generation_prompt"] == true
                && messages.len() == 1
                && messages[0]["role"] == "user"
        })
        .collect();
    assert!(!cases.is_empty(), "the fixture renders a one-message chat");
    for case in cases {
        let user = case["messages"][0]["content"].as_str().unwrap();
        let rendered = case["rendered"].as_str().unwrap();
        let completion =
            complete_in_model_dir::<B>(&fixture("tiny_qwen2"), &request(user, true), &device())
                .unwrap();
        assert_eq!(completion.prompt_text, rendered);
        assert_eq!(
            completion.prompt_tokens,
            tokenizer.encode(rendered).unwrap().len()
        );
    }
}

#[test]
fn bad_directory_and_empty_prompt_are_errors() {
    let err = complete_in_model_dir::<B>(&fixture("absent"), &request("x", false), &device())
        .unwrap_err();
    assert!(err.to_string().ends_with("absent does not exist"), "{err}");
    let err = complete_in_model_dir::<B>(&fixture("tiny_qwen2"), &request("", false), &device())
        .unwrap_err();
    assert!(err.to_string().contains("the prompt is empty"), "{err}");
}
