//! The Self-RAG Desktop executable.

// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

/// Counts a parsing worker's heap so that its memory limit holds on every OS; off in the app.
#[global_allocator]
static HEAP: selfrag_engine::ExtractWorkerHeap = selfrag_engine::ExtractWorkerHeap;

fn main() -> std::process::ExitCode {
    // Document parsing runs in a child copy of this binary (see selfrag_index::worker).
    if let Some(code) = selfrag_engine::main_if_extract_worker() {
        return code;
    }
    match selfrag_desktop_lib::run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
