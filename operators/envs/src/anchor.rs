//! GiGPO anchor-state keys. verl-agent groups steps whose observations are *identical*
//! (exact equality of the raw observation, hashed) into anchor groups. Every env's
//! observation is its full state as text, so the key is a stable 64-bit FNV-1a hash of
//! that text: equal observations always share a key, and the value is the same on every
//! machine and run (std's `DefaultHasher` makes no such promise), so it can be stored in a
//! `state_hash` column and compared across workers.

use roll_flow_engine::stable_hash::{fnv1a, FNV_OFFSET};

/// The anchor key of an observation.
pub fn observation_hash(observation: &str) -> u64 {
    fnv1a(FNV_OFFSET, observation.as_bytes())
}

#[cfg(test)]
mod tests {
    use crate::anchor::observation_hash;

    #[test]
    fn published_fnv1a_vectors() {
        // Reference values of 64-bit FNV-1a (Fowler/Noll/Vo test suite).
        assert_eq!(observation_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(observation_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(observation_hash("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn equal_states_share_a_key_and_different_ones_differ() {
        assert_eq!(observation_hash("P_O\n__G"), observation_hash("P_O\n__G"));
        assert_ne!(observation_hash("P_O\n__G"), observation_hash("_PO\n__G"));
    }
}
