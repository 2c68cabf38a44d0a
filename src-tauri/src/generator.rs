//! The generator-server commands: the choice as it stands, the connection test, and switching
//! between this computer and a server (llama.cpp's, or OpenAI-compatible such as vLLM). The URL
//! and the model name are kept in the settings file by `use_generator_server` alone (`save_settings` leaves it as it is); the API key goes to the
//! engine's key file and never back to the page.
//!
//! A generator server reads every question and the passages it retrieves, so a new server is
//! used only after the person confirms it in a native dialog that names it: a script in the
//! page cannot answer that dialog, so it cannot send the library's text to a host of its
//! choosing. A connection test sends no text of the user's (the 16 reflection tokens and a fixed
//! sentence), but its address can carry text in its host name or path, and what comes back
//! tells the page about hosts its CSP keeps it from; so a test of any origin other than the
//! server in use is confirmed natively too, once per origin and run. A saved API key is sent
//! only to the origin it was saved for (see selfrag_engine::generator_server), and an error
//! holds a short message of ours, never the reply's body.

use std::collections::HashSet;
use std::sync::Mutex;

use selfrag_engine::generator_server::{generator_fixed_by_env, saved_api_key};
use selfrag_engine::{GeneratorState, ServerCheck};
use selfrag_remote::ServerUrl;
use tauri_plugin_dialog::{DialogExt, MessageDialogButtons, MessageDialogKind};

use crate::AppState;
use crate::commands::{IpcError, ShellErrorCode};

/// The origins the person confirmed a connection test of in this run.
#[derive(Default)]
pub struct TestedOrigins(Mutex<HashSet<String>>);

impl TestedOrigins {
    fn contains(&self, origin: &str) -> bool {
        self.0.lock().is_ok_and(|set| set.contains(origin))
    }

    fn insert(&self, origin: String) {
        if let Ok(mut set) = self.0.lock() {
            set.insert(origin);
        }
    }
}

type Result<T> = std::result::Result<T, IpcError>;

/// The server in use and the model asked of it (`None`: this computer).
fn current_choice(state: &AppState) -> (Option<String>, Option<String>) {
    let config = state.engine.config();
    if generator_fixed_by_env() {
        let server = config.generator_server.as_ref();
        (
            server.map(|s| s.url.clone()),
            server.and_then(|s| s.model.clone()),
        )
    } else {
        let saved = state.settings.get();
        (saved.generator_url, saved.generator_model)
    }
}

fn current(state: &AppState) -> GeneratorState {
    let config = state.engine.config();
    let (url, model) = current_choice(state);
    GeneratorState {
        has_api_key: url
            .as_deref()
            .is_some_and(|u| saved_api_key(&config.data_dir, u).is_some()),
        url,
        model,
        fixed_by_env: generator_fixed_by_env(),
    }
}

/// The origin of the server in use, if any.
fn origin_in_use(state: &AppState) -> Option<String> {
    current_choice(state)
        .0
        .and_then(|u| ServerUrl::parse(&u).ok())
        .map(|u| u.origin())
}

/// How a dialog names a server: its origin on a line of its own, the path below it if any, and
/// a warning where what is sent would cross a network unencrypted.
pub(crate) fn describe(server: &ServerUrl) -> String {
    let mut text = format!("\n{}\n", server.origin());
    if !server.path().is_empty() {
        text.push_str(&format!("(path {})\n", server.path()));
    }
    if server.is_plain_http_off_this_computer() {
        text.push_str(
            "\nThis address is plain http to another computer: what is sent can be read on \
             the way. Use https:// where the server offers it.\n",
        );
    }
    text
}

/// Shows a native OK/Cancel dialog; whether the person chose OK.
pub(crate) async fn confirm(
    app: &tauri::AppHandle,
    title: &str,
    message: String,
    ok: &str,
) -> bool {
    let (answer, answered) = tokio::sync::oneshot::channel();
    app.dialog()
        .message(message)
        .title(title)
        .kind(MessageDialogKind::Warning)
        .buttons(MessageDialogButtons::OkCancelCustom(
            ok.into(),
            "Cancel".into(),
        ))
        .show(move |yes| {
            let _ = answer.send(yes);
        });
    answered.await.unwrap_or(false)
}

/// Where the model generates now.
#[tauri::command]
pub fn generator_state(state: tauri::State<'_, AppState>) -> GeneratorState {
    current(&state)
}

/// The title of the connection test's confirmation dialog (the end-to-end tests answer it by
/// this name).
const CONFIRM_TEST_TITLE: &str = "Test a generator server";

/// Checks the server at `url` for `model` (`None`: the one it serves) as an answer would,
/// changing nothing; `api_key` `None` or empty uses the key saved for `url`'s origin, if any.
/// An origin other than the server in use is tested only once the person confirms it (declined:
/// `not_confirmed`).
#[tauri::command]
pub async fn test_generator_server(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    tested: tauri::State<'_, TestedOrigins>,
    url: String,
    model: Option<String>,
    api_key: Option<String>,
) -> Result<ServerCheck> {
    let server = ServerUrl::parse(&url).map_err(selfrag_engine::EngineError::from)?;
    let origin = server.origin();
    if origin_in_use(&state).as_ref() != Some(&origin) && !tested.contains(&origin) {
        let message = format!(
            "Connect to this server to test it?\n{}\nThe test sends the model's 16 reflection \
             tokens and a fixed sentence, none of your documents or questions.",
            describe(&server)
        );
        if !confirm(&app, CONFIRM_TEST_TITLE, message, "Test this server").await {
            return Err(IpcError::new(
                ShellErrorCode::NotConfirmed,
                "Not tested: the connection was not confirmed.".into(),
            ));
        }
        tested.insert(origin);
    }
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
        let server = ServerUrl::parse(new).map_err(selfrag_engine::EngineError::from)?;
        let message = format!(
            "Generate answers on this server?\n{}\nEvery question you ask, and the passages it \
             retrieves from your library, will be sent to it.",
            describe(&server)
        );
        if !confirm(&app, CONFIRM_TITLE, message, "Use this server").await {
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
