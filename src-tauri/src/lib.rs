//! # selfrag-desktop: the Tauri shell
//!
//! Thin `#[tauri::command]` wrappers over selfrag-engine: every command takes typed arguments,
//! returns typed payloads, and reports failure as one serializable [`IpcError`] `{code, message}`.
//! Streaming (indexing progress, the algorithm's progress) goes over `tauri::ipc::Channel`.
//! All logic lives in the engine; this crate only adapts it to the webview.

mod app_data;
mod bindings;
mod commands;
mod downloads;
mod embedder_server;
mod generator;
mod grants;
mod library;
mod library_location;
mod sources;

use std::sync::Mutex;

use anyhow::Context;
use selfrag_engine::{Engine, EngineConfig, SettingsStore};
use tauri::Manager;

/// The names of the commands the UI may invoke, from build.rs's one list: the invoke handler,
/// the capability's permissions and the UI's bindings all come from it.
pub const COMMANDS: &[&str] = include!(concat!(env!("OUT_DIR"), "/command_names.rs"));

/// What every command can reach.
pub struct AppState {
    engine: Engine,
    /// The persisted settings (theme, device, ask and export choices).
    settings: SettingsStore,
}

/// The generator numerics to run with: the `saved` ones, except where the environment fixed
/// one for this run (`from_env`, as the engine's config read it).
pub(crate) fn numerics_in_force(
    saved: selfrag_engine::GeneratorNumerics,
    from_env: selfrag_engine::GeneratorNumerics,
) -> selfrag_engine::GeneratorNumerics {
    selfrag_engine::GeneratorNumerics {
        cache_precision: if selfrag_engine::settings::cache_precision_fixed_by_env() {
            from_env.cache_precision
        } else {
            saved.cache_precision
        },
        dummy_prefix: if selfrag_engine::settings::dummy_prefix_fixed_by_env() {
            from_env.dummy_prefix
        } else {
            saved.dummy_prefix
        },
    }
}

/// Builds and runs the app until its window closes.
pub fn run() -> anyhow::Result<()> {
    let mut config = EngineConfig::from_env()?;
    let settings = SettingsStore::from_env();
    // The saved embedder precision and device choice, unless SELFRAG_EMBEDDER_PRECISION or
    // SELFRAG_DEVICE fixes it for this run.
    if !selfrag_engine::settings::embedder_precision_fixed_by_env() {
        config.embedder_precision = settings.get().embedder_precision;
    }
    if !selfrag_engine::settings::device_fixed_by_env() {
        config.device = settings.get().device;
    }
    // The saved KV cache and dummy prefix, each unless SELFRAG_KV_CACHE or
    // SELFRAG_DUMMY_PREFIX fixes it.
    config.generator_numerics = numerics_in_force(
        selfrag_engine::GeneratorNumerics {
            cache_precision: settings.get().cache_precision,
            dummy_prefix: settings.get().dummy_prefix,
        },
        config.generator_numerics,
    );
    // The saved generator server, unless SELFRAG_GENERATOR_URL fixes it for this run.
    if !selfrag_engine::generator_server::generator_fixed_by_env() {
        let saved = settings.get();
        if let Some(url) = &saved.generator_url {
            // A key saved before keys had origins belongs to this server, saved with it.
            selfrag_engine::generator_server::bind_unbound_api_key(&config.data_dir, url)
                .context("binding the saved generator API key to its server")?;
        }
        config.generator_server = saved.generator_url.map(|url| {
            let key = selfrag_engine::generator_server::saved_api_key(&config.data_dir, &url);
            selfrag_engine::generator_server::server_config(&url, saved.generator_model, key)
        });
    }
    // The saved embeddings server, unless SELFRAG_EMBEDDER_URL fixes the embedder for this run.
    if !selfrag_engine::embedder_server::embedder_fixed_by_env() {
        let saved = settings.get();
        config.embedder_server = selfrag_engine::embedder_server::saved_embedder_server(
            &config.data_dir,
            saved.embedder_url,
            saved.embedder_model,
        );
    }
    init_logging(&config.data_dir);
    // The saved library location, unless SELFRAG_LIBRARY fixes it for this run. One that cannot
    // be read leaves the default folder, and says so in the log.
    if !selfrag_engine::library_location::library_fixed_by_env() {
        match selfrag_engine::library_location::parse_saved_location(
            settings.get().library_location.as_deref(),
        ) {
            Ok(location) => config.library = location,
            Err(e) => tracing::warn!(error = %e, "the saved library location is not used"),
        }
    }
    // GTK cannot start without a display and would panic inside the event loop; say so plainly.
    if cfg!(target_os = "linux")
        && std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty())
        && std::env::var_os("WAYLAND_DISPLAY").is_none_or(|d| d.is_empty())
    {
        anyhow::bail!(
            "no display found (DISPLAY and WAYLAND_DISPLAY are unset): Self-RAG Desktop needs a graphical session; on a server, use the `selfrag` command-line tool"
        );
    }
    let engine = Engine::new(config).context("starting the engine")?;
    // Off unless the person turned it on: only then do indexing jobs send identifiers out.
    engine.set_look_up_works(settings.get().look_up_works);
    tracing::info!(data_dir = %engine.config().data_dir.display(), "starting");
    tauri::Builder::default()
        .plugin(navigation_guard())
        .plugin(tauri_plugin_dialog::init())
        // Reached only through the open_source command; no link-click script in the webview.
        .plugin(
            tauri_plugin_opener::Builder::new()
                .open_js_links_on_click(false)
                .build(),
        )
        .manage(grants::GrantedPaths::default())
        .manage(generator::TestedOrigins::default())
        .manage(AppState { engine, settings })
        // Every command of build.rs's one list (see `COMMANDS`).
        .invoke_handler(include!(concat!(env!("OUT_DIR"), "/command_handler.rs")))
        // A native drop grants its paths to index_paths and watch_folders. Tauri calls this on
        // the main thread right after it forwards the drop to the page, and the page's
        // index_paths call is served on that thread too, so the grant is always there first.
        .on_window_event(|window, event| {
            if let tauri::WindowEvent::DragDrop(tauri::DragDropEvent::Drop { paths, .. }) = event {
                window.state::<grants::GrantedPaths>().grant(paths);
            }
        })
        .setup(|app| {
            library::start(app.handle());
            Ok(())
        })
        .run(tauri::generate_context!())
        .context("running the Tauri application")
}

