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
use crate::extract::check_size;

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
    /// state folder (named with `extension`, by which the parser knows its format) where needed,
    /// and its bytes when `keep_bytes` (the very bytes checked against the id); `None` where this
    /// is not a shared library or its store has no copy. A copy larger than the format's
    /// indexing limit is refused before it is read.
    pub(super) async fn stored_source(
        &self,
        document_id: &str,
        extension: &str,
        keep_bytes: bool,
    ) -> Result<Option<(PathBuf, Option<Vec<u8>>)>, IndexError> {
        let Some(store) = &self.shared else {
            return Ok(None);
        };
        if !is_content_id(document_id) {
            return Ok(None);
        }
        let folder = self.state_dir.join("sources");
        let cached = folder.join(format!("{document_id}.{extension}"));
        let (id, check) = (document_id.to_owned(), cached.clone());
        let already = tokio::task::spawn_blocking(move || cached_copy(&check, &id, keep_bytes))
            .await
            .unwrap_or(None);
        if let Some(bytes) = already {
            return Ok(Some((cached, bytes)));
        }
        let name = object_name(document_id);
        let Some(size) = store.size_of(&name).await? else {
            return Ok(None);
        };
        check_size(&cached, extension, size)?;
        let Some(bytes) = store.read(&name).await? else {
            return Ok(None);
        };
        if hex(&Sha256::digest(&bytes)) != document_id {
            return Err(IndexError::Location {
                location: store.uri.as_str().to_owned(),
                problem: format!(
                    "its copy of a source ({name}) does not hold the content it is named for; remove that object, and index the file again on a computer that has it"
                ),
            });
        }
        let path = cached.clone();
        let bytes = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&folder)
                .and_then(|()| crate::atomic::write(&path, &bytes))
                .map(|()| bytes)
                .map_err(|source| IndexError::Read { path, source })
        })
        .await
        .map_err(|e| IndexError::Read {
            path: cached.clone(),
            source: std::io::Error::other(e.to_string()),
        })??;
        Ok(Some((cached, keep_bytes.then_some(bytes))))
    }
}

/// The copy at `path` where it holds content `id`: `Some` with its bytes when `keep_bytes` (read
/// once, hashed, returned), `None` where there is none or it holds other content.
fn cached_copy(path: &Path, id: &str, keep_bytes: bool) -> Option<Option<Vec<u8>>> {
    if keep_bytes {
        let bytes = std::fs::read(path).ok()?;
        (hex(&Sha256::digest(&bytes)) == id).then_some(Some(bytes))
    } else {
        (content_hash(path).ok()? == id).then_some(None)
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
