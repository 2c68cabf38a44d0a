//! `rerank`: applies new critique weights or hard constraints to a stored [`Answer`] without
//! calling the model (in long form by replaying the beam search over the stored tree of every
//! expansion), and the one place that numbers citations and assembles the answer text from
//! the chosen candidates (used by short form and long form too).

use crate::critique;
use crate::settings::CritiqueWeights;
use crate::trace::{Answer, Candidate, Expansion, Segment, TreeNode};

/// The answer under new weights, and where running the model again could give another one.
#[derive(Debug, Clone, PartialEq)]
pub struct Reranked {
    pub answer: Answer,
    /// Long form: the first segment (0-based) that a re-run with these weights would write on
    /// a path the run did not continue, so that the stored tree cannot say how it goes on. The
    /// answer shown is the best path within the tree; a re-run could differ from there.
    /// `None` when the replay needed no branch the run did not expand: a re-run gives this
    /// answer (a run cut short by its generator aside, which `Answer::cut_short` says).
    pub unexplored_segment: Option<usize>,
}

/// Re-scores every stored candidate with `weights` and re-chooses under `hard_constraints`:
/// in short form the best candidate, in long form the path the beam search would keep,
/// replayed over the stored expansions; then renumbers citations and rebuilds the text.
/// Called with the trace's own settings it returns the trace unchanged, byte for byte.
pub fn rerank(answer: &Answer, weights: CritiqueWeights, hard_constraints: bool) -> Reranked {
    // A long-form trace saved before the tree was kept, under its own settings: as it is. A
    // replay within its one path could rank a path the run never finished above the one it
    // chose. (Every other trace replays to itself under its own settings.)
    let own_settings =
        weights == answer.settings.weights && hard_constraints == answer.settings.hard_constraints;
    if own_settings && answer.settings.long_form && answer.expansions.is_empty() {
        return Reranked {
            answer: answer.clone(),
            unexplored_segment: None,
        };
    }
    let mut out = answer.clone();
    out.settings.weights = weights;
    out.settings.hard_constraints = hard_constraints;
    let use_p_lm = out.settings.use_p_lm;
    let rescore = |candidates: &mut [Candidate]| {
        for candidate in candidates {
            candidate.rescore(weights, use_p_lm);
        }
    };
    let mut unexplored_segment = None;
    if answer.settings.long_form {
        // A trace saved before the tree was kept holds only its path: replay within it.
        let (mut tree, path_end) = if answer.expansions.is_empty() {
            path_as_tree(&answer.segments)
        } else {
            (answer.expansions.clone(), None)
        };
        for expansion in &mut tree {
            rescore(&mut expansion.candidates);
        }
        let replay = replay(&tree, &out, path_end);
        unexplored_segment = replay.unexplored_segment;
        out.segments = replay
            .path
            .iter()
            .filter_map(|node| {
                let expansion = tree.get(node.expansion)?;
                Some(Segment {
                    text: String::new(),
                    citation: None,
                    chosen: node.candidate,
                    candidates: expansion.candidates.clone(),
                    retrieve: expansion.retrieve,
                    excluded: Vec::new(),
                })
            })
            .collect();
        if let Some(retrieve) = out.segments.first().and_then(|s| s.retrieve) {
            out.retrieve = retrieve;
        }
        if !answer.expansions.is_empty() {
            out.expansions = tree;
        }
    } else {
        for segment in &mut out.segments {
            rescore(&mut segment.candidates);
            segment.chosen = critique::choose(&segment.candidates, hard_constraints);
        }
    }
    out.assemble();
    out.closed_set = out.closed_set.as_ref().map(|scores| scores.rescored(&out));
    Reranked {
        answer: out,
        unexplored_segment,
    }
}

/// The tree of a trace that kept only its chosen path: one expansion per segment, each the
/// child of the one before. The last node is returned too: the run ended there, so the replay
/// must not count the path's end as a branch left unexpanded.
fn path_as_tree(segments: &[Segment]) -> (Vec<Expansion>, Option<TreeNode>) {
    let mut parent = None;
    let mut tree = Vec::with_capacity(segments.len());
    for (expansion, segment) in segments.iter().enumerate() {
        tree.push(Expansion {
            parent,
            retrieve: segment.retrieve,
            candidates: segment.candidates.clone(),
            no_room: false,
        });
        parent = Some(TreeNode {
            expansion,
            candidate: segment.chosen,
        });
    }
    (tree, parent)
}

/// What a replay of the beam search found.
struct Replay {
    /// The best path, first segment first.
    path: Vec<TreeNode>,
    /// See [`Reranked::unexplored_segment`].
    unexplored_segment: Option<usize>,
}

/// A path of the replayed beam search.
#[derive(Debug, Clone, Default)]
struct ReplayBeam {
    path: Vec<TreeNode>,
    score_sum: f32,
    finished: bool,
}

