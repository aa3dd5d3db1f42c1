//! A bounded map of recent entries, shared by threads: the search's kept answers and
//! kept window-max indexes.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// The last `capacity` entries made, by key (oldest dropped first). An entry is made before
/// its value is computed, so threads that want the same key at once wait for one of them
/// instead of each computing it.
pub struct Recent<V> {
    capacity: usize,
    pub(crate) entries: HashMap<String, V>,
    oldest_first: VecDeque<String>,
}

impl<V: Clone + Default> Recent<V> {
    pub fn new(capacity: usize) -> Recent<V> {
        Recent {
            capacity,
            entries: HashMap::new(),
            oldest_first: VecDeque::new(),
        }
    }

    /// The entry of `key`, made (and the oldest dropped when full) if there is none.
    pub fn entry(&mut self, key: &str) -> V {
        if let Some(value) = self.entries.get(key) {
            return value.clone();
        }
        if self.oldest_first.len() >= self.capacity {
            if let Some(old) = self.oldest_first.pop_front() {
                self.entries.remove(&old);
            }
        }
        let value = V::default();
        self.oldest_first.push_back(key.to_string());
        self.entries.insert(key.to_string(), value.clone());
        value
    }
}

/// The entry of `key` in `recent`; a poisoned lock only means another search panicked,
/// the entries stay valid.
pub fn entry<V: Clone + Default>(recent: &Mutex<Recent<V>>, key: &str) -> V {
    recent.lock().unwrap_or_else(|e| e.into_inner()).entry(key)
}
