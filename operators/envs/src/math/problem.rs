//! Procedural arithmetic problems with exact answers.
//!
//! A random binary expression over `operands` integers in 1..=`max_operand` with the
//! given operators (of + − × ÷): the tree shape is drawn by splitting the operand count
//! at a uniform point, every operator uniformly. Sub-expressions are parenthesised, so the
//! text has one reading. The answer is evaluated exactly ([`Rational`]); draws that
//! divide by zero or overflow are redrawn. Division makes fractional answers possible,
//! which is why answers may be given as reduced fractions.

use rand::Rng;

use super::rational::Rational;

/// One problem: its text and exact answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub expression: String,
    pub answer: Rational,
}

/// Every operator a problem may use.
pub const OPERATORS: [char; 4] = ['+', '-', '*', '/'];

/// Draws a problem with `operators` (redrawing on division by zero or overflow).
pub fn generate(
    operands: usize,
    max_operand: i64,
    operators: &[char],
    rng: &mut impl Rng,
) -> Problem {
    loop {
        if let Some((expression, answer)) = draw(operands, max_operand, operators, rng) {
            return Problem { expression, answer };
        }
    }
}

/// One random expression with `n ≥ 1` operands: its text (parenthesised when compound)
/// and value.
fn draw(
    n: usize,
    max_operand: i64,
    operators: &[char],
    rng: &mut impl Rng,
) -> Option<(String, Rational)> {
    if n <= 1 {
        let value = rng.random_range(1..=max_operand);
        return Some((value.to_string(), Rational::integer(value.into())));
    }
    let left_n = rng.random_range(1..n);
    let op = operators[rng.random_range(0..operators.len())];
    let (left, a) = draw(left_n, max_operand, operators, rng)?;
    let (right, b) = draw(n - left_n, max_operand, operators, rng)?;
    let value = apply(op, a, b)?;
    Some((
        format!("{} {op} {}", wrap(left, left_n), wrap(right, n - left_n)),
        value,
    ))
}

fn wrap(text: String, operands: usize) -> String {
    if operands > 1 {
        format!("({text})")
    } else {
        text
    }
}

/// `a op b` exactly; `None` for division by zero or overflow.
pub fn apply(op: char, a: Rational, b: Rational) -> Option<Rational> {
    match op {
        '+' => a.checked_add(b),
        '-' => a.checked_sub(b),
        '*' => a.checked_mul(b),
        _ => a.checked_div(b),
    }
}
