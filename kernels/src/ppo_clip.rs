//! The clipped PPO loss's settings ([`ClipSettings`]) and statistics ([`PpoStats`]), shared
//! by every backend's kernel and the reference formulas, and the primitives its backend op
//! takes and keeps ([`PpoTokens`], [`PpoForward`], [`PpoSaved`]).
//!
//! The settings' fields are declared once, in [`crate::clip_settings_struct!`]: it declares
//! [`ClipSettings`] here and the RON settings of every clipped policy loss of
//! `roll-flow-algo` (`PpoClip`, `DecoupledPpo`, `Gspo`, `Cispo`), each with the same five
//! fields, flat in RON (`PpoClip(low: 0.2, high: 0.28, agg: TokenMean)`), plus its own.
//! Their defaults are [`ClipSettings::default`]'s unless a loss says otherwise.

use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

/// Declares a struct holding the clip settings' fields (`low`, `high`, `dual_clip`,
/// `agg`, `norm_length`) followed by the given fields, each written `pub name: Type =
/// default,`. A RON settings struct (`#[serde(default, deny_unknown_fields)]`), with
/// `with_clip(clip)`, the struct with `clip`'s values and the extra fields' defaults, and
/// `clip()`, the settings as the kernel takes them. The first form (`@fields`) declares the
/// struct alone: [`ClipSettings`] itself.
#[macro_export]
macro_rules! clip_settings_struct {
    (
        @fields
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* pub $field:ident: $ty:ty = $default:expr, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name {
            /// ε_low: the ratio is clipped below at 1 − ε_low.
            pub low: f32,
            /// ε_high: the ratio is clipped above at 1 + ε_high.
            pub high: f32,
            /// Dual clip constant c > 1 for negative advantages (Ye et al. 2020: the loss is
            /// capped at −c·A); `None` turns it off.
            pub dual_clip: Option<f32>,
            /// How the per-token losses become one scalar (`LossAgg`).
            pub agg: $crate::aggregation::LossAgg,
            /// The constant length L of `SeqMeanTokenSumNorm`; `None`: the longest response.
            pub norm_length: Option<u32>,
            $( $(#[$field_meta])* pub $field: $ty, )*
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* pub $field:ident: $ty:ty = $default:expr, )*
        }
    ) => {
        $crate::clip_settings_struct! {
            @fields
            $(#[$meta])*
            pub struct $name {
                $( $(#[$field_meta])* pub $field: $ty = $default, )*
            }
        }

        impl $name {
            /// These settings with `clip`'s values and the other fields' defaults.
            pub fn with_clip(clip: $crate::ppo_clip::ClipSettings) -> Self {
                $name {
                    low: clip.low,
                    high: clip.high,
                    dual_clip: clip.dual_clip,
                    agg: clip.agg,
                    norm_length: clip.norm_length,
                    $( $field: $default, )*
                }
            }

            /// The clip settings, as the kernel takes them.
            pub fn clip(&self) -> $crate::ppo_clip::ClipSettings {
                $crate::ppo_clip::ClipSettings {
                    low: self.low,
                    high: self.high,
                    dual_clip: self.dual_clip,
                    agg: self.agg,
                    norm_length: self.norm_length,
                }
            }
        }
    };
}

clip_settings_struct! {
    @fields
    /// Settings of the clipped PPO loss.
    #[derive(Copy)]
    pub struct ClipSettings {}
}

/// The defaults every clipped loss starts from: ε_low = ε_high = 0.2 (symmetric, verl and
/// ROLL), no dual clip, `SeqMeanTokenMean` (ROLL's default), L the longest response.
impl Default for ClipSettings {
    fn default() -> Self {
        ClipSettings {
            low: 0.2,
            high: 0.2,
            dual_clip: None,
            agg: crate::aggregation::LossAgg::SeqMeanTokenMean,
            norm_length: None,
        }
    }
}

/// Statistics of one PPO loss pass, over response tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PpoStats {
    /// Fraction of tokens whose clipped term is active (`pg_clipfrac`).
    pub clipfrac: f32,
    /// Fraction of tokens capped by the dual clip (`pg_clipfrac_lower`; 0 when off).
    pub clipfrac_lower: f32,
    /// Mean of old_logp − logp (`ppo_kl`).
    pub approx_kl: f32,
    /// Σ mask.
    pub response_tokens: f32,
}

impl PpoStats {
    /// The `[4]` layout the backends use.
    pub fn to_vec(self) -> Vec<f32> {
        vec![
            self.clipfrac,
            self.clipfrac_lower,
            self.approx_kl,
            self.response_tokens,
        ]
    }

    /// Reads a `[4]` stats tensor (waits for the device).
    pub fn from_tensor<B: burn::tensor::backend::Backend>(stats: Tensor<B, 1>) -> Self {
        let v = stats
            .into_data()
            .convert::<f32>()
            .into_vec::<f32>()
            .unwrap_or_default();
        let at = |i: usize| v.get(i).copied().unwrap_or(0.0);
        PpoStats {
            clipfrac: at(0),
            clipfrac_lower: at(1),
            approx_kl: at(2),
            response_tokens: at(3),
        }
    }
}

/// The per-token inputs of the fused PPO loss, as primitives, each `[tokens]`.
#[derive(Debug, Clone)]
pub struct PpoTokens<B: Backend> {
    /// Log-probs under the policy being trained (the differentiable input).
    pub logp: FloatTensor<B>,
    pub old_logp: FloatTensor<B>,
    pub advantages: FloatTensor<B>,
    /// Response mask, 0/1.
    pub mask: FloatTensor<B>,
    /// Constant per-token loss weight (decoupled PPO's behaviour weight); `None` = 1.
    /// It scales each token's loss and gradient, not the counts or the statistics.
    pub weight: Option<FloatTensor<B>>,
}

impl<B: Backend> PpoTokens<B> {
    /// The same tensors through `f` (e.g. unwrapping autodiff primitives).
    pub fn map<C: Backend>(self, f: impl Fn(FloatTensor<B>) -> FloatTensor<C>) -> PpoTokens<C> {
        PpoTokens {
            logp: f(self.logp),
            old_logp: f(self.old_logp),
            advantages: f(self.advantages),
            mask: f(self.mask),
            weight: self.weight.map(&f),
        }
    }
}

/// Forward results of the fused PPO loss, as primitives.
#[derive(Debug, Clone)]
pub struct PpoForward<B: Backend> {
    /// Aggregated loss, `[1]`.
    pub loss: FloatTensor<B>,
    /// `[4]`: clipfrac, clipfrac_lower, approx_kl, response tokens (see [`crate::PpoStats`]).
    pub stats: FloatTensor<B>,
    /// What the backward needs to weigh each token's gradient.
    pub saved: PpoSaved<B>,
}

/// What the fused PPO forward keeps for its backward, with loss = Σ_s w_s Σ_{t∈s} m_t u_t
/// l_t (u the token weight, w_s the aggregation's sequence weight).
#[derive(Debug, Clone)]
pub enum PpoSaved<B: Backend> {
    /// The per-sequence weights w_s, `[sequences]`: the backward computes each token's
    /// m·u·∂l/∂logp again from the four token columns (the CPU backends).
    SequenceWeights(FloatTensor<B>),
    /// Each token's m·u·∂l/∂logp as the forward computed it, divided by its sequence's n_s
    /// = Σm where the aggregation weighs sequences by 1/n_s (seq-mean-token-mean),
    /// `[tokens]`, and the weight w that is then left, the same for every sequence, `[1]`:
    /// the backward is one scaling, dlogp = g·w·token_grad, that reads one column and writes
    /// one, without the offsets (the CubeCL kernels).
    TokenGradients {
        /// m·u·∂l/∂logp, over n_s in seq-mean-token-mean, `[tokens]`.
        token_grad: FloatTensor<B>,
        /// w, `[1]`.
        weight: FloatTensor<B>,
    },
}

impl<B: Backend> PpoForward<B> {
    /// The same tensors through `f` (e.g. wrapping them as untracked autodiff primitives).
    pub fn map<C: Backend>(self, f: impl Fn(FloatTensor<B>) -> FloatTensor<C>) -> PpoForward<C> {
        PpoForward {
            loss: f(self.loss),
            stats: f(self.stats),
            saved: match self.saved {
                PpoSaved::SequenceWeights(w) => PpoSaved::SequenceWeights(f(w)),
                PpoSaved::TokenGradients { token_grad, weight } => PpoSaved::TokenGradients {
                    token_grad: f(token_grad),
                    weight: f(weight),
                },
            },
        }
    }
}
