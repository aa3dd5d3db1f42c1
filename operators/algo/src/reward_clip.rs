//! Response-level reward clipping, the first shaping step.
//!
//! r ← clip(r, −c, c) (ROLL `reward_clip`, applied to response-level scores before
//! normalisation). Off by default.

/// Clips every reward into [−c, c].
pub fn clip_rewards(rewards: &mut [f64], c: f64) {
    for r in rewards {
        *r = r.clamp(-c, c);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn clips_both_sides() {
        let mut r = [-3.0, -0.5, 0.0, 2.5];
        super::clip_rewards(&mut r, 1.0);
        assert_eq!(r, [-1.0, -0.5, 0.0, 1.0]);
    }
}
