//! The decoder body (Qwen2, Llama, Qwen3) shared by the causal LM (policy, reference) and the value model
//! (critic): token embedding, decoder layers, final RMSNorm (transformers' `Qwen2Model`,
//! tensor names under `model.`).

use burn::module::Module;
use burn::nn::Embedding;
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Int, Tensor};
use roll_flow_kernels::KernelBackend;

use super::attention::last_column;
use super::attention_mask::{AttentionLayout, LayerMask};
use super::compute_dtype::like;
use super::decoder_layer::DecoderLayer;
use super::queries::{Queries, QueryRows};
use super::rms_norm::RmsNorm;
use super::rotary::RotaryAngles;
use super::selected_queries::SelectedQueries;
use crate::config::Qwen2Config;
use crate::error::ModelError;
use crate::kv_cache::KvCache;
use crate::weights::{embedding, TensorSink, WeightSource};

/// Embedding, decoder stack and final norm.
#[derive(Module, Debug)]
pub struct Qwen2Backbone<B: Backend> {
    /// Token embedding `[vocab, hidden]` (`model.embed_tokens`).
    pub embed_tokens: Embedding<B>,
    /// Decoder layers (`model.layers.N`).
    pub layers: Vec<DecoderLayer<B>>,
    /// Final norm (`model.norm`).
    pub norm: RmsNorm<B>,
    /// Rotary embedding base.
    pub rope_theta: f64,
    /// Rotary frequencies of one head (`Qwen2Config::rope_inv_freq`).
    #[module(skip)]
    pub inv_freq: Vec<f32>,
    /// Width of one attention head.
    pub head_dim: usize,
    /// Each layer's sliding attention window (`None`: full causal attention).
    pub windows: Vec<Option<usize>>,
    /// The dtype activations are computed in when it is not the parameters' own (bf16
    /// mixed precision, [`super::compute_dtype`]); `None`: the parameters' dtype.
    #[module(skip)]
    pub compute: Option<DType>,
    /// Gradient checkpointing by layer under autodiff ([`super::layer_checkpoints`]).
    #[module(skip)]
    pub checkpoint_layers: bool,
}

impl<B: Backend> Qwen2Backbone<B> {
    /// Loads `model.*` for the given config.
    pub fn load(
        source: &mut dyn WeightSource,
        config: &Qwen2Config,
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let embed_tokens = embedding(
            source,
            "model.embed_tokens.weight",
            config.vocab_size,
            config.hidden_size,
            device,
        )?;
        let layers = (0..config.num_hidden_layers)
            .map(|i| DecoderLayer::load(source, &format!("model.layers.{i}"), config, device))
            .collect::<Result<Vec<_>, _>>()?;
        let norm = RmsNorm::load(
            source,
            "model.norm",
            config.hidden_size,
            config.rms_norm_eps,
            device,
        )?;
        Ok(Qwen2Backbone {
            embed_tokens,
            layers,
            norm,
            rope_theta: config.rope_theta,
            inv_freq: config.rope_inv_freq(),
            head_dim: config.head_dim(),
            windows: (0..config.num_hidden_layers)
                .map(|i| config.layer_window(i))
                .collect(),
            compute: None,
            checkpoint_layers: false,
        })
    }

    /// How many positions back any query can see, `max(window) - 1`, when every layer has a
    /// sliding window; `None` when some layer attends to every earlier key. Keys further
    /// back than this from every future query can be dropped from a cache.
    pub fn window_reach(&self) -> Option<usize> {
        let windows: Option<Vec<usize>> = self.windows.iter().copied().collect();
        windows
            .and_then(|w| w.into_iter().max())
            .map(|w| w.max(1) - 1)
    }

    /// Emits every `model.*` tensor.
    pub fn save(&self, sink: &mut TensorSink) {
        sink.put("model.embed_tokens.weight", &self.embed_tokens.weight.val());
        for (i, layer) in self.layers.iter().enumerate() {
            layer.save(&format!("model.layers.{i}"), sink);
        }
        self.norm.save("model.norm", sink);
    }
}

impl<B: KernelBackend> Qwen2Backbone<B> {
    /// Final hidden states `[batch, len, hidden]` of every position
    /// ([`hidden_rows`](Self::hidden_rows) with [`Queries::All`], shaped per sequence).
    pub fn forward(
        &self,
        tokens: Tensor<B, 2, Int>,
        layout: &AttentionLayout,
        cache: Option<&mut KvCache<B>>,
    ) -> Tensor<B, 3> {
        let [batch, len] = tokens.dims();
        let rows = self.hidden_rows(tokens, layout, cache, Queries::All);
        let hidden = rows.dims()[1];
        rows.reshape([batch, len, hidden])
    }

