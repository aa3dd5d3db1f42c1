//! Where the file-reading targets write their inputs: a directory per process, in memory
//! (/dev/shm) where there is one; a disk-backed temp directory made those runs I/O-bound.

use std::path::{Path, PathBuf};

/// `roll-flow-fuzz-NAME-PID`, created.
pub fn scratch_dir(name: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("roll-flow-fuzz-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}
