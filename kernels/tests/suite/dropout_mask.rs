//! [`KernelBackend::dropout_mask`]: the mask made where the tensor lives is the host's
//! [`MaskDraw::values`] bit for bit (the same hash in 32-bit integers), shaped like its
//! input, untracked under autodiff, at two drop probabilities and across several cubes;
//! [`KernelBackend::dropout`] is `x ⊙ mask` and, under autodiff, `dx = dy ⊙ mask` (the mask
//! made again), exactly; [`KernelBackend::dropout_dense`], the one op that keeps `x` instead
//! of the dropped copy, gives `dense(dropout(x), w)`'s values and gradients bit for bit and
//! float64's within 1e-5.

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

type Ad<B> = Autodiff<B>;

/// (y, dx, dw) of `dropout(x) · w` against the upstream gradient `g`, through `product`.
fn dropped_product<B: KernelBackend>(
    device: &B::Device,
    [x, w, g]: [&Tensor<B, 2>; 3],
    product: impl Fn(Tensor<Ad<B>, 2>, Tensor<Ad<B>, 2>) -> Tensor<Ad<B>, 2>,
) -> [Vec<f32>; 3] {
    let tracked =
        |t: &Tensor<B, 2>| Tensor::<Ad<B>, 2>::from_data(t.to_data(), device).require_grad();
    let (x, w) = (tracked(x), tracked(w));
    let y = product(x.clone(), w.clone());
    let g = Tensor::<Ad<B>, 2>::from_data(g.to_data(), device);
    let grads = y.clone().mul(g).sum().backward();
    let host = |t: Tensor<B, 2>| t.into_data().to_vec::<f32>().unwrap();
    [
        host(y.inner()),
        host(x.grad(&grads).unwrap()),
        host(w.grad(&grads).unwrap()),
    ]
}

pub fn dropout_dense_is_dense_of_dropout<B: KernelBackend>(device: &B::Device) {
    let (n, k, m, draw) = (13, 17, 5, MaskDraw::new(99, 0.3));
    let values = |len: usize, mul: usize, div: f32| -> Vec<f32> {
        (0..len)
            .map(|i| ((i * mul % 23) as f32 - 11.0) / div)
            .collect()
    };
    let (xs, ws, gs) = (
        values(n * k, 7, 5.0),
        values(k * m, 5, 9.0),
        values(n * m, 3, 4.0),
    );
    let tensor = |v: &[f32], shape: [usize; 2]| {
        Tensor::<B, 2>::from_data(TensorData::new(v.to_vec(), shape), device)
    };
    let (x, w, g) = (
        tensor(&xs, [n, k]),
        tensor(&ws, [k, m]),
        tensor(&gs, [n, m]),
    );
    let prim = |t: Tensor<Ad<B>, 2>| t.into_primitive().tensor();
    let wrap = |t| Tensor::<Ad<B>, 2>::from_primitive(TensorPrimitive::Float(t));
    let fused = dropped_product(device, [&x, &w, &g], |x, w| {
        wrap(<Ad<B> as KernelBackend>::dropout_dense(
            prim(x),
            prim(w),
            draw,
        ))
    });
    let unfused = dropped_product(device, [&x, &w, &g], |x, w| {
        let dropped = <Ad<B> as KernelBackend>::dropout(prim(x), draw);
        wrap(<Ad<B> as KernelBackend>::dense(dropped, prim(w), None))
    });
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    for (name, (a, b)) in ["y", "dx", "dw"].iter().zip(fused.iter().zip(&unfused)) {
        assert!(
            bits(a) == bits(b),
            "{name}: the fused op's differs from dense(dropout(x))"
        );
    }
    // float64: y = (x ⊙ mask) w, dx = (g wᵀ) ⊙ mask, dw = (x ⊙ mask)ᵀ g.
    let mask = draw.values(n * k);
    let dropped: Vec<f64> = xs.iter().zip(&mask).map(|(x, m)| (x * m) as f64).collect();
    let at = |v: &[f32], i: usize| v[i] as f64;
    let y: Vec<f64> = (0..n * m)
        .map(|i| {
            (0..k)
                .map(|j| dropped[i / m * k + j] * at(&ws, j * m + i % m))
                .sum()
        })
        .collect();
    let dx: Vec<f64> = (0..n * k)
        .map(|i| {
            let row: f64 = (0..m)
                .map(|c| at(&gs, i / k * m + c) * at(&ws, i % k * m + c))
                .sum();
            row * mask[i] as f64
        })
        .collect();
    let dw: Vec<f64> = (0..k * m)
        .map(|i| {
            (0..n)
                .map(|r| dropped[r * k + i / m] * at(&gs, r * m + i % m))
                .sum()
        })
        .collect();
    for (name, got, want) in [
        ("y", &fused[0], y),
        ("dx", &fused[1], dx),
        ("dw", &fused[2], dw),
    ] {
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (*g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "{name}[{i}]: {g} vs {w}"
            );
        }
    }
    // Without autodiff: the forward alone, the same values.
    let plain = B::dropout_dense(
        x.into_primitive().tensor(),
        w.into_primitive().tensor(),
        draw,
    );
    let plain = Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(plain));
    assert!(bits(&plain.into_data().to_vec::<f32>().unwrap()) == bits(&fused[0]));
}