    /// Final hidden states of `tokens: [batch, len]` at the positions `queries` asks for,
    /// one row each (`[rows, hidden]`, [`Queries`]): every position, every row's last
    /// column, or chosen `(row, column)` pairs of whole right-padded sequences.
    ///
    /// With a cache, the tokens are appended after the cached keys of each row and the cache
    /// grows by `len` columns; `layout.key_start` then indexes the grown key axis. Every
    /// layer below the last runs at every position; the last layer's queries, MLP and the
    /// final norm run only where rows are asked for ([`SelectedQueries`] for pairs).
    pub fn hidden_rows(
        &self,
        tokens: Tensor<B, 2, Int>,
        layout: &AttentionLayout,
        cache: Option<&mut KvCache<B>>,
        queries: Queries<'_>,
    ) -> Tensor<B, 2> {
        let device = tokens.device();
        let [batch, len] = tokens.dims();
        let selected = match queries {
            Queries::At(pairs) => {
                let top = self.layers.len().saturating_sub(1);
                let window = self.windows.get(top).copied().flatten();
                let at = SelectedQueries::new(
                    pairs,
                    layout,
                    (batch, len),
                    self.heads().0,
                    window,
                    self.compute,
                    &device,
                );
                let rope_at = self.rope(&at.positions, &device);
                Some((at, rope_at))
            }
            Queries::All | Queries::Last => None,
        };
        let (x, delta) = self.run_layers(tokens, layout, cache, queries, &selected);
        let y = self.norm.add_then_forward(x, delta).1;
        let hidden = y.dims()[2];
        match (queries, &selected) {
            (Queries::At(_), Some((at, _))) => at.in_request_order(y),
            (Queries::Last, _) => y.reshape([batch, hidden]),
            _ => y.reshape([batch * len, hidden]),
        }
    }

    /// The token embeddings of `tokens`, in the compute dtype ([`embedded`]); with
    /// `frozen`, through a copy of the embedding that records no graph.
    pub(super) fn embed(&self, tokens: Tensor<B, 2, Int>, frozen: bool) -> Tensor<B, 3> {
        match frozen {
            true => embedded(&self.embed_tokens.clone().no_grad(), tokens, self.compute),
            false => embedded(&self.embed_tokens, tokens, self.compute),
        }
    }

    /// Rotary tables for `positions`, shaped for this model's query and key/value heads
    /// (in the compute dtype).
    fn rope(&self, positions: &[Vec<usize>], device: &B::Device) -> RotaryAngles<B> {
        RotaryAngles::new(
            positions,
            self.head_dim,
            self.heads(),
            &self.inv_freq,
            self.compute,
            device,
        )
    }

    /// (query heads, key/value heads) of the layers.
    fn heads(&self) -> (usize, usize) {
        self.layers
            .first()
            .map_or((1, 1), |l| (l.self_attn.heads, l.self_attn.kv_heads))
    }

    /// Embeds `tokens` and runs every layer, the last one at the `queries` rows (with the
    /// `selected` slots and their rotary tables for pairs), with one mask per distinct
    /// window, built when a layer first needs it and shared by the layers that use it. With
    /// a cache, the tokens are appended after its keys and it advances by their number.
    /// Returns the residual stream with the last MLP output not yet added (for the final
    /// norm's fused add; [`DecoderLayer::forward`]).
    fn run_layers(
        &self,
        tokens: Tensor<B, 2, Int>,
        layout: &AttentionLayout,
        mut cache: Option<&mut KvCache<B>>,
        queries: Queries<'_>,
        selected: &Option<(SelectedQueries<B>, RotaryAngles<B>)>,
    ) -> (Tensor<B, 3>, Option<Tensor<B, 3>>) {
        let device = tokens.device();
        let columns = tokens.dims()[1];
        let keys = cache.as_ref().map_or(0, |c| c.len()) + columns;
        let rope = self.rope(&layout.positions, &device);
        let mut masks: Vec<(Option<usize>, LayerMask<B>)> = Vec::with_capacity(1);
        let mut mask_of = |i: usize| {
            let window = self.windows.get(i).copied().flatten();
            let built = masks.iter().position(|(w, _)| *w == window);
            let index = built.unwrap_or_else(|| {
                let mask =
                    layout.layer_mask::<B>(keys, self.heads(), window, self.compute, &device);
                masks.push((window, mask));
                masks.len() - 1
            });
            masks[index].1.clone()
        };
        let top = self.layers.len().saturating_sub(1);
        // With gradient checkpointing under autodiff, the layers below the top one run
        // without a graph and leave their inputs for the backward pass.
        let checkpointed = self.checkpoint_layers && cache.is_none() && top > 0;
        let (mut x, mut delta, first) = match checkpointed && B::ad_enabled(&device) {
            true => {
                let (x, delta) = self.checkpointed_trunk(tokens, &rope, &mut mask_of);
                (x, delta, top)
            }
            false => (self.embed(tokens, false), None, 0),
        };
        for (i, layer) in self.layers.iter().enumerate().skip(first) {
            let layer_cache = cache.as_deref_mut().map(|c| c.layer_mut(i));
            let mask;
            let rows = match (i == top, queries, selected) {
                (true, Queries::At(_), Some((at, rope_at))) => QueryRows::At(at, rope_at),
                (true, Queries::Last, _) => {
                    mask = mask_of(i);
                    QueryRows::Last(&mask)
                }
                _ => {
                    mask = mask_of(i);
                    QueryRows::All(&mask)
                }
            };
            let (h, mlp_out) = layer.forward(x, delta, &rope, layer_cache, &rows);
            (x, delta) = (h, Some(mlp_out));
        }
        if let Some(cache) = cache {
            cache.advance(columns);
        }
        let x = match (self.layers.is_empty(), queries, selected) {
            (true, Queries::Last, _) => last_column(x),
            (true, Queries::At(_), Some((at, _))) => at.gather(x),
            _ => x,
        };
        (x, delta)
    }
}

/// `embedding`'s rows of `tokens`, cast to `compute` when set (the backbone's first step,
/// and what a checkpointed pass differentiates again).
pub(super) fn embedded<B: Backend>(
    embedding: &Embedding<B>,
    tokens: Tensor<B, 2, Int>,
    compute: Option<DType>,
) -> Tensor<B, 3> {
    let x = embedding.forward(tokens);
    match compute {
        Some(dtype) => like(x, dtype),
        None => x,
    }
}
