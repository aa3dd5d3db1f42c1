//! [`KernelBackend::dropout_mask`]: the mask made where the tensor lives is the host's
//! [`MaskDraw::values`] bit for bit (the same hash in 32-bit integers), shaped like its
//! input, untracked under autodiff, at two drop probabilities and across several cubes;
//! [`KernelBackend::dropout`] is `x ⊙ mask` and, under autodiff, `dx = dy ⊙ mask` (the mask
//! made again), exactly.

use burn::backend::Autodiff;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use roll_flow_kernels::dropout_mask::MaskDraw;
use roll_flow_kernels::KernelBackend;

pub fn dropout_mask_is_the_hosts_bit_for_bit<B: KernelBackend>(device: &B::Device) {
    for (shape, key, p) in [([3, 5, 7], 1u64, 0.1), ([2, 300, 577], u64::MAX - 6, 0.5)] {
        let like = Tensor::<B, 3>::zeros(shape, device);
        let draw = MaskDraw::new(key, p);
        let mask = B::dropout_mask(like.into_primitive().tensor(), draw);
        let mask = Tensor::<B, 3>::from_primitive(TensorPrimitive::Float(mask));
        assert_eq!(mask.dims(), shape);
        let got = mask.into_data().to_vec::<f32>().unwrap();
        let want = draw.values(shape.iter().product());
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        assert!(bits(&got) == bits(&want), "shape {shape:?}, p {p}");
    }
    // dropout: x ⊙ mask, and its gradient dy ⊙ mask, both exact (a product by 0 or by
    // 1 / (1 − p), once).
    let (n, draw) = (6 * 11, MaskDraw::new(7, 0.25));
    let xs: Vec<f32> = (0..n).map(|i| (i as f32 - 30.0) / 7.0).collect();
    let ws: Vec<f32> = (0..n).map(|i| ((i * 5 % 9) as f32 - 4.0) / 3.0).collect();
    let mask = draw.values(n);
    let x = Tensor::<Autodiff<B>, 2>::from_data(TensorData::new(xs.clone(), [6, 11]), device)
        .require_grad();
    let w = Tensor::<Autodiff<B>, 2>::from_data(TensorData::new(ws.clone(), [6, 11]), device);
    let y = <Autodiff<B> as KernelBackend>::dropout(x.clone().into_primitive().tensor(), draw);
    let y = Tensor::<Autodiff<B>, 2>::from_primitive(TensorPrimitive::Float(y));
    let got = y.clone().into_data().to_vec::<f32>().unwrap();
    let want: Vec<f32> = xs.iter().zip(&mask).map(|(x, m)| x * m).collect();
    assert_eq!(got, want, "dropout's values");
    let grads = y.mul(w).sum().backward();
    let dx = x.grad(&grads).unwrap().into_data().to_vec::<f32>().unwrap();
    let want: Vec<f32> = ws.iter().zip(&mask).map(|(w, m)| w * m).collect();
    assert_eq!(dx, want, "dropout's gradient");
    // Under autodiff: the same values, and no gradient flows into the mask.
    type A<B> = Autodiff<B>;
    let like = Tensor::<A<B>, 2>::ones([4, 9], device).require_grad();
    let draw = MaskDraw::new(42, 0.3);
    let mask = <A<B> as KernelBackend>::dropout_mask(like.clone().into_primitive().tensor(), draw);
    let mask = Tensor::<A<B>, 2>::from_primitive(TensorPrimitive::Float(mask));
    let grads = like.clone().mul(mask.clone()).sum().backward();
    let dlike = like
        .grad(&grads)
        .unwrap()
        .into_data()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(dlike, draw.values(36));
    assert_eq!(mask.into_data().to_vec::<f32>().unwrap(), draw.values(36));
}
