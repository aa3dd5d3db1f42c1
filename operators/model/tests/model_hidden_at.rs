//! `Qwen2CausalLm::hidden_at` (the last layer run at chosen positions only) against the
//! full forward pass: the same hidden states, and the same gradients, within float
//! tolerance, with full attention and with a sliding window on the last layer (grouped
//! query heads in both); and `hidden_last` (a prefill's last column) against the full pass
//! through a KV cache.

mod common;

use burn::backend::Autodiff;
use burn::tensor::{Int, Tensor, TensorData};
use common::{assert_close, device, fixture, sliding_window_fixture, B};
use roll_flow_kernels::KernelBackend;
use roll_flow_model::generate::KvCache;
use roll_flow_model::hf::load_causal_lm;
use roll_flow_model::qwen2::AttentionLayout;
use roll_flow_model::weights::to_f32_vec;
use roll_flow_model::Qwen2CausalLm;

/// Three right-padded rows of 14, 9 and 3 tokens (0 pads).
fn tokens<K: KernelBackend>() -> Tensor<K, 2, Int> {
    let lens = [14usize, 9, 3];
    let mut ids = Vec::new();
    for (r, len) in lens.iter().enumerate() {
        ids.extend((0..14).map(|c| {
            if c < *len {
                (7 + 31 * r + 13 * c) as i64 % 500
            } else {
                0
            }
        }));
    }
    Tensor::from_data(TensorData::new(ids, [3, 14]), &Default::default())
}

/// Positions out of row order, several per row, one row with a single one, the last
/// column of a full row and column 0.
const AT: [(usize, usize); 7] = [(1, 8), (0, 13), (0, 2), (2, 0), (0, 9), (1, 3), (0, 12)];

/// The rows `AT` of the full pass, `[AT.len(), hidden]`.
fn reference<K: KernelBackend>(model: &Qwen2CausalLm<K>) -> Tensor<K, 2> {
    let hidden = model.hidden(tokens(), &AttentionLayout::right_padded(3, 14), None);
    let [_, len, width] = hidden.dims();
    let rows: Vec<i64> = AT.iter().map(|&(r, c)| (r * len + c) as i64).collect();
    let index = Tensor::from_data(TensorData::new(rows, [AT.len()]), &Default::default());
    hidden.reshape([3 * len, width]).select(0, index)
}

fn same_hidden_states(model: &Qwen2CausalLm<B>) {
    let got = to_f32_vec(&model.hidden_at(tokens(), &AT));
    let want = to_f32_vec(&reference(model));
    assert_close(&got, &want, 1e-5, "hidden state");
}

#[test]
fn hidden_at_matches_the_full_pass_with_full_attention() {
    same_hidden_states(&load_causal_lm::<B>(&fixture("tiny_qwen2"), &device()).unwrap());
}

#[test]
fn hidden_at_matches_the_full_pass_with_a_sliding_window() {
    let (dir, _) = sliding_window_fixture();
    same_hidden_states(&load_causal_lm::<B>(dir.path(), &device()).unwrap());
}

#[test]
fn hidden_at_gradients_match_the_full_pass() {
    type A = Autodiff<B>;
    let (dir, _) = sliding_window_fixture();
    for path in [fixture("tiny_qwen2"), dir.path().to_path_buf()] {
        let model = load_causal_lm::<A>(&path, &device()).unwrap();
        // A fixed, uneven weighting of the hidden states, so no gradient cancels.
        let width = model.config.hidden_size;
        let weights: Vec<f32> = (0..AT.len() * width)
            .map(|i| ((i * 37 % 17) as f32 - 8.0) / 8.0)
            .collect();
        let weights =
            Tensor::<A, 2>::from_data(TensorData::new(weights, [AT.len(), width]), &device());
        let grads_of = |hidden: Tensor<A, 2>| {
            let grads = hidden.mul(weights.clone()).sum().backward();
            let last = model.model.layers.last().unwrap();
            let first = &model.model.layers[0];
            [
                to_f32_vec(&last.self_attn.q_proj.weight.grad(&grads).unwrap()),
                to_f32_vec(&last.self_attn.k_proj.weight.grad(&grads).unwrap()),
                to_f32_vec(&last.mlp.down_proj.weight.grad(&grads).unwrap()),
                to_f32_vec(&first.self_attn.v_proj.weight.grad(&grads).unwrap()),
                to_f32_vec(&model.model.embed_tokens.weight.grad(&grads).unwrap()),
            ]
        };
        let got = grads_of(model.hidden_at(tokens(), &AT));
        let want = grads_of(reference(&model));
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                w.iter().any(|v| v.abs() > 1e-4),
                "gradient {i} is not all zero"
            );
            assert_close(g, w, 1e-4, &format!("gradient {i} of {}", path.display()));
        }
    }
}

/// `hidden_last` against the full pass's last column over two prefills into a cache: a
/// left-padded first block, then four more tokens per row reading the cached keys (past
/// the sliding window of 6 in the windowed model). The second block checks that the
/// cache `hidden_last` filled holds the same keys and values.
#[test]
fn hidden_last_matches_the_full_pass_through_a_cache() {
    let (dir, _) = sliding_window_fixture();
    for path in [fixture("tiny_qwen2"), dir.path().to_path_buf()] {
        let model = load_causal_lm::<B>(&path, &device()).unwrap();
        let layers = model.model.layers.len();
        let block = |ids: Vec<i64>, width: usize| {
            Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [2, width]), &device())
        };
        let first = block(vec![11, 12, 13, 14, 15, 0, 0, 21, 22, 23], 5);
        let first_layout = AttentionLayout {
            positions: vec![vec![0, 1, 2, 3, 4], vec![0, 0, 0, 1, 2]],
            key_start: vec![0, 2],
            branches: None,
        };
        let second = block(vec![31, 32, 33, 34, 41, 42, 43, 44], 4);
        let second_layout = AttentionLayout {
            positions: vec![vec![5, 6, 7, 8], vec![3, 4, 5, 6]],
            key_start: vec![0, 2],
            branches: None,
        };
        let mut full_cache = KvCache::<B>::new(layers, vec![0, 2]);
        let mut last_cache = KvCache::<B>::new(layers, vec![0, 2]);
        for (tokens, layout) in [(first, first_layout), (second, second_layout)] {
            let full = model.hidden(tokens.clone(), &layout, Some(&mut full_cache));
            let width = full.dims()[1];
            let want = to_f32_vec(&full.narrow(1, width - 1, 1));
            let got = to_f32_vec(&model.hidden_last(tokens, &layout, Some(&mut last_cache)));
            assert_close(
                &got,
                &want,
                1e-5,
                &format!("last column of {}", path.display()),
            );
            assert_eq!(full_cache.len(), last_cache.len());
        }
    }
}
