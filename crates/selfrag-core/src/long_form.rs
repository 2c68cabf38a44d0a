//! Long form (SELFRAG.md step 8): segment-level beam search. Each of the B beams decides
//! retrieval at its segment boundary, expands into one candidate per passage (one batch per
//! beam), and the B paths with the best mean segment score survive. A beam's prompt holds
//! only its own path, so siblings never read each other's text.

use crate::backend::{
    GenerateRequest, Generation, Generator, Passage, Retriever, StopReason, TokenId,
};
use crate::critique;
use crate::error::SelfRagError;
use crate::progress::{self, Cancel, Progress};
use crate::prompt::PromptBuilder;
use crate::settings::Settings;
use crate::short_form::{
    announce_segments, build_prompts, decide, generate_candidates, search, validate,
};
use crate::trace::{Answer, Candidate, RetrieveDecision, Segment};
use crate::vocab::ReflectionVocab;

/// One path of the beam search.
#[derive(Debug, Clone, Default)]
struct Beam {
    /// Generated ids of the path's segments, reflection tokens kept, each segment's closing
    /// Retrieve token and `</s>` dropped; passages never enter it.
    history: Vec<TokenId>,
    /// The path's segments; `candidates[chosen]` is the one on the path. Passage indices
    /// point into the run's passage pool until the answer is assembled.
    segments: Vec<Segment>,
    score_sum: f32,
    /// Pool index of the passage the last segment was written from.
    passage: Option<usize>,
    /// The last segment ended with `[Continue to Use Evidence]`.
    continues: bool,
    /// Ended with `</s>`, wrote no text, or can no longer fit a prompt.
    finished: bool,
}

impl Beam {
    /// Mean segment score: the beam search's ranking, so long paths are not favoured.
    fn mean(&self) -> f32 {
        if self.segments.is_empty() {
            0.0
        } else {
            self.score_sum / self.segments.len() as f32
        }
    }
}

/// What every expansion of one run shares.
struct Run<'a> {
    question: &'a str,
    settings: &'a Settings,
    generator: &'a mut dyn Generator,
    retriever: &'a mut dyn Retriever,
    on_progress: &'a mut dyn FnMut(Progress),
    cancel: &'a dyn Cancel,
    vocab: ReflectionVocab,
    prompts: PromptBuilder,
    request: GenerateRequest,
    /// Every passage retrieved by any beam, deduplicated by id.
    pool: Vec<Passage>,
}

/// Runs long-form Self-RAG; see [`crate::answer`].
pub(crate) fn run(
    question: &str,
    settings: &Settings,
    generator: &mut dyn Generator,
    retriever: &mut dyn Retriever,
    on_progress: &mut dyn FnMut(Progress),
    cancel: &dyn Cancel,
) -> Result<Answer, SelfRagError> {
    let question = validate(question)?;
    progress::check(cancel)?;
    let vocab = ReflectionVocab::resolve(&*generator)?;
    let described = generator.describe();
    let prompts = PromptBuilder::new(&*generator, &vocab, question, settings.max_segment_tokens)?;
    let request = GenerateRequest {
        max_new_tokens: settings.max_segment_tokens,
        stop_ids: vocab.retrieve_ids().to_vec(),
        watch_ids: vocab.critique_watch_ids(),
    };
    let mut run = Run {
        question,
        settings,
        generator,
        retriever,
        on_progress,
        cancel,
        vocab,
        prompts,
        request,
        pool: Vec::new(),
    };

    let width = settings.beam_width.max(1);
    let mut beams = vec![Beam::default()];
    let mut cut_short = None;
    'segments: for segment in 0..settings.max_segments.max(1) {
        if beams.iter().all(|b| b.finished) {
            break;
        }
        let mut next = Vec::new();
        for beam in &beams {
            if beam.finished {
                next.push(beam.clone());
                continue;
            }
            match run.expand(beam, segment) {
                Ok(children) => next.extend(children),
                // A path too long for the context ends there; only the first segment must fit.
                Err(SelfRagError::PromptTooLong { .. }) if segment > 0 => next.push(Beam {
                    finished: true,
                    ..beam.clone()
                }),
                // A generator that stops answering (a server killed or unreachable) after the
                // first segment: the paths written so far are the answer, and it says why.
                Err(err @ SelfRagError::Generator { .. })
                    if segment > 0 && !run.cancel.is_cancelled() =>
                {
                    cut_short = Some(err.to_string());
                    break 'segments;
                }
                Err(err) => return Err(err),
            }
        }
        // Stable: on equal means the earlier beam (and earlier candidate) stays ahead.
        next.sort_by(|a, b| b.mean().total_cmp(&a.mean()));
        next.truncate(width);
        beams = next;
    }

    let best = beams.into_iter().next().unwrap_or_default();
    let mut answer = Answer {
        question: question.to_string(),
        settings: settings.clone(),
        retrieve: best
            .segments
            .first()
            .and_then(|s| s.retrieve)
            .unwrap_or(RetrieveDecision {
                p_retrieve: 0.0,
                retrieved: false,
                found_nothing: false,
            }),
        passages: Vec::new(),
        segments: best.segments,
        answer: String::new(),
        generator: described,
        cut_short,
    };
    answer.passages = keep_used_passages(run.pool, &mut answer.segments);
    answer.assemble();
    announce_segments(&answer, run.on_progress);
    Ok(answer)
}

