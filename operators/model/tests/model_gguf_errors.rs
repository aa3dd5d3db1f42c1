//! Broken GGUF files give errors that name the key or tensor at fault, never a panic: a
//! small F32 Llama written here by a minimal GGUF writer loads, and each test breaks one
//! thing in it; the fixture file truncated anywhere fails to open.

mod common;

use common::gguf_writer::Writer;
use common::{device, fixture, B};
use roll_flow_model::gguf::{load_gguf, GgufModel};

const TOKENS: [&str; 6] = ["a", "b", "ab", "Ġ", "<s>", "</s>"];

/// A one-layer Llama (hidden 8, 2 heads, 1 key/value head, FFN 16, 6 tokens) minus the
/// tensors named in `skip`, plus `extra` written after the metadata.
fn llama(skip: &[&str], extra: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::default();
    w.str("general.architecture", "llama");
    for (key, v) in [
        ("llama.block_count", 1),
        ("llama.embedding_length", 8),
        ("llama.feed_forward_length", 16),
        ("llama.attention.head_count", 2),
        ("llama.attention.head_count_kv", 1),
        ("llama.context_length", 64),
    ] {
        if !skip.contains(&key) {
            w.u32(key, v);
        }
    }
    w.f32("llama.attention.layer_norm_rms_epsilon", 1e-5);
    w.str("tokenizer.ggml.model", "gpt2");
    w.str("tokenizer.ggml.pre", "smollm");
    w.strings("tokenizer.ggml.tokens", &TOKENS);
    w.strings("tokenizer.ggml.merges", &["a b"]);
    w.u32("tokenizer.ggml.eos_token_id", 5);
    extra(&mut w);
    let tensors: [(&str, &[usize]); 10] = [
        ("token_embd.weight", &[6, 8]),
        ("output_norm.weight", &[8]),
        ("blk.0.attn_norm.weight", &[8]),
        ("blk.0.attn_q.weight", &[8, 8]),
        ("blk.0.attn_k.weight", &[4, 8]),
        ("blk.0.attn_v.weight", &[4, 8]),
        ("blk.0.attn_output.weight", &[8, 8]),
        ("blk.0.ffn_norm.weight", &[8]),
        ("blk.0.ffn_gate.weight", &[16, 8]),
        ("blk.0.ffn_up.weight", &[16, 8]),
    ];
    for (name, shape) in tensors {
        if !skip.contains(&name) {
            w.tensor(name, shape);
        }
    }
    if !skip.contains(&"blk.0.ffn_down.weight") {
        w.tensor("blk.0.ffn_down.weight", &[8, 16]);
    }
    w.finish()
}

/// The error of loading `bytes` as a GGUF file, as text.
fn load_error(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.gguf");
    std::fs::write(&path, bytes).unwrap();
    match load_gguf::<B>(&path, &device()) {
        Ok(_) => panic!("a broken file loaded"),
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains("broken.gguf"),
                "the error names the file: {text}"
            );
            text
        }
    }
}

#[test]
fn the_written_model_loads_and_generates_ids_in_its_vocabulary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ok.gguf");
    std::fs::write(&path, llama(&[], |_| {})).unwrap();
    let (model, tokenizer) = load_gguf::<B>(&path, &device()).unwrap();
    assert_eq!(model.config.vocab_size, 6);
    assert!(model.config.tie_word_embeddings);
    assert_eq!(tokenizer.encode("ab a").unwrap(), vec![2, 3, 0]);
    assert_eq!(tokenizer.stop_tokens(), vec![5]);
}

#[test]
fn header_and_metadata_errors_name_what_is_wrong() {
    let mut bytes = llama(&[], |_| {});
    bytes[0] = b'X';
    assert!(load_error(&bytes).contains("not a GGUF file"));
    let mut bytes = llama(&[], |_| {});
    bytes[4] = 1;
    assert!(load_error(&bytes).contains("GGUF version 1 is not supported"));
    let err = load_error(&llama(&["llama.embedding_length"], |_| {}));
    assert!(
        err.contains("metadata key llama.embedding_length is missing"),
        "{err}"
    );
    let err = load_error(&llama(&["llama.block_count"], |w| {
        w.str("llama.block_count", "one")
    }));
    assert!(
        err.contains("llama.block_count should be a non-negative integer, found a string"),
        "{err}"
    );
    // Shape keys the tensors cannot back are refused before anything is allocated.
    let err = load_error(&llama(&["llama.feed_forward_length"], |w| {
        w.u32("llama.feed_forward_length", 1 << 30)
    }));
    assert!(err.contains("describes a model of at least"), "{err}");
    // Head counts are checked by their own keys before the head width is derived.
    for (heads, wanted) in [
        (0, "llama.attention.head_count is 0; it must be positive"),
        (
            3,
            "llama.embedding_length 8 is not divisible by llama.attention.head_count 3",
        ),
    ] {
        let err = load_error(&llama(&["llama.attention.head_count"], |w| {
            w.u32("llama.attention.head_count", heads)
        }));
        assert!(err.contains(wanted), "{err}");
    }
    // The config's own checks name the metadata key, not the config.json field.
    let err = load_error(&llama(&["llama.block_count"], |w| {
        w.u32("llama.block_count", 0)
    }));
    assert!(err.contains("llama.block_count must be positive"), "{err}");
    let err = load_error(&llama(&["llama.attention.layer_norm_rms_epsilon"], |w| {
        w.f32("llama.attention.layer_norm_rms_epsilon", -1.0)
    }));
    assert!(
        err.contains("llama.attention.layer_norm_rms_epsilon -1 must be a positive number"),
        "{err}"
    );
    let err = load_error(&llama(&[], |w| w.str("tokenizer.ggml.pre", "mystery")));
    assert!(err.contains("tokenizer.ggml.pre is \"mystery\""), "{err}");
    let err = load_error(&llama(&[], |w| w.u32("general.alignment", 3)));
    assert!(err.contains("general.alignment"), "{err}");
    // An array claiming more elements than the file has bytes.
    let err = load_error(&llama(&[], |w| {
        w.key("huge", 9);
        w.kv.extend(4u32.to_le_bytes());
        w.kv.extend(u64::MAX.to_le_bytes());
    }));
    assert!(
        err.contains("metadata huge: an array length is 18446744073709551615"),
        "{err}"
    );
    let err = load_error(&llama(&[], |w| w.key("odd", 13)));
    assert!(err.contains("metadata odd: unknown value type 13"), "{err}");
}

