//! The copies between host memory and a tensor's device that generation and training make,
//! counted per thread, so that a test can assert what one decode step or one training
//! micro-batch moves (issue 59's transfer count) and a change that adds a round trip shows
//! without a GPU.
//!
//! On a CPU backend an "upload" or "download" is a copy within host memory; on a GPU each
//! is a transfer over the bus, and a download also waits for the device to finish the work
//! queued before it. Generation code uploads with [`upload`] and reads back with
//! [`download`] (`operators/model/tests/model_transfers.rs` checks the counts of a decode
//! step on wgpu); the losses' statistics stay on the device until a mini-batch's
//! backward passes are queued and are then read in one download
//! (`roll_flow_algo::DeviceStats`).

use std::cell::Cell;

use burn::tensor::backend::Backend;
use burn::tensor::{BasicOps, DType, Tensor, TensorData};

use crate::dtype_cast::like;

/// Copies made on this thread since it started, and their bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transfers {
    /// Host → device copies.
    pub uploads: u64,
    /// Their bytes.
    pub upload_bytes: u64,
    /// Device → host copies.
    pub downloads: u64,
    /// Their bytes.
    pub download_bytes: u64,
}

impl Transfers {
    /// The copies made between `earlier` and `self`.
    pub fn since(self, earlier: Transfers) -> Transfers {
        Transfers {
            uploads: self.uploads - earlier.uploads,
            upload_bytes: self.upload_bytes - earlier.upload_bytes,
            downloads: self.downloads - earlier.downloads,
            download_bytes: self.download_bytes - earlier.download_bytes,
        }
    }
}

thread_local! {
    static COUNTS: Cell<Transfers> = const {
        Cell::new(Transfers { uploads: 0, upload_bytes: 0, downloads: 0, download_bytes: 0 })
    };
}

/// The copies this thread has made so far.
pub fn transfers() -> Transfers {
    COUNTS.get()
}

/// Runs `work` on one of rayon's threads (the caller waits; inline on one already), its
/// copies counted as this thread's, as if it ran here. Work nested there by rayon (another
/// thread's job taken while `work` waits on a join) swaps its own counts in and out the
/// same way, so none mix.
pub fn on_rayon_thread<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    let here = transfers();
    let (result, counted) = rayon::scope(|_| {
        let there = COUNTS.replace(here);
        let result = work();
        (result, COUNTS.replace(there))
    });
    COUNTS.set(counted);
    result
}

/// `data` as a tensor on `device`, counted as one upload of its bytes.
pub fn upload<B: Backend, const D: usize, K: BasicOps<B>>(
    data: TensorData,
    device: &B::Device,
) -> Tensor<B, D, K> {
    let bytes = data.bytes.len() as u64;
    count(|t| {
        t.uploads += 1;
        t.upload_bytes += bytes;
    });
    Tensor::from_data(data, device)
}

/// `tensor`'s values on the host, counted as one download of their bytes.
pub fn download<B: Backend, const D: usize, K: BasicOps<B>>(tensor: Tensor<B, D, K>) -> TensorData {
    let data = tensor.into_data();
    let bytes = data.bytes.len() as u64;
    count(|t| {
        t.downloads += 1;
        t.download_bytes += bytes;
    });
    data
}

/// A float `tensor`'s values on the host as f32, counted as one download.
pub fn download_f32<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> Vec<f32> {
    let values = download(tensor).convert::<f32>().into_vec::<f32>();
    values.expect("float values convert to f32")
}

/// The values of several 1-D float tensors on one device, as f32, each its own `Vec`, in
/// one download (at most): cast to f32 where they are not (bf16 and f16 convert exactly)
/// and concatenated on the device; empty tensors and an empty list read nothing.
pub fn download_f32_each<B: Backend>(tensors: Vec<Tensor<B, 1>>) -> Vec<Vec<f32>> {
    let lengths: Vec<usize> = tensors.iter().map(|t| t.dims()[0]).collect();
    let present: Vec<Tensor<B, 1>> = (tensors.into_iter())
        .filter(|t| t.dims()[0] > 0)
        .map(|t| like(t, DType::F32))
        .collect();
    let flat = match present.is_empty() {
        true => Vec::new(),
        false => download_f32(Tensor::cat(present, 0)),
    };
    let mut rest = flat.as_slice();
    (lengths.into_iter())
        .map(|n| {
            let (head, tail) = rest.split_at(n);
            rest = tail;
            head.to_vec()
        })
        .collect()
}

/// Adds a copy to this thread's counts.
fn count(add: impl FnOnce(&mut Transfers)) {
    let mut counts = COUNTS.get();
    add(&mut counts);
    COUNTS.set(counts);
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    #[test]
    fn several_tensors_come_back_split_as_they_went_in_from_one_download() {
        let device = Default::default();
        let t = |v: &[f32]| Tensor::<Flex, 1>::from_floats(v, &device);
        let half = t(&[0.1, 2.5]).cast(DType::F16);
        let before = transfers();
        let got = download_f32_each(vec![t(&[1.0, -2.0]), t(&[]), half, t(&[7.0])]);
        assert_eq!(transfers().since(before).downloads, 1);
        let tenth = burn::tensor::f16::from_f32(0.1).to_f32();
        assert_eq!(
            got,
            vec![vec![1.0, -2.0], vec![], vec![tenth, 2.5], vec![7.0]]
        );
        let before = transfers();
        assert!(download_f32_each::<Flex>(vec![]).is_empty());
        assert_eq!(download_f32_each(vec![t(&[])]), vec![Vec::<f32>::new()]);
        assert_eq!(transfers().since(before).downloads, 0);
    }
}
