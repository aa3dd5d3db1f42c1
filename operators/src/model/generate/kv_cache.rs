//! The key/value cache of a running batch of sequences of different lengths.
//!
//! Layout: per layer, keys and values `[rows, kv_heads, len, head_dim]` after rotary
//! embedding. All rows share one key axis and are right-aligned on it: row `r` owns columns
//! `key_start[r]..len`, the columns before are zeros that the attention mask hides. A decode
//! step then appends one column for every row at once (one concatenation per layer, as
//! transformers' `DynamicCache` does), whatever the rows' lengths.
//!
//! Continuous batching: a group of prefilled sequences joins with [`KvCache::merge`] (the
//! shorter cache gets zero columns on the left), finished rows leave with
//! [`KvCache::retain`], which also drops leading columns no remaining row uses, so the cache
//! never grows beyond the longest live sequence.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// Cached keys and values of one decoder layer.
#[derive(Clone, Debug, Default)]
pub struct LayerKv<B: Backend> {
    keys: Option<Tensor<B, 4>>,
    values: Option<Tensor<B, 4>>,
}

impl<B: Backend> LayerKv<B> {
    /// Appends new keys/values `[rows, kv_heads, n, head_dim]` and returns the whole cache.
    pub fn append(&mut self, k: Tensor<B, 4>, v: Tensor<B, 4>) -> (Tensor<B, 4>, Tensor<B, 4>) {
        let k = match self.keys.take() {
            Some(old) => Tensor::cat(vec![old, k], 2),
            None => k,
        };
        let v = match self.values.take() {
            Some(old) => Tensor::cat(vec![old, v], 2),
            None => v,
        };
        self.keys = Some(k.clone());
        self.values = Some(v.clone());
        (k, v)
    }

    fn map(&mut self, f: impl Fn(Tensor<B, 4>) -> Tensor<B, 4>) {
        self.keys = self.keys.take().map(&f);
        self.values = self.values.take().map(&f);
    }
}

/// The cache of all layers for a batch of rows.
#[derive(Clone, Debug)]
pub struct KvCache<B: Backend> {
    layers: Vec<LayerKv<B>>,
    len: usize,
    key_start: Vec<usize>,
}

impl<B: Backend> KvCache<B> {
    /// An empty cache for `rows` sequences whose first key will be at `key_start[r]`.
    pub fn new(num_layers: usize, key_start: Vec<usize>) -> Self {
        KvCache {
            layers: vec![
                LayerKv {
                    keys: None,
                    values: None
                };
                num_layers
            ],
            len: 0,
            key_start,
        }
    }

    /// Number of columns on the shared key axis.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key has been cached yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of sequences (rows).
    pub fn rows(&self) -> usize {
        self.key_start.len()
    }

    /// First column of each row's keys.
    pub fn key_start(&self) -> &[usize] {
        &self.key_start
    }

    /// The cache of layer `i` (the attention appends to it).
    pub fn layer_mut(&mut self, i: usize) -> &mut LayerKv<B> {
        &mut self.layers[i]
    }

    /// Records that every layer received `n` more columns.
    pub fn advance(&mut self, n: usize) {
        self.len += n;
    }

    /// Adds the rows of `other` after this cache's rows.
    pub fn merge(&mut self, mut other: KvCache<B>) {
        if self.rows() == 0 {
            *self = other;
            return;
        }
        let len = self.len.max(other.len);
        self.pad_left(len - self.len);
        other.pad_left(len - other.len);
        for (mine, theirs) in self.layers.iter_mut().zip(other.layers) {
            let cat = |a: Option<Tensor<B, 4>>, b: Option<Tensor<B, 4>>| match (a, b) {
                (Some(a), Some(b)) => Some(Tensor::cat(vec![a, b], 0)),
                (a, b) => a.or(b),
            };
            mine.keys = cat(mine.keys.take(), theirs.keys);
            mine.values = cat(mine.values.take(), theirs.values);
        }
        self.key_start.extend(other.key_start);
    }

    /// Keeps only the given rows (in that order) and drops unused leading columns.
    pub fn retain(&mut self, rows: &[usize]) {
        if rows.is_empty() {
            *self = KvCache::new(self.layers.len(), Vec::new());
            return;
        }
        let Some(device) = self.device() else {
            self.key_start = rows.iter().map(|&r| self.key_start[r]).collect();
            return;
        };
        let index: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
        let index = Tensor::<B, 1, Int>::from_data(TensorData::new(index, [rows.len()]), &device);
        for layer in &mut self.layers {
            layer.map(|t| t.select(0, index.clone()));
        }
        self.key_start = rows.iter().map(|&r| self.key_start[r]).collect();
        let unused = self.key_start.iter().copied().min().unwrap_or(0);
        if unused > 0 {
            let len = self.len;
            for layer in &mut self.layers {
                layer.map(|t| t.narrow(2, unused, len - unused));
            }
            self.len -= unused;
            self.key_start.iter_mut().for_each(|s| *s -= unused);
        }
    }

    fn pad_left(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        for layer in &mut self.layers {
            layer.map(|t| {
                let [rows, heads, _, dim] = t.dims();
                let zeros = Tensor::zeros([rows, heads, n, dim], &t.device());
                Tensor::cat(vec![zeros, t], 2)
            });
        }
        self.len += n;
        self.key_start.iter_mut().for_each(|s| *s += n);
    }

    fn device(&self) -> Option<B::Device> {
        self.layers
            .first()
            .and_then(|l| l.keys.as_ref())
            .map(|k| k.device())
    }
}
