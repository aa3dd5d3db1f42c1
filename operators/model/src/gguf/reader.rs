//! The GGUF container (llama.cpp's `docs/gguf.md`, versions 2 and 3): a header, typed
//! metadata key/value pairs, tensor descriptions, and the tensor data after them.
//!
//! Layout, all little-endian: magic `GGUF`, `u32` version, `u64` tensor count, `u64`
//! metadata count; each metadata entry is a string key (`u64` length + UTF-8 bytes), a `u32`
//! value type and the value (arrays: `u32` element type, `u64` length, elements); each
//! tensor is a name, a `u32` rank, `u64` dims (fastest-varying first), a `u32` ggml type and
//! a `u64` offset into the data section. The data section starts at the next multiple of
//! `general.alignment` (default 32) after the descriptions.
//!
//! Every read is bounds-checked and every count is checked against the bytes left, so a
//! truncated or corrupt file is an error naming what was being read, never a panic or a
//! huge allocation.

use std::collections::BTreeMap;

use super::dequant::GgmlType;

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum GgufValue {
    /// `UINT8`..`UINT64` (types 0, 2, 4, 10).
    Uint(u64),
    /// `INT8`..`INT64` (types 1, 3, 5, 11).
    Int(i64),
    /// `FLOAT32`, `FLOAT64` (types 6, 12).
    Float(f64),
    /// `BOOL` (type 7).
    Bool(bool),
    /// `STRING` (type 8).
    String(String),
    /// `ARRAY` (type 9).
    Array(Vec<GgufValue>),
}

impl GgufValue {
    /// The value as a non-negative integer, if it is an integer that fits.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::Uint(v) => Some(v),
            GgufValue::Int(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float (integers convert).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::Float(v) => Some(v),
            GgufValue::Uint(v) => Some(v as f64),
            GgufValue::Int(v) => Some(v as f64),
            _ => None,
        }
    }

    /// Short name of the value's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            GgufValue::Uint(_) => "unsigned integer",
            GgufValue::Int(_) => "integer",
            GgufValue::Float(_) => "float",
            GgufValue::Bool(_) => "bool",
            GgufValue::String(_) => "string",
            GgufValue::Array(_) => "array",
        }
    }
}

/// Where one tensor's data lies and how it is encoded.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Dimensions in GGUF order: `dims[0]` varies fastest (the reverse of a row-major shape).
    pub dims: Vec<u64>,
    /// The element encoding.
    pub ggml_type: GgmlType,
    /// Byte range of the data within the file.
    pub start: usize,
    /// End of the byte range (exclusive).
    pub end: usize,
}

impl TensorInfo {
    /// The shape in row-major order (Hugging Face's): the GGUF dims reversed.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    /// Number of elements.
    pub fn elements(&self) -> usize {
        self.dims.iter().map(|&d| d as usize).product()
    }
}

/// A parsed GGUF file: its metadata, its tensor table and the bytes they point into.
#[derive(Debug)]
pub struct GgufFile {
    /// Format version (2 or 3).
    pub version: u32,
    /// Metadata by key.
    pub metadata: BTreeMap<String, GgufValue>,
    /// Tensor descriptions by name, byte ranges resolved and checked against the file.
    pub tensors: BTreeMap<String, TensorInfo>,
    /// The whole file.
    pub bytes: Vec<u8>,
}

/// Alignment of the data section when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Deepest nesting of arrays accepted (real files use one level).
const MAX_ARRAY_DEPTH: usize = 4;

