//! # selfrag-core: the Self-RAG algorithm
//!
//! This crate owns the algorithm of Asai et al., "Self-RAG: Learning to Retrieve, Generate,
//! and Critique through Self-Reflection" (ICLR 2024), exactly as `shared/SELFRAG.md` states it:
//! the retrieve decision, one candidate per passage, the IsRel / IsSup / IsUse critique scores,
//! the segment score `f`, hard constraints, short form, long-form segment beam search, and
//! `rerank`, which re-chooses among stored candidates without calling the model.
//!
//! It is pure: it must not depend on candle, tokio, LanceDB, Tauri or do any I/O. The model
//! and the library reach it only through the [`Generator`] and [`Retriever`] traits, so every
//! formula and branch can be pinned with a scripted `Generator` in tests.
//!
//! ## Tour
//! - [`Settings`]: mode, δ, K, weights, limits, with the paper's defaults.
//! - [`answer`]: runs Self-RAG for one question and returns an [`Answer`], the JSON trace.
//! - [`rerank`]: applies new weights / constraints to a stored [`Answer`].
//! - [`answer_closed_set`]: a question with answer options ([`ClosedSetQuestion`]), each option
//!   scored from the candidates into [`Answer::closed_set`] (paper appendix B.2).
//! - [`Progress`]: events emitted while [`answer`] runs; a [`Cancel`] check stops it between steps.

pub mod backend;
pub mod closed_set;
mod critique;
mod error;
mod long_form;
mod progress;
mod prompt;
mod rerank;
mod run;
pub mod settings;
mod short_form;
pub mod trace;
mod vocab;

pub use backend::{
    BackendError, BatchTiming, CachePrecision, DeviceChoice, DeviceKind, DummyPrefix,
    EmbedderPrecision, GenerateRequest, GeneratedToken, Generation, Generator, ModelRole, Passage,
    Retriever, StopReason, TokenId, Tokenizer, UnknownCachePrecision, UnknownDevice,
    UnknownDummyPrefix, UnknownPrecision, ocr_note,
};
pub use closed_set::{
    AnswerOption, ClosedSetKind, ClosedSetQuestion, ClosedSetScores, OptionScore, Question,
    answer_closed_set,
};
pub use critique::{CritiqueScores, ranking_value, segment_score};
pub use error::SelfRagError;
pub use progress::{Cancel, Progress};
pub use prompt::{Instruction, Prompt, PromptBuilder, WrittenSegment};
pub use rerank::{Reranked, rerank};
pub use settings::{CritiqueWeights, LongFormRanking, PLmTokens, RetrieveMode, Settings};
pub use trace::{
    Answer, AnswerTimings, Candidate, EmbedderInfo, Expansion, GeneratorInfo, GeneratorKind,
    HardConstraint, IsRelDistribution, IsRelVerdict, IsSupDistribution, IsSupVerdict,
    IsUseDistribution, RetrieveDecision, Segment, TreeNode, Verdicts,
};
pub use vocab::{REFLECTION_TOKENS, ReflectionVocab, TokenGroup};

/// Answers `question` with Self-RAG: short form, or long form when `settings.long_form`.
///
/// `on_progress` sees each step as it happens; `cancel` is checked between steps and makes
/// the run end with [`SelfRagError::Cancelled`], as does a generator call that fails once
/// `cancel` is set (a generator may stop its work when it sees the flag). In long form, a
/// generator that fails after the first segment ends the answer there: the segments written
/// are kept and [`Answer::cut_short`] says why. An answer with a score or probability that is
/// not a finite number is [`SelfRagError::NonFiniteScore`], never returned.
pub fn answer(
    question: &str,
    settings: &Settings,
    generator: &mut dyn Generator,
    retriever: &mut dyn Retriever,
    on_progress: &mut dyn FnMut(Progress),
    cancel: &dyn Cancel,
) -> Result<Answer, SelfRagError> {
    answer_instruction(
        question,
        &Instruction::question(question.trim()),
        settings,
        generator,
        retriever,
        on_progress,
        cancel,
    )
}

/// [`answer`] with the prompt's instruction given apart from `question` (what is searched
/// for and recorded): a layout of this crate's own, such as a closed-set question's.
pub(crate) fn answer_instruction(
    question: &str,
    instruction: &Instruction,
    settings: &Settings,
    generator: &mut dyn Generator,
    retriever: &mut dyn Retriever,
    on_progress: &mut dyn FnMut(Progress),
    cancel: &dyn Cancel,
) -> Result<Answer, SelfRagError> {
    settings.validate()?;
    let started = std::time::Instant::now();
    let answer = run::RunContext::new(
        question,
        instruction,
        settings,
        generator,
        retriever,
        on_progress,
        cancel,
    )
    .and_then(|run| {
        if settings.long_form {
            long_form::run(run)
        } else {
            short_form::run(run)
        }
    });
    match answer {
        Err(SelfRagError::Generator { .. }) if cancel.is_cancelled() => {
            Err(SelfRagError::Cancelled)
        }
        Ok(mut answer) => {
            // Asked once the run is over: the embedder of the queries it searched, if any.
            answer.embedder = retriever.describe();
            // The last check of every generator's numbers, whatever it checked itself.
            if let Some(what) = answer.non_finite_score() {
                let generator = answer.generator.as_ref().map_or_else(
                    || "unnamed".to_owned(),
                    |g| match &g.url {
                        Some(url) => format!("{} served at {url}", g.model),
                        None => format!("{} on {}", g.model, g.runtime),
                    },
                );
                return Err(SelfRagError::NonFiniteScore { generator, what });
            }
            if let Some(timings) = answer.timings.as_mut() {
                timings.answer_seconds = started.elapsed().as_secs_f64();
                *timings = timings.to_microseconds();
            }
            Ok(answer)
        }
        other => other,
    }
}
