//! `FixtureError`: what can stop a fixture from being written. Every message names the file.

use std::path::{Path, PathBuf};

/// Errors of the fixture writers.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("cannot write {path}: {source}; check that the folder exists and has room")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{context}: {source}")]
    Candle {
        context: String,
        #[source]
        source: candle_core::Error,
    },

    #[error("cannot write {path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

impl FixtureError {
    /// Wraps an I/O error with the path it concerns.
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Self + use<> {
        let path = path.to_owned();
        move |source| Self::Io { path, source }
    }

    /// Wraps a candle error with what was being written.
    pub(crate) fn candle(context: String) -> impl FnOnce(candle_core::Error) -> Self {
        move |source| Self::Candle { context, source }
    }
}
