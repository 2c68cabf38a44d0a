//! Short form (SELFRAG.md steps 1–7, 9): one retrieve decision, one candidate per passage in
//! a single batch, critique, choice. Also the steps long form repeats at every segment:
//! the retrieve decision, the passage search, and generating + scoring a batch of candidates.

use crate::backend::{GenerateRequest, Generation, Generator, Passage, StopReason, TokenId};
use crate::critique;
use crate::error::SelfRagError;
use crate::progress::Progress;
use crate::prompt::{Prompt, PromptBuilder, WrittenSegment};
use crate::run::RunContext;
use crate::settings::{RetrieveMode, Settings};
use crate::trace::{Answer, Candidate, RetrieveDecision, Segment, Verdicts};
use crate::vocab::ReflectionVocab;

/// Runs short-form Self-RAG; see [`crate::answer`].
pub(crate) fn run(mut run: RunContext<'_>) -> Result<Answer, SelfRagError> {
    let settings = run.settings;
    let question = run.question;
    let prompts = PromptBuilder::for_instruction(
        run.generator.tokenizer(),
        run.prompt_window(),
        &run.vocab,
        run.instruction,
        settings.max_new_tokens,
    )?;

    let mut retrieve = run.decide(&prompts.decision_point(&[])?.ids)?;
    run.check_cancel()?;
    let passages = if retrieve.retrieved {
        run.search(question, 0)?
    } else {
        Vec::new()
    };
    // No passage found: answer as if the model had chosen not to retrieve, and say so.
    retrieve.found_nothing = retrieve.retrieved && passages.is_empty();
    retrieve.retrieved = !passages.is_empty();
    run.check_cancel()?;

    let sources: Vec<Option<&Passage>> = if passages.is_empty() {
        vec![None]
    } else {
        passages.iter().map(Some).collect()
    };
    let indices: Vec<Option<usize>> = if passages.is_empty() {
        vec![None]
    } else {
        (0..passages.len()).map(Some).collect()
    };
    let batch = build_prompts(&*run.generator, &prompts, &[], &sources)?;
    let request = GenerateRequest {
        max_new_tokens: settings.max_new_tokens,
        stop_ids: Vec::new(),
        markup_ids: Vec::new(),
        watch_ids: run.vocab.critique_watch_ids(),
    };
    let candidates = run
        .generate_candidates(&batch, &indices, &request, 0)?
        .into_iter()
        .map(|(candidate, _)| candidate)
        .collect::<Vec<_>>();

    let started = std::time::Instant::now();
    let chosen = critique::choose(&candidates, settings.hard_constraints);
    let mut answer = Answer {
        question: question.to_string(),
        settings: settings.clone(),
        retrieve,
        passages,
        segments: vec![Segment {
            text: String::new(),
            citation: None,
            chosen,
            candidates,
            retrieve: Some(retrieve),
            excluded: Vec::new(),
        }],
        expansions: Vec::new(),
        answer: String::new(),
        generator: run.generator.describe(),
        embedder: None,
        cut_short: None,
        timings: None,
        closed_set: None,
    };
    answer.assemble();
    run.time(started, |t| &mut t.critique_seconds);
    answer.timings = Some(run.timings());
    announce_segments(&answer, run.on_progress);
    Ok(answer)
}

