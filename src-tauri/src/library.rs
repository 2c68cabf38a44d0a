//! The library pane's commands and its background work: one indexing job at a time (a drop,
//! a re-index, the resumption of a job a crash interrupted, or the watched folders' catch-up),
//! stopping the running job, removing and re-indexing documents, the library's statistics, and
//! the watched folders, kept in sync by [`selfrag_engine::Engine::watch`] in a background task
//! that restarts whenever the set of folders changes. Work the UI did not start itself streams
//! to it as the app event [`LIBRARY_EVENT`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use selfrag_engine::{Engine, EngineError, IndexEvent, LibraryStats};
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::{AppHandle, Emitter, Manager};
use tokio::sync::Notify;

use crate::AppState;
use crate::commands::{IpcError, ShellErrorCode};

/// The app event carrying a [`LibraryEvent`].
pub const LIBRARY_EVENT: &str = "library-event";

/// Which background work an event comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub enum JobSource {
    /// The job a crash or a quit interrupted, finished at start.
    Resume,
    /// The watched folders: their catch-up job, then each batch of changes.
    Watch,
}

/// What the background work tells the UI (the app event [`LIBRARY_EVENT`]).
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum LibraryEvent {
    /// Progress of a job, or a change in a watched folder.
    Index {
        source: JobSource,
        event: IndexEvent,
    },
    /// The background work could not run, e.g. a watched folder is gone or the embedding model
    /// is missing.
    Failed { source: JobSource, message: String },
}

/// What `watch_folders` did with the paths it was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct WatchResult {
    /// The folders now watched (every one, not only the new ones).
    pub watched: Vec<String>,
    /// Paths that are not folders (files, or gone): the UI indexes them once instead.
    pub not_folders: Vec<String>,
}

/// The job lock, the running job's cancel flag and the watcher's restart signal.
#[derive(Default)]
pub struct LibraryJobs {
    /// Held for the length of a job: jobs never run side by side (they share `job.json`, the
    /// record of the job to resume).
    lock: Arc<tokio::sync::Mutex<()>>,
    /// The cancel flag of the job that Stop ends, while one runs.
    cancel: Mutex<Option<Arc<AtomicBool>>>,
    /// Set to stop the running watcher, which then restarts with the new set of folders.
    watch_stop: Mutex<Option<Arc<AtomicBool>>>,
    /// Wakes the background task when the watched folders changed.
    changed: Notify,
}

impl LibraryJobs {
    fn set_cancel(&self, flag: Option<Arc<AtomicBool>>) {
        *self.cancel.lock().unwrap_or_else(|p| p.into_inner()) = flag;
    }

    /// Stops the running watcher (if any) and wakes the task to start it again.
    fn restart_watching(&self) {
        if let Some(stop) = self
            .watch_stop
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            stop.store(true, Ordering::SeqCst);
        }
        self.changed.notify_one();
    }

    /// Runs one job under the lock, with a fresh cancel flag that `cancel_indexing` sets.
    async fn run(
        &self,
        engine: &Engine,
        paths: &[PathBuf],
        on_event: impl Fn(IndexEvent),
    ) -> Result<IndexEvent, EngineError> {
        let _job = self.lock.lock().await;
        let cancel = Arc::new(AtomicBool::new(false));
        self.set_cancel(Some(cancel.clone()));
        let result = engine
            .index_paths_cancellable(paths, &cancel, on_event)
            .await;
        self.set_cancel(None);
        result
    }
}

/// Indexes files and folders as one job (the `index_paths` command).
pub async fn index_job(
    engine: &Engine,
    jobs: &LibraryJobs,
    paths: &[PathBuf],
    on_event: impl Fn(IndexEvent),
) -> Result<IndexEvent, EngineError> {
    jobs.run(engine, paths, on_event).await
}

/// Writes the sample documents that ship with the app into its data folder and indexes them as
/// one job, like a dropped folder. No path comes from the page: the folder is the app's own.
#[tauri::command]
pub async fn add_sample_documents(
    state: tauri::State<'_, AppState>,
    jobs: tauri::State<'_, LibraryJobs>,
    on_event: Channel<IndexEvent>,
) -> Result<IndexEvent, IpcError> {
    let folder = state.engine.write_sample_documents()?;
    Ok(index_job(&state.engine, &jobs, &[folder], |e| {
        // A closed channel means the window went away; indexing still finishes.
        let _ = on_event.send(e);
    })
    .await?)
}

