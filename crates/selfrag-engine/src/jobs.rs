//! The engine's running work, in one place: which jobs run and how each is stopped
//! ([`JobKind`], [`Engine::cancel`]), the rule that indexing jobs run one at a time, and the
//! library's background work (the job a crash interrupted, then the watched folders, restarted
//! whenever their set changes), reported as [`LibraryEvent`]s.
//!
//! A job registers itself when it starts and is removed by a guard's `Drop`, so a job whose
//! future is dropped half-way (a closed window, a timeout) leaves no stale entry behind: the next
//! download of the same model is not refused, and a later Stop does not hit a finished job.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::{Engine, EngineError, IndexEvent};

/// A kind of work a front end can stop.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum JobKind {
    /// A question being answered.
    Answer,
    /// An indexing job: files dropped or added, a re-index, the watched folders' catch-up, the
    /// resumption of an interrupted job.
    Indexing,
    /// The download of one model.
    Download { model: String },
}

/// Which background work a [`LibraryEvent`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum JobSource {
    /// The job a crash or a quit interrupted, finished at start.
    Resume,
    /// The watched folders: their catch-up job, then each batch of changes.
    Watch,
    /// The Zotero libraries added: each read again when Zotero changed it.
    Zotero,
}

/// What the library's background work reports ([`Engine::keep_library_in_sync`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum LibraryEvent {
    /// Progress of a job, or a change in a watched folder.
    Index {
        source: JobSource,
        event: IndexEvent,
    },
    /// The background work could not run, e.g. a watched folder is gone or the embedding model
    /// is missing; it starts again when the set of watched folders changes.
    Failed { source: JobSource, message: String },
    /// Other computers added or removed documents of the shared library: the counts since the
    /// library was opened here, sent each time they grow.
    ChangedElsewhere { added: u32, removed: u32 },
}

/// How often the background work looks for other computers' changes to a shared library.
const ELSEWHERE_POLL: std::time::Duration = std::time::Duration::from_secs(5);

/// The registry of running jobs, the indexing lock and the watcher's restart signal.
#[derive(Debug, Default)]
pub(crate) struct Jobs {
    running: Mutex<Vec<Running>>,
    next_id: AtomicU64,
    /// Held for the length of an indexing job (and of a removal): jobs never run side by side,
    /// since they share the record of the job to resume.
    indexing: Arc<tokio::sync::Mutex<()>>,
    /// Set to stop the running watcher, which then starts again with the new set of folders.
    watch_stop: Mutex<Option<Arc<AtomicBool>>>,
    /// Wakes the background work when the set of watched folders changed.
    watch_changed: tokio::sync::Notify,
    /// After how many milliseconds a step of an indexing job is reported as taking long; 0 for
    /// the default, [`selfrag_index::SLOW_STEP`].
    slow_step_ms: AtomicU64,
    /// Held while `zotero.json` is read and written again: a sync, an add and a removal by the
    /// person never overwrite each other's record.
    pub(crate) zotero_record: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct Running {
    id: u64,
    kind: JobKind,
    cancel: Arc<AtomicBool>,
    /// Set before `cancel` when the job is paused rather than cancelled (indexing only).
    pause: Arc<AtomicBool>,
}

/// The flags an indexing job reads at every file and embedding batch ([`selfrag_index::JobStop`]),
/// owned so that the job can run as a task of its own.
#[derive(Debug, Clone)]
pub(crate) struct IndexingFlags {
    pub(crate) stop: Arc<AtomicBool>,
    /// Set before `stop` to pause rather than stop.
    pub(crate) pause: Arc<AtomicBool>,
}

impl IndexingFlags {
    /// A job that can be stopped, never paused.
    pub(crate) fn stop_only(stop: Arc<AtomicBool>) -> Self {
        Self {
            stop,
            pause: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// A running job's entry in the registry: its flags, removed from the registry on drop.
#[derive(Debug)]
pub(crate) struct JobGuard<'j> {
    jobs: &'j Jobs,
    id: u64,
    cancel: Arc<AtomicBool>,
    pause: Arc<AtomicBool>,
}

impl JobGuard<'_> {
    /// The flag the job polls; set by [`Engine::cancel`] and [`Engine::pause_indexing`].
    pub(crate) fn flag(&self) -> &Arc<AtomicBool> {
        &self.cancel
    }

    /// Both flags, shared with the task an indexing job runs in.
    pub(crate) fn indexing_flags(&self) -> IndexingFlags {
        IndexingFlags {
            stop: self.cancel.clone(),
            pause: self.pause.clone(),
        }
    }
}

impl Drop for JobGuard<'_> {
    fn drop(&mut self) {
        self.jobs.running().retain(|r| r.id != self.id);
    }
}

impl Jobs {
    /// How long a step of an indexing job may last before it is reported
    /// ([`crate::IndexEvent::SlowStep`]).
    pub(crate) fn slow_step_notice(&self) -> std::time::Duration {
        match self.slow_step_ms.load(Ordering::Relaxed) {
            0 => selfrag_index::SLOW_STEP,
            ms => std::time::Duration::from_millis(ms),
        }
    }

