//! The key/value cache of a running batch of sequences of different lengths.
//!
//! Layout: per layer, keys and values `[rows, kv_heads, capacity, head_dim]` after rotary
//! embedding, of which the first `len` columns are live. All rows share one key axis and are
//! right-aligned on it: row `r` owns columns `key_start[r]..len`, the columns before are
//! zeros that the attention mask hides. A decode step writes one column for every row at
//! once, whatever the rows' lengths.
//!
//! The buffers are preallocated with spare columns and written in place
//! ([`roll_flow_kernels::block_write`]: on `Flex` a uniquely owned tensor's storage is
//! written directly; burn-flex's own `slice_assign` copies the whole buffer), so a decode step copies
//! only the new column instead of the whole cache, as a `cat` per layer and step (what
//! transformers' `DynamicCache` does) would. When the spare columns run out the buffer grows
//! by doubling, so appends cost amortised O(1) copies per column.
//!
//! Continuous batching: a group of prefilled sequences joins with [`KvCache::merge`] (the
//! shorter cache gets zero columns on the left), finished rows leave with
//! [`KvCache::retain`], which also drops leading columns no remaining row uses, so the cache
//! never grows beyond the longest live sequence (plus spare capacity).

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use roll_flow_kernels::{block_write, KernelBackend};

use roll_flow_kernels::host_transfer::{download, upload};

/// Spare columns a freshly grown buffer gets at least.
const MIN_SPARE: usize = 32;

/// Cached keys and values of one decoder layer.
#[derive(Clone, Debug, Default)]
pub struct LayerKv<B: Backend> {
    keys: Option<Tensor<B, 4>>,
    values: Option<Tensor<B, 4>>,
    /// Live columns (the rest of the buffers is spare capacity).
    len: usize,
}

impl<B: KernelBackend> LayerKv<B> {
    /// Writes new keys/values `[rows, kv_heads, n, head_dim]` after the live columns and
    /// returns views of all live keys and values.
    pub fn append(&mut self, k: Tensor<B, 4>, v: Tensor<B, 4>) -> (Tensor<B, 4>, Tensor<B, 4>) {
        let new = Columns::of(&k);
        let (keys, values, ()) = self.append_with(new, |keys, values, start| {
            let at = [0, 0, start, 0];
            (block_write(keys, at, k), block_write(values, at, v), ())
        });
        (keys, values)
    }

    /// Makes room for `new` columns after the live ones and hands the key and value
    /// buffers and the first new column to `write`, which gives them back with the new
    /// columns written (in place where nothing else holds them:
    /// [`roll_flow_kernels::rotate_into_cache`] on a GPU writes them from the projections
    /// in one kernel) and whatever else it made; returns views of all live keys and
    /// values, and that.
    pub fn append_with<T>(
        &mut self,
        new: Columns<B>,
        write: impl FnOnce(Tensor<B, 4>, Tensor<B, 4>, usize) -> (Tensor<B, 4>, Tensor<B, 4>, T),
    ) -> (Tensor<B, 4>, Tensor<B, 4>, T) {
        let (start, end) = (self.len, self.len + new.shape[2]);
        let keys = reserve(self.keys.take(), &new, start);
        let values = reserve(self.values.take(), &new, start);
        let (keys, values, made) = write(keys, values, start);
        self.len = end;
        let live = (
            keys.clone().narrow(2, 0, end),
            values.clone().narrow(2, 0, end),
            made,
        );
        self.keys = Some(keys);
        self.values = Some(values);
        live
    }

    /// Applies `f` to the live columns; the result becomes the whole buffer (no spare).
    fn map(&mut self, f: impl Fn(Tensor<B, 4>) -> Tensor<B, 4>) {
        let len = self.len;
        let live = |t: Tensor<B, 4>| f(t.narrow(2, 0, len));
        self.keys = self.keys.take().map(&live);
        self.values = self.values.take().map(&live);
        self.len = self.keys.as_ref().map_or(0, |k| k.dims()[2]);
    }
}

/// The shape, dtype and device of new cache columns, `[rows, kv_heads, n, head_dim]`.
#[derive(Clone, Debug)]
pub struct Columns<B: Backend> {
    pub shape: [usize; 4],
    pub dtype: burn::tensor::DType,
    pub device: B::Device,
}

