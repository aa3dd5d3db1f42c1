//! The answer verifier: finds the final number in a response and compares it exactly.
//!
//! Where the answer is looked for, in order (as math verifiers such as AReaL's do):
//! 1. inside the first `<answer>…</answer>` if there is one, else the whole response;
//! 2. the content of the last `\boxed{…}` (braces balanced) if there is one;
//! 3. otherwise the last number in that text.
//!
//! Numbers: integers (`-12`, `1,234`), decimals (`0.75` = 3/4 exactly), fractions
//! (`7/3`, `-7/3`, `\frac{7}{3}`, `\dfrac{7}{3}`, `-\frac{7}{3}`). A boxed content that is
//! not a single number (e.g. `\boxed{x+1}`) gives no answer. Never panics.

use super::rational::Rational;
use crate::action::extract_answer;

/// The response's final answer, if it names a number.
pub fn final_answer(response: &str) -> Option<Rational> {
    let scope = extract_answer(response).unwrap_or(response);
    match last_boxed(scope) {
        Some(boxed) => parse_number(boxed),
        None => last_number(scope),
    }
}

/// Whether the response's final answer equals `answer`.
pub fn is_correct(response: &str, answer: Rational) -> bool {
    final_answer(response) == Some(answer)
}

/// The content of the last `\boxed{…}` with balanced braces.
fn last_boxed(text: &str) -> Option<&str> {
    let start = text.rfind("\\boxed{")? + "\\boxed{".len();
    let mut depth = 1usize;
    for (i, ch) in text[start..].char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[start..start + i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// One number, allowing surrounding spaces and `$`, a trailing period, LaTeX fractions.
pub fn parse_number(text: &str) -> Option<Rational> {
    let cleaned: String = text
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '$')
        .collect();
    let cleaned = cleaned.trim_end_matches('.');
    let (negative, body) = match cleaned.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, cleaned),
    };
    let value = parse_latex_fraction(body).or_else(|| parse_plain(body))?;
    if negative {
        Rational::integer(0).checked_sub(value)
    } else {
        Some(value)
    }
}

fn parse_latex_fraction(text: &str) -> Option<Rational> {
    let rest = text
        .strip_prefix("\\frac{")
        .or_else(|| text.strip_prefix("\\dfrac{"))
        .or_else(|| text.strip_prefix("\\tfrac{"))?;
    let (num, rest) = rest.split_once("}{")?;
    let den = rest.strip_suffix('}')?;
    parse_plain(num)?.checked_div(parse_plain(den)?)
}

/// `a`, `a.b`, `a/b` with optional sign on `a` and thousands commas.
fn parse_plain(text: &str) -> Option<Rational> {
    if let Some((num, den)) = text.split_once('/') {
        return parse_decimal(num)?.checked_div(parse_decimal(den)?);
    }
    parse_decimal(text)
}

fn parse_decimal(text: &str) -> Option<Rational> {
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let digits: String = text.chars().filter(|c| *c != ',').collect();
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((&digits, ""));
    let all_digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if int_part.is_empty() && frac_part.is_empty()
        || !all_digits(int_part)
        || !all_digits(frac_part)
        || int_part.len() + frac_part.len() > 30
    {
        return None;
    }
    let scale = 10i128.checked_pow(frac_part.len() as u32)?;
    let whole: i128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().ok()?
    };
    let frac: i128 = if frac_part.is_empty() {
        0
    } else {
        frac_part.parse().ok()?
    };
    let num = whole.checked_mul(scale)?.checked_add(frac)?;
    Rational::new(if negative { -num } else { num }, scale)
}

/// The last number in free text: `-?digits[,digits]*[.digits][/digits]`.
fn last_number(text: &str) -> Option<Rational> {
    let bytes = text.as_bytes();
    let mut end = bytes.len();
    while end > 0 && !bytes[end - 1].is_ascii_digit() {
        end -= 1;
    }
    if end == 0 {
        return None;
    }
    let mut start = end;
    while start > 0 && matches!(bytes[start - 1], b'0'..=b'9' | b'.' | b'/' | b',') {
        start -= 1;
    }
    // A minus sign, unless it is a subtraction (`5-3`).
    let minus = start > 0 && bytes[start - 1] == b'-';
    if minus && !(start > 1 && bytes[start - 2].is_ascii_alphanumeric()) {
        start -= 1;
    }
    let candidate = text[start..end].trim_start_matches(['.', '/', ',']);
    parse_plain(candidate)
}
