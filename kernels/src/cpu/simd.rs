//! Vector-friendly scalar helpers for the CPU twins: a polynomial `exp` that LLVM turns
//! into SIMD code (no libm call in the loop), row reductions over 16 partial results, the
//! AVX-512 lane masks, and the AVX2+FMA runtime dispatch.
//!
//! `exp(x)`: Cody–Waite range reduction x = n·ln2 + r with |r| ≤ ln2/2, then a degree-6
//! Taylor polynomial for e^r (truncation error r⁷/7! ≤ 1.3e-7 relative), times 2^n built
//! from the exponent bits. Valid for x in [−87, 88]; larger inputs are clamped to 88 and
//! anything below −87 (−∞ included) gives exactly 0, so a logit masked to −∞ drops out of
//! every sum. Rounding uses the 1.5·2²³ trick so the loop needs no `floor` call and no
//! float→int conversion.

/// a·b + c rounded once, on every path: the copies compiled with FMA use the instruction,
/// the plain one [`fma_without_instruction`] (the same bits). A separate multiply and add
/// would round twice and give a CPU without FMA other numbers than the rest.
#[inline(always)]
pub(crate) fn fma<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        fma_without_instruction(a, b, c)
    }
}

/// a·b + c correctly rounded (what an FMA instruction gives) from plain f64 arithmetic,
/// which vectorises, where the C library's `fmaf` is one call per value: the product of
/// two f32 is exact in f64 (48 significant bits); the f64 sum s is made *round-to-odd*
/// (its exact error e from TwoSum (Knuth); when e ≠ 0 and s is even, s moves one unit
/// towards e); and a value rounded to odd at 53 bits, then to nearest at 24, is the
/// correctly rounded value (Boldo & Melquiond 2008, "Emulation of FMA and correctly
/// rounded sums: proved algorithms using rounding to odd", 53 ≥ 24 + 2).
#[inline(always)]
pub(crate) fn fma_without_instruction(a: f32, b: f32, c: f32) -> f32 {
    let (p, c) = (a as f64 * b as f64, c as f64);
    let s = p + c;
    let t = s - p;
    let e = (p - (s - t)) + (c - t);
    let bits = s.to_bits();
    // Without branches, so that it vectorises: one unit towards e, up in magnitude when e
    // has s's sign (s ≠ 0 when e ≠ 0), only for an inexact even finite s.
    let inexact_even = (e != 0.0) & (bits & 1 == 0) & s.is_finite();
    let towards = ((e > 0.0) == (s > 0.0)) as i64 * 2 - 1;
    let odd = bits.wrapping_add((inexact_even as i64 * towards) as u64);
    f64::from_bits(odd) as f32
}

/// e^x for x in [−87, 88] (88 above), relative error ≈ 2e-7; 0 below −87.
#[inline(always)]
pub(crate) fn exp<const FMA: bool>(x: f32) -> f32 {
    let underflow = x < -87.0;
    let x = if x < -87.0 { -87.0 } else { x };
    let x = if x > 88.0 { 88.0 } else { x };
    let e = exp_in_range::<FMA>(x);
    if underflow {
        0.0
    } else {
        e
    }
}

/// e^x for x already in [−87, 88] (no clamping: the caller bounds x, e.g. with one `max`
/// where x ≤ 0 is known).
#[inline(always)]
pub(crate) fn exp_in_range<const FMA: bool>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const ROUND: f32 = 12_582_912.0; // 1.5 · 2^23
    let t = fma::<FMA>(x, LOG2E, ROUND);
    let n = t - ROUND;
    let r = fma::<FMA>(-n, LN2_HI, x);
    let r = fma::<FMA>(-n, LN2_LO, r);
    let mut p = 1.0 / 720.0;
    p = fma::<FMA>(p, r, 1.0 / 120.0);
    p = fma::<FMA>(p, r, 1.0 / 24.0);
    p = fma::<FMA>(p, r, 1.0 / 6.0);
    p = fma::<FMA>(p, r, 0.5);
    p = fma::<FMA>(p, r, 1.0);
    p = fma::<FMA>(p, r, 1.0);
    // n sits in the low mantissa bits of t: 2^n without a float→int conversion (an `as`
    // cast saturates, which LLVM cannot vectorise).
    let bits = t.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127) << 23;
    p * f32::from_bits(bits)
}

/// Partial results of the reductions below: strict f32 reductions do not vectorise, so
/// they run over 16 independent lanes (one AVX-512 or two AVX2 registers).
const LANES: usize = 16;

/// The fold of `v` by `f`, which must be associative and commutative (a sum, a max): lane
/// `i` folds the elements `i`, `i + 16`, …, then the lanes and the tail are folded in order.
#[inline(always)]
pub(crate) fn lane_fold(v: &[f32], init: f32, f: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = [init; LANES];
    let chunks = v.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a = f(*a, x);
        }
    }
    let head = acc.into_iter().fold(init, &f);
    tail.iter().fold(head, |a, &x| f(a, x))
}

/// Σ a_i·b_i over the common length, in the lane order of [`lane_fold`].
#[inline(always)]
pub(crate) fn lane_dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ta, tb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for ((s, &x), &y) in acc.iter_mut().zip(x).zip(y) {
            *s += x * y;
        }
    }
    let head = acc.into_iter().sum::<f32>();
    ta.iter().zip(tb).fold(head, |s, (&x, &y)| s + x * y)
}

