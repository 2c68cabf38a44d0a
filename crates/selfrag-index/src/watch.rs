//! Watched folders: file-system notifications (notify) gathered into batches once the folder has
//! been quiet for a moment (debouncing), then applied to the library: files created, modified or
//! renamed are indexed (a rename reuses the passages, nothing is embedded again), files and
//! folders deleted or renamed away are removed. The watched folders are remembered in
//! `watched.json` beside the library.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::job::{JobEvent, JobSummary, walk_under};
use crate::library::meta::{read_state, write_atomically};
use crate::library::path_key;
use crate::{IndexError, IndexOutcome, Library, PassageEmbedder};

/// How long a folder must be quiet before a batch of changes is applied, and the longest a
/// change waits while a folder keeps changing.
pub const QUIET: Duration = Duration::from_millis(400);
pub const MAX_WAIT: Duration = Duration::from_secs(3);

/// Watches folders and hands out the paths that changed, in debounced batches.
pub struct FolderWatcher {
    watcher: notify::RecommendedWatcher,
    changes: mpsc::UnboundedReceiver<Change>,
}

/// What the file system notifications said.
#[derive(Debug)]
enum Change {
    Paths(Vec<PathBuf>),
    /// Events were lost (the kernel's queue overflowed, or the watcher failed): which paths
    /// changed is unknown.
    Lost(String),
}

/// One debounced batch of changes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ChangeBatch {
    /// The paths that changed, sorted, each once.
    pub paths: Vec<PathBuf>,
    /// Notifications were lost while the batch gathered, and why: the caller must walk the
    /// watched folders again to find what changed.
    pub rescan: Option<String>,
}

impl std::fmt::Debug for FolderWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FolderWatcher").finish_non_exhaustive()
    }
}

impl FolderWatcher {
    pub fn new() -> Result<Self, IndexError> {
        let (tx, changes) = mpsc::unbounded_channel();
        let on_event = move |event: notify::Result<notify::Event>| {
            let message = match event {
                // The kernel's queue overflowed (inotify's IN_Q_OVERFLOW, FSEvents' must-scan).
                Ok(e) if e.need_rescan() => {
                    Change::Lost("the system dropped file notifications".into())
                }
                // Reads (access events) change nothing.
                Ok(e) if matches!(e.kind, notify::EventKind::Access(_)) => return,
                Ok(e) => Change::Paths(e.paths),
                Err(e) => Change::Lost(e.to_string()),
            };
            let _ = tx.send(message);
        };
        // notify follows links by default, adding a recursive watch through each link to a
        // folder: `refs -> ../../..` would watch the home folder (and spend the session's
        // inotify watches). Links inside a watched folder are the walk's to judge.
        let config = notify::Config::default().with_follow_symlinks(false);
        let watcher =
            notify::RecommendedWatcher::new(on_event, config).map_err(|e| IndexError::Watch {
                path: PathBuf::new(),
                reason: e.to_string(),
            })?;
        Ok(Self { watcher, changes })
    }

    /// Starts watching `folder` and everything under it.
    pub fn watch(&mut self, folder: &Path) -> Result<(), IndexError> {
        self.watcher
            .watch(folder, RecursiveMode::Recursive)
            .map_err(|e| IndexError::Watch {
                path: folder.to_path_buf(),
                reason: e.to_string(),
            })
    }

    pub fn unwatch(&mut self, folder: &Path) {
        let _ = self.watcher.unwatch(folder);
    }

    /// The next batch of changes: waits for a change, then gathers more until none came for
    /// [`QUIET`] or [`MAX_WAIT`] passed. `None` when the watcher stopped.
    pub async fn next_batch(&mut self) -> Option<ChangeBatch> {
        gather(&mut self.changes).await
    }
}