/// The error of building the tokenizer of a vocabulary-only file of `kind` (the fixture
/// Llama's six tokens) with `extra` keys.
fn tokenizer_error(kind: &str, extra: impl FnOnce(&mut Writer)) -> String {
    let mut w = Writer::default();
    w.str("general.architecture", "llama");
    w.str("tokenizer.ggml.model", kind);
    w.strings("tokenizer.ggml.tokens", &TOKENS);
    extra(&mut w);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vocab.gguf");
    std::fs::write(&path, w.finish()).unwrap();
    match GgufModel::open(&path).unwrap().tokenizer() {
        Ok(_) => panic!("a broken vocabulary loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn tokenizer_metadata_errors_name_the_key() {
    let err = tokenizer_error("t5", |_| {});
    assert!(
        err.contains("tokenizer.ggml.model is \"t5\"; supported: \"gpt2\"")
            && err.contains("\"llama\" (SentencePiece BPE)"),
        "{err}"
    );
    let err = tokenizer_error("llama", |_| {});
    assert!(
        err.contains("metadata key tokenizer.ggml.scores is missing"),
        "{err}"
    );
    let err = tokenizer_error("llama", |w| w.f32s("tokenizer.ggml.scores", &[0.0; 2]));
    assert!(
        err.contains("tokenizer.ggml.scores has 2 entries for 6 tokens"),
        "{err}"
    );
    let err = tokenizer_error("llama", |w| w.strings("tokenizer.ggml.scores", &TOKENS));
    assert!(
        err.contains("tokenizer.ggml.scores: element 0 should be a number, found a string"),
        "{err}"
    );
    let err = tokenizer_error("llama", |w| {
        w.f32s("tokenizer.ggml.scores", &[0.0; 6]);
        w.strings("tokenizer.ggml.merges", &["a"]);
    });
    assert!(err.contains("entry 0 (\"a\") has no space"), "{err}");
}

#[test]
fn tensor_errors_name_the_tensor() {
    let err = load_error(&llama(&["blk.0.attn_q.weight"], |_| {}));
    assert!(
        err.contains("missing tensors: blk.0.attn_q.weight"),
        "{err}"
    );
    let err = load_error(&llama(&["blk.0.ffn_down.weight"], |w| {
        w.tensor("blk.0.ffn_down.weight", &[16, 8])
    }));
    assert!(
        err.contains("tensor blk.0.ffn_down.weight has shape [16, 8], expected [8, 16]"),
        "{err}"
    );
    let err = load_error(&llama(&["blk.0.ffn_down.weight"], |w| {
        w.raw_tensor("blk.0.ffn_down.weight", &[8, 256], 10, &[0; 8 * 84])
    }));
    assert!(err.contains("blk.0.ffn_down.weight"), "{err}");
    let err = load_error(&llama(&[], |w| w.tensor("blk.9.attn_q.weight", &[8, 8])));
    assert!(
        err.contains("unexpected tensors") && err.contains("blk.9.attn_q.weight"),
        "{err}"
    );
    let err = load_error(&llama(&[], |w| w.raw_tensor("odd", &[4], 99, &[0; 16])));
    assert!(err.contains("tensor odd: ggml type 99"), "{err}");
    let err = load_error(&llama(&[], |w| w.tensor("rope_freqs.weight", &[2])));
    assert!(err.contains("rope_freqs.weight"), "{err}");
    // A tensor whose data would lie past the end of the file.
    let mut bytes = llama(&[], |_| {});
    bytes.truncate(bytes.len() - 64);
    let err = load_error(&bytes);
    assert!(
        err.contains("blk.0.ffn_down.weight") && err.contains("past the end"),
        "{err}"
    );
}

/// Every prefix of the fixture model that cuts into its header or tensor data (not only
/// the padding after the last tensor) is an error, not a panic.
#[test]
fn truncated_files_are_errors() {
    let full = fixture("tiny_gguf/tiny_llama.gguf");
    let bytes = std::fs::read(&full).unwrap();
    let data_end = GgufModel::open(&full)
        .unwrap()
        .file
        .tensors
        .values()
        .map(|t| t.end)
        .max()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.gguf");
    let step = (data_end / 300).max(1);
    for len in (0..data_end)
        .step_by(step)
        .chain(0..200)
        .chain(data_end - 8..data_end)
    {
        std::fs::write(&path, &bytes[..len]).unwrap();
        let err = GgufModel::open(&path).err().map(|e| e.to_string());
        assert!(
            err.is_some_and(|e| e.contains("cut.gguf")),
            "a {len}-byte prefix opened"
        );
    }
}
