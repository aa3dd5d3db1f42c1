//! A GGUF file's tensors served under Hugging Face names ([`WeightSource`]), dequantised to
//! f32 as the model asks for them.
//!
//! Names (llama.cpp's `gguf-py/gguf/tensor_mapping.py`): `token_embd` = `model.embed_tokens`,
//! `output_norm` = `model.norm`, `output` = `lm_head`, and in block `N` (`blk.N.` =
//! `model.layers.N.`): `attn_norm` = `input_layernorm`, `attn_{q,k,v}` =
//! `self_attn.{q,k,v}_proj`, `attn_output` = `self_attn.o_proj`, `attn_{q,k}_norm` =
//! `self_attn.{q,k}_norm`, `ffn_norm` = `post_attention_layernorm`, `ffn_{gate,up,down}` =
//! `mlp.{gate,up,down}_proj`. A GGUF tensor's dims are the row-major shape reversed, and its
//! data is already row-major, so no transposition is needed.
//!
//! llama.cpp's converter permutes the rows of a Llama model's q and k projections for its
//! interleaved rotary layout (`convert_hf_to_gguf.py`, `LlamaModel.permute`: per head, row
//! `j·d/2 + i` moves to `2i + j`). They are permuted back here as transformers'
//! `LlamaTensorProcessor._reverse_permute_weights` does (q with the query heads, k with the
//! key/value heads), weights and biases alike.

use std::collections::BTreeSet;

use super::dequant::dequantize;
use super::reader::GgufFile;
use crate::error::ModelError;
use crate::weights::{Init, WeightSource};

/// The tensors of a parsed GGUF file, by Hugging Face name.
pub struct GgufSource<'a> {
    file: &'a GgufFile,
    origin: String,
    /// `(query heads, key/value heads)` when q and k must be un-permuted (Llama files).
    unpermute: Option<(usize, usize)>,
    taken: BTreeSet<String>,
    missing: Vec<String>,
    ignorable: BTreeSet<String>,
}

impl<'a> GgufSource<'a> {
    /// Serves `file`'s tensors; `unpermute` gives the head counts of a Llama file, whose q
    /// and k rows are in llama.cpp's order. `origin` names the file in errors.
    pub fn new(file: &'a GgufFile, origin: &str, unpermute: Option<(usize, usize)>) -> Self {
        GgufSource {
            file,
            origin: origin.to_string(),
            unpermute,
            taken: BTreeSet::new(),
            missing: Vec::new(),
            ignorable: BTreeSet::new(),
        }
    }

    /// Marks a GGUF tensor that may stay unused without an error (`output.weight` when a
    /// critic replaces the head).
    pub fn allow_unused(&mut self, gguf_name: &str) {
        self.ignorable.insert(gguf_name.to_string());
    }

    /// Fails if the model asked for tensors the file lacks, or left some of its tensors
    /// unused.
    pub fn finish(self) -> Result<(), ModelError> {
        if !self.missing.is_empty() {
            return Err(ModelError::MissingTensors {
                source_name: self.origin,
                names: self.missing,
            });
        }
        let unused: Vec<String> = (self.file.tensors.keys())
            .filter(|n| !self.taken.contains(*n) && !self.ignorable.contains(*n))
            .cloned()
            .collect();
        if !unused.is_empty() {
            return Err(ModelError::UnexpectedTensors {
                source_name: self.origin,
                names: unused,
            });
        }
        Ok(())
    }

    fn error(&self, name: &str, message: String) -> ModelError {
        ModelError::Gguf {
            path: self.origin.clone().into(),
            message: format!("tensor {name}: {message}"),
        }
    }
}

impl WeightSource for GgufSource<'_> {
    fn take(&mut self, name: &str, shape: &[usize], _init: Init) -> Result<Vec<f32>, ModelError> {
        let gguf = gguf_name(name).unwrap_or_else(|| name.to_string());
        let Some(info) = self.file.tensors.get(&gguf) else {
            self.missing.push(gguf);
            return Ok(vec![0.0; shape.iter().product()]);
        };
        if info.shape() != shape {
            return Err(ModelError::ShapeMismatch {
                source_name: self.origin.clone(),
                name: gguf,
                expected: shape.to_vec(),
                found: info.shape(),
            });
        }
        let values =
            dequantize(self.file.data(info), info.ggml_type).map_err(|e| self.error(&gguf, e))?;
        self.taken.insert(gguf.clone());
        let width = shape.get(1).copied().unwrap_or(1);
        Ok(match (self.unpermute, projection(&gguf)) {
            (Some((heads, _)), Some('q')) => unpermute_rows(&values, heads, width),
            (Some((_, kv_heads)), Some('k')) => unpermute_rows(&values, kv_heads, width),
            _ => values,
        })
    }
}

