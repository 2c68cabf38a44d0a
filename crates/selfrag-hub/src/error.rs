//! `StoreError`: what can go wrong while reading a manifest or a file of the model store. Every
//! message names the manifest or file and says what to do.

use std::path::{Path, PathBuf};

/// Errors of the manifests and the store's file reads; downloads have their own
/// [`crate::download::DownloadError`], which wraps this one.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot access {path}: {source}; check that the path exists and is readable")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("model manifest `{name}`: {reason}; fix the TOML file in models/")]
    InvalidManifest { name: String, reason: String },
}

impl StoreError {
    /// Wraps an I/O error with the path it concerns.
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Self + use<> {
        let path = path.to_owned();
        move |source| Self::Io { path, source }
    }
}
