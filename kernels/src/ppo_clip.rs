//! The clipped PPO loss's settings ([`ClipSettings`]) and statistics ([`PpoStats`]), shared
//! by every backend's kernel and the reference formulas.
//!
//! The settings' fields are declared once, in [`crate::clip_settings_struct!`]: it declares
//! [`ClipSettings`] here and the RON settings of every clipped policy loss of
//! `roll-flow-algo` (`PpoClip`, `DecoupledPpo`, `Gspo`, `Cispo`), each with the same five
//! fields, flat in RON (`PpoClip(low: 0.2, high: 0.28, agg: TokenMean)`), plus its own.
//! Their defaults are [`ClipSettings::default`]'s unless a loss says otherwise.

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
