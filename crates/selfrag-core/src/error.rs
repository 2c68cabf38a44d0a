//! `SelfRagError`: every way one Self-RAG run can fail, each with what the user should do.

use crate::backend::BackendError;

/// Why [`crate::answer`] stopped without an answer.
#[derive(Debug, thiserror::Error)]
pub enum SelfRagError {
    /// The language model backend failed; `during` names the step.
    #[error(
        "the language model failed while {during}: {source}; check the model file and try again"
    )]
    Generator {
        during: &'static str,
        source: BackendError,
    },
    /// The passage search failed.
    #[error("searching the library failed: {source}; check the library index and try again")]
    Retriever { source: BackendError },
    /// The loaded model is not a Self-RAG model: these reflection tokens are not in its vocabulary.
    #[error(
        "the model's vocabulary lacks the Self-RAG reflection tokens {missing:?}; load a Self-RAG model such as selfrag/selfrag_llama2_7b"
    )]
    MissingReflectionTokens { missing: Vec<String> },
    /// Even without passage text the prompt does not fit the prompt budget (the setting
    /// `prompt_budget`, held to the model's context) less the new-token limit.
    #[error(
        "the prompt needs {tokens} tokens but only {limit} fit in the prompt budget (the setting `prompt_budget`, at most the model's context) after the new-token limit; shorten the question, raise `prompt_budget` or lower the new-token limit"
    )]
    PromptTooLong { tokens: usize, limit: usize },
    /// A setting is out of its range (from a settings file, the page or the command line).
    #[error("the setting `{name}` is {value}; it must be {allowed}")]
    InvalidSetting {
        name: &'static str,
        value: String,
        allowed: &'static str,
    },
    /// The question is empty or only whitespace.
    #[error("the question is empty; type a question to answer")]
    EmptyQuestion,
    /// The caller's [`crate::Cancel`] asked the run to stop.
    #[error("the answer was cancelled before it finished; ask again to restart it")]
    Cancelled,
    /// A score or probability of the answer is NaN or infinite: the answer could be neither
    /// shown nor saved (see [`crate::Answer::non_finite_score`]).
    #[error(
        "the language model ({generator}) gave a score that is not a finite number ({what}), so \
         the answer was not kept; check the model file, or the generator server and the model \
         it serves"
    )]
    NonFiniteScore { generator: String, what: String },
}

impl SelfRagError {
    /// Wraps a generator failure with the step it happened in.
    pub(crate) fn generator(during: &'static str) -> impl FnOnce(BackendError) -> Self {
        move |source| Self::Generator { during, source }
    }

    /// Wraps a retriever failure.
    pub(crate) fn retriever(source: BackendError) -> Self {
        Self::Retriever { source }
    }
}
