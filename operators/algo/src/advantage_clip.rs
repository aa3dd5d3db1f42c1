//! Advantage clipping, after whitening and before `positive_weight` ([`super::shaping`]).
//!
//! A ← clip(A, −c, c) on response tokens (ROLL `advantage_clip`). Off by default.

/// Clips the advantages of response tokens into [−c, c].
pub fn clip_advantages(advantages: &mut [f32], mask: &[bool], c: f32) {
    for (a, &m) in advantages.iter_mut().zip(mask) {
        if m {
            *a = a.clamp(-c, c);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn clips_response_tokens() {
        let mut a = [5.0, -5.0, 0.3, 9.0];
        super::clip_advantages(&mut a, &[true, true, true, false], 2.0);
        assert_eq!(a, [2.0, -2.0, 0.3, 9.0]);
    }
}
