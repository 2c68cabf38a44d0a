//! The first-run screen's commands: download a missing model with progress over a `Channel`,
//! cancel it (the partial file stays and the next download resumes), and look for the models
//! again after they were put in place some other way.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use selfrag_engine::{AppStatus, ModelDownloadProgress};
use tauri::ipc::Channel;

use crate::AppState;
use crate::commands::{IpcError, ShellErrorCode};

/// The cancel flags of the downloads under way, by model id.
#[derive(Default)]
pub struct Downloads {
    running: Mutex<HashMap<String, Arc<AtomicBool>>>,
}

impl Downloads {
    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<AtomicBool>>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Downloads model `model_id` into the Hugging Face cache; resolves with the new status once
/// it is complete and checked (the app then uses it without a restart).
#[tauri::command]
pub async fn download_model(
    state: tauri::State<'_, AppState>,
    downloads: tauri::State<'_, Downloads>,
    model_id: String,
    on_event: Channel<ModelDownloadProgress>,
) -> Result<AppStatus, IpcError> {
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let mut running = downloads.running();
        if running.contains_key(&model_id) {
            return Err(IpcError::new(
                ShellErrorCode::DownloadBusy,
                format!("{model_id} is already being downloaded; wait for it or cancel it"),
            ));
        }
        running.insert(model_id.clone(), cancel.clone());
    }
    let result = state
        .engine
        .download_model(
            &model_id,
            move |p| {
                // A closed channel means the window went away; the download still finishes.
                let _ = on_event.send(p);
            },
            cancel,
        )
        .await;
    downloads.running().remove(&model_id);
    Ok(result?)
}

/// Stops the download of `model_id`; its `download_model` then rejects with the code
/// `download_cancelled`. Does nothing when it is not running.
#[tauri::command]
pub fn cancel_download(downloads: tauri::State<'_, Downloads>, model_id: String) {
    if let Some(flag) = downloads.running().get(&model_id) {
        flag.store(true, Ordering::Relaxed);
    }
}

/// Looks for the models again and returns the new status.
#[tauri::command]
pub async fn refresh_models(state: tauri::State<'_, AppState>) -> Result<AppStatus, IpcError> {
    Ok(state.engine.refresh_models().await)
}
