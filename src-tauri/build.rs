//! Generates the Tauri context and one permission per app command, so that the capability
//! file can grant the UI exactly the commands it uses; and, from the same list, the invoke
//! handler and the names the bindings export to the UI (`$OUT_DIR/command_handler.rs`,
//! `$OUT_DIR/command_names.rs`). A command is added here once.

use std::fmt::Write as _;

/// Every command the UI may invoke: (module of `src/`, function). The one list.
const COMMANDS: &[(&str, &str)] = &[
    ("commands", "app_status"),
    ("commands", "index_paths"),
    ("commands", "list_documents"),
    ("commands", "ask"),
    ("commands", "cancel_job"),
    ("commands", "rerank"),
    ("commands", "export_answer"),
    ("downloads", "download_model"),
    ("downloads", "refresh_models"),
    ("app_data", "list_history"),
    ("app_data", "open_answer"),
    ("app_data", "delete_answer"),
    ("app_data", "render_answer"),
    ("app_data", "load_settings"),
    ("app_data", "save_settings"),
    ("generator", "generator_state"),
    ("generator", "test_generator_server"),
    ("generator", "use_generator_server"),
    ("library_location", "library_location_state"),
    ("library_location", "test_library_location"),
    ("library_location", "use_library_location"),
    ("library_location", "restart_app"),
    ("embedder_server", "embedder_server_state"),
    ("embedder_server", "test_embedder_server"),
    ("embedder_server", "use_embedder_server"),
    ("sources", "open_source"),
    ("sources", "passage_source"),
    ("sources", "source_pdf"),
    ("library", "remove_document"),
    ("library", "reindex_document"),
    ("library", "pause_indexing"),
    ("library", "resume_indexing"),
    ("library", "paused_indexing"),
    ("library", "forget_paused_indexing"),
    ("library", "library_stats"),
    ("library", "watched_folders"),
    ("library", "watch_folders"),
    ("library", "unwatch_folder"),
    ("library", "add_sample_documents"),
    ("library", "set_work"),
    ("library", "add_zotero_library"),
    ("library", "add_bibliography"),
    ("library", "zotero_link"),
    ("library", "open_in_zotero"),
    ("grants", "pick_files"),
    ("grants", "pick_folder"),
    ("grants", "pick_zotero_folder"),
    ("grants", "pick_bibliography"),
];

fn main() {
    if let Err(e) = write_command_lists() {
        println!("cargo::error=writing the command lists into OUT_DIR failed: {e}");
        std::process::exit(1);
    }
    // The manifest keeps the names for the whole (short) life of this build script.
    let names: &'static [&'static str] = COMMANDS
        .iter()
        .map(|(_, name)| *name)
        .collect::<Vec<_>>()
        .leak();
    let attributes = tauri_build::Attributes::new()
        .app_manifest(tauri_build::AppManifest::new().commands(names));
    if let Err(e) = tauri_build::try_build(attributes) {
        // A build script reports failure to Cargo on stdout, then exits non-zero.
        println!("cargo::error=tauri build step failed: {e:#}");
        std::process::exit(1);
    }
}

/// `tauri::generate_handler![module::name, …]` and `&["name", …]`, for `include!`.
fn write_command_lists() -> Result<(), String> {
    let out = std::env::var("OUT_DIR").map_err(|e| format!("OUT_DIR: {e}"))?;
    let mut handler = String::from("tauri::generate_handler![\n");
    let mut names = String::from("&[\n");
    for (module, name) in COMMANDS {
        let _ = writeln!(handler, "    {module}::{name},");
        let _ = writeln!(names, "    \"{name}\",");
    }
    handler.push(']');
    names.push(']');
    let dir = std::path::Path::new(&out);
    std::fs::write(dir.join("command_handler.rs"), handler).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("command_names.rs"), names).map_err(|e| e.to_string())
}
