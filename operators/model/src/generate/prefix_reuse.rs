//! Prefix reuse across the turns of a conversation: what SGLang's RadixAttention and vLLM's
//! automatic prefix caching give a multi-turn rollout, reduced to the case it needs.
//!
//! In a trajectory-wise rollout every turn's prompt is the whole chat so far: the previous
//! turn's prompt, its reply, and the env's next observation. Prefilling it from scratch
//! costs O(turns²) tokens per episode. When a request of a *session* (one env's
//! conversation) finishes, the batcher keeps that row's keys and values ([`RowKv`]) with the
//! tokens they cover; the session's next request prefills only what follows the longest
//! common prefix of its input and those tokens.
//!
//! Rows of one prefill share a query block as wide as the longest *new* part. A row whose
//! new part is shorter re-feeds the last few tokens of its cached prefix, so every row's
//! queries end at the block's last column and its first token is preceded by cached keys
//! only (see [`PrefillPlan`]). With no reusable prefix this is exactly the left-padded
//! prefill. The cache is valid for one set of weights: the rollout's inference loop serves
//! one policy version, and the store lives and dies with its batcher.
//!
//! Under sliding-window attention in every layer, a query sees at most
//! `reach = max(window) - 1` positions back, so a stored prefix keeps only its last
//! `reach + REFEED_MARGIN` columns ([`stored_columns`]): the cache copies and the prefill's
//! keys stop growing with the chat. The margin covers the tokens a row re-feeds when its
//! new part is shorter than the block; a row that would need a dropped column is prefilled
//! without its prefix instead ([`plan_prefill`]), which costs time, never correctness.
//!
//! Across requests, only the plain case: requests admitted together with one input and no
//! cached prefix (a GRPO group's samples of one prompt, vLLM's `n`) prefill it once
//! ([`same_inputs`]), and the copies start from its keys, values and logits.

use std::collections::HashMap;

use crate::kv_cache::RowKv;
use burn::tensor::backend::Backend;

/// A finished request's cached keys/values and the tokens they cover (prompt, then reply).
#[derive(Clone, Debug)]
pub struct Prefix<B: Backend> {
    pub tokens: Vec<u32>,
    pub kv: RowKv<B>,
}

/// The newest [`Prefix`] of each session, at most `capacity` of them (the oldest go first).
#[derive(Debug)]
pub struct PrefixStore<B: Backend> {
    entries: HashMap<u64, (u64, Prefix<B>)>,
    capacity: usize,
    clock: u64,
}

impl<B: Backend> PrefixStore<B> {
    pub fn new(capacity: usize) -> Self {
        PrefixStore {
            entries: HashMap::new(),
            capacity: capacity.max(1),
            clock: 0,
        }
    }

    /// Keeps `prefix` as `session`'s, replacing an older one; evicts the least recently
    /// stored session when full.
    pub fn put(&mut self, session: u64, prefix: Prefix<B>) {
        self.clock += 1;
        self.entries.insert(session, (self.clock, prefix));
        if self.entries.len() > self.capacity {
            let oldest = self.entries.iter().min_by_key(|(_, (stamp, _))| *stamp);
            let oldest = *oldest.expect("not empty").0;
            self.entries.remove(&oldest);
        }
    }

    /// Removes and returns `session`'s prefix.
    pub fn take(&mut self, session: u64) -> Option<Prefix<B>> {
        self.entries.remove(&session).map(|(_, p)| p)
    }
}

/// Tokens before the cached ones a row may re-feed and still use a trimmed prefix.
pub const REFEED_MARGIN: usize = 64;

/// How many columns a stored prefix keeps for a model whose queries see `reach` positions
/// back (`None`: all of them).
pub fn stored_columns(reach: Option<usize>) -> Option<usize> {
    reach.map(|r| r + REFEED_MARGIN)
}

