//! ggml's tensor encodings and their dequantisation to f32, value for value as the `gguf`
//! Python package's `gguf/quants.py` computes it (the reference the fixtures are checked
//! against; llama.cpp's `ggml-quants.c` `dequantize_row_*` is the same arithmetic):
//!
//! - `F32`, `F16`, `BF16`: plain little-endian floats (`BF16`: the high 16 bits of an f32).
//! - `Q8_0`: blocks of 32: f16 `d`, 32 × i8 `q`; `x = q·d`.
//! - `Q4_0`: blocks of 32: f16 `d`, 16 bytes of nibbles (value `j` in the low nibble of byte
//!   `j`, value `j + 16` in its high nibble); `x = d·(q − 8)`.
//! - `Q4_1`: as `Q4_0` with an f16 minimum `m` after `d`; `x = d·q + m`.
//! - `Q4_K`: super-blocks of 256: f16 `d`, f16 `dmin`, 12 bytes of eight 6-bit scales `sc`
//!   and mins `mn`, 128 bytes of nibbles; sub-block `i` (32 values) reads the low (even `i`)
//!   or high (odd `i`) nibbles of bytes `32·⌊i/2⌋..`; `x = (d·sc_i)·q − dmin·mn_i`.
//! - `Q5_K`: as `Q4_K` plus 32 bytes `qh` whose bit `i` of byte `l` is the fifth bit of
//!   value `l` of sub-block `i`.
//! - `Q6_K`: super-blocks of 256: 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 × i8
//!   scales (one per 16 values), f16 `d`; `x = (d·scale)·(q − 32)`.
//!
//! Products are taken in the reference's order and in f32, so the values are bit-equal.

use half::f16;

/// A ggml tensor type (the `type` code of a GGUF tensor description).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GgmlType {
    /// Code 0.
    F32,
    /// Code 1.
    F16,
    /// Code 30.
    Bf16,
    /// Code 8.
    Q8_0,
    /// Code 2.
    Q4_0,
    /// Code 3.
    Q4_1,
    /// Code 12.
    Q4K,
    /// Code 13.
    Q5K,
    /// Code 14.
    Q6K,
    /// A type this reader knows the size of but does not dequantise: (code, name, values
    /// per block, bytes per block).
    Unsupported(u32, &'static str, usize, usize),
}

/// Values per K-quant super-block.
const QK_K: usize = 256;

/// ggml types this reader can size but not dequantise (`ggml.h`, `ggml_type_traits`).
const UNSUPPORTED: [(u32, &str, usize, usize); 9] = [
    (6, "Q5_0", 32, 22),
    (7, "Q5_1", 32, 24),
    (9, "Q8_1", 32, 36),
    (10, "Q2_K", QK_K, 84),
    (11, "Q3_K", QK_K, 110),
    (15, "Q8_K", QK_K, 292),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
];

impl GgmlType {
    /// The type of a tensor description's code; unknown codes are an error.
    pub fn from_code(code: u32) -> Result<Self, String> {
        Ok(match code {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            30 => GgmlType::Bf16,
            8 => GgmlType::Q8_0,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            12 => GgmlType::Q4K,
            13 => GgmlType::Q5K,
            14 => GgmlType::Q6K,
            _ => match UNSUPPORTED.iter().find(|u| u.0 == code) {
                Some(&(code, name, elements, bytes)) => {
                    GgmlType::Unsupported(code, name, elements, bytes)
                }
                None => {
                    return Err(format!(
                        "ggml type {code} is not one this reader knows (supported: {})",
                        SUPPORTED_NAMES
                    ))
                }
            },
        })
    }

    /// ggml's name of the type.
    pub fn name(&self) -> &'static str {
        match self {
            GgmlType::F32 => "F32",
            GgmlType::F16 => "F16",
            GgmlType::Bf16 => "BF16",
            GgmlType::Q8_0 => "Q8_0",
            GgmlType::Q4_0 => "Q4_0",
            GgmlType::Q4_1 => "Q4_1",
            GgmlType::Q4K => "Q4_K",
            GgmlType::Q5K => "Q5_K",
            GgmlType::Q6K => "Q6_K",
            GgmlType::Unsupported(_, name, _, _) => name,
        }
    }

    /// Values per block.
    pub fn block_elements(&self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::Bf16 => 1,
            GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1 => 32,
            GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K => QK_K,
            GgmlType::Unsupported(_, _, elements, _) => *elements,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(&self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::Bf16 => 2,
            GgmlType::Q8_0 => 34,
            GgmlType::Q4_0 => 18,
            GgmlType::Q4_1 => 20,
            GgmlType::Q4K => 144,
            GgmlType::Q5K => 176,
            GgmlType::Q6K => 210,
            GgmlType::Unsupported(_, _, _, bytes) => *bytes,
        }
    }
}

