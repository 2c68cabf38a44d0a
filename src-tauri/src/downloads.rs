//! The first-run screen's commands: download a missing model with progress over a `Channel`
//! (stopped with `cancel_job`; the partial file stays and the next download resumes), and look
//! for the models again after they were put in place some other way.

use selfrag_engine::{AppStatus, ModelDownloadProgress};
use tauri::ipc::Channel;

use crate::AppState;
use crate::commands::IpcError;

/// Downloads model `model_id` into the Hugging Face cache; resolves with the new status once
/// it is complete and checked (the app then uses it without a restart).
#[tauri::command]
pub async fn download_model(
    state: tauri::State<'_, AppState>,
    model_id: String,
    on_event: Channel<ModelDownloadProgress>,
) -> Result<AppStatus, IpcError> {
    Ok(state
        .engine
        .download_model(&model_id, move |p| {
            // A closed channel means the window went away; the download still finishes.
            let _ = on_event.send(p);
        })
        .await?)
}

/// Looks for the models again and returns the new status.
#[tauri::command]
pub async fn refresh_models(state: tauri::State<'_, AppState>) -> Result<AppStatus, IpcError> {
    Ok(state.engine.refresh_models().await)
}