async fn gather(changes: &mut mpsc::UnboundedReceiver<Change>) -> Option<ChangeBatch> {
    let mut paths = BTreeSet::new();
    let mut rescan = None;
    let mut absorb = |change: Change| match change {
        Change::Paths(changed) => paths.extend(changed),
        Change::Lost(reason) => {
            tracing::warn!(%reason, "file notifications lost; the watched folders are walked again");
            rescan = Some(reason);
        }
    };
    absorb(changes.recv().await?);
    let deadline = tokio::time::Instant::now() + MAX_WAIT;
    loop {
        let wait = QUIET.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        match tokio::time::timeout(wait, changes.recv()).await {
            Ok(Some(more)) => absorb(more),
            Ok(None) | Err(_) => break,
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
    }
    Some(ChangeBatch {
        paths: paths.into_iter().collect(),
        rescan,
    })
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Watched {
    folders: Vec<String>,
}

impl Library {
    fn watched_file(&self) -> PathBuf {
        self.state_dir().join("watched.json")
    }

    /// The folders the user asked to keep in sync with the library.
    pub fn watched_folders(&self) -> Vec<PathBuf> {
        read_state::<Watched>(&self.watched_file())
            .map(|w| w.folders.into_iter().map(PathBuf::from).collect())
            .unwrap_or_default()
    }

    /// Remembers (or forgets) `folder` as watched.
    pub fn set_watched(&self, folder: &Path, watched: bool) -> Result<(), IndexError> {
        let key = path_key(folder);
        let mut folders: BTreeSet<String> = self
            .watched_folders()
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        if watched {
            folders.insert(key);
        } else {
            folders.remove(&key);
        }
        let text = serde_json::to_string_pretty(&Watched {
            folders: folders.into_iter().collect(),
        })
        .map_err(|e| IndexError::Schema(format!("cannot encode watched.json: {e}")))?;
        write_atomically(&self.watched_file(), text.as_bytes())
    }

    /// Applies a batch of changed paths: what exists is indexed (a folder: everything under
    /// it), what is gone is removed. Creations go first so that a rename within the batch
    /// finds its content still in the library and reuses it.
    pub async fn apply_changes(
        &self,
        changed: &[PathBuf],
        embedder: &dyn PassageEmbedder,
        mut on_event: impl FnMut(JobEvent),
    ) -> Result<JobSummary, IndexError> {
        let mut summary = JobSummary::default();
        let watched: Vec<(PathBuf, Option<PathBuf>)> = self
            .watched_folders()
            .into_iter()
            .map(|folder| {
                let resolved = std::fs::canonicalize(&folder).ok();
                (folder, resolved)
            })
            .collect();
        let mut files = Vec::new();
        let mut gone = Vec::new();
        for changed_path in changed {
            // The watched folder the change is in: links are followed only inside it, and
            // what lies under a hidden folder below it is skipped, as the first walk does. A
            // change in none is dropped, never indexed as a root of its own.
            let Some((folder, path)) = place_in_watched(&watched, changed_path) else {
                tracing::debug!(path = %changed_path.display(), "a change outside every watched folder, dropped");
                continue;
            };
            if path.starts_with(self.state_dir()) || hidden_below(&folder, &path) {
                continue;
            }
            if std::fs::symlink_metadata(&path).is_ok() {
                let walk = walk_under(&folder, &path);
                files.extend(walk.files.into_iter().map(|file| (file, folder.clone())));
                for (link, target) in walk.links_outside {
                    summary.skipped += 1;
                    on_event(JobEvent::LinkSkipped {
                        path: link.display().to_string(),
                        target: target.display().to_string(),
                    });
                }
            } else {
                gone.push(path);
            }
        }
        files.sort();
        files.dedup_by(|a, b| a.0 == b.0);
        for (file, folder) in files {
            let path = file.display().to_string();
            let result = self
                .index_file_under(&folder, &file, embedder, &AtomicBool::new(false), |part| {
                    on_event(JobEvent::FileSearchable {
                        path: path.clone(),
                        passages: part.passages,
                        of: part.of,
                    })
                })
                .await;
            if result.is_err() && std::fs::symlink_metadata(&file).is_err() {
                // Deleted or renamed while this batch waited its turn (a busy library): not a
                // failure, a removal; the new name, if any, comes in the next batch.
                gone.push(file);
                continue;
            }
            match &result {
                Ok(IndexOutcome::Indexed { .. }) => summary.indexed += 1,
                Ok(_) => summary.skipped += 1,
                // Editors' temporary files and the like: not documents, not worth an event.
                Err(IndexError::Unsupported { .. }) => {
                    summary.skipped += 1;
                    continue;
                }
                Err(_) => summary.failed += 1,
            }
            on_event(JobEvent::FileDone { path, result });
        }
        for path in gone {
            for removed in self.remove(&path).await? {
                summary.removed += 1;
                on_event(JobEvent::Removed { path: removed });
            }
        }
        Ok(summary)
    }
}

/// The watched folder (of `watched`, each with its canonical path) that `path` lies in, and
/// `path` as seen under that folder's own name. By name first; else by canonical path, for a
/// system that reports resolved paths (macOS's FSEvents: `/private/tmp/w/a.md` for a folder
/// watched as `/tmp/w`), the change then being named under the folder as the user named it.
/// `None` when it lies in none: a change there is not the library's.
fn place_in_watched(
    watched: &[(PathBuf, Option<PathBuf>)],
    path: &Path,
) -> Option<(PathBuf, PathBuf)> {
    let by_name = watched
        .iter()
        .filter(|(folder, _)| path.starts_with(folder))
        .max_by_key(|(folder, _)| folder.as_os_str().len());
    if let Some((folder, _)) = by_name {
        return Some((folder.clone(), path.to_path_buf()));
    }
    let resolved = resolve_existing(path)?;
    watched
        .iter()
        .filter_map(|(folder, canonical)| {
            let below = resolved.strip_prefix(canonical.as_ref()?).ok()?;
            Some((canonical.as_ref()?.as_os_str().len(), folder, below))
        })
        .max_by_key(|(length, _, _)| *length)
        .map(|(_, folder, below)| (folder.clone(), folder.join(below)))
}

/// `path` with the folders of it that exist resolved (a deleted file's folder still does); its
/// own name is kept, so that a link is placed as itself, not as its target.
fn resolve_existing(path: &Path) -> Option<PathBuf> {
    let mut missing = vec![path.file_name()?];
    let mut existing = path.parent()?;
    loop {
        if let Ok(resolved) = std::fs::canonicalize(existing) {
            return Some(missing.iter().rev().fold(resolved, |p, name| p.join(name)));
        }
        missing.push(existing.file_name()?);
        existing = existing.parent()?;
    }
}

/// Whether `path` is hidden as seen from the watched folder `root`: it, or a folder between
/// `root` and it, has a name that starts with a dot (`.foo.swp`, `.git/objects/…`). The walk
/// of a folder skips exactly these (see [`crate::job::walk_under`]), so a watched change and
/// the first walk agree. `root` itself may be hidden: the user chose it.
fn hidden_below(root: &Path, path: &Path) -> bool {
    let dotted = |name: &std::ffi::OsStr| name.to_string_lossy().starts_with('.');
    path.strip_prefix(root)
        .is_ok_and(|below| below.components().any(|c| dotted(c.as_os_str())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A notification that says events were lost (a full kernel queue) makes the batch ask
    /// for a rescan, with the paths that did arrive kept.
    #[tokio::test]
    async fn lost_notifications_ask_for_a_rescan() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        tx.send(Change::Paths(vec![PathBuf::from("/w/b.md")]))
            .unwrap();
        tx.send(Change::Lost("the system dropped file notifications".into()))
            .unwrap();
        tx.send(Change::Paths(vec![PathBuf::from("/w/a.md")]))
            .unwrap();
        drop(tx);
        let batch = gather(&mut rx).await.unwrap();
        assert_eq!(
            batch.paths,
            [PathBuf::from("/w/a.md"), PathBuf::from("/w/b.md")]
        );
        assert_eq!(
            batch.rescan.as_deref(),
            Some("the system dropped file notifications")
        );
        assert!(gather(&mut rx).await.is_none());

        let (tx, mut rx) = mpsc::unbounded_channel();
        tx.send(Change::Paths(vec![PathBuf::from("/w/c.md")]))
            .unwrap();
        drop(tx);
        assert_eq!(gather(&mut rx).await.unwrap().rescan, None);
    }

    /// notify marks an inotify queue overflow with the rescan flag.
    #[test]
    fn an_overflow_event_needs_a_rescan() {
        let event =
            notify::Event::new(notify::EventKind::Other).set_flag(notify::event::Flag::Rescan);
        assert!(event.need_rescan());
    }
}
