//! Σ over the rows of a matrix (`KernelBackend::column_sums`, a dense layer's bias
//! gradient; two CubeCL launches on the device backends, burn's `sum_dim` on the CPU)
//! against f64 on the host: one row, one column, a column tile cut short (33, 70 columns),
//! several row blocks (300, 4,097 rows), and a transposed view read through its strides.
//! On the device backends also in f16, from the inputs as the device rounded them.
//!
//! Tolerance: 1e-5·Σ|x| over the column (f32 sums in another order: burn's CPU sum runs
//! down the 4,097 rows one by one); in f16, one unit in
//! the last place at the reference (2⁻¹⁰·|ref|) on top.

use burn::tensor::{DType, Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::{host, Rng};

/// (rows, columns, read through a transposed view).
const SHAPES: [(usize, usize, bool); 6] = [
    (1, 1, false),
    (1, 40, false),
    (7, 1, false),
    (300, 33, false),
    (4097, 70, false),
    (513, 45, true),
];

pub fn column_sums_match_f64<B: KernelBackend>(device: &B::Device) {
    for (k, &(n, m, transposed)) in SHAPES.iter().enumerate() {
        let mut rng = Rng::new(1400 + k as u64);
        let values: Vec<f32> = (0..n * m).map(|_| 1.0 + rng.normal()).collect();
        for dtype in [DType::F32, DType::F16] {
            if dtype == DType::F16 && !B::DEVICE_MEMORY {
                continue;
            }
            // A transposed view: the values stored [m, n] and read as [n, m].
            let x = match transposed {
                true => {
                    let stored: Vec<f32> =
                        (0..m * n).map(|i| values[(i % n) * m + i / n]).collect();
                    Tensor::<B, 2>::from_data(TensorData::new(stored, [m, n]), device)
                        .cast(dtype)
                        .transpose()
                }
                false => Tensor::<B, 2>::from_data(TensorData::new(values.clone(), [n, m]), device)
                    .cast(dtype),
            };
            let held = host(x.clone());
            let got: Tensor<B, 1> = Tensor::from_primitive(burn::tensor::TensorPrimitive::Float(
                B::column_sums(x.into_primitive().tensor()),
            ));
            let got = host(got);
            assert_eq!(got.len(), m, "{n}x{m} {dtype:?}: length");
            for c in 0..m {
                let column = (0..n).map(|r| held[r * m + c] as f64);
                let want: f64 = column.clone().sum();
                let magnitude: f64 = column.map(f64::abs).sum();
                let ulp = match dtype {
                    DType::F16 => want.abs() / 1024.0,
                    _ => 0.0,
                };
                let tol = 1e-5 * magnitude + ulp;
                assert!(
                    (got[c] as f64 - want).abs() <= tol,
                    "{n}x{m} {dtype:?} transposed {transposed}, column {c}: {} vs {want} (±{tol:.2e})",
                    got[c]
                );
            }
        }
    }
}
