//! SentencePiece BPE vocabularies (`tokenizer.ggml.model = "llama"`: Llama 2, Mistral,
//! TinyLlama and their fine-tunes) as a Hugging Face BPE tokenizer with byte fallback, as
//! transformers' GGUF loader builds one (`integrations/gguf`, its `LlamaTokenizer`).
//!
//! - The text is not split: every space becomes `▁` and one `▁` opens the text (the
//!   `Metaspace` pre-tokenizer, prepend scheme `first`: not after a special token), unless
//!   the file sets `tokenizer.ggml.add_space_prefix` to false, as llama.cpp reads it (there
//!   transformers prepends anyway).
//! - The pieces are the file's tokens as written (`▁` for a space, `<0x0A>` for a byte).
//!   A character no piece covers falls back to its UTF-8 bytes' `<0xNN>` tokens.
//! - Such files carry scores, not merges; the merges are recovered from them as
//!   transformers' `generate_merges` does: every way of cutting a token in two known pieces
//!   is a merge with that token's score, and merges apply best score first (ties: the
//!   longer left piece, then the longer right one, then the order found).
//! - Decoding turns `▁` back into spaces, fuses the byte tokens into their characters and
//!   drops the space the prefix added.
//!
//! One difference from SentencePiece itself (and llama.cpp) is transformers', kept here for
//! parity with it: a text that starts with a space opens with one `▁`, not two (" Hello" is
//! `▁Hello`, not `▁`, `▁Hello`). On llama.cpp's own test texts for the Llama 2 vocabulary
//! (`models/ggml-vocab-llama-spm.gguf`, 47 texts, 32,000 tokens) this gives transformers'
//! ids and decodings for all 47, and llama.cpp's expected ids for the 32 that do not start
//! with a space (a dev-time check, 2026-12-05).

use std::collections::HashMap;

use serde_json::{json, Value};

use super::metadata::Metadata;

/// The `▁` (U+2581) SentencePiece writes for a space.
const SPACE: &str = "\u{2581}";

/// The pre-tokenizer, decoder and BPE model of a SentencePiece vocabulary; `vocab` maps
/// each token to its id (the last, for a token listed twice); `listed`, the file's own
/// merges if it has them (as transformers, they are then used as they are).
pub fn parts(
    meta: &Metadata,
    tokens: &[&str],
    vocab: serde_json::Map<String, Value>,
    listed: Option<Vec<Value>>,
) -> Result<[Value; 3], String> {
    let merges = match listed {
        Some(merges) => merges,
        None => {
            let scores = meta.floats("tokenizer.ggml.scores")?;
            if scores.len() != tokens.len() {
                return Err(format!(
                    "metadata tokenizer.ggml.scores has {} entries for {} tokens",
                    scores.len(),
                    tokens.len()
                ));
            }
            merges_from_scores(tokens, &scores)
                .into_iter()
                .map(|(a, b)| json!([a, b]))
                .collect()
        }
    };
    let prefix = meta
        .opt_bool("tokenizer.ggml.add_space_prefix")?
        .unwrap_or(true);
    let pre_tokenizer = json!({
        "type": "Metaspace", "replacement": SPACE, "split": false,
        "prepend_scheme": if prefix { "first" } else { "never" },
    });
    let mut decoders = vec![
        json!({"type": "Replace", "pattern": {"String": SPACE}, "content": " "}),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    if prefix {
        decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    }
    let model = json!({
        "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
        "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
        "ignore_merges": false, "vocab": vocab, "merges": merges,
    });
    Ok([
        pre_tokenizer,
        json!({"type": "Sequence", "decoders": decoders}),
        model,
    ])
}

/// The merges a scored vocabulary implies, best first (transformers' `generate_merges`
/// with scores): for each distinct token in file order (scored by its last listing), each
/// cut into a left and a right piece that are both tokens, those cuts ordered by the
/// pieces' ids; then all of them ordered by score, left length, right length (in
/// characters), highest first, ties kept in that order.
fn merges_from_scores<'a>(tokens: &[&'a str], scores: &[f64]) -> Vec<(&'a str, &'a str)> {
    let mut id: HashMap<&str, usize> = HashMap::with_capacity(tokens.len());
    let mut score: HashMap<&str, f64> = HashMap::with_capacity(tokens.len());
    let mut distinct: Vec<&str> = Vec::with_capacity(tokens.len());
    for (i, (&token, &s)) in tokens.iter().zip(scores).enumerate() {
        if id.insert(token, i).is_none() {
            distinct.push(token);
        }
        // −0 and 0 compare equal in the sort, as Python's floats do.
        score.insert(token, s + 0.0);
    }
    let mut merges: Vec<(&str, &str, f64)> = Vec::new();
    for token in distinct {
        let mut local: Vec<(&str, &str, f64)> = token
            .char_indices()
            .skip(1)
            .map(|(at, _)| token.split_at(at))
            .filter(|(l, r)| id.contains_key(l) && id.contains_key(r))
            .map(|(l, r)| (l, r, score[token]))
            .collect();
        local.sort_by_key(|&(l, r, _)| (id[l], id[r]));
        merges.extend(local);
    }
    let chars = |s: &str| s.chars().count();
    merges.sort_by(|a, b| {
        (b.2.total_cmp(&a.2))
            .then(chars(b.0).cmp(&chars(a.0)))
            .then(chars(b.1).cmp(&chars(a.1)))
    });
    merges.into_iter().map(|(l, r, _)| (l, r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked by hand from the rule: "ab" (score −1) cuts as a·b; "abc" (−2) as a·bc (ids
    /// 0, 4) and ab·c (3, 2), in id order; "bc" (−1) as b·c. Sorted by score, then left
    /// length: ab·c and a·bc tie on score −2, ab·c has the longer left piece.
    #[test]
    fn merges_follow_score_then_piece_lengths() {
        let tokens = ["a", "b", "c", "ab", "bc", "abc"];
        let scores = [0.0, 0.0, 0.0, -1.0, -1.0, -2.0];
        assert_eq!(
            merges_from_scores(&tokens, &scores),
            [("a", "b"), ("b", "c"), ("ab", "c"), ("a", "bc")]
        );
    }

    /// A token listed twice is cut once, with the score of its last listing; a cut into
    /// characters (not bytes) keeps `▁` whole.
    #[test]
    fn repeated_tokens_and_multibyte_characters() {
        let tokens = ["▁", "x", "▁x", "▁x"];
        let scores = [0.0, 0.0, -5.0, -1.0];
        assert_eq!(merges_from_scores(&tokens, &scores), [("▁", "x")]);
        let scores = [0.0, 0.0, f64::NAN, -0.0];
        assert_eq!(merges_from_scores(&tokens, &scores), [("▁", "x")]);
    }
}
