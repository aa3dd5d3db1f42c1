//! A request while it is decoded: its own generator, the reply so far and what ends it
//! (a stop token, its guide's completed choice, the length cap, or logits that are not
//! all finite), and the tokens its guide forces (jump-forward decoding, [`super::batcher`]).

use rand::rngs::StdRng;
use rand::Rng;
use roll_flow_kernels::row_sampling::RowDraw;

use super::request::{FinishReason, GenerationOutput, GenerationRequest, RequestId};
use super::sampler::Sampled;

/// A request that is being decoded.
pub(super) struct Running {
    pub(super) id: RequestId,
    pub(super) request: GenerationRequest,
    /// The conversation this request continues, if any.
    pub(super) session: Option<u64>,
    pub(super) rng: StdRng,
    pub(super) tokens: Vec<u32>,
    pub(super) logprobs: Vec<f32>,
    pub(super) finish: Option<FinishReason>,
}

impl Running {
    /// Rotary position of the last reply token (the next decode input): right after the
    /// prompt and the reply before it.
    pub(super) fn last_position(&self) -> usize {
        self.request.prompt.len() + self.tokens.len() - 1
    }
}

/// Takes `sampled` into `row` (`None`: its logits were not all finite) and decides whether
/// it is finished.
pub(super) fn advance(mut row: Running, sampled: Option<Sampled>) -> Running {
    let Some(Sampled { token, logprob }) = sampled else {
        row.finish = Some(FinishReason::NonFinite);
        return row;
    };
    row.tokens.push(token);
    row.logprobs.push(logprob);
    let stop = match &row.request.guide {
        Some(guide) => guide.is_complete(&row.tokens),
        None => row.request.stop_tokens.contains(&token),
    };
    if stop {
        row.finish = Some(FinishReason::Stop);
    } else if row.tokens.len() >= row.request.max_new_tokens {
        row.finish = Some(FinishReason::Length);
    } else {
        jump_forward(&mut row);
    }
    row
}

/// `row`'s temperature and, when it samples, the next uniform draw of its own generator
/// (the one the host sampler would take).
pub(super) fn row_draw(row: &mut Running) -> RowDraw {
    let temperature = row.request.sampling.temperature;
    let draw = match temperature > 0.0 {
        true => row.rng.random::<f64>() as f32,
        false => 0.0,
    };
    RowDraw { temperature, draw }
}

/// Appends the tokens `row`'s guide forces next (log-prob 0) when they open the reply or
/// run to the end of the choice; sets `finish` when the reply is then complete or full.
/// A forced run that stops short of a choice's end is left to the decode steps, whose
/// input is one token per row.
pub(super) fn jump_forward(row: &mut Running) {
    let Some(guide) = &row.request.guide else {
        return;
    };
    let max = row.request.max_new_tokens;
    let (opening, before) = (row.tokens.is_empty(), row.tokens.len());
    while row.tokens.len() < max {
        match guide.allowed(&row.tokens) {
            Some(&[only]) => row.tokens.push(only),
            _ => break,
        }
    }
    let complete = guide.is_complete(&row.tokens);
    let full = row.tokens.len() >= max;
    if !(opening || complete || full) {
        row.tokens.truncate(before);
        return;
    }
    row.logprobs.resize(row.tokens.len(), 0.0);
    if complete {
        row.finish = Some(FinishReason::Stop);
    } else if full {
        row.finish = Some(FinishReason::Length);
    }
}

pub(super) fn finished_output(r: Running) -> GenerationOutput {
    output(r.id, r.tokens, r.logprobs, r.finish.expect("finished"))
}

/// `logits` with every token outside `allowed` set to −∞.
pub(super) fn only_allowed(logits: &[f32], allowed: &[u32]) -> Vec<f32> {
    let mut masked = vec![f32::NEG_INFINITY; logits.len()];
    for &t in allowed {
        masked[t as usize] = logits[t as usize];
    }
    masked
}

pub(super) fn output(
    id: RequestId,
    tokens: Vec<u32>,
    logprobs: Vec<f32>,
    finish: FinishReason,
) -> GenerationOutput {
    GenerationOutput {
        id,
        tokens,
        logprobs,
        finish,
    }
}