/// `q` or `k` for a block's query or key projection (weight or bias).
fn projection(gguf: &str) -> Option<char> {
    let rest = gguf.strip_prefix("blk.")?;
    let (_, tensor) = rest.split_once('.')?;
    match tensor {
        "attn_q.weight" | "attn_q.bias" => Some('q'),
        "attn_k.weight" | "attn_k.bias" => Some('k'),
        _ => None,
    }
}

/// The GGUF name of a Hugging Face tensor name, if it has one.
pub fn gguf_name(hf: &str) -> Option<String> {
    let fixed = [
        ("model.embed_tokens.weight", "token_embd.weight"),
        ("model.norm.weight", "output_norm.weight"),
        ("lm_head.weight", "output.weight"),
    ];
    if let Some((_, gguf)) = fixed.iter().find(|(h, _)| *h == hf) {
        return Some(gguf.to_string());
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, tensor) = rest.split_once('.')?;
    let (module, kind) = tensor.rsplit_once('.')?;
    let gguf = match module {
        "input_layernorm" => "attn_norm",
        "post_attention_layernorm" => "ffn_norm",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "self_attn.q_norm" => "attn_q_norm",
        "self_attn.k_norm" => "attn_k_norm",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        _ => return None,
    };
    Some(format!("blk.{layer}.{gguf}.{kind}"))
}

/// Undoes llama.cpp's permutation of the rows of a q or k projection with `heads` heads,
/// rows `width` values wide (1 for a bias): within each head of `d` rows, stored row
/// `2i + j` is Hugging Face row `j·d/2 + i`. The rows must split into `heads` blocks of
/// an even number of rows (the caller checked the shape against the config).
pub fn unpermute_rows(values: &[f32], heads: usize, width: usize) -> Vec<f32> {
    let rows = values.len() / width.max(1);
    let d = rows / heads.max(1);
    let mut out = vec![0.0; values.len()];
    for h in 0..heads {
        for i in 0..d / 2 {
            for j in 0..2 {
                let stored = (h * d + 2 * i + j) * width;
                let hf = (h * d + j * (d / 2) + i) * width;
                out[hf..hf + width].copy_from_slice(&values[stored..stored + width]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One head of 4 rows, 2 wide: llama.cpp stores HF rows (0, 2, 1, 3) in that order.
    #[test]
    fn unpermute_by_hand() {
        let stored = [0.0, 0.5, 2.0, 2.5, 1.0, 1.5, 3.0, 3.5];
        let hf = unpermute_rows(&stored, 1, 2);
        assert_eq!(hf, vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]);
        // Two heads of a bias: each head unpermuted on its own.
        let bias = [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0];
        assert_eq!(
            unpermute_rows(&bias, 2, 1),
            (0..8).map(|v| v as f32).collect::<Vec<_>>()
        );
    }

    #[test]
    fn hf_names_map_to_gguf_names() {
        assert_eq!(
            gguf_name("model.layers.3.self_attn.o_proj.weight").unwrap(),
            "blk.3.attn_output.weight"
        );
        assert_eq!(
            gguf_name("model.layers.0.self_attn.q_proj.bias").unwrap(),
            "blk.0.attn_q.bias"
        );
        assert_eq!(
            gguf_name("model.layers.1.post_attention_layernorm.weight").unwrap(),
            "blk.1.ffn_norm.weight"
        );
        assert_eq!(gguf_name("lm_head.weight").unwrap(), "output.weight");
        assert_eq!(gguf_name("score.weight"), None);
        assert_eq!(projection("blk.12.attn_k.bias"), Some('k'));
        assert_eq!(projection("blk.12.attn_v.weight"), None);
    }
}
