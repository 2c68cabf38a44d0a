//! The engine's side of the library: indexing jobs (one at a time, resumed after a crash,
//! paused and resumed when the user asks),
//! re-indexing and removing documents, searching, statistics and watched folders, with
//! selfrag-index's events turned into the [`IndexEvent`]s both front ends show. What runs and how
//! it stops is `jobs.rs`'.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use selfrag_index::{
    CurrentStep, FolderWatcher, IndexError, IndexOutcome, IndexStage, JobEvent, JobStop,
    JobSummary, LibraryStats, PassageSource, SearchFilter, SearchHit, SearchMode, SearchRequest,
};

use crate::jobs::IndexingFlags;
use crate::{Engine, EngineError, IndexEvent, JobKind};

/// Words of a passage that make one query of [`Engine::measure_search_depths`].
const QUERY_WORDS: usize = 12;

/// One search from a front end.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    pub text: String,
    pub mode: SearchMode,
    pub k: usize,
    pub filter: SearchFilter,
}

impl Engine {
    /// Indexes files and folders (recursively), streaming progress, together with any job a
    /// crash interrupted. One file's failure is an event, never the end of the job. Waits for a
    /// running job to end first; [`Engine::cancel`] with [`JobKind::Indexing`] stops it at the
    /// next file or embedding batch.
    ///
    /// Where the person turned look-ups on ([`Engine::set_look_up_works`]), the works of the
    /// documents the job indexed are then looked up by their DOI or arXiv id
    /// ([`IndexEvent::WorksLookedUp`] reports it, after the job's `Finished`); off, nothing is
    /// sent.
    pub async fn index_paths(
        &self,
        paths: &[PathBuf],
        on_event: impl Fn(IndexEvent),
    ) -> Result<IndexEvent, EngineError> {
        let (finished, indexed) = self.index_paths_alone(paths, &on_event).await?;
        self.look_up_after_job(&indexed, &on_event).await?;
        Ok(finished)
    }

    /// [`Engine::index_paths`] without the look-ups after it: the job's last event and the
    /// paths of the documents it indexed (new, changed or the same content at a new path).
    pub(crate) async fn index_paths_alone(
        &self,
        paths: &[PathBuf],
        on_event: impl Fn(IndexEvent),
    ) -> Result<(IndexEvent, Vec<PathBuf>), EngineError> {
        let _one_at_a_time = self.jobs.indexing_lock().await;
        let job = self.jobs.start(JobKind::Indexing);
        self.run_index_job(paths, job.indexing_flags(), on_event)
            .await
    }

    /// Takes up the paused indexing job ([`Engine::pause_indexing`]) where it stopped: the
    /// files it had done cost a `stat` each. An error when no job is paused.
    pub async fn resume_indexing(
        &self,
        on_event: impl Fn(IndexEvent),
    ) -> Result<IndexEvent, EngineError> {
        let one_at_a_time = self.jobs.indexing_lock().await;
        let paused = self.library().await?.take_paused_job()?;
        if paused.is_empty() {
            return Err(EngineError::NothingPaused);
        }
        let job = self.jobs.start(JobKind::Indexing);
        let (finished, indexed) = self
            .run_index_job(&paused, job.indexing_flags(), &on_event)
            .await?;
        drop(one_at_a_time);
        self.look_up_after_job(&indexed, &on_event).await?;
        Ok(finished)
    }

    /// The files and folders of the paused indexing job, empty when none is paused.
    pub async fn paused_indexing(&self) -> Result<Vec<PathBuf>, EngineError> {
        Ok(self.library().await?.paused_job())
    }

    /// Forgets the paused indexing job: what it indexed stays, the rest will not be.
    pub async fn forget_paused_indexing(&self) -> Result<(), EngineError> {
        Ok(self.library().await?.forget_paused_job()?)
    }

