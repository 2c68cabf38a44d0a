//! Adding one file to the library: skip it when nothing changed (size and modification time,
//! then content hash), reuse the passages of identical content found under another path (a
//! rename or a copy: nothing parsed or embedded), and otherwise extract, chunk, embed and commit
//! it so that the file's old content is replaced in one step.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

use super::schema::{DocumentRecord, PassageRows, documents_batch};
use super::{EMBED_BATCH, Library, Uncommitted, embed_blocking, now_ms, one_batch, path_key};
use crate::chunk::chunk_text;
use crate::{IndexError, PassageEmbedder};

/// What indexing one file did.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexOutcome {
    /// The file was new or changed; it was parsed and embedded into this many passages.
    Indexed {
        document_id: String,
        passages: u32,
        /// What the reader should know although the file was indexed ("page 3 has no text
        /// layer (scanned?)").
        notes: Vec<String>,
    },
    /// The same content was already in the library under another path (a rename or a copy):
    /// its passages now also belong to this path; nothing was parsed or embedded.
    Reused {
        document_id: String,
        passages: u32,
        from: String,
    },
    /// The file is in the library as it is on disk.
    Unchanged { document_id: String },
}

impl Library {
    /// Extracts, chunks, embeds and stores one file; see the module documentation for what is
    /// skipped. A changed file's old passages are replaced in one step: searches see either the
    /// old content or the new one, never both or neither.
    pub async fn index_file(
        &self,
        path: &Path,
        embedder: &dyn PassageEmbedder,
    ) -> Result<IndexOutcome, IndexError> {
        self.index_file_stoppable(path, embedder, &AtomicBool::new(false))
            .await
    }

    /// [`Library::index_file`], ending with [`IndexError::Stopped`] at the next embedding
    /// batch once `stop` is set (a long document is many batches); nothing of the file is
    /// written then.
    pub async fn index_file_stoppable(
        &self,
        path: &Path,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
    ) -> Result<IndexOutcome, IndexError> {
        self.set_stage(super::IndexStage::WaitingForWriter);
        let _writer = self.write.lock().await;
        let outcome = self.index_file_locked(path, embedder, stop).await;
        self.set_stage(super::IndexStage::Idle);
        outcome
    }

    fn set_stage(&self, stage: super::IndexStage) {
        self.stage.store(stage as u8, Ordering::Relaxed);
    }

    /// [`Library::index_file_stoppable`] with the writer lock held: done once durable.
    pub(crate) async fn index_file_locked(
        &self,
        path: &Path,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
    ) -> Result<IndexOutcome, IndexError> {
        // Durable whatever happened: a failure after a write leaves that write recorded too.
        let outcome = self.index_file_unsynced(path, embedder, stop).await;
        self.set_stage(super::IndexStage::Syncing);
        let durable = self.make_durable().await;
        let outcome = outcome?;
        durable?;
        Ok(outcome)
    }

    async fn index_file_unsynced(
        &self,
        path: &Path,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
    ) -> Result<IndexOutcome, IndexError> {
        let read_err = |source| IndexError::Read {
            path: path.to_path_buf(),
            source,
        };
        self.set_stage(super::IndexStage::Reading);
        let (size, modified_ns) = stat_indexable(path).await?;
        let key = path_key(path);
        let previous = self.document(&key);
        if let Some(prev) = &previous
            && prev.size == size
            && prev.modified_ns == modified_ns
            && modified_ns != 0
        {
            return Ok(IndexOutcome::Unchanged {
                document_id: prev.id.clone(),
            });
        }
        let owned = path.to_path_buf();
        let document_id = tokio::task::spawn_blocking(move || content_hash(&owned))
            .await
            .map_err(|e| read_err(std::io::Error::other(e)))?
            .map_err(read_err)?;
        let stamp = FileStamp {
            key,
            size,
            modified_ns,
        };
        if let Some(outcome) = self
            .reuse_indexed(previous.as_ref(), &document_id, &stamp)
            .await?
        {
            return Ok(outcome);
        }

        self.set_stage(super::IndexStage::Parsing);
        let extracted = self.extractor.extract(path).await?;
        let rows = self.passage_rows(path, &document_id, &stamp.key, &extracted)?;
        self.set_stage(super::IndexStage::Embedding);
        let vectors = embed_stoppable(embedder, &rows, stop, path)?;
        self.set_stage(super::IndexStage::Writing);
        let count = rows.len() as u32;
        let batch = rows.into_batch(vectors, embedder.dim())?;
        // Passages first, the document row last: the row commits the document.
        let _pending = Uncommitted::new(&self.uncommitted, count as usize);
        self.passages
            .add(batch)
            .execute()
            .await
            .map_err(self.store_err())?;
        self.commit(DocumentRecord {
            id: document_id.clone(),
            path: stamp.key,
            title: extracted.title,
            pages: extracted.pages.len().max(1) as u32,
            passages: count,
            size,
            modified_ns,
            indexed_at_ms: now_ms(),
        })
        .await?;
        self.replaced(previous.as_ref()).await?;
        Ok(IndexOutcome::Indexed {
            document_id,
            passages: count,
            notes: extracted.notes,
        })
    }

