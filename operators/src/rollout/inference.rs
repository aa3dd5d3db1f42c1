//! The inference loop: serves the envs' generation requests with one
//! [`ContinuousBatcher`] over the policy's inference copy.
//!
//! Requests join the running batch between decode steps and leave when done, so a short
//! reply never waits for a long one. To keep runs reproducible the loop admits requests in
//! a fixed order: after each decode step it hands out the finished replies and waits only
//! for *those* envs to step and send their next request (or finish), then submits them
//! sorted by env index. Envs still generating are not waited for, so there is no barrier
//! across envs, and the batch composition (hence every number) depends only on the seeds.
//!
//! A trajectory-wise env's requests form one chat: each env is a session of the batcher,
//! so a turn's prompt is prefilled only after the previous turn's cached prompt and reply.

use std::collections::HashMap;

use crossbeam_channel::Receiver;

use super::episode::EnvMessage;
use crate::runtime::RunBackend;
use roll_flow_model::generate::{ContinuousBatcher, GenerationOutput};
use roll_flow_model::Qwen2CausalLm;

/// Counters of one serving session.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InferenceStats {
    pub requests: usize,
    pub generated_tokens: usize,
    pub prompt_tokens: usize,
    /// Prompt tokens served from the previous turn's cache instead of being prefilled.
    pub reused_prompt_tokens: usize,
}

impl InferenceStats {
    /// Adds another loop's counters.
    pub fn add(&mut self, other: &InferenceStats) {
        self.requests += other.requests;
        self.generated_tokens += other.generated_tokens;
        self.prompt_tokens += other.prompt_tokens;
        self.reused_prompt_tokens += other.reused_prompt_tokens;
    }
}

/// Serves until every one of `envs` envs has said it is done; `reply(env, output)` hands
/// an env its reply.
pub fn serve<B: RunBackend>(
    model: &Qwen2CausalLm<B>,
    calls: Receiver<EnvMessage>,
    envs: usize,
    mut reply: impl FnMut(usize, GenerationOutput) -> Result<(), String>,
) -> Result<InferenceStats, String> {
    let mut batcher = ContinuousBatcher::<B>::new(envs.max(1), &model.device());
    let mut owner = HashMap::new();
    let mut stats = InferenceStats::default();
    let mut live = envs;
    let mut awaiting = envs;
    while live > 0 {
        let mut messages = Vec::with_capacity(awaiting);
        while messages.len() < awaiting {
            messages.push(
                calls
                    .recv()
                    .map_err(|_| "the env pool stopped unexpectedly".to_string())?,
            );
        }
        messages.sort_by_key(|m| m.env);
        for message in messages {
            match message.request {
                Some(request) => {
                    stats.requests += 1;
                    stats.prompt_tokens += request.prompt.len();
                    let id = if message.continues_chat {
                        batcher.submit_in_session(model, request, message.env as u64)
                    } else {
                        batcher.submit(model, request)
                    };
                    let id = id.map_err(|e| e.to_string())?;
                    owner.insert(id, message.env);
                }
                None => live -= 1,
            }
        }
        if batcher.is_idle() {
            awaiting = live;
            continue;
        }
        let mut finished = Vec::new();
        while finished.is_empty() {
            finished = batcher.step(model);
        }
        awaiting = finished.len();
        finished.sort_by_key(|o| o.id);
        for output in finished {
            stats.generated_tokens += output.tokens.len();
            let env = owner
                .remove(&output.id)
                .expect("every request has an owner");
            reply(env, output)?;
        }
    }
    stats.reused_prompt_tokens = batcher.reused_prompt_tokens();
    Ok(stats)
}