impl ReplayBeam {
    /// As `long_form::Beam::mean`: the sum in path order over the count.
    fn mean(&self) -> f32 {
        if self.path.is_empty() {
            0.0
        } else {
            self.score_sum / self.path.len() as f32
        }
    }
}

/// The long-form beam search (`long_form::run`) over `tree` instead of the model, with
/// `answer`'s settings and candidates already rescored: the same expansion order, the same
/// hard constraints, the same stable ranking by mean ranking value, so that with the trace's
/// own settings it keeps the trace's path. A beam whose expansion the tree lacks ends there,
/// and the first segment a re-run would write for it is noted (`path_end`, the end of a
/// trace that kept only its path, is where that run ended, not a branch left unexpanded).
fn replay(tree: &[Expansion], answer: &Answer, path_end: Option<TreeNode>) -> Replay {
    let settings = &answer.settings;
    let width = settings.beam_width.max(1);
    let mut beams = vec![ReplayBeam::default()];
    let mut unexplored_segment: Option<usize> = None;
    for segment in 0..settings.max_segments.max(1) {
        if beams.iter().all(|b| b.finished) {
            break;
        }
        let mut next = Vec::new();
        for beam in &beams {
            if beam.finished {
                next.push(beam.clone());
                continue;
            }
            let parent = beam.path.last().copied();
            let found = tree.iter().enumerate().find(|(_, e)| e.parent == parent);
            let Some((index, expansion)) = found.filter(|(_, e)| !e.no_room) else {
                if found.is_none() && (parent.is_none() || parent != path_end) {
                    unexplored_segment.get_or_insert(segment);
                }
                next.push(ReplayBeam {
                    finished: true,
                    ..beam.clone()
                });
                continue;
            };
            for i in critique::eligible(&expansion.candidates, settings.hard_constraints) {
                let candidate = &expansion.candidates[i];
                let mut child = beam.clone();
                child.path.push(TreeNode {
                    expansion: index,
                    candidate: i,
                });
                child.score_sum += critique::ranking_value(candidate, settings);
                child.finished = candidate.ends_answer || candidate.text.is_empty();
                next.push(child);
            }
        }
        // Stable, as in the run: on equal means the earlier beam (and candidate) stays ahead.
        next.sort_by(|a, b| b.mean().total_cmp(&a.mean()));
        next.truncate(width);
        beams = next;
    }
    Replay {
        path: beams.into_iter().next().unwrap_or_default().path,
        unexplored_segment,
    }
}

impl Answer {
    /// Makes passages, citations and text follow the chosen candidates: cited passages first
    /// in order of first use, then the rest in retrieval order (the order candidates first
    /// name them), every `Candidate::passage` remapped, `[n]` markers after cited segments.
    pub(crate) fn assemble(&mut self) {
        let count = self.passages.len();
        let mut order: Vec<usize> = Vec::with_capacity(count);
        let push = |order: &mut Vec<usize>, index: Option<usize>| {
            if let Some(i) = index.filter(|&i| i < count && !order.contains(&i)) {
                order.push(i);
            }
        };
        for segment in &self.segments {
            push(
                &mut order,
                segment
                    .candidates
                    .get(segment.chosen)
                    .and_then(|c| c.passage),
            );
        }
        for candidate in self
            .segments
            .iter()
            .flat_map(|s| &s.candidates)
            .chain(self.expansions.iter().flat_map(|e| &e.candidates))
        {
            push(&mut order, candidate.passage);
        }
        for i in 0..count {
            push(&mut order, Some(i));
        }

        let mut new_index = vec![0; count];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        let old_passages = std::mem::take(&mut self.passages);
        let mut slots: Vec<_> = old_passages.into_iter().map(Some).collect();
        self.passages = order.iter().filter_map(|&old| slots[old].take()).collect();

        // An index past the passages (a hand-edited trace) cites nothing.
        let remap = |candidate: &mut Candidate| {
            candidate.passage = candidate
                .passage
                .and_then(|old| new_index.get(old).copied());
        };
        self.expansions
            .iter_mut()
            .flat_map(|e| e.candidates.iter_mut())
            .for_each(remap);
        let mut parts = Vec::with_capacity(self.segments.len());
        let hard_constraints = self.settings.hard_constraints;
        for segment in &mut self.segments {
            segment.candidates.iter_mut().for_each(remap);
            segment.excluded = critique::excluded(&segment.candidates, hard_constraints);
            let chosen = segment.candidates.get(segment.chosen);
            segment.text = chosen
                .map(|c| c.text.trim().to_string())
                .unwrap_or_default();
            segment.citation = chosen.and_then(|c| c.passage).map(|p| p + 1);
            if segment.text.is_empty() {
                continue;
            }
            parts.push(match segment.citation {
                Some(n) => format!("{} [{n}]", segment.text),
                None => segment.text.clone(),
            });
        }
        self.answer = parts.join(" ");
    }
}
