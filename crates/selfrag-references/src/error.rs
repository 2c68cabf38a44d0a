//! The one error type of the crate: each names the file it is about and what to do.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReferencesError {
    #[error(
        "{dir} is not a Zotero data directory: it has no zotero.sqlite; point to the folder \
         Zotero's Settings ▸ Advanced ▸ Files and Folders names as its data directory"
    )]
    NotZoteroDirectory { dir: PathBuf },

    #[error("could not read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "could not read {path} as an SQLite database ({source}); if Zotero is syncing or \
         rebuilding it, try again in a moment, else check it with Zotero's Settings ▸ Advanced ▸ \
         Files and Folders ▸ Database Maintenance"
    )]
    Database {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },

    #[error(
        "{path} has no table {table}: it is not a database of Zotero 5 or later; open it once \
         with a current Zotero so it is upgraded"
    )]
    UnknownSchema { path: PathBuf, table: &'static str },

    #[error(
        "{path} kept changing while it was being copied (Zotero is writing to it): try again \
         in a moment"
    )]
    KeptChanging { path: PathBuf },

    #[error("could not read {path}: {message}")]
    Unreadable { path: PathBuf, message: String },

    #[error("{path}{}: {message}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
    Bibliography {
        path: PathBuf,
        /// The line (from 1) the problem is on, where the parser tells.
        line: Option<usize>,
        message: String,
    },

    #[error(
        "{path} is not a bibliography file this app reads: export BibTeX or BibLaTeX (.bib) or \
         CSL JSON (.json) from your reference manager"
    )]
    UnknownBibliographyFormat { path: PathBuf },
}
