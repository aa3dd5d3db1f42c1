//! KL estimators between the policy and the reference model, per token.
//!
//! With d = logp − ref_logp (ROLL `compute_approx_kl`, Schulman's "Approximating KL"):
//! - `K1`: d
//! - `Abs`: |d|
//! - `Mse`: ½·d²
//! - `K3`: exp(−d) − 1 + d (unbiased, low variance, always ≥ 0)
//! - `Full`: Σ_v p(v)·(log p(v) − log q(v)), the exact KL over the whole vocabulary; it
//!   needs both models' full log-prob rows, so it is available only where logits are
//!   (inside the actor loss), not on batch columns.
//!
//! The scalar form serves the token reward penalty; the tensor form the KL loss term.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use serde::Deserialize;

/// Which KL estimator to use. Default `K1` for the reward penalty (ROLL `kl_penalty: kl`);
/// the KL loss term defaults to `K3` (see [`super::KlLoss`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum KlEstimator {
    #[default]
    K1,
    Abs,
    Mse,
    K3,
    Full,
}

impl KlEstimator {
    /// The per-token estimate from the two log-probs; `None` for `Full`, which needs the
    /// full distributions.
    pub fn token(self, logp: f64, ref_logp: f64) -> Option<f64> {
        let d = logp - ref_logp;
        Some(match self {
            KlEstimator::K1 => d,
            KlEstimator::Abs => d.abs(),
            KlEstimator::Mse => 0.5 * d * d,
            KlEstimator::K3 => (-d).exp() - 1.0 + d,
            KlEstimator::Full => return None,
        })
    }

    /// The per-token estimate on tensors of token log-probs; `None` for `Full` (use
    /// [`full_kl`]).
    pub fn tensor<B: Backend>(
        self,
        logp: Tensor<B, 1>,
        ref_logp: Tensor<B, 1>,
    ) -> Option<Tensor<B, 1>> {
        let d = logp - ref_logp;
        Some(match self {
            KlEstimator::K1 => d,
            KlEstimator::Abs => d.abs(),
            KlEstimator::Mse => d.square().mul_scalar(0.5),
            KlEstimator::K3 => d.clone().neg().exp().sub_scalar(1.0) + d,
            KlEstimator::Full => return None,
        })
    }
}

/// Full-vocabulary KL(p‖q) per row from log-prob rows `[tokens, vocab]`.
pub fn full_kl<B: Backend>(logp: Tensor<B, 2>, ref_logp: Tensor<B, 2>) -> Tensor<B, 1> {
    let p = logp.clone().exp();
    (p * (logp - ref_logp)).sum_dim(1).squeeze_dim(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    type B = Flex;

    #[test]
    fn token_estimators_by_hand() {
        // d = ln 2.
        let (lp, rl) = (2f64.ln(), 0.0);
        let d = 2f64.ln();
        assert_eq!(KlEstimator::K1.token(lp, rl), Some(d));
        assert_eq!(KlEstimator::Abs.token(rl, lp), Some(d));
        assert!((KlEstimator::Mse.token(lp, rl).unwrap() - 0.5 * d * d).abs() < 1e-15);
        // k3 = 1/2 − 1 + ln 2.
        assert!((KlEstimator::K3.token(lp, rl).unwrap() - (-0.5 + d)).abs() < 1e-15);
        assert_eq!(KlEstimator::Full.token(lp, rl), None);
    }

    #[test]
    fn tensor_matches_scalar() {
        let dev = Default::default();
        let lp = [-0.3f32, -2.0, -1.1];
        let rl = [-0.9f32, -1.5, -1.1];
        for est in [
            KlEstimator::K1,
            KlEstimator::Abs,
            KlEstimator::Mse,
            KlEstimator::K3,
        ] {
            let t = est
                .tensor(
                    Tensor::<B, 1>::from_floats(lp, &dev),
                    Tensor::<B, 1>::from_floats(rl, &dev),
                )
                .unwrap();
            let got = t.into_data().to_vec::<f32>().unwrap();
            for i in 0..3 {
                let want = est.token(lp[i] as f64, rl[i] as f64).unwrap();
                assert!((got[i] as f64 - want).abs() < 1e-6, "{est:?}");
            }
        }
    }

    #[test]
    fn full_kl_by_hand() {
        // p = (0.5, 0.5), q = (0.25, 0.75): KL = 0.5 ln 2 + 0.5 ln(2/3).
        let dev = Default::default();
        let p = Tensor::<B, 2>::from_floats([[0.5f32.ln(), 0.5f32.ln()]], &dev);
        let q = Tensor::<B, 2>::from_floats([[0.25f32.ln(), 0.75f32.ln()]], &dev);
        let kl = full_kl(p, q).into_data().to_vec::<f32>().unwrap();
        let want = 0.5 * 2f64.ln() + 0.5 * (2.0f64 / 3.0).ln();
        assert!((kl[0] as f64 - want).abs() < 1e-6);
    }
}