    fn running(&self) -> MutexGuard<'_, Vec<Running>> {
        // A panic while the list was held leaves it whole: every change is one push or retain.
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a job of `kind`; jobs of one kind may run side by side (two questions).
    pub(crate) fn start(&self, kind: JobKind) -> JobGuard<'_> {
        self.register(&mut self.running(), kind)
    }

    /// Registers a job of `kind` unless one already runs; `None` then.
    pub(crate) fn start_alone(&self, kind: JobKind) -> Option<JobGuard<'_>> {
        let mut running = self.running();
        let busy = running.iter().any(|r| r.kind == kind);
        (!busy).then(|| self.register(&mut running, kind))
    }

    /// Adds a job of `kind` to `running` (the locked list) with a fresh cancel flag.
    fn register(&self, running: &mut Vec<Running>, kind: JobKind) -> JobGuard<'_> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let cancel = Arc::new(AtomicBool::new(false));
        let pause = Arc::new(AtomicBool::new(false));
        running.push(Running {
            id,
            kind,
            cancel: cancel.clone(),
            pause: pause.clone(),
        });
        JobGuard {
            jobs: self,
            id,
            cancel,
            pause,
        }
    }

    /// Sets the cancel flag of every running job of `kind`; returns how many there were.
    pub(crate) fn cancel(&self, kind: &JobKind) -> usize {
        let running = self.running();
        let matching = running.iter().filter(|r| &r.kind == kind);
        matching
            .map(|r| r.cancel.store(true, Ordering::SeqCst))
            .count()
    }

    /// Sets the pause flag, then the cancel flag, of every running indexing job; returns how
    /// many there were.
    pub(crate) fn pause_indexing(&self) -> usize {
        let running = self.running();
        let matching = running.iter().filter(|r| r.kind == JobKind::Indexing);
        matching
            .map(|r| {
                r.pause.store(true, Ordering::SeqCst);
                r.cancel.store(true, Ordering::SeqCst);
            })
            .count()
    }

    pub(crate) fn kinds(&self) -> Vec<JobKind> {
        self.running().iter().map(|r| r.kind.clone()).collect()
    }

    /// Waits for the indexing lock (see [`Jobs::indexing`]).
    pub(crate) async fn indexing_lock(&self) -> tokio::sync::OwnedMutexGuard<()> {
        self.indexing.clone().lock_owned().await
    }

    /// Stops the running watcher, if any, and wakes the background work to start it again.
    pub(crate) fn restart_watching(&self) {
        if let Some(stop) = self
            .watch_stop
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            stop.store(true, Ordering::SeqCst);
        }
        self.watch_changed.notify_one();
    }
}

