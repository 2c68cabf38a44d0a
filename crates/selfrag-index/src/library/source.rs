//! A cited passage in its source, for the evidence viewer: the file a passage came from, found
//! by the passage's id (never by a path from the caller), checked to be the very content that
//! was indexed, and either handed over whole (a PDF, which the viewer renders and marks) or read
//! again into the page text the passage's character span refers to (every other format).
//!
//! Only documents the library holds are served: a passage id names a content (`{doc_id}:{n}`),
//! and the content's committed documents name the paths. A file that is gone or changed since it
//! was indexed is an error that says so, never a view of other text. A shared library's content
//! that no path on this computer holds is served from the store's copy (`stored_sources`).

use std::path::{Path, PathBuf};

use lancedb::query::{QueryBase, Select};
use sha2::{Digest, Sha256};

use super::ingest::{content_hash, hex};
use super::schema::sql_string;
use super::search::{self, SearchHit};
use super::{DocumentRecord, Library};
use crate::IndexError;
use crate::extract::{check_size, supported_extension};

/// One passage and where the evidence viewer finds it in its source.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct PassageSource {
    pub passage_id: String,
    /// The content's id: what [`Library::document_pdf`] takes.
    pub document_id: String,
    /// The file checked to hold the indexed content.
    pub path: String,
    pub title: String,
    /// 1-based page of the passage (PDF), the page the viewer opens.
    pub page: Option<u32>,
    /// The number printed on that page, where it differs from `page`.
    pub page_label: Option<String>,
    /// The OCR engine's mean word confidence (0–1) where the page was a scan read by OCR.
    pub ocr_confidence: Option<f32>,
    /// Pages of the document: 1 for formats without pages.
    pub pages: u32,
    /// The passage text as stored and cited.
    pub text: String,
    pub view: SourceView,
    /// Shown from the copy a shared library keeps in its store: no file on this computer holds
    /// the content (it was indexed on another).
    #[serde(default)]
    pub stored_copy: bool,
}

/// How the viewer shows the source.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum SourceView {
    /// Rendered from the file's bytes ([`Library::document_pdf`]) and the passage marked on its
    /// page by its text.
    Pdf,
    /// The text the passage was cut from (the page text of HTML, Markdown, plain text, DOCX).
    Text {
        text: String,
        /// The passage's place in `text`, in characters (Unicode scalar values), `[start, end)`;
        /// `None` where the text read now no longer holds the passage there or anywhere (the
        /// parser changed since the file was indexed).
        #[cfg_attr(feature = "typescript", ts(type = "[number, number] | null"))]
        span: Option<(u64, u64)>,
    },
}

impl Library {
    /// The source of passage `passage_id` as the evidence viewer shows it.
    pub async fn passage_source(&self, passage_id: &str) -> Result<PassageSource, IndexError> {
        let hit = self.passage(passage_id).await?;
        let (document, held_at, bytes) = self.indexed_file(&hit.document_id, false).await?;
        let path = PathBuf::from(&document.path);
        let view = if supported_extension(&path)? == "pdf" {
            SourceView::Pdf
        } else {
            drop(bytes);
            let extracted = self.extractor.extract(&held_at).await?;
            let page = extracted.pages.into_iter().find(|p| p.number == hit.page);
            let text = page.map(|p| p.text).unwrap_or_default();
            let span = locate(&text, hit.span, &hit.text);
            SourceView::Text { text, span }
        };
        Ok(PassageSource {
            passage_id: hit.passage_id,
            document_id: hit.document_id,
            path: document.path,
            title: hit.title,
            page: hit.page,
            page_label: hit.page_label,
            ocr_confidence: hit.ocr_confidence,
            pages: document.pages,
            text: hit.text,
            view,
            stored_copy: held_at != path,
        })
    }

    /// The file on this computer holding the content passage `passage_id` was cut from: a path
    /// it was indexed from that still holds it, else a shared library's copy from its store.
    pub async fn source_file(&self, passage_id: &str) -> Result<PathBuf, IndexError> {
        let hit = self.passage(passage_id).await?;
        Ok(self.indexed_file(&hit.document_id, false).await?.1)
    }

    /// The bytes of the library's PDF with content id `document_id`, checked to be the content
    /// that was indexed.
    pub async fn document_pdf(&self, document_id: &str) -> Result<Vec<u8>, IndexError> {
        let (document, _, bytes) = self.indexed_file(document_id, true).await?;
        let path = Path::new(&document.path);
        if supported_extension(path)? != "pdf" {
            return Err(IndexError::Unsupported {
                path: path.to_path_buf(),
                reason: "only a PDF is rendered by the viewer; its text is shown instead".into(),
            });
        }
        Ok(bytes.unwrap_or_default())
    }

