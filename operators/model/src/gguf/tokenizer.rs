//! The tokenizer a GGUF file describes in its metadata, rebuilt as a Hugging Face
//! `tokenizer.json` and loaded by the `tokenizers` crate like any model directory's.
//!
//! Supported: `tokenizer.ggml.model = "gpt2"`, byte-level BPE (GPT-2, Llama 3, Qwen2,
//! SmolLM, StarCoder...): `tokenizer.ggml.tokens` (already in the byte alphabet, `Ġ` for a
//! space), `tokenizer.ggml.merges` (`"left right"`), and the text split before BPE as
//! llama.cpp's `llm_tokenizer_bpe` splits it for `tokenizer.ggml.pre` (`llama-vocab.cpp`):
//! each of the pre-type's regexes in turn cuts every piece into matches and the text between
//! them (the `tokenizers` crate's `Split` with `Isolated` behaviour), then bytes map to the
//! byte alphabet (`ByteLevel` without its own regex). Tokens typed control (3) become
//! special added tokens and user-defined ones (4) plain added tokens, as transformers'
//! `add_gguf_special_tokens` does; a control token with a character outside the byte
//! alphabet is a llama.cpp mislabel and is left out, as there. The tokens at the bos, eos,
//! unknown and padding ids are special added tokens too (transformers' special tokens).
//! The chat template is
//! `tokenizer.chat_template`; the eos and bos strings come from their ids.
//!
//! On llama.cpp's test texts for its vocabulary files (`models/ggml-vocab-*.gguf.inp`, 47
//! texts each, the expected ids from each model's own Hugging Face tokenizer), the
//! `gpt-2`, `starcoder`, `refact` and `deepseek-coder` vocabularies give the expected ids
//! for all 47 (a dev-time check, 2026-12-05). transformers' own GGUF loader ignores
//! `tokenizer.ggml.pre` (plain byte-level split), so on SmolLM2's file (`smollm`, numerals
//! isolated) it differs from this reader and llama.cpp where a space precedes a numeral
//! that is not a digit: " ½" is its `ĠÂ`, `½` and our `Ġ`, `½` (test
//! `a_byte_level_pre_tokenizer_isolates_numerals_as_its_pre_type_says`).
//!
//! SentencePiece BPE vocabularies (`tokenizer.ggml.model = "llama"`) are rebuilt by
//! [`super::sentencepiece`]; the added tokens and the chat template are read the same way.

use serde_json::{json, Value};

use super::metadata::Metadata;
use crate::tokenizer::TextTokenizer;

/// GPT-2's split (`'s|'t|...| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// Llama 3's split, with llama.cpp's spelling of the case-insensitive contractions.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's split: Llama 3's with single digits.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A `tokenizer.ggml.pre` family: its names, regexes (applied in turn) and whether whole
/// words found in the vocabulary skip the merges (llama.cpp's `ignore_merges`).
struct PreTokenizer {
    names: &'static [&'static str],
    regexes: &'static [&'static str],
    ignore_merges: bool,
}

/// llama.cpp's pre-tokenizer types this reader knows (`llama-vocab.cpp`).
const PRE_TOKENIZERS: [PreTokenizer; 6] = [
    PreTokenizer {
        names: &[
            "llama3",
            "llama-v3",
            "llama-bpe",
            "falcon3",
            "pixtral",
            "dbrx",
            "smaug-bpe",
        ],
        regexes: &[LLAMA3],
        ignore_merges: true,
    },
    PreTokenizer {
        names: &[
            "qwen2",
            "deepseek-r1-qwen",
            "stablelm2",
            "megrez",
            "hunyuan",
        ],
        regexes: &[QWEN2],
        ignore_merges: false,
    },
    PreTokenizer {
        names: &[
            "smollm",
            "starcoder",
            "refact",
            "command-r",
            "codeshell",
            "exaone",
            "minerva-7b",
        ],
        regexes: &[r"\p{N}", GPT2],
        ignore_merges: false,
    },
    PreTokenizer {
        names: &["gpt-2", "gpt2", "mpt", "olmo", "jais", "trillion"],
        regexes: &[GPT2],
        ignore_merges: false,
    },
    PreTokenizer {
        names: &["deepseek-coder"],
        regexes: &[
            r"[\r\n]",
            r"\s?\p{L}+",
            r"\s?\p{P}+",
            "[\u{4E00}-\u{9FA5}\u{0800}-\u{4E00}\u{AC00}-\u{D7FF}]+",
            r"\p{N}",
        ],
        ignore_merges: false,
    },
    PreTokenizer {
        names: &["default"],
        regexes: &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"],
        ignore_merges: false,
    },
];

