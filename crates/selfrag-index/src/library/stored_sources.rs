//! A shared library's sources in its store: each file indexed into it keeps its bytes under
//! `sources/<SHA-256>` (the content id every passage names), so that the evidence viewer of every
//! computer of the lab opens the cited page of a file indexed on another.
//!
//! - **Written once per content.** A content already in the store is not sent again (asked
//!   first), and the write is conditional (`If-None-Match: *`), so two computers indexing the
//!   same file store it once.
//! - **Chosen per computer.** [`Library::with_shared_sources`] sets the largest file sent; 0
//!   keeps every source of this computer to itself (licensed PDFs, private notes). A file over
//!   the cap stays on its computer too.
//! - **Never removed.** Another computer's document may hold the same content, and this one's
//!   view of the rows may be seconds old: as with passages, removing a document leaves its
//!   source in the store.
//! - **Read where needed.** Where no path on this computer holds a cited content, the store's
//!   copy is fetched into this computer's state folder (`sources/<id>.<ext>`), checked to hash
//!   to its id, and served from there; a copy that does not hash to its id is refused.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::Library;
use super::ingest::{content_hash, hex};
use crate::IndexError;

/// The largest file a computer keeps in a shared library's store by default: 100 MiB, past
/// nearly every paper and book (the 747 PDFs of the papers benchmark are all under 40 MiB).
pub const DEFAULT_SHARED_SOURCE_LIMIT: u64 = 100 << 20;

/// The object a content's bytes are stored as, under the library's prefix.
fn object_name(document_id: &str) -> String {
    format!("sources/{document_id}")
}

/// Whether `id` can be a content id: 64 lowercase hexadecimal digits (it names a file).
fn is_content_id(id: &str) -> bool {
    id.len() == 64
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Library {
    /// Whether a file of `size` bytes indexed here goes into the store: a shared library, and
    /// a size within this computer's cap.
    pub(super) fn shares_source_of(&self, size: u64) -> bool {
        self.shared.is_some() && size > 0 && size <= self.shared_source_limit
    }

    /// Keeps `bytes`, the content `document_id`, in the store, unless it is there already.
    pub(super) async fn store_source(
        &self,
        document_id: &str,
        bytes: Vec<u8>,
    ) -> Result<(), IndexError> {
        let Some(store) = &self.shared else {
            return Ok(());
        };
        let name = object_name(document_id);
        if store.exists(&name).await? {
            return Ok(());
        }
        if !store.create(&name, bytes).await? {
            tracing::debug!(%name, "another computer stored this source first");
        }
        Ok(())
    }

    /// A file on this computer holding content `document_id`, fetched from the store into the
    /// state folder (named with `extension`, by which the parser knows its format) where needed;
    /// `None` where this is not a shared library or its store has no copy.
    pub(super) async fn stored_source(
        &self,
        document_id: &str,
        extension: &str,
    ) -> Result<Option<PathBuf>, IndexError> {
        let Some(store) = &self.shared else {
            return Ok(None);
        };
        if !is_content_id(document_id) {
            return Ok(None);
        }
        let folder = self.state_dir.join("sources");
        let cached = folder.join(format!("{document_id}.{extension}"));
        let id = document_id.to_owned();
        let check = cached.clone();
        let already =
            tokio::task::spawn_blocking(move || content_hash(&check).is_ok_and(|hash| hash == id))
                .await
                .unwrap_or(false);
        if already {
            return Ok(Some(cached));
        }
        let Some(bytes) = store.read(&object_name(document_id)).await? else {
            return Ok(None);
        };
        if hex(&Sha256::digest(&bytes)) != document_id {
            return Err(IndexError::Location {
                location: store.uri.as_str().to_owned(),
                problem: format!(
                    "its copy of a source ({}) does not hold the content it is named for; remove that object, and index the file again on a computer that has it",
                    object_name(document_id)
                ),
            });
        }
        let write = |path: &Path, bytes: &[u8]| -> Result<(), IndexError> {
            std::fs::create_dir_all(&folder)
                .and_then(|()| crate::atomic::write(path, bytes))
                .map_err(|source| IndexError::Read {
                    path: path.to_path_buf(),
                    source,
                })
        };
        write(&cached, &bytes)?;
        Ok(Some(cached))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_content_id_names_a_stored_source() {
        let id = hex(&Sha256::digest(b"a paper"));
        assert!(is_content_id(&id));
        assert_eq!(object_name(&id), format!("sources/{id}"));
        assert!(!is_content_id("../library.json"));
        assert!(!is_content_id(&id.to_uppercase()));
        assert!(!is_content_id(&id[1..]));
    }
}
