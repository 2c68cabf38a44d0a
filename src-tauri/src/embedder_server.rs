//! The embedder-server commands: the embedder in use, the connection test of an embeddings
//! server, and the choice of a server (or this computer) for the next start (the app restarts
//! to use it). The URL and model are kept in the settings file by `use_embedder_server` alone
//! (`save_settings` leaves them as they are); the API key goes to the engine's key file
//! (`embedder-api-key`) and never back to the page.
//!
//! An embeddings server reads every passage of every document indexed and every question
//! asked, so a server is tested or chosen only after the person confirms it in a native dialog
//! that names it, which a script in the page cannot answer.

use selfrag_engine::embedder_server::{
    EmbedderServerState, embedder_fixed_by_env, save_embedder_api_key,
};
use selfrag_engine::{EmbedderServerCheck, EngineError};
use selfrag_remote::{EmbedderServerError, ServerUrl};

use crate::AppState;
use crate::commands::{IpcError, ShellErrorCode};
use crate::generator::{confirm, describe};

type Result<T> = std::result::Result<T, IpcError>;

fn current(state: &AppState) -> EmbedderServerState {
    let saved = state.settings.get();
    selfrag_engine::embedder_server::embedder_server_state(
        state.engine.config(),
        saved.embedder_url,
        saved.embedder_model,
    )
}

fn parse(url: &str) -> Result<ServerUrl> {
    Ok(ServerUrl::parse(url)
        .map_err(EmbedderServerError::from)
        .map_err(EngineError::from)?)
}

/// The embedder in use, and the choice saved for the next start.
#[tauri::command]
pub fn embedder_server_state(state: tauri::State<'_, AppState>) -> EmbedderServerState {
    current(&state)
}

/// The title of the connection test's confirmation dialog (the end-to-end tests answer it by
/// this name).
const CONFIRM_TEST_TITLE: &str = "Test an embedder server";

/// Tests the embeddings server at `url` for `model` (`None`: the one it serves), changing
/// nothing; `api_key` `None` or blank uses the key saved for `url`'s origin. Confirmed natively
/// first, unless it is the server in use (declined: `not_confirmed`).
#[tauri::command]
pub async fn test_embedder_server(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    url: String,
    model: Option<String>,
    api_key: Option<String>,
) -> Result<EmbedderServerCheck> {
    let server = parse(&url)?;
    let in_use = current(&state).url.and_then(|u| ServerUrl::parse(&u).ok());
    if in_use.map(|u| u.origin()) != Some(server.origin()) {
        let message = format!(
            "Connect to this embedder server to test it?\n{}\nThe test sends one fixed sentence, \
             none of your documents or questions.",
            describe(&server)
        );
        if !confirm(&app, CONFIRM_TEST_TITLE, message, "Test this server").await {
            return Err(IpcError::new(
                ShellErrorCode::NotConfirmed,
                "Not tested: the connection was not confirmed.".into(),
            ));
        }
    }
    let data_dir = state.engine.config().data_dir.clone();
    Ok(
        selfrag_engine::embedder_server::test_embedder_server(&data_dir, url, model, api_key)
            .await?,
    )
}

/// The title of the confirmation dialog (the end-to-end tests answer it by this name).
const CONFIRM_TITLE: &str = "Use an embedder server";

/// Embeds on the server at `url`, asked for `model`, from the next start on (`None`: this
/// computer), once the person confirms a server in a native dialog (declined: nothing changes)
/// and its connection test passes. `api_key`: `Some` replaces the saved key (blank removes it),
/// `None` keeps it. Returns the state to show; `restart_app` then uses the choice.
#[tauri::command]
pub async fn use_embedder_server(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    url: Option<String>,
    model: Option<String>,
    api_key: Option<String>,
) -> Result<EmbedderServerState> {
    if embedder_fixed_by_env() {
        return Ok(current(&state));
    }
    let url = url.map(|u| u.trim().to_owned()).filter(|u| !u.is_empty());
    let model = model
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty() && url.is_some());
    let data_dir = state.engine.config().data_dir.clone();
    if let Some(url) = &url {
        let server = parse(url)?;
        let message = format!(
            "Embed on this server from the next start?\n{}\nEvery passage of every document you \
             index, and every question you ask, will be sent to it. A library made with another \
             embedder opens only where the server runs the same model.",
            describe(&server)
        );
        if !confirm(&app, CONFIRM_TITLE, message, "Use this server").await {
            return Ok(current(&state));
        }
        // With the key it will be used with: the one typed, none where it is being removed
        // (blank), else the one saved for the address.
        selfrag_engine::embedder_server::test_embedder_server(
            &data_dir,
            url.clone(),
            model.clone(),
            api_key.clone(),
        )
        .await?;
    }
    save_embedder_api_key(&data_dir, url.as_deref(), api_key.as_deref())?;
    let mut settings = state.settings.get();
    settings.embedder_url = url;
    settings.embedder_model = model;
    state.settings.save(settings)?;
    Ok(current(&state))
}
