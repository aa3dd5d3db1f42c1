//! The files of a checkpoint folder: small text files and burn records, written
//! atomically and read with errors that name the file.
//!
//! Records are burn's `BinBytesRecorder` format (bincode's standard configuration, full
//! precision). They are decoded here rather than through the recorder's `load`, which in
//! burn 0.21 unwraps the decode: a truncated `model.bin` or `optimizer.bin` panicked the
//! resume. The bytes and the item are the same; a damaged file is now an error with the fix.

use std::path::Path;

use burn::record::{BinBytesRecorder, BurnRecord, FullPrecisionSettings};
use burn::tensor::backend::Backend;

/// The recorder checkpoints write with.
pub type Record = BinBytesRecorder<FullPrecisionSettings>;

/// What a checkpoint file that cannot be read as written says to do.
const DAMAGED: &str = "the file is damaged: move this checkpoint's folder out of checkpoints/ \
                       to use the one before it";

/// The record of type `R` in the file `name` of `dir`, which [`Record`] wrote, on
/// `device`; a file that does not decode (truncated, damaged, another record) is an error
/// naming it and the fix.
pub fn read_record<R: burn::record::Record<B>, B: Backend>(
    dir: &Path,
    name: &str,
    device: &B::Device,
) -> Result<R, String> {
    let bytes = read_bytes(dir, name)?;
    // A limit makes the decoder check each length it reads before allocating: without one
    // a damaged length prefix asked for a vector past isize::MAX and panicked. 1 TiB is
    // more than any record holds.
    let config = bincode::config::standard().with_limit::<{ 1 << 40 }>();
    let decoded = bincode::serde::decode_from_slice::<
        BurnRecord<R::Item<FullPrecisionSettings>, B>,
        _,
    >(&bytes, config);
    match decoded {
        Ok((record, _)) => Ok(R::from_item(record.item, device)),
        Err(e) => {
            // The decoder's first line; burn's serde layer appends a note on its old formats.
            let detail = e.to_string();
            let detail = detail.trim_start_matches("OtherString(\"");
            let detail = detail.split(['\n', '\\']).next().unwrap_or_default();
            Err(format!(
                "{}: cannot be decoded ({detail}); {DAMAGED}",
                dir.join(name).display()
            ))
        }
    }
}

/// Reads a whole number a checkpoint keeps as a small text file (a model's weight
/// `version`); one that does not parse is named with the same advice as a damaged record.
pub fn read_count(dir: &Path, name: &str) -> Result<u64, String> {
    let text = read_text(dir, name)?;
    text.trim().parse().map_err(|e| {
        format!(
            "{}: {:?} is not a whole number ({e}); {DAMAGED}",
            dir.join(name).display(),
            text.trim()
        )
    })
}

/// Writes a small text file atomically.
pub fn write_text(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    write_bytes(dir, name, text.as_bytes())
}

/// Reads a small text file.
pub fn read_text(dir: &Path, name: &str) -> Result<String, String> {
    String::from_utf8(read_bytes(dir, name)?)
        .map_err(|e| format!("{}: {e}", dir.join(name).display()))
}

/// Writes a file atomically.
pub fn write_bytes(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    roll_flow_engine::atomic_file::write_atomic(&dir.join(name), bytes)
        .map_err(|e| format!("cannot write {}: {e}", dir.join(name).display()))
}

/// Reads a file, the error naming it.
pub fn read_bytes(dir: &Path, name: &str) -> Result<Vec<u8>, String> {
    std::fs::read(dir.join(name))
        .map_err(|e| format!("cannot read {}: {e}", dir.join(name).display()))
}

#[cfg(test)]
mod tests {
    use burn::module::Module;
    use burn::nn::{LinearConfig, LinearRecord};
    use burn::record::Recorder;
    use roll_flow_model::CpuBackend;

    use super::*;

    /// A record reads back as burn's recorder wrote it; cut short or emptied, it is an error
    /// with the fix (burn's own loader panics on these).
    #[test]
    fn records_read_back_and_damaged_ones_are_errors() {
        let device = Default::default();
        let linear = LinearConfig::new(3, 2).init::<CpuBackend>(&device);
        let bytes = Record::default()
            .record(linear.clone().into_record(), ())
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        write_bytes(dir.path(), "model.bin", &bytes).unwrap();
        let read: LinearRecord<CpuBackend> = read_record(dir.path(), "model.bin", &device).unwrap();
        let burns: LinearRecord<CpuBackend> =
            Record::default().load(bytes.clone(), &device).unwrap();
        let weights =
            |r: &LinearRecord<CpuBackend>| r.weight.val().into_data().to_vec::<f32>().unwrap();
        assert_eq!(weights(&read), weights(&burns));
        assert_eq!(read.weight.id, burns.weight.id);
        for cut in [0, 10, bytes.len() - 1] {
            write_bytes(dir.path(), "model.bin", &bytes[..cut]).unwrap();
            let Err(err) =
                read_record::<LinearRecord<CpuBackend>, _>(dir.path(), "model.bin", &device)
            else {
                panic!("a record cut at byte {cut} was read");
            };
            assert!(
                err.contains("model.bin: cannot be decoded (")
                    && err.ends_with(
                        "the file is damaged: move this checkpoint's folder out of \
                                      checkpoints/ to use the one before it"
                    )
                    && !err.contains("version 0.14.0"),
                "{err}"
            );
        }
    }

    /// A count reads back through its surrounding whitespace; text that is not a whole
    /// number names the file, what it holds and the fix.
    #[test]
    fn counts_read_back_and_damaged_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        write_text(dir.path(), "version", "17\n").unwrap();
        assert_eq!(read_count(dir.path(), "version"), Ok(17));
        write_text(dir.path(), "version", "1x7").unwrap();
        let err = read_count(dir.path(), "version").unwrap_err();
        let file = dir.path().join("version").display().to_string();
        assert!(
            err.starts_with(&format!("{file}: \"1x7\" is not a whole number ("))
                && err.contains("move this checkpoint's folder out of checkpoints/"),
            "{err}"
        );
        let missing = read_count(dir.path(), "absent").unwrap_err();
        assert!(missing.starts_with("cannot read "), "{missing}");
    }
}
