//! The commands the UI may invoke (each one granted in `capabilities/default.json`).

use std::path::PathBuf;

use selfrag_core::{ClosedSetQuestion, CritiqueWeights, Progress, Settings};
use selfrag_engine::{
    AnswerRecord, AppStatus, DocumentInfo, EngineError, ErrorCode, ExportOptions, IndexEvent,
    JobKind,
};
use serde::Serialize;
use tauri::ipc::Channel;
use tauri_plugin_dialog::DialogExt;

use crate::AppState;

/// The one error shape the UI receives: a stable code and a message for people.
#[derive(Debug, Serialize, ts_rs::TS)]
pub struct IpcError {
    pub(crate) code: IpcErrorCode,
    pub(crate) message: String,
}

/// What the UI switches on: the engine's codes, or the shell's own. On the wire and in
/// TypeScript both are one union of `snake_case` strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(untagged)]
pub enum IpcErrorCode {
    Engine(ErrorCode),
    Shell(ShellErrorCode),
}

/// The failures of the shell's own commands (grants, sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum ShellErrorCode {
    /// A path that was neither dropped on the window nor picked in a dialog.
    PathNotGranted,
    /// A citation number the answer does not have.
    UnknownSource,
    /// The cited file is gone from disk.
    SourceMissing,
    /// The OS could not open the file with its default app.
    OpenFailed,
    /// The person declined a native confirmation (a connection test of a new server).
    NotConfirmed,
}

impl From<EngineError> for IpcError {
    fn from(e: EngineError) -> Self {
        Self {
            code: IpcErrorCode::Engine(e.code()),
            message: e.to_string(),
        }
    }
}

impl IpcError {
    /// An error that does not come from the engine: the shell's own commands.
    pub(crate) fn new(code: ShellErrorCode, message: String) -> Self {
        Self {
            code: IpcErrorCode::Shell(code),
            message,
        }
    }
}

type Result<T> = std::result::Result<T, IpcError>;

#[tauri::command]
pub async fn app_status(state: tauri::State<'_, AppState>) -> Result<AppStatus> {
    Ok(state.engine.status().await)
}

#[tauri::command]
pub async fn index_paths(
    state: tauri::State<'_, AppState>,
    grants: tauri::State<'_, crate::grants::GrantedPaths>,
    paths: Vec<PathBuf>,
    on_event: Channel<IndexEvent>,
) -> Result<IndexEvent> {
    // Only what the user dropped or picked (see grants.rs).
    grants.require(&paths)?;
    // One job at a time (the engine's rule), stoppable with cancel_indexing.
    Ok(state
        .engine
        .index_paths(&paths, |e| {
            // A closed channel means the window went away; indexing still finishes.
            let _ = on_event.send(e);
        })
        .await?)
}

#[tauri::command]
pub async fn list_documents(state: tauri::State<'_, AppState>) -> Result<Vec<DocumentInfo>> {
    Ok(state.engine.documents().await?)
}

#[tauri::command]
pub async fn ask(
    state: tauri::State<'_, AppState>,
    question: String,
    settings: Settings,
    options: Option<Vec<String>>,
    on_event: Channel<Progress>,
) -> Result<AnswerRecord> {
    let send = move |p| {
        let _ = on_event.send(p);
    };
    // With answer options, a multiple-choice question: each option scored (the trace's
    // `closedSet`).
    match options.filter(|o| !o.is_empty()) {
        None => Ok(state.engine.ask(question, settings, send).await?),
        Some(options) => {
            let question = ClosedSetQuestion::multiple_choice(&question, &options)
                .map_err(EngineError::from)?;
            Ok(state
                .engine
                .ask_closed_set(question, settings, send)
                .await?)
        }
    }
}

/// Stops every running job of one kind at its next step: the question being answered (its
/// `ask` then rejects with `cancelled`), the indexing job (what was indexed stays; the watched
/// folders' catch-up ends with `unwatch_folder` instead), or a model's download (its
/// `download_model` rejects with `download_cancelled`; the partial file stays). Returns whether
/// one was running.
#[tauri::command]
pub fn cancel_job(state: tauri::State<'_, AppState>, job: JobKind) -> bool {
    state.engine.cancel(&job)
}

#[tauri::command]
pub fn rerank(
    state: tauri::State<'_, AppState>,
    answer_id: String,
    weights: CritiqueWeights,
    hard_constraints: bool,
) -> Result<AnswerRecord> {
    Ok(state.engine.rerank(&answer_id, weights, hard_constraints)?)
}

/// Asks where to save with the native dialog (proposing the format's extension), then writes
/// there. The path never comes from the webview, so a compromised page cannot write files of its
/// choosing.
#[tauri::command]
pub async fn export_answer(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    answer_id: String,
    options: ExportOptions,
) -> Result<Option<String>> {
    let ext = options.format.extension();
    // Answered through a callback, not by blocking a runtime thread (see `pick_files`).
    let (answer, answered) = tokio::sync::oneshot::channel();
    app.dialog()
        .file()
        .set_title("Export answer")
        .set_file_name(format!("answer.{ext}"))
        .add_filter(options.format.label(), &[ext])
        .save_file(move |chosen| {
            let _ = answer.send(chosen);
        });
    let chosen = answered.await.ok().flatten();
    let Some(path) = chosen.and_then(|p| p.into_path().ok()) else {
        return Ok(None);
    };
    state.engine.export(&answer_id, options, &path)?;
    Ok(Some(path.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Engine and shell codes travel as one flat union of strings, as `bindings.ts` declares.
    #[test]
    fn an_error_code_is_a_plain_string_on_the_wire() {
        let engine = IpcError::from(EngineError::ModelThreadGone);
        let shell = IpcError::new(ShellErrorCode::PathNotGranted, "not granted".into());
        let json = |e: &IpcError| serde_json::to_value(e).unwrap()["code"].clone();
        assert_eq!(json(&engine), "model_thread");
        assert_eq!(json(&shell), "path_not_granted");
    }
}
