//! Adaptive entropy control: an entropy-bonus coefficient that moves each step toward the
//! value that holds the policy's entropy at a target (Skywork-OR1, He et al. 2025, §3.2
//! "Adaptive Entropy Control").
//!
//! With H_k the entropy measured in step k's update (per response token, under the
//! weights the step starts from) and H* the target:
//!
//! c_{k+1} = clamp(c_k + Δ·sign(H* − H_k), 0, c_max)
//! α_k     = c_k · 1{H_{k−1} ≤ H*}
//!
//! α_k is the bonus coefficient of step k's objective (L = L_policy − α_k·agg(H)). The
//! bonus is off while the entropy is above the target, so it never pushes an exploring
//! policy further up, and once the entropy falls below the target the coefficient grows
//! by Δ per step until it holds. Skywork's rule reads H_k inside step k; here the
//! indicator reads the step before, since micro-batches train concurrently and each sees
//! only its own part of the batch (step 0 has no measurement and uses c_0). c_0 is the
//! `ActorStep(entropy: ..)` coefficient (Skywork: 0).
//!
//! Why: with group-relative advantages a policy that turns deterministic stops learning.
//! Every group then scores alike, every advantage is zero, and `drop_zero_advantage`
//! leaves nothing to train on; the FrozenLake GiGPO runs stall that way (bench/history/learning_curve_frozen_lake_gigpo.md).
//!
//! Defaults: Δ = 0.005 (Skywork's), c_max = 0.05 (our bound, not in Skywork's rule: a
//! coefficient that kept growing while the entropy cannot rise would swamp the policy
//! loss). RON: `ActorStep(.., adaptive_entropy: (target: 0.05))`.

use serde::{Deserialize, Serialize};

fn default_delta() -> f64 {
    0.005
}

fn default_max() -> f64 {
    0.05
}

/// The settings: target entropy per response token, step Δ and bound c_max.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdaptiveEntropy {
    /// H*, the entropy per response token to hold (mean over the batch's tokens, as the
    /// `actor_step/entropy` metric reports it, whatever the loss aggregation).
    pub target: f64,
    /// Δ, the coefficient's change per step.
    #[serde(default = "default_delta")]
    pub delta: f64,
    /// c_max, the largest coefficient.
    #[serde(default = "default_max")]
    pub max: f64,
}

impl AdaptiveEntropy {
    /// Range checks, run at validation.
    pub fn validate(&self) -> Result<(), String> {
        let fields = [
            ("target", self.target),
            ("delta", self.delta),
            ("max", self.max),
        ];
        for (name, value) in fields {
            if !(value.is_finite() && value > 0.0) {
                return Err(format!(
                    "`adaptive_entropy.{name}` must be > 0, got {value}"
                ));
            }
        }
        Ok(())
    }
}

/// The controller's state, carried between steps and saved by checkpoints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EntropyController {
    /// c_k; `None` until the first step, which starts from c_0.
    pub coef: Option<f64>,
    /// H_{k−1}, the entropy measured in the previous step.
    pub last_entropy: Option<f64>,
}

impl EntropyController {
    /// α_k: the bonus coefficient for this step (c_0 is the configured coefficient).
    pub fn bonus(&self, settings: &AdaptiveEntropy, initial: f64) -> f64 {
        let coef = self.coef.unwrap_or(initial);
        match self.last_entropy {
            Some(h) if h > settings.target => 0.0,
            _ => coef,
        }
    }

    /// Moves c by Δ toward holding the target, given H_k measured in this step.
    pub fn update(&mut self, settings: &AdaptiveEntropy, initial: f64, entropy: f64) {
        let coef = self.coef.unwrap_or(initial);
        let moved = if entropy < settings.target {
            coef + settings.delta
        } else if entropy > settings.target {
            coef - settings.delta
        } else {
            coef
        };
        self.coef = Some(moved.clamp(0.0, settings.max));
        self.last_entropy = Some(entropy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: AdaptiveEntropy = AdaptiveEntropy {
        target: 0.1,
        delta: 0.005,
        max: 0.012,
    };

    #[test]
    fn coefficient_by_hand() {
        let mut c = EntropyController::default();
        // Step 0: no measurement yet, c_0.
        assert_eq!(c.bonus(&SETTINGS, 0.002), 0.002);
        // H above the target: c falls (clamped at 0), and the bonus is off next step.
        c.update(&SETTINGS, 0.002, 0.3);
        assert_eq!(c.coef, Some(0.0));
        assert_eq!(c.bonus(&SETTINGS, 0.002), 0.0);
        // Below the target: c grows by Δ per step up to c_max, and the bonus is c.
        c.update(&SETTINGS, 0.002, 0.05);
        assert!((c.bonus(&SETTINGS, 0.002) - 0.005).abs() < 1e-15);
        c.update(&SETTINGS, 0.002, 0.05);
        c.update(&SETTINGS, 0.002, 0.05);
        assert!((c.bonus(&SETTINGS, 0.002) - 0.012).abs() < 1e-15);
        // Back above: c shrinks by Δ, but the bonus is off while H > H*.
        c.update(&SETTINGS, 0.002, 0.2);
        assert!((c.coef.unwrap() - 0.007).abs() < 1e-15);
        assert_eq!(c.bonus(&SETTINGS, 0.002), 0.0);
        // At the target exactly: c holds and the bonus is on.
        c.update(&SETTINGS, 0.002, 0.1);
        assert!((c.bonus(&SETTINGS, 0.002) - 0.007).abs() < 1e-15);
    }

    #[test]
    fn state_round_trips_through_json() {
        let mut c = EntropyController::default();
        c.update(&SETTINGS, 0.0, 0.05);
        let back: EntropyController =
            serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn settings_must_be_positive() {
        let bad = AdaptiveEntropy {
            delta: 0.0,
            ..SETTINGS
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .contains("adaptive_entropy.delta"));
        assert!(SETTINGS.validate().is_ok());
    }
}
