//! Continuous batching (Yu et al. 2022, Orca's iteration-level scheduling): requests join the
//! running batch between decode steps and leave as soon as they finish, so the rollout loop
//! can feed generations from many environments at once without waiting for the slowest.
//!
//! Each [`ContinuousBatcher::step`]: (1) admits waiting requests up to `max_batch` rows by
//! prefilling their prompts together (left-padded, so their caches come out right-aligned)
//! and sampling their first token; (2) runs one decode step for every running row with a
//! single batched forward over the shared [`KvCache`]; (3) returns the requests that
//! finished and drops their rows from the cache. The model is passed to every step, so the
//! caller may swap in new weights between steps.
//!
//! A request with a guide ([`super::guide::AnswerChoices`]) samples each token among the
//! tokens its trie allows after the reply so far: the other logits are set to −∞ before
//! sampling, so the draw, the greedy argmax and the reported log-prob are all those of the
//! distribution restricted to the allowed tokens.
//!
//! Jump-forward decoding (SGLang, Zheng et al. 2024): a token that is the only one the guide
//! allows is not a decision, its guided log-prob is 0, so it needs no forward pass to be
//! chosen. The forced tokens that open a reply (`<answer>`) are prefilled with the prompt,
//! and a forced run that completes the choice (`</answer><|im_end|>` after the action) is
//! appended at once and the request finishes. For the answer guides of the shipped
//! pipelines this turns four forward passes per turn into one. Forced tokens in the middle
//! of a choice are still decoded one per step (their single-token distribution gives the
//! same log-prob 0).
//!
//! Requests that arrive together with one prompt and no cached prefix (a GRPO group's
//! samples) prefill it once, and the copies start from its keys, values and logits.
//!
//! Requests submitted in a session ([`ContinuousBatcher::submit_in_session`], one per env
//! conversation) reuse the keys and values their session's previous request left: a
//! multi-turn prompt prefills only what follows the previous turn (see
//! [`super::prefix_reuse`]).

use std::collections::VecDeque;

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rayon::prelude::*;
use roll_flow_kernels::row_sampling::RowDraw;
use roll_flow_kernels::{with_packed_weights, KernelBackend, PackedWeights};

use super::device_sampling::{on_device, sample_on_device};
use super::prefix_reuse::{plan_prefill, same_inputs, stored_columns, Prefix, PrefixStore};
use super::request::{FinishReason, GenerationOutput, GenerationRequest, RequestId};
use super::running::{
    advance, finished_output, jump_forward, only_allowed, output, row_draw, Running,
};
use super::sampler::sample;
use crate::error::ModelError;
use crate::kv_cache::KvCache;
use crate::qwen2::{AttentionLayout, Qwen2CausalLm};
use roll_flow_kernels::host_transfer::{download_f32, on_rayon_thread, upload};

/// Logits in a step above which its rows are sampled on rayon's threads: a log-softmax in
/// f64 per row (8,192 to 151,936 `exp`s) was 4-5% of a `medium` decode step on the calling
/// thread alone while the pool waited; a Tiny model's 32 × 516 stay on one thread.
const PARALLEL_SAMPLING_MIN: usize = 1 << 17;

/// Schedules generation requests over one batched KV cache.
pub struct ContinuousBatcher<B: Backend> {
    waiting: VecDeque<(RequestId, GenerationRequest, Option<u64>)>,
    running: Vec<Running>,
    /// Admitted requests the guide completed without a forward pass.
    finished_early: Vec<Running>,
    cache: Option<KvCache<B>>,
    /// What each session's last finished request left in the cache.
    prefixes: PrefixStore<B>,
    /// Prompt tokens served from `prefixes` instead of being prefilled.
    reused_tokens: usize,
    /// Columns a stored prefix keeps (`None`: all; see `prefix_reuse::stored_columns`).
    prefix_columns: Option<usize>,
    next_id: u64,
    max_batch: usize,
    device: B::Device,
    /// The weights the decode steps read packed (CPU; see `roll_flow_kernels::PackedWeights`).
    packed: PackedWeights,
}