impl Engine {
    /// Reports a step of an indexing job that lasts `after` (default
    /// [`selfrag_index::SLOW_STEP`], 20 s) as [`crate::IndexEvent::SlowStep`]: for a front end
    /// that wants to say so earlier, and for tests.
    pub fn set_slow_step_notice(&self, after: std::time::Duration) {
        let ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX).max(1);
        self.jobs.slow_step_ms.store(ms, Ordering::Relaxed);
    }

    /// Stops every running job of `kind` at its next step (a forward pass, a file, an embedding
    /// batch, a chunk of a download); what was done stays. Returns whether one was running.
    pub fn cancel(&self, kind: &JobKind) -> bool {
        self.jobs.cancel(kind) > 0
    }

    /// Pauses the running indexing job at its next file or embedding batch: what was done
    /// stays, and its folders wait in [`Engine::paused_indexing`] for
    /// [`Engine::resume_indexing`] (not for the next start, as an interrupted job's do).
    /// Returns whether one was running.
    pub fn pause_indexing(&self) -> bool {
        self.jobs.pause_indexing() > 0
    }

    /// The jobs running now, in the order they started.
    pub fn running_jobs(&self) -> Vec<JobKind> {
        self.jobs.kinds()
    }

    /// The library's background work, for as long as the returned future is polled: first the
    /// indexing job a crash or a quit interrupted, then the watched folders kept in sync, started
    /// again whenever [`Engine::set_watched`] changes them, and beside them the Zotero libraries
    /// added, each read again when Zotero changed it ([`Engine::keep_zotero_in_sync`]). A
    /// failure is reported as [`LibraryEvent::Failed`]; the folders then wait for their set to
    /// change, a Zotero library for its next change.
    pub async fn keep_library_in_sync(&self, on_event: impl Fn(LibraryEvent)) {
        self.resume_interrupted_job(&on_event).await;
        let zotero = self.keep_zotero_in_sync(
            crate::works::ZOTERO_POLL,
            |event| {
                on_event(LibraryEvent::Index {
                    source: JobSource::Zotero,
                    event,
                })
            },
            |_, result| {
                if let Err(e) = result {
                    on_event(failed(JobSource::Zotero, &e));
                }
            },
        );
        tokio::join!(
            self.keep_folders_in_sync(&on_event),
            zotero,
            self.keep_up_with_other_computers(&on_event)
        );
    }

    /// In a shared library, looks for other computers' changes every [`ELSEWHERE_POLL`] once
    /// the library is open, and reports them ([`LibraryEvent::ChangedElsewhere`]). A local
    /// library has none: returns at once.
    async fn keep_up_with_other_computers(&self, on_event: &impl Fn(LibraryEvent)) {
        if !self.config().library_location().is_shared() {
            return;
        }
        let mut reported = selfrag_index::ChangesElsewhere::default();
        loop {
            tokio::time::sleep(ELSEWHERE_POLL).await;
            let Some(library) = self.library_if_open() else {
                continue;
            };
            if let Err(e) = library.catch_up().await {
                tracing::warn!(error = %e, "cannot read other computers' changes to the library");
                continue;
            }
            let seen = library.changes_elsewhere();
            if seen != reported {
                reported = seen;
                let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
                on_event(LibraryEvent::ChangedElsewhere {
                    added: count(seen.added),
                    removed: count(seen.removed),
                });
            }
        }
    }

    async fn keep_folders_in_sync(&self, on_event: &impl Fn(LibraryEvent)) {
        loop {
            let folders = match self.watched_folders().await {
                Ok(folders) => folders,
                Err(e) => {
                    on_event(failed(JobSource::Watch, &e));
                    Vec::new()
                }
            };
            if folders.is_empty() {
                self.jobs.watch_changed.notified().await;
                continue;
            }
            let stop = Arc::new(AtomicBool::new(false));
            *self
                .jobs
                .watch_stop
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(stop.clone());
            let watched = self
                .watch(stop.clone(), |event| {
                    on_event(LibraryEvent::Index {
                        source: JobSource::Watch,
                        event,
                    })
                })
                .await;
            if let Err(e) = watched {
                on_event(failed(JobSource::Watch, &e));
                self.jobs.watch_changed.notified().await;
            } else if !stop.load(Ordering::SeqCst) {
                // The watcher ended on its own (its notification source closed): start over.
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }

    async fn resume_interrupted_job(&self, on_event: &impl Fn(LibraryEvent)) {
        // No job recorded on this computer: nothing to resume, and no reason to open the
        // library (a shared one's store may be out of reach; the library list says so).
        if !selfrag_index::job::has_job_record(&self.config().library_state_dir()) {
            return;
        }
        let resumed = match self.pending_indexing().await {
            Ok(pending) if pending.is_empty() => return,
            Ok(pending) => {
                tracing::info!(
                    folders = pending.len(),
                    "resuming the interrupted indexing job"
                );
                // An empty list: the job is the interrupted one's folders alone.
                self.index_paths(&[], |event| {
                    on_event(LibraryEvent::Index {
                        source: JobSource::Resume,
                        event,
                    })
                })
                .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = resumed {
            on_event(failed(JobSource::Resume, &e));
        }
    }
}

fn failed(source: JobSource, error: &EngineError) -> LibraryEvent {
    tracing::warn!(?source, error = %error, "library background work failed");
    let message = match source {
        JobSource::Resume => format!("Could not finish the interrupted indexing job: {error}"),
        JobSource::Watch => format!(
            "Watching folders stopped: {error}. Stop watching the folder it names and add it again, or add the missing model and restart the app."
        ),
        JobSource::Zotero => format!(
            "Could not read the Zotero library again: {error}. It is tried again when Zotero next changes it."
        ),
    };
    LibraryEvent::Failed { source, message }
}

#[cfg(test)]
mod tests {
    use super::{JobKind, Jobs};

    fn download(model: &str) -> JobKind {
        JobKind::Download {
            model: model.to_owned(),
        }
    }

    #[test]
    fn a_dropped_job_leaves_no_entry_and_its_kind_can_start_again() {
        let jobs = Jobs::default();
        let first = jobs.start_alone(download("m")).unwrap();
        assert!(
            jobs.start_alone(download("m")).is_none(),
            "one download per model"
        );
        assert!(jobs.start_alone(download("other")).is_some());
        drop(first);
        assert!(jobs.kinds().is_empty());
        assert!(jobs.start_alone(download("m")).is_some());
    }

    #[test]
    fn cancel_reaches_every_job_of_its_kind_and_no_other() {
        let jobs = Jobs::default();
        let (a, b) = (jobs.start(JobKind::Answer), jobs.start(JobKind::Answer));
        let index = jobs.start(JobKind::Indexing);
        assert_eq!(jobs.cancel(&JobKind::Answer), 2);
        assert!(a.flag().load(std::sync::atomic::Ordering::SeqCst));
        assert!(b.flag().load(std::sync::atomic::Ordering::SeqCst));
        assert!(!index.flag().load(std::sync::atomic::Ordering::SeqCst));
        drop((a, b, index));
        assert_eq!(
            jobs.cancel(&JobKind::Answer),
            0,
            "a finished job is not hit"
        );
    }
}