    /// Parses and embeds the library's document at `path` again, as a job of its own. The
    /// library skips a file whose size, time and content are unchanged, so the document is
    /// removed first; its passages then come from a fresh parse (or from another path with the
    /// same content, which the job reports). Only a document the library holds, read under
    /// the watched folder that holds it, or else as the file alone: a document whose path now
    /// leads out of that (a `notes.txt` swapped for a link) is refused, naming it, and stays as
    /// it was. Pause stops it as Stop does.
    pub async fn reindex_document(
        &self,
        path: &Path,
        on_event: impl Fn(IndexEvent),
    ) -> Result<IndexEvent, EngineError> {
        let library = self.library().await?;
        if !self
            .documents()
            .await?
            .iter()
            .any(|d| Path::new(&d.path) == path)
        {
            return Err(EngineError::NotInLibrary(format!(
                "{} is not a document in the library; add it by dropping it on the window or with Add files",
                path.display()
            )));
        }
        // The job checks again, file by file, right before reading; this check is for an
        // error that names the file before its document is removed.
        let root = library.granted_root(path);
        if let Err(e @ (IndexError::LeadsOutside { .. } | IndexError::Swapped { .. })) =
            selfrag_index::granted::see(&root, path)
        {
            return Err(e.into());
        }
        let one_at_a_time = self.jobs.indexing_lock().await;
        let job = self.jobs.start(JobKind::Indexing);
        library.remove(path).await?;
        // Stopped, never paused: the document is gone until it is written again, and a pause
        // would leave it out of the library while the job waits.
        let (finished, indexed) = self
            .run_index_job(
                std::slice::from_ref(&path.to_path_buf()),
                IndexingFlags::stop_only(job.flag().clone()),
                &on_event,
            )
            .await?;
        drop(one_at_a_time);
        self.look_up_after_job(&indexed, &on_event).await?;
        Ok(finished)
    }