impl<B: Backend> Columns<B> {
    /// Those of `k`.
    pub fn of(k: &Tensor<B, 4>) -> Self {
        Columns {
            shape: k.dims(),
            dtype: k.dtype(),
            device: k.device(),
        }
    }
}

/// `buffer` with room for `new` columns from `start` on: as it is when it has them, else
/// a fresh one (doubling, at least [`MIN_SPARE`] spare columns) holding its first `start`
/// columns.
fn reserve<B: KernelBackend>(
    buffer: Option<Tensor<B, 4>>,
    new: &Columns<B>,
    start: usize,
) -> Tensor<B, 4> {
    let [rows, heads, n, dim] = new.shape;
    let end = start + n;
    match buffer {
        Some(b) if b.dims()[2] >= end => b,
        old => {
            let capacity = (2 * end).max(end + MIN_SPARE);
            let fresh = Tensor::zeros([rows, heads, capacity, dim], (&new.device, new.dtype));
            match old {
                Some(old) if start > 0 => block_write(fresh, [0; 4], old.narrow(2, 0, start)),
                _ => fresh,
            }
        }
    }
}

/// Keys and values of one layer.
pub type KvPair<B> = (Tensor<B, 4>, Tensor<B, 4>);

/// One sequence's cached keys and values, `[1, kv_heads, columns, head_dim]` per layer: what
/// a finished request leaves for the next turn of its conversation to start from. The
/// columns hold positions `first..first + columns`: a model whose every layer has a
/// sliding window keeps only the last columns a later query can still see (see
/// [`KvCache::row`]), `first` is 0 otherwise.
#[derive(Clone, Debug)]
pub struct RowKv<B: Backend> {
    /// `(keys, values)` of every layer.
    pub layers: Vec<KvPair<B>>,
    /// Position of the first stored column.
    pub first: usize,
}

impl<B: Backend> RowKv<B> {
    /// Number of tokens covered: positions `0..len()` (the first `first` no longer stored).
    pub fn len(&self) -> usize {
        self.first + self.columns()
    }

    /// Number of stored columns.
    pub fn columns(&self) -> usize {
        self.layers.first().map_or(0, |(k, _)| k.dims()[2])
    }

    /// Whether no token is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The cache of all layers for a batch of rows.
#[derive(Clone, Debug)]
pub struct KvCache<B: Backend> {
    layers: Vec<LayerKv<B>>,
    len: usize,
    key_start: Vec<usize>,
    /// Rotary position of each row's column `key_start[r]` (not 0 when the row started from
    /// a prefix that no longer stores its first positions).
    first_position: Vec<usize>,
}

impl<B: KernelBackend> KvCache<B> {
    /// An empty cache for `rows` sequences whose first key will be at `key_start[r]`.
    pub fn new(num_layers: usize, key_start: Vec<usize>) -> Self {
        let first_position = vec![0; key_start.len()];
        KvCache {
            layers: vec![
                LayerKv {
                    keys: None,
                    values: None,
                    len: 0,
                };
                num_layers
            ],
            len: 0,
            key_start,
            first_position,
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
            // Buffers may have different spare capacities: join the live columns only.
            let cat = |a: Option<Tensor<B, 4>>, b: Option<Tensor<B, 4>>| match (a, b) {
                (Some(a), Some(b)) => Some(Tensor::cat(
                    vec![a.narrow(2, 0, len), b.narrow(2, 0, len)],
                    0,
                )),
                (a, b) => a.or(b).map(|t| t.narrow(2, 0, len)),
            };
            mine.keys = cat(mine.keys.take(), theirs.keys);
            mine.values = cat(mine.values.take(), theirs.values);
            mine.len = mine.keys.as_ref().map_or(0, |k| k.dims()[2]);
        }
        self.key_start.extend(other.key_start);
        self.first_position.extend(other.first_position);
    }

