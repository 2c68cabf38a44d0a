//! "Open source": opens the document a cited passage came from in the platform's default app
//! (tauri-plugin-opener). The webview names an answer and a citation, never a path, so a
//! compromised page can open only files that an answer of this library cites.

use std::path::PathBuf;

use tauri_plugin_opener::OpenerExt;

use crate::AppState;
use crate::commands::{IpcError, ShellErrorCode};

/// Opens the file of passage `citation` (1-based, as in `[n]`) of answer `answer_id`, and
/// returns the path opened. The platform opener (xdg-open, `open`, ShellExecute) takes a path
/// and no page: the UI shows the page next to the button.
#[tauri::command]
pub fn open_source(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    answer_id: String,
    citation: usize,
) -> Result<String, IpcError> {
    let record = state.engine.answer(&answer_id)?;
    let passage = citation
        .checked_sub(1)
        .and_then(|i| record.answer.passages.get(i))
        .ok_or_else(|| {
            IpcError::new(
                ShellErrorCode::UnknownSource,
                format!("answer `{answer_id}` has no source [{citation}]"),
            )
        })?;
    let path = PathBuf::from(&passage.path);
    if !path.is_file() {
        return Err(IpcError::new(
            ShellErrorCode::SourceMissing,
            format!(
                "{} is no longer there (moved or deleted); add it to the library again to open it",
                path.display()
            ),
        ));
    }
    app.opener()
        .open_path(path.to_string_lossy(), None::<&str>)
        .map_err(|e| {
            IpcError::new(
                ShellErrorCode::OpenFailed,
                format!(
                    "could not open {} with the default app: {e}; open it from your file manager",
                    path.display()
                ),
            )
        })?;
    Ok(path.display().to_string())
}
