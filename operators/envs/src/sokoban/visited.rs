//! The set of room states reverse play has explored, keyed like gym-sokoban's
//! `marshal.dumps(room_state)`: the player's cell plus the box cells (box identities do not
//! matter). A cheap multiplicative hash over the two words keeps the search fast.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// A room state: box cells and the player cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateKey {
    pub boxes: u128,
    pub player: u8,
}

impl Hash for StateKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let lo = self.boxes as u64;
        let hi = (self.boxes >> 64) as u64;
        let mixed = (lo ^ hi.rotate_left(29) ^ ((self.player as u64) << 57))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        state.write_u64(mixed ^ (mixed >> 31));
    }
}

/// Passes the already-mixed `u64` of [`StateKey`] through.
#[derive(Default)]
pub struct MixedHasher(u64);

impl Hasher for MixedHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01B3);
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// Explored states of one reverse-play search.
pub type Visited = HashSet<StateKey, BuildHasherDefault<MixedHasher>>;
