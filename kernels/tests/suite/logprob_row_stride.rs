//! Log-prob rows that lie apart: the leading `vocab` columns of a wider tensor, as CUDA's
//! padded rows are (bf16 logits over 151,936 tokens lie 152,064 apart). The kernel reads
//! them where they lie (`cube/logprob.rs`); values and gradients must be those of the
//! reference on the same view, within the suite's log-prob tolerances (`mod.rs`).

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use roll_flow_kernels::{reference, KernelBackend};

use super::logprob::logits_and_targets;
use super::{assert_close, assert_close_scaled, host, vector, Rng};

/// (rows, vocab, columns of the wider tensor, first column of the view).
const VIEWS: [(usize, usize, usize, usize); 4] = [
    (5, 304, 312, 0),
    (3, 1000, 1001, 0),
    (4, 96, 128, 8),
    (6, 7, 16, 3),
];

pub fn logprob_reads_rows_apart<B: KernelBackend + AutodiffBackend>(device: &B::Device) {
    for (k, &(rows, vocab, width, first)) in VIEWS.iter().enumerate() {
        let what = format!("{rows}x{vocab} of {rows}x{width} from column {first}");
        let (wide, targets) = logits_and_targets::<B>(rows, width, 90 + k as u64, device);
        let targets = targets.remainder_scalar(vocab as i64);
        let view = |wide: Tensor<B, 2>| wide.narrow(1, first, vocab);
        let mut rng = Rng::new(k as u64);
        let weights =
            |rng: &mut Rng| vector::<B>((0..rows).map(|_| rng.normal()).collect(), device);
        let (w_lp, w_h) = (weights(&mut rng), weights(&mut rng));

        let x = wide.clone().detach().require_grad();
        let fused = roll_flow_kernels::token_logprob_entropy(view(x.clone()), targets.clone(), 0.9)
            .unwrap();
        let (got_lp, got_h) = (host(fused.logprob.clone()), host(fused.entropy.clone()));
        let loss = (fused.logprob * w_lp.clone() + fused.entropy * w_h.clone()).sum();
        let got = host(x.grad(&loss.backward()).unwrap());

        let x = wide.detach().require_grad();
        let (lp, h) = reference::logprob_entropy(view(x.clone()), targets, 0.9);
        assert_close(
            &format!("logp {what}"),
            &got_lp,
            &host(lp.clone()),
            2e-4,
            2e-4,
        );
        assert_close(
            &format!("entropy {what}"),
            &got_h,
            &host(h.clone()),
            2e-4,
            2e-4,
        );
        let loss = (lp * w_lp + h * w_h).sum();
        let want = host(x.grad(&loss.backward()).unwrap());
        assert_close_scaled(&format!("dlogits {what}"), &got, &want, 1e-6, 2e-3);
    }
}
