//! The engine's error: one enum for both front ends, each variant with a stable [`ErrorCode`]
//! the UI can switch on (exported to TypeScript) and a message that says what to do.

use std::path::PathBuf;

use selfrag_core::ModelRole;

/// Everything the application API can fail with.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("the {role} model is not available: {message}")]
    ModelMissing { role: ModelRole, message: String },
    #[error("the {role} model at {path} could not be loaded: {message}")]
    ModelLoad {
        role: ModelRole,
        path: PathBuf,
        message: String,
    },
    /// The chosen device cannot run the models: an unknown name, a back end this build lacks,
    /// or no such GPU; or a setting of how the models run there (`SELFRAG_EMBEDDER_PRECISION`,
    /// `SELFRAG_KV_CACHE`, `SELFRAG_DUMMY_PREFIX`) names no choice.
    #[error("the device `{choice}` cannot be used: {message}")]
    Device { choice: String, message: String },
    #[error(transparent)]
    Index(#[from] selfrag_index::IndexError),
    #[error(transparent)]
    SelfRag(#[from] selfrag_core::SelfRagError),
    /// The generator server could not be used; the message names its URL and the fix.
    #[error(transparent)]
    GeneratorServer(#[from] selfrag_remote::RemoteError),
    /// The embeddings server could not be used; the message names its URL and the fix.
    #[error(transparent)]
    EmbedderServer(#[from] selfrag_remote::EmbedderServerError),
    #[error("no answer with id `{0}` in this session's history")]
    UnknownAnswer(String),
    #[error("cannot write {path}: {source}{}", write_advice(source))]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {path}: {message}")]
    ReadTrace { path: PathBuf, message: String },
    #[error("the model thread stopped unexpectedly; restart the app")]
    ModelThreadGone,
    /// A document id or path the library does not hold; the message says what to do.
    #[error("{0}")]
    NotInLibrary(String),
    /// The task running an indexing job ended without its result (it panicked or was torn
    /// down); what it indexed before is kept, and its record resumes it at the next start.
    #[error(
        "the indexing job ended unexpectedly ({0}); what it indexed is kept, and the rest is indexed when the app starts next"
    )]
    IndexingJobLost(String),
    /// A Zotero library or bibliography file could not be read; the message names it and the
    /// fix.
    #[error(transparent)]
    References(#[from] selfrag_references::ReferencesError),
    /// The thread reading a Zotero library or bibliography file ended without its result.
    #[error("reading {path} stopped unexpectedly ({reason}); nothing was added")]
    ReferencesLost { path: PathBuf, reason: String },
    /// Resume was asked for with no indexing job paused.
    #[error(
        "no indexing job is paused (it ended, or was forgotten); add files or folders to index them"
    )]
    NothingPaused,
    /// A model download failed or was cancelled; `message` names the file and the fix.
    #[error("{message}")]
    Download {
        model: String,
        code: DownloadFailure,
        message: String,
    },
}

/// How a model download ended without the model: the part of a download error the UI treats
/// differently (a stop the user asked for is not shown as a failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownloadFailure {
    /// The user stopped it.
    Cancelled,
    /// The hub could not be reached at all.
    Offline,
    /// No model has the id asked for.
    UnknownModel,
    /// The model is already being downloaded.
    Busy,
    /// Anything else; the message says what.
    Failed,
}

impl From<&selfrag_hub::download::DownloadError> for DownloadFailure {
    fn from(e: &selfrag_hub::download::DownloadError) -> Self {
        use selfrag_hub::download::DownloadError;
        match e {
            DownloadError::Cancelled { .. } => Self::Cancelled,
            DownloadError::Offline { .. } => Self::Offline,
            _ => Self::Failed,
        }
    }
}

/// The stable, machine-readable kind of an [`EngineError`], sent to the UI with the message
/// (`snake_case` on the wire). The UI maps every variant, so a new one fails its type check
/// until it is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum ErrorCode {
    ModelMissing,
    ModelLoad,
    Device,
    Index,
    Cancelled,
    EmptyQuestion,
    Selfrag,
    GeneratorServer,
    EmbedderServer,
    UnknownAnswer,
    Write,
    ReadTrace,
    ModelThread,
    DownloadCancelled,
    Offline,
    UnknownModel,
    DownloadBusy,
    Download,
    NotInLibrary,
    NothingPaused,
    References,
}

impl EngineError {
    /// A stable machine-readable code, sent to the UI with the message.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::ModelMissing { .. } => ErrorCode::ModelMissing,
            Self::ModelLoad { .. } => ErrorCode::ModelLoad,
            Self::Device { .. } => ErrorCode::Device,
            Self::Index(_) => ErrorCode::Index,
            Self::SelfRag(selfrag_core::SelfRagError::Cancelled) => ErrorCode::Cancelled,
            Self::SelfRag(selfrag_core::SelfRagError::EmptyQuestion) => ErrorCode::EmptyQuestion,
            Self::SelfRag(_) => ErrorCode::Selfrag,
            Self::GeneratorServer(_) => ErrorCode::GeneratorServer,
            Self::EmbedderServer(_) => ErrorCode::EmbedderServer,
            Self::UnknownAnswer(_) => ErrorCode::UnknownAnswer,
            Self::Write { .. } => ErrorCode::Write,
            Self::ReadTrace { .. } => ErrorCode::ReadTrace,
            Self::ModelThreadGone => ErrorCode::ModelThread,
            Self::NotInLibrary(_) => ErrorCode::NotInLibrary,
            Self::NothingPaused => ErrorCode::NothingPaused,
            Self::References(_) | Self::ReferencesLost { .. } => ErrorCode::References,
            Self::IndexingJobLost(_) => ErrorCode::Index,
            Self::Download { code, .. } => match code {
                DownloadFailure::Cancelled => ErrorCode::DownloadCancelled,
                DownloadFailure::Offline => ErrorCode::Offline,
                DownloadFailure::UnknownModel => ErrorCode::UnknownModel,
                DownloadFailure::Busy => ErrorCode::DownloadBusy,
                DownloadFailure::Failed => ErrorCode::Download,
            },
        }
    }
}

/// What to do about a failed write, for the kinds of failure a user can fix.
fn write_advice(source: &std::io::Error) -> &'static str {
    match source.kind() {
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
            "; the disk is full: free some space (or choose another folder) and try again; what was saved there before is unchanged"
        }
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
            "; choose a folder you can write to"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use selfrag_hub::download::DownloadError;

    /// A download the user stopped is not a failure to the UI, and "offline" has its own advice:
    /// both are told apart by variant, not by matching the models crate's message or code.
    #[test]
    fn a_download_error_gets_the_code_of_its_kind() {
        let code = |e: DownloadError| {
            EngineError::Download {
                model: "m".into(),
                code: DownloadFailure::from(&e),
                message: e.to_string(),
            }
            .code()
        };
        let cancelled = DownloadError::Cancelled {
            file: "model.gguf".into(),
            done: 1,
            total: 2,
        };
        assert_eq!(code(cancelled), ErrorCode::DownloadCancelled);
        let offline = DownloadError::Offline {
            id: "m".into(),
            repo: "r".into(),
            file: "f".into(),
            cache: "/cache".into(),
        };
        assert_eq!(code(offline), ErrorCode::Offline);
        assert_eq!(code(DownloadError::NoCache), ErrorCode::Download);
    }
}
