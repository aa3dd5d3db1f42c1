//! Event files read back by a reader written independently of the writer: TFRecord
//! framing with both CRCs checked by a bit-by-bit CRC-32C, and a generic protobuf field
//! decoder, so a shared mistake in the writer's helpers cannot hide.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::*;
use crate::metrics::MetricsLog;

/// CRC-32C one bit at a time (no table), masked as TensorFlow does.
fn reference_masked_crc(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    let crc = !crc;
    crc.rotate_right(15).wrapping_add(0xA282_EAD8)
}

#[derive(Debug, Default, PartialEq)]
struct ReadEvent {
    wall_time: f64,
    step: i64,
    file_version: Option<String>,
    scalars: Vec<(String, f32)>,
    session_start: bool,
}

enum Field<'a> {
    Varint(u64),
    Fixed64([u8; 8]),
    Bytes(&'a [u8]),
    Fixed32([u8; 4]),
}

fn varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let b = bytes[*at];
        *at += 1;
        value |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return value;
        }
    }
    panic!("varint longer than 10 bytes");
}

fn fields(bytes: &[u8]) -> Vec<(u64, Field<'_>)> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let key = varint(bytes, &mut at);
        let field = match key & 7 {
            0 => Field::Varint(varint(bytes, &mut at)),
            1 => {
                at += 8;
                Field::Fixed64(bytes[at - 8..at].try_into().unwrap())
            }
            2 => {
                let len = varint(bytes, &mut at) as usize;
                at += len;
                Field::Bytes(&bytes[at - len..at])
            }
            5 => {
                at += 4;
                Field::Fixed32(bytes[at - 4..at].try_into().unwrap())
            }
            other => panic!("unexpected wire type {other}"),
        };
        out.push((key >> 3, field));
    }
    assert_eq!(at, bytes.len(), "fields end exactly at the message end");
    out
}

fn decode_event(data: &[u8]) -> ReadEvent {
    let mut event = ReadEvent::default();
    for (number, field) in fields(data) {
        match (number, field) {
            (1, Field::Fixed64(b)) => event.wall_time = f64::from_le_bytes(b),
            (2, Field::Varint(v)) => event.step = v as i64,
            (3, Field::Bytes(b)) => event.file_version = Some(String::from_utf8(b.into()).unwrap()),
            (5, Field::Bytes(summary)) => {
                for (n, value) in fields(summary) {
                    let (1, Field::Bytes(value)) = (n, value) else {
                        panic!("Summary has only `value` entries")
                    };
                    let (mut tag, mut simple) = (None, None);
                    for (n, f) in fields(value) {
                        match (n, f) {
                            (1, Field::Bytes(t)) => {
                                tag = Some(String::from_utf8(t.into()).unwrap())
                            }
                            (2, Field::Fixed32(v)) => simple = Some(f32::from_le_bytes(v)),
                            _ => panic!("unexpected Summary.Value field {n}"),
                        }
                    }
                    event.scalars.push((tag.unwrap(), simple.unwrap()));
                }
            }
            (7, Field::Bytes(log)) => {
                event.session_start = matches!(fields(log).as_slice(), [(1, Field::Varint(1))])
            }
            (n, _) => panic!("unexpected Event field {n}"),
        }
    }
    event
}

/// Every event of a file, with the framing and both CRCs of every record checked.
fn read_events(path: &Path) -> Vec<ReadEvent> {
    let bytes = std::fs::read(path).unwrap();
    let mut at = 0;
    let mut events = Vec::new();
    while at < bytes.len() {
        let length_bytes = &bytes[at..at + 8];
        let length = u64::from_le_bytes(length_bytes.try_into().unwrap()) as usize;
        let length_crc = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap());
        assert_eq!(length_crc, reference_masked_crc(length_bytes), "length CRC");
        let data = &bytes[at + 12..at + 12 + length];
        let data_crc_at = at + 12 + length;
        let data_crc = u32::from_le_bytes(bytes[data_crc_at..data_crc_at + 4].try_into().unwrap());
        assert_eq!(data_crc, reference_masked_crc(data), "data CRC");
        events.push(decode_event(data));
        at = data_crc_at + 4;
    }
    events
}

