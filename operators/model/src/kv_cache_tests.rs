//! Tests of the KV cache: in-place appends past capacity, merging and retaining rows.

use super::*;

type B = burn::backend::Flex;

fn column(rows: usize, value: f32) -> Tensor<B, 4> {
    Tensor::full([rows, 2, 1, 3], value, &Default::default())
}

fn values(t: Tensor<B, 4>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

/// Appends past the preallocated capacity (growth) keep every column, in order.
#[test]
fn in_place_appends_grow_and_keep_all_columns() {
    let mut layer = LayerKv::<B>::default();
    let mut expected: Vec<Tensor<B, 4>> = Vec::new();
    for step in 0..(3 * MIN_SPARE) {
        let c = column(2, step as f32);
        expected.push(c.clone());
        let (k, v) = layer.append(c.clone(), c);
        assert_eq!(k.dims(), [2, 2, step + 1, 3]);
        assert_eq!(values(k), values(Tensor::cat(expected.clone(), 2)));
        assert_eq!(values(v), values(Tensor::cat(expected.clone(), 2)));
    }
}

/// Merging caches with different spare capacities joins the live columns only, and
/// retaining rows drops unused leading columns.
#[test]
fn merge_and_retain_see_live_columns_only() {
    let mut a = KvCache::<B>::new(1, vec![0]);
    for step in 0..3 {
        a.layer_mut(0)
            .append(column(1, step as f32), column(1, step as f32));
        a.advance(1);
    }
    let mut b = KvCache::<B>::new(1, vec![0]);
    b.layer_mut(0).append(column(1, 9.0), column(1, 9.0));
    b.advance(1);
    a.merge(b);
    assert_eq!((a.len(), a.key_start()), (3, &[0, 2][..]));
    let (k, _) = a.layer_mut(0).append(column(2, 5.0), column(2, 5.0));
    a.advance(1);
    let k = values(k);
    let at = |row: usize, col: usize| k[row * 2 * 4 * 3 + col * 3];
    assert_eq!([at(0, 0), at(0, 2), at(0, 3)], [0.0, 2.0, 5.0]);
    assert_eq!([at(1, 1), at(1, 2), at(1, 3)], [0.0, 9.0, 5.0]);
    a.retain(&[1]);
    assert_eq!((a.len(), a.key_start()), (2, &[0][..]));
    let (k, _) = a.layer_mut(0).append(column(1, 6.0), column(1, 6.0));
    assert_eq!(k.dims(), [1, 2, 3, 3]);
    assert_eq!(
        values(k.narrow(1, 0, 1)),
        vec![9.0, 9.0, 9.0, 5.0, 5.0, 5.0, 6.0, 6.0, 6.0]
    );
}

/// A row copied with `keep` holds its last `keep` columns and says at which position they
/// start; loaded back as a prefix, its row starts past the dropped positions.
#[test]
fn a_trimmed_row_records_its_first_position() {
    let mut cache = KvCache::<B>::new(1, vec![0]);
    for step in 0..6 {
        cache
            .layer_mut(0)
            .append(column(1, step as f32), column(1, step as f32));
        cache.advance(1);
    }
    let row = cache.row(0, Some(4));
    assert_eq!((row.first, row.columns(), row.len()), (2, 4, 6));
    let keys = values(row.layers[0].0.clone().narrow(1, 0, 1));
    assert_eq!(
        keys.iter().step_by(3).copied().collect::<Vec<_>>(),
        [2.0, 3.0, 4.0, 5.0]
    );
    // Taking 5 positions: the row's keys start at column 2 of a 5-wide axis (positions
    // 2..5), and a copy of it knows it starts at position 2.
    let loaded = KvCache::from_prefixes(1, &[Some((&row, 5))], vec![0], 1);
    assert_eq!((loaded.len(), loaded.key_start()), (5, &[2][..]));
    let again = loaded.row(0, None);
    assert_eq!((again.first, again.columns()), (2, 3));
}