/// `tokenizer.ggml.token_type` of a control token.
const CONTROL: i64 = 3;
/// `tokenizer.ggml.token_type` of a user-defined token.
const USER_DEFINED: i64 = 4;

/// The tokenizer, chat template and special tokens of a GGUF file's metadata; `origin`
/// names the file in the tokenizer's own errors.
pub fn tokenizer_from_metadata(meta: &Metadata, origin: &str) -> Result<TextTokenizer, String> {
    let json = tokenizer_json(meta)?;
    let mut tokenizer = TextTokenizer::from_bytes(json.to_string().as_bytes(), origin)
        .map_err(|e| e.to_string())?;
    let tokens = meta.strings("tokenizer.ggml.tokens")?;
    let special = |key: &str| -> Result<Option<String>, String> {
        match meta.opt_usize(key)? {
            None => Ok(None),
            Some(id) => tokens.get(id).map(|t| Some(t.to_string())).ok_or_else(|| {
                format!(
                    "metadata key {key} is {id}, past the {} tokens",
                    tokens.len()
                )
            }),
        }
    };
    let eos = special("tokenizer.ggml.eos_token_id")?;
    let bos = special("tokenizer.ggml.bos_token_id")?;
    let template = meta.opt_str("tokenizer.chat_template")?;
    tokenizer
        .set_chat(template, bos.as_deref(), eos.as_deref())
        .map_err(|e| format!("tokenizer.chat_template: {e}"))?;
    Ok(tokenizer)
}

/// The Hugging Face `tokenizer.json` equivalent of the metadata.
pub fn tokenizer_json(meta: &Metadata) -> Result<Value, String> {
    let kind = meta.str("tokenizer.ggml.model")?;
    let byte_level = match kind {
        "gpt2" => true,
        "llama" => false,
        other => {
            return Err(format!(
                "metadata tokenizer.ggml.model is \"{other}\"; supported: \"gpt2\" (byte-level \
                 BPE) and \"llama\" (SentencePiece BPE)"
            ))
        }
    };
    let tokens = meta.strings("tokenizer.ggml.tokens")?;
    let types = meta.opt_ints("tokenizer.ggml.token_type")?;
    if let Some(types) = &types {
        if types.len() != tokens.len() {
            return Err(format!(
                "metadata tokenizer.ggml.token_type has {} entries for {} tokens",
                types.len(),
                tokens.len()
            ));
        }
    }
    let alphabet = byte_alphabet();
    let in_alphabet = |t: &str| t.chars().all(|c| alphabet.contains(&c));
    let mut vocab = serde_json::Map::with_capacity(tokens.len());
    for (id, token) in tokens.iter().enumerate() {
        let spelled = match !byte_level || in_alphabet(token) {
            true => token.to_string(),
            false => token.bytes().map(|b| alphabet[b as usize]).collect(),
        };
        vocab.insert(spelled, json!(id));
    }
    // Matched whole before the model sees the text: the special tokens' ids, the tokens
    // typed control (special) and user-defined (not), as transformers adds them.
    let mut special_ids = Vec::new();
    for key in SPECIAL_IDS {
        if let Some(id) = meta.opt_usize(key)?.filter(|&id| id < tokens.len()) {
            special_ids.push(id);
        }
    }
    let mut added: Vec<Value> = Vec::new();
    for (id, token) in tokens.iter().enumerate() {
        let kind = types.as_ref().map_or(0, |types| types[id]);
        let control = kind == CONTROL && (!byte_level || in_alphabet(token));
        let special = control || special_ids.contains(&id);
        if special || (kind == USER_DEFINED && vocab.contains_key(*token)) {
            added.push(
                json!({"id": id, "content": token, "single_word": false, "lstrip": false,
                              "rstrip": false, "normalized": false, "special": special}),
            );
        }
    }
    let [pre_tokenizer, decoder, model] = match byte_level {
        true => byte_level_parts(meta, vocab)?,
        false => {
            let listed = match meta.get("tokenizer.ggml.merges") {
                Some(_) => Some(listed_merges(meta)?),
                None => None,
            };
            super::sentencepiece::parts(meta, &tokens, vocab, listed)?
        }
    };
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": post_processor(meta, &tokens)?,
        "decoder": decoder,
        "model": model,
    }))
}