impl RunContext<'_> {
    /// Step 1: reads p([Retrieval]) and p([No Retrieval]) after `prompt` and applies the mode.
    /// p_retrieve is always recorded, even where the mode ignores it. `model` mode retrieves
    /// iff [Retrieval] is the most likely next token over the whole vocabulary, i.e. what
    /// greedy decoding would write (not merely likelier than [No Retrieval]: the model may
    /// rather write text, which is a choice not to retrieve); ties go to the lower id, as in
    /// greedy decoding. That reading holds the pair too, so the prompt is read once in every
    /// mode.
    pub(crate) fn decide(&mut self, prompt: &[TokenId]) -> Result<RetrieveDecision, SelfRagError> {
        let started = std::time::Instant::now();
        let decision = self.decide_untimed(prompt);
        self.time(started, |t| &mut t.decide_seconds);
        decision
    }

    fn decide_untimed(&mut self, prompt: &[TokenId]) -> Result<RetrieveDecision, SelfRagError> {
        let (settings, vocab) = (self.settings, &self.vocab);
        let watch: Vec<TokenId> = if settings.mode == RetrieveMode::Model {
            (0..self.generator.tokenizer().vocab_size())
                .filter_map(|id| TokenId::try_from(id).ok())
                .collect()
        } else {
            vec![vocab.retrieval, vocab.no_retrieval]
        };
        let probs = self
            .generator
            .next_token_probs(prompt, &watch)
            .map_err(SelfRagError::generator("deciding whether to retrieve"))?;
        // Probabilities, never log-probabilities: a missing or negative value is no mass at all.
        let prob = |id: TokenId| {
            watch
                .iter()
                .position(|&w| w == id)
                .and_then(|i| probs.get(i).copied())
                .filter(|p| *p > 0.0)
                .unwrap_or(0.0)
        };
        let (p_yes, p_no) = (prob(vocab.retrieval), prob(vocab.no_retrieval));
        let total = p_yes + p_no;
        let p_retrieve = if total > 0.0 { p_yes / total } else { 0.0 };
        // Only `model` mode read the whole vocabulary, so only it knows the argmax.
        let retrieval_is_argmax = (settings.mode == RetrieveMode::Model)
            .then(|| argmax(&watch, &probs) == Some(vocab.retrieval));
        let retrieved = settings
            .mode
            .retrieves(p_retrieve, settings.threshold, retrieval_is_argmax)
            .unwrap_or(false);
        (self.on_progress)(Progress::RetrieveDecided {
            p_retrieve,
            threshold: settings.threshold,
            mode: settings.mode,
            retrieved,
        });
        Ok(RetrieveDecision {
            p_retrieve,
            retrieved,
            found_nothing: false,
            passages_dropped: 0,
            retrieval_is_argmax,
        })
    }

    /// Step 2: the top `k` passages for `query` (at most `k`, whatever the retriever returns).
    pub(crate) fn search(
        &mut self,
        query: &str,
        segment: usize,
    ) -> Result<Vec<Passage>, SelfRagError> {
        let k = self.settings.k;
        let started = std::time::Instant::now();
        let found = self.retriever.search(query, k);
        self.time(started, |t| &mut t.search_seconds);
        let mut passages = found.map_err(SelfRagError::retriever)?;
        passages.truncate(k);
        (self.on_progress)(Progress::PassagesRetrieved {
            segment,
            count: passages.len(),
        });
        Ok(passages)
    }

    /// Step 3–5: generates all `batch` prompts in one `generate_batch` call and scores each
    /// continuation; `passages[i]` is the passage index candidate `i` was written from.
    pub(crate) fn generate_candidates(
        &mut self,
        batch: &[Prompt],
        passages: &[Option<usize>],
        request: &GenerateRequest,
        segment: usize,
    ) -> Result<Vec<(Candidate, Generation)>, SelfRagError> {
        let count = batch.len();
        (self.on_progress)(Progress::CandidatesStarted { segment, count });
        let ids: Vec<Vec<TokenId>> = batch.iter().map(|p| p.ids.clone()).collect();
        let started = std::time::Instant::now();
        let generated = self.generator.generate_batch_timed(&ids, request);
        let split = generated.as_ref().ok().and_then(|(_, split)| *split);
        self.time_generation(started.elapsed().as_secs_f64(), split);
        let (generations, _) =
            generated.map_err(SelfRagError::generator("writing candidate answers"))?;
        if generations.len() != count {
            return Err(SelfRagError::Generator {
                during: "writing candidate answers",
                source: format!(
                    "the backend returned {} continuations for {count} prompts",
                    generations.len()
                )
                .into(),
            });
        }
        self.check_cancel()?;
        let started = std::time::Instant::now();
        let mut out = Vec::with_capacity(count);
        for (index, ((generation, passage), prompt)) in
            generations.into_iter().zip(passages).zip(batch).enumerate()
        {
            let mut candidate = build_candidate(
                &*self.generator,
                &self.vocab,
                &generation,
                *passage,
                self.settings,
            )?;
            candidate.passages_dropped = prompt.passages_dropped;
            (self.on_progress)(Progress::CandidateFinished {
                segment,
                index,
                count,
            });
            out.push((candidate, generation));
        }
        self.time(started, |t| &mut t.critique_seconds);
        Ok(out)
    }
}

/// The id of the largest probability, the first (lowest) on ties; `None` when nothing came.
fn argmax(ids: &[TokenId], probs: &[f32]) -> Option<TokenId> {
    let best = probs
        .iter()
        .enumerate()
        .fold(None::<(usize, f32)>, |best, (i, &p)| match best {
            Some((_, q)) if q >= p => best,
            _ => Some((i, p)),
        });
    best.and_then(|(i, _)| ids.get(i).copied())
}

/// One prompt per source after `path` (the segments written so far): with its passage, or
/// `[No Retrieval]` for `None`.
pub(crate) fn build_prompts(
    generator: &dyn Generator,
    prompts: &PromptBuilder,
    path: &[WrittenSegment],
    sources: &[Option<&Passage>],
) -> Result<Vec<Prompt>, SelfRagError> {
    sources
        .iter()
        .map(|source| match source {
            Some(passage) => prompts.with_passage(generator.tokenizer(), path, passage),
            None => prompts.without_passage(path),
        })
        .collect()
}

/// A scored candidate from one generated row.
fn build_candidate(
    generator: &dyn Generator,
    vocab: &ReflectionVocab,
    generation: &Generation,
    passage: Option<usize>,
    settings: &Settings,
) -> Result<Candidate, SelfRagError> {
    let ids: Vec<TokenId> = generation.tokens.iter().map(|t| t.id).collect();
    let critique = critique::read(
        &generation.tokens,
        vocab,
        passage.is_some(),
        settings.p_lm_tokens,
    );
    let decode = |ids: &[TokenId]| {
        generator
            .tokenizer()
            .decode(ids)
            .map_err(SelfRagError::generator("decoding a candidate"))
    };
    let mut candidate = Candidate {
        passage,
        text: decode(&vocab.strip(&ids))?.trim().to_string(),
        raw: decode(&ids)?,
        p_lm: critique.p_lm,
        isrel: critique.isrel,
        issup: critique.issup,
        isuse: critique.isuse,
        s_rel: 0.0,
        s_sup: 0.0,
        s_use: 0.0,
        score: 0.0,
        ends_answer: generation.stop == StopReason::EndOfSequence,
        continued: false,
        evidence_issup: None,
        passages_dropped: 0,
        violates: Vec::new(),
        verdicts: Verdicts::default(),
    };
    candidate.rescore(settings.weights, settings.use_p_lm);
    Ok(candidate)
}

/// Emits `SegmentChosen` for every segment of a finished answer.
pub(crate) fn announce_segments(answer: &Answer, on_progress: &mut dyn FnMut(Progress)) {
    for (segment, s) in answer.segments.iter().enumerate() {
        on_progress(Progress::SegmentChosen {
            segment,
            text: s.text.clone(),
            citation: s.citation,
        });
    }
}