    /// The committed passage `passage_id`.
    async fn passage(&self, passage_id: &str) -> Result<SearchHit, IndexError> {
        let unknown = || IndexError::UnknownPassage {
            id: passage_id.to_string(),
        };
        let batches = self
            .collect(
                self.passages
                    .query()
                    .only_if(format!("id = {}", sql_string(passage_id)))
                    .select(Select::columns(search::HIT_COLUMNS))
                    .limit(1),
            )
            .await?;
        let committed = self.committed();
        let by_id = committed.by_id();
        let mut hits = Vec::new();
        for b in &batches {
            hits.extend(search::hits_from(b, &by_id, None)?);
        }
        hits.pop().ok_or_else(unknown)
    }

    /// A document with content `document_id`, the file on this computer that holds that
    /// content, and its bytes when `keep_bytes`. Several paths may share a content: the first
    /// one that still holds it is used; where none does here, a shared library's copy in its
    /// store (see `stored_sources`).
    async fn indexed_file(
        &self,
        document_id: &str,
        keep_bytes: bool,
    ) -> Result<(DocumentRecord, PathBuf, Option<Vec<u8>>), IndexError> {
        let documents: Vec<DocumentRecord> = self
            .documents()
            .into_iter()
            .filter(|d| d.id == document_id)
            .collect();
        let Some(first) = documents.first() else {
            return Err(IndexError::UnknownDocument {
                id: document_id.to_string(),
            });
        };
        let mut changed = None;
        let mut unreadable = None;
        for document in &documents {
            let path = PathBuf::from(&document.path);
            let id = document.id.clone();
            let check = tokio::task::spawn_blocking(move || check_file(&path, &id, keep_bytes))
                .await
                .map_err(|e| IndexError::Read {
                    path: PathBuf::from(&document.path),
                    source: std::io::Error::other(e.to_string()),
                })?;
            match check {
                Ok(FileCheck::Same(bytes)) => {
                    return Ok((document.clone(), PathBuf::from(&document.path), bytes));
                }
                Ok(FileCheck::Changed) => changed = Some(PathBuf::from(&document.path)),
                Ok(FileCheck::Missing) => {}
                // Another computer's path (a home folder this user may not read) holds no file
                // of this one's: the store's copy may still serve it.
                Err(e) => {
                    unreadable.get_or_insert(e);
                }
            }
        }
        let extension = supported_extension(Path::new(&first.path))?;
        match self
            .stored_source(document_id, &extension, keep_bytes)
            .await
        {
            Ok(Some((copy, bytes))) => return Ok((first.clone(), copy, bytes)),
            Ok(None) => {}
            // What this computer's files say is the more useful news; the store's is logged.
            Err(e) if changed.is_some() || unreadable.is_some() => {
                tracing::warn!(error = %e, "the shared library's copy of a source could not be read");
            }
            Err(e) => return Err(e),
        }
        // A changed file says more than an unreadable one, and that more than a missing one.
        Err(match (changed, unreadable) {
            (Some(path), _) => IndexError::SourceChanged { path },
            (None, Some(error)) => error,
            (None, None) => IndexError::SourceMissing {
                path: PathBuf::from(&first.path),
            },
        })
    }
}

/// What a document's path holds now.
enum FileCheck {
    /// The indexed content (with its bytes, when asked for).
    Same(Option<Vec<u8>>),
    /// Other content.
    Changed,
    /// Nothing (moved or deleted).
    Missing,
}

/// Whether `path` still holds the content `id` (its SHA-256, as indexing computed it).
fn check_file(path: &Path, id: &str, keep_bytes: bool) -> Result<FileCheck, IndexError> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => return Ok(FileCheck::Missing),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FileCheck::Missing),
        Err(source) => {
            return Err(IndexError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    // A file over the indexing limit cannot be the content that was indexed.
    if check_size(path, &supported_extension(path)?, meta.len()).is_err() {
        return Ok(FileCheck::Changed);
    }
    let read = |source| IndexError::Read {
        path: path.to_path_buf(),
        source,
    };
    let (hash, bytes) = if keep_bytes {
        let bytes = std::fs::read(path).map_err(read)?;
        (hex(&Sha256::digest(&bytes)), Some(bytes))
    } else {
        (content_hash(path).map_err(read)?, None)
    };
    Ok(if hash == id {
        FileCheck::Same(bytes)
    } else {
        FileCheck::Changed
    })
}

/// Where the passage is in `text`: at its stored span when the text there is still the
/// passage (chunking trims the span's ends), else at the first place the passage occurs.
fn locate(text: &str, span: (u64, u64), passage: &str) -> Option<(u64, u64)> {
    let (start, end) = (span.0 as usize, span.1 as usize);
    let at_span: String = text
        .chars()
        .skip(start)
        .take(end.saturating_sub(start))
        .collect();
    if end > start && at_span.trim() == passage {
        return Some(span);
    }
    let byte = text.find(passage)?;
    let start = text[..byte].chars().count() as u64;
    Some((start, start + passage.chars().count() as u64))
}
