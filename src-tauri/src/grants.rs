//! The paths the user handed to the app: files and folders dropped on the window (the native
//! drag-and-drop event, seen here before the page hears of it) and those picked in the native
//! open dialogs that the `pick_files`, `pick_folder`, `pick_zotero_folder` and
//! `pick_bibliography` commands show.
//!
//! The commands that read files the library does not hold yet (`index_paths`, `watch_folders`,
//! `add_zotero_library`, `add_bibliography`) take only such paths. A script running in the page can name any path, but it cannot fake a
//! native drop or answer a native dialog, so it cannot make the app read `~/.ssh` into a library
//! whose passages it could then search.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tauri::Manager;
use tauri_plugin_dialog::{DialogExt, FilePath};

use crate::commands::{IpcError, ShellErrorCode};

/// Every path the user dropped on the window or picked in a dialog since the app started.
#[derive(Default)]
pub struct GrantedPaths {
    paths: Mutex<HashSet<PathBuf>>,
}

impl GrantedPaths {
    /// Records paths the user handed over natively.
    pub fn grant<'a>(&self, paths: impl IntoIterator<Item = &'a PathBuf>) {
        let mut granted = self.paths.lock().unwrap_or_else(|p| p.into_inner());
        granted.extend(paths.into_iter().cloned());
    }

    /// Ok when the user handed over every one of `paths` (exactly those paths: a file inside a
    /// dropped folder is reached by indexing the folder, and a `..` cannot climb out of it).
    pub fn require(&self, paths: &[PathBuf]) -> Result<(), IpcError> {
        let granted = self.paths.lock().unwrap_or_else(|p| p.into_inner());
        match paths.iter().find(|p| !granted.contains(p.as_path())) {
            None => Ok(()),
            Some(path) => Err(not_granted(path)),
        }
    }
}

fn not_granted(path: &Path) -> IpcError {
    IpcError::new(
        ShellErrorCode::PathNotGranted,
        format!(
            "{} was not dropped on the window or chosen in one of the Add… dialogs (files, folder, Zotero library, bibliography); drop it on the window or pick it there to add it",
            path.display()
        ),
    )
}

fn local_paths(picked: Vec<FilePath>) -> Vec<PathBuf> {
    picked
        .into_iter()
        .filter_map(|p| p.into_path().ok())
        .collect()
}

/// Shows the native open dialog for documents; the files chosen are granted and returned
/// (empty when the dialog is cancelled).
///
/// The dialog answers through a callback: an async command that blocked on it would hold one
/// of the async runtime's threads (two on a two-core machine) for as long as the person takes
/// to choose, and every other command would queue behind the rest.
#[tauri::command]
pub async fn pick_files(
    app: tauri::AppHandle,
    grants: tauri::State<'_, GrantedPaths>,
) -> Result<Vec<PathBuf>, IpcError> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    app.dialog()
        .file()
        .set_title("Add documents to the library")
        .pick_files(move |files| {
            let _ = answer.send(files);
        });
    let picked = answered
        .await
        .ok()
        .flatten()
        .map(local_paths)
        .unwrap_or_default();
    grants.grant(&picked);
    Ok(picked)
}

/// Shows the native open dialog for one folder; the folder chosen is granted and returned.
#[tauri::command]
pub async fn pick_folder(
    app: tauri::AppHandle,
    grants: tauri::State<'_, GrantedPaths>,
) -> Result<Option<PathBuf>, IpcError> {
    let mut dialog = app.dialog().file().set_title("Add a folder to the library");
    // GTK would open on its "Recent" view, where a typed folder path cannot be chosen.
    if let Ok(home) = app.path().home_dir() {
        dialog = dialog.set_directory(home);
    }
    let (answer, answered) = tokio::sync::oneshot::channel();
    dialog.pick_folder(move |folder| {
        let _ = answer.send(folder);
    });
    let picked = answered
        .await
        .ok()
        .flatten()
        .and_then(|p| p.into_path().ok());
    grants.grant(&picked);
    Ok(picked)
}

/// Shows the native folder dialog for a Zotero data directory, opening at Zotero's default
/// (`~/Zotero`) where it exists; the folder chosen is granted and returned.
#[tauri::command]
pub async fn pick_zotero_folder(
    app: tauri::AppHandle,
    grants: tauri::State<'_, GrantedPaths>,
) -> Result<Option<PathBuf>, IpcError> {
    let mut dialog = app.dialog().file().set_title("Add a Zotero library");
    let start = selfrag_references::zotero::default_data_dir()
        .filter(|dir| dir.is_dir())
        .or_else(|| app.path().home_dir().ok());
    if let Some(start) = start {
        dialog = dialog.set_directory(start);
    }
    let (answer, answered) = tokio::sync::oneshot::channel();
    dialog.pick_folder(move |folder| {
        let _ = answer.send(folder);
    });
    let picked = answered
        .await
        .ok()
        .flatten()
        .and_then(|p| p.into_path().ok());
    grants.grant(&picked);
    Ok(picked)
}

/// Shows the native open dialog for one bibliography file (BibTeX, BibLaTeX or CSL-JSON); the
/// file chosen is granted and returned.
#[tauri::command]
pub async fn pick_bibliography(
    app: tauri::AppHandle,
    grants: tauri::State<'_, GrantedPaths>,
) -> Result<Option<PathBuf>, IpcError> {
    let mut dialog = app
        .dialog()
        .file()
        .set_title("Add a bibliography file")
        .add_filter("BibTeX, BibLaTeX or CSL-JSON", &["bib", "json"]);
    if let Ok(home) = app.path().home_dir() {
        dialog = dialog.set_directory(home);
    }
    let (answer, answered) = tokio::sync::oneshot::channel();
    dialog.pick_file(move |file| {
        let _ = answer.send(file);
    });
    let picked = answered
        .await
        .ok()
        .flatten()
        .and_then(|p| p.into_path().ok());
    grants.grant(&picked);
    Ok(picked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::IpcErrorCode;

    const NOT_GRANTED: IpcErrorCode = IpcErrorCode::Shell(ShellErrorCode::PathNotGranted);

    #[test]
    fn only_the_paths_handed_over_pass() {
        let grants = GrantedPaths::default();
        let dropped = PathBuf::from("/home/ada/papers");
        assert_eq!(
            grants
                .require(std::slice::from_ref(&dropped))
                .unwrap_err()
                .code,
            NOT_GRANTED
        );
        grants.grant([&dropped]);
        assert!(grants.require(std::slice::from_ref(&dropped)).is_ok());
        // Not a path inside it, not one that climbs out of it, not a mix with an ungranted one.
        for sneaky in ["/home/ada/papers/../.ssh", "/home/ada/.ssh", "/home/ada"] {
            let error = grants
                .require(&[dropped.clone(), PathBuf::from(sneaky)])
                .unwrap_err();
            assert_eq!(error.code, NOT_GRANTED);
            assert!(error.message.contains(sneaky), "{}", error.message);
        }
    }
}
