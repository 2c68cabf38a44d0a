//! `ModelError`: everything that can go wrong while finding, loading or running a model.
//! Every message names the file (or directory) involved and says what to do about it.

use std::path::PathBuf;

/// Errors of this crate. Convert into `selfrag_core::BackendError` with `.into()`.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot access {path}: {source}; check that the path exists and is readable")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "{path} is not a usable GGUF file: {reason}; the file may be truncated or corrupt, download it again"
    )]
    InvalidGguf { path: PathBuf, reason: String },

    #[error(
        "{path}: GGUF metadata key `{key}` is missing or has the wrong type; convert the model again with llama.cpp's convert script"
    )]
    MissingMetadata { path: PathBuf, key: String },

    #[error(
        "{path}: model architecture `{found}` is not supported; use a Llama GGUF such as selfrag_llama2_7b.q4_k_m.gguf"
    )]
    UnsupportedArchitecture { path: PathBuf, found: String },

    #[error("GGUF tokenizer: {reason}; the model file's `tokenizer.ggml.*` metadata is unusable")]
    InvalidTokenizer { reason: String },

    /// A well-formed GGUF whose tokenizer this version cannot run (a tokenizer other than
    /// SentencePiece and byte-level BPE, or a BPE pre-tokenizer not among llama.cpp's that run
    /// here): the file is fine, so the message must not send the person to download it again.
    /// `path` is `None` until [`ModelError::in_file`] names the file.
    #[error(
        "{}its tokenizer is `{model}`{} (tokenizer.ggml.model{}), which this version cannot run: it runs SentencePiece (`llama`: Llama-2, the Self-RAG 7B/13B checkpoints) and byte-level BPE (`gpt2`) with llama.cpp's pre-tokenizers llama-bpe, gpt-2, default, smollm, qwen2, tekken and the others docs/MODELS.md lists; the file itself is not damaged, so downloading it again will not help",
        path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default(),
        pre.as_ref().map(|p| format!(" with the `{p}` pre-tokenizer")).unwrap_or_default(),
        if pre.is_some() { ", tokenizer.ggml.pre" } else { "" }
    )]
    UnsupportedTokenizer {
        path: Option<PathBuf>,
        model: String,
        pre: Option<String>,
    },

    /// A Llama GGUF that uses a feature this version does not compute (RoPE scaling): loading it
    /// would give wrong probabilities without a word, so it is refused by name.
    #[error(
        "{path}: this version does not support {feature} yet (the model would compute wrong probabilities); the file itself is not damaged, so downloading it again will not help: use a Llama-2-style Self-RAG GGUF such as selfrag_llama2_7b.q4_k_m.gguf"
    )]
    UnsupportedModelFeature { path: PathBuf, feature: String },

    #[error(
        "the prompt has {prompt_tokens} tokens and {max_new_tokens} new tokens were requested, more than the model's context length of {context_length}; shorten the prompt (fewer or shorter passages) or lower the token limit"
    )]
    ContextOverflow {
        prompt_tokens: usize,
        max_new_tokens: usize,
        context_length: usize,
    },

    #[error("the prompt is empty; a prompt needs at least one token (the BOS token)")]
    EmptyPrompt,

    #[error(
        "this batch was superseded: the generator started another batch, whose attention cache replaced this one's; start it again"
    )]
    BatchSuperseded,

    #[error(
        "token id {id} is outside the model's vocabulary of {vocab_size} tokens; look ids up with `token_id` on the loaded model"
    )]
    TokenOutOfRange { id: u32, vocab_size: usize },

    #[error(
        "{dir}: missing {file}; a BERT model directory needs config.json, model.safetensors or pytorch_model.bin, and tokenizer.json or vocab.txt"
    )]
    MissingFile { dir: PathBuf, file: String },

    #[error("{path}: {reason}; download the model files again")]
    InvalidModelFile { path: PathBuf, reason: String },

    #[error("{path}: cannot build the tokenizer: {reason}")]
    InvalidBertTokenizer { path: PathBuf, reason: String },

    /// A setting read from the environment (it names itself and what it accepts).
    #[error("{0}")]
    InvalidSetting(String),

    #[error("{context}: {source}")]
    Candle {
        context: String,
        #[source]
        source: candle_core::Error,
    },
}

impl ModelError {
    /// Wraps a candle error with what was being done (e.g. "forward pass of model.gguf").
    pub(crate) fn candle(context: String) -> impl FnOnce(candle_core::Error) -> Self {
        move |source| Self::Candle { context, source }
    }

    /// Names the GGUF file a tokenizer error came from (the tokenizer is built from a parsed
    /// header, which does not know its file).
    pub(crate) fn in_file(self, path: &std::path::Path) -> Self {
        match self {
            Self::UnsupportedTokenizer {
                path: None,
                model,
                pre,
            } => Self::UnsupportedTokenizer {
                path: Some(path.to_owned()),
                model,
                pre,
            },
            Self::InvalidTokenizer { reason } => Self::InvalidGguf {
                path: path.to_owned(),
                reason: format!(
                    "its tokenizer metadata (`tokenizer.ggml.*`) is unusable: {reason}"
                ),
            },
            other => other,
        }
    }

    /// Wraps an I/O error with the path it concerns.
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + use<> {
        let path = path.to_owned();
        move |source| Self::Io { path, source }
    }
}