/// The prefill plan for `inputs` and each row's session prefix. A prefix serves its
/// common prefix with the input, unless the plan would make the row start at a position
/// whose earlier keys, still within `reach`, the prefix no longer stores; such prefixes are
/// dropped (set to `None`) and the plan is made again without them.
pub fn plan_prefill<B: Backend>(
    inputs: &[Vec<u32>],
    prefixes: &mut [Option<Prefix<B>>],
    reach: Option<usize>,
) -> PrefillPlan {
    loop {
        let covered: Vec<usize> = inputs
            .iter()
            .zip(prefixes.iter())
            .map(|(input, p)| p.as_ref().map_or(0, |p| reusable(&p.tokens, input)))
            .collect();
        let plan = PrefillPlan::new(inputs, &covered);
        let mut dropped = false;
        for (prefix, &take) in prefixes.iter_mut().zip(&plan.cached) {
            let first = prefix.as_ref().map_or(0, |p| p.kv.first);
            let needed = take.saturating_sub(reach.unwrap_or(take));
            if take > 0 && first > needed {
                *prefix = None;
                dropped = true;
            }
        }
        if !dropped {
            return plan;
        }
    }
}

/// How many leading tokens of `input` a prefix covering `cached` can serve: their common
/// prefix, leaving at least the last input token to run (its logits are needed).
pub fn reusable(cached: &[u32], input: &[u32]) -> usize {
    let common = cached.iter().zip(input).take_while(|(a, b)| a == b).count();
    common.min(input.len().saturating_sub(1))
}

/// The shapes of one batched prefill where row `r` has `reusable[r]` tokens cached.
#[derive(Clone, Debug, PartialEq)]
pub struct PrefillPlan {
    /// Width of the query block: the longest part of any row that is not cached.
    pub queries: usize,
    /// Cached columns each row starts from (`≤ reusable[r]`).
    pub cached: Vec<usize>,
    /// First key column of each row on the shared axis (cached columns, then queries).
    pub key_start: Vec<usize>,
    /// Rotary position of every query column.
    pub positions: Vec<Vec<usize>>,
    /// Query token ids, `[rows, queries]` row-major (0 in left padding).
    pub ids: Vec<i64>,
}

impl PrefillPlan {
    /// Row `r` (input length `L`) feeds its last `min(L, queries)` tokens, left-padded when
    /// shorter than the block, and takes the `L − queries` tokens before them from its
    /// cached prefix, right-aligned on a cached axis as wide as the longest.
    pub fn new(inputs: &[Vec<u32>], reusable: &[usize]) -> Self {
        let queries = inputs
            .iter()
            .zip(reusable)
            .map(|(input, &cached)| input.len() - cached)
            .max()
            .unwrap_or(0);
        let cached: Vec<usize> = inputs
            .iter()
            .map(|i| i.len().saturating_sub(queries))
            .collect();
        let width = cached.iter().copied().max().unwrap_or(0);
        let mut plan = PrefillPlan {
            queries,
            cached: cached.clone(),
            key_start: Vec::with_capacity(inputs.len()),
            positions: Vec::with_capacity(inputs.len()),
            ids: Vec::with_capacity(inputs.len() * queries),
        };
        for (input, &cached) in inputs.iter().zip(&cached) {
            let fed = input.len() - cached;
            let pad = queries - fed;
            plan.key_start.push(width - cached + pad);
            plan.positions.push(
                (0..queries)
                    .map(|c| (cached + c).saturating_sub(pad))
                    .collect(),
            );
            plan.ids.extend(std::iter::repeat_n(0, pad));
            plan.ids.extend(input[cached..].iter().map(|&t| t as i64));
        }
        plan
    }
}

