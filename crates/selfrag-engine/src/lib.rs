//! # selfrag-engine: the application API
//!
//! One API for both front ends (the Tauri app and the `selfrag` CLI): it owns the model thread,
//! the document library, the answer history and the exports ([`export`], rendered by
//! selfrag-export). [`Engine::ask`] runs Self-RAG (selfrag-core) with the GGUF generator and the
//! BERT embedder (selfrag-models) over the LanceDB library (selfrag-index), streaming
//! [`selfrag_core::Progress`] events; [`Engine::rerank`] re-chooses among stored candidates
//! without the model.
//!
//! It knows nothing of Tauri or the terminal: no `tauri`, no printing, no argument parsing.

mod config;
mod downloads;
pub mod embedder_server;
mod embedding;
mod engine;
mod error;
pub mod generator_server;
mod history;
mod indexing;
mod jobs;
pub mod library_location;
mod lookup;
mod model_thread;
mod retriever;
mod samples;
pub mod settings;
mod status;
mod works;

/// The export renderers (Markdown, HTML, JSON, BibTeX), from selfrag-export.
pub use selfrag_export as export;

pub use config::{
    EMBEDDER_API_KEY_ENV, EMBEDDER_MODEL_ENV, EMBEDDER_URL_ENV, EngineConfig, GeneratorNumerics,
    LIBRARY_ENV, SHARED_SOURCES_ENV, embedder_server_config, set_by,
};
pub use downloads::{DownloadStage, ModelDownloadProgress, ModelOffer};
pub use embedder_server::{EmbedderServerCheck, EmbedderServerState};
pub use engine::Engine;
pub use error::{DownloadFailure, EngineError, ErrorCode};
pub use export::{ExportFormat, ExportOptions, render, render_with};
pub use generator_server::{GeneratorState, ServerCheck};
pub use history::{AnswerRecord, HistoryEntry, write_atomically};
pub use indexing::SearchQuery;
pub use jobs::{JobKind, JobSource, LibraryEvent};
pub use lookup::{LookedUpWork, LookupFailure, LookupReport};
pub use samples::SAMPLE_DOCUMENTS;
pub use selfrag_core::{CachePrecision, DeviceChoice, DeviceKind, DummyPrefix, EmbedderPrecision};
pub use selfrag_index::{
    DEFAULT_SHARED_SOURCE_LIMIT, ExtractedPage, IndexError, LibraryLocation, LibraryStats,
    PassageSource, SearchFilter, SearchHit, SearchMode, SourceView, StoreCheck, bench,
    check_location, check_store, chunk_text, extract_file,
};
pub use settings::{AppSettings, LoadedSettings, SettingsStore, Theme};
pub use status::{AppStatus, DeviceStatus, DocumentInfo, IndexEvent, ModelRole, ModelStatus};
pub use works::ReferenceImport;

/// Both binaries declare this their `#[global_allocator]`: it keeps a parsing worker within its
/// memory limit on every OS (and is off in the app itself).
pub use selfrag_index::worker::WorkerHeap as ExtractWorkerHeap;
/// Both binaries call this first thing in `main`: it runs the document-parsing worker when the
/// engine started the process as one ([`EngineConfig::extract_worker`]) and returns its exit code.
pub use selfrag_index::worker::main_if_worker as main_if_extract_worker;