impl<B: KernelBackend> ContinuousBatcher<B> {
    /// A batcher that runs at most `max_batch` sequences at once.
    pub fn new(max_batch: usize, device: &B::Device) -> Self {
        ContinuousBatcher {
            waiting: VecDeque::new(),
            running: Vec::new(),
            finished_early: Vec::new(),
            cache: None,
            prefixes: PrefixStore::new(2 * max_batch.max(1)),
            reused_tokens: 0,
            prefix_columns: None,
            next_id: 0,
            max_batch: max_batch.max(1),
            device: device.clone(),
            packed: PackedWeights::new(),
        }
    }

    /// Queues a request; it joins the batch at the next step with a free row.
    pub fn submit(
        &mut self,
        model: &Qwen2CausalLm<B>,
        request: GenerationRequest,
    ) -> Result<RequestId, ModelError> {
        self.enqueue(model, request, None)
    }

    /// Queues a request that continues conversation `session`: its prompt is prefilled
    /// after the longest prefix it shares with the session's previous request (prompt and
    /// reply), whose keys and values are reused.
    pub fn submit_in_session(
        &mut self,
        model: &Qwen2CausalLm<B>,
        request: GenerationRequest,
        session: u64,
    ) -> Result<RequestId, ModelError> {
        self.enqueue(model, request, Some(session))
    }

    fn enqueue(
        &mut self,
        model: &Qwen2CausalLm<B>,
        request: GenerationRequest,
        session: Option<u64>,
    ) -> Result<RequestId, ModelError> {
        request.validate(model)?;
        let id = RequestId(self.next_id);
        self.next_id += 1;
        self.waiting.push_back((id, request, session));
        Ok(id)
    }

    /// Prompt tokens taken from a session's cached prefix instead of being prefilled.
    pub fn reused_prompt_tokens(&self) -> usize {
        self.reused_tokens
    }

    /// Removes a request whether waiting or running; returns what it generated so far.
    pub fn cancel(&mut self, id: RequestId) -> Option<GenerationOutput> {
        if let Some(i) = self.waiting.iter().position(|(w, _, _)| *w == id) {
            self.waiting.remove(i);
            return Some(output(id, Vec::new(), Vec::new(), FinishReason::Cancelled));
        }
        let row = self.running.iter().position(|r| r.id == id)?;
        self.running[row].finish = Some(FinishReason::Cancelled);
        self.collect_finished().pop()
    }

