//! The KL coefficient β: fixed, or adapted toward a target KL.
//!
//! Adaptive rule (ROLL `AdaptiveKLController`, from Ziegler et al. 2019):
//! β ← β·(1 + clip(KL/target − 1, −0.2, 0.2)·n/horizon), with n the batch size and
//! horizon 10000 by default. Fixed β when no target is set.

/// The controller state carried by the `adv` node between steps (serialisable, for
/// checkpoints).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum KlController {
    /// β never changes.
    Fixed { beta: f64 },
    /// β moves toward the value that gives `target` KL.
    Adaptive {
        beta: f64,
        target: f64,
        horizon: f64,
    },
}

impl KlController {
    /// The current coefficient.
    pub fn beta(&self) -> f64 {
        match self {
            KlController::Fixed { beta } | KlController::Adaptive { beta, .. } => *beta,
        }
    }

    /// Updates β from the KL measured on a batch of `n` samples.
    pub fn update(&mut self, current_kl: f64, n: usize) {
        if let KlController::Adaptive {
            beta,
            target,
            horizon,
        } = self
        {
            let error = (current_kl / *target - 1.0).clamp(-0.2, 0.2);
            *beta *= 1.0 + error * n as f64 / *horizon;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn adaptive_update_by_hand() {
        let mut c = KlController::Adaptive {
            beta: 0.2,
            target: 0.1,
            horizon: 10000.0,
        };
        // KL 0.11: error 0.1 → β·(1 + 0.1·256/10000).
        c.update(0.11, 256);
        assert!((c.beta() - 0.2 * (1.0 + 0.1 * 256.0 / 10000.0)).abs() < 1e-15);
        // KL 10× target: error clipped to 0.2.
        let mut c = KlController::Adaptive {
            beta: 0.2,
            target: 0.1,
            horizon: 10000.0,
        };
        c.update(1.0, 100);
        assert!((c.beta() - 0.2 * 1.002).abs() < 1e-15);
        let mut f = KlController::Fixed { beta: 0.3 };
        f.update(5.0, 100);
        assert_eq!(f.beta(), 0.3);
    }

    proptest! {
        /// β moves toward the target: up when KL is above it, down when below, never past
        /// the 20% per-update band.
        #[test]
        fn adaptive_moves_toward_target(
            beta in 1e-4f64..1.0,
            target in 1e-3f64..1.0,
            ratio in 0.0f64..5.0,
            n in 1usize..5000,
        ) {
            let mut c = KlController::Adaptive { beta, target, horizon: 10000.0 };
            let kl = target * ratio;
            c.update(kl, n);
            let b = c.beta();
            if kl > target { prop_assert!(b >= beta); }
            if kl < target { prop_assert!(b <= beta); }
            prop_assert!((b / beta - 1.0).abs() <= 0.2 * n as f64 / 10000.0 + 1e-12);
        }
    }
}
