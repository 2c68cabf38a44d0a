//! The commands over what the app keeps: the answer history (list with search, reopen, delete),
//! the rendered answer for the clipboard, and the persisted settings (load at start, save on
//! change; a changed device reloads the models on the next question).

use selfrag_engine::{
    AnswerRecord, AppSettings, DeviceStatus, ExportOptions, HistoryEntry, LoadedSettings,
};

use crate::AppState;
use crate::commands::IpcError;

type Result<T> = std::result::Result<T, IpcError>;

/// The saved answers whose question or answer contains every word of `query`, newest first.
#[tauri::command]
pub fn list_history(state: tauri::State<'_, AppState>, query: String) -> Result<Vec<HistoryEntry>> {
    Ok(state.engine.history(&query)?)
}

/// A saved answer, to show again and re-rank.
#[tauri::command]
pub fn open_answer(state: tauri::State<'_, AppState>, answer_id: String) -> Result<AnswerRecord> {
    Ok(state.engine.answer(&answer_id)?)
}

#[tauri::command]
pub fn delete_answer(state: tauri::State<'_, AppState>, answer_id: String) -> Result<()> {
    Ok(state.engine.delete_answer(&answer_id)?)
}

/// The answer rendered as the export would write it; the UI puts it on the clipboard.
#[tauri::command]
pub fn render_answer(
    state: tauri::State<'_, AppState>,
    answer_id: String,
    options: ExportOptions,
) -> Result<String> {
    Ok(state.engine.render(&answer_id, options)?)
}

/// The settings loaded at start, with the notice about a broken file if there was one.
#[tauri::command]
pub fn load_settings(state: tauri::State<'_, AppState>) -> LoadedSettings {
    state.settings.loaded()
}

/// Saves the settings; a new device takes effect on the next question (unless
/// `SELFRAG_DEVICE` fixes it), a new embedder precision with the next embedding (unless
/// `SELFRAG_EMBEDDER_PRECISION` fixes it), a new KV cache or dummy prefix with the next answer
/// (unless `SELFRAG_KV_CACHE` or `SELFRAG_DUMMY_PREFIX` fixes it), look-ups of works by their
/// DOI or arXiv id from the next indexing job. Returns the device status to show.
#[tauri::command]
pub fn save_settings(
    state: tauri::State<'_, AppState>,
    mut settings: AppSettings,
) -> Result<DeviceStatus> {
    // The generator server is chosen through `use_generator_server` alone, and the library's
    // location through `use_library_location`, the embeddings server through
    // `use_embedder_server`: each after a native confirmation.
    let saved = state.settings.get();
    settings.generator_url = saved.generator_url;
    settings.generator_model = saved.generator_model;
    settings.library_location = saved.library_location;
    settings.embedder_url = saved.embedder_url;
    settings.embedder_model = saved.embedder_model;
    let (device, precision) = (settings.device, settings.embedder_precision);
    let numerics = selfrag_engine::GeneratorNumerics {
        cache_precision: settings.cache_precision,
        dummy_prefix: settings.dummy_prefix,
    };
    let look_up_works = settings.look_up_works;
    state.settings.save(settings)?;
    state.engine.set_look_up_works(look_up_works);
    if !selfrag_engine::settings::device_fixed_by_env() {
        state.engine.set_device(device)?;
    }
    if !selfrag_engine::settings::embedder_precision_fixed_by_env() {
        state.engine.set_embedder_precision(precision)?;
    }
    state
        .engine
        .set_generator_numerics(crate::numerics_in_force(
            numerics,
            state.engine.config().generator_numerics,
        ));
    Ok(state.engine.device_status())
}
