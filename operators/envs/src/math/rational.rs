//! Exact rational numbers (i128 numerator / positive denominator, always reduced), so
//! generated problems have exact answers and `0.5`, `1/2` and `\frac{2}{4}` compare equal.

use std::fmt;

/// A reduced fraction with a positive denominator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rational {
    num: i128,
    den: i128,
}

fn gcd(mut a: i128, mut b: i128) -> i128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.abs()
}

impl Rational {
    /// `num / den`, reduced; `None` when `den` is 0 or the values overflow.
    pub fn new(num: i128, den: i128) -> Option<Rational> {
        if den == 0 || num == i128::MIN || den == i128::MIN {
            return None;
        }
        let g = gcd(num, den).max(1);
        let sign = if den < 0 { -1 } else { 1 };
        Some(Rational {
            num: sign * num / g,
            den: sign * den / g,
        })
    }

    /// An integer.
    pub fn integer(value: i128) -> Rational {
        Rational { num: value, den: 1 }
    }

    pub fn numerator(self) -> i128 {
        self.num
    }

    pub fn denominator(self) -> i128 {
        self.den
    }

    pub fn checked_add(self, other: Rational) -> Option<Rational> {
        let num = self
            .num
            .checked_mul(other.den)?
            .checked_add(other.num.checked_mul(self.den)?)?;
        Rational::new(num, self.den.checked_mul(other.den)?)
    }

    pub fn checked_sub(self, other: Rational) -> Option<Rational> {
        self.checked_add(Rational {
            num: other.num.checked_neg()?,
            den: other.den,
        })
    }

    pub fn checked_mul(self, other: Rational) -> Option<Rational> {
        Rational::new(
            self.num.checked_mul(other.num)?,
            self.den.checked_mul(other.den)?,
        )
    }

    /// `None` for division by zero.
    pub fn checked_div(self, other: Rational) -> Option<Rational> {
        Rational::new(
            self.num.checked_mul(other.den)?,
            self.den.checked_mul(other.num)?,
        )
    }
}

impl fmt::Display for Rational {
    /// `7`, `-3` or `7/3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.den == 1 {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}
