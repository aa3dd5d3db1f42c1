//! GGUF files against the `gguf` Python package and transformers, on the fixtures made by
//! `tests/fixtures/make_tiny_gguf.py`: every tensor type dequantises to the package's own
//! values bit for bit; the tiny Llama file gives transformers' tokenizer ids, logits, greedy
//! tokens and chat rendering; the SentencePiece vocabulary of
//! `tests/fixtures/make_tiny_spm_gguf.py` gives transformers' ids, decodings and chat
//! rendering.

mod common;

use common::gguf_writer::Writer;
use common::{
    chat_messages, device, fixture, greedy_generation_matches, ids, logits_of, matrix,
    max_abs_diff, B,
};
use roll_flow_model::chat_template::ChatMessage;
use roll_flow_model::gguf::dequant::dequantize;
use roll_flow_model::gguf::{load_gguf, GgufModel};
use roll_flow_model::TextTokenizer;

/// f32 logits must agree with transformers' to this absolute tolerance (both dequantise the
/// same blocks to the same f32 values).
const LOGIT_TOLERANCE: f32 = 1e-4;

fn json(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(fixture("tiny_gguf").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `w`'s metadata as a vocabulary-only file in `dir`, as llama.cpp's `--vocab-only` writes
/// one: the file ends with the metadata, without padding up to the (empty) tensor data.
fn vocab_only_file(w: &Writer, dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("vocab.gguf");
    let header = 4 + 4 + 8 + 8;
    std::fs::write(&path, &w.finish()[..header + w.kv.len()]).unwrap();
    path
}

#[test]
fn every_tensor_type_dequantises_as_the_gguf_package_does() {
    let gguf = GgufModel::open(&fixture("tiny_gguf/quants.gguf")).unwrap();
    let expected = json("quants.json");
    let cases = expected.as_array().unwrap();
    let types: Vec<&str> = cases.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K"]
    );
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let info = &gguf.file.tensors[name];
        assert_eq!(info.ggml_type.name(), case["type"].as_str().unwrap());
        let shape: Vec<usize> = ids(&case["shape"]).iter().map(|&d| d as usize).collect();
        assert_eq!(info.shape(), shape, "{name}");
        let ours = dequantize(gguf.file.data(info), info.ggml_type).unwrap();
        let theirs: Vec<f32> = case["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(ours.len(), theirs.len(), "{name}");
        let differing = ours
            .iter()
            .zip(&theirs)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(differing, 0, "{name}: {differing} values differ");
    }
}

#[test]
fn tiny_llama_config_comes_from_the_metadata() {
    let gguf = GgufModel::open(&fixture("tiny_gguf/tiny_llama.gguf")).unwrap();
    let c = gguf.config().unwrap();
    assert_eq!(c.model_type, "llama");
    assert_eq!(
        (
            c.vocab_size,
            c.hidden_size,
            c.intermediate_size,
            c.num_hidden_layers
        ),
        (516, 64, 128, 2)
    );
    assert_eq!(
        (c.num_attention_heads, c.kv_heads(), c.head_dim()),
        (4, 2, 16)
    );
    assert_eq!((c.rms_norm_eps, c.rope_theta), (1e-5f32 as f64, 10000.0));
    assert_eq!(c.max_position_embeddings, 256);
    assert!(c.tie_word_embeddings);
    assert_eq!(
        (c.qkv_bias(), c.o_bias(), c.qk_norm()),
        (false, false, false)
    );
    assert_eq!(c.eos_token_ids(), vec![2]);
}

#[test]
fn tiny_llama_matches_transformers() {
    let (model, tokenizer) =
        load_gguf::<B>(&fixture("tiny_gguf/tiny_llama.gguf"), &device()).unwrap();
    let expected = json("tiny_llama.json");
    let prompts = expected["prompts"].as_array().unwrap();
    let prompt_ids = expected["prompt_ids"].as_array().unwrap();
    assert_eq!(prompts.len(), 3);
    for ((text, hf_ids), hf_logits) in prompts
        .iter()
        .zip(prompt_ids)
        .zip(expected["logits"].as_array().unwrap())
    {
        let text = text.as_str().unwrap();
        let ours = tokenizer.encode(text).unwrap();
        assert_eq!(ours, ids(hf_ids), "ids of {text:?}");
        assert_eq!(tokenizer.decode(&ours, false).unwrap(), text);
        let diff = max_abs_diff(&logits_of(&model, &ours), &matrix(hf_logits));
        eprintln!("max |Δlogit| = {diff}");
        assert!(diff < LOGIT_TOLERANCE, "max |Δlogit| = {diff}");
    }
    greedy_generation_matches(&model, &expected);
    chat_matches(&tokenizer, &expected, true);
}

/// The tokenizer renders the reference's chat as transformers did and stops at its eos.
fn chat_matches(tokenizer: &TextTokenizer, expected: &serde_json::Value, generation_prompt: bool) {
    let messages = chat_messages(&expected["chat_messages"]);
    let rendered = tokenizer
        .apply_chat_template(&messages, generation_prompt)
        .unwrap();
    assert_eq!(rendered, expected["chat_rendered"].as_str().unwrap());
    let eos = expected["stop_token"].as_u64().unwrap() as u32;
    assert!(tokenizer.stop_tokens().contains(&eos));
}

/// The tokenizer a file describes, written as HF files (what `export --hf` ships), loads
/// back to the same ids, byte-level and SentencePiece alike; the SentencePiece one adds
/// its bos when asked for special tokens, as transformers' GGUF load does (the byte-level
/// file adds nothing).
#[test]
fn tokenizer_round_trips_through_hf_files() {
    let text = "<|im_start|>user\nP_O ünïcode 123<|im_end|><answer>Left</answer> </s> 🙂";
    for (file, bos) in [("tiny_llama.gguf", None), ("tiny_spm.gguf", Some("<s>"))] {
        let gguf = GgufModel::open(&fixture("tiny_gguf").join(file)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in gguf.hf_tokenizer_files().unwrap() {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("tokenizer.json")).unwrap(),
        )
        .unwrap();
        let template = &json["post_processor"]["single"];
        match bos {
            Some(bos) => assert_eq!(
                (
                    template[0]["SpecialToken"]["id"].as_str(),
                    template[1]["Sequence"]["id"].as_str(),
                    template.as_array().unwrap().len()
                ),
                (Some(bos), Some("A"), 2)
            ),
            None => assert!(json["post_processor"].is_null(), "{file}"),
        }
        let from_files = TextTokenizer::from_model_dir(dir.path()).unwrap();
        let from_gguf = gguf.tokenizer().unwrap();
        let ids = from_gguf.encode(text).unwrap();
        assert_eq!(from_files.encode(text).unwrap(), ids, "{file}");
        let raw = from_gguf.encode_adding_special_tokens(text).unwrap();
        assert_eq!(raw.len(), ids.len() + usize::from(bos.is_some()), "{file}");
        assert_eq!(
            from_files.encode_adding_special_tokens(text).unwrap(),
            raw,
            "{file}"
        );
        assert_eq!(
            from_files.decode(&ids, false).unwrap(),
            from_gguf.decode(&ids, false).unwrap(),
            "{file}"
        );
        assert_eq!(from_files.stop_tokens(), from_gguf.stop_tokens(), "{file}");
        let chat = [ChatMessage::new("user", "Hi")];
        assert_eq!(
            from_files.apply_chat_template(&chat, true).unwrap(),
            from_gguf.apply_chat_template(&chat, true).unwrap(),
            "{file}"
        );
    }
}

/// A SentencePiece vocabulary (`tokenizer.ggml.model = "llama"`, scores and no merges, byte
/// fallback) tokenizes a multilingual sample, spaces, tabs, new lines, unseen characters
/// and special tokens in the text as transformers does, and decodes as it does.
#[test]
fn sentencepiece_vocabulary_matches_transformers() {
    let gguf = GgufModel::open(&fixture("tiny_gguf/tiny_spm.gguf")).unwrap();
    let tokenizer = gguf.tokenizer().unwrap();
    let expected = json("tiny_spm.json");
    let samples = expected["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 7);
    for ((text, hf_ids), hf_text) in samples
        .iter()
        .zip(expected["ids"].as_array().unwrap())
        .zip(expected["decoded"].as_array().unwrap())
    {
        let text = text.as_str().unwrap();
        let ours = tokenizer.encode(text).unwrap();
        assert_eq!(ours, ids(hf_ids), "ids of {text:?}");
        assert_eq!(
            tokenizer.decode(&ours, false).unwrap(),
            hf_text.as_str().unwrap()
        );
        // A raw prompt gets the bos the file asks for (`add_bos_token`), as transformers'
        // `tokenizer(text)` gives it.
        let raw = tokenizer.encode_adding_special_tokens(text).unwrap();
        assert_eq!(raw, [&[1][..], &ours].concat(), "{text:?} with its bos");
    }
    chat_matches(&tokenizer, &expected, false);
}

/// The merges come from the scores, worked by hand: `▁a` (−1) is the first merge; `bc`
/// and `▁ab` tie at −2 and `▁a·b` goes first for its longer left piece, though `bc` is
/// listed first. So "abc" is `▁ab`, `c` (file order would give `▁a`, `bc`); alone, "bc"
/// is `▁`, `bc`; `d`, in no piece, falls back to its byte; no `▁` opens the text after a
/// special token. transformers' `LlamaTokenizer` with its `generate_merges` gives the
/// same ids.
#[test]
fn sentencepiece_merges_come_from_the_scores() {
    let tokens = [
        "<unk>",
        "<s>",
        "</s>",
        "\u{2581}",
        "a",
        "b",
        "c",
        "\u{2581}a",
        "bc",
        "\u{2581}ab",
        "<0x64>",
    ];
    let scores = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -2.0, 0.0];
    let mut w = Writer::default();
    w.str("general.architecture", "llama");
    w.str("tokenizer.ggml.model", "llama");
    w.strings("tokenizer.ggml.tokens", &tokens);
    w.f32s("tokenizer.ggml.scores", &scores);
    w.u32("tokenizer.ggml.eos_token_id", 2);
    let dir = tempfile::tempdir().unwrap();
    let path = vocab_only_file(&w, dir.path());
    let tokenizer = GgufModel::open(&path).unwrap().tokenizer().unwrap();
    assert_eq!(tokenizer.encode("abc").unwrap(), [9, 6]);
    assert_eq!(tokenizer.encode("bc").unwrap(), [3, 8]);
    assert_eq!(tokenizer.encode("abc d").unwrap(), [9, 6, 3, 10]);
    assert_eq!(tokenizer.encode("a</s>b").unwrap(), [7, 2, 5]);
    assert_eq!(tokenizer.decode(&[9, 6, 3, 10], false).unwrap(), "abc d");
    let files = GgufModel::open(&path)
        .unwrap()
        .hf_tokenizer_files()
        .unwrap();
    let config: serde_json::Value = serde_json::from_str(&files[1].1).unwrap();
    assert_eq!(
        config["add_bos_token"], true,
        "llama.cpp's default for SentencePiece"
    );
}

/// A byte-level vocabulary's pre-tokenizer follows `tokenizer.ggml.pre`, worked by hand on
/// "a ½ b 1" with the merges `Ġ Â`, `Â ½`, `Ġ 1` (in that order; "½" is the bytes C2 BD,
/// `Â½` in GPT-2's byte alphabet). `smollm` isolates every numeral, `½` included, before
/// GPT-2's split (llama.cpp's `\p{N}` regex; SmolLM2's own `tokenizer.json` has
/// `Digits(individual_digits)`, which isolates what Rust's `char::is_numeric` takes): `a`,
/// `Ġ`, `Â½`, `Ġ`, `b`, `Ġ`, `1`. `gpt2` keeps a space on the numeral: `a`, `ĠÂ`, `½`, `Ġ`,
/// `b`, `Ġ1`. transformers' GGUF loader gives every byte-level file the plain byte-level
/// split whatever its `pre` says, so on the real SmolLM2 file it writes " ½" as `ĠÂ`, `½`
/// where this reader (and llama.cpp) write `Ġ`, `½`; digits after a space agree because
/// SmolLM2's vocabulary holds no `Ġ` + digit token.
#[test]
fn a_byte_level_pre_tokenizer_isolates_numerals_as_its_pre_type_says() {
    let tokens = ["a", "b", "Ġ", "Â", "½", "1", "ĠÂ", "Â½", "Ġ1", "</s>"];
    let encode = |pre: &str| {
        let mut w = Writer::default();
        w.str("general.architecture", "llama");
        w.str("tokenizer.ggml.model", "gpt2");
        w.str("tokenizer.ggml.pre", pre);
        w.strings("tokenizer.ggml.tokens", &tokens);
        w.strings("tokenizer.ggml.merges", &["Ġ Â", "Â ½", "Ġ 1"]);
        w.u32("tokenizer.ggml.eos_token_id", 9);
        let dir = tempfile::tempdir().unwrap();
        let path = vocab_only_file(&w, dir.path());
        let tokenizer = GgufModel::open(&path).unwrap().tokenizer().unwrap();
        let ids = tokenizer.encode("a ½ b 1").unwrap();
        assert_eq!(tokenizer.decode(&ids, false).unwrap(), "a ½ b 1", "{pre}");
        ids
    };
    assert_eq!(encode("smollm"), [0, 2, 7, 2, 1, 2, 5]);
    assert_eq!(encode("gpt2"), [0, 6, 4, 2, 1, 8]);
}
