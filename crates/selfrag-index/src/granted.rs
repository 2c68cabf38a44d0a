//! What a file or folder the user gave lets the app read. Its bound is its canonical place: a
//! folder resolved, or for a file, its folder resolved with the file's own name kept (so a
//! file that is, or becomes, a link leads out of it). A file is read only when its canonical
//! path lies inside the bound; it is opened without following a link in its last component,
//! and the file opened is checked to be the one (device and inode) that was found there, so a
//! file or a folder above it swapped for a link between the check and the read is refused.
//! The folder walk, the watcher, the indexing of each file and the extraction worker all go
//! through here.
//!
//! What is left: resolving a path and reading the identity of what it resolved to are two
//! calls, and a process that can write in the folder and flips a link between exactly those
//! two could still have a file outside read. Opening each component relative to the folder
//! (`openat2` with `RESOLVE_BENEATH` on Linux) would close that too.

use std::fs::{File, Metadata};
use std::path::{Path, PathBuf};

use crate::IndexError;

/// Which file a path led to: its device and inode on Unix. Elsewhere std names no file id, so
/// the size and modification time stand in (a file swapped for one of the same size and time
/// would pass there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    volume: u64,
    file: u64,
}

impl FileIdentity {
    /// The identity of the file `meta` describes.
    pub fn of(meta: &Metadata) -> Self {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Self {
                volume: meta.dev(),
                file: meta.ino(),
            }
        }
        #[cfg(not(unix))]
        {
            let modified = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as u64);
            Self {
                volume: meta.len(),
                file: modified,
            }
        }
    }
}

/// `VOLUME:FILE`, as the extraction worker is told it.
impl std::fmt::Display for FileIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.volume, self.file)
    }
}

impl std::str::FromStr for FileIdentity {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let malformed = || format!("`{text}` is not a file identity (VOLUME:FILE)");
        let (volume, file) = text.split_once(':').ok_or_else(malformed)?;
        Ok(Self {
            volume: volume.parse().map_err(|_| malformed())?,
            file: file.parse().map_err(|_| malformed())?,
        })
    }
}

/// A file found inside a bound, and which file it was: what indexing reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenFile {
    /// The path the library keys the document by.
    pub path: PathBuf,
    /// Where it is read from: `path`, or where `path` leads when it is a link (resolved,
    /// inside the bound), since the read follows no link.
    pub read_from: PathBuf,
    /// The file that was there when it was checked.
    pub identity: FileIdentity,
}

/// The canonical place that bounds what may be read through `root`, a file or folder the user
/// gave: the folder resolved (a folder given as a link is its target), or for a file, its
/// folder resolved and its own name kept. `None` when that cannot be resolved (it is gone).
pub fn bound(root: &Path) -> Option<PathBuf> {
    if std::fs::metadata(root).is_ok_and(|m| m.is_dir()) {
        return std::fs::canonicalize(root).ok();
    }
    let absolute = std::path::absolute(root).ok()?;
    let folder = std::fs::canonicalize(absolute.parent()?).ok()?;
    Some(folder.join(absolute.file_name()?))
}

/// Checks that `path` leads to a place inside the bound of `root` (see [`bound`]) and says which
/// file is there now; [`IndexError::LeadsOutside`] names where it leads otherwise. `root` is
/// the file or folder the user gave that holds `path` (or `path` itself).
pub fn see(root: &Path, path: &Path) -> Result<SeenFile, IndexError> {
    let read = |source| IndexError::Read {
        path: path.to_path_buf(),
        source,
    };
    let target = std::fs::canonicalize(path).map_err(read)?;
    if !bound(root).is_some_and(|bound| target.starts_with(bound)) {
        return Err(IndexError::LeadsOutside {
            path: path.to_path_buf(),
            target,
            folder: root.to_path_buf(),
        });
    }
    // Resolved, `target` holds no link: one found there now was put there since.
    let meta = std::fs::symlink_metadata(&target).map_err(read)?;
    if meta.file_type().is_symlink() {
        return Err(IndexError::Swapped {
            path: path.to_path_buf(),
        });
    }
    let is_link = std::fs::symlink_metadata(path)
        .map_err(read)?
        .file_type()
        .is_symlink();
    Ok(SeenFile {
        path: path.to_path_buf(),
        read_from: if is_link { target } else { path.to_path_buf() },
        identity: FileIdentity::of(&meta),
    })
}

/// Whether an open returns at once for a FIFO or a device (the app, which then refuses what
/// is not a regular file) or waits for it (the worker, which its time limit ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    Never,
    AsReadsDo,
}

/// Opens `seen` for reading (from [`SeenFile::read_from`]), following no link in its last
/// component, and checks that the file opened is the file seen: [`IndexError::Swapped`]
/// otherwise. Returns the file and its metadata, read from the open file.
pub fn open_seen(seen: &SeenFile, waiting: Waiting) -> Result<(File, Metadata), IndexError> {
    open_checked(&seen.path, &seen.read_from, seen.identity, waiting)
}

