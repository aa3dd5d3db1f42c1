//! [`AlgoStats`]: the scalar metrics an estimator, shaping step or loss reports; and
//! [`DeviceStats`], a loss's metrics while their values are still on the tensors' device.
//!
//! Why a loss does not read its metrics itself: a read waits for the device to finish
//! everything queued before it. Read in the forward, before the backward is queued, it
//! leaves a GPU idle while the host launches the backward, in every micro-batch (issue 59).
//! So a loss records *which* values to report ([`DeviceStats`]) and the trainer reads them
//! once its backward passes are queued, every micro-batch's in one download
//! ([`DeviceStats::resolve_all`]). The host arithmetic is the one the losses did when they
//! read their values themselves, so the metrics are the same bits.

use std::collections::BTreeMap;

use burn::tensor::backend::Backend;
use burn::tensor::{DType, Tensor};
use roll_flow_kernels::host_transfer::download_f32_each;
use roll_flow_kernels::like;

use super::packed_layout::PackedLayout;

/// Scalar metrics of one call (e.g. `adv/mean`, `kl/beta`), for tracking.
pub type AlgoStats = BTreeMap<String, f64>;

/// Named metrics whose values may still be on the device, read by [`DeviceStats::resolve`]
/// (or [`DeviceStats::resolve_all`]) into [`AlgoStats`]. A name given twice keeps its last
/// value, as a map insert does.
#[derive(Clone, Debug)]
pub struct DeviceStats<B: Backend> {
    entries: Vec<Entry<B>>,
}

/// One recorded metric (or, for `Elements`, several from one tensor).
#[derive(Clone, Debug)]
enum Entry<B: Backend> {
    /// A value already on the host.
    Known(String, f64),
    /// Elements of a small tensor, each under its name: (name, index).
    Elements(Tensor<B, 1>, Vec<(String, usize)>),
    /// Σ_t v_t·m_t / count over a token tensor already multiplied by the mask (f32).
    ResponseMean(String, Tensor<B, 1>, usize),
}

impl<B: Backend> Default for DeviceStats<B> {
    fn default() -> Self {
        DeviceStats {
            entries: Vec::new(),
        }
    }
}

impl<B: Backend> DeviceStats<B> {
    /// No metrics.
    pub fn new() -> Self {
        Self::default()
    }

    /// A value already on the host.
    pub fn insert(&mut self, name: impl Into<String>, value: f64) {
        self.entries.push(Entry::Known(name.into(), value));
    }

    /// The value of a one-element tensor (read as f32, reported as f64).
    pub fn insert_scalar(&mut self, name: impl Into<String>, value: Tensor<B, 1>) {
        self.insert_elements(value, &[(&name.into(), 0)]);
    }

    /// Elements of a small tensor, each under its name: `(name, index)`; an index past the
    /// tensor's end reads 0 (as [`roll_flow_kernels::PpoStats::from_tensor`] does).
    pub fn insert_elements(&mut self, values: Tensor<B, 1>, names: &[(&str, usize)]) {
        let names = names.iter().map(|&(n, i)| (n.to_string(), i)).collect();
        self.entries.push(Entry::Elements(values.detach(), names));
    }

    /// The mean of the per-token `values` over the response tokens of `layout`,
    /// Σ_t v_t·m_t / max(1, response tokens), summed in token order on the host as f64
    /// (the same bits on every CPU). The product with the 0/1 mask is taken in f32 on the
    /// device: v·1 = v and v·0 = ±0 (NaN for a non-finite v) are what the f64 product gave.
    pub fn insert_response_mean(
        &mut self,
        name: impl Into<String>,
        values: Tensor<B, 1>,
        layout: &PackedLayout<B>,
    ) {
        let masked = f32_detached(values) * f32_detached(layout.mask.clone());
        let count = layout.response_tokens().max(1);
        self.entries
            .push(Entry::ResponseMean(name.into(), masked, count));
    }

    /// Appends `other`'s metrics (they win over same-named ones already here).
    pub fn extend(&mut self, other: DeviceStats<B>) {
        self.entries.extend(other.entries);
    }

    /// The metrics' values, read in at most one download.
    pub fn resolve(self) -> AlgoStats {
        Self::resolve_all(vec![self]).pop().unwrap_or_default()
    }

