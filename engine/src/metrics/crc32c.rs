//! CRC-32C (Castagnoli), the checksum of TensorBoard's event-file records, and TensorFlow's
//! "masked" form of it.
//!
//! TFRecord framing stores `masked_crc32c` of the length and of the payload. The mask
//! (rotate right by 15, add a constant) exists because a CRC of data that itself contains
//! CRCs is weak; readers (TensorBoard, `tf.data`) check the masked value. Twenty lines of
//! table-driven CRC are cheaper than a dependency; the test vectors pin it to the standard.

/// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82F6_3B78;

/// TensorFlow's mask delta (`kMaskDelta` in `tensorflow/core/lib/hash/crc32c.h`).
const MASK_DELTA: u32 = 0xA282_EAD8;

const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC-32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!0u32, |crc, &b| {
        TABLE[((crc ^ b as u32) & 0xFF) as usize] ^ (crc >> 8)
    })
}

/// The masked CRC-32C TFRecord stores.
pub fn masked_crc32c(bytes: &[u8]) -> u32 {
    crc32c(bytes).rotate_right(15).wrapping_add(MASK_DELTA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_standard_check_values() {
        // The CRC catalogue's check value, and RFC 3720 (iSCSI) appendix B.4 vectors.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        let ascending: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&ascending), 0x46DD_794E);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn mask_is_tensorflows() {
        // masked(x) = rotr15(crc) + 0xa282ead8; the empty string's CRC is 0.
        assert_eq!(masked_crc32c(b""), MASK_DELTA);
        // rotr15(0xe3069283) + 0xa282ead8, worked out by hand.
        assert_eq!(masked_crc32c(b"123456789"), 0xC78A_B0E5);
    }
}
