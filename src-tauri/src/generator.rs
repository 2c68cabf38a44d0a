//! The generator-server commands: the choice as it stands, the connection test, and switching
//! between this computer and a server (llama.cpp's, or OpenAI-compatible such as vLLM). The URL
//! and the model name are kept in the settings file by `use_generator_server` alone (`save_settings` leaves it as it is); the API key goes to the
//! engine's key file and never back to the page.
//!
//! A generator server reads every question and the passages it retrieves, so a new server is
//! used only after the person confirms it in a native dialog that names it: a script in the
//! page cannot answer that dialog, so it cannot send the library's text to a host of its
//! choosing. The connection test sends no text of the user's: the 16 reflection tokens and a
//! fixed sentence.

use selfrag_engine::generator_server::{generator_fixed_by_env, saved_api_key};
use selfrag_engine::{GeneratorState, ServerCheck};
use tauri_plugin_dialog::{DialogExt, MessageDialogButtons, MessageDialogKind};

use crate::AppState;
use crate::commands::IpcError;

type Result<T> = std::result::Result<T, IpcError>;

fn current(state: &AppState) -> GeneratorState {
    let config = state.engine.config();
    let (url, model) = if generator_fixed_by_env() {
        let server = config.generator_server.as_ref();
        (
            server.map(|s| s.url.clone()),
            server.and_then(|s| s.model.clone()),
        )
    } else {
        let saved = state.settings.get();
        (saved.generator_url, saved.generator_model)
    };
    GeneratorState {
        url,
        model,
        fixed_by_env: generator_fixed_by_env(),
        has_api_key: saved_api_key(&config.data_dir).is_some(),
    }
}

/// Where the model generates now.
#[tauri::command]
pub fn generator_state(state: tauri::State<'_, AppState>) -> GeneratorState {
    current(&state)
}

/// Checks the server at `url` for `model` (`None`: the one it serves) as an answer would,
/// changing nothing; `api_key` `None` or empty uses the saved key.
#[tauri::command]
pub async fn test_generator_server(
    state: tauri::State<'_, AppState>,
    url: String,
    model: Option<String>,
    api_key: Option<String>,
) -> Result<ServerCheck> {
    Ok(state
        .engine
        .test_generator_server(url, model, api_key)
        .await?)
}

/// The title of the confirmation dialog (the end-to-end tests answer it by this name).
const CONFIRM_TITLE: &str = "Use a generator server";

/// Generates on the server at `url`, asked for `model`, from the next question on (`None`:
/// this computer), and remembers both; a server other than the current one is used only once the person confirms
/// it in a native dialog (declined: nothing changes). `api_key`: `Some` replaces the saved key
/// (empty removes it), `None` keeps it.
#[tauri::command]
pub async fn use_generator_server(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    url: Option<String>,
    model: Option<String>,
    api_key: Option<String>,
) -> Result<GeneratorState> {
    let url = url.map(|u| u.trim().to_owned()).filter(|u| !u.is_empty());
    let model = model
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty() && url.is_some());
    if let Some(new) = url
        .as_ref()
        .filter(|u| current(&state).url.as_ref() != Some(*u))
    {
        selfrag_remote::check_url(new).map_err(selfrag_engine::EngineError::from)?;
        let (answer, answered) = tokio::sync::oneshot::channel();
        app.dialog()
            .message(format!(
                "Generate answers on {new}?\n\nEvery question you ask, and the passages it \
                 retrieves from your library, will be sent to this server."
            ))
            .title(CONFIRM_TITLE)
            .kind(MessageDialogKind::Warning)
            .buttons(MessageDialogButtons::OkCancelCustom(
                "Use this server".into(),
                "Cancel".into(),
            ))
            .show(move |yes| {
                let _ = answer.send(yes);
            });
        if !answered.await.unwrap_or(false) {
            return Ok(current(&state));
        }
    }
    state
        .engine
        .set_generator_server(url.clone(), model.clone(), api_key)?;
    if !generator_fixed_by_env() {
        let mut settings = state.settings.get();
        settings.generator_url = url;
        settings.generator_model = model;
        state.settings.save(settings)?;
    }
    Ok(current(&state))
}
