//! The crate's error type: every variant names the file or library it concerns.

use std::path::PathBuf;

/// What can go wrong while reading, indexing or searching documents.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("cannot read {path}: {source}. Check that the file exists and is readable.")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not supported ({reason}); supported formats are .txt, .md and .markdown")]
    Unsupported { path: PathBuf, reason: String },
    #[error("{path} has no text to index")]
    Empty { path: PathBuf },
    #[error("the library at {path} could not be used: {source}")]
    Store {
        path: PathBuf,
        #[source]
        source: lancedb::Error,
    },
    #[error("the library data is malformed: {0}")]
    Schema(String),
    #[error("the embedder failed: {0}")]
    Embedder(String),
    #[error(
        "the library at {path} was built with embedder `{stored}` ({stored_dim}-d) but `{current}` ({current_dim}-d) is loaded; re-index the library or switch back"
    )]
    EmbedderMismatch {
        path: PathBuf,
        stored: String,
        stored_dim: usize,
        current: String,
        current_dim: usize,
    },
}
