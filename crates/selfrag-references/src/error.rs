//! The one error type of the crate: each names the file (or, for a look-up, the service and
//! the identifier) it is about and what to do.

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

    #[error(
        "{variable} is not an address a look-up can be sent to ({value:?}: {message}); set it \
         to an http or https URL such as {example}, or unset it"
    )]
    LookupAddress {
        variable: &'static str,
        value: String,
        message: String,
        example: &'static str,
    },

    #[error(
        "could not reach {service} to look up {id} ({message}); the record stays as the file \
         gave it. Check the internet connection, or turn off look-ups in the settings"
    )]
    LookupUnreachable {
        service: String,
        id: String,
        message: String,
    },

    #[error(
        "{service} has no record of {id}; the record stays as the file gave it. If the \
         identifier was misread from the file, correct it in the Edit reference form"
    )]
    LookupNotFound { service: String, id: String },

    #[error(
        "{service} answered {status} when asked for {id}; the record stays as the file gave it. \
         Try again later"
    )]
    LookupFailed {
        service: String,
        id: String,
        status: u16,
    },

    #[error(
        "{service} sent more than {limit_mib} MiB for {id}, far more than a record; nothing of \
         it was kept"
    )]
    LookupTooLarge {
        service: String,
        id: String,
        limit_mib: usize,
    },

    #[error(
        "{service} answered for {id} with no record this app reads ({message}); the record \
         stays as the file gave it"
    )]
    LookupUnreadable {
        service: String,
        id: String,
        message: String,
    },
}
