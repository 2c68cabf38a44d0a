//! Durable LanceDB commits: what the library has said is indexed survives a power cut.
//!
//! Lance writes its local files without syncing them (object_store's `LocalFileSystem` with
//! fsync off, and its own `LocalWriter` for data files), so after a power cut the newest
//! manifest can name data files the file system never wrote: the table then fails to open or
//! to read. Lance offers no hook between writing a commit's data and its manifest, so the
//! library makes its commits durable itself, after the fact, and rolls back what was not:
//! - **After each commit** ([`Durability::sync_new_files`]) every file written since the last
//!   one is synced, then the folders that gained entries, and only then are the tables'
//!   versions recorded in `durable.json` (written atomically). A version in that file is one
//!   whose every file is on disk.
//! - **When the library opens** ([`Durability::open`]) every manifest of a version newer than
//!   the recorded one is moved aside into `recovered-<unix seconds>/`, so Lance opens the last
//!   durable version. Those commits were never reported done (a document counts as indexed once
//!   its commit is durable), so an interrupted job indexes their files again; their data files
//!   are left for Lance's pruning.
//!
//! A library written before this file existed has no `durable.json` and is opened as it is.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::IndexError;

/// The file that records each table's last durable version.
const DURABLE_FILE: &str = "durable.json";

/// Lance's folder of manifests inside a table folder, and its hint of the latest version.
const VERSIONS_DIR: &str = "_versions";
const VERSION_HINT: &str = "latest_version_hint.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct DurableVersions {
    /// Table name → its last version whose files were all synced.
    tables: BTreeMap<String, u64>,
}

/// A table rolled back to its last durable version when the library opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RolledBack {
    pub table: String,
    /// The newest version found, which was not durable.
    pub from: u64,
    pub to: u64,
    /// Where its newer manifests were moved.
    pub moved_to: PathBuf,
}

/// The library folder's files known to be on disk, and the versions last recorded durable.
#[derive(Debug)]
pub(crate) struct Durability {
    dir: PathBuf,
    /// Every file and folder as it was when synced: a path removed and written again (a table
    /// dropped and created anew, a file replaced) has another stamp and is synced again.
    synced: Mutex<HashMap<PathBuf, Stamp>>,
    recorded: Mutex<BTreeMap<String, u64>>,
}

/// What tells one file from the next at the same path: its length and modification time.
type Stamp = (u64, Option<std::time::SystemTime>);

impl Durability {
    /// Rolls every table of `dir` back to its last durable version (see the module docs), then
    /// takes the folder's files as synced after a clean stop. After an unclean one (a table
    /// rolled back: the last session's final writes may be in the page cache only), or in a
    /// library with no record yet, they are all synced by the first commit.
    pub fn open(dir: &Path) -> Result<(Self, Vec<RolledBack>), IndexError> {
        let (recorded, rolled_back) = roll_back(dir)?;
        let clean = rolled_back.is_empty() && !recorded.tables.is_empty();
        let durability = Self {
            dir: dir.to_path_buf(),
            synced: Mutex::new(HashMap::new()),
            recorded: Mutex::new(recorded.tables),
        };
        if clean {
            let mut known = HashMap::new();
            walk(dir, &mut |path, stamp| {
                known.insert(path.to_path_buf(), stamp);
            })
            .map_err(|source| read_error(dir, source))?;
            *durability.synced_mut() = known;
        }
        // Otherwise (an unclean stop, or a library with no record yet) the first commit syncs
        // every file once.
        Ok((durability, rolled_back))
    }

    fn synced_mut(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Stamp>> {
        // A poisoned set only makes the next sync redo files: it is always safe to use.
        self.synced.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Syncs every file and folder of the library folder not synced yet, then the folders
    /// that gained them as entries. Blocking; returns how many files and folders it synced.
    pub fn sync_new_files(&self) -> Result<usize, IndexError> {
        // Only what exists now is kept: the map follows the folder, pruned files leave it.
        let mut present: HashMap<PathBuf, Stamp> = HashMap::new();
        let mut fresh: Vec<PathBuf> = Vec::new();
        {
            let synced = self.synced_mut();
            walk(&self.dir, &mut |path, stamp| {
                if synced.get(path) != Some(&stamp) {
                    fresh.push(path.to_path_buf());
                }
                present.insert(path.to_path_buf(), stamp);
            })
            .map_err(|source| read_error(&self.dir, source))?;
        }
        let mut parents: HashSet<PathBuf> = HashSet::new();
        for path in &fresh {
            // A new folder's own entries are synced like a file's data.
            let synced = if path.is_dir() {
                crate::atomic::sync_dir(path)
            } else {
                sync_file(path)
            };
            match synced {
                Ok(()) => {}
                // Lance removed it meanwhile (a temporary file, a pruned version).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(write_error(path, source)),
            }
            if let Some(parent) = path.parent() {
                parents.insert(parent.to_path_buf());
            }
        }
        // A folder's own stamp may miss an entry added within its clock's tick (1 s on some
        // file systems): the folders of new entries are synced whatever their stamp says.
        for folder in parents.iter().filter(|p| !fresh.contains(p)) {
            match crate::atomic::sync_dir(folder) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(write_error(folder, e));
                }
                _ => {}
            }
        }
        *self.synced_mut() = present;
        Ok(fresh.len())
    }

