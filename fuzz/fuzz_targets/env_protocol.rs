//! An env server's reply line: every check (handshake, reset, step) refuses what does
//! not fit with a reason, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roll_flow::envs::protocol;

fuzz_target!(|data: &[u8]| {
    if let Ok(reply) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = protocol::hello(&reply);
        let _ = protocol::reset_reply(&reply);
        let _ = protocol::step_reply(&reply);
    }
});
