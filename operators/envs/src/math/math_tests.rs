//! Math: verifier cases, exact problem answers (checked by an independent f64 evaluator),
//! and the multi-turn episode.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::problem::{generate, OPERATORS};
use super::rational::Rational;
use super::verifier::{final_answer, parse_number};
use super::{answer_range, MathConfig, CORRECT_FEEDBACK, WRONG_FEEDBACK};
use crate::env::Env;
use crate::error::EnvError;

fn q(num: i128, den: i128) -> Option<Rational> {
    Rational::new(num, den)
}

#[test]
fn verifier_cases() {
    let no_digits = "why? ".repeat(100_000);
    let cases: Vec<(&str, Option<Rational>)> = vec![
        ("The answer is \\boxed{42}.", q(42, 1)),
        ("So we get 17", q(17, 1)),
        ("It is -4.", q(-4, 1)),
        ("\\boxed{-12}", q(-12, 1)),
        ("First 3, then 5, finally \\boxed{8} (not 9)", q(8, 1)),
        ("\\boxed{1} then \\boxed{2}", q(2, 1)),
        ("\\boxed{0.75}", q(3, 4)),
        ("x = 2.50", q(5, 2)),
        ("\\boxed{7/3}", q(7, 3)),
        ("\\boxed{\\frac{14}{6}}", q(7, 3)),
        ("\\boxed{-\\frac{7}{3}}", q(-7, 3)),
        ("\\boxed{\\dfrac{1}{2}}", q(1, 2)),
        ("\\boxed{ 1,234 }", q(1234, 1)),
        ("total: 1,234", q(1234, 1)),
        ("$\\boxed{$5$}$", q(5, 1)),
        ("we need 5-3", q(3, 1)),
        ("ratio -7/3", q(-7, 3)),
        ("<answer>42</answer> although 7 is close", q(42, 1)),
        ("<think>maybe 3</think><answer>\\boxed{9}</answer>", q(9, 1)),
        ("\\boxed{12", q(12, 1)),
        ("I don't know", None),
        ("", None),
        ("\\boxed{x+1}", None),
        ("\\boxed{}", None),
        ("\\boxed{1/0}", None),
        ("1/0", None),
        ("\\boxed{١٢}", None),
        (&no_digits, None),
        ("\\boxed{99999999999999999999999999999999999999999}", None),
    ];
    for (text, expected) in cases {
        let shown: String = text.chars().take(50).collect();
        assert_eq!(final_answer(text), expected, "{shown:?}");
    }
}

#[test]
fn parse_number_reduces_and_signs() {
    assert_eq!(parse_number("-0.5"), q(-1, 2));
    assert_eq!(parse_number("4/-8"), q(-1, 2));
    assert_eq!(parse_number(".25"), q(1, 4));
    assert_eq!(parse_number("-"), None);
}

/// An independent f64 evaluator for the generated grammar: numbers, + - * /, parentheses.
fn eval(text: &str) -> f64 {
    fn expr(t: &[u8], i: &mut usize) -> f64 {
        let mut value = term(t, i);
        while *i < t.len() {
            skip(t, i);
            let op = t[*i];
            *i += 1;
            skip(t, i);
            let rhs = term(t, i);
            value = match op {
                b'+' => value + rhs,
                b'-' => value - rhs,
                b'*' => value * rhs,
                b'/' => value / rhs,
                _ => panic!("operator {op}"),
            };
            skip(t, i);
            if *i < t.len() && t[*i] == b')' {
                break;
            }
        }
        value
    }
    fn term(t: &[u8], i: &mut usize) -> f64 {
        if t[*i] == b'(' {
            *i += 1;
            let v = expr(t, i);
            *i += 1; // ')'
            return v;
        }
        let start = *i;
        while *i < t.len() && t[*i].is_ascii_digit() {
            *i += 1;
        }
        std::str::from_utf8(&t[start..*i]).unwrap().parse().unwrap()
    }
    fn skip(t: &[u8], i: &mut usize) {
        while *i < t.len() && t[*i] == b' ' {
            *i += 1;
        }
    }
    expr(text.as_bytes(), &mut 0)
}

#[test]
fn generated_answers_are_exact() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut fractional = 0;
    for operands in 2..=6 {
        for _ in 0..400 {
            let problem = generate(operands, 30, &OPERATORS, &mut rng);
            let exact = problem.answer.numerator() as f64 / problem.answer.denominator() as f64;
            let approx = eval(&problem.expression);
            assert!(
                (exact - approx).abs() <= 1e-9 * approx.abs().max(1.0),
                "{} = {} but f64 says {approx}",
                problem.expression,
                problem.answer
            );
            let numbers = problem.expression.split(|c: char| !c.is_ascii_digit());
            assert_eq!(numbers.filter(|s| !s.is_empty()).count(), operands);
            fractional += usize::from(problem.answer.denominator() != 1);
        }
    }
    assert!(fractional > 0, "division yields some fractions");
}