    /// The outcome when the content `document_id` is indexed already: under this path (the
    /// file was touched, not changed: its new time is remembered so it is not read next time),
    /// or under another path (its passages serve this one too). `None` when it is new.
    async fn reuse_indexed(
        &self,
        previous: Option<&DocumentRecord>,
        document_id: &str,
        stamp: &FileStamp,
    ) -> Result<Option<IndexOutcome>, IndexError> {
        if let Some(prev) = previous
            && prev.id == document_id
        {
            self.commit(DocumentRecord {
                size: stamp.size,
                modified_ns: stamp.modified_ns,
                ..prev.clone()
            })
            .await?;
            return Ok(Some(IndexOutcome::Unchanged {
                document_id: document_id.to_owned(),
            }));
        }
        let same_content = self
            .committed()
            .by_path
            .values()
            .find(|d| d.id == document_id)
            .cloned();
        let Some(twin) = same_content else {
            return Ok(None);
        };
        self.commit(DocumentRecord {
            path: stamp.key.clone(),
            size: stamp.size,
            modified_ns: stamp.modified_ns,
            indexed_at_ms: now_ms(),
            ..twin.clone()
        })
        .await?;
        self.replaced(previous).await?;
        Ok(Some(IndexOutcome::Reused {
            document_id: document_id.to_owned(),
            passages: twin.passages,
            from: twin.path,
        }))
    }

    /// The passages of `extracted`, page by page; an error when there are none or more than a
    /// document may have.
    fn passage_rows(
        &self,
        path: &Path,
        document_id: &str,
        key: &str,
        extracted: &crate::extract::ExtractedDocument,
    ) -> Result<PassageRows, IndexError> {
        let mut rows = PassageRows::default();
        for page in &extracted.pages {
            for chunk in chunk_text(&page.text) {
                rows.push(
                    document_id,
                    key,
                    &extracted.title,
                    (page.number, page.label.as_deref(), page.ocr_confidence),
                    chunk,
                );
            }
        }
        if rows.is_empty() {
            return Err(IndexError::Empty {
                path: path.to_path_buf(),
            });
        }
        if rows.len() > self.passage_limit {
            return Err(IndexError::TooManyPassages {
                path: path.to_path_buf(),
                passages: rows.len(),
                limit: self.passage_limit,
            });
        }
        Ok(rows)
    }

    /// Writes the document row for `doc.path` (insert or replace, one LanceDB commit).
    async fn commit(&self, doc: DocumentRecord) -> Result<(), IndexError> {
        let batch = documents_batch(std::slice::from_ref(&doc))?;
        if self.committed().by_path.contains_key(&doc.path) {
            // Replacing: one merge commit swaps the row, so searches see old or new content.
            let mut merge = self.documents.merge_insert(&["path"]);
            merge
                .when_matched_update_all(None)
                .when_not_matched_insert_all();
            merge
                .execute(one_batch(batch))
                .await
                .map_err(self.store_err())?;
        } else {
            // A new path: a plain append is as atomic as a merge and much cheaper.
            self.documents
                .add(batch)
                .execute()
                .await
                .map_err(self.store_err())?;
        }
        self.committed_mut().by_path.insert(doc.path.clone(), doc);
        Ok(())
    }

    /// After a path got new content: drop the old content's passages if nothing refers to them.
    async fn replaced(&self, previous: Option<&DocumentRecord>) -> Result<(), IndexError> {
        match previous {
            Some(prev) => self.collect_garbage(&prev.id).await,
            None => Ok(()),
        }
    }
}

fn modified_ns(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// SHA-256 of the file, read a block at a time (a file is never held whole in the app).
pub(super) fn content_hash(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut block = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut block) {
            Ok(0) => break,
            Ok(n) => hasher.update(&block[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hex(&hasher.finalize()))
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A file's place in the library and what says whether it changed.
struct FileStamp {
    /// The path as the library keys it.
    key: String,
    size: u64,
    modified_ns: i64,
}

/// The size and modification time of `path`, once it is known to be a regular file of a
/// supported kind within the size limit for its kind, checked before a byte of it is read (a
/// folder may hold gigabytes of files no parser reads).
async fn stat_indexable(path: &Path) -> Result<(u64, i64), IndexError> {
    let extension = crate::extract::supported_extension(path)?;
    let stat = tokio::fs::metadata(path)
        .await
        .map_err(|source| IndexError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if !stat.is_file() {
        return Err(IndexError::Unsupported {
            path: path.to_path_buf(),
            reason: "not a regular file".into(),
        });
    }
    let size = stat.len();
    crate::extract::check_size(path, &extension, size)?;
    Ok((size, modified_ns(&stat)))
}

/// The embeddings of `rows`, batch by batch; `Stopped` as soon as `stop` is set between
/// batches, so Stop acts inside a long file.
fn embed_stoppable(
    embedder: &dyn PassageEmbedder,
    rows: &PassageRows,
    stop: &AtomicBool,
    path: &Path,
) -> Result<Vec<Vec<f32>>, IndexError> {
    let mut vectors = Vec::with_capacity(rows.len());
    for batch in rows.embedding_inputs().chunks(EMBED_BATCH) {
        if stop.load(Ordering::SeqCst) {
            return Err(IndexError::Stopped {
                path: path.to_path_buf(),
            });
        }
        let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
        vectors.extend(embed_blocking(embedder, &refs)?);
    }
    Ok(vectors)
}