impl GgufFile {
    /// Parses `bytes`; the error says what was being read and where.
    pub fn parse(bytes: Vec<u8>) -> Result<Self, String> {
        let mut cursor = Cursor {
            bytes: &bytes,
            at: 0,
        };
        let magic = cursor.take(4, "the magic number")?;
        if magic != b"GGUF" {
            return Err(format!(
                "not a GGUF file: it starts with {magic:02x?}, not \"GGUF\""
            ));
        }
        let version = cursor.u32("the version")?;
        if !(2..=3).contains(&version) {
            return Err(format!(
                "GGUF version {version} is not supported (versions 2 and 3 are)"
            ));
        }
        let tensor_count = cursor.u64("the tensor count")?;
        let kv_count = cursor.u64("the metadata count")?;
        let mut metadata = BTreeMap::new();
        for i in 0..kv_count {
            let key = cursor
                .string()
                .map_err(|e| format!("metadata entry {i}: key: {e}"))?;
            let value_type = cursor
                .u32("a value type")
                .map_err(|e| format!("{key}: {e}"))?;
            let value = cursor
                .value(value_type, 0)
                .map_err(|e| format!("metadata {key}: {e}"))?;
            metadata.insert(key, value);
        }
        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(v) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() && a <= 1 << 20 => a,
                _ => {
                    return Err(format!(
                        "metadata general.alignment is {v:?}; it must be a power of two"
                    ))
                }
            },
        };
        let mut described = Vec::new();
        for i in 0..tensor_count {
            let name = cursor
                .string()
                .map_err(|e| format!("tensor {i}: name: {e}"))?;
            let info = cursor
                .tensor_description()
                .map_err(|e| format!("tensor {name}: {e}"))?;
            described.push((name, info));
        }
        // A file without tensors (llama.cpp's `--vocab-only` output) may end right after
        // its metadata, without the padding up to an empty data section.
        let data_start = align(cursor.at as u64, alignment)
            .filter(|&s| s <= bytes.len() as u64 || tensor_count == 0)
            .ok_or_else(|| "the file ends before its tensor data section".to_string())?;
        let mut tensors = BTreeMap::new();
        for (name, (dims, ggml_type, offset)) in described {
            let info = resolve(&dims, ggml_type, offset, data_start, alignment, bytes.len())
                .map_err(|e| format!("tensor {name}: {e}"))?;
            if tensors.insert(name.clone(), info).is_some() {
                return Err(format!("tensor {name} is described twice"));
            }
        }
        Ok(GgufFile {
            version,
            metadata,
            tensors,
            bytes,
        })
    }

    /// The raw (still encoded) bytes of a tensor.
    pub fn data(&self, info: &TensorInfo) -> &[u8] {
        &self.bytes[info.start..info.end]
    }
}

/// `value` rounded up to a multiple of `alignment` (a power of two), if it does not overflow.
fn align(value: u64, alignment: u64) -> Option<u64> {
    value
        .checked_add(alignment - 1)
        .map(|v| v & !(alignment - 1))
}

/// Checks a tensor description against its type and the file, giving its byte range.
fn resolve(
    dims: &[u64],
    ggml_type: GgmlType,
    offset: u64,
    data_start: u64,
    alignment: u64,
    file_len: usize,
) -> Result<TensorInfo, String> {
    let elements = dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= file_len as u64 * 8)
        .ok_or_else(|| format!("dims {dims:?} hold more elements than the file can"))?;
    let block = ggml_type.block_elements() as u64;
    if dims.first().is_some_and(|&d| !d.is_multiple_of(block)) {
        return Err(format!(
            "{} stores blocks of {block} values, but its first dim {} is not a multiple of it",
            ggml_type.name(),
            dims[0]
        ));
    }
    if !offset.is_multiple_of(alignment) {
        return Err(format!(
            "data offset {offset} is not a multiple of the alignment {alignment}"
        ));
    }
    let size = elements / block * ggml_type.block_bytes() as u64;
    let start = data_start.checked_add(offset);
    let end = start.and_then(|s| s.checked_add(size));
    match (start, end) {
        (Some(start), Some(end)) if end <= file_len as u64 => Ok(TensorInfo {
            dims: dims.to_vec(),
            ggml_type,
            start: start as usize,
            end: end as usize,
        }),
        _ => Err(format!(
            "its {size} bytes at data offset {offset} run past the end of the file ({file_len} bytes)"
        )),
    }
}

