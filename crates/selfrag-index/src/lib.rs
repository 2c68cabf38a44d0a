//! # selfrag-index: the document library
//!
//! Owns the path from files on disk to searchable passages: text extraction per format
//! ([`extract`]: PDF, DOCX, HTML, Markdown, plain text), run in a worker process with a time and
//! memory limit ([`Extractor`], [`worker`]), passages of about a hundred words with their
//! provenance ([`chunk`]), the embedded LanceDB store of documents and passages with vector,
//! full-text and hybrid search ([`Library`]), resumable indexing jobs ([`job`]) and watched
//! folders ([`watch`]). What a file or folder the user gave lets it read, and how a file is
//! opened so that no link leads out of it, is [`granted`].
//!
//! It must not depend on candle, Tauri or the Self-RAG algorithm: embeddings arrive through the
//! [`PassageEmbedder`] trait, which selfrag-engine implements with selfrag-models.
//!
//! The store (the library, jobs, watched folders, the benchmark, and [`Extractor::extract`] on
//! tokio) is the default feature `store`; without it the crate is extraction, chunking and the
//! worker only, with no LanceDB and no tokio, which is how the fuzz targets link it.
//!
//! ```no_run
//! # async fn demo(embedder: &dyn selfrag_index::PassageEmbedder) -> Result<(), selfrag_index::IndexError> {
//! let library = selfrag_index::Library::open(std::path::Path::new("/tmp/lib"), embedder).await?;
//! library.index_file(std::path::Path::new("notes.md"), embedder).await?;
//! let query = "what is self-rag?";
//! let vector = embedder.embed(&[query])?.remove(0);
//! let hits = library.search(&selfrag_index::SearchRequest::hybrid(query, vector, 5)).await?;
//! # Ok(()) }
//! ```

pub mod atomic;
#[cfg(feature = "store")]
pub mod bench;
pub mod chunk;
mod error;
pub mod extract;
pub mod granted;
#[cfg(feature = "store")]
pub mod job;
#[cfg(feature = "store")]
mod library;
#[cfg(feature = "store")]
pub mod watch;
pub mod worker;

pub use chunk::{Chunk, chunk_text};
pub use error::IndexError;
pub use extract::{ExtractedDocument, ExtractedPage, extract_file};
#[cfg(feature = "store")]
pub use job::{JobEvent, JobProgress, JobStop, JobSummary, SLOW_STEP};
#[cfg(feature = "store")]
pub use library::{
    ChangesElsewhere, CurrentStep, DEFAULT_SHARED_SOURCE_LIMIT, DocumentRecord,
    FINGERPRINT_SENTENCES, FingerprintAgreement, IndexOutcome, IndexStage, Library,
    LibraryLocation, LibraryStats, PartlySearchable, PassageSource, SAME_MODEL_COSINE,
    SAME_MODEL_LENGTH_RATIO, SHARED_READ_INTERVAL, SearchDepth, SearchFilter, SearchHit,
    SearchMode, SearchRequest, SourceView, StoreCheck, StoreUri, VectorScan, check_location,
    check_store, embedding_input, fingerprint_agreement, machine_state_dir,
};
#[cfg(feature = "store")]
pub use watch::{ChangeBatch, FolderWatcher};
pub use worker::Extractor;

/// Texts the library hands [`PassageEmbedder::embed`] in one call where the embedder does not
/// say otherwise: bounds memory on large documents, and a stop is seen between calls.
pub const DEFAULT_TEXTS_PER_CALL: usize = 32;

/// Turns passage text into vectors. Implemented by the engine over the BERT/Contriever model.
pub trait PassageEmbedder: Send + Sync {
    /// Identifies the model whose vectors these are; stored with every vector so that a change
    /// of model is noticed and the library re-embedded.
    fn model_id(&self) -> String;
    /// Length of every vector.
    fn dim(&self) -> usize;
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError>;
    /// Texts per call of [`PassageEmbedder::embed`] while indexing: as many as the model
    /// embeds well in one go (a GPU's embedder takes many more than a CPU's).
    fn texts_per_call(&self) -> usize {
        DEFAULT_TEXTS_PER_CALL
    }
}