/// The AVX-512 lanes of the first `n` elements of a 16-lane chunk (all for `n` ≥ 16): the
/// mask of a chunk's loads and stores, the last one partial.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn low_lanes(n: usize) -> std::arch::x86_64::__mmask16 {
    if n >= LANES {
        !0
    } else {
        ((1u32 << n) - 1) as std::arch::x86_64::__mmask16
    }
}

/// The instruction set the vector loops run with, detected once per call.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Isa {
    Avx512,
    Avx2,
    Generic,
}

impl Isa {
    /// The best instruction set this CPU has, capped by the environment variable
    /// `ROLL_FLOW_KERNELS_ISA` (`avx2` or `generic`) if set: that lets the test suite run
    /// the fallback paths on an AVX-512 machine. Read once per process.
    pub(crate) fn detect() -> Isa {
        static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *ISA.get_or_init(|| {
            let cap = std::env::var("ROLL_FLOW_KERNELS_ISA").unwrap_or_default();
            if has_avx512() && cap.is_empty() {
                Isa::Avx512
            } else if has_avx2_fma() && cap != "generic" {
                Isa::Avx2
            } else {
                Isa::Generic
            }
        })
    }
}

/// For each listed generic `fn name<const FMA: bool>(args) -> ret` of the calling module,
/// a copy in module `$module` compiled with `$features` enabled that calls it with
/// FMA = true (same body; LLVM vectorises each copy for its instruction set). Pick a copy
/// with [`dispatch!`].
macro_rules! isa_copies {
    ($module:ident, $features:literal: $( $name:ident ( $($arg:ident : $ty:ty),* ) $(-> $ret:ty)? ;)* ) => {
        #[cfg(target_arch = "x86_64")]
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[target_feature(enable = $features)]
                pub(super) fn $name($($arg: $ty),*) $(-> $ret)? {
                    super::$name::<true>($($arg),*)
                }
            )*
        }
    };
}
pub(crate) use isa_copies;

/// Calls the `avx512` / `avx2` copy (see [`isa_copies!`]) of `name` that `isa` allows, or
/// the generic version.
macro_rules! dispatch {
    ($isa:expr, $name:ident ( $($arg:expr),* $(,)? )) => {
        match $isa {
            // SAFETY: `Isa::detect` found these target features at run time.
            #[cfg(target_arch = "x86_64")]
            $crate::cpu::simd::Isa::Avx512 => unsafe { avx512::$name($($arg),*) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            $crate::cpu::simd::Isa::Avx2 => unsafe { avx2::$name($($arg),*) },
            _ => $name::<false>($($arg),*),
        }
    };
}
pub(crate) use dispatch;

/// Whether the AVX-512 code paths (F and DQ) can run on this CPU.
#[inline]
pub(crate) fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx2_fma()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU has the FMA instruction (whatever the vector width).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_fma() -> bool {
    std::arch::is_x86_feature_detected!("fma")
}

/// Whether the AVX2+FMA code paths can run on this CPU.
#[inline]
pub(crate) fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::fma_without_instruction;

    /// The emulated FMA equals the instruction's (`f32::mul_add`) bit for bit: on a million
    /// random triples over the whole exponent range (products near the sum's magnitude, so
    /// the sum is inexact, is where double rounding would show), cancellations, ties,
    /// subnormals, overflow, infinities and NaN.
    #[test]
    fn fma_without_the_instruction_rounds_once() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let check = |a: f32, b: f32, c: f32| {
            let (want, got) = (a.mul_add(b, c), fma_without_instruction(a, b, c));
            assert!(
                want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()),
                "fma({a:e}, {b:e}, {c:e}) = {want:e}, emulated {got:e}"
            );
        };
        for _ in 0..1_000_000 {
            let r = next();
            let a = f32::from_bits(r as u32);
            let b = f32::from_bits((r >> 32) as u32);
            // c near −a·b in magnitude half of the time: long cancellations, inexact sums.
            let c = match next() % 4 {
                0 => f32::from_bits(next() as u32),
                1 => -(a * b) * (1.0 + (next() % 1000) as f32 * f32::EPSILON),
                2 => (a * b) * f32::from_bits(0x3300_0000 + (next() % 0x0100_0000) as u32),
                _ => -(a * b),
            };
            check(a, b, c);
            // The same in an ordinary range (most training values).
            let small = |x: u64| ((x % 2_000_001) as f32 - 1_000_000.0) * 1e-6;
            check(small(next()), small(next()), small(next()));
        }
        let specials = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f32::MIN_POSITIVE,
            1e-45,
            f32::MAX,
            f32::INFINITY,
            f32::NAN,
            1.0 + f32::EPSILON,
            0.5 - f32::EPSILON / 4.0,
        ];
        for &a in &specials {
            for &b in &specials {
                for &c in &specials {
                    check(a, b, c);
                    check(a, b, -c);
                }
            }
        }
    }

    #[test]
    fn exp_matches_std() {
        let mut worst = 0.0f32;
        let mut x = -87.0f32;
        while x < 88.0 {
            let rel = (super::exp::<false>(x) - x.exp()).abs() / x.exp();
            worst = worst.max(rel);
            x += 0.01;
        }
        assert!(worst < 5e-7, "worst relative error {worst}");
    }

    #[test]
    fn exp_underflows_to_zero() {
        for x in [-87.5f32, -1e4, f32::NEG_INFINITY] {
            assert_eq!(super::exp::<false>(x), 0.0, "{x}");
        }
    }
}
