//! What can go wrong with a generator server, each case naming the server's URL and what to do.

/// An error of the server generator.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error(
        "could not reach the generator server at {url}, or it did not answer in time: {message}. \
         Start the server, or check the generator URL in the settings"
    )]
    Unreachable { url: String, message: String },

    #[error(
        "the generator server at {url} refused the request ({status}): check the API key in the \
         settings"
    )]
    Unauthorized { url: String, status: u16 },

    /// The reply's body is logged, never carried here: this message reaches the page, and a
    /// body could be any service's text.
    #[error(
        "the generator server at {url} failed with HTTP status {status}; its reason is in the \
         app's log and the server's own"
    )]
    Failed { url: String, status: u16 },

    #[error(
        "the generator server at {url} answers neither as llama.cpp's llama-server nor as an \
         OpenAI-compatible completions server ({what}): point the generator URL at llama-server \
         or at vLLM (e.g. http://gpu-box:8000/v1)"
    )]
    NotAServer { url: String, what: String },

    #[error(
        "the generator server at {url} returned no exact token probabilities ({what}): Self-RAG \
         reads its reflection tokens' probabilities; use llama.cpp's llama-server, or vLLM with \
         `prompt_logprobs` and `return_tokens_as_token_ids` (0.6 or later)"
    )]
    NoProbabilities { url: String, what: String },

    #[error(
        "the server at {url} does not serve {}: it serves {}. Set the generator's model name to \
         one of them",
        wanted.as_deref().map_or("one model only".to_owned(), |w| format!("the model {w:?}")),
        if served.is_empty() { "none".to_owned() } else { format!("{served:?}") }
    )]
    ModelNotServed {
        url: String,
        wanted: Option<String>,
        served: Vec<String>,
    },

    #[error(
        "the model served at {url} does not have the Self-RAG token {token} as one token of its \
         vocabulary ({found}): serve a Self-RAG model (e.g. selfrag_llama2_7b)"
    )]
    MissingReflectionToken {
        url: String,
        token: String,
        found: String,
    },

    #[error(
        "the model served at {url} tokenizes differently from {tokenizer}: {detail}. Point the \
         app at the GGUF file the server loaded"
    )]
    VocabularyMismatch {
        url: String,
        tokenizer: String,
        detail: String,
    },

    #[error(
        "the generator server at {url} stopped answering in the middle of an answer ({message}); \
         what had arrived is kept. Check that the server is still running"
    )]
    Interrupted { url: String, message: String },

    #[error(
        "the prompt has {prompt_tokens} tokens and {max_new_tokens} more were asked for, but the \
         server at {url} holds {context_length} per request: start it with a larger context (-c)"
    )]
    ContextOverflow {
        url: String,
        prompt_tokens: usize,
        max_new_tokens: usize,
        context_length: usize,
    },

    #[error(
        "the generator address \"{url}\" cannot be used: {why}. Enter the server's address as \
         http://host:port, with /v1 for an OpenAI-compatible API (e.g. http://gpu-box:8080)"
    )]
    InvalidUrl { url: String, why: String },

    #[error("the GGUF file {path} could not be read for its tokenizer: {message}")]
    Tokenizer { path: String, message: String },

    /// A number no model gives: nothing of that reply is used, so no score is made of it.
    #[error(
        "the generator server at {url} sent {what}: it is broken, or not the server it claims          to be. Nothing of that reply was used; check the server and the model it serves"
    )]
    ImpossibleValue { url: String, what: String },

    #[error(
        "the generator server at {url} sent {what} larger than {limit_mib} MiB, far beyond what          a completion needs; nothing of it was kept. Check the server"
    )]
    ReplyTooLarge {
        url: String,
        what: String,
        limit_mib: usize,
    },
}
