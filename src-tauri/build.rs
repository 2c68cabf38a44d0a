//! Generates the Tauri context and one permission per app command, so that the capability
//! file can grant the UI exactly the commands it uses.

const COMMANDS: &[&str] = &[
    "app_status",
    "index_paths",
    "list_documents",
    "ask",
    "cancel_ask",
    "rerank",
    "export_answer",
    "download_model",
    "cancel_download",
    "refresh_models",
    "list_history",
    "open_answer",
    "delete_answer",
    "render_answer",
    "load_settings",
    "save_settings",
    "generator_state",
    "test_generator_server",
    "use_generator_server",
    "open_source",
    "cancel_indexing",
    "remove_document",
    "reindex_document",
    "library_stats",
    "watched_folders",
    "watch_folders",
    "unwatch_folder",
    "pick_files",
    "pick_folder",
];

fn main() {
    let attributes = tauri_build::Attributes::new()
        .app_manifest(tauri_build::AppManifest::new().commands(COMMANDS));
    if let Err(e) = tauri_build::try_build(attributes) {
        // A build script reports failure to Cargo on stdout, then exits non-zero.
        println!("cargo::error=tauri build step failed: {e:#}");
        std::process::exit(1);
    }
}