fn event_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .contains("tfevents")
        })
        .collect();
    files.sort();
    files
}

fn record(step: u64, loss: f64) -> Map<String, Value> {
    let value = serde_json::json!({
        "step": step,
        "policy_version": step,
        "wall_s": 0.5 * step as f64,
        "actor_step/pg_loss": loss,
        "eval/val/success": 0.25,
        "rollout/seconds": 1.5,
    });
    value.as_object().unwrap().clone()
}

#[test]
fn first_record_is_the_file_version_and_scalars_follow() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = EventWriter::create(dir.path(), None).unwrap();
    writer
        .write_scalars(3, 1234.5, &[("a/b", 0.5), ("c", -2.0)])
        .unwrap();
    writer.write_scalars(300, 1235.0, &[("a/b", 1e-7)]).unwrap();
    let events = read_events(writer.path());
    assert_eq!(events.len(), 3);
    assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));
    assert!(events[0].scalars.is_empty() && !events[0].session_start);
    assert_eq!(events[1].step, 3);
    assert_eq!(events[1].wall_time, 1234.5);
    assert_eq!(
        events[1].scalars,
        vec![("a/b".to_string(), 0.5), ("c".to_string(), -2.0)]
    );
    assert_eq!(events[2].step, 300, "a step past one varint byte");
    assert_eq!(events[2].scalars, vec![("a/b".to_string(), 1e-7)]);
}

#[test]
fn metrics_log_writes_every_numeric_metric_as_a_scalar() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = MetricsLog::open(dir.path(), 0).unwrap();
    let mut with_null = record(1, 0.0);
    with_null.insert("actor_step/pg_loss".into(), Value::Null);
    // The clock read around the first append brackets its event's wall time.
    let before = unix_seconds();
    log.append(&record(0, 2.0)).unwrap();
    let after = unix_seconds();
    log.append(&with_null).unwrap();
    let files = event_files(dir.path());
    assert_eq!(files.len(), 1);
    let events = read_events(&files[0]);
    assert_eq!(events.len(), 3, "version + one event per step");
    let step0 = &events[1];
    assert_eq!(step0.step, 0);
    assert!(
        before <= step0.wall_time && step0.wall_time <= after,
        "{before} <= {} <= {after}",
        step0.wall_time
    );
    let mut want: Vec<(String, f32)> = record(0, 2.0)
        .into_iter()
        .filter(|(k, _)| k != "step")
        .map(|(k, v)| (k, v.as_f64().unwrap() as f32))
        .collect();
    want.sort_by(|a, b| a.0.cmp(&b.0));
    let mut got = step0.scalars.clone();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, want);
    assert_eq!(events[2].step, 1);
    assert!(
        !events[2]
            .scalars
            .iter()
            .any(|(t, _)| t == "actor_step/pg_loss"),
        "a null (non-finite) value is left out"
    );
}

#[test]
fn a_resumed_log_starts_a_new_file_that_marks_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = MetricsLog::open(dir.path(), 0).unwrap();
    for step in 0..3 {
        log.append(&record(step, 1.0)).unwrap();
    }
    drop(log);
    let mut resumed = MetricsLog::open(dir.path(), 2).unwrap();
    resumed.append(&record(2, 5.0)).unwrap();
    let files = event_files(dir.path());
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(read_events(&files[0]).len(), 4);
    let second = read_events(&files[1]);
    assert_eq!(second[0].file_version.as_deref(), Some("brain.Event:2"));
    assert!(second[1].session_start && second[1].step == 2);
    assert_eq!(second[2].step, 2);
    assert!(second[2]
        .scalars
        .contains(&("actor_step/pg_loss".to_string(), 5.0)));
}
