//! Masked batch-wide advantage whitening.
//!
//! Over the response tokens of the whole batch (verl/ROLL `masked_whiten`, shift_mean on):
//! A ← (A − mean) / sqrt(var + 1e-8), with var the unbiased masked variance
//! (Bessel factor n/(n − 1)). Skipped when there are ≤ 1 valid tokens (REFERENCE.md), where
//! the unbiased variance is undefined. Tokens outside the mask stay as they are.

/// Whitens in place; returns false when skipped (≤ 1 response token).
pub fn whiten(advantages: &mut [f32], mask: &[bool]) -> bool {
    let valid: Vec<f64> = advantages
        .iter()
        .zip(mask)
        .filter(|(_, &m)| m)
        .map(|(&a, _)| a as f64)
        .collect();
    let n = valid.len() as f64;
    if valid.len() <= 1 {
        return false;
    }
    let mean = valid.iter().sum::<f64>() / n;
    let var = valid.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let scale = 1.0 / (var + 1e-8).sqrt();
    for (a, &m) in advantages.iter_mut().zip(mask) {
        if m {
            *a = ((*a as f64 - mean) * scale) as f32;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitens_masked_tokens_by_hand() {
        // valid [1, 3]: mean 2, unbiased var 2 → (±1)/sqrt(2 + 1e-8).
        let mut a = [1.0, 100.0, 3.0];
        assert!(whiten(&mut a, &[true, false, true]));
        let w = 1.0 / (2.0f64 + 1e-8).sqrt();
        assert!((a[0] as f64 + w).abs() < 1e-6 && (a[2] as f64 - w).abs() < 1e-6);
        assert_eq!(a[1], 100.0);
    }

    #[test]
    fn skipped_for_one_or_no_valid_token() {
        let mut a = [4.0, 5.0];
        assert!(!whiten(&mut a, &[false, true]));
        assert!(!whiten(&mut a, &[false, false]));
        assert_eq!(a, [4.0, 5.0]);
    }
}
