//! The learning-rate schedule of a trained model: linear warmup, then constant or cosine
//! decay (ROLL's default `cosine` with `warmup_steps`, as in transformers'
//! `get_cosine_schedule_with_warmup`).
//!
//! For training step t (0-based) of T:
//! - warmup, t < W: lr·(t + 1)/W;
//! - constant: lr;
//! - cosine: lr·(m + (1 − m)·½(1 + cos(π·p))), p = (t − W)/max(1, T − W − 1), m = min_lr_ratio.
//!
//! The schedule advances once per training step (one optimizer step per PPO epoch shares
//! the step's rate), so it does not depend on micro-batching.

use roll_flow_model::spec::{LrSchedule, OptimSpec};

/// The learning rate of training step `step` out of `total_steps`.
pub fn learning_rate(optim: &OptimSpec, step: u64, total_steps: u64) -> f64 {
    let OptimSpec::AdamW {
        lr,
        warmup_steps,
        schedule,
        min_lr_ratio,
        ..
    } = optim;
    let warmup = *warmup_steps as u64;
    if step < warmup {
        return lr * (step + 1) as f64 / warmup as f64;
    }
    match schedule {
        LrSchedule::Constant => *lr,
        LrSchedule::Cosine => {
            let span = total_steps.saturating_sub(warmup + 1).max(1) as f64;
            let progress = ((step - warmup) as f64 / span).min(1.0);
            let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
            lr * (min_lr_ratio + (1.0 - min_lr_ratio) * cosine)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adamw(lr: f64, warmup: usize, schedule: LrSchedule, min: f64) -> OptimSpec {
        let OptimSpec::AdamW {
            betas,
            eps,
            weight_decay,
            grad_clip,
            ..
        } = OptimSpec::default();
        OptimSpec::AdamW {
            lr,
            betas,
            eps,
            weight_decay,
            warmup_steps: warmup,
            schedule,
            min_lr_ratio: min,
            grad_clip,
            max_nonfinite: 3,
        }
    }

    #[test]
    fn warmup_then_cosine_by_hand() {
        let o = adamw(1.0, 2, LrSchedule::Cosine, 0.1);
        // Warmup: 1/2, 2/2. Then p = (t − 2)/(10 − 3) over t = 2..9.
        assert_eq!(learning_rate(&o, 0, 10), 0.5);
        assert_eq!(learning_rate(&o, 1, 10), 1.0);
        assert!((learning_rate(&o, 2, 10) - 1.0).abs() < 1e-12);
        let at_5 = 0.1 + 0.9 * 0.5 * (1.0 + (std::f64::consts::PI * 3.0 / 7.0).cos());
        assert!((learning_rate(&o, 5, 10) - at_5).abs() < 1e-12);
        assert!((learning_rate(&o, 9, 10) - 0.1).abs() < 1e-12);
        assert!(
            (learning_rate(&o, 50, 10) - 0.1).abs() < 1e-12,
            "clamped past the end"
        );
    }

    #[test]
    fn constant_schedule_ignores_the_step() {
        let o = adamw(3e-4, 0, LrSchedule::Constant, 0.0);
        assert_eq!(learning_rate(&o, 0, 5), 3e-4);
        assert_eq!(learning_rate(&o, 4, 5), 3e-4);
    }
}