/// The types [`dequantize`] decodes, for error messages.
pub const SUPPORTED_NAMES: &str = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K";

/// Decodes `bytes` (whole blocks of `ggml_type`) to f32 values.
pub fn dequantize(bytes: &[u8], ggml_type: GgmlType) -> Result<Vec<f32>, String> {
    let block = ggml_type.block_bytes();
    if !bytes.len().is_multiple_of(block) {
        return Err(format!(
            "{} bytes are not whole {}-byte {} blocks",
            bytes.len(),
            block,
            ggml_type.name()
        ));
    }
    let blocks = bytes.chunks_exact(block);
    let mut out = Vec::with_capacity(bytes.len() / block * ggml_type.block_elements());
    match ggml_type {
        GgmlType::F32 => out.extend(blocks.map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        GgmlType::F16 => out.extend(blocks.map(|b| half_at(b, 0))),
        GgmlType::Bf16 => out.extend(
            blocks.map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16)),
        ),
        GgmlType::Q8_0 => blocks.for_each(|b| q8_0(b, &mut out)),
        GgmlType::Q4_0 => blocks.for_each(|b| q4_0(b, &mut out)),
        GgmlType::Q4_1 => blocks.for_each(|b| q4_1(b, &mut out)),
        GgmlType::Q4K => blocks.for_each(|b| q4_k(b, &mut out)),
        GgmlType::Q5K => blocks.for_each(|b| q5_k(b, &mut out)),
        GgmlType::Q6K => blocks.for_each(|b| q6_k(b, &mut out)),
        GgmlType::Unsupported(..) => {
            return Err(format!(
                "type {} is not supported (supported: {SUPPORTED_NAMES})",
                ggml_type.name()
            ))
        }
    }
    Ok(out)
}

/// The f16 at `bytes[at..at + 2]` as f32.
fn half_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

fn q8_0(block: &[u8], out: &mut Vec<f32>) {
    let d = half_at(block, 0);
    out.extend(block[2..34].iter().map(|&q| (q as i8) as f32 * d));
}

fn q4_0(block: &[u8], out: &mut Vec<f32>) {
    let d = half_at(block, 0);
    let qs = &block[2..18];
    out.extend(qs.iter().map(|&q| d * ((q & 0x0F) as i8 - 8) as f32));
    out.extend(qs.iter().map(|&q| d * ((q >> 4) as i8 - 8) as f32));
}

fn q4_1(block: &[u8], out: &mut Vec<f32>) {
    let (d, m) = (half_at(block, 0), half_at(block, 2));
    let qs = &block[4..20];
    out.extend(qs.iter().map(|&q| d * (q & 0x0F) as f32 + m));
    out.extend(qs.iter().map(|&q| d * (q >> 4) as f32 + m));
}

/// The eight 6-bit scales and mins of a `Q4_K`/`Q5_K` super-block's 12 scale bytes.
fn scales_and_mins(packed: &[u8]) -> ([u8; 8], [u8; 8]) {
    let (mut sc, mut mn) = ([0u8; 8], [0u8; 8]);
    for j in 0..4 {
        sc[j] = packed[j] & 0x3F;
        mn[j] = packed[j + 4] & 0x3F;
        sc[j + 4] = (packed[j + 8] & 0x0F) | ((packed[j] >> 2) & 0x30);
        mn[j + 4] = (packed[j + 8] >> 4) | ((packed[j + 4] >> 2) & 0x30);
    }
    (sc, mn)
}

fn q4_k(block: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (half_at(block, 0), half_at(block, 2));
    let (sc, mn) = scales_and_mins(&block[4..16]);
    let qs = &block[16..144];
    for i in 0..8 {
        let (scale, min) = (d * sc[i] as f32, dmin * mn[i] as f32);
        let shift = 4 * (i % 2);
        let bytes = &qs[32 * (i / 2)..32 * (i / 2) + 32];
        out.extend(
            bytes
                .iter()
                .map(|&q| scale * ((q >> shift) & 0x0F) as f32 - min),
        );
    }
}

