//! One question's run: what every step of it reads (the question, the settings, the model and
//! the library behind their traits, the resolved reflection vocabulary), where each step
//! reports (progress, cancellation), and how long the steps took. Short form, long form and the steps they share take it
//! instead of the same six parameters each.

use std::time::Instant;

use crate::backend::{BatchTiming, Generator, Retriever};
use crate::error::SelfRagError;
use crate::progress::{self, Cancel, Progress};
use crate::prompt::Instruction;
use crate::settings::Settings;
use crate::trace::AnswerTimings;
use crate::vocab::ReflectionVocab;

/// What one run of [`crate::answer`] shares across its steps.
pub(crate) struct RunContext<'a> {
    /// The question, trimmed and not empty: what is searched for and recorded.
    pub(crate) question: &'a str,
    /// What the prompt's instruction section holds (the question, its markers defused).
    pub(crate) instruction: &'a Instruction,
    pub(crate) settings: &'a Settings,
    pub(crate) generator: &'a mut dyn Generator,
    pub(crate) retriever: &'a mut dyn Retriever,
    pub(crate) on_progress: &'a mut dyn FnMut(Progress),
    pub(crate) cancel: &'a dyn Cancel,
    /// The generator's ids of the 16 reflection tokens.
    pub(crate) vocab: ReflectionVocab,
    /// The steps' times so far.
    timings: AnswerTimings,
    /// Whether every batch so far told its prompt time from its decode time.
    generation_split: bool,
}

impl<'a> RunContext<'a> {
    /// Checks the question (trimmed, not empty) and that the run is not cancelled already, and
    /// resolves the generator's reflection vocabulary.
    pub(crate) fn new(
        question: &'a str,
        instruction: &'a Instruction,
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
            instruction,
            settings,
            generator,
            retriever,
            on_progress,
            cancel,
            vocab,
            timings: AnswerTimings::default(),
            generation_split: true,
        })
    }

    /// The steps' times so far (the whole answer's is set by [`crate::answer`]).
    pub(crate) fn timings(&self) -> AnswerTimings {
        let mut timings = self.timings;
        if !self.generation_split {
            (timings.prefill_seconds, timings.decode_seconds) = (None, None);
        }
        timings
    }

    /// Adds the time since `started` to the step `step` picks.
    pub(crate) fn time(&mut self, started: Instant, step: fn(&mut AnswerTimings) -> &mut f64) {
        *step(&mut self.timings) += started.elapsed().as_secs_f64();
    }

    /// Adds one batch's generation, which took `seconds`, split as `split` says if it can.
    pub(crate) fn time_generation(&mut self, seconds: f64, split: Option<BatchTiming>) {
        self.timings.generate_seconds += seconds;
        match split {
            Some(split) => {
                let t = &mut self.timings;
                *t.prefill_seconds.get_or_insert(0.0) += split.prompt_seconds;
                *t.decode_seconds.get_or_insert(0.0) += split.decode_seconds;
            }
            None => self.generation_split = false,
        }
    }

    /// Most tokens a prompt and its continuation may take: the prompt budget, held to the
    /// model's context.
    pub(crate) fn prompt_window(&self) -> usize {
        self.generator
            .context_length()
            .min(self.settings.prompt_budget)
    }

    /// `Cancelled` once the run's cancel flag is set.
    pub(crate) fn check_cancel(&self) -> Result<(), SelfRagError> {
        progress::check(self.cancel)
    }
}
