//! The text-level generation behind `roll-flow generate`: chat templating, tokenizing,
//! generating and decoding a model directory's completion.

mod common;

use common::{device, expected, fixture, ids, B};
use roll_flow_operators::model::generate::{FinishReason, SamplingParams};
use roll_flow_operators::model::quick_generate::{complete_in_model_dir, QuickGenerate};
use roll_flow_operators::model::{ChatMessage, TextTokenizer};

fn request(prompt: &str, chat: bool) -> QuickGenerate {
    QuickGenerate {
        prompt: prompt.into(),
        chat,
        max_new_tokens: 24,
        sampling: SamplingParams::greedy(),
        seed: 0,
    }
}

#[test]
fn plain_prompt_gives_transformers_greedy_continuation() {
    let expected = expected("tiny_qwen2");
    let prompt = expected["prompts"][1].as_str().unwrap();
    let completion =
        complete_in_model_dir::<B>(&fixture("tiny_qwen2"), &request(prompt, false), &device())
            .unwrap();
    assert_eq!(completion.prompt_text, prompt);
    assert_eq!(
        completion.prompt_tokens,
        ids(&expected["prompt_ids"][1]).len()
    );
    let hf = ids(&expected["greedy"][1]);
    // The fixture's stop tokens (<|endoftext|> = 0, <|im_end|> = 2) end generation early.
    let stop = hf
        .iter()
        .position(|t| *t == 0 || *t == 2)
        .map_or(hf.len(), |i| i + 1);
    assert_eq!(completion.output.tokens, hf[..stop].to_vec());
    let tokenizer = TextTokenizer::from_model_dir(&fixture("tiny_qwen2")).unwrap();
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

#[test]
fn chat_prompt_is_rendered_with_the_template() {
    let completion =
        complete_in_model_dir::<B>(&fixture("tiny_qwen2"), &request("Hi", true), &device())
            .unwrap();
    let tokenizer = TextTokenizer::from_model_dir(&fixture("tiny_qwen2")).unwrap();
    let rendered = tokenizer
        .apply_chat_template(&[ChatMessage::new("user", "Hi")], true)
        .unwrap();
    assert_eq!(completion.prompt_text, rendered);
    assert!(rendered.ends_with("<|im_start|>assistant\n"));
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
