//! The odd-input corpus: every entry states its exact parse result; and the format sentence.

use super::{answer_instruction, extract_answer, parse_actions, ActionError};

const NAMES: [&str; 4] = ["Left", "Down", "Right", "Up"];
const K: usize = 3;

fn unknown(part: &str) -> Result<Vec<usize>, ActionError> {
    Err(ActionError::Unknown(part.to_string()))
}

#[test]
fn corpus_of_odd_inputs() {
    let huge_junk = "x".repeat(1 << 20);
    let huge_valid = format!("{}<answer>Up</answer>", "<think>".repeat(50_000));
    let many = format!("<answer>{}</answer>", vec!["Left"; 10_000].join("||"));
    let nested = "<answer><answer>Left</answer></answer>";
    let cases: Vec<(&str, Result<Vec<usize>, ActionError>)> = vec![
        ("", Err(ActionError::NoAnswer)),
        ("Left", Err(ActionError::NoAnswer)),
        ("<answer>Left</answer>", Ok(vec![0])),
        ("<answer>left</answer>", Ok(vec![0])),
        ("<ANSWER>RIGHT</ANSWER>", Ok(vec![2])),
        ("<Answer>dOwN</aNsWeR>", Ok(vec![1])),
        ("<answer>  Up \n</answer>", Ok(vec![3])),
        ("<think>go left?</think><answer>Right</answer>", Ok(vec![2])),
        ("<think>unclosed <answer>Up</answer>", Ok(vec![3])),
        ("<answer>Left || Up</answer>", Ok(vec![0, 3])),
        ("<answer>Left||Up||Right</answer>", Ok(vec![0, 3, 2])),
        (
            "<answer>Left||Up||Right||Down||Down</answer>",
            Ok(vec![0, 3, 2]),
        ),
        ("<answer>Left || </answer>", Err(ActionError::Empty)),
        ("<answer>|| Left</answer>", Err(ActionError::Empty)),
        ("<answer></answer>", Err(ActionError::Empty)),
        ("<answer>   \t </answer>", Err(ActionError::Empty)),
        ("<answer>Left", Err(ActionError::NoAnswer)),
        ("Left</answer>", Err(ActionError::NoAnswer)),
        ("</answer>Left<answer>", Err(ActionError::NoAnswer)),
        ("<answer>Jump</answer>", unknown("Jump")),
        ("<answer>Left | Up</answer>", unknown("Left | Up")),
        ("<answer>Left, Up</answer>", unknown("Left, Up")),
        ("<answer>Leftt</answer>", unknown("Leftt")),
        ("<answer>1</answer>", unknown("1")),
        ("<answer>Links ← 左</answer>", unknown("Links ← 左")),
        (
            "<answer>\u{0}\u{7}\u{1b}[2J</answer>",
            unknown("\u{0}\u{7}\u{1b}[2J"),
        ),
        ("\u{0}\u{1}<answer>Down</answer>\u{ff}", Ok(vec![1])),
        ("é<answer>Up</answer>ü", Ok(vec![3])),
        ("<answer>Up</answer><answer>Down</answer>", Ok(vec![3])),
        (nested, unknown("<answer>Left")),
        ("<answer >Left</answer>", Err(ActionError::NoAnswer)),
        ("<answer>LEFT</answer> trailing text", Ok(vec![0])),
        ("<answer>\u{200b}Left</answer>", unknown("\u{200b}Left")),
        (&huge_junk, Err(ActionError::NoAnswer)),
        (&huge_valid, Ok(vec![3])),
        (&many, Ok(vec![0, 0, 0])),
        ("<", Err(ActionError::NoAnswer)),
        ("<answer>", Err(ActionError::NoAnswer)),
        ("<answer></answer", Err(ActionError::NoAnswer)),
    ];
    assert!(cases.len() >= 30);
    for (text, expected) in cases {
        let shown: String = text.chars().take(60).collect();
        assert_eq!(parse_actions(text, &NAMES, K), expected, "input {shown:?}");
    }
}

#[test]
fn unknown_part_is_cut_to_forty_characters() {
    let long = format!("<answer>{}</answer>", "ж".repeat(500));
    let Err(ActionError::Unknown(part)) = parse_actions(&long, &NAMES, K) else {
        panic!("expected Unknown");
    };
    assert_eq!(part.chars().count(), 40);
}

#[test]
fn extract_answer_keeps_inner_text_verbatim() {
    assert_eq!(extract_answer("a<ANSWER> 42 </answer>b"), Some(" 42 "));
    assert_eq!(extract_answer("no tags"), None);
}

#[test]
fn every_prefix_of_a_tricky_input_parses_without_panic() {
    let text = "<think>ü</think><answer>Left||Up</answer>";
    for (i, _) in text.char_indices() {
        let _ = parse_actions(&text[..i], &NAMES, K);
        let _ = parse_actions(&text[i..], &NAMES, K);
    }
}

#[test]
fn answer_instruction_asks_for_one_action_or_a_chain() {
    assert_eq!(
        answer_instruction(1, &["Up", "Left"]),
        "Answer with one action, for example <answer>Up</answer>."
    );
    assert_eq!(
        answer_instruction(3, &["Up", "Left"]),
        "Answer with up to 3 actions separated by ||, for example <answer>Up || Left</answer>."
    );
}