    /// Makes the tables' current `versions` (table name, version) durable: syncs what was
    /// written since the last call and records them. Nothing to do (no file walked, nothing
    /// written) when they are the versions recorded last. Blocking.
    pub fn commit(&self, versions: &[(&str, u64)]) -> Result<(), IndexError> {
        let mut recorded = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        // A recorded version never goes back: a caller whose versions were read before a later
        // commit was recorded (its task outlived its future) must not undo that record, which
        // the next open would then roll back.
        let tables: BTreeMap<String, u64> = versions
            .iter()
            .map(|(name, version)| {
                let kept = recorded.get(*name).map_or(*version, |r| (*r).max(*version));
                ((*name).to_owned(), kept)
            })
            .collect();
        if *recorded == tables {
            return Ok(());
        }
        self.sync_new_files()?;
        let record = DurableVersions { tables };
        let path = self.dir.join(DURABLE_FILE);
        let text = serde_json::to_vec_pretty(&record)
            .map_err(|e| IndexError::Schema(format!("cannot encode {DURABLE_FILE}: {e}")))?;
        crate::atomic::write(&path, &text).map_err(|source| write_error(&path, source))?;
        // The record itself is on disk now: not a file for the next sync.
        if let Ok(meta) = std::fs::metadata(&path) {
            self.synced_mut()
                .insert(path, (meta.len(), meta.modified().ok()));
        }
        *recorded = record.tables;
        Ok(())
    }
}

fn read_error(path: &Path, source: std::io::Error) -> IndexError {
    IndexError::Read {
        path: path.to_path_buf(),
        source,
    }
}

fn write_error(path: &Path, source: std::io::Error) -> IndexError {
    IndexError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// `fsync` of one file. Windows flushes only a handle opened for writing.
fn sync_file(path: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(cfg!(windows))
        .open(path)?
        .sync_all()
}

/// Calls `visit` with every regular file and folder under `dir` and its stamp, a folder before
/// its entries (symbolic links are not followed).
fn walk(dir: &Path, visit: &mut dyn FnMut(&Path, Stamp)) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        let stamp = || {
            entry
                .metadata()
                .map(|m| (m.len(), m.modified().ok()))
                .unwrap_or((0, None))
        };
        if kind.is_dir() {
            visit(&path, stamp());
            match walk(&path, visit) {
                // Removed while walking (a dropped table, a pruned index).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                other => other?,
            }
        } else if kind.is_file() {
            visit(&path, stamp());
        }
    }
    Ok(())
}

/// The version a manifest's file name stands for: `N.manifest` (Lance's first naming) or
/// `u64::MAX - N` zero-padded to 20 digits (its second, which lists newest first). Detached and
/// staging manifests (`d…`, `…-uuid`) are none.
fn manifest_version(file_name: &str) -> Option<u64> {
    let stem = file_name.strip_suffix(".manifest")?;
    let number: u64 = stem.parse().ok()?;
    Some(if stem.len() == 20 && number > u64::MAX / 2 {
        u64::MAX - number
    } else {
        number
    })
}

