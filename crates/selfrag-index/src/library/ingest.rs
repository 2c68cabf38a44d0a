//! Adding one file to the library: skip it when nothing changed (size and modification time,
//! then content hash), reuse the passages of identical content found under another path (a
//! rename or a copy: nothing parsed or embedded), and otherwise extract, chunk, embed and commit
//! it.
//!
//! A changed file's new content replaces the old in one step. A new file is written in slices
//! ([`FIRST_SLICE`] passages, then as many as all before): the first passages of a 300-page
//! book are searchable seconds after it was dropped, not once the whole book is embedded. Its
//! row says how many of how many passages are stored
//! ([`DocumentRecord::passages_expected`]); a file cut off midway (Stop, Pause, a crash) is
//! taken up where it stopped the next time it is indexed, and is listed meanwhile with the
//! passages it has.
//!
//! A new file of at most [`FIRST_SLICE`] passages (a note, a web page, a short paper) is
//! written whole in one step, and an indexing job writes many such files together
//! ([`SmallFile`], [`Library::commit_small_files`]): their passages embedded in full batches and
//! stored in one commit, their rows in another, made durable once. Per-file commits and syncs
//! had made a job of one-passage notes several times slower than the embedder.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

use super::schema::{DocumentRecord, PassageRows, documents_batch, passage_id, sql_string};
use super::{Library, Uncommitted, embed_blocking, now_ms, one_batch, path_key};
use crate::chunk::chunks;
use crate::{IndexError, PassageEmbedder};

/// A file's parse started ahead of its turn in an indexing job ([`Library::parse_ahead`]), and
/// the file as it was then.
#[derive(Debug)]
pub(crate) struct ParsedAhead {
    seen: crate::granted::SeenFile,
    size: u64,
    modified_ns: i64,
    extraction: crate::worker::Extraction,
}

impl ParsedAhead {
    /// Whether the file read at its turn (`seen`, `size`, `modified_ns`) is the one parsed:
    /// the same path, file and place read from, size and modification time. Otherwise the
    /// parse is dropped (its worker killed) and the file parsed again.
    fn is_of(&self, seen: &crate::granted::SeenFile, size: u64, modified_ns: i64) -> bool {
        self.seen.path == seen.path
            && self.seen.read_from == seen.read_from
            && self.seen.identity == seen.identity
            && self.size == size
            && self.modified_ns == modified_ns
            && modified_ns != 0
    }
}

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

/// The passages of a new document's first slice: what is searchable first of a long file
/// (about 2 s of BERT-base embedding on two cores). Each later slice holds as many passages as
/// all the slices before it, so a document of n passages is about log2(n / 16) commits.
pub(crate) const FIRST_SLICE: u32 = 16;

/// Part of a document written and searchable while the rest is still being embedded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartlySearchable {
    /// Passages stored so far.
    pub passages: u32,
    /// Passages the document has.
    pub of: u32,
}

/// What reading a file came to: done (committed, or nothing to write), or a small new file read
/// and chunked, to be embedded and committed by [`Library::commit_small_files`], alone or with
/// others.
pub(crate) enum Prepared {
    Done(IndexOutcome),
    Small(Box<SmallFile>),
}

/// A new file of at most [`FIRST_SLICE`] passages, read, parsed and chunked: its row and its
/// passages, not embedded or stored yet. Nothing of it is in the library until
/// [`Library::commit_small_files`] has stored it; dropped, it is read again by the next job.
pub(crate) struct SmallFile {
    /// The file or folder the user gave that holds it ([`Library::index_file_under`]).
    root: std::path::PathBuf,
    /// The file as the job named it.
    pub(crate) path: std::path::PathBuf,
    record: DocumentRecord,
    rows: PassageRows,
    notes: Vec<String>,
}

/// What [`Library::commit_small_files`] did: the files stored, with their outcomes, and those
/// left out because another writer stored their path or content since they were read, each with
/// its root, to be read again.
#[derive(Default)]
pub(crate) struct SmallCommit {
    pub(crate) stored: Vec<(std::path::PathBuf, IndexOutcome)>,
    pub(crate) stale: Vec<(std::path::PathBuf, std::path::PathBuf)>,
}

impl SmallFile {
    /// Passages to embed.
    pub(crate) fn passages(&self) -> usize {
        self.rows.len()
    }

    /// The content's id (its SHA-256): two files of one content are never committed together.
    pub(crate) fn document_id(&self) -> &str {
        &self.record.id
    }
}

/// Where the slice that follows `written` of `total` passages ends.
fn slice_end(written: u32, total: u32) -> u32 {
    written.saturating_mul(2).max(FIRST_SLICE).min(total)
}

impl Library {
    /// Extracts, chunks, embeds and stores one file; see the module documentation for what is
    /// skipped and how it is written. A changed file's old passages are replaced in one step:
    /// searches see either the old content or the new one, never both or neither.
    pub async fn index_file(
        &self,
        path: &Path,
        embedder: &dyn PassageEmbedder,
    ) -> Result<IndexOutcome, IndexError> {
        self.index_file_stoppable(path, embedder, &AtomicBool::new(false))
            .await
    }

    /// [`Library::index_file`], ending with [`IndexError::Stopped`] at the next embedding
    /// batch once `stop` is set (a long document is many batches); the slices written by then
    /// stay, and the next indexing of the file goes on from there.
    pub async fn index_file_stoppable(
        &self,
        path: &Path,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
    ) -> Result<IndexOutcome, IndexError> {
        self.index_file_reporting(path, embedder, stop, |_| {})
            .await
    }