    /// One indexing job, ending as `flags` ask; the caller holds the indexing lock. The job runs
    /// as a task of its own (embedding blocks the thread it runs on), so this one can watch it
    /// and report a step that lasts ([`IndexEvent::SlowStep`]), which a stuck file would
    /// otherwise hide. Each of its events is handed to `on_event` here while the job waits for
    /// it to be taken, so a pause asked from `on_event` is seen at the job's very next step, as
    /// when the job ran in the caller's task. Returns the job's last event and the paths of the
    /// documents it indexed (new, changed, or the same content at a new path).
    async fn run_index_job(
        &self,
        paths: &[PathBuf],
        flags: IndexingFlags,
        on_event: impl Fn(IndexEvent),
    ) -> Result<(IndexEvent, Vec<PathBuf>), EngineError> {
        let library = self.library().await?;
        let embedder = self.passage_embedder().await?;
        let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
        let job = {
            let (library, paths) = (library.clone(), paths.to_vec());
            tokio::spawn(async move {
                let stop = JobStop {
                    stop: &flags.stop,
                    pause: &flags.pause,
                };
                library
                    .run_job(&paths, &embedder, stop, |event| {
                        let (taken, wait) = std::sync::mpsc::sync_channel(1);
                        if events.send((event, taken)).is_ok() {
                            wait_until_taken(&wait, &events);
                        }
                    })
                    .await
            })
        };
        // A caller that goes away ends the job at its next await (a slice being embedded is
        // finished first); the job's record stays, so the next start resumes it, as after a
        // crash.
        let _abort = AbortOnDrop(job.abort_handle());
        let mut indexed = Vec::new();
        let mut watch = SlowStepWatch::new(self.jobs.slow_step_notice());
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = received.recv() => match event {
                    Some((event, taken)) => {
                        if let Some(path) = indexed_path(&event) {
                            indexed.push(path);
                        }
                        if let Some(event) = index_event(event) {
                            on_event(event);
                        }
                        let _ = taken.send(());
                    }
                    None => break,
                },
                _ = tick.tick() => {
                    let step = library.current_step();
                    if let Some(slow) = watch.check(&step, std::time::Instant::now()) {
                        tracing::warn!(?slow, "an indexing step is taking long");
                        on_event(slow);
                    }
                }
            }
        }
        let summary = job
            .await
            .map_err(|e| EngineError::IndexingJobLost(e.to_string()))??;
        let finished = finished(summary);
        on_event(finished.clone());
        Ok((finished, indexed))
    }

    /// The folders of an indexing job that was interrupted, empty when there is none.
    pub async fn pending_indexing(&self) -> Result<Vec<PathBuf>, EngineError> {
        Ok(self.library().await?.pending_job())
    }

    /// Removes the document at `path`, or every document under a folder; returns the paths.
    /// Waits for a running indexing job, which could be indexing this very file.
    pub async fn remove_documents(&self, path: &Path) -> Result<Vec<String>, EngineError> {
        let library = self.library().await?;
        let _one_at_a_time = self.jobs.indexing_lock().await;
        Ok(library.remove(path).await?)
    }

    /// Removes the library's document `document_id` (the file stays on disk); returns the paths
    /// removed. An id, not a path, for a front end that must not name a folder: `/` would empty
    /// the library.
    pub async fn remove_document(&self, document_id: &str) -> Result<Vec<String>, EngineError> {
        let held = self.documents().await?;
        let Some(document) = held.into_iter().find(|d| d.id == document_id) else {
            return Err(EngineError::NotInLibrary(format!(
                "no document with id `{document_id}` in the library; it may have been removed already"
            )));
        };
        let removed = self.remove_documents(Path::new(&document.path)).await?;
        // The person's choice: a Zotero library that lists the file does not add it again.
        self.exclude_from_zotero(Path::new(&document.path)).await?;
        Ok(removed)
    }

    /// Counts, disk use and indexes of the library.
    pub async fn library_stats(&self) -> Result<LibraryStats, EngineError> {
        Ok(self.library().await?.stats().await?)
    }

    /// Where cited passage `passage_id` is in its source, for the evidence viewer: a library
    /// passage only, its file checked to hold the content that was indexed.
    pub async fn passage_source(&self, passage_id: &str) -> Result<PassageSource, EngineError> {
        Ok(self.library().await?.passage_source(passage_id).await?)
    }

    /// The file on this computer that holds the content passage `passage_id` was cut from:
    /// one of its indexed paths, or the copy a shared library keeps in its store (for "Open in
    /// default app").
    pub async fn source_file(&self, passage_id: &str) -> Result<std::path::PathBuf, EngineError> {
        Ok(self.library().await?.source_file(passage_id).await?)
    }

    /// The bytes of the library's PDF with content id `document_id`, for the evidence viewer.
    pub async fn document_pdf(&self, document_id: &str) -> Result<Vec<u8>, EngineError> {
        Ok(self.library().await?.document_pdf(document_id).await?)
    }

    /// Searches the library; the query is embedded by the embedder in use.
    pub async fn search(&self, query: SearchQuery) -> Result<Vec<SearchHit>, EngineError> {
        let library = self.library().await?;
        let vector = match query.mode {
            SearchMode::Fts => None,
            SearchMode::Vector | SearchMode::Hybrid => {
                let vectors = self.embeddings.embed(vec![query.text.clone()]).await?;
                vectors.into_iter().next()
            }
        };
        let request = SearchRequest {
            text: query.text,
            vector,
            mode: query.mode,
            k: query.k,
            filter: query.filter,
            rrf_k: 60.0,
        };
        Ok(library.search(&request).await?)
    }

    /// `selfrag debug search-depths`: the library's search at its default depth and at the other
    /// ANN settings of [`selfrag_index::bench::sweep_depths`], on its own passages. Each of
    /// `queries` queries is the first words of a passage taken at an even stride through the
    /// library, embedded as a question is; the passage itself is among the exact top 10, the
    /// recall is about the other nine.
    pub async fn measure_search_depths(
        &self,
        queries: usize,
    ) -> Result<selfrag_index::bench::DepthsReport, EngineError> {
        use selfrag_index::bench::{BenchQuery, measure_depths, passages_at_stride, sweep_depths};
        let library = self.library().await?;
        let texts: Vec<String> = passages_at_stride(&library, queries)
            .await?
            .iter()
            .map(|passage| {
                let words: Vec<&str> = passage.text.split_whitespace().take(QUERY_WORDS).collect();
                words.join(" ")
            })
            .collect();
        if texts.is_empty() {
            return Err(EngineError::Index(IndexError::Schema(
                "the library has no passages to make queries from: index some documents first"
                    .into(),
            )));
        }
        let vectors = self.embeddings.embed(texts.clone()).await?;
        let queries: Vec<BenchQuery> = texts
            .into_iter()
            .zip(vectors)
            .map(|(text, vector)| BenchQuery { text, vector })
            .collect();
        let mut depths = vec![selfrag_index::SearchDepth::DEFAULT];
        depths.extend(sweep_depths());
        Ok(measure_depths(&library, &queries, &depths).await?)
    }

    /// `selfrag debug passages`: what the embedder read for `count` of the library's passages,
    /// taken at an even stride through it ([`selfrag_index::bench::passages_at_stride`]): the
    /// texts to time the embedder alone on, against the indexing job that embedded them.
    pub async fn sample_embedding_inputs(&self, count: usize) -> Result<Vec<String>, EngineError> {
        let library = self.library().await?;
        Ok(selfrag_index::bench::passages_at_stride(&library, count)
            .await?
            .iter()
            .map(|passage| selfrag_index::embedding_input(&passage.title, &passage.text))
            .collect())
    }

    /// The folders kept in sync with the library.
    pub async fn watched_folders(&self) -> Result<Vec<PathBuf>, EngineError> {
        Ok(self.library().await?.watched_folders())
    }

    /// Remembers or forgets `folder` as watched; [`Engine::keep_library_in_sync`], if it runs,
    /// starts its watcher again with the new set.
    pub async fn set_watched(&self, folder: &Path, watched: bool) -> Result<(), EngineError> {
        if watched && !folder.is_dir() {
            return Err(EngineError::Index(IndexError::Watch {
                path: folder.to_path_buf(),
                reason: "it is not a folder".into(),
            }));
        }
        self.library().await?.set_watched(folder, watched)?;
        self.jobs.restart_watching();
        Ok(())
    }

    /// Keeps the watched folders in sync with the library until `stop` is set: changes are
    /// applied in debounced batches and reported as events. Each folder is first indexed as a
    /// job, so changes made while nothing was watching are caught up; that job holds the
    /// indexing lock and ends with `stop` (Stop does not end it: unwatching does). The batches
    /// that follow run beside other jobs, file by file.
    pub(crate) async fn watch(
        &self,
        stop: Arc<AtomicBool>,
        on_event: impl Fn(IndexEvent),
    ) -> Result<(), EngineError> {
        let library = self.library().await?;
        let embedder = self.passage_embedder().await?;
        let folders = library.watched_folders();
        let mut watcher = FolderWatcher::new()?;
        for folder in &folders {
            watcher.watch(folder)?;
        }
        self.catch_up(&folders, &stop, &on_event).await?;
        // Searches see new rows before the indexes include them (LanceDB scans what is not
        // indexed yet), so the indexes are brought up to date at most every
        // `OPTIMIZE_EVERY`: a folder that changes all the time would otherwise spend most of
        // its time re-optimizing.
        let mut last_optimized = std::time::Instant::now();
        let mut stale = false;
        while !stop.load(Ordering::SeqCst) {
            // Only `stop` may cancel a batch being gathered: cancelling it on a timer would
            // drop the changes it already took from the watcher (it waits for a quiet spell
            // longer than any short timer).
            let batch = tokio::select! {
                batch = watcher.next_batch() => batch,
                () = stopped(&stop) => break,
            };
            let Some(batch) = batch else { break };
            // A batch that fails as a whole (not one file: the library itself) is tried again
            // with a growing pause, and the user is told; watching never ends on it. Changes
            // that come meanwhile wait in the watcher for the next batch.
            let mut pause = RETRY_FIRST;
            let indexed = std::sync::Mutex::new(Vec::new());
            let summary = loop {
                let applied = library
                    .apply_changes(&batch.paths, &embedder, |e| {
                        if let Some(path) = indexed_path(&e) {
                            indexed
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .push(path);
                        }
                        if let Some(event) = index_event(e) {
                            on_event(event)
                        }
                    })
                    .await;
                match applied {
                    Ok(summary) => break summary,
                    Err(e) => {
                        tracing::warn!(error = %e, retry_in = ?pause, "watched changes not applied");
                        on_event(IndexEvent::WatchRetrying {
                            error: e.to_string(),
                            retry_in_seconds: pause.as_secs_f64(),
                        });
                        tokio::select! {
                            () = tokio::time::sleep(pause) => {}
                            () = stopped(&stop) => return Ok(()),
                        }
                        pause = (pause * 2).min(RETRY_MAX);
                    }
                }
            };
            stale |= summary.indexed + summary.removed > 0;
            let indexed = indexed
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Watching never ends on a look-up's trouble (a setting naming no address, a full
            // disk): it is logged, and the next batch tries again.
            if let Err(e) = self.look_up_after_job(&indexed, &on_event).await {
                tracing::warn!(error = %e, "works of watched files not looked up");
            }
            if batch.rescan.is_some() {
                // Notifications were lost (a full kernel queue): walk the folders again, as at
                // the start, so that no change is missed until the next restart.
                let caught_up = self
                    .catch_up(&library.watched_folders(), &stop, &on_event)
                    .await?;
                stale |= matches!(caught_up, IndexEvent::Finished { indexed, removed, .. } if indexed + removed > 0);
            }
            if stale && last_optimized.elapsed() >= OPTIMIZE_EVERY {
                library.optimize().await?;
                (stale, last_optimized) = (false, std::time::Instant::now());
            }
        }
        if stale {
            library.optimize().await?;
        }
        Ok(())
    }
}

