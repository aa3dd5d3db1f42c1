//! [`RowGrad`]: what the log-prob + entropy backward needs of one row besides its logits,
//! shared by the rows of [`super::logprob`].

/// What the backward pass of one row needs besides the logits.
#[derive(Clone, Copy)]
pub(super) struct RowGrad {
    pub(super) lse: f32,
    pub(super) entropy: f32,
    pub(super) g_lp: f32,
    pub(super) g_h: f32,
}