/// Stops the running indexing job at the next file or embedding batch; what was indexed stays. Does nothing
/// when no job that can be stopped runs (the watched folders' catch-up ends with
/// `unwatch_folder`).
#[tauri::command]
pub fn cancel_indexing(jobs: tauri::State<'_, LibraryJobs>) {
    if let Some(flag) = jobs
        .cancel
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
    {
        flag.store(true, Ordering::SeqCst);
    }
}

/// Removes the library's document `document_id` (the file stays on disk); returns the paths
/// removed. An id, not a path: a path from the page could name a folder, and `/` would empty
/// the library.
#[tauri::command]
pub async fn remove_document(
    state: tauri::State<'_, AppState>,
    jobs: tauri::State<'_, LibraryJobs>,
    document_id: String,
) -> Result<Vec<String>, IpcError> {
    let held = state.engine.documents().await?;
    let Some(document) = held.into_iter().find(|d| d.id == document_id) else {
        return Err(IpcError::new(
            ShellErrorCode::NotInLibrary,
            format!(
                "no document with id `{document_id}` in the library; it may have been removed already"
            ),
        ));
    };
    // Not while a job runs: the job could be indexing this very file.
    let _job = jobs.lock.lock().await;
    Ok(state
        .engine
        .remove_documents(Path::new(&document.path))
        .await?)
}

/// Parses and embeds the library's document at `path` again. The library skips a file whose
/// size, time and content are unchanged, so the document is removed first; its passages then
/// come from a fresh parse (or from another path with the same content, which the job reports).
#[tauri::command]
pub async fn reindex_document(
    state: tauri::State<'_, AppState>,
    jobs: tauri::State<'_, LibraryJobs>,
    path: PathBuf,
    on_event: Channel<IndexEvent>,
) -> Result<IndexEvent, IpcError> {
    let engine = &state.engine;
    // Only a document the library holds: a path from the page is not read otherwise.
    let held = engine.documents().await?;
    if !held.iter().any(|d| Path::new(&d.path) == path) {
        return Err(IpcError::new(
            ShellErrorCode::NotInLibrary,
            format!(
                "{} is not a document in the library; add it by dropping it on the window or with Add files",
                path.display()
            ),
        ));
    }
    let _job = jobs.lock.lock().await;
    let cancel = Arc::new(AtomicBool::new(false));
    jobs.set_cancel(Some(cancel.clone()));
    let result = async {
        engine.remove_documents(&path).await?;
        engine
            .index_paths_cancellable(std::slice::from_ref(&path), &cancel, |e| {
                let _ = on_event.send(e);
            })
            .await
    }
    .await;
    jobs.set_cancel(None);
    Ok(result?)
}

/// Counts and disk use of the library.
#[tauri::command]
pub async fn library_stats(state: tauri::State<'_, AppState>) -> Result<LibraryStats, IpcError> {
    Ok(state.engine.library_stats().await?)
}

/// The folders kept in sync with the library.
#[tauri::command]
pub async fn watched_folders(state: tauri::State<'_, AppState>) -> Result<Vec<String>, IpcError> {
    Ok(display(state.engine.watched_folders().await?))
}

/// Watches the folders among `paths` (their catch-up job then indexes them in the background,
/// reported as [`LIBRARY_EVENT`]s); the other paths come back in `notFolders`.
#[tauri::command]
pub async fn watch_folders(
    state: tauri::State<'_, AppState>,
    jobs: tauri::State<'_, LibraryJobs>,
    grants: tauri::State<'_, crate::grants::GrantedPaths>,
    paths: Vec<PathBuf>,
) -> Result<WatchResult, IpcError> {
    // Only folders the user dropped or picked (see grants.rs).
    grants.require(&paths)?;
    let mut not_folders = Vec::new();
    let mut added = false;
    for path in &paths {
        if path.is_dir() {
            state.engine.set_watched(path, true).await?;
            added = true;
        } else {
            not_folders.push(path.display().to_string());
        }
    }
    if added {
        jobs.restart_watching();
    }
    Ok(WatchResult {
        watched: display(state.engine.watched_folders().await?),
        not_folders,
    })
}