/// Moves aside the manifests newer than each table's durable version (see the module docs);
/// returns the record read and what was rolled back.
fn roll_back(dir: &Path) -> Result<(DurableVersions, Vec<RolledBack>), IndexError> {
    let record_path = dir.join(DURABLE_FILE);
    let record: DurableVersions = match std::fs::read(&record_path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            IndexError::Schema(format!(
                "{} is unreadable ({e}): it is written atomically, so something else changed it; \
                 remove it to open the library as it is",
                record_path.display()
            ))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((DurableVersions::default(), Vec::new()));
        }
        Err(source) => return Err(read_error(&record_path, source)),
    };
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut rolled_back = Vec::new();
    for (table, &durable) in &record.tables {
        let versions_dir = dir.join(format!("{table}.lance")).join(VERSIONS_DIR);
        let entries = match std::fs::read_dir(&versions_dir) {
            Ok(entries) => entries,
            // A table since dropped or replaced.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(read_error(&versions_dir, source)),
        };
        let mut manifests: Vec<(u64, PathBuf)> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| read_error(&versions_dir, source))?;
            let name = entry.file_name();
            if let Some(version) = manifest_version(&name.to_string_lossy()) {
                manifests.push((version, entry.path()));
            }
        }
        let newer: Vec<&(u64, PathBuf)> = manifests.iter().filter(|(v, _)| *v > durable).collect();
        let Some(from) = newer.iter().map(|(v, _)| *v).max() else {
            continue;
        };
        if !manifests.iter().any(|(v, _)| *v == durable) {
            // Never expected (the durable version is recorded before any pruning); without it
            // the table would be left with no version at all, so it is opened as it is.
            tracing::warn!(
                table,
                durable,
                "the last durable version's manifest is missing; opening the table as it is"
            );
            continue;
        }
        let aside = dir
            .join(format!("recovered-{stamp}"))
            .join(format!("{table}.lance"))
            .join(VERSIONS_DIR);
        std::fs::create_dir_all(&aside).map_err(|source| write_error(&aside, source))?;
        for (_, path) in newer {
            let target = aside.join(path.file_name().unwrap_or_default());
            std::fs::rename(path, &target).map_err(|source| write_error(path, source))?;
        }
        match std::fs::remove_file(versions_dir.join(VERSION_HINT)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(write_error(&versions_dir, e));
            }
            _ => {}
        }
        crate::atomic::sync_dir(&versions_dir)
            .and_then(|()| crate::atomic::sync_dir(&aside))
            .map_err(|source| write_error(&versions_dir, source))?;
        tracing::warn!(
            table,
            from,
            to = durable,
            moved_to = %aside.display(),
            "the library was not closed cleanly: its newest commits had not reached the disk, so \
             the table is back at its last durable version; an interrupted job indexes those \
             files again"
        );
        rolled_back.push(RolledBack {
            table: table.clone(),
            from,
            to: durable,
            moved_to: aside,
        });
    }
    Ok((record, rolled_back))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(dir: &Path) -> BTreeMap<String, u64> {
        let bytes = std::fs::read(dir.join(DURABLE_FILE)).unwrap();
        serde_json::from_slice::<DurableVersions>(&bytes)
            .unwrap()
            .tables
    }

    #[test]
    fn a_recorded_version_never_goes_back_and_new_files_are_synced_once() {
        let dir = tempfile::tempdir().unwrap();
        let (durability, rolled_back) = Durability::open(dir.path()).unwrap();
        assert!(rolled_back.is_empty());
        std::fs::create_dir_all(dir.path().join("t.lance/data")).unwrap();
        std::fs::write(dir.path().join("t.lance/data/a.lance"), b"rows").unwrap();
        durability.commit(&[("t", 5)]).unwrap();
        assert_eq!(recorded(dir.path())["t"], 5);
        // Everything is synced now: a walk finds nothing new.
        assert_eq!(durability.sync_new_files().unwrap(), 0);
        // A stale caller's older version leaves the record as it is.
        durability.commit(&[("t", 3)]).unwrap();
        assert_eq!(recorded(dir.path())["t"], 5);
        // A file written again at the same path (other length) is synced again.
        std::fs::write(dir.path().join("t.lance/data/a.lance"), b"more rows").unwrap();
        assert!(durability.sync_new_files().unwrap() >= 1);
        durability.commit(&[("t", 6)]).unwrap();
        assert_eq!(recorded(dir.path())["t"], 6);
    }

    #[test]
    fn both_of_lances_manifest_namings_give_the_version() {
        assert_eq!(manifest_version("7.manifest"), Some(7));
        assert_eq!(
            manifest_version(&format!("{:020}.manifest", u64::MAX - 7)),
            Some(7)
        );
        assert_eq!(manifest_version("d123.manifest"), None);
        assert_eq!(manifest_version("7.manifest-1b2c"), None);
        assert_eq!(manifest_version("latest_version_hint.json"), None);
    }
}
