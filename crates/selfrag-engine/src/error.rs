//! The engine's error: one enum for both front ends, each variant with a stable `code` the UI
//! can switch on and a message that says what to do.

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
    /// or no such GPU.
    #[error("the device `{choice}` cannot be used: {message}")]
    Device { choice: String, message: String },
    #[error(transparent)]
    Index(#[from] selfrag_index::IndexError),
    #[error(transparent)]
    SelfRag(#[from] selfrag_core::SelfRagError),
    /// The generator server could not be used; the message names its URL and the fix.
    #[error(transparent)]
    GeneratorServer(#[from] selfrag_remote::RemoteError),
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
    /// A model download failed or was cancelled; `message` names the file and the fix.
    #[error("{message}")]
    Download {
        model: String,
        code: &'static str,
        message: String,
    },
}

impl EngineError {
    /// A stable machine-readable code, sent to the UI with the message.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ModelMissing { .. } => "model_missing",
            Self::ModelLoad { .. } => "model_load",
            Self::Device { .. } => "device",
            Self::Index(_) => "index",
            Self::SelfRag(selfrag_core::SelfRagError::Cancelled) => "cancelled",
            Self::SelfRag(selfrag_core::SelfRagError::EmptyQuestion) => "empty_question",
            Self::SelfRag(_) => "selfrag",
            Self::GeneratorServer(_) => "generator_server",
            Self::UnknownAnswer(_) => "unknown_answer",
            Self::Write { .. } => "write",
            Self::ReadTrace { .. } => "read_trace",
            Self::ModelThreadGone => "model_thread",
            Self::Download { code, .. } => code,
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
