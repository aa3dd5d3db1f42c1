//! [`SquareSums`]: each tensor's Σ x² against f64 on the host, ≤ 1e-6·(1 + ref) (f32 sums
//! in another order on a device; the CPU's fixed-order f64 sum of f32 squares), and the
//! reads: one download for every tensor on a device, none on the CPU (summed on the host
//! as they are pushed).

use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::host_transfer::transfers;
use roll_flow_kernels::{KernelBackend, SquareSum, SquareSums};

use super::Rng;

pub fn square_sums_match_f64_in_one_read<B: KernelBackend>(device: &B::Device) {
    let mut rng = Rng::new(1700);
    let shapes = [[1, 1], [3, 7], [64, 33], [1, 4096]];
    let mut sums = SquareSums::<B>::new();
    let mut want = Vec::new();
    let mut on_host = 0;
    for [r, c] in shapes {
        let values: Vec<f32> = (0..r * c).map(|_| rng.normal()).collect();
        want.push(values.iter().map(|&v| v as f64 * v as f64).sum::<f64>());
        let x = Tensor::<B, 2>::from_data(TensorData::new(values, [r, c]), device);
        let primitive = x.clone().into_primitive().tensor();
        on_host += matches!(B::square_sum(primitive), SquareSum::Host(_)) as u64;
        sums.push(x);
    }
    let before = transfers();
    let got = sums.values();
    let reads = transfers().since(before).downloads;
    assert_eq!(
        reads,
        (on_host < shapes.len() as u64) as u64,
        "one read for the device's sums"
    );
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-6 * (1.0 + w), "{g} vs f64 {w}");
    }
    assert!(SquareSums::<B>::new().values().is_empty());
}
