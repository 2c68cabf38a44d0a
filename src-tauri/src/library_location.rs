//! The library-location commands: where the library is, the connection test of a location, and
//! the choice of another for the next start (the app restarts to open it).
//!
//! A shared library receives the text, passages and vectors of every document indexed into it,
//! readable by everyone with access to the store, and a test writes a probe object there with
//! this computer's credentials; so a location other than the one open is tested or chosen only
//! after the person confirms it in a native dialog that names it, which a script in the page
//! cannot answer. The store's endpoint and credentials never pass through the page: they come
//! from the store's own environment and files.

use selfrag_engine::LibraryLocation;
use selfrag_engine::library_location::{LibraryLocationState, library_fixed_by_env};

use crate::AppState;
use crate::commands::{IpcError, ShellErrorCode};
use crate::generator::confirm;

type Result<T> = std::result::Result<T, IpcError>;

fn current(state: &AppState) -> LibraryLocationState {
    selfrag_engine::library_location::library_location_state(
        state.engine.config(),
        state.settings.get().library_location.as_deref(),
    )
}

/// A location as the person typed it: blank is the default folder.
fn parse(location: Option<String>) -> Result<Option<LibraryLocation>> {
    Ok(location
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .map(|l| LibraryLocation::parse(&l))
        .transpose()
        .map_err(selfrag_engine::EngineError::from)?)
}

/// How a dialog names a location, and what sharing it means.
fn describe(location: &LibraryLocation) -> String {
    match location {
        LibraryLocation::Shared(uri) => format!(
            "\n{}\nat {}\n\nThe text, passages and vectors of every document you index will be \
             written there, readable by everyone with access to it.",
            uri.as_str(),
            uri.endpoint()
        ),
        LibraryLocation::Folder(dir) => format!("\n{}\n", dir.display()),
    }
}

/// Where the library is, and the location chosen for the next start.
#[tauri::command]
pub fn library_location_state(state: tauri::State<'_, AppState>) -> LibraryLocationState {
    current(&state)
}

/// The title of the connection test's confirmation dialog (the end-to-end tests answer it by
/// this name).
const CONFIRM_TEST_TITLE: &str = "Test a library location";

/// Tests `location` without opening it (`None`: the default folder): for a shared library,
/// that the store answers, takes this computer's credentials and honours conditional writes;
/// for a folder, that it can be written. A location other than the open one is tested only
/// once the person confirms it (declined: `not_confirmed`).
#[tauri::command]
pub async fn test_library_location(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    location: Option<String>,
) -> Result<selfrag_engine::StoreCheck> {
    let location = parse(location)?
        .unwrap_or_else(|| LibraryLocation::Folder(state.engine.config().data_dir.join("library")));
    // A folder's test makes the folder and writes a file there: confirmed like a store's.
    if location != state.engine.config().library_location() {
        let message = format!(
            "Test this library location?\n{}\n\nThe test writes and removes one small {} \
             there; none of your documents.",
            describe(&location),
            if location.is_shared() {
                "object"
            } else {
                "file"
            }
        );
        if !confirm(&app, CONFIRM_TEST_TITLE, message, "Test this location").await {
            return Err(IpcError::new(
                ShellErrorCode::NotConfirmed,
                "Not tested: the location was not confirmed.".into(),
            ));
        }
    }
    Ok(selfrag_engine::check_location(&location)
        .await
        .map_err(selfrag_engine::EngineError::from)?)
}

/// The title of the confirmation dialog (the end-to-end tests answer it by this name).
const CONFIRM_TITLE: &str = "Use another library";

/// Opens the library at `location` (`None`: the default folder) from the next start, once the
/// person confirms it in a native dialog (declined: nothing changes), after the location's
/// connection test. Returns the state to show; `restart` then opens it.
#[tauri::command]
pub async fn use_library_location(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    location: Option<String>,
) -> Result<LibraryLocationState> {
    if library_fixed_by_env() {
        return Ok(current(&state));
    }
    let chosen = parse(location)?;
    let target = chosen
        .clone()
        .unwrap_or_else(|| LibraryLocation::Folder(state.engine.config().data_dir.join("library")));
    // A saved location this build cannot read is replaced by any choice.
    let saved = parse(state.settings.get().library_location).ok().flatten();
    if chosen == saved {
        return Ok(current(&state));
    }
    let message = format!(
        "Open this library when Self-RAG Desktop starts next?\n{}\n\nThe library open now stays \
         as it is.",
        describe(&target)
    );
    if !confirm(&app, CONFIRM_TITLE, message, "Use this library").await {
        return Ok(current(&state));
    }
    selfrag_engine::check_location(&target)
        .await
        .map_err(selfrag_engine::EngineError::from)?;
    let mut settings = state.settings.get();
    settings.library_location = chosen.map(|l| l.to_string());
    state.settings.save(settings)?;
    Ok(current(&state))
}

/// Restarts the app, which then opens the library chosen for the next start.
#[tauri::command]
pub fn restart_app(app: tauri::AppHandle) {
    app.restart();
}