    /// [`Library::index_file_stoppable`], calling `on_slice` each time a slice of a long
    /// document has become searchable before its last.
    pub async fn index_file_reporting(
        &self,
        path: &Path,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
        on_slice: impl FnMut(PartlySearchable),
    ) -> Result<IndexOutcome, IndexError> {
        self.index_file_under(path, path, embedder, stop, on_slice)
            .await
    }

    /// [`Library::index_file_reporting`] for a file of `root`, the file or folder the user gave
    /// that holds it: right before it is read the file is checked to lead to a place inside
    /// `root` ([`crate::granted::see`], else [`IndexError::LeadsOutside`]), and every read of
    /// it, here and in the extraction worker, follows no link and must find that very file
    /// ([`IndexError::Swapped`] otherwise).
    pub async fn index_file_under(
        &self,
        root: &Path,
        path: &Path,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
        on_slice: impl FnMut(PartlySearchable),
    ) -> Result<IndexOutcome, IndexError> {
        // One hold of the writer from the reading to the commit: what was decided of the file
        // (new, its content not stored) still holds when it is written.
        let _writer = self.writer(path).await;
        match self
            .prepare_file_locked(root, path, None, embedder, stop, on_slice)
            .await?
        {
            Prepared::Done(outcome) => Ok(outcome),
            Prepared::Small(file) => {
                let committed = self
                    .commit_and_sync_locked(vec![*file], embedder, stop)
                    .await?;
                only_outcome(committed.stored)
            }
        }
    }

    /// [`Library::index_file_under`] that leaves a small new file ([`SmallFile`]) read but not
    /// stored, for the caller to commit with others by [`Library::commit_small_files`].
    /// `ahead` is this file's parse started earlier ([`Library::parse_ahead`]), used when the
    /// file is still as it was then.
    pub(crate) async fn prepare_file_under(
        &self,
        root: &Path,
        path: &Path,
        ahead: Option<ParsedAhead>,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
        on_slice: impl FnMut(PartlySearchable),
    ) -> Result<Prepared, IndexError> {
        let _writer = self.writer(path).await;
        self.prepare_file_locked(root, path, ahead, embedder, stop, on_slice)
            .await
    }

    /// Starts parsing `path` (of `root`, as [`Library::index_file_under`] would read it) in a
    /// worker process now, for an indexing job to hand to [`Library::prepare_file_under`] when
    /// the file's turn comes: the next file's parse runs while this one is embedded and
    /// written, instead of the embedder waiting for it. `None` where nothing would be parsed
    /// (the file is unchanged since it was indexed, or cannot be read: its turn says why) or
    /// where parsing runs in this process, which a parse that is not wanted after all could not
    /// be stopped in.
    pub(crate) async fn parse_ahead(&self, root: &Path, path: &Path) -> Option<ParsedAhead> {
        if !self.extractor.isolates() {
            return None;
        }
        let (owned_root, owned_path) = (root.to_path_buf(), path.to_path_buf());
        let (seen, _file, size, modified_ns) =
            tokio::task::spawn_blocking(move || open_indexable(&owned_root, &owned_path))
                .await
                .ok()?
                .ok()?;
        if self
            .document(&path_key(path))
            .is_some_and(|row| row.is_unchanged(size, modified_ns))
        {
            return None;
        }
        let extraction = self.extractor.start_seen(&seen);
        Some(ParsedAhead {
            seen,
            size,
            modified_ns,
            extraction,
        })
    }

    /// [`Library::prepare_file_under`] with the writer lock held.
    async fn prepare_file_locked(
        &self,
        root: &Path,
        path: &Path,
        ahead: Option<ParsedAhead>,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
        mut on_slice: impl FnMut(PartlySearchable),
    ) -> Result<Prepared, IndexError> {
        self.step.enter_file(super::IndexStage::Reading, path);
        // A shared library's rows as they stand now: this file's row and its content's other
        // paths are decided and rewritten from what other computers committed, not from what
        // this one saw last.
        self.reload_if_shared().await?;
        let prepared = self
            .index_file_locked(root, path, ahead, embedder, stop, &mut on_slice)
            .await;
        self.set_stage(super::IndexStage::Idle);
        prepared
    }