/// A bounds-checked little-endian reader over the file.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!(
                "the file ends at byte {} while reading {what} ({n} bytes at byte {})",
                self.bytes.len(),
                self.at
            ));
        };
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let slice = self.take(N, what)?;
        Ok(slice.try_into().expect("took N bytes"))
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count of items of at least `item_bytes` each, checked against the bytes left.
    fn count(&mut self, item_bytes: usize, what: &str) -> Result<usize, String> {
        let n = self.u64(what)?;
        let left = (self.bytes.len() - self.at) as u64;
        if n.saturating_mul(item_bytes.max(1) as u64) > left {
            return Err(format!(
                "{what} is {n}, more than the {left} bytes left in the file can hold"
            ));
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> Result<String, String> {
        let len = self.count(1, "a string length")?;
        let bytes = self.take(len, "a string")?;
        String::from_utf8(bytes.to_vec()).map_err(|e| format!("a string is not UTF-8: {e}"))
    }

    fn value(&mut self, value_type: u32, depth: usize) -> Result<GgufValue, String> {
        Ok(match value_type {
            0 => GgufValue::Uint(self.array::<1>("a u8")?[0] as u64),
            1 => GgufValue::Int(self.array::<1>("an i8")?[0] as i8 as i64),
            2 => GgufValue::Uint(u16::from_le_bytes(self.array("a u16")?) as u64),
            3 => GgufValue::Int(i16::from_le_bytes(self.array("an i16")?) as i64),
            4 => GgufValue::Uint(self.u32("a u32")? as u64),
            5 => GgufValue::Int(i32::from_le_bytes(self.array("an i32")?) as i64),
            6 => GgufValue::Float(f32::from_le_bytes(self.array("an f32")?) as f64),
            7 => match self.array::<1>("a bool")?[0] {
                0 => GgufValue::Bool(false),
                1 => GgufValue::Bool(true),
                b => return Err(format!("a bool is {b}, not 0 or 1")),
            },
            8 => GgufValue::String(self.string()?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(format!("arrays nested deeper than {MAX_ARRAY_DEPTH}"));
                }
                let item_type = self.u32("an array's element type")?;
                let len = self.count(min_value_bytes(item_type), "an array length")?;
                let mut items = Vec::with_capacity(len);
                for i in 0..len {
                    let item = self
                        .value(item_type, depth + 1)
                        .map_err(|e| format!("element {i}: {e}"))?;
                    items.push(item);
                }
                GgufValue::Array(items)
            }
            10 => GgufValue::Uint(self.u64("a u64")?),
            11 => GgufValue::Int(i64::from_le_bytes(self.array("an i64")?)),
            12 => GgufValue::Float(f64::from_le_bytes(self.array("an f64")?)),
            other => return Err(format!("unknown value type {other} (known: 0 to 12)")),
        })
    }

    /// Rank, dims, type and offset of one tensor.
    fn tensor_description(&mut self) -> Result<(Vec<u64>, GgmlType, u64), String> {
        let rank = self.u32("the rank")?;
        if !(1..=4).contains(&rank) {
            return Err(format!("rank {rank}; GGUF tensors have 1 to 4 dims"));
        }
        let dims = (0..rank)
            .map(|_| self.u64("a dim"))
            .collect::<Result<Vec<_>, _>>()?;
        let code = self.u32("the type")?;
        let ggml_type = GgmlType::from_code(code)?;
        let offset = self.u64("the data offset")?;
        Ok((dims, ggml_type, offset))
    }
}

/// The fewest bytes an encoded value of `value_type` takes (for checking array lengths).
fn min_value_bytes(value_type: u32) -> usize {
    match value_type {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 | 10..=12 => 8,
        9 => 12,
        _ => 1,
    }
}
