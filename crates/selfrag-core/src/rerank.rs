//! `rerank`: applies new critique weights or hard constraints to a stored [`Answer`] without
//! calling the model, and the one place that numbers citations and assembles the answer text
//! from the chosen candidates (used by short form and long form too).

use crate::critique;
use crate::settings::CritiqueWeights;
use crate::trace::Answer;

/// The answer under new weights, and whether running the model again could give another one.
#[derive(Debug, Clone, PartialEq)]
pub struct Reranked {
    pub answer: Answer,
    /// True for a long-form answer whose chosen segments changed: the later segments were
    /// generated after the old choice, so a rerun would condition them on the new one.
    pub rerun_could_differ: bool,
}

/// Re-scores every stored candidate with `weights`, re-chooses each segment's candidate under
/// `hard_constraints`, renumbers the citations and rebuilds the answer text.
pub fn rerank(answer: &Answer, weights: CritiqueWeights, hard_constraints: bool) -> Reranked {
    let mut out = answer.clone();
    let same_settings =
        weights == answer.settings.weights && hard_constraints == answer.settings.hard_constraints;
    out.settings.weights = weights;
    out.settings.hard_constraints = hard_constraints;
    let long_form = answer.settings.long_form;
    let mut changed = false;
    for segment in &mut out.segments {
        for candidate in &mut segment.candidates {
            candidate.rescore(weights, out.settings.use_p_lm);
        }
        // A long-form choice came from the beam search over whole paths, whose other
        // continuations are not stored; under the settings it was made with it stands as is.
        if long_form && same_settings {
            continue;
        }
        let chosen = critique::choose(&segment.candidates, hard_constraints);
        changed |= chosen != segment.chosen;
        segment.chosen = chosen;
    }
    out.assemble();
    Reranked {
        answer: out,
        rerun_could_differ: long_form && changed,
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
        for segment in &self.segments {
            for candidate in &segment.candidates {
                push(&mut order, candidate.passage);
            }
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

        let mut parts = Vec::with_capacity(self.segments.len());
        for segment in &mut self.segments {
            for candidate in &mut segment.candidates {
                // An index past the passages (a hand-edited trace) cites nothing.
                candidate.passage = candidate
                    .passage
                    .and_then(|old| new_index.get(old).copied());
            }
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