/// Whether encoding with special tokens adds the bos and the eos token
/// (`tokenizer.ggml.add_bos_token`, `add_eos_token`; llama.cpp adds a bos to a
/// SentencePiece vocabulary that does not say). roll-flow's own encoding never adds them
/// (the chat template writes them); this is for the exported Hugging Face files.
pub fn adds_bos_eos(meta: &Metadata) -> Result<(bool, bool), String> {
    let sentencepiece = meta.str("tokenizer.ggml.model")? == "llama";
    Ok((
        meta.opt_bool("tokenizer.ggml.add_bos_token")?
            .unwrap_or(sentencepiece),
        meta.opt_bool("tokenizer.ggml.add_eos_token")?
            .unwrap_or(false),
    ))
}

/// transformers' `TemplateProcessing` for [`adds_bos_eos`]: `<bos> $A <eos>` (and
/// `<bos> $A <eos> <bos> $B <eos>` for a pair, the second sequence typed 1), each end
/// only where it is added and its id names a token; `null` where neither is.
fn post_processor(meta: &Metadata, tokens: &[&str]) -> Result<Value, String> {
    let (add_bos, add_eos) = adds_bos_eos(meta)?;
    let token = |add: bool, key: &str| -> Result<Option<(usize, String)>, String> {
        Ok(match add {
            true => meta
                .opt_usize(key)?
                .and_then(|id| tokens.get(id).map(|t| (id, t.to_string()))),
            false => None,
        })
    };
    let bos = token(add_bos, "tokenizer.ggml.bos_token_id")?;
    let eos = token(add_eos, "tokenizer.ggml.eos_token_id")?;
    if bos.is_none() && eos.is_none() {
        return Ok(Value::Null);
    }
    let sequence = |id: &str, type_id: u32| {
        let special = |t: &Option<(usize, String)>| {
            t.as_ref()
                .map(|(_, t)| json!({"SpecialToken": {"id": t, "type_id": type_id}}))
        };
        let middle = json!({"Sequence": {"id": id, "type_id": type_id}});
        [special(&bos), Some(middle), special(&eos)]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
    };
    let single = sequence("A", 0);
    let pair = [single.clone(), sequence("B", 1)].concat();
    let mut specials = serde_json::Map::new();
    for (id, t) in bos.iter().chain(eos.iter()) {
        specials.insert(t.clone(), json!({"id": t, "ids": [id], "tokens": [t]}));
    }
    Ok(
        json!({"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": specials}),
    )
}

/// The metadata keys of the special tokens' ids (transformers' `_SPECIAL_TOKENS`).
const SPECIAL_IDS: [&str; 4] = [
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.padding_token_id",
];

/// The pre-tokenizer, decoder and BPE model of a byte-level vocabulary (`vocab` already
/// in the byte alphabet).
fn byte_level_parts(
    meta: &Metadata,
    vocab: serde_json::Map<String, Value>,
) -> Result<[Value; 3], String> {
    let pre = pre_tokenizer(meta.opt_str("tokenizer.ggml.pre")?.unwrap_or("default"))?;
    Ok([
        split_json(pre),
        json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}),
        json!({
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": pre.ignore_merges, "vocab": vocab, "merges": listed_merges(meta)?,
        }),
    ])
}

