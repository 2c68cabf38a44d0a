//! Writing a file so that a crash or a power cut leaves either its old content or its new one:
//! the one place that does it, for the library's commit pointer and state files, the engine's
//! history and settings, exports and secrets.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Makes a rename or removal in `dir` durable. Directories cannot be opened for syncing on
/// Windows, where the rename itself is durable enough (MoveFileEx); there this does nothing.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::fs::File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory, syncing the file
/// before the rename and the directory after it: after a crash the file holds either the old or
/// the new content, and once this returns the new content survives a power cut.
///
/// The temporary file is locked (an OS lock, released when its process dies) while it is
/// written, so the temporary files of processes killed mid-write, which nothing else would
/// remove, are told apart from those being written and deleted by the next save of `path`.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with(path, bytes, false)
}

/// [`write`] for a secret (an API key): the file is created readable and writable by its owner
/// only (mode 0600 on Unix) from its first byte.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with(path, bytes, true)
}

fn write_with(path: &Path, bytes: &[u8], private: bool) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let prefix = format!(
        ".{}.tmp-",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    );
    remove_abandoned_temp_files(dir, &prefix);
    // Unique per process and call, so two threads saving the same file never share a temp file.
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        "{prefix}{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        if private {
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        }
        #[cfg(not(unix))]
        let _ = private;
        let mut f = options.open(&tmp)?;
        f.lock()?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() && tmp.exists() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Deletes the files in `dir` named `{prefix}…` that no live process holds locked: temporary
/// files of writes killed midway. A file younger than a few seconds is left alone, as its writer
/// may not have locked it yet. Best effort: what cannot be checked or deleted stays.
fn remove_abandoned_temp_files(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let old_enough = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|modified| {
                now.duration_since(modified)
                    .is_ok_and(|age| age >= ABANDONED_AFTER)
            });
        if !old_enough {
            continue;
        }
        let path = entry.path();
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        if file.try_lock().is_ok() {
            drop(file);
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// How old an unlocked temporary file must be to count as abandoned.
const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn writes_replace_whole_files_and_leave_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("state.json");
        write(&path, b"one").unwrap();
        write(&path, b"two, longer").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two, longer");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }

    #[cfg(unix)]
    #[test]
    fn a_private_file_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        write_private(&path, b"sesame").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_failed_write_leaves_the_folder_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        // A folder where the file should go: the rename fails.
        let path = dir.path().join("taken");
        std::fs::create_dir_all(path.join("inside")).unwrap();
        assert!(write(&path, b"x").is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("taken")]);
    }
}
