//! The library pane's commands: indexing (one job at a time, the engine's rule; stopped with
//! `cancel_job`, paused and resumed), removing and re-indexing documents, the library's statistics and the watched
//! folders. The engine's background work ([`Engine::keep_library_in_sync`]: the job a crash
//! interrupted, then the watched folders) streams to the UI as the app event [`LIBRARY_EVENT`],
//! a [`selfrag_engine::LibraryEvent`].

use std::path::PathBuf;

use selfrag_engine::{Engine, IndexEvent, LibraryStats};
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::{AppHandle, Emitter, Manager};

use crate::AppState;
use crate::commands::IpcError;

/// The app event carrying a [`LibraryEvent`].
pub const LIBRARY_EVENT: &str = "library-event";

/// What `watch_folders` did with the paths it was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct WatchResult {
    /// The folders now watched (every one, not only the new ones).
    pub watched: Vec<String>,
    /// Paths that are not folders (files, or gone): the UI indexes them once instead.
    pub not_folders: Vec<String>,
}

/// Writes the sample documents that ship with the app into its data folder and indexes them as
/// one job, like a dropped folder. No path comes from the page: the folder is the app's own.
#[tauri::command]
pub async fn add_sample_documents(
    state: tauri::State<'_, AppState>,
    on_event: Channel<IndexEvent>,
) -> Result<IndexEvent, IpcError> {
    let folder = state.engine.write_sample_documents()?;
    Ok(state
        .engine
        .index_paths(&[folder], |e| {
            // A closed channel means the window went away; indexing still finishes.
            let _ = on_event.send(e);
        })
        .await?)
}

/// Removes the library's document `document_id` (the file stays on disk); returns the paths
/// removed. An id, not a path: a path from the page could name a folder, and `/` would empty
/// the library.
#[tauri::command]
pub async fn remove_document(
    state: tauri::State<'_, AppState>,
    document_id: String,
) -> Result<Vec<String>, IpcError> {
    Ok(state.engine.remove_document(&document_id).await?)
}

/// Parses and embeds the library's document at `path` again (only a document the library
/// holds: a path from the page is not read otherwise).
#[tauri::command]
pub async fn reindex_document(
    state: tauri::State<'_, AppState>,
    path: PathBuf,
    on_event: Channel<IndexEvent>,
) -> Result<IndexEvent, IpcError> {
    Ok(state
        .engine
        .reindex_document(&path, |e| {
            let _ = on_event.send(e);
        })
        .await?)
}

/// Pauses the running indexing job at its next file or embedding batch (its `index_paths`
/// resolves with `paused`); what was indexed stays, and the job waits in `paused_indexing`
/// until `resume_indexing` or `forget_paused_indexing`. Returns whether one was running.
#[tauri::command]
pub fn pause_indexing(state: tauri::State<'_, AppState>) -> bool {
    state.engine.pause_indexing()
}

/// Takes up the paused indexing job where it stopped, streaming its progress as `index_paths`
/// does; rejects with `nothing_paused` when none is.
#[tauri::command]
pub async fn resume_indexing(
    state: tauri::State<'_, AppState>,
    on_event: Channel<IndexEvent>,
) -> Result<IndexEvent, IpcError> {
    Ok(state
        .engine
        .resume_indexing(|e| {
            let _ = on_event.send(e);
        })
        .await?)
}

/// The files and folders of the paused indexing job; empty when none is paused.
#[tauri::command]
pub async fn paused_indexing(state: tauri::State<'_, AppState>) -> Result<Vec<String>, IpcError> {
    Ok(display(state.engine.paused_indexing().await?))
}

/// Forgets the paused indexing job: what it indexed stays in the library.
#[tauri::command]
pub async fn forget_paused_indexing(state: tauri::State<'_, AppState>) -> Result<(), IpcError> {
    Ok(state.engine.forget_paused_indexing().await?)
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
    grants: tauri::State<'_, crate::grants::GrantedPaths>,
    paths: Vec<PathBuf>,
) -> Result<WatchResult, IpcError> {
    // Only folders the user dropped or picked (see grants.rs).
    grants.require(&paths)?;
    let mut not_folders = Vec::new();
    for path in &paths {
        if path.is_dir() {
            state.engine.set_watched(path, true).await?;
        } else {
            not_folders.push(path.display().to_string());
        }
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
    folder: PathBuf,
) -> Result<Vec<String>, IpcError> {
    state.engine.set_watched(&folder, false).await?;
    Ok(display(state.engine.watched_folders().await?))
}

fn display(paths: Vec<PathBuf>) -> Vec<String> {
    paths.into_iter().map(|p| p.display().to_string()).collect()
}

/// Starts the engine's background work for as long as the app runs; its events go to the UI as
/// [`LIBRARY_EVENT`]s.
pub fn start(app: &AppHandle) {
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let engine: &Engine = &app.state::<AppState>().engine;
        engine
            .keep_library_in_sync(|event| {
                // No window to tell (closing): the work goes on regardless.
                if let Err(e) = app.emit(LIBRARY_EVENT, event) {
                    tracing::debug!(error = %e, "library event not delivered");
                }
            })
            .await;
    });
}