/// The pre-tokenizer llama.cpp calls `name` (`tokenizer.ggml.pre`).
fn pre_tokenizer(name: &str) -> Result<&'static PreTokenizer, String> {
    PRE_TOKENIZERS
        .iter()
        .find(|p| p.names.contains(&name))
        .ok_or_else(|| {
            let known: Vec<&str> = PRE_TOKENIZERS
                .iter()
                .flat_map(|p| p.names.to_vec())
                .collect();
            format!(
                "metadata tokenizer.ggml.pre is \"{name}\", a pre-tokenizer this reader does \
                 not know (known: {})",
                known.join(", ")
            )
        })
}

/// The `tokenizer.json` pre-tokenizer of `pre`: its regexes in turn, then the byte alphabet.
fn split_json(pre: &PreTokenizer) -> Value {
    let mut splits: Vec<Value> = pre
        .regexes
        .iter()
        .map(|r| json!({"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": false}))
        .collect();
    splits.push(json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}));
    json!({"type": "Sequence", "pretokenizers": splits})
}

/// `tokenizer.ggml.merges` (`"left right"` each) as the JSON pairs of `tokenizer.json`.
fn listed_merges(meta: &Metadata) -> Result<Vec<Value>, String> {
    meta.strings("tokenizer.ggml.merges")?
        .iter()
        .enumerate()
        .map(|(i, m)| {
            m.split_once(' ')
                .map(|(a, b)| json!([a, b]))
                .ok_or_else(|| {
                    format!("metadata tokenizer.ggml.merges: entry {i} ({m:?}) has no space")
                })
        })
        .collect()
}

/// GPT-2's `bytes_to_unicode`: byte `b` is written as the character at index `b`. Printable
/// bytes (`!`..`~`, `¡`..`¬`, `®`..`ÿ`) stand for themselves; the others take the code
/// points from 256 on, in byte order.
fn byte_alphabet() -> Vec<char> {
    let printable =
        |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut next = 256;
    (0..256u32)
        .map(|b| {
            let code = if printable(b) {
                b
            } else {
                next += 1;
                next - 1
            };
            char::from_u32(code).expect("below 512 is a valid char")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces `pre_name`'s split cuts `text` into, in the byte alphabet.
    fn pieces(pre_name: &str, text: &str) -> Vec<String> {
        use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};
        let split: tokenizers::PreTokenizerWrapper =
            serde_json::from_value(split_json(pre_tokenizer(pre_name).unwrap())).unwrap();
        let mut string = PreTokenizedString::from(text);
        split.pre_tokenize(&mut string).unwrap();
        string
            .get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(piece, _, _)| piece.to_string())
            .collect()
    }

    /// DeepSeek-Coder's split, worked by hand: new lines alone, letter runs with one space
    /// before, punctuation runs likewise, then single digits; what no regex takes (the
    /// three spaces, `=`) stays between (the Python `tokenizers` package gives the same).
    #[test]
    fn deepseek_coder_split() {
        assert_eq!(
            pieces("deepseek-coder", "def f(x):\n    return 12"),
            ["def", "Ġf", "(", "x", "):", "Ċ", "ĠĠĠ", "Ġreturn", "Ġ", "1", "2"]
        );
        assert_eq!(
            pieces("deepseek-coder", "注释 x=1"),
            ["æ³¨éĩĬ", "Ġx", "=", "1"]
        );
    }

    #[test]
    fn byte_alphabet_matches_gpt2() {
        let a = byte_alphabet();
        assert_eq!(
            (a[b' ' as usize], a[b'\n' as usize], a[b'a' as usize]),
            ('Ġ', 'Ċ', 'a')
        );
        assert_eq!(a[0], 'Ā');
        let distinct: std::collections::HashSet<char> = a.iter().copied().collect();
        assert_eq!(distinct.len(), 256);
    }
}
