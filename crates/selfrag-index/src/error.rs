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
    #[error(
        "cannot write {path}: {source}. Check that the disk has room and the folder is writable."
    )]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not supported ({reason}); supported formats are .pdf, .docx, .html, .md and .txt"
    )]
    Unsupported { path: PathBuf, reason: String },
    #[error("{path} has no text to index")]
    Empty { path: PathBuf },
    /// The job was stopped while this file was being parsed or embedded; nothing of it was
    /// written.
    #[error("indexing {path} was stopped before it finished; nothing of it was saved")]
    Stopped { path: PathBuf },
    #[error(
        "{path} is password-protected; save a copy without the password (e.g. print it to PDF) and index that"
    )]
    Encrypted { path: PathBuf },
    #[error("{path} has no text layer (scanned?); {reason}")]
    NoTextLayer { path: PathBuf, reason: String },
    #[error(
        "{path} could not be read as {format}: {reason}. Re-save or re-export the file and index it again"
    )]
    Malformed {
        path: PathBuf,
        format: String,
        reason: String,
    },
    /// Refused before reading: a file this large is not a document anyone indexes (a disk image,
    /// a sparse file, a log), and reading it would take the memory of the app.
    #[error(
        "{path} is {size_mib} MiB, more than the {limit_mib} MiB read from a .{extension} file; split it into smaller files and index those"
    )]
    TooLarge {
        path: PathBuf,
        extension: String,
        size_mib: u64,
        limit_mib: u64,
    },
    /// Refused after parsing: more passages than one document may have (a small compressed
    /// file can inflate to gigabytes of text).
    #[error(
        "{path} holds {passages} passages of text, more than the {limit} indexed from one document; split it into smaller files and index those"
    )]
    TooManyPassages {
        path: PathBuf,
        passages: usize,
        limit: usize,
    },
    /// The parser process crashed, ran out of time or memory, or answered nonsense.
    #[error("the document parser {what} on {path}; the file was skipped")]
    ParserFailed { path: PathBuf, what: String },
    #[cfg(feature = "store")]
    #[error("the library at {location} could not be used: {source}")]
    Store {
        location: String,
        #[source]
        source: lancedb::Error,
    },
    /// A library location that cannot be used: unreadable, or a store that is unreachable,
    /// refuses the credentials, or lacks conditional writes. `problem` says what to do.
    #[error("the library location {location} cannot be used: {problem}")]
    Location { location: String, problem: String },
    /// A shared library whose vectors another embedder made.
    #[error(
        "the library at {location} holds vectors of {library_embedder}, and this computer's embedder is {this_embedder} ({detail}); choose the library's embedder here, or another library"
    )]
    EmbedderMismatch {
        location: String,
        library_embedder: String,
        this_embedder: String,
        detail: String,
    },
    #[error("the library data is malformed: {0}")]
    Schema(String),
    #[error("the embedder failed: {0}")]
    Embedder(String),
    /// Another process holds the library's lock; `holders` names them ("pid (name)") where the
    /// system says (Linux), else is empty.
    #[error(
        "the library at {path} is in use by another Self-RAG Desktop or `selfrag` process{}; close it and try again",
        if holders.is_empty() { String::new() } else { format!(" ({holders})") }
    )]
    Busy { path: PathBuf, holders: String },
    #[error("cannot watch {path} for changes: {reason}")]
    Watch { path: PathBuf, reason: String },
    /// The disk holding the library filled up; the job stopped and resumes once there is room.
    #[error(
        "the disk holding the library at {path} is full ({reason}); free some space and index again: the job resumes where it stopped, and what was indexed before is kept"
    )]
    DiskFull { path: PathBuf, reason: String },
    /// A passage id the library does not hold (an answer older than a re-index or a removal).
    #[error(
        "the library has no passage `{id}`: its document was removed or re-indexed after this answer was written; ask again to cite the library as it is now"
    )]
    UnknownPassage { id: String },
    /// A content id no document of the library has.
    #[error("the library has no document `{id}`; add the file to the library to see it here")]
    UnknownDocument { id: String },
    #[error(
        "{path} is no longer there (moved or deleted); add it to the library again to see the passage in its source"
    )]
    SourceMissing { path: PathBuf },
    #[error(
        "{path} changed since it was indexed, so the passage may no longer be where the library says; re-index it to see the passage in its source"
    )]
    SourceChanged { path: PathBuf },
    /// Not read: the path leads (through a link in it, or being one) out of the file or folder
    /// the user gave.
    #[error(
        "{path} was not read: it leads to {target}, outside {folder}, which it was added from; links are followed only inside the file or folder you gave (add the target itself to index it)"
    )]
    LeadsOutside {
        path: PathBuf,
        target: PathBuf,
        folder: PathBuf,
    },
    /// Not read: between its check and its read the file became a link or another file.
    #[error(
        "{path} was not read: it was replaced (by a link or another file) while it was being read; index it again"
    )]
    Swapped { path: PathBuf },
    /// Skipped: runs of the app ended (crashed, or were killed) while indexing this file, which
    /// has not changed since; read again it could end the app again.
    #[error(
        "{path} was skipped: the app stopped {times} times in a row while indexing it (it may be what stopped it), so it is not read again until it changes; to try it once more, add this file itself again"
    )]
    CrashedBefore { path: PathBuf, times: u32 },
}
