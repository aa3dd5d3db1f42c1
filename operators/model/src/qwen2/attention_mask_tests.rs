//! The attention masks against hand-written visibility and the host against the device.

use super::*;

type B = burn::backend::Flex;

/// Which `[row][query][key]` entries of the mask (one head) are allowed.
fn allowed_entries(layout: &AttentionLayout, keys: usize, window: Option<usize>) -> Vec<bool> {
    let mask = layout.mask::<B>(keys, 1, window, None, &Default::default());
    let values = mask.into_data().to_vec::<f32>().unwrap();
    values.iter().map(|&m| m == 0.0).collect()
}

/// The device's construction gives the host's mask, value for value, on layouts with
/// left padding, cached keys, later-joined rows and windows.
#[test]
fn the_mask_built_on_the_device_is_the_host_mask() {
    let layouts = [
        (AttentionLayout::right_padded(2, 5), 5),
        (
            AttentionLayout {
                positions: vec![vec![0, 1, 2], vec![0, 0, 0]],
                key_start: vec![0, 2],
                branches: None,
            },
            3,
        ),
        (
            AttentionLayout {
                positions: vec![vec![5], vec![2], vec![7]],
                key_start: vec![0, 3, 1],
                branches: None,
            },
            9,
        ),
    ];
    let device = Default::default();
    for (layout, keys) in &layouts {
        for window in [None, Some(1), Some(2), Some(4), Some(40)] {
            for (heads, dtype) in [
                (1, None),
                (3, None),
                (2, Some(DType::BF16)),
                (2, Some(DType::F16)),
            ] {
                let values = |m: Tensor<B, 4>| {
                    (
                        m.dims(),
                        m.dtype(),
                        m.cast(DType::F32).into_data().to_vec::<f32>().unwrap(),
                    )
                };
                let host = layout.mask_on_host::<B>(*keys, heads, window, &device);
                let host = values(in_dtype(host, dtype));
                let dev = values(layout.mask_on_device::<B>(*keys, heads, window, dtype, &device));
                assert_eq!(
                    dev, host,
                    "{layout:?}, {keys} keys, window {window:?}, {dtype:?}"
                );
            }
        }
    }
}

#[test]
fn left_padded_layout_and_mask() {
    // Prompts of 3 and 1 tokens in a 3-wide block (the prefill's layout, see
    // `generate::prefix_reuse::PrefillPlan`): the short row starts at column 2.
    let layout = AttentionLayout {
        positions: vec![vec![0, 1, 2], vec![0, 0, 0]],
        key_start: vec![0, 2],
        branches: None,
    };
    let allowed = allowed_entries(&layout, 3, None);
    #[rustfmt::skip]
    let expected = [
        true, false, false,   true, true, false,   true, true, true,
        false, false, false,  false, false, false, false, false, true,
    ];
    assert_eq!(allowed, expected);
}

#[test]
fn decode_step_sees_cached_keys_from_row_start() {
    let layout = AttentionLayout {
        positions: vec![vec![5], vec![2]],
        key_start: vec![0, 3],
        branches: None,
    };
    let allowed = allowed_entries(&layout, 6, None);
    assert_eq!(allowed[..6], [true; 6]);
    assert_eq!(allowed[6..], [false, false, false, true, true, true]);
}

#[test]
fn sliding_window_hides_keys_window_columns_back() {
    // One row of 4 tokens, window 2: each query sees itself and the key before it.
    let full = AttentionLayout::right_padded(1, 4);
    let allowed = allowed_entries(&full, 4, Some(2));
    #[rustfmt::skip]
    let expected = [
        true, false, false, false,
        true, true, false, false,
        false, true, true, false,
        false, false, true, true,
    ];
    assert_eq!(allowed, expected);
    // A decode step of a row starting at column 1, over 5 cached + new keys, window 3:
    // its own key is column 4, so it sees columns 2..=4, and the mask starts there.
    let step = AttentionLayout {
        positions: vec![vec![3]],
        key_start: vec![1],
        branches: None,
    };
    assert_eq!(step.first_visible_key(5, Some(3)), 2);
    let allowed = allowed_entries(&step, 5, Some(3));
    assert_eq!(allowed, [true, true, true]);
}

/// A prefix-grouped row (prefix of 2, branches at columns 2..4 and 4..5): the second
/// branch reads the prefix and itself, not the first branch.
#[test]
fn a_prefix_grouped_row_hides_the_other_branches() {
    let layout = AttentionLayout {
        positions: vec![vec![0, 1, 2, 3, 2]],
        key_start: vec![0],
        branches: Some(vec![PrefixBranches {
            prefix: 2,
            starts: vec![2, 4],
        }]),
    };
    let allowed = allowed_entries(&layout, 5, None);
    #[rustfmt::skip]
    let expected = [
        true, false, false, false, false,
        true, true, false, false, false,
        true, true, true, false, false,
        true, true, true, true, false,
        true, true, false, false, true,
    ];
    assert_eq!(allowed, expected);
}
