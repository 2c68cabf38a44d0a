//! A cited passage's source: the evidence viewer's data (`passage_source`, and `source_pdf` for
//! the bytes a PDF is rendered from) and "Open in default app" (`open_source`, through
//! tauri-plugin-opener). The webview names a passage, a content id or an answer's citation,
//! never a path, so a compromised page can read or open only documents of this library.

use std::path::PathBuf;

use tauri_plugin_opener::OpenerExt;

use selfrag_engine::PassageSource;

use crate::AppState;
use crate::commands::{IpcError, ShellErrorCode};

/// Opens the file of passage `citation` (1-based, as in `[n]`) of answer `answer_id` (or the
/// shared library's copy of it where it was indexed on another computer), and returns the path
/// opened. The platform opener (xdg-open, `open`, ShellExecute) takes a path
/// and no page: the UI shows the page next to the button.
#[tauri::command]
pub async fn open_source(
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
    // The file holding the content cited: its path here, or a shared library's copy of a file
    // indexed on another computer. Where neither holds it (changed, gone), the path as cited.
    let path = match state.engine.source_file(&passage.id).await {
        Ok(path) => path,
        // Where nothing here holds the content, the path as cited: the message below says it
        // is gone, and a changed file opens as it is now. A store's failure (its copy altered,
        // the store out of reach) is said as it is.
        Err(selfrag_engine::EngineError::Index(
            selfrag_engine::IndexError::SourceMissing { .. }
            | selfrag_engine::IndexError::SourceChanged { .. }
            | selfrag_engine::IndexError::UnknownPassage { .. }
            | selfrag_engine::IndexError::UnknownDocument { .. },
        )) => PathBuf::from(&passage.path),
        Err(e) => return Err(e.into()),
    };
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

/// Where passage `passage_id` (a passage of the library, as an answer's trace names it) is in
/// its source: a PDF's page, or the text it was cut from with its span.
#[tauri::command]
pub async fn passage_source(
    state: tauri::State<'_, AppState>,
    passage_id: String,
) -> Result<PassageSource, IpcError> {
    Ok(state.engine.passage_source(&passage_id).await?)
}

/// The bytes of the library's PDF with content id `document_id`, sent as raw bytes (no JSON
/// array of numbers) for the viewer to render.
#[tauri::command]
pub async fn source_pdf(
    state: tauri::State<'_, AppState>,
    document_id: String,
) -> Result<tauri::ipc::Response, IpcError> {
    let bytes = state.engine.document_pdf(&document_id).await?;
    Ok(tauri::ipc::Response::new(bytes))
}