/// The rows to prefill, and for every row the index among them of the row it copies: the
/// first row with the same input, when neither has a cached prefix; itself otherwise.
/// Returns `(first_of, prefilled)`: row `i` reads prefilled row `first_of[i]`, which is
/// row `prefilled[first_of[i]]` of the input.
pub fn same_inputs<P>(inputs: &[Vec<u32>], prefixes: &[Option<P>]) -> (Vec<usize>, Vec<usize>) {
    let mut seen: HashMap<&[u32], usize> = HashMap::new();
    let mut prefilled = Vec::new();
    let first_of = (inputs.iter().zip(prefixes).enumerate())
        .map(|(i, (input, prefix))| {
            let shared = prefix
                .is_none()
                .then(|| seen.get(input.as_slice()).copied());
            match shared.flatten() {
                Some(first) => first,
                None => {
                    if prefix.is_none() {
                        seen.insert(input, prefilled.len());
                    }
                    prefilled.push(i);
                    prefilled.len() - 1
                }
            }
        })
        .collect();
    (first_of, prefilled)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows 0, 2 and 3 share an input, but row 3 has a cached prefix of its own: rows 0
    /// and 2 prefill once, rows 1 and 3 on their own.
    #[test]
    fn rows_with_one_input_and_no_prefix_prefill_once() {
        let inputs = vec![
            vec![5, 6, 7],
            vec![8],
            vec![5, 6, 7],
            vec![5, 6, 7],
            vec![8, 9],
        ];
        let prefixes = [None, None, None, Some(()), None];
        let (first_of, prefilled) = same_inputs(&inputs, &prefixes);
        assert_eq!(prefilled, [0, 1, 3, 4]);
        assert_eq!(first_of, [0, 1, 0, 2, 3]);
    }

    #[test]
    fn without_cached_tokens_the_plan_is_the_left_padded_prefill() {
        let inputs = vec![vec![5, 6, 7], vec![8]];
        let plan = PrefillPlan::new(&inputs, &[0, 0]);
        assert_eq!(plan.queries, 3);
        assert_eq!(plan.cached, vec![0, 0]);
        // Left padding: the 1-token row starts at column 2, its pad columns at position 0.
        assert_eq!(plan.key_start, vec![0, 2]);
        assert_eq!(plan.positions, vec![vec![0, 1, 2], vec![0, 0, 0]]);
        assert_eq!(plan.ids, vec![5, 6, 7, 0, 0, 8]);
    }

    /// By hand: row 0 has 6 tokens, 4 cached; row 1 has 3 tokens, none cached; row 2 has
    /// 5 tokens, 4 cached. The block is 3 wide (row 1's new part). Row 0 takes 3 cached
    /// columns and feeds tokens 3..6 (re-feeding token 3); row 2 takes 2 and feeds 2..5.
    #[test]
    fn cached_rows_feed_their_last_tokens_and_share_the_block() {
        let inputs = vec![vec![1, 2, 3, 4, 5, 6], vec![7, 8, 9], vec![1, 2, 3, 4, 9]];
        let plan = PrefillPlan::new(&inputs, &[4, 0, 4]);
        assert_eq!(plan.queries, 3);
        assert_eq!(plan.cached, vec![3, 0, 2]);
        // Cached axis width 3: row 0 from column 0, row 1 only in the block (column 3),
        // row 2 from column 1.
        assert_eq!(plan.key_start, vec![0, 3, 1]);
        assert_eq!(
            plan.positions,
            vec![vec![3, 4, 5], vec![0, 1, 2], vec![2, 3, 4]]
        );
        assert_eq!(plan.ids, vec![4, 5, 6, 7, 8, 9, 3, 4, 9]);
    }

    #[test]
    fn short_rows_are_left_padded_after_the_cached_axis() {
        let plan = PrefillPlan::new(&[vec![1, 2, 3, 4, 5], vec![6]], &[1, 0]);
        assert_eq!((plan.queries, plan.cached.clone()), (4, vec![1, 0]));
        assert_eq!(plan.key_start, vec![0, 1 + 3]);
        assert_eq!(plan.positions[1], vec![0, 0, 0, 0]);
        assert_eq!(plan.ids[4..], [0, 0, 0, 6]);
    }

    #[test]
    fn reusable_is_the_common_prefix_minus_the_last_input_token() {
        assert_eq!(reusable(&[1, 2, 3], &[1, 2, 3, 4]), 3);
        assert_eq!(reusable(&[1, 2, 3], &[1, 2, 3]), 2);
        assert_eq!(reusable(&[1, 9, 3], &[1, 2, 3, 4]), 1);
        assert_eq!(reusable(&[], &[1]), 0);
    }
}