/// [`open_seen`] from its parts: `path` names the file in errors, `read_from` is opened, and
/// `expected` is the identity found there when it was checked.
pub fn open_checked(
    path: &Path,
    read_from: &Path,
    expected: FileIdentity,
    waiting: Waiting,
) -> Result<(File, Metadata), IndexError> {
    let read = |source| IndexError::Read {
        path: path.to_path_buf(),
        source,
    };
    let swapped = || IndexError::Swapped {
        path: path.to_path_buf(),
    };
    let file = match open_no_follow(read_from, waiting) {
        Ok(file) => file,
        // O_NOFOLLOW's refusal (ELOOP on Linux and macOS, EMLINK on FreeBSD) says little:
        // the file itself says why.
        Err(_)
            if std::fs::symlink_metadata(read_from).is_ok_and(|m| m.file_type().is_symlink()) =>
        {
            return Err(swapped());
        }
        Err(e) => return Err(read(e)),
    };
    let meta = file.metadata().map_err(read)?;
    if meta.file_type().is_symlink() || FileIdentity::of(&meta) != expected {
        return Err(swapped());
    }
    Ok((file, meta))
}

#[cfg(unix)]
fn open_no_follow(path: &Path, waiting: Waiting) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = libc::O_NOFOLLOW;
    if waiting == Waiting::Never {
        flags |= libc::O_NONBLOCK;
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
}

/// Windows opens the link itself (`FILE_FLAG_OPEN_REPARSE_POINT`), whose metadata then says it
/// is one; a FIFO is no concern there.
#[cfg(windows)]
fn open_no_follow(path: &Path, _waiting: Waiting) -> std::io::Result<File> {
    use std::os::windows::fs::OpenOptionsExt;
    const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)
}

/// No way to open without following is known here: a link found before the open is refused,
/// and the identity check catches the rest (see [`FileIdentity`]).
#[cfg(not(any(unix, windows)))]
fn open_no_follow(path: &Path, _waiting: Waiting) -> std::io::Result<File> {
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(std::io::Error::other("a symbolic link"));
    }
    File::open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_crosses_to_the_worker_as_text() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "a").unwrap();
        let identity = FileIdentity::of(&std::fs::metadata(&file).unwrap());
        assert_eq!(identity.to_string().parse::<FileIdentity>(), Ok(identity));
        assert!("12".parse::<FileIdentity>().is_err());
        assert!("1:x".parse::<FileIdentity>().is_err());
    }

    /// A file given alone is bounded by its own place: once it is a link, even to a file
    /// beside it, it leads out; a file in a folder given as a link is inside that folder.
    #[cfg(unix)]
    #[test]
    fn a_file_given_alone_is_its_own_bound() {
        let dir = tempfile::tempdir().unwrap();
        let (notes, beside) = (dir.path().join("notes.txt"), dir.path().join("beside.txt"));
        std::fs::write(&notes, "notes").unwrap();
        std::fs::write(&beside, "beside").unwrap();
        let seen = see(&notes, &notes).unwrap();
        assert_eq!(seen.read_from, notes);
        std::fs::remove_file(&notes).unwrap();
        std::os::unix::fs::symlink(&beside, &notes).unwrap();
        let err = see(&notes, &notes).unwrap_err();
        assert!(matches!(err, IndexError::LeadsOutside { .. }), "{err}");
        assert!(err.to_string().contains("notes.txt"), "{err}");

        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("a.txt"), "a").unwrap();
        let alias = dir.path().join("alias");
        std::os::unix::fs::symlink(&real, &alias).unwrap();
        let seen = see(&alias, &alias.join("a.txt")).unwrap();
        assert_eq!(seen.read_from, alias.join("a.txt"));
    }

    /// The open refuses a link and a file other than the one seen.
    #[cfg(unix)]
    #[test]
    fn the_open_refuses_a_link_or_another_file_in_place_of_the_one_seen() {
        let dir = tempfile::tempdir().unwrap();
        let (notes, other) = (dir.path().join("notes.txt"), dir.path().join("other.txt"));
        std::fs::write(&notes, "notes").unwrap();
        std::fs::write(&other, "other").unwrap();
        let seen = see(dir.path(), &notes).unwrap();
        assert!(open_seen(&seen, Waiting::Never).is_ok());

        // Renamed away, not deleted: its inode stays taken, so no new file gets its number.
        std::fs::rename(&notes, dir.path().join("kept.txt")).unwrap();
        std::os::unix::fs::symlink(&other, &notes).unwrap();
        let err = open_seen(&seen, Waiting::Never).unwrap_err();
        assert!(matches!(err, IndexError::Swapped { .. }), "{err}");

        std::fs::remove_file(&notes).unwrap();
        std::fs::copy(&other, &notes).unwrap();
        let err = open_seen(&seen, Waiting::Never).unwrap_err();
        assert!(matches!(err, IndexError::Swapped { .. }), "{err}");
    }
}
