//! Long form (SELFRAG.md step 8): segment-level beam search. Each of the B beams decides
//! retrieval at its segment boundary, expands into one candidate per passage (one batch per
//! beam), and the B paths with the best mean segment score survive (segments of different
//! kinds compared as `Settings::long_form_ranking` says). A beam's prompt holds
//! only its own path, exactly as the model read and wrote it (passages included, as in
//! training, while the context allows), so siblings never read each other's text. Every
//! expansion is kept in the trace (`Answer::expansions`) for re-rank to replay.

use crate::backend::{GenerateRequest, Generation, Passage, StopReason, TokenId};
use crate::critique;
use crate::error::SelfRagError;
use crate::prompt::{Prompt, PromptBuilder, WrittenSegment};
use crate::run::RunContext;
use crate::short_form::{announce_segments, build_prompts};
use crate::trace::{Answer, Candidate, Expansion, RetrieveDecision, Segment, TreeNode};

/// One path of the beam search.
#[derive(Debug, Clone, Default)]
struct Beam {
    /// The path as the model read and wrote it, segment by segment: what its next prompt
    /// continues.
    path: Vec<WrittenSegment>,
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
    /// The path's last segment in the run's tree; `None` before the first.
    node: Option<TreeNode>,
}

impl Beam {
    /// Mean of its segments' ranking values (f, or f over the most its kind can score: see
    /// [`LongFormRanking`]): the beam search's ranking, so long paths are not favoured.
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
    ctx: RunContext<'a>,
    prompts: PromptBuilder,
    request: GenerateRequest,
    /// Every passage retrieved by any beam, deduplicated by id.
    pool: Vec<Passage>,
    /// Every expansion made so far, in order.
    tree: Vec<Expansion>,
}

/// Runs long-form Self-RAG; see [`crate::answer`].
pub(crate) fn run(ctx: RunContext<'_>) -> Result<Answer, SelfRagError> {
    let settings = ctx.settings;
    let question = ctx.question;
    let described = ctx.generator.describe();
    let prompts = PromptBuilder::for_instruction(
        ctx.generator.tokenizer(),
        ctx.prompt_window(),
        &ctx.vocab,
        ctx.instruction,
        settings.max_segment_tokens,
    )?;
    let request = GenerateRequest {
        max_new_tokens: settings.max_segment_tokens,
        stop_ids: ctx.vocab.retrieve_ids().to_vec(),
        markup_ids: ctx.vocab.markup_ids(),
        watch_ids: ctx.vocab.critique_watch_ids(),
    };
    let mut run = Run {
        ctx,
        prompts,
        request,
        pool: Vec::new(),
        tree: Vec::new(),
    };

    let width = settings.beam_width.max(1);
    let mut beams = vec![Beam::default()];
    let mut cut_short = None;
    'segments: for segment in 0..settings.max_segments.max(1) {
        if beams.iter().all(|b| b.finished) {
            break;
        }
        let explored = run.tree.len();
        let mut next = Vec::new();
        for beam in &beams {
            if beam.finished {
                next.push(beam.clone());
                continue;
            }
            match run.expand(beam, segment) {
                Ok(children) => next.extend(children),
                // A path too long for the context ends there; only the first segment must fit.
                Err(SelfRagError::PromptTooLong { .. }) if segment > 0 => {
                    run.tree.push(Expansion {
                        parent: beam.node,
                        retrieve: None,
                        candidates: Vec::new(),
                        no_room: true,
                    });
                    next.push(Beam {
                        finished: true,
                        ..beam.clone()
                    });
                }
                // A generator that stops answering (a server killed or unreachable) after the
                // first segment: the paths written so far are the answer, and it says why.
                // The step it broke off is left out of the tree, which then ends where the
                // answer does.
                Err(err @ SelfRagError::Generator { .. })
                    if segment > 0 && !run.ctx.cancel.is_cancelled() =>
                {
                    cut_short = Some(err.to_string());
                    run.tree.truncate(explored);
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
                passages_dropped: 0,
                retrieval_is_argmax: None,
            }),
        passages: Vec::new(),
        segments: best.segments,
        expansions: run.tree,
        answer: String::new(),
        generator: described,
        embedder: None,
        cut_short,
        timings: None,
        closed_set: None,
    };
    answer.passages = keep_used_passages(run.pool, &mut answer);
    let started = std::time::Instant::now();
    answer.assemble();
    run.ctx.time(started, |t| &mut t.critique_seconds);
    answer.timings = Some(run.ctx.timings());
    announce_segments(&answer, run.ctx.on_progress);
    Ok(answer)
}

