//! Atomic file writes: a temp file in the same directory, fsync, then rename.
//!
//! A crash or a full disk mid-write leaves the previous file intact instead of a torn one;
//! checkpoints, copies of the pipeline and every other file roll-flow owns go through here.
//! Whole folders (a checkpoint step, an HF export) are filled in a staging folder and put
//! in place with [`replace_dir`].

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Puts the finished folder `staging` at `target` (`what` names it in errors). An existing
/// `target` is first renamed to `aside`, which the caller deletes once this succeeds; if
/// `staging` then cannot be moved in, `aside` goes back to `target` (or, failing that
/// too, stays where the error says), so a whole folder is always on disk.
pub fn replace_dir(staging: &Path, target: &Path, aside: &Path, what: &str) -> Result<(), String> {
    if target.exists() {
        fs::rename(target, aside)
            .map_err(|e| format!("cannot move the old {} aside: {e}", target.display()))?;
    }
    fs::rename(staging, target).map_err(|e| {
        let mut err = format!("cannot move {what} into {}: {e}", target.display());
        if aside.exists() {
            if let Err(back) = fs::rename(aside, target) {
                err += &format!(
                    "; the previous one is kept at {} (moving it back failed: {back})",
                    aside.display()
                );
            }
        }
        err
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_move_puts_the_previous_folder_back() {
        let dir = tempfile::tempdir().unwrap();
        let (out, previous) = (dir.path().join("export"), dir.path().join("previous"));
        fs::create_dir_all(&out).unwrap();
        fs::write(out.join("config.json"), "{}").unwrap();
        // No staging folder: the second move fails after the first moved `out` aside.
        let err =
            replace_dir(&dir.path().join("missing"), &out, &previous, "the export").unwrap_err();
        assert!(err.starts_with("cannot move the export into"), "{err}");
        assert_eq!(fs::read_to_string(out.join("config.json")).unwrap(), "{}");
        assert!(!previous.exists());
    }

    #[test]
    fn replaces_content_and_leaves_no_temp_file() {
        let dir = std::env::temp_dir().join(format!("roll-flow-atomic-{}", std::process::id()));
        let path = dir.join("sub").join("f.txt");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("f.txt")]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir =
            std::env::temp_dir().join(format!("roll-flow-atomic-fail-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.txt");
        write_atomic(&path, b"old").unwrap();
        // A directory where the file's parent should be makes the write fail.
        let bad = path.join("child.txt");
        assert!(write_atomic(&bad, b"new").is_err());
        assert_eq!(fs::read(&path).unwrap(), b"old");
        fs::remove_dir_all(&dir).unwrap();
    }
}
