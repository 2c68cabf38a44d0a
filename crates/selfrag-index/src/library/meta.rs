//! `library.json`: the library's commit pointer. It names the schema version, the embedder whose
//! vectors the passages hold, and which LanceDB tables are current. Anything that must change
//! several tables at once (a migration, a re-embedding) builds new tables first and then
//! replaces this file atomically, so a crash leaves either the old library or the new one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::location::SharedStore;
use crate::IndexError;

/// The schema this build writes. 1 was the walking skeleton's (documents keyed by content hash,
/// no `library.json`); 2 keys documents by path and records size and modification time.
pub const SCHEMA_VERSION: u32 = 2;

/// The contents of `library.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LibraryMeta {
    pub schema_version: u32,
    /// [`crate::PassageEmbedder::model_id`] of the vectors in `passages_table`.
    pub embedder: String,
    pub dim: usize,
    pub documents_table: String,
    pub passages_table: String,
    /// The embedder's vectors of the probe sentences ([`super::fingerprint`]), recorded when
    /// a library is made or re-embedded. A shared library refuses an embedder whose
    /// fingerprint disagrees; a local one keeps its vectors for the same model under another
    /// name (moved, or on an embeddings server) and re-embeds for another model. Absent in
    /// local libraries made before it was recorded, which compare embedders by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<Vec<Vec<f32>>>,
}

/// The commit pointer's name, in a library folder and under a shared library's prefix.
pub(crate) const META_FILE: &str = "library.json";

impl LibraryMeta {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(META_FILE)
    }

    /// `None` when the library has no `library.json` (new, or written by schema 1).
    pub fn load(dir: &Path) -> Result<Option<Self>, IndexError> {
        let path = Self::path(dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(IndexError::Read { path, source }),
        };
        let meta: Self = serde_json::from_str(&text).map_err(|e| {
            IndexError::Schema(format!(
                "{} is unreadable ({e}); restore it from a backup or remove the library folder {} and index your documents again",
                path.display(),
                dir.display()
            ))
        })?;
        if meta.schema_version > SCHEMA_VERSION {
            return Err(IndexError::Schema(format!(
                "the library at {} has schema version {} but this build reads up to {SCHEMA_VERSION}; update Self-RAG Desktop",
                dir.display(),
                meta.schema_version
            )));
        }
        Ok(Some(meta))
    }

    /// Replaces `library.json` atomically: temporary file, fsync, rename, fsync of the folder.
    pub fn store(&self, dir: &Path) -> Result<(), IndexError> {
        let path = Self::path(dir);
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| IndexError::Schema(format!("cannot encode library.json: {e}")))?;
        write_atomically(&path, text.as_bytes())
    }
}

impl LibraryMeta {
    /// A shared library's `library.json`, or `None` where it has none yet.
    pub(crate) async fn load_shared(store: &SharedStore) -> Result<Option<Self>, IndexError> {
        let Some(bytes) = store.read(META_FILE).await? else {
            return Ok(None);
        };
        let meta: Self = serde_json::from_slice(&bytes).map_err(|e| {
            IndexError::Schema(format!(
                "{}/{META_FILE} is unreadable ({e}); restore it from the store's versions or backups",
                store.uri.as_str()
            ))
        })?;
        if meta.schema_version > SCHEMA_VERSION {
            return Err(IndexError::Schema(format!(
                "the library at {} has schema version {} but this build reads up to {SCHEMA_VERSION}; update Self-RAG Desktop",
                store.uri.as_str(),
                meta.schema_version
            )));
        }
        Ok(Some(meta))
    }

    /// Writes a shared library's `library.json` unless another machine wrote one first; then
    /// theirs is returned, and it is the library's.
    pub(crate) async fn create_shared(self, store: &SharedStore) -> Result<Self, IndexError> {
        let text = serde_json::to_vec_pretty(&self)
            .map_err(|e| IndexError::Schema(format!("cannot encode library.json: {e}")))?;
        if store.create(META_FILE, text).await? {
            return Ok(self);
        }
        Self::load_shared(store).await?.ok_or_else(|| {
            IndexError::Schema(format!(
                "{}/{META_FILE} was written by another computer and then removed; open the library again",
                store.uri.as_str()
            ))
        })
    }
}

/// Writes `bytes` to `path` atomically and durably ([`crate::atomic::write`]).
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), IndexError> {
    crate::atomic::write(path, bytes).map_err(|source| IndexError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads one of the library's small state files (`job.json`, `watched.json`): `None` when it
/// does not exist. One that cannot be read as `T` is never overwritten in place: it is renamed
/// to `<name>.broken-<unix seconds>` beside itself, which the log says, and `None` is returned,
/// so the next write starts a new file and the old one stays for the user to look at.
pub(crate) fn read_state<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    let text = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read; ignored");
            return None;
        }
    };
    match serde_json::from_slice(&text) {
        Ok(value) => Some(value),
        Err(e) => {
            let seconds = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let aside = path.with_file_name(format!("{name}.broken-{seconds}"));
            match std::fs::rename(path, &aside) {
                Ok(()) => tracing::warn!(
                    path = %path.display(),
                    moved_to = %aside.display(),
                    error = %e,
                    "unreadable; moved aside and started anew"
                ),
                Err(rename) => tracing::warn!(
                    path = %path.display(),
                    error = %e,
                    rename_error = %rename,
                    "unreadable, and could not be moved aside"
                ),
            }
            None
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod state_tests {
    use super::*;

    #[test]
    fn a_broken_state_file_is_moved_aside_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("watched.json");
        assert_eq!(read_state::<Vec<String>>(&path), None);
        std::fs::write(&path, "{ not json").unwrap();
        assert_eq!(read_state::<Vec<String>>(&path), None);
        assert!(!path.exists(), "the broken file left its place");
        let aside: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert!(aside[0].starts_with("watched.json.broken-"), "{aside:?}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(&aside[0])).unwrap(),
            "{ not json"
        );
        std::fs::write(&path, r#"["a"]"#).unwrap();
        assert_eq!(read_state::<Vec<String>>(&path), Some(vec!["a".to_owned()]));
    }
}