#[test]
fn wrong_wrong_right_episode() {
    let mut env = MathConfig::default().build().unwrap();
    assert_eq!(env.step("1"), Err(EnvError::NotReset("Math")));
    let reset = env.reset(7).unwrap();
    let answer = env.problem().unwrap().answer;
    assert!(reset.observation.starts_with("Compute "));
    let wrong = answer.checked_add(Rational::integer(1)).unwrap();
    let first = env.step(&format!("\\boxed{{{wrong}}}")).unwrap();
    assert_eq!(
        (first.reward, first.terminated, first.truncated),
        (-1.0, false, false)
    );
    assert_eq!(first.observation, WRONG_FEEDBACK);
    assert!(first.info.action_is_valid);
    let second = env.step("no idea").unwrap();
    assert_eq!(second.reward, -1.0);
    assert!(!second.info.action_is_valid);
    let third = env.step(&format!("It is \\boxed{{{answer}}}")).unwrap();
    assert_eq!((third.reward, third.terminated), (1.0, true));
    assert_eq!(third.observation, CORRECT_FEEDBACK);
    assert!(third.info.success);
    assert_eq!(env.step("1"), Err(EnvError::EpisodeOver("Math")));
}

#[test]
fn running_out_of_turns_truncates() {
    let mut env = MathConfig {
        max_turns: 2,
        ..Default::default()
    }
    .build()
    .unwrap();
    env.reset(1).unwrap();
    assert!(!env.step("?").unwrap().done());
    let last = env.step("?").unwrap();
    assert_eq!((last.terminated, last.truncated), (false, true));
    assert_eq!(env.step("?"), Err(EnvError::EpisodeOver("Math")));
}

#[test]
fn bad_configs_are_refused() {
    for config in [
        MathConfig {
            operands: 1,
            ..Default::default()
        },
        MathConfig {
            max_operand: 0,
            ..Default::default()
        },
        MathConfig {
            max_turns: 0,
            ..Default::default()
        },
    ] {
        assert!(config.build().is_err(), "{config:?}");
    }
}

#[test]
fn max_turns_is_capped_with_the_range_in_the_message() {
    let config = |max_turns| MathConfig {
        max_turns,
        ..Default::default()
    };
    assert!(config(1000).validate().is_ok());
    for (turns, shown) in [
        (1001, "1001"),
        (usize::MAX, "18446744073709551615"),
        (0, "0"),
    ] {
        let err = config(turns).validate().unwrap_err().to_string();
        assert_eq!(
            err,
            format!("Math: invalid `max_turns`: {shown} is not in 1..=1000")
        );
    }
}

#[test]
fn answer_ranges_by_hand() {
    // Two operands in 1..=9: a + b in 2..=18, a − b in −8..=8.
    assert_eq!(answer_range(2, 9, &['+', '-']), Some(-8..=18));
    assert_eq!(answer_range(2, 9, &['+']), Some(2..=18));
    assert_eq!(answer_range(2, 9, &['*']), Some(1..=81));
    // Three operands with + and −: (a − (b + c)) reaches 1 − 18 = −17; a + b + c 27.
    assert_eq!(answer_range(3, 9, &['+', '-']), Some(-17..=27));
    // Division makes fractions: no names; too wide a range: none either.
    assert_eq!(answer_range(2, 9, &['+', '/']), None);
    assert_eq!(answer_range(3, 100, &['*']), None);
    // Every drawn answer lies in the range.
    let ops = ['+', '-', '*'];
    let range = answer_range(3, 6, &ops).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for _ in 0..2000 {
        let answer = generate(3, 6, &ops, &mut rng).answer;
        assert_eq!(answer.denominator(), 1);
        assert!(range.contains(&(answer.numerator() as i64)), "{answer}");
    }
}

#[test]
fn integer_problems_name_their_answers_and_report_retries() {
    let config = MathConfig {
        operands: 2,
        max_operand: 9,
        max_turns: 3,
        operators: "+-".into(),
    };
    let mut env = config.build().unwrap();
    let names = env.action_names();
    assert_eq!(names.len(), 27);
    assert_eq!((names[0].as_str(), names[26].as_str()), ("-8", "18"));
    assert!(MathConfig::default()
        .build()
        .unwrap()
        .action_names()
        .is_empty());
    env.reset(5).unwrap();
    let answer = env.problem().unwrap().answer;
    let wrong = answer.checked_add(Rational::integer(1)).unwrap();
    let guided = |n: Rational| format!("<answer>{n}</answer>");
    let first = env.step(&guided(wrong)).unwrap();
    assert_eq!(first.info.metrics.get("first_attempt_correct"), Some(0.0));
    assert_eq!(first.info.metrics.get("repeated_wrong"), None);
    let second = env.step(&guided(wrong)).unwrap();
    assert_eq!(second.info.metrics.get("repeated_wrong"), Some(1.0));
    assert_eq!(second.info.metrics.get("first_attempt_correct"), None);
    let third = env.step(&guided(answer)).unwrap();
    assert_eq!(third.info.metrics.get("repeated_wrong"), Some(0.0));
    assert!(third.info.success && third.terminated);
    // A right first answer counts as first-attempt accuracy.
    env.reset(5).unwrap();
    let right = env.step(&guided(answer)).unwrap();
    assert_eq!(right.info.metrics.get("first_attempt_correct"), Some(1.0));
}

#[test]
fn operators_are_checked() {
    for bad in ["", "+x", "++", "%"] {
        let config = MathConfig {
            operators: bad.into(),
            ..Default::default()
        };
        let Err(e) = config.build() else {
            panic!("operators {bad:?} accepted");
        };
        assert!(e.to_string().contains("operators"), "{e}");
    }
}
