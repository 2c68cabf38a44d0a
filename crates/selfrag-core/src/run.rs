//! One question's run: what every step of it reads (the question, the settings, the model and
//! the library behind their traits, the resolved reflection vocabulary) and where each step
//! reports (progress, cancellation). Short form, long form and the steps they share take it
//! instead of the same six parameters each.

use crate::backend::{Generator, Retriever};
use crate::error::SelfRagError;
use crate::progress::{self, Cancel, Progress};
use crate::settings::Settings;
use crate::vocab::ReflectionVocab;

/// What one run of [`crate::answer`] shares across its steps.
pub(crate) struct RunContext<'a> {
    /// The question, trimmed and not empty.
    pub(crate) question: &'a str,
    pub(crate) settings: &'a Settings,
    pub(crate) generator: &'a mut dyn Generator,
    pub(crate) retriever: &'a mut dyn Retriever,
    pub(crate) on_progress: &'a mut dyn FnMut(Progress),
    pub(crate) cancel: &'a dyn Cancel,
    /// The generator's ids of the 16 reflection tokens.
    pub(crate) vocab: ReflectionVocab,
}

impl<'a> RunContext<'a> {
    /// Checks the question (trimmed, not empty) and that the run is not cancelled already, and
    /// resolves the generator's reflection vocabulary.
    pub(crate) fn new(
        question: &'a str,
        settings: &'a Settings,
        generator: &'a mut dyn Generator,
        retriever: &'a mut dyn Retriever,
        on_progress: &'a mut dyn FnMut(Progress),
        cancel: &'a dyn Cancel,
    ) -> Result<Self, SelfRagError> {
        let question = question.trim();
        if question.is_empty() {
            return Err(SelfRagError::EmptyQuestion);
        }
        progress::check(cancel)?;
        let vocab = ReflectionVocab::resolve(generator.tokenizer())?;
        Ok(Self {
            question,
            settings,
            generator,
            retriever,
            on_progress,
            cancel,
            vocab,
        })
    }

    /// `Cancelled` once the run's cancel flag is set.
    pub(crate) fn check_cancel(&self) -> Result<(), SelfRagError> {
        progress::check(self.cancel)
    }
}