    /// The writer's lock, waited for with the step saying so.
    async fn writer(&self, path: &Path) -> tokio::sync::MutexGuard<'_, ()> {
        match self.write.try_lock() {
            Ok(writer) => writer,
            Err(_) => {
                // The writer's own step stays on the clock: it is what this call waits for.
                self.step
                    .enter_file_if_idle(super::IndexStage::WaitingForWriter, path);
                self.write.lock().await
            }
        }
    }

    /// Embeds and stores `files` (new small files read by [`Library::prepare_file_under`], of
    /// distinct contents): their passages embedded across files, as many a call as the
    /// embedder takes ([`crate::PassageEmbedder::texts_per_call`]),
    /// added in one commit, their rows in one more, then made durable. A file whose path or
    /// content another writer stored since it was read (a watched folder's change, another
    /// computer) is left out, for the caller to read again ([`SmallCommit::stale`]). On an
    /// error nothing of the batch counts as indexed: passages stored without their rows are
    /// removed again (or when the library next opens).
    pub(crate) async fn commit_small_files(
        &self,
        files: Vec<SmallFile>,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
    ) -> Result<SmallCommit, IndexError> {
        let Some(first) = files.first() else {
            return Ok(SmallCommit::default());
        };
        let _writer = self.writer(&first.path).await;
        self.reload_if_shared().await?;
        let (fresh, stale): (Vec<SmallFile>, Vec<SmallFile>) =
            files.into_iter().partition(|file| self.still_new(file));
        let mut committed = self.commit_and_sync_locked(fresh, embedder, stop).await?;
        committed.stale = stale.into_iter().map(|f| (f.root, f.path)).collect();
        Ok(committed)
    }

    /// Whether `file` is still what it was when read: its path has no row, and its content
    /// none anywhere and nothing left unclean.
    fn still_new(&self, file: &SmallFile) -> bool {
        let committed = self.committed();
        !committed.by_path.contains_key(&file.record.path)
            && !committed.referenced(&file.record.id)
            && !self.unclean_mut().contains(&file.record.id)
    }

    /// [`Library::commit_small_files_locked`], then durable: with the writer lock held.
    async fn commit_and_sync_locked(
        &self,
        files: Vec<SmallFile>,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
    ) -> Result<SmallCommit, IndexError> {
        if files.is_empty() {
            return Ok(SmallCommit::default());
        }
        let written = self.commit_small_files_locked(files, embedder, stop).await;
        self.set_stage(super::IndexStage::Syncing);
        let durable = self.make_durable().await;
        self.set_stage(super::IndexStage::Idle);
        let stored = written?;
        durable?;
        Ok(SmallCommit {
            stored,
            stale: Vec::new(),
        })
    }

    async fn commit_small_files_locked(
        &self,
        files: Vec<SmallFile>,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
    ) -> Result<Vec<(std::path::PathBuf, IndexOutcome)>, IndexError> {
        let Some(first) = files.first().map(|f| f.path.clone()) else {
            return Ok(Vec::new());
        };
        let versions: Vec<crate::job::FileVersion> = files
            .iter()
            .map(|file| crate::job::FileVersion {
                path: file.record.path.clone(),
                size: file.record.size,
                modified_ns: file.record.modified_ns,
            })
            .collect();
        // In progress until written, all of them: an end of the app meanwhile lists each, to be
        // read alone (one file alone: the end counts on it, see `crash_guard`).
        let _committing = self.begin_committing(&versions)?;
        // The passages of all of them, and each one's row as it will be once they are stored.
        let mut rows = PassageRows::default();
        let mut stored = Vec::with_capacity(files.len());
        for file in files {
            let record = DocumentRecord {
                passages: file.rows.len() as u32,
                passages_expected: None,
                indexed_at_ms: now_ms(),
                ..file.record
            };
            rows.append(file.rows);
            stored.push((file.path, record, file.notes));
        }
        self.step.enter_file(super::IndexStage::Embedding, &first);
        let vectors = embed_stoppable(embedder, &rows, stop, &first)?;
        self.set_stage(super::IndexStage::Writing);
        let batch = rows.into_batch(vectors, embedder.dim())?;
        // Passages first, the rows after: the rows commit them.
        let _pending = Uncommitted::new(&self.uncommitted, batch.num_rows());
        self.add_passages(batch).await?;
        let records = stored.iter().map(|(_, record, _)| record.clone()).collect();
        if let Err(e) = self.commit_rows(records).await {
            for (_, record, _) in &stored {
                // Not committed: the passages must not turn up under a later run's row.
                if let Err(cleanup) = self.delete_passages(&record.id, 0..record.passages).await {
                    tracing::warn!(error = %cleanup, "removing passages whose row was not written");
                    self.unclean_mut().insert(record.id.clone());
                }
            }
            return Err(e);
        }
        Ok(stored
            .into_iter()
            .map(|(path, record, notes)| {
                let outcome = IndexOutcome::Indexed {
                    document_id: record.id,
                    passages: record.passages,
                    notes,
                };
                (path, outcome)
            })
            .collect())
    }

    fn set_stage(&self, stage: super::IndexStage) {
        self.step.enter(stage);
    }

    /// The step the library's writer is at ([`IndexStage::Idle`] between files), on which file
    /// and since when: a step that lasts shows where a job is stuck.
    pub fn current_step(&self) -> super::CurrentStep {
        self.step.now()
    }

    /// [`Library::index_file_stoppable`] with the writer lock held: done once durable.
    async fn index_file_locked(
        &self,
        root: &Path,
        path: &Path,
        ahead: Option<ParsedAhead>,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
        on_slice: &mut impl FnMut(PartlySearchable),
    ) -> Result<Prepared, IndexError> {
        // Durable whatever happened: a failure after a write leaves that write recorded too.
        let outcome = self
            .index_file_unsynced(root, path, ahead, embedder, stop, on_slice)
            .await;
        self.set_stage(super::IndexStage::Syncing);
        let durable = self.make_durable().await;
        let outcome = outcome?;
        durable?;
        Ok(outcome)
    }

    async fn index_file_unsynced(
        &self,
        root: &Path,
        path: &Path,
        ahead: Option<ParsedAhead>,
        embedder: &dyn PassageEmbedder,
        stop: &AtomicBool,
        on_slice: &mut impl FnMut(PartlySearchable),
    ) -> Result<Prepared, IndexError> {
        let read_err = |source| IndexError::Read {
            path: path.to_path_buf(),
            source,
        };
        self.set_stage(super::IndexStage::Reading);
        let (owned_root, owned_path) = (root.to_path_buf(), path.to_path_buf());
        let (seen, file, size, modified_ns) =
            tokio::task::spawn_blocking(move || open_indexable(&owned_root, &owned_path))
                .await
                .map_err(|e| read_err(std::io::Error::other(e)))??;
        let key = path_key(path);
        let previous = self.document(&key);
        if let Some(prev) = &previous
            && prev.is_unchanged(size, modified_ns)
        {
            return Ok(Prepared::Done(IndexOutcome::Unchanged {
                document_id: prev.id.clone(),
            }));
        }
        // From here the file is read: one that ended the app twice in a row is refused, and
        // this one is marked in progress until the end of this call, whatever ends it.
        let reading = self.begin_reading(
            path,
            crate::job::FileVersion {
                path: key.clone(),
                size,
                modified_ns,
            },
        )?;
        let keep = self
            .shares_source_of(size)
            .then_some(self.shared_source_limit);
        let (document_id, kept) =
            tokio::task::spawn_blocking(move || hash_file_keeping(file, keep))
                .await
                .map_err(|e| read_err(std::io::Error::other(e)))?
                .map_err(read_err)?;
        if let Some(bytes) = kept {
            // Before any of it is committed: a document of a shared library that another
            // computer can cite has its source in the store.
            self.store_source(&document_id, bytes).await?;
        }
        let stamp = FileStamp {
            key,
            size,
            modified_ns,
        };
        if let Some(outcome) = self
            .reuse_indexed(previous.as_ref(), &document_id, &stamp)
            .await?
        {
            return Ok(Prepared::Done(outcome));
        }

        self.set_stage(super::IndexStage::Parsing);
        // Parsed ahead while the file before was handled, when it is still the file it was.
        let extraction = match ahead.filter(|a| a.is_of(&seen, size, modified_ns)) {
            Some(ahead) => ahead.extraction,
            None => self.extractor.start_seen(&seen),
        };
        let extracted = extraction.finish(stop).await?;
        if let Some(prev) = previous
            .as_ref()
            .filter(|p| p.id == document_id && p.is_complete() && p.works.is_none())
        {
            // Indexed before works existed and unchanged: only its work is new.
            let mut works = selfrag_works::WorkRecords::default();
            works.set_from_file(&extracted.work);
            self.commit(DocumentRecord {
                size,
                modified_ns,
                works: Some(works),
                ..prev.clone()
            })
            .await?;
            return Ok(Prepared::Done(IndexOutcome::Unchanged { document_id }));
        }
        let mut rows = self.passage_rows(path, &document_id, &stamp.key, &extracted)?;
        let total = rows.len() as u32;
        let mut written = self.resume_point(&document_id, total).await?;
        // Stored by the run that was cut off.
        drop(rows.split_front(written as usize));
        let mut record = DocumentRecord {
            id: document_id.clone(),
            path: stamp.key,
            title: extracted.title,
            pages: extracted.pages.len().max(1) as u32,
            passages: written,
            size,
            modified_ns,
            indexed_at_ms: now_ms(),
            passages_expected: Some(total),
            // What the file says is read again; what Zotero, a bibliography file or the person
            // said stays.
            works: {
                let mut works = previous
                    .as_ref()
                    .and_then(|p| p.works.clone())
                    .unwrap_or_default();
                works.set_from_file(&extracted.work);
                Some(works)
            },
        };
        let content_has_rows = self.committed().referenced(&document_id);
        if previous.is_none() && written == 0 && total <= FIRST_SLICE && !content_has_rows {
            // A new small file: written whole, with others, or now and alone where a run of
            // the app ended while reading it (so that another end falls on it alone).
            let small = SmallFile {
                root: root.to_path_buf(),
                path: path.to_path_buf(),
                record,
                rows,
                notes: extracted.notes,
            };
            if !reading.after_an_end() {
                return Ok(Prepared::Small(Box::new(small)));
            }
            let done = self
                .commit_small_files_locked(vec![small], embedder, stop)
                .await?;
            drop(reading);
            return only_outcome(done).map(Prepared::Done);
        }
        // A changed file's old content stays searchable until the new one replaces it whole.
        let in_one_step = previous.as_ref().is_some_and(DocumentRecord::is_complete);
        let mut old_content = previous.filter(|p| p.id != document_id);
        while written < total {
            let end = if in_one_step {
                total
            } else {
                slice_end(written, total)
            };
            let slice = rows.split_front((end - written) as usize);
            self.set_stage(super::IndexStage::Embedding);
            let vectors = embed_stoppable(embedder, &slice, stop, path)?;
            self.set_stage(super::IndexStage::Writing);
            let batch = slice.into_batch(vectors, embedder.dim())?;
            // Passages first, the document row after: the row commits them.
            let _pending = Uncommitted::new(&self.uncommitted, batch.num_rows());
            self.add_passages(batch).await?;
            record.passages = end;
            record.passages_expected = (end < total).then_some(total);
            if let Err(e) = self.commit_content(&record).await {
                // Not committed: the slice must not turn up under a later run's row.
                if let Err(cleanup) = self.delete_passages(&document_id, written..end).await {
                    tracing::warn!(error = %cleanup, "removing a slice whose row was not written");
                    self.unclean_mut().insert(document_id.clone());
                }
                return Err(e);
            }
            written = end;
            // The path holds the new content from its first slice on.
            self.replaced(old_content.take().as_ref()).await?;
            if written < total {
                self.make_durable().await?;
                on_slice(PartlySearchable {
                    passages: written,
                    of: total,
                });
            }
        }
        Ok(Prepared::Done(IndexOutcome::Indexed {
            document_id,
            passages: total,
            notes: extracted.notes,
        }))
    }

    /// The passage at which writing content `doc_id` of `total` passages begins: where the
    /// run that was cut off stopped, as its rows say (when they counted the same `total`),
    /// else 0. Passages of that content past that point (a slice stored whose row was not)
    /// are deleted first, as are all of them when it begins at 0.
    async fn resume_point(&self, doc_id: &str, total: u32) -> Result<u32, IndexError> {
        let row = self
            .committed()
            .by_path
            .values()
            .find(|d| d.id == doc_id)
            .cloned();
        let unclean = self.unclean_mut().remove(doc_id);
        let Some(row) = row else {
            // Nothing refers to it: no run of it was cut off. A slice whose row failed was
            // deleted then (or marked unclean), and what a killed run left is removed when
            // the library opens.
            if unclean {
                self.delete_passages_of(doc_id).await?;
            }
            return Ok(0);
        };
        let resume = match row.passages_expected {
            Some(expected) if expected == total && row.passages < total => row.passages,
            _ => 0,
        };
        let stored = self.stored_passages(doc_id).await?;
        if stored == u64::from(resume) && row.passages == resume {
            return Ok(resume);
        }
        if resume > 0 && stored > u64::from(resume) {
            self.delete_passages(doc_id, resume..total).await?;
            if self.stored_passages(doc_id).await? == u64::from(resume) {
                return Ok(resume);
            }
        }
        // Not what the rows say: start again, and so do the rows.
        self.delete_passages_of(doc_id).await?;
        self.commit_content(&DocumentRecord {
            passages: 0,
            passages_expected: Some(total),
            ..row
        })
        .await?;
        Ok(0)
    }

    /// How many passages of content `doc_id` the table holds.
    async fn stored_passages(&self, doc_id: &str) -> Result<u64, IndexError> {
        let only = format!("doc_id = {}", sql_string(doc_id));
        let stored = self
            .passages
            .count_rows(Some(only))
            .await
            .map_err(self.store_err())?;
        Ok(stored as u64)
    }

    fn unclean_mut(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        // A poisoned set only costs a clearing that was not needed.
        self.unclean.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Deletes the passages of content `doc_id` numbered `range`. Not in a shared library:
    /// another computer may hold the same content (passages are keyed by the content's hash),
    /// and what it has written there is never this computer's to remove; rows that no document
    /// counts are never returned by a search.
    async fn delete_passages(
        &self,
        doc_id: &str,
        range: std::ops::Range<u32>,
    ) -> Result<(), IndexError> {
        if self.location.is_shared() {
            return Ok(());
        }
        let ids: Vec<String> = range
            .map(|i| sql_string(&passage_id(doc_id, i as usize)))
            .collect();
        for chunk in ids.chunks(500) {
            self.passages
                .delete(&format!("id IN ({})", chunk.join(",")))
                .await
                .map_err(self.store_err())?;
        }
        Ok(())
    }

    /// Writes `record` and the rows of the other paths that hold its content (a copy of a
    /// document that was cut off), whose counts follow it, in one commit.
    async fn commit_content(&self, record: &DocumentRecord) -> Result<(), IndexError> {
        let copies: Vec<DocumentRecord> = self
            .committed()
            .by_path
            .values()
            .filter(|d| d.id == record.id && d.path != record.path)
            .map(|d| DocumentRecord {
                passages: record.passages,
                passages_expected: record.passages_expected,
                ..d.clone()
            })
            .collect();
        if copies.is_empty() {
            return self.commit(record.clone()).await;
        }
        let rows: Vec<DocumentRecord> = std::iter::once(record.clone()).chain(copies).collect();
        let mut merge = self.documents.merge_insert(&["path"]);
        merge
            .when_matched_update_all(None)
            .when_not_matched_insert_all();
        merge
            .execute(one_batch(documents_batch(&rows)?))
            .await
            .map_err(self.store_err())?;
        let mut committed = self.committed_mut();
        for row in rows {
            committed.by_path.insert(row.path.clone(), row);
        }
        Ok(())
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
        // A document indexed before works existed is read again for its work (its passages,
        // all stored, are not embedded again: see `resume_point`).
        if let Some(prev) = previous
            && prev.id == document_id
            && prev.is_complete()
            && prev.works.is_some()
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
        if previous.is_some_and(|p| p.id == document_id && p.is_complete()) {
            // Indexed before works existed: parsed again for its work alone (below).
            return Ok(None);
        }
        // A copy cut off midway is finished by writing the content, not reused.
        let same_content = self
            .committed()
            .by_path
            .values()
            .find(|d| d.id == document_id && d.is_complete())
            .cloned();
        let Some(twin) = same_content else {
            return Ok(None);
        };
        // What the file says is the twin's (the same bytes); what Zotero, a bibliography file
        // or the person said of this path stays this path's own.
        let works = twin.works.as_ref().map(|theirs| {
            let mut works = previous.and_then(|p| p.works.clone()).unwrap_or_default();
            works.set_from_file(&theirs.merged());
            works
        });
        self.commit(DocumentRecord {
            path: stamp.key.clone(),
            size: stamp.size,
            modified_ns: stamp.modified_ns,
            indexed_at_ms: now_ms(),
            works,
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
        // Counted as they come, and no row is built past the limit: each row copies the title
        // and section, and a few MiB of text make hundreds of thousands of passages. The rest
        // is only counted, for the error.
        let mut passages = 0usize;
        for page in &extracted.pages {
            for chunk in chunks(&page.text) {
                passages += 1;
                if passages > self.passage_limit {
                    if passages == self.passage_limit + 1 {
                        rows = PassageRows::default();
                    }
                    continue;
                }
                rows.push(
                    document_id,
                    key,
                    &extracted.title,
                    (page.number, page.label.as_deref(), page.ocr_confidence),
                    chunk,
                );
            }
        }
        if passages == 0 {
            return Err(IndexError::Empty {
                path: path.to_path_buf(),
            });
        }
        if passages > self.passage_limit {
            return Err(IndexError::TooManyPassages {
                path: path.to_path_buf(),
                passages,
                limit: self.passage_limit,
            });
        }
        Ok(rows)
    }

    /// Adds passage rows. In a local library, an append. In a shared one, a merge on the
    /// passage id that inserts only the rows no computer wrote yet: when two computers write
    /// the same content at once, Lance sees both insert the same ids and retries one against
    /// the other, which then inserts nothing, so no passage is stored twice.
    async fn add_passages(&self, batch: arrow_array::RecordBatch) -> Result<(), IndexError> {
        if self.location.is_shared() {
            let mut merge = self.passages.merge_insert(&["id"]);
            merge.when_not_matched_insert_all();
            merge
                .execute(one_batch(batch))
                .await
                .map_err(self.store_err())?;
        } else {
            self.passages
                .add(batch)
                .execute()
                .await
                .map_err(self.store_err())?;
        }
        Ok(())
    }

    /// Writes the document row for `doc.path` (insert or replace, one LanceDB commit).
    async fn commit(&self, doc: DocumentRecord) -> Result<(), IndexError> {
        self.commit_rows(vec![doc]).await
    }

    /// Writes `rows` (each inserting or replacing its path's row) in one LanceDB commit.
    async fn commit_rows(&self, rows: Vec<DocumentRecord>) -> Result<(), IndexError> {
        let batch = documents_batch(&rows)?;
        let replacing = {
            let committed = self.committed();
            rows.iter().any(|r| committed.by_path.contains_key(&r.path))
        };
        // In a shared library another computer may be writing the same path's row: a merge on
        // the path lets Lance see that and keep one row.
        if self.location.is_shared() || replacing {
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
            // New paths: a plain append is as atomic as a merge and much cheaper.
            self.documents
                .add(batch)
                .execute()
                .await
                .map_err(self.store_err())?;
        }
        let mut committed = self.committed_mut();
        for row in rows {
            committed.by_path.insert(row.path.clone(), row);
        }
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

/// The outcome of the one file committed.
fn only_outcome(
    mut done: Vec<(std::path::PathBuf, IndexOutcome)>,
) -> Result<IndexOutcome, IndexError> {
    match (done.pop(), done.is_empty()) {
        (Some((_, outcome)), true) => Ok(outcome),
        _ => Err(IndexError::Schema(
            "one file committed did not come back with one outcome".into(),
        )),
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
    hash_file(std::fs::File::open(path)?)
}

/// SHA-256 of what is left to read of `file`, a block at a time.
fn hash_file(file: std::fs::File) -> std::io::Result<String> {
    hash_file_keeping(file, None).map(|(hash, _)| hash)
}

/// [`hash_file`], and the bytes read where `keep_up_to` says how many may be kept (for the store
/// of a shared library: the very bytes hashed, so the stored copy is the content its name
/// says); none where the file holds more (it grew since its size was read).
fn hash_file_keeping(
    mut file: std::fs::File,
    keep_up_to: Option<u64>,
) -> std::io::Result<(String, Option<Vec<u8>>)> {
    use std::io::Read;
    let mut hasher = Sha256::new();
    let mut block = vec![0u8; 1 << 20];
    let mut kept = keep_up_to.map(|_| Vec::new());
    loop {
        match file.read(&mut block) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&block[..n]);
                if let Some(bytes) = &mut kept {
                    bytes.extend_from_slice(&block[..n]);
                    if keep_up_to.is_some_and(|limit| bytes.len() as u64 > limit) {
                        kept = None;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((hex(&hasher.finalize()), kept))
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

/// `path` of `root` checked ([`crate::granted::see`]) and opened (no link followed, the file
/// seen), with its size and modification time, once it is known to be a regular file of a
/// supported kind within the size limit for its kind: all decided before a byte of it is read
/// (a folder may hold gigabytes of files no parser reads).
fn open_indexable(
    root: &Path,
    path: &Path,
) -> Result<(crate::granted::SeenFile, std::fs::File, u64, i64), IndexError> {
    use crate::granted::{Waiting, open_seen, see};
    let extension = crate::extract::supported_extension(path)?;
    let seen = see(root, path)?;
    // Never waits: a FIFO is opened at once, and refused below.
    let (file, stat) = open_seen(&seen, Waiting::Never)?;
    if !stat.is_file() {
        return Err(IndexError::Unsupported {
            path: path.to_path_buf(),
            reason: "not a regular file".into(),
        });
    }
    let size = stat.len();
    crate::extract::check_size(path, &extension, size)?;
    let modified_ns = modified_ns(&stat);
    Ok((seen, file, size, modified_ns))
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
    for batch in rows
        .embedding_inputs()
        .chunks(embedder.texts_per_call().max(1))
    {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two-dimensional vectors from a text's length; stops the run once it has embedded
    /// `stop_after` texts; takes `per_call` texts a call and keeps the largest call it got.
    struct Lengths {
        stop: AtomicBool,
        embedded: std::sync::atomic::AtomicUsize,
        stop_after: usize,
        per_call: usize,
        largest_call: std::sync::atomic::AtomicUsize,
    }

    impl Lengths {
        fn stopping_after(stop_after: usize) -> Self {
            Self {
                stop: AtomicBool::new(false),
                embedded: 0.into(),
                stop_after,
                per_call: crate::DEFAULT_TEXTS_PER_CALL,
                largest_call: 0.into(),
            }
        }
    }

    impl crate::PassageEmbedder for Lengths {
        fn model_id(&self) -> String {
            "lengths".into()
        }
        fn dim(&self) -> usize {
            2
        }
        fn texts_per_call(&self) -> usize {
            self.per_call
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
            self.largest_call.fetch_max(texts.len(), Ordering::SeqCst);
            let done = self.embedded.fetch_add(texts.len(), Ordering::SeqCst) + texts.len();
            if done >= self.stop_after {
                self.stop.store(true, Ordering::SeqCst);
            }
            Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
        }
    }

    /// A library holding a long text file whose indexing stopped after its first slice, the
    /// file, and the embedder (stopped: clear its flag to go on).
    async fn cut_after_first_slice() -> (tempfile::TempDir, std::path::PathBuf, Lengths, Library) {
        let tmp = tempfile::tempdir().unwrap();
        let text: String = (0..1500)
            .map(|i| format!("Paragraph {i} tells of river {i} in detail.\n\n"))
            .collect();
        let file = tmp.path().join("long.txt");
        std::fs::write(&file, text).unwrap();
        let embedder = Lengths::stopping_after(FIRST_SLICE as usize);
        let lib = Library::open(&tmp.path().join("lib"), &embedder)
            .await
            .unwrap();
        // Only passages count: not the probe sentences of the library's fingerprint.
        embedder.embedded.store(0, Ordering::SeqCst);
        let cut = lib
            .index_file_stoppable(&file, &embedder, &embedder.stop)
            .await;
        assert!(matches!(cut, Err(IndexError::Stopped { .. })), "{cut:?}");
        (tmp, file, embedder, lib)
    }

    /// A small file read for a batch whose content another writer stored before the batch's
    /// commit (a watched folder's copy of it) is left out of the commit and read again: its
    /// passages are stored once, and the copy then reuses them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_small_file_whose_content_was_stored_meanwhile_is_read_again_not_stored_twice() {
        let tmp = tempfile::tempdir().unwrap();
        let first = tmp.path().join("note.txt");
        let copy = tmp.path().join("copy.txt");
        std::fs::write(&first, "A note on herons and the river they fish in.").unwrap();
        std::fs::copy(&first, &copy).unwrap();
        let embedder = Lengths::stopping_after(usize::MAX);
        let lib = Library::open(&tmp.path().join("lib"), &embedder)
            .await
            .unwrap();
        let never = AtomicBool::new(false);
        let Prepared::Small(read) = lib
            .prepare_file_under(&copy, &copy, None, &embedder, &never, |_| {})
            .await
            .unwrap()
        else {
            panic!("a one-passage note is a small file");
        };
        // Meanwhile another writer stores the same content under the other path.
        lib.index_file(&first, &embedder).await.unwrap();
        let committed = lib
            .commit_small_files(vec![*read], &embedder, &never)
            .await
            .unwrap();
        assert!(committed.stored.is_empty());
        assert_eq!(committed.stale, vec![(copy.clone(), copy.clone())]);
        let again = lib.index_file(&copy, &embedder).await.unwrap();
        assert!(matches!(again, IndexOutcome::Reused { .. }), "{again:?}");
        assert_eq!(lib.passages.count_rows(None).await.unwrap(), 1);
    }

    /// The library hands the embedder as many texts a call as it asks for (a GPU's embedder
    /// asks for 256, a CPU's for 32), a large file's and a batch of small files' alike.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_embedder_gets_as_many_texts_a_call_as_it_asks_for() {
        let tmp = tempfile::tempdir().unwrap();
        let text: String = (0..2000)
            .map(|i| format!("Paragraph {i} tells of river {i} in detail.\n\n"))
            .collect();
        let long = tmp.path().join("long.txt");
        std::fs::write(&long, text).unwrap();
        let notes: Vec<std::path::PathBuf> = (0..12)
            .map(|i| {
                let note = tmp.path().join(format!("note{i}.txt"));
                std::fs::write(&note, format!("Note {i} on herons and river {i}.")).unwrap();
                note
            })
            .collect();
        for per_call in [5, 64] {
            let embedder = Lengths {
                per_call,
                ..Lengths::stopping_after(usize::MAX)
            };
            let lib = Library::open(&tmp.path().join(format!("lib-{per_call}")), &embedder)
                .await
                .unwrap();
            embedder.largest_call.store(0, Ordering::SeqCst);
            lib.index_file(&long, &embedder).await.unwrap();
            let passages = lib.documents()[0].passages as usize;
            assert!(passages > 64, "{passages} passages");
            // The first slice is FIRST_SLICE passages; the rest is cut by the embedder's calls.
            assert_eq!(embedder.largest_call.load(Ordering::SeqCst), per_call);
            embedder.largest_call.store(0, Ordering::SeqCst);
            let never = AtomicBool::new(false);
            let mut small = Vec::new();
            for note in &notes {
                let Prepared::Small(read) = lib
                    .prepare_file_under(note, note, None, &embedder, &never, |_| {})
                    .await
                    .unwrap()
                else {
                    panic!("a one-passage note is a small file");
                };
                small.push(*read);
            }
            let committed = lib
                .commit_small_files(small, &embedder, &never)
                .await
                .unwrap();
            assert_eq!(committed.stored.len(), 12);
            assert_eq!(
                embedder.largest_call.load(Ordering::SeqCst),
                per_call.min(12)
            );
        }
    }

    /// A slice stored whose row was not (its row's commit failed) is deleted before the
    /// document goes on from where its row says: every passage is stored once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn passages_past_the_row_are_deleted_before_the_document_goes_on() {
        let (_tmp, file, embedder, lib) = cut_after_first_slice().await;
        let row = lib.documents().remove(0);
        let total = row.passages_expected.unwrap();
        assert!(total > 2 * FIRST_SLICE, "{total} passages");
        assert_eq!(row.passages, FIRST_SLICE);

        // The next slice's passages, stored without the row that would commit them.
        let extracted = lib.extractor.extract(&file).await.unwrap();
        let mut rows = lib
            .passage_rows(&file, &row.id, &row.path, &extracted)
            .unwrap();
        drop(rows.split_front(FIRST_SLICE as usize));
        let stray = rows.split_front(FIRST_SLICE as usize);
        let vectors = vec![vec![0.0, 1.0]; stray.len()];
        lib.passages
            .add(stray.into_batch(vectors, 2).unwrap())
            .execute()
            .await
            .unwrap();
        assert_eq!(
            lib.stats().await.unwrap().passages,
            2 * FIRST_SLICE as usize
        );
        // Stored, not counted by the row: no search or citation returns them.
        assert_eq!(
            lib.passages_of(&row.id).await.unwrap().len(),
            FIRST_SLICE as usize
        );

        embedder.stop.store(false, Ordering::SeqCst);
        let outcome = lib.index_file(&file, &embedder).await.unwrap();
        assert!(matches!(outcome, IndexOutcome::Indexed { passages, .. } if passages == total));
        assert_eq!(
            embedder.embedded.load(Ordering::SeqCst),
            total as usize,
            "the first slice once, the rest once"
        );
        let ids: Vec<String> = lib
            .passages_of(&row.id)
            .await
            .unwrap()
            .into_iter()
            .map(|h| h.passage_id)
            .collect();
        let expected: Vec<String> = (0..total).map(|i| format!("{}:{i}", row.id)).collect();
        assert_eq!(ids, expected);
        assert_eq!(lib.stats().await.unwrap().passages, total as usize);
    }

    /// Rows that counted another total (the parser changed since the run was cut off) start
    /// the document again, rows included.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_document_cut_off_with_another_count_starts_again() {
        let (_tmp, file, embedder, lib) = cut_after_first_slice().await;
        let row = lib.documents().remove(0);
        let total = row.passages_expected.unwrap();
        lib.commit_content(&DocumentRecord {
            passages_expected: Some(total + 1),
            ..row.clone()
        })
        .await
        .unwrap();
        // Stopped again before the first slice: the rows say what is stored, nothing.
        let cut = lib
            .index_file_stoppable(&file, &embedder, &embedder.stop)
            .await;
        assert!(matches!(cut, Err(IndexError::Stopped { .. })), "{cut:?}");
        let listed = lib.documents().remove(0);
        assert_eq!(
            (listed.passages, listed.passages_expected),
            (0, Some(total))
        );
        assert_eq!(lib.stats().await.unwrap().passages, 0);

        embedder.stop.store(false, Ordering::SeqCst);
        let embedded_before = embedder.embedded.load(Ordering::SeqCst);
        lib.index_file(&file, &embedder).await.unwrap();
        assert_eq!(
            embedder.embedded.load(Ordering::SeqCst) - embedded_before,
            total as usize
        );
        assert_eq!(
            lib.passages_of(&row.id).await.unwrap().len(),
            total as usize
        );
        assert_eq!(lib.stats().await.unwrap().passages, total as usize);
    }

    #[test]
    fn slices_begin_at_the_first_and_double() {
        let mut ends = Vec::new();
        let mut written = 0;
        while written < 200 {
            written = slice_end(written, 200);
            ends.push(written);
        }
        assert_eq!(ends, [16, 32, 64, 128, 200]);
        assert_eq!(slice_end(0, 5), 5);
        assert_eq!(
            slice_end(40, 1000),
            80,
            "a resumed document doubles from where it is"
        );
    }
}