/// Stops watching `folder` (its documents stay in the library); returns the folders still
/// watched.
#[tauri::command]
pub async fn unwatch_folder(
    state: tauri::State<'_, AppState>,
    jobs: tauri::State<'_, LibraryJobs>,
    folder: PathBuf,
) -> Result<Vec<String>, IpcError> {
    state.engine.set_watched(&folder, false).await?;
    jobs.restart_watching();
    Ok(display(state.engine.watched_folders().await?))
}

fn display(paths: Vec<PathBuf>) -> Vec<String> {
    paths.into_iter().map(|p| p.display().to_string()).collect()
}

/// Starts the background work: finish an interrupted job, then keep the watched folders in
/// sync for as long as the app runs.
pub fn start(app: &AppHandle) {
    let app = app.clone();
    tauri::async_runtime::spawn(async move { background(app).await });
}

fn emit(app: &AppHandle, event: LibraryEvent) {
    // No window to tell (closing): the work goes on regardless.
    if let Err(e) = app.emit(LIBRARY_EVENT, event) {
        tracing::debug!(error = %e, "library event not delivered");
    }
}

async fn background(app: AppHandle) {
    let state = app.state::<AppState>();
    let jobs = app.state::<LibraryJobs>();
    let engine = &state.engine;

    match engine.pending_indexing().await {
        Ok(pending) if !pending.is_empty() => {
            tracing::info!(
                folders = pending.len(),
                "resuming the interrupted indexing job"
            );
            // An empty list: the job is the interrupted one's folders alone.
            let result = jobs
                .run(engine, &[], |event| {
                    emit(
                        &app,
                        LibraryEvent::Index {
                            source: JobSource::Resume,
                            event,
                        },
                    )
                })
                .await;
            if let Err(e) = result {
                failed(&app, JobSource::Resume, &e);
            }
        }
        Ok(_) => {}
        Err(e) => failed(&app, JobSource::Resume, &e),
    }

    loop {
        let folders = match engine.watched_folders().await {
            Ok(folders) => folders,
            Err(e) => {
                failed(&app, JobSource::Watch, &e);
                Vec::new()
            }
        };
        if folders.is_empty() {
            jobs.changed.notified().await;
            continue;
        }
        let stop = Arc::new(AtomicBool::new(false));
        *jobs.watch_stop.lock().unwrap_or_else(|p| p.into_inner()) = Some(stop.clone());
        if watch_once(&app, engine, &jobs, stop.clone()).await.is_err() {
            // Reported; wait for the set of folders to change before trying again.
            jobs.changed.notified().await;
        } else if !stop.load(Ordering::SeqCst) {
            // The watcher ended on its own (its notification source closed): start over.
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    }
}

/// Runs the watcher until `stop` is set. Its catch-up job holds the job lock, released when it
/// finishes; the batches of changes that follow run beside other jobs, file by file.
async fn watch_once(
    app: &AppHandle,
    engine: &Engine,
    jobs: &LibraryJobs,
    stop: Arc<AtomicBool>,
) -> Result<(), ()> {
    let lock = jobs.lock.clone().lock_owned().await;
    let held = Mutex::new(Some(lock));
    let result = engine
        .watch(stop, |event| {
            if matches!(event, IndexEvent::Finished { .. }) {
                held.lock().unwrap_or_else(|p| p.into_inner()).take();
            }
            emit(
                app,
                LibraryEvent::Index {
                    source: JobSource::Watch,
                    event,
                },
            );
        })
        .await;
    drop(held);
    result.map_err(|e| failed(app, JobSource::Watch, &e))
}

fn failed(app: &AppHandle, source: JobSource, error: &EngineError) {
    tracing::warn!(?source, error = %error, "library background work failed");
    let message = match source {
        JobSource::Resume => format!("Could not finish the interrupted indexing job: {error}"),
        JobSource::Watch => format!(
            "Watching folders stopped: {error}. Stop watching the folder it names and add it again, or add the missing model and restart the app."
        ),
    };
    emit(app, LibraryEvent::Failed { source, message });
}
