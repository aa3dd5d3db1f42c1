//! TensorBoard event files: every scalar of `metrics.jsonl` also lands in
//! `out_dir/events.out.tfevents.<time>.roll-flow`, so `tensorboard --logdir runs/` shows
//! the run without a converter.
//!
//! The format is TFRecord framing around serialized `Event` protobufs:
//!
//! ```text
//! record = u64 length (LE) | u32 masked_crc32c(length bytes) | data | u32 masked_crc32c(data)
//! Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
//!           Summary summary = 5; SessionLog session_log = 7; }
//! Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
//! SessionLog { enum status = 1 (START = 1); }
//! ```
//!
//! The few messages are encoded by hand: a protobuf library (and its build step) for five
//! fields would outweigh this file. The first record of a file is the `file_version`
//! event TensorBoard expects (`brain.Event:2`).
//!
//! Resume: a resumed run starts a new file (TensorBoard reads every event file of a
//! directory in name order) whose second record is a `SessionLog START` at the resumed
//! step. That is how TensorFlow marks a restart: TensorBoard then drops the points of older
//! files at or after that step, which the resumed run computes again.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::crc32c::masked_crc32c;

/// The file version TensorBoard's reader checks for in the first record.
pub const FILE_VERSION: &str = "brain.Event:2";

/// An open event file that scalar records are appended to.
pub struct EventWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

/// Seconds since the Unix epoch, as TensorBoard's `wall_time`.
pub fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl EventWriter {
    /// Creates a new event file in `dir`, named after the current time so that a later
    /// file (a resumed run's) sorts after earlier ones. `resumed_at` is the step a resumed
    /// run continues from: recorded as a restart so TensorBoard forgets the old points
    /// from that step on.
    pub fn create(dir: &Path, resumed_at: Option<u64>) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let (secs, micros) = (now.as_secs(), now.subsec_micros());
        let mut attempt = 0u32;
        let (path, file) = loop {
            let suffix = if attempt == 0 {
                String::new()
            } else {
                format!(".{attempt}")
            };
            let name = format!("events.out.tfevents.{secs:010}.{micros:06}.roll-flow{suffix}");
            let path = dir.join(name);
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => break (path, file),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
                Err(e) => return Err(e),
            }
        };
        let mut writer = EventWriter {
            path,
            out: BufWriter::new(file),
        };
        let wall_time = unix_seconds();
        let mut first = event_header(wall_time, 0);
        put_bytes(&mut first, 3, FILE_VERSION.as_bytes());
        writer.write_record(&first)?;
        if let Some(step) = resumed_at {
            let mut restart = event_header(wall_time, step as i64);
            let session_log_start = [0x08, 0x01]; // status (field 1, varint) = START
            put_bytes(&mut restart, 7, &session_log_start);
            writer.write_record(&restart)?;
        }
        writer.out.flush()?;
        Ok(writer)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event holding every `(tag, value)` of a step, then flushes and fsyncs
    /// it (a checkpoint covering the step is put in place only after).
    pub fn write_scalars(
        &mut self,
        step: u64,
        wall_time: f64,
        scalars: &[(&str, f32)],
    ) -> io::Result<()> {
        let mut summary = Vec::new();
        for (tag, value) in scalars {
            let mut entry = Vec::new();
            put_bytes(&mut entry, 1, tag.as_bytes());
            put_key(&mut entry, 2, WIRE_FIXED32);
            entry.extend_from_slice(&value.to_le_bytes());
            put_bytes(&mut summary, 1, &entry);
        }
        let mut event = event_header(wall_time, step as i64);
        put_bytes(&mut event, 5, &summary);
        self.write_record(&event)?;
        self.out.flush()?;
        self.out.get_ref().sync_data()
    }

    fn write_record(&mut self, data: &[u8]) -> io::Result<()> {
        let length = (data.len() as u64).to_le_bytes();
        self.out.write_all(&length)?;
        self.out.write_all(&masked_crc32c(&length).to_le_bytes())?;
        self.out.write_all(data)?;
        self.out.write_all(&masked_crc32c(data).to_le_bytes())
    }
}

const WIRE_VARINT: u8 = 0;
const WIRE_FIXED64: u8 = 1;
const WIRE_BYTES: u8 = 2;
const WIRE_FIXED32: u8 = 5;

/// `Event.wall_time` and `Event.step`, the fields every event carries.
fn event_header(wall_time: f64, step: i64) -> Vec<u8> {
    let mut event = Vec::new();
    put_key(&mut event, 1, WIRE_FIXED64);
    event.extend_from_slice(&wall_time.to_le_bytes());
    put_key(&mut event, 2, WIRE_VARINT);
    put_varint(&mut event, step as u64);
    event
}

fn put_key(out: &mut Vec<u8>, field: u32, wire: u8) {
    put_varint(out, u64::from(field) << 3 | u64::from(wire));
}

/// A length-delimited field: a string or an embedded message.
fn put_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(out, field, WIRE_BYTES);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7F) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
#[path = "tensorboard_tests.rs"]
mod tests;