fn q5_k(block: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (half_at(block, 0), half_at(block, 2));
    let (sc, mn) = scales_and_mins(&block[4..16]);
    let qh = &block[16..48];
    let qs = &block[48..176];
    for i in 0..8 {
        let (scale, min) = (d * sc[i] as f32, dmin * mn[i] as f32);
        let shift = 4 * (i % 2);
        let low = &qs[32 * (i / 2)..32 * (i / 2) + 32];
        out.extend(low.iter().zip(qh).map(|(&q, &h)| {
            let q = ((q >> shift) & 0x0F) | (((h >> i) & 1) << 4);
            scale * q as f32 - min
        }));
    }
}

fn q6_k(block: &[u8], out: &mut Vec<f32>) {
    let (ql, qh) = (&block[0..128], &block[128..192]);
    let scales = &block[192..208];
    let d = half_at(block, 208);
    // Rows of 32 values: row `4h + j` takes nibble `j / 2` of `ql[64h + 32(j % 2) + l]`
    // and bits `2j..2j + 2` of `qh[32h + l]`.
    for row in 0..8 {
        let (h, j) = (row / 4, row % 4);
        let low = &ql[64 * h + 32 * (j % 2)..][..32];
        let high = &qh[32 * h..][..32];
        for (half, (lows, highs)) in low.chunks(16).zip(high.chunks(16)).enumerate() {
            let scale = d * (scales[2 * row + half] as i8) as f32;
            out.extend(lows.iter().zip(highs).map(|(&l, &hb)| {
                let q = ((l >> (4 * (j / 2))) & 0x0F) | (((hb >> (2 * j)) & 0x03) << 4);
                scale * ((q as i8) - 32) as f32
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16_bytes(v: f32) -> [u8; 2] {
        f16::from_f32(v).to_le_bytes()
    }

    /// Hand-computed blocks: Q8_0, Q4_0 and Q4_1 with d = 0.5 (exact in f16).
    #[test]
    fn simple_blocks_by_hand() {
        let mut q8 = f16_bytes(0.5).to_vec();
        q8.extend((0..32).map(|i| (i as i8 - 16) as u8));
        let x = dequantize(&q8, GgmlType::Q8_0).unwrap();
        assert_eq!((x[0], x[16], x[31]), (-8.0, 0.0, 7.5));
        let mut q4 = f16_bytes(0.5).to_vec();
        q4.extend((0..16u8).map(|i| i | ((15 - i) << 4)));
        let x = dequantize(&q4, GgmlType::Q4_0).unwrap();
        assert_eq!((x[0], x[15], x[16], x[31]), (-4.0, 3.5, 3.5, -4.0));
        let mut q41 = f16_bytes(0.5).to_vec();
        q41.extend(f16_bytes(-1.0));
        q41.extend((0..16u8).map(|i| i | ((15 - i) << 4)));
        let x = dequantize(&q41, GgmlType::Q4_1).unwrap();
        assert_eq!((x[0], x[15], x[16], x[31]), (-1.0, 6.5, 6.5, -1.0));
        let bf = [0x80u8, 0x3F, 0x00, 0xC0];
        assert_eq!(dequantize(&bf, GgmlType::Bf16).unwrap(), vec![1.0, -2.0]);
    }

    /// Q4_K's packed 6-bit scales: sub-block 5's scale takes its low 4 bits from byte 9 and
    /// its top 2 bits from byte 1; its min from byte 9's high nibble and byte 5's top bits.
    #[test]
    fn k_quant_scales_unpack_by_hand() {
        let mut packed = [0u8; 12];
        packed[1] = 0b1100_0011; // sc[1] = 3, top bits 3 -> sc[5] high = 0b11
        packed[5] = 0b0100_0111; // mn[1] = 7, top bits 1 -> mn[5] high = 0b01
        packed[9] = 0b1010_0110; // sc[5] low = 6, mn[5] low = 10
        let (sc, mn) = scales_and_mins(&packed);
        assert_eq!((sc[1], mn[1]), (3, 7));
        assert_eq!((sc[5], mn[5]), (0b11_0110, 0b01_1010));
    }

    #[test]
    fn partial_blocks_and_unsupported_types_are_errors() {
        let err = dequantize(&[0; 35], GgmlType::Q8_0).unwrap_err();
        assert!(err.contains("not whole 34-byte Q8_0 blocks"), "{err}");
        let q2k = GgmlType::from_code(10).unwrap();
        let err = dequantize(&[0; 84], q2k).unwrap_err();
        assert!(err.contains("Q2_K is not supported"), "{err}");
        let err = GgmlType::from_code(99).unwrap_err();
        assert!(err.contains("ggml type 99"), "{err}");
    }
}
