//! Scoring in chunks: chunks take samples shortest first within their token budget, and
//! scores computed chunk by chunk land on the same tokens, with the same values, as
//! scoring the whole batch in one pass (tolerance 1e-5: a row's padding differs between
//! the two, which changes only the order of f32 sums).

use std::collections::BTreeMap;

use roll_flow_engine::Batch;

use super::{
    sample_chunks, score_chunks, score_responses, token_column, token_positions, ScoreOptions,
};
use roll_flow_algo::test_batches::with_masks;

/// Five samples of lengths 6, 2, 5, 3 and 6, with responses of different lengths.
fn batch() -> Batch {
    with_masks(&[
        &[0, 0, 0, 1, 1, 1][..],
        &[0, 1],
        &[0, 0, 1, 1, 0],
        &[0, 0, 1],
        &[0, 1, 1, 0, 1, 1],
    ])
}

#[test]
fn chunks_take_samples_shortest_first_within_the_budget() {
    let b = batch();
    assert_eq!(b.indices_by_length(), vec![1, 3, 2, 0, 4]);
    // Budget 8: [2 + 3], then 5 (+ 6 would pass 8), then 6, then 6.
    assert_eq!(
        sample_chunks(&b, 8),
        vec![vec![1, 3], vec![2], vec![0], vec![4]]
    );
    // A sample longer than the budget gets a chunk of its own.
    assert_eq!(
        sample_chunks(&b, 4),
        vec![vec![1], vec![3], vec![2], vec![0], vec![4]]
    );
    assert_eq!(sample_chunks(&b, 100), vec![vec![1, 3, 2, 0, 4]]);
}

#[test]
fn token_positions_are_the_chunk_samples_ranges_in_chunk_order() {
    let b = batch();
    // Sample 1 is tokens 6..8, sample 3 tokens 13..16, sample 0 tokens 0..6.
    assert_eq!(token_positions(&b, &[1, 3]), vec![6, 7, 13, 14, 15]);
    assert_eq!(token_positions(&b, &[0]), vec![0, 1, 2, 3, 4, 5]);
}

#[test]
fn chunked_scores_equal_the_whole_batch_scores_on_every_token() {
    let model = crate::runtime::concurrent::tests::model();
    let (b, guides) = (batch(), BTreeMap::new());
    let n = b.num_tokens();
    let whole = score_responses(&model, &b, 0.7, &guides, ScoreOptions::default()).unwrap();
    let whole: Vec<f32> = token_column(whole.logprobs, &whole.token_index, n)
        .into_data()
        .into_vec()
        .unwrap();
    for concurrent in [true, false] {
        let chunks = score_chunks(&b, 8, concurrent, |part| {
            let scored = score_responses(&model, part, 0.7, &guides, ScoreOptions::default())?;
            Ok((
                scored.token_index,
                scored.logprobs.into_data().into_vec::<f32>().unwrap(),
            ))
        })
        .unwrap();
        assert_eq!(chunks.len(), 4);
        let mut chunked = vec![0.0f32; n];
        for (chunk, (token_index, values)) in chunks {
            let positions = token_positions(&b, &chunk);
            for (t, v) in token_index.into_iter().zip(values) {
                chunked[positions[t]] = v;
            }
        }
        let scored = whole.iter().filter(|v| **v != 0.0).count();
        assert_eq!(scored, 11, "every response token has a log-prob");
        for (t, (c, w)) in chunked.iter().zip(&whole).enumerate() {
            assert!(
                (c - w).abs() <= 1e-5,
                "concurrent {concurrent}, token {t}: chunked {c} vs whole {w}"
            );
        }
    }
}

#[test]
fn a_token_id_outside_the_critic_vocabulary_is_an_error_not_a_panic() {
    use roll_flow_model::config::{Qwen2Config, TinyArch};
    use roll_flow_model::Qwen2ValueModel;
    let critic = |vocab| {
        let arch = TinyArch {
            layers: 1,
            dim: 16,
            heads: 2,
            ..Default::default()
        };
        let config = Qwen2Config::tiny(&arch, vocab);
        Qwen2ValueModel::<roll_flow_model::CpuBackend>::random(&config, 0, &Default::default())
    };
    // The batch's 22 tokens are ids 1..=22: id 22 needs a vocabulary of 23.
    let b = batch();
    let err = super::token_values(&critic(22), &b).unwrap_err();
    assert_eq!(
        err,
        "token id 22 is outside the critic's vocabulary (size 22); the critic needs the \
         policy's tokenizer"
    );
    let values = super::token_values(&critic(23), &b).unwrap();
    assert_eq!(values.dims(), [b.num_tokens()]);
}