    /// The metrics of every part, in part order, read in at most one download of every
    /// tensor they hold (concatenated on the device): one wait for the device per call.
    pub fn resolve_all(parts: Vec<DeviceStats<B>>) -> Vec<AlgoStats> {
        let tensors: Vec<Tensor<B, 1>> = (parts.iter())
            .flat_map(|p| p.entries.iter())
            .filter_map(|e| match e {
                Entry::Known(..) => None,
                Entry::Elements(t, _) | Entry::ResponseMean(_, t, _) => Some(t.clone()),
            })
            .collect();
        let mut read = download_f32_each(tensors).into_iter();
        let mut take = || read.next().expect("one read per tensor");
        (parts.into_iter())
            .map(|part| {
                let mut stats = AlgoStats::new();
                for entry in part.entries {
                    match entry {
                        Entry::Known(name, v) => {
                            stats.insert(name, v);
                        }
                        Entry::Elements(_, names) => {
                            let values = take();
                            for (name, i) in names {
                                stats.insert(name, values.get(i).copied().unwrap_or(0.0) as f64);
                            }
                        }
                        Entry::ResponseMean(name, _, count) => {
                            let values = take();
                            let sum = values.iter().fold(0.0f64, |s, &v| s + v as f64);
                            stats.insert(name, sum / count as f64);
                        }
                    }
                }
                stats
            })
            .collect()
    }
}

/// `t` detached, in f32 (bf16 and f16 values convert exactly).
fn f32_detached<B: Backend>(t: Tensor<B, 1>) -> Tensor<B, 1> {
    like(t.detach(), DType::F32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use roll_flow_kernels::host_transfer::transfers;

    type AD = Autodiff<Flex>;

    fn tensor(values: &[f32]) -> Tensor<AD, 1> {
        Tensor::from_floats(values, &Default::default())
    }

    #[test]
    fn parts_resolve_in_one_download_to_the_hand_computed_values() {
        // Two response tokens of three in the first part, one of one in the second.
        let first =
            PackedLayout::<AD>::new(&[0, 3], &[true, false, true], None, &Default::default());
        let second = PackedLayout::<AD>::new(&[0, 1], &[true], None, &Default::default());
        let mut a = DeviceStats::new();
        a.insert("known", 0.25);
        a.insert_scalar("loss", tensor(&[1.5]));
        a.insert_elements(
            tensor(&[0.5, 0.0, -2.0, 3.0]),
            &[("frac", 0), ("kl", 2), ("past", 9)],
        );
        // Σ over the response tokens: (1 + 4) / 2; the masked token (100) counts for 0.
        a.insert_response_mean("entropy", tensor(&[1.0, 100.0, 4.0]), &first);
        a.insert("known", 0.75); // the later value wins
        let mut b = DeviceStats::new();
        b.insert_response_mean("entropy", tensor(&[-3.0]), &second);
        b.insert_response_mean(
            "empty",
            tensor(&[]),
            &PackedLayout::new(&[0], &[], None, &Default::default()),
        );
        let before = transfers();
        let resolved = DeviceStats::resolve_all(vec![a, b]);
        assert_eq!(transfers().since(before).downloads, 1);
        let want_a: AlgoStats = [
            ("known", 0.75),
            ("loss", 1.5),
            ("frac", 0.5),
            ("kl", -2.0),
            ("past", 0.0),
            ("entropy", 2.5),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(resolved[0], want_a);
        let want_b: AlgoStats = [("entropy", -3.0), ("empty", 0.0)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(resolved[1], want_b);
    }

    #[test]
    fn host_values_alone_need_no_download() {
        let mut s = DeviceStats::<AD>::new();
        s.insert("a", 1.0);
        let before = transfers();
        assert_eq!(s.resolve()["a"], 1.0);
        assert_eq!(transfers().since(before).downloads, 0);
    }

    #[test]
    fn half_precision_values_are_read_exactly() {
        let layout = PackedLayout::<AD>::new(&[0, 2], &[true, true], None, &Default::default());
        let mut s = DeviceStats::new();
        let h = tensor(&[0.1, 0.7]).cast(DType::F16);
        let exact: Vec<f32> = h.clone().into_data().convert::<f32>().into_vec().unwrap();
        s.insert_response_mean("entropy", h, &layout);
        let want = (exact[0] as f64 + exact[1] as f64) / 2.0;
        assert_eq!(s.resolve()["entropy"], want);
    }
}