    /// Keeps only the given rows (in that order) and drops unused leading columns.
    pub fn retain(&mut self, rows: &[usize]) {
        if rows.is_empty() {
            *self = KvCache::new(self.layers.len(), Vec::new());
            return;
        }
        self.key_start = rows.iter().map(|&r| self.key_start[r]).collect();
        self.first_position = rows.iter().map(|&r| self.first_position[r]).collect();
        let Some(device) = self.device() else {
            return;
        };
        let index: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
        let index: Tensor<B, 1, Int> = upload(TensorData::new(index, [rows.len()]), &device);
        for layer in &mut self.layers {
            layer.map(|t| t.select(0, index.clone()));
        }
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

    /// A copy of row `r`'s live keys and values (its columns `key_start[r]..len`; with
    /// `keep`, only the last `keep` of them), owning its storage, so the running buffers stay
    /// uniquely owned and keep being written in place.
    pub fn row(&self, r: usize, keep: Option<usize>) -> RowKv<B> {
        let (start, len) = (self.key_start[r], self.len);
        let dropped = keep.map_or(0, |k| (len - start).saturating_sub(k));
        let copy = |t: &Option<Tensor<B, 4>>| {
            let t = t.as_ref().expect("a cache with columns has buffers");
            let view = t
                .clone()
                .narrow(0, r, 1)
                .narrow(2, start + dropped, len - start - dropped);
            upload(download(view), &t.device())
        };
        RowKv {
            layers: self
                .layers
                .iter()
                .map(|l| (copy(&l.keys), copy(&l.values)))
                .collect(),
            first: self.first_position[r] + dropped,
        }
    }

    /// A cache whose row `r` holds the first `take` positions of `prefixes[r]`, right-aligned
    /// on a shared key axis as wide as the longest (`None` or `take = 0`: no columns). Rows
    /// keep their keys from `key_start[r]`, which the caller computes with the queries that
    /// will follow (left padding of short rows included); a prefix that no longer stores its
    /// first positions (`RowKv::first`, at most `take`) moves its row's start past them, so
    /// the mask hides the zero columns left in their place.
    ///
    /// The buffers have room for `queries` more columns plus `MIN_SPARE`, so the prefill
    /// that follows, and the first decode steps, write in place: each prefix is copied
    /// once, into a zeroed buffer, instead of being stacked and then regrown.
    pub fn from_prefixes(
        num_layers: usize,
        prefixes: &[Option<(&RowKv<B>, usize)>],
        mut key_start: Vec<usize>,
        queries: usize,
    ) -> Self {
        let mut first_position = vec![0; key_start.len()];
        for ((start, position), prefix) in
            key_start.iter_mut().zip(&mut first_position).zip(prefixes)
        {
            if let Some((kv, take)) = prefix.filter(|p| p.1 > 0) {
                assert!(
                    kv.first <= take,
                    "a prefix cannot serve positions it dropped"
                );
                *start += kv.first;
                *position = kv.first;
            }
        }
        let width = prefixes.iter().flatten().map(|p| p.1).max().unwrap_or(0);
        let Some((first, _)) = prefixes.iter().flatten().find(|p| p.1 > 0) else {
            return KvCache::new(num_layers, key_start);
        };
        let rows = prefixes.len();
        let capacity = width + queries + MIN_SPARE;
        let layers = (0..num_layers)
            .map(|i| {
                let stack = |pick: fn(&KvPair<B>) -> &Tensor<B, 4>| {
                    let template = pick(&first.layers[i]);
                    let [_, heads, _, dim] = template.dims();
                    let mut buffer = Tensor::zeros(
                        [rows, heads, capacity, dim],
                        (&template.device(), template.dtype()),
                    );
                    for (r, prefix) in prefixes.iter().enumerate() {
                        if let Some((kv, take)) = prefix.filter(|p| p.1 > 0) {
                            let stored = take - kv.first;
                            let cached = pick(&kv.layers[i]).clone().narrow(2, 0, stored);
                            buffer = block_write(buffer, [r, 0, width - stored, 0], cached);
                        }
                    }
                    buffer
                };
                LayerKv {
                    keys: Some(stack(|l| &l.0)),
                    values: Some(stack(|l| &l.1)),
                    len: width,
                }
            })
            .collect();
        KvCache {
            layers,
            len: width,
            key_start,
            first_position,
        }
    }

    fn pad_left(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        for layer in &mut self.layers {
            layer.map(|t| {
                let [rows, heads, _, dim] = t.dims();
                let zeros = Tensor::zeros([rows, heads, n, dim], (&t.device(), t.dtype()));
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

#[cfg(test)]
#[path = "kv_cache_tests.rs"]
mod tests;
