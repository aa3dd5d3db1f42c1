//! The Qwen2 transformer body shared by the causal LM (policy, reference) and the value model
//! (critic): token embedding, decoder layers, final RMSNorm (transformers' `Qwen2Model`,
//! tensor names under `model.`).

use burn::module::Module;
use burn::nn::Embedding;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};
use roll_flow_kernels::KernelBackend;

use super::attention::last_column;
use super::attention_mask::{AttentionLayout, LayerMask};
use super::decoder_layer::DecoderLayer;
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
    /// Width of one attention head.
    pub head_dim: usize,
    /// Each layer's sliding attention window (`None`: full causal attention).
    pub windows: Vec<Option<usize>>,
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
            head_dim: config.head_dim(),
            windows: (0..config.num_hidden_layers)
                .map(|i| config.layer_window(i))
                .collect(),
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
    /// Final hidden states `[batch, len, hidden]` of `tokens: [batch, len]`.
    ///
    /// With a cache, the tokens are appended after the cached keys of each row and the cache
    /// grows by `len` columns; `layout.key_start` then indexes the grown key axis.
    pub fn forward(
        &self,
        tokens: Tensor<B, 2, Int>,
        layout: &AttentionLayout,
        cache: Option<&mut KvCache<B>>,
    ) -> Tensor<B, 3> {
        self.norm
            .forward(self.run_layers(tokens, layout, cache, LastLayer::Full))
    }

    /// The final hidden state of every row's last column, `[batch, 1, hidden]`: the rows of
    /// [`forward`](Self::forward) that a prefill reads its next-token logits from. The
    /// cache grows by every column as in `forward`; the last layer's queries, MLP and
    /// the final norm run at the last column only.
    pub fn forward_last(
        &self,
        tokens: Tensor<B, 2, Int>,
        layout: &AttentionLayout,
        cache: Option<&mut KvCache<B>>,
    ) -> Tensor<B, 3> {
        self.norm
            .forward(self.run_layers(tokens, layout, cache, LastLayer::LastColumn))
    }

    /// Final hidden states `[at.len(), hidden]` at the `(row, column)` pairs `at` of the
    /// whole right-padded sequences `tokens: [batch, len]`, in the order asked: the rows of
    /// [`forward`](Self::forward) without a cache, computed with the last layer's queries
    /// and MLP at those positions only ([`SelectedQueries`]).
    pub fn forward_at(&self, tokens: Tensor<B, 2, Int>, at: &[(usize, usize)]) -> Tensor<B, 2> {
        let device = tokens.device();
        let [batch, len] = tokens.dims();
        let layout = AttentionLayout::right_padded(batch, len);
        let top = self.layers.len().saturating_sub(1);
        let window = self.windows.get(top).copied().flatten();
        let at = SelectedQueries::new(at, (batch, len), self.heads().0, window, &device);
        let rope_at = self.rope(&at.positions, &device);
        let y = self.run_layers(tokens, &layout, None, LastLayer::At(&at, &rope_at));
        at.in_request_order(self.norm.forward(y))
    }

    /// Rotary tables for `positions`, shaped for this model's query and key/value heads.
    fn rope(&self, positions: &[Vec<usize>], device: &B::Device) -> RotaryAngles<B> {
        RotaryAngles::new(
            positions,
            self.head_dim,
            self.heads(),
            self.rope_theta,
            device,
        )
    }

    /// (query heads, key/value heads) of the layers.
    fn heads(&self) -> (usize, usize) {
        self.layers
            .first()
            .map_or((1, 1), |l| (l.self_attn.heads, l.self_attn.kv_heads))
    }

    /// Embeds `tokens` and runs every layer, the last one as `last` says, with one mask
    /// per distinct window, built when a layer first needs it and shared by the layers that
    /// use it. With a cache, the tokens are appended after its keys and it advances by
    /// their number.
    fn run_layers(
        &self,
        tokens: Tensor<B, 2, Int>,
        layout: &AttentionLayout,
        mut cache: Option<&mut KvCache<B>>,
        last: LastLayer<'_, B>,
    ) -> Tensor<B, 3> {
        let device = tokens.device();
        let queries = tokens.dims()[1];
        let keys = cache.as_ref().map_or(0, |c| c.len()) + queries;
        let rope = self.rope(&layout.positions, &device);
        let mut x = self.embed_tokens.forward(tokens);
        let mut masks: Vec<(Option<usize>, LayerMask<B>)> = Vec::with_capacity(1);
        let mut mask_of = |i: usize| {
            let window = self.windows.get(i).copied().flatten();
            let built = masks.iter().position(|(w, _)| *w == window);
            let index = built.unwrap_or_else(|| {
                let mask = layout.layer_mask::<B>(keys, self.heads(), window, &device);
                masks.push((window, mask));
                masks.len() - 1
            });
            masks[index].1.clone()
        };
        let top = self.layers.len().saturating_sub(1);
        for (i, layer) in self.layers.iter().enumerate() {
            let layer_cache = cache.as_deref_mut().map(|c| c.layer_mut(i));
            x = match (i == top, &last) {
                (true, LastLayer::At(at, rope_at)) => layer.forward_at(x, &rope, rope_at, at),
                (true, LastLayer::LastColumn) => {
                    layer.forward_last(x, &rope, &mask_of(i), layer_cache)
                }
                _ => layer.forward(x, &rope, &mask_of(i), layer_cache),
            };
        }
        if let Some(cache) = cache {
            cache.advance(queries);
        }
        match (self.layers.is_empty(), last) {
            (true, LastLayer::LastColumn) => last_column(x),
            (true, LastLayer::At(at, _)) => at.gather(x),
            _ => x,
        }
    }
}

/// How [`Qwen2Backbone::run_layers`] runs the last layer.
enum LastLayer<'a, B: Backend> {
    /// At every column, as the layers below.
    Full,
    /// At every row's last column only: a prefill's next-token logits.
    LastColumn,
    /// At the selected slots only (whole right-padded sequences, no cache), with their
    /// rotary tables: scores read at decision positions.
    At(&'a SelectedQueries<B>, &'a RotaryAngles<B>),
}
