//! What is wrong with a safetensors file the `safetensors` crate refuses, in words: its
//! errors name neither the tensor nor what to do (`TensorInvalidInfo`,
//! `MetadataIncompleteBuffer`). The header is read again here to find the tensor whose
//! shape and dtype do not fit its byte range.

use safetensors::{Dtype, SafeTensorError};
use serde_json::Value;

/// The first tensor of the header in `bytes` whose shape × dtype size differs from its data
/// offsets' span, described; `None` when the header does not parse or every tensor fits.
fn misfit_tensor(bytes: &[u8]) -> Option<String> {
    let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?) as usize;
    let header: serde_json::Map<String, Value> =
        serde_json::from_slice(bytes.get(8..8usize.checked_add(n)?)?).ok()?;
    header
        .iter()
        .filter(|(name, _)| *name != "__metadata__")
        .find_map(|(name, info)| {
            let dtype: Dtype = serde_json::from_value(info.get("dtype")?.clone()).ok()?;
            let shape: Vec<u64> = (info.get("shape")?.as_array()?.iter())
                .map(Value::as_u64)
                .collect::<Option<_>>()?;
            let offsets = info.get("data_offsets")?.as_array()?;
            let (start, end) = (offsets.first()?.as_u64()?, offsets.get(1)?.as_u64()?);
            // Checked: a damaged shape can overflow, and this runs on damaged files.
            let elements = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d))?;
            let needed = elements.checked_mul(dtype.bitsize() as u64)?.div_ceil(8);
            (end.checked_sub(start) != Some(needed)).then(|| {
                format!(
                    "tensor `{name}` is {dtype} {shape:?}, {needed} bytes, but its data_offsets \
                     [{start}, {end}] span {}",
                    end as i128 - start as i128
                )
            })
        })
}

/// `e`, the error of reading the safetensors file `bytes`, in words, ending with the fix.
pub fn explain(e: &SafeTensorError, bytes: &[u8]) -> String {
    format!(
        "{}; the file is damaged: write or copy it again",
        describe(e, bytes)
    )
}

/// What `e`, the error of reading the safetensors file `bytes`, says is wrong, in words.
pub fn describe(e: &SafeTensorError, bytes: &[u8]) -> String {
    match e {
        SafeTensorError::TensorInvalidInfo => misfit_tensor(bytes)
            .unwrap_or_else(|| "a tensor's shape and dtype do not fit its data offsets".into()),
        SafeTensorError::InvalidOffset(name) => {
            format!("tensor `{name}`'s data offsets overlap another's or leave a gap")
        }
        SafeTensorError::MetadataIncompleteBuffer => format!(
            "the file is {} bytes, not the length its header describes (cut short?)",
            bytes.len()
        ),
        SafeTensorError::HeaderTooSmall
        | SafeTensorError::HeaderTooLarge
        | SafeTensorError::InvalidHeaderLength => {
            "its header's length does not fit the file (cut short?)".into()
        }
        SafeTensorError::InvalidHeader(_) => "its header is not UTF-8 text".into(),
        SafeTensorError::InvalidHeaderStart => {
            "its header does not start with `{` (is it a safetensors file?)".into()
        }
        SafeTensorError::InvalidHeaderDeserialization(e) | SafeTensorError::JsonError(e) => {
            format!("its header is not the JSON safetensors writes ({e})")
        }
        SafeTensorError::ValidationOverflow => {
            "a tensor's shape is too large to address (its numbers are damaged)".into()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use safetensors::tensor::TensorView;
    use safetensors::{Dtype, SafeTensors};

    use super::*;

    /// A file of two F32 tensors, `a` [2, 3] and `b` [4].
    fn file() -> Vec<u8> {
        let (a, b) = (vec![0u8; 24], vec![0u8; 16]);
        let views = [
            ("a", TensorView::new(Dtype::F32, vec![2, 3], &a).unwrap()),
            ("b", TensorView::new(Dtype::F32, vec![4], &b).unwrap()),
        ];
        safetensors::serialize(views, None).unwrap()
    }

    fn error_of(bytes: &[u8]) -> String {
        describe(&SafeTensors::deserialize(bytes).err().unwrap(), bytes)
    }

    #[test]
    fn the_tensor_that_does_not_fit_and_a_short_file_are_named() {
        let whole = file();
        assert!(SafeTensors::deserialize(&whole).is_ok());
        // `a`'s offsets [0, 24] made [0, 20] in place (the header keeps its length).
        let text = String::from_utf8_lossy(&whole).into_owned();
        let bad = text.replacen("[0,24]", "[0,20]", 1).into_bytes();
        assert_ne!(bad, whole, "the header holds a's offsets as written here");
        assert_eq!(
            error_of(&bad),
            "tensor `a` is F32 [2, 3], 24 bytes, but its data_offsets [0, 20] span 20"
        );
        assert_eq!(
            error_of(&whole[..whole.len() - 1]),
            format!(
                "the file is {} bytes, not the length its header describes (cut short?)",
                whole.len() - 1
            )
        );
        assert_eq!(
            error_of(&whole[..4]),
            "its header's length does not fit the file (cut short?)"
        );
        assert!(explain(
            &SafeTensors::deserialize(&whole[..4]).err().unwrap(),
            &whole[..4]
        )
        .ends_with("; the file is damaged: write or copy it again"));
    }

    /// A shape whose size overflows is passed over, not multiplied out (it panicked in a
    /// debug build); the tensor after it that does not fit is still named.
    #[test]
    fn a_shape_too_large_to_count_is_passed_over() {
        let header = r#"{"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,8]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend(header.as_bytes());
        bytes.extend([0u8; 8]);
        assert_eq!(
            misfit_tensor(&bytes).unwrap(),
            "tensor `b` is F32 [2], 8 bytes, but its data_offsets [4, 8] span 4"
        );
    }

    /// A header that is not safetensors' JSON is said so in words, not the crate's Debug.
    #[test]
    fn a_header_that_is_not_its_json_is_said_so() {
        let text = String::from_utf8_lossy(&file()).into_owned();
        // The header's opening brace blanked: a string where the object was.
        let not_object = text.replacen('{', " ", 1).into_bytes();
        let e = error_of(&not_object);
        assert!(
            e.starts_with("its header is not the JSON safetensors writes (invalid type"),
            "{e}"
        );
    }
}