impl Run<'_> {
    /// The children of `beam` at `segment`: one per candidate the hard constraints keep. The
    /// expansion goes into the run's tree.
    fn expand(&mut self, beam: &Beam, segment: usize) -> Result<Vec<Beam>, SelfRagError> {
        self.ctx.check_cancel()?;
        let (sources, decision, prompts) = match beam.passage {
            // [Continue to Use Evidence]: the passage is already in the prompt; the next text
            // follows the token directly, with no new search and no new IsRel judgement.
            Some(passage) if beam.continues => (
                vec![Some(passage)],
                None,
                vec![self.prompts.continuing(&beam.path)?],
            ),
            _ => {
                let (sources, decision) = self.retrieve(beam, segment)?;
                let passages: Vec<Option<&Passage>> = sources
                    .iter()
                    .map(|s| s.and_then(|i| self.pool.get(i)))
                    .collect();
                let prompts =
                    build_prompts(&*self.ctx.generator, &self.prompts, &beam.path, &passages)?;
                (sources, Some(decision), prompts)
            }
        };
        self.ctx.check_cancel()?;

        let (mut candidates, generations): (Vec<Candidate>, Vec<Generation>) = self
            .ctx
            .generate_candidates(&prompts, &sources, &self.request, segment)?
            .into_iter()
            .unzip();
        if decision.is_none() {
            // The segment it continues: its IsRel is carried, as the model does not judge a
            // passage twice; its IsSup (the last one given on this passage along the path) is
            // kept beside the candidate's own for the ranking to count.
            let evidence = beam
                .segments
                .last()
                .and_then(|s| s.candidates.get(s.chosen));
            let settings = self.ctx.settings;
            for candidate in &mut candidates {
                candidate.continued = true;
                candidate.isrel = evidence.and_then(|c| c.isrel);
                candidate.evidence_issup = evidence.and_then(|c| c.issup.or(c.evidence_issup));
                candidate.rescore(settings.weights, settings.use_p_lm);
            }
        }

        let expansion = self.tree.len();
        let children = critique::eligible(&candidates, self.ctx.settings.hard_constraints)
            .into_iter()
            .map(|i| {
                let node = TreeNode {
                    expansion,
                    candidate: i,
                };
                self.child(
                    beam,
                    &candidates,
                    &generations[i],
                    &prompts[i],
                    node,
                    sources[i],
                    decision,
                )
            })
            .collect();
        self.tree.push(Expansion {
            parent: beam.node,
            retrieve: decision,
            candidates,
            no_room: false,
        });
        Ok(children)
    }

    /// The retrieve decision at `beam`'s boundary and the pool indices of what it found
    /// (`[None]` for the no-retrieval path).
    fn retrieve(
        &mut self,
        beam: &Beam,
        segment: usize,
    ) -> Result<(Vec<Option<usize>>, RetrieveDecision), SelfRagError> {
        let point = self.prompts.decision_point(&beam.path)?;
        let mut decision = self.ctx.decide(&point.ids)?;
        decision.passages_dropped = point.passages_dropped;
        self.ctx.check_cancel()?;
        let found = if decision.retrieved {
            let previous = beam
                .segments
                .last()
                .and_then(|s| s.candidates.get(s.chosen))
                .map_or("", |c| c.text.as_str());
            let query = if previous.is_empty() {
                self.ctx.question.to_string()
            } else {
                format!("{} {previous}", self.ctx.question)
            };
            self.ctx.search(&query, segment)?
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

    /// `beam` extended by the candidate at `node`, written after `prompt`.
    #[allow(clippy::too_many_arguments)]
    fn child(
        &self,
        beam: &Beam,
        candidates: &[Candidate],
        generation: &Generation,
        prompt: &Prompt,
        node: TreeNode,
        passage: Option<usize>,
        retrieve: Option<RetrieveDecision>,
    ) -> Beam {
        let mut written: Vec<TokenId> = generation.tokens.iter().map(|t| t.id).collect();
        let last = written.last().copied();
        // The closing Retrieve token is replaced by the next segment's opening: the decision
        // made at the boundary, or the Continue token itself.
        if last.is_some_and(|id| {
            self.ctx.vocab.is_end(id) || self.ctx.vocab.retrieve_ids().contains(&id)
        }) {
            written.pop();
        }
        let (opening, read) = prompt
            .opening()
            .split_first()
            .map_or((self.ctx.vocab.no_retrieval, &[][..]), |(&o, rest)| {
                (o, rest)
            });
        let chosen = &candidates[node.candidate];
        let mut child = beam.clone();
        child.path.push(WrittenSegment {
            opening,
            passage: read.to_vec(),
            written,
        });
        child.passage = passage;
        child.continues = generation.stop == StopReason::StopToken
            && last == Some(self.ctx.vocab.continue_evidence);
        child.finished = chosen.ends_answer || chosen.text.is_empty();
        child.score_sum += critique::ranking_value(chosen, self.ctx.settings);
        child.node = Some(node);
        child.segments.push(Segment {
            text: String::new(),
            citation: None,
            chosen: node.candidate,
            candidates: candidates.to_vec(),
            retrieve,
            excluded: Vec::new(),
        });
        child
    }
}

/// The pool's passages that `answer`'s segments and expansions name, in order of first
/// mention, with every candidate's passage index remapped to the returned list.
fn keep_used_passages(pool: Vec<Passage>, answer: &mut Answer) -> Vec<Passage> {
    let mut new_index: Vec<Option<usize>> = vec![None; pool.len()];
    let mut order = Vec::new();
    let candidates = answer
        .segments
        .iter_mut()
        .flat_map(|s| s.candidates.iter_mut())
        .chain(
            answer
                .expansions
                .iter_mut()
                .flat_map(|e| e.candidates.iter_mut()),
        );
    for candidate in candidates {
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