    /// Whether nothing is waiting or running.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.running.is_empty()
    }

    /// Number of sequences currently in the running batch.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Admits waiting requests, decodes one token for every running one, and returns the
    /// requests that finished.
    ///
    /// On a CPU backend the step runs on one of rayon's threads (the caller waits), so that
    /// a product split over the threads is a join the stepping thread takes part in, not
    /// a job it hands to the pool and sleeps on while the pool's threads wake: generation
    /// at SmolLM2's shape ran 8% faster (bench/history/model_throughput.md).
    pub fn step(&mut self, model: &Qwen2CausalLm<B>) -> Vec<GenerationOutput> {
        let mut step = || {
            self.admit(model);
            let mut finished = self.collect_finished();
            if !self.running.is_empty() {
                self.decode(model);
                finished.extend(self.collect_finished());
            }
            finished
        };
        match B::DEVICE_MEMORY {
            false => on_rayon_thread(step),
            true => step(),
        }
    }

    /// Steps until every submitted request has finished; outputs in submission order.
    pub fn run_to_completion(&mut self, model: &Qwen2CausalLm<B>) -> Vec<GenerationOutput> {
        let mut outputs = Vec::new();
        while !self.is_idle() {
            outputs.extend(self.step(model));
        }
        outputs.sort_by_key(|o| o.id);
        outputs
    }

    fn admit(&mut self, model: &Qwen2CausalLm<B>) {
        let free = self.max_batch.saturating_sub(self.running.len());
        let joining: Vec<Running> = (0..free.min(self.waiting.len()))
            .filter_map(|_| self.waiting.pop_front())
            .map(|(id, request, session)| {
                let mut row = Running {
                    id,
                    session,
                    rng: StdRng::seed_from_u64(request.seed),
                    request,
                    tokens: Vec::new(),
                    logprobs: Vec::new(),
                    finish: None,
                };
                jump_forward(&mut row);
                row
            })
            .collect();
        // A reply the guide forces entirely (one choice) needs no forward pass at all.
        let (done, joining): (Vec<_>, Vec<_>) =
            joining.into_iter().partition(|r| r.finish.is_some());
        self.finished_early.extend(done);
        if joining.is_empty() {
            return;
        }
        // Each row prefills its prompt and the forced tokens that open its reply, after the
        // part its session's cached prefix already covers.
        let inputs: Vec<Vec<u32>> = joining
            .iter()
            .map(|r| [r.request.prompt.as_slice(), &r.tokens].concat())
            .collect();
        let prefixes: Vec<Option<Prefix<B>>> = joining
            .iter()
            .map(|r| r.session.and_then(|s| self.prefixes.take(s)))
            .collect();
        // Rows with one input and no cached prefix (a group's samples of one prompt) prefill
        // once: vLLM's `n` samples a prompt. The copies take that row's keys, values and
        // logits, and draw their own tokens.
        let (first_of, prefilled) = same_inputs(&inputs, &prefixes);
        let copied: usize = (0..inputs.len())
            .filter(|&i| prefilled[first_of[i]] != i)
            .map(|i| inputs[i].len())
            .sum();
        self.reused_tokens += copied;
        let (inputs, mut prefixes): (Vec<Vec<u32>>, Vec<Option<Prefix<B>>>) =
            (inputs.into_iter().zip(prefixes).enumerate())
                .filter(|(i, _)| prefilled.binary_search(i).is_ok())
                .map(|(_, row)| row)
                .unzip();
        let reach = model.model.window_reach();
        self.prefix_columns = stored_columns(reach);
        let plan = plan_prefill(&inputs, &mut prefixes, reach);
        self.reused_tokens += plan.cached.iter().sum::<usize>();
        let width = plan.queries;
        let tokens: Tensor<B, 2, Int> = upload(
            TensorData::new(plan.ids, [inputs.len(), width]),
            &self.device,
        );
        let taken: Vec<Option<(&_, usize)>> = prefixes
            .iter()
            .zip(&plan.cached)
            .map(|(p, &n)| p.as_ref().map(|p| (&p.kv, n)))
            .collect();
        let layers = model.model.layers.len();
        let mut cache = KvCache::from_prefixes(layers, &taken, plan.key_start, width);
        let layout = AttentionLayout {
            positions: plan.positions,
            key_start: cache.key_start().to_vec(),
            branches: None,
        };
        let mut logits = model.logits(model.hidden_last(tokens, &layout, Some(&mut cache)));
        if prefilled.len() < joining.len() {
            cache.retain(&first_of);
            let index: Vec<i64> = first_of.iter().map(|&i| i as i64).collect();
            let index: Tensor<B, 1, Int> =
                upload(TensorData::new(index, [first_of.len()]), &self.device);
            logits = logits.select(0, index);
        }
        let rows = self.sample_rows(logits, joining.into_iter());
        self.running.extend(rows);
        match &mut self.cache {
            Some(running) => running.merge(cache),
            None => self.cache = Some(cache),
        }
    }

    fn decode(&mut self, model: &Qwen2CausalLm<B>) {
        let cache = self.cache.as_mut().expect("running rows have a cache");
        let last: Vec<i64> = self
            .running
            .iter()
            .map(|r| *r.tokens.last().expect("a running row has sampled a token") as i64)
            .collect();
        let rows = last.len();
        let tokens: Tensor<B, 2, Int> = upload(TensorData::new(last, [rows, 1]), &self.device);
        let layout = AttentionLayout {
            positions: self
                .running
                .iter()
                .map(|r| vec![r.last_position()])
                .collect(),
            key_start: cache.key_start().to_vec(),
            branches: None,
        };
        // Every decode step runs the same projections: their weights are packed once (prefills
        // run other row counts, so their scope would drop the decode steps' entries).
        let logits = with_packed_weights(&mut self.packed, || {
            model.forward(tokens, &layout, Some(cache))
        });
        let running = std::mem::take(&mut self.running);
        self.running = self.sample_rows(logits, running.into_iter());
    }

    /// Samples one token per row from `logits: [rows, 1, vocab]`, among the allowed tokens
    /// for guided rows. Where the logits live on a device of their own and no row needs
    /// top-k, top-p or a guide, the draw runs there and only the tokens come back
    /// ([`super::device_sampling`]); otherwise the logits are read back and sampled here.
    fn sample_rows(
        &self,
        logits: Tensor<B, 3>,
        rows: impl Iterator<Item = Running>,
    ) -> Vec<Running> {
        let vocab = logits.dims()[2];
        let mut rows: Vec<Running> = rows.collect();
        if B::DEVICE_MEMORY && rows.iter().all(|r| on_device(&r.request, vocab)) {
            let draws: Vec<RowDraw> = rows.iter_mut().map(row_draw).collect();
            let drawn = sample_on_device(logits, &draws);
            return rows
                .into_iter()
                .zip(drawn)
                .map(|(r, s)| advance(r, s))
                .collect();
        }
        let values = download_f32(logits);
        let sample_row = |(i, mut row): (usize, Running)| {
            let logits = &values[i * vocab..(i + 1) * vocab];
            // Diverged weights: sampling from NaNs would pick any token, even one a
            // guide forbids.
            if !logits.iter().all(|l| l.is_finite()) {
                return advance(row, None);
            }
            let sampled = match &row.request.guide {
                Some(guide) => {
                    // A running row has not completed a choice and only ever took
                    // allowed tokens, so it is inside the trie.
                    let allowed = guide.allowed(&row.tokens).expect("guided row in trie");
                    let masked = only_allowed(logits, allowed);
                    sample(&masked, &row.request.sampling, &mut row.rng)
                }
                None => sample(logits, &row.request.sampling, &mut row.rng),
            };
            advance(row, Some(sampled))
        };
        // Each row draws with its own generator, so the split changes no token.
        if rows.len() * vocab >= PARALLEL_SAMPLING_MIN {
            rows.into_par_iter().enumerate().map(sample_row).collect()
        } else {
            rows.into_iter().enumerate().map(sample_row).collect()
        }
    }

    fn collect_finished(&mut self) -> Vec<GenerationOutput> {
        let early: Vec<GenerationOutput> = std::mem::take(&mut self.finished_early)
            .into_iter()
            .map(finished_output)
            .collect();
        if self.running.iter().all(|r| r.finish.is_none()) {
            return early;
        }
        let (done, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.running)
            .into_iter()
            .enumerate()
            .partition(|(_, r)| r.finish.is_some());
        let kept_rows: Vec<usize> = keep.iter().map(|(i, _)| *i).collect();
        if let Some(cache) = &mut self.cache {
            for (i, row) in &done {
                let session = row
                    .session
                    .filter(|_| row.finish != Some(FinishReason::Cancelled));
                if let Some(session) = session {
                    let prefix = cached_prefix(cache, *i, row, self.prefix_columns);
                    self.prefixes.put(session, prefix);
                }
            }
            cache.retain(&kept_rows);
        }
        self.running = keep.into_iter().map(|(_, r)| r).collect();
        early
            .into_iter()
            .chain(done.into_iter().map(|(_, r)| finished_output(r)))
            .collect()
    }
}

/// Row `i`'s keys and values and the tokens they cover: its prompt and the reply tokens
/// that went through the model (a reply's last tokens, sampled or forced, never do).
/// With `keep`, only the last `keep` columns are stored.
fn cached_prefix<B: KernelBackend>(
    cache: &KvCache<B>,
    i: usize,
    row: &Running,
    keep: Option<usize>,
) -> Prefix<B> {
    let kv = cache.row(i, keep);
    let mut tokens = [row.request.prompt.as_slice(), &row.tokens].concat();
    tokens.truncate(kv.len());
    Prefix { tokens, kv }
}