impl Run<'_> {
    /// The children of `beam` at `segment`: one per candidate the hard constraints keep.
    fn expand(&mut self, beam: &Beam, segment: usize) -> Result<Vec<Beam>, SelfRagError> {
        progress::check(self.cancel)?;
        let (sources, decision) = match beam.passage {
            // [Continue to Use Evidence]: the next segment reads the same passage, no new search.
            Some(passage) if beam.continues => (vec![Some(passage)], None),
            _ => {
                let (sources, decision) = self.retrieve(beam, segment)?;
                (sources, Some(decision))
            }
        };
        progress::check(self.cancel)?;

        let passages: Vec<Option<&Passage>> = sources
            .iter()
            .map(|s| s.and_then(|i| self.pool.get(i)))
            .collect();
        let batch = build_prompts(&*self.generator, &self.prompts, &beam.history, &passages)?;
        let (candidates, generations): (Vec<Candidate>, Vec<Generation>) = generate_candidates(
            self.generator,
            &self.vocab,
            &batch,
            &sources,
            &self.request,
            self.settings,
            segment,
            self.on_progress,
            self.cancel,
        )?
        .into_iter()
        .unzip();

        let children = critique::eligible(&candidates, self.settings.hard_constraints)
            .into_iter()
            .map(|i| self.child(beam, &candidates, &generations[i], i, sources[i], decision))
            .collect();
        Ok(children)
    }

    /// The retrieve decision at `beam`'s boundary and the pool indices of what it found
    /// (`[None]` for the no-retrieval path).
    fn retrieve(
        &mut self,
        beam: &Beam,
        segment: usize,
    ) -> Result<(Vec<Option<usize>>, RetrieveDecision), SelfRagError> {
        let point = self.prompts.decision_point(&beam.history)?;
        let mut decision = decide(
            self.generator,
            &self.vocab,
            &point,
            self.settings,
            self.on_progress,
        )?;
        progress::check(self.cancel)?;
        let found = if decision.retrieved {
            let previous = beam
                .segments
                .last()
                .and_then(|s| s.candidates.get(s.chosen))
                .map_or("", |c| c.text.as_str());
            let query = if previous.is_empty() {
                self.question.to_string()
            } else {
                format!("{} {previous}", self.question)
            };
            search(
                self.retriever,
                &query,
                self.settings.k,
                segment,
                self.on_progress,
            )?
        } else {
            Vec::new()
        };
        decision.found_nothing = decision.retrieved && found.is_empty();
        decision.retrieved = !found.is_empty();
        if found.is_empty() {
            return Ok((vec![None], decision));
        }
        let sources = found.into_iter().map(|p| Some(self.intern(p))).collect();
        Ok((sources, decision))
    }

    /// The pool index of `passage`, adding it on first sight.
    fn intern(&mut self, passage: Passage) -> usize {
        match self.pool.iter().position(|p| p.id == passage.id) {
            Some(index) => index,
            None => {
                self.pool.push(passage);
                self.pool.len() - 1
            }
        }
    }

    /// `beam` extended by candidate `chosen` of this step.
    fn child(
        &self,
        beam: &Beam,
        candidates: &[Candidate],
        generation: &Generation,
        chosen: usize,
        passage: Option<usize>,
        retrieve: Option<RetrieveDecision>,
    ) -> Beam {
        let mut ids: Vec<TokenId> = generation.tokens.iter().map(|t| t.id).collect();
        let last = ids.last().copied();
        // The closing Retrieve token is replaced by the decision made at the next boundary.
        if last.is_some_and(|id| id == self.vocab.eos || self.vocab.retrieve_ids().contains(&id)) {
            ids.pop();
        }
        let mut child = beam.clone();
        child.history.extend(ids);
        child.passage = passage;
        child.continues =
            generation.stop == StopReason::StopToken && last == Some(self.vocab.continue_evidence);
        child.finished =
            generation.stop == StopReason::EndOfSequence || candidates[chosen].text.is_empty();
        child.score_sum += candidates[chosen].score;
        child.segments.push(Segment {
            text: String::new(),
            citation: None,
            chosen,
            candidates: candidates.to_vec(),
            retrieve,
        });
        child
    }
}

/// The pool's passages that `segments` name, in order of first mention, with every
/// candidate's passage index remapped to the returned list.
fn keep_used_passages(pool: Vec<Passage>, segments: &mut [Segment]) -> Vec<Passage> {
    let mut new_index: Vec<Option<usize>> = vec![None; pool.len()];
    let mut order = Vec::new();
    for candidate in segments.iter_mut().flat_map(|s| s.candidates.iter_mut()) {
        candidate.passage = candidate.passage.and_then(|old| {
            let slot = new_index.get_mut(old)?;
            Some(*slot.get_or_insert_with(|| {
                order.push(old);
                order.len() - 1
            }))
        });
    }
    let mut slots: Vec<Option<Passage>> = pool.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|old| slots.get_mut(old).and_then(Option::take))
        .collect()
}
