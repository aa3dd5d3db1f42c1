//! Next-token draws (`roll_flow_kernels::row_sampling`) against an f64 oracle written here:
//! greedy rows give the first index of the largest logit and log_softmax there; sampled
//! rows give a token whose cumulative-mass interval [C_{t−1}, C_t) holds u·Z (within
//! 1e-5·Z: the CubeCL kernel sums in f32) and log_softmax(x/T) there within 1e-4; rows with
//! NaN or ±∞ are reported. Vocabularies: 7, 1,000 and 49,152 (SmolLM2's), so a cube's
//! chunks are empty, single tokens and 192 long. A draw of 1 (an f64 u just below 1 rounds
//! to it in f32) takes the last token of nonzero weight, not one of weight 0 after it.

use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::row_sampling::{row_params, row_samples, sample_rows, RowDraw};
use roll_flow_kernels::KernelBackend;

use super::{host, Rng};

fn log_softmax_at(row: &[f32], inv_t: f64, t: usize) -> f64 {
    let max = row
        .iter()
        .fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64 * inv_t));
    let z: f64 = row.iter().map(|&x| (x as f64 * inv_t - max).exp()).sum();
    row[t] as f64 * inv_t - max - z.ln()
}

pub fn row_sampling_matches_oracle<B: KernelBackend>(device: &B::Device) {
    for (k, &vocab) in [7usize, 1000, 49_152].iter().enumerate() {
        let mut rng = Rng::new(1200 + k as u64);
        let rows = 12;
        let mut logits: Vec<f32> = (0..rows * vocab).map(|_| 3.0 * rng.normal()).collect();
        // Row 0: a tie for the largest logit (greedy takes the first); row 1: a NaN;
        // row 2: +∞; the rest plain.
        let top = logits[..vocab].iter().fold(f32::MIN, |a, &b| a.max(b));
        logits[vocab / 3] = top + 1.0;
        logits[vocab - 1] = top + 1.0;
        logits[vocab + vocab / 2] = f32::NAN;
        logits[2 * vocab] = f32::INFINITY;
        let draws: Vec<RowDraw> = (0..rows)
            .map(|r| RowDraw {
                temperature: [0.0, 0.0, 1.0, 1.0, 0.7, 1.3][r % 6],
                draw: rng.unit(),
            })
            .collect();
        let tensor =
            Tensor::<B, 2>::from_data(TensorData::new(logits.clone(), [rows, vocab]), device);
        let params = Tensor::<B, 2>::from_data(row_params(&draws), device);
        let got = row_samples(&host(sample_rows(tensor, params)));
        assert_eq!(got.len(), rows);
        for (r, (draw, sample)) in draws.iter().zip(&got).enumerate() {
            let what = format!("vocab {vocab} row {r}");
            let row = &logits[r * vocab..(r + 1) * vocab];
            let finite = row.iter().all(|x| x.is_finite());
            assert_eq!(sample.finite, finite, "{what}: finite");
            if !finite {
                continue;
            }
            let t = sample.token as usize;
            assert!(t < vocab, "{what}: token {t}");
            let inv_t = match draw.temperature > 0.0 {
                true => 1.0 / draw.temperature as f64,
                false => 1.0,
            };
            if draw.temperature == 0.0 {
                let best = (0..vocab).fold(0, |b, i| if row[i] > row[b] { i } else { b });
                assert_eq!(t, best, "{what}: greedy takes the first largest logit");
                if r == 0 {
                    assert_eq!(t, vocab / 3, "{what}: the tie's first index");
                }
            } else {
                let max = row
                    .iter()
                    .fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64 * inv_t));
                let w: Vec<f64> = row
                    .iter()
                    .map(|&x| (x as f64 * inv_t - max).exp())
                    .collect();
                let z: f64 = w.iter().sum();
                let before: f64 = w[..t].iter().sum();
                let target = draw.draw as f64 * z;
                let slack = 1e-5 * z;
                assert!(
                    before <= target + slack && target < before + w[t] + slack,
                    "{what}: token {t} covers [{before}, {}) but u·Z = {target}",
                    before + w[t]
                );
            }
            let want = log_softmax_at(row, inv_t, t);
            assert!(
                (sample.logprob as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()),
                "{what}: log-prob {} vs {want}",
                sample.logprob
            );
        }
    }
}

/// u = 1 puts the target at the total mass, where no running sum passes it: the draw is the
/// last token whose weight is nonzero (2 here, not the largest logit 0; tokens 3-4 have
/// e^{−10^30} = 0).
pub fn row_sampling_at_the_top_of_the_mass<B: KernelBackend>(device: &B::Device) {
    let logits = vec![2.0f32, 1.0, 0.0, -1e30, -1e30];
    let tensor = Tensor::<B, 2>::from_data(TensorData::new(logits, [1, 5]), device);
    let draws = [RowDraw {
        temperature: 1.0,
        draw: 1.0,
    }];
    let params = Tensor::<B, 2>::from_data(row_params(&draws), device);
    let got = row_samples(&host(sample_rows(tensor, params)));
    assert_eq!(got[0].token, 2, "{got:?}");
    assert!(got[0].finite);
}
