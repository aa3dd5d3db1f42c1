//! One decode step's next token per row, drawn from its logits: the CPU twin of the CubeCL
//! `cube/row_sample.rs` and the oracle of its tests. Formula and tie rules in
//! [`crate::row_sampling`]; sums here in f64.

/// Number of values per row of the parameters and of the result.
pub const ROW_FIELDS: usize = 3;

/// `logits [rows, vocab]` and `params [rows, 3]` rows of (1/T, u, greedy) → `[rows, 3]` rows
/// of (token, log π(token), non-finite logits), as [`crate::row_sampling::sample_rows`].
pub fn sample_rows(logits: &[f32], params: &[f32], vocab: usize) -> Vec<f32> {
    params
        .chunks(ROW_FIELDS)
        .zip(logits.chunks(vocab.max(1)))
        .flat_map(|(p, row)| sample_row(row, p[0], p[1], p[2] != 0.0))
        .collect()
}

fn sample_row(row: &[f32], inv_t: f32, u: f32, greedy: bool) -> [f32; ROW_FIELDS] {
    let bad = row.iter().filter(|x| !x.is_finite()).count();
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x.is_finite() && (!row[best].is_finite() || x > row[best]) {
            best = i;
        }
    }
    let inv_t = if greedy { 1.0 } else { inv_t as f64 };
    let max = row[best] as f64 * inv_t;
    let weight = |x: f32| {
        if x.is_finite() {
            (x as f64 * inv_t - max).exp()
        } else {
            0.0
        }
    };
    let total: f64 = row.iter().map(|&x| weight(x)).sum();
    let token = if greedy {
        best
    } else {
        // Rounding may keep the running sum below the target: then the last token of
        // nonzero weight.
        let target = u as f64 * total;
        let mut acc = 0.0;
        let passes = row.iter().position(|&x| {
            acc += weight(x);
            acc > target
        });
        passes.unwrap_or_else(|| row.iter().rposition(|&x| weight(x) > 0.0).unwrap_or(best))
    };
    let logprob = row[token] as f64 * inv_t - max - total.ln();
    [token as f32, logprob as f32, bad as f32]
}