impl Engine {
    /// The watcher's walk of its folders, as one job under the indexing lock, and the
    /// look-ups after it.
    async fn catch_up(
        &self,
        folders: &[PathBuf],
        stop: &Arc<AtomicBool>,
        on_event: impl Fn(IndexEvent),
    ) -> Result<IndexEvent, EngineError> {
        let one_at_a_time = self.jobs.indexing_lock().await;
        let (finished, indexed) = self
            .run_index_job(folders, IndexingFlags::stop_only(stop.clone()), &on_event)
            .await?;
        drop(one_at_a_time);
        if let Err(e) = self.look_up_after_job(&indexed, &on_event).await {
            tracing::warn!(error = %e, "works of watched files not looked up");
        }
        Ok(finished)
    }
}

/// Blocks the job's task until its event was handed on, or the caller is gone (its receiver
/// closed: an event sent as it closed may never be taken), telling the runtime it blocks. On a
/// single-threaded runtime the receiver runs on this very thread, so the job goes on without
/// waiting.
fn wait_until_taken<T>(
    wait: &std::sync::mpsc::Receiver<()>,
    events: &tokio::sync::mpsc::UnboundedSender<T>,
) {
    if let Ok(tokio::runtime::RuntimeFlavor::MultiThread) =
        tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor())
    {
        tokio::task::block_in_place(|| {
            loop {
                match wait.recv_timeout(std::time::Duration::from_millis(100)) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) if !events.is_closed() => {}
                    _ => break,
                }
            }
        });
    }
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Turns the library's current step ([`selfrag_index::Library::current_step`]) into
/// [`IndexEvent::SlowStep`] notices: one when a step has lasted `after`, and one more at each
/// further `after` while it goes on; the next step, told by when it began, starts the count
/// again.
#[derive(Debug)]
pub(crate) struct SlowStepWatch {
    after: std::time::Duration,
    /// When the step seen at the previous check began.
    began: Option<std::time::Instant>,
    next_notice: std::time::Duration,
}

