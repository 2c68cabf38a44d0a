//! The library pane's commands: indexing (one job at a time, the engine's rule; stopped with
//! `cancel_job`, paused and resumed), removing and re-indexing documents, the library's statistics and the watched
//! folders; the works the documents hold (the person's edit of a record, a Zotero library or a
//! bibliography file added with its files, "Open in Zotero"). The engine's background work ([`Engine::keep_library_in_sync`]: the job a crash
//! interrupted, then the watched folders) streams to the UI as the app event [`LIBRARY_EVENT`],
//! a [`selfrag_engine::LibraryEvent`].

use std::path::PathBuf;

use selfrag_engine::{Engine, IndexEvent, LibraryStats, ReferenceImport};
use selfrag_works::Work;
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::{AppHandle, Emitter, Manager};
use tauri_plugin_opener::OpenerExt;

use crate::AppState;
use crate::commands::{IpcError, ShellErrorCode};

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

/// Sets the person's own record of the work in the library's document at `path` (only a
/// document the library holds): every field of `work` is theirs and wins over every source;
/// an empty work undoes their edits. Returns the work as it now reads.
#[tauri::command]
pub async fn set_work(
    state: tauri::State<'_, AppState>,
    path: PathBuf,
    work: Work,
) -> Result<Work, IpcError> {
    Ok(state.engine.set_work(&path, work).await?)
}

/// Adds the Zotero library in data directory `dir` (picked in `pick_zotero_folder`): indexes
/// its items' files as one job, streaming its events like `index_paths`, and gives each
/// document its item's record.
#[tauri::command]
pub async fn add_zotero_library(
    state: tauri::State<'_, AppState>,
    grants: tauri::State<'_, crate::grants::GrantedPaths>,
    dir: PathBuf,
    on_event: Channel<IndexEvent>,
) -> Result<ReferenceImport, IpcError> {
    grants.require(std::slice::from_ref(&dir))?;
    Ok(state
        .engine
        .add_zotero_library(&dir, |e| {
            let _ = on_event.send(e);
        })
        .await?)
}

/// Adds the BibTeX, BibLaTeX or CSL-JSON file at `path` (picked in `pick_bibliography`):
/// indexes the files its entries name, streaming the job's events, and gives each document its
/// entry's record.
#[tauri::command]
pub async fn add_bibliography(
    state: tauri::State<'_, AppState>,
    grants: tauri::State<'_, crate::grants::GrantedPaths>,
    path: PathBuf,
    on_event: Channel<IndexEvent>,
) -> Result<ReferenceImport, IpcError> {
    grants.require(std::slice::from_ref(&path))?;
    Ok(state
        .engine
        .add_bibliography(&path, |e| {
            let _ = on_event.send(e);
        })
        .await?)
}

/// The `zotero://` address "Open in Zotero" opens for the library's document at
/// `document_path` at `page` (the file's 1-based page); null where it did not come from
/// Zotero. The UI shows it on the button.
#[tauri::command]
pub async fn zotero_link(
    state: tauri::State<'_, AppState>,
    document_path: PathBuf,
    page: Option<u32>,
) -> Result<Option<String>, IpcError> {
    Ok(state.engine.zotero_uri(&document_path, page).await?)
}

/// Opens the library's document at `document_path` in Zotero (its PDF at `page`, else its item)
/// and returns the address opened. The address is built from the library's record of the
/// document, never taken from the page, so a page script cannot open other links this way.
#[tauri::command]
pub async fn open_in_zotero(
    app: AppHandle,
    state: tauri::State<'_, AppState>,
    document_path: PathBuf,
    page: Option<u32>,
) -> Result<String, IpcError> {
    let uri = state
        .engine
        .zotero_uri(&document_path, page)
        .await?
        .ok_or_else(|| {
            IpcError::new(
                ShellErrorCode::OpenFailed,
                format!(
                    "{} did not come from a Zotero library, so Zotero cannot show it; add its Zotero library to link it",
                    document_path.display()
                ),
            )
        })?;
    let handled = tauri::async_runtime::spawn_blocking(zotero_links_handled)
        .await
        .unwrap_or(true);
    if !handled {
        return Err(zotero_missing(
            &uri,
            "no application is registered for zotero:// links",
        ));
    }
    app.opener()
        .open_url(&uri, None::<&str>)
        .map_err(|e| zotero_missing(&uri, &e.to_string()))?;
    Ok(uri)
}

fn zotero_missing(uri: &str, reason: &str) -> IpcError {
    // The launcher's own words (its name, its exit status) are for the log, not the panel.
    tracing::warn!(%uri, %reason, "could not open a zotero:// link");
    IpcError::new(
        ShellErrorCode::OpenFailed,
        format!(
            "Zotero is not installed here, or does not handle zotero:// links, so {uri} could not be opened. Install Zotero 7, or find the item in Zotero yourself"
        ),
    )
}

/// Whether the desktop has an application for `zotero://` links. The platform opener starts
/// detached and cannot tell, so on Linux the desktop's own table is asked (`xdg-mime`, the
/// tool `xdg-open` itself reads); elsewhere the system shows its own message for a link it
/// cannot open, and this answers true.
fn zotero_links_handled() -> bool {
    if !cfg!(target_os = "linux") {
        return true;
    }
    match std::process::Command::new("xdg-mime")
        .args(["query", "default", "x-scheme-handler/zotero"])
        .output()
    {
        // An empty answer: no handler. A failed query tells nothing; the opener tries.
        Ok(out) if out.status.success() => !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        // Without xdg-mime the opener's own error says what is missing.
        Ok(_) | Err(_) => true,
    }
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
