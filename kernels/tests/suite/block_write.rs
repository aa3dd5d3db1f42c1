//! `block_write` against a host-side reference: a block written at an offset, the rest of
//! the destination unchanged, and a destination that another handle shares left intact
//! (copy-on-write: only a tensor that owns its storage alone may be written in place).
//! Exact: values are copied, not computed.

use burn::tensor::{Tensor, TensorData};
use roll_flow_kernels::KernelBackend;

use super::host;

pub fn block_write_matches_reference<B: KernelBackend>(device: &B::Device) {
    let (shape, block, at) = ([2, 3, 4, 5], [1, 2, 2, 3], [1, 1, 2, 2]);
    let n: usize = shape.iter().product();
    let base: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let values: Vec<f32> = (0..12).map(|i| -1.0 - i as f32).collect();
    let mut want = base.clone();
    let mut next = values.iter();
    for i in 0..block[1] {
        for j in 0..block[2] {
            for k in 0..block[3] {
                let index = ((at[0] * 3 + at[1] + i) * 4 + at[2] + j) * 5 + at[3] + k;
                want[index] = *next.next().unwrap();
            }
        }
    }
    let dst = || Tensor::<B, 4>::from_data(TensorData::new(base.clone(), shape), device);
    let value = Tensor::<B, 4>::from_data(TensorData::new(values.clone(), block), device);

    let written = roll_flow_kernels::block_write(dst(), at, value.clone());
    assert_eq!(host(written), want, "a block written into an owned tensor");

    let shared = dst();
    let kept = shared.clone();
    let written = roll_flow_kernels::block_write(shared, at, value.clone());
    assert_eq!(host(written), want, "a block written into a shared tensor");
    assert_eq!(
        host(kept),
        base,
        "the other handle of a shared tensor changed"
    );

    // A value read through a transposed view.
    let transposed =
        Tensor::<B, 4>::from_data(TensorData::new(values, [1, 2, 3, 2]), device).swap_dims(2, 3);
    let expected = host(transposed.clone());
    let written = roll_flow_kernels::block_write(dst(), at, transposed);
    let got = host(written);
    let mut k = 0;
    for i in 0..2 {
        for j in 0..2 {
            for c in 0..3 {
                let index = ((3 + 1 + i) * 4 + 2 + j) * 5 + 2 + c;
                assert_eq!(got[index], expected[k], "transposed value at {i},{j},{c}");
                k += 1;
            }
        }
    }
}