impl SlowStepWatch {
    pub(crate) fn new(after: std::time::Duration) -> Self {
        Self {
            after,
            began: None,
            next_notice: after,
        }
    }

    /// The notice due at `now` for the library's step `step`, if any.
    pub(crate) fn check(
        &mut self,
        step: &CurrentStep,
        now: std::time::Instant,
    ) -> Option<IndexEvent> {
        if self.began != Some(step.began) {
            self.began = Some(step.began);
            self.next_notice = self.after;
        }
        let lasted = now.saturating_duration_since(step.began);
        if step.stage == IndexStage::Idle || lasted < self.next_notice {
            return None;
        }
        while self.next_notice <= lasted {
            self.next_notice += self.after;
        }
        Some(IndexEvent::SlowStep {
            path: step.file.clone(),
            step: step.stage.describe().to_owned(),
            seconds: lasted.as_secs(),
        })
    }
}

/// The first pause before a failed batch of watched changes is tried again, and the longest.
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(1);
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(60);

/// The shortest time between two optimizations of the library by [`Engine::watch`].
const OPTIMIZE_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Resolves once `stop` is set (polled every 250 ms).
async fn stopped(stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

fn finished(summary: JobSummary) -> IndexEvent {
    IndexEvent::Finished {
        indexed: summary.indexed,
        skipped: summary.skipped,
        failed: summary.failed,
        removed: summary.removed,
        cancelled: summary.cancelled,
        paused: summary.paused,
    }
}

/// The path of the document a job event says was indexed (new, changed, or the same content
/// at a new path).
fn indexed_path(event: &JobEvent) -> Option<PathBuf> {
    match event {
        JobEvent::FileDone {
            path,
            result: Ok(IndexOutcome::Indexed { .. } | IndexOutcome::Reused { .. }),
        } => Some(PathBuf::from(path)),
        _ => None,
    }
}

/// The front ends' event for a job event.
fn index_event(event: JobEvent) -> Option<IndexEvent> {
    Some(match event {
        JobEvent::Started { total, resumed } => IndexEvent::Started { total, resumed },
        JobEvent::FileStarted { path } => IndexEvent::FileStarted { path },
        JobEvent::FileSearchable { path, passages, of } => {
            IndexEvent::FileSearchable { path, passages, of }
        }
        JobEvent::Removed { path } => IndexEvent::Removed { path },
        JobEvent::LinkSkipped { path, target } => IndexEvent::FileSkipped {
            path,
            reason: format!(
                "a link to {target}, outside the folder you gave; links are followed only \
                 inside it (add the target itself to index it)"
            ),
        },
        JobEvent::Progress(p) => IndexEvent::Progress {
            done: p.done,
            total: p.total,
            passages: p.passages,
            files_per_second: p.files_per_second,
            eta_seconds: p.eta_seconds,
        },
        JobEvent::FileDone { path, result } => match result {
            Ok(IndexOutcome::Indexed {
                passages, notes, ..
            }) => {
                for note in &notes {
                    tracing::warn!(%path, %note, "indexed with a note");
                }
                IndexEvent::FileIndexed {
                    path,
                    passages,
                    notes,
                }
            }
            Ok(IndexOutcome::Unchanged { .. }) => IndexEvent::FileSkipped {
                path,
                reason: "already in the library".into(),
            },
            Ok(IndexOutcome::Reused { from, .. }) => IndexEvent::FileSkipped {
                path,
                reason: format!("same content as {from}; its passages are reused"),
            },
            Err(IndexError::Unsupported { reason, .. }) => IndexEvent::FileSkipped { path, reason },
            Err(e) => {
                tracing::warn!(%path, error = %e, "file not indexed");
                IndexEvent::FileFailed {
                    path,
                    error: e.to_string(),
                }
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use selfrag_index::{CurrentStep, IndexStage};

    use super::SlowStepWatch;
    use crate::IndexEvent;

    /// A clock for the watch: steps begin at whole seconds after `zero`.
    struct Clock {
        zero: Instant,
    }

    impl Clock {
        fn at(&self, seconds: u64) -> Instant {
            self.zero + Duration::from_secs(seconds)
        }
    }

    fn notice(
        watch: &mut SlowStepWatch,
        clock: &Clock,
        stage: IndexStage,
        file: Option<&str>,
        began: u64,
        now: u64,
    ) -> Option<(Option<String>, String, u64)> {
        let step = CurrentStep {
            stage,
            began: clock.at(began),
            file: file.map(str::to_owned),
        };
        match watch.check(&step, clock.at(now)) {
            Some(IndexEvent::SlowStep {
                path,
                step,
                seconds,
            }) => Some((path, step, seconds)),
            _ => None,
        }
    }

    #[test]
    fn a_lasting_step_is_reported_once_per_interval_and_a_new_step_starts_the_count_again() {
        let clock = Clock {
            zero: Instant::now(),
        };
        let mut watch = SlowStepWatch::new(Duration::from_secs(20));
        let a = Some("/docs/a.pdf");
        let mut seconds =
            |stage, began, now| notice(&mut watch, &clock, stage, a, began, now).map(|n| n.2);
        let parsing = IndexStage::Parsing;
        assert_eq!(seconds(parsing, 0, 19), None);
        assert_eq!(seconds(parsing, 0, 20), Some(20));
        assert_eq!(seconds(parsing, 0, 21), None);
        assert_eq!(seconds(parsing, 0, 39), None);
        assert_eq!(seconds(parsing, 0, 40), Some(40));
        // Checks that came late (a busy machine) give one notice, not one per interval missed.
        assert_eq!(seconds(parsing, 0, 95), Some(95));
        assert_eq!(seconds(parsing, 0, 99), None);
        assert_eq!(seconds(parsing, 0, 100), Some(100));
        // The next step began, even one first seen after it has lasted longer than the last
        // notice: counted from its own start.
        assert_eq!(seconds(IndexStage::Embedding, 101, 102), None);
        assert_eq!(seconds(IndexStage::Embedding, 101, 121), Some(20));
        assert_eq!(seconds(IndexStage::Writing, 121, 241), Some(120));
        assert_eq!(seconds(IndexStage::Writing, 121, 242), None);
        // Idle is no step.
        assert_eq!(seconds(IndexStage::Idle, 242, 243), None);
        assert_eq!(seconds(IndexStage::Idle, 242, 900), None);
        // The notice names the step and the file the library's writer is on.
        assert_eq!(
            notice(&mut watch, &clock, IndexStage::Embedding, a, 900, 920),
            Some((a.map(str::to_owned), "embedding its passages".into(), 20))
        );
        // The library's own step names no file.
        let compacting = notice(&mut watch, &clock, IndexStage::Compacting, None, 920, 940);
        assert_eq!(compacting.map(|n| n.0), Some(None));
    }
}