/// Logs to stderr and to `selfrag.log` in the data dir.
fn init_logging(data_dir: &std::path::Path) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SELFRAG_LOG")
        // Lance's one-time warning that a future version will leave the centroids out of
        // the vector index's statistics is not the user's concern (the library reads only
        // segment sizes from them).
        .unwrap_or_else(|_| "info,lance=warn,lancedb=warn,lance::index::vector::ivf=error".into());
    let file = std::fs::create_dir_all(data_dir)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(data_dir.join("selfrag.log"))
        })
        .ok()
        .map(|f| {
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(Mutex::new(f))
        });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(file)
        .try_init();
}

/// Keeps the webview on the app's own pages (`tauri://localhost`, or `http(s)://tauri.localhost`
/// where the platform serves custom protocols so): a script that ever ran in the page could
/// otherwise carry passages away with `location = "https://…?q=…"`.
fn navigation_guard<R: tauri::Runtime>() -> tauri::plugin::TauriPlugin<R> {
    tauri::plugin::Builder::new("navigation-guard")
        .on_navigation(|_webview, url| {
            let own = matches!(
                (url.scheme(), url.host_str()),
                ("tauri", Some("localhost")) | ("http" | "https", Some("tauri.localhost"))
            );
            if !own {
                tracing::warn!(%url, "the page tried to leave the app; navigation refused");
            }
            own
        })
        .build()
}

#[cfg(test)]
mod tests {
    /// The capability grants the UI exactly the app's commands (plus the core events and
    /// zoom): a command added to build.rs's list is not callable until it is granted here, and
    /// a grant left behind by a removed command fails.
    #[test]
    fn the_capability_grants_exactly_the_commands() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("capabilities/default.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let capability: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut granted: Vec<String> = capability["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p.as_str())
            .filter(|p| !p.starts_with("core:"))
            .map(str::to_owned)
            .collect();
        let mut expected: Vec<String> = super::COMMANDS
            .iter()
            .map(|name| format!("allow-{}", name.replace('_', "-")))
            .collect();
        granted.sort();
        expected.sort();
        assert_eq!(granted, expected);
    }
}
