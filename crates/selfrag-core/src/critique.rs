//! The critique scores s_rel, s_sup, s_use and the segment score f (SELFRAG.md steps 4–6):
//! pure functions of the probabilities the model gave its reflection tokens, so `rerank` can
//! recompute them from the trace alone.

use crate::backend::GeneratedToken;
use crate::settings::{CritiqueWeights, LongFormRanking, PLmTokens, Settings};
use crate::trace::{
    Answer, Candidate, HardConstraint, IsRelDistribution, IsRelVerdict, IsSupDistribution,
    IsSupVerdict, IsUseDistribution, Verdicts,
};
use crate::vocab::{ReflectionVocab, TokenGroup, watch};

/// The utility weights of `[Utility:1]` … `[Utility:5]`.
const UTILITY_WEIGHTS: [f32; 5] = [-1.0, -0.5, 0.0, 0.5, 1.0];

/// `numerator / denominator`, or 0 where the model gave the whole group no probability
/// (a 0/0 would otherwise turn the score into NaN and make every comparison false).
fn ratio(numerator: f32, denominator: f32) -> f32 {
    if denominator > 0.0 {
        numerator / denominator
    } else {
        0.0
    }
}

impl IsRelDistribution {
    /// s_rel = p(Relevant) / (p(Relevant) + p(Irrelevant)), in [0, 1].
    pub fn s_rel(&self) -> f32 {
        ratio(self.relevant, self.relevant + self.irrelevant)
    }

    /// `[Irrelevant]` when it is strictly the more probable token, else `[Relevant]`.
    pub fn verdict(&self) -> IsRelVerdict {
        if self.irrelevant > self.relevant {
            IsRelVerdict::Irrelevant
        } else {
            IsRelVerdict::Relevant
        }
    }

    /// Whether `[Irrelevant]` is strictly the more probable IsRel token (hard constraint).
    pub fn is_irrelevant(&self) -> bool {
        self.verdict() == IsRelVerdict::Irrelevant
    }
}

impl IsSupDistribution {
    /// s_sup = (p(Fully) + 0.5·p(Partially)) / (sum of the three), in [0, 1].
    pub fn s_sup(&self) -> f32 {
        ratio(
            self.fully + 0.5 * self.partially,
            self.fully + self.partially + self.no_support,
        )
    }

    /// The most probable IsSup token; on a tie the better verdict (Fully over Partially over
    /// No support).
    pub fn verdict(&self) -> IsSupVerdict {
        if self.fully >= self.partially && self.fully >= self.no_support {
            IsSupVerdict::Fully
        } else if self.partially >= self.no_support {
            IsSupVerdict::Partially
        } else {
            IsSupVerdict::NoSupport
        }
    }

    /// Whether `[No support / Contradictory]` is strictly the most probable IsSup token.
    pub fn is_unsupported(&self) -> bool {
        self.verdict() == IsSupVerdict::NoSupport
    }
}

impl IsUseDistribution {
    /// The five probabilities, `[Utility:1]` first.
    pub fn probabilities(&self) -> [f32; 5] {
        [self.u1, self.u2, self.u3, self.u4, self.u5]
    }

    /// The n of the most probable `[Utility:n]`; on a tie the higher utility.
    pub fn verdict(&self) -> u8 {
        let mut best = (1u8, f32::NEG_INFINITY);
        for (n, p) in (1u8..).zip(self.probabilities()) {
            if p >= best.1 {
                best = (n, p);
            }
        }
        best.0
    }

    /// s_use = Σ w_i·p(Utility:i) / Σ p(Utility:i) with w = (-1, -0.5, 0, 0.5, 1), in [-1, 1].
    pub fn s_use(&self) -> f32 {
        let p = self.probabilities();
        let weighted: f32 = p.iter().zip(UTILITY_WEIGHTS).map(|(p, w)| p * w).sum();
        ratio(weighted, p.iter().sum())
    }
}

/// The three critique scores of one candidate; a missing distribution scores 0.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CritiqueScores {
    pub s_rel: f32,
    pub s_sup: f32,
    pub s_use: f32,
}

impl CritiqueScores {
    /// Scores from the stored distributions; `None` (the token never appeared) gives 0.
    pub fn from_distributions(
        isrel: Option<&IsRelDistribution>,
        issup: Option<&IsSupDistribution>,
        isuse: Option<&IsUseDistribution>,
    ) -> Self {
        Self {
            s_rel: isrel.map_or(0.0, IsRelDistribution::s_rel),
            s_sup: issup.map_or(0.0, IsSupDistribution::s_sup),
            s_use: isuse.map_or(0.0, IsUseDistribution::s_use),
        }
    }
}

/// The segment score f (Eq. 3–4): p_LM + w_rel·s_rel + w_sup·s_sup + w_use·s_use with a
/// passage, p_LM + w_use·s_use without one (the no-retrieval path has nothing to be relevant
/// to or supported by). p_LM counts only when `use_p_lm`.
pub fn segment_score(
    p_lm: f32,
    scores: CritiqueScores,
    weights: CritiqueWeights,
    use_p_lm: bool,
    retrieved: bool,
) -> f32 {
    let p_lm = if use_p_lm { p_lm } else { 0.0 };
    let evidence = if retrieved {
        weights.rel * scores.s_rel + weights.sup * scores.s_sup
    } else {
        0.0
    };
    p_lm + evidence + weights.use_ * scores.s_use
}

/// What long form's beam search ranks a segment by (its path's rank is the mean over its
/// segments; see [`LongFormRanking`]). `Raw`: its f. `Normalised`: its f, counting the IsSup of
/// its evidence where a continued segment wrote none, divided by the most a segment that wrote
/// the same kinds of token can score: `[p_LM]`, plus `w_rel + w_sup` with a passage (fresh or
/// continued), plus `w_use` where it wrote IsUse (the model writes IsUse once, at the answer's
/// end). Each value then lies in [−1, 1] whatever the segment's kind; 0 where that most is 0
/// (every term switched off). Within one expansion every candidate is of one kind, so the
/// choice among siblings is f's.
pub fn ranking_value(candidate: &Candidate, settings: &Settings) -> f32 {
    let weights = settings.weights;
    match settings.long_form_ranking {
        LongFormRanking::Raw => candidate.score,
        LongFormRanking::Normalised => {
            let retrieved = candidate.passage.is_some();
            // f with the evidence's IsSup where the segment wrote none (its own s_sup is 0).
            let carried = match (candidate.issup, candidate.evidence_issup) {
                (None, Some(evidence)) if retrieved => weights.sup * evidence.s_sup(),
                _ => 0.0,
            };
            let f = candidate.score + carried;
            let p_lm = if settings.use_p_lm { 1.0 } else { 0.0 };
            let evidence = if retrieved {
                weights.rel + weights.sup
            } else {
                0.0
            };
            let utility = if candidate.isuse.is_some() {
                weights.use_
            } else {
                0.0
            };
            ratio(f, p_lm + evidence + utility)
        }
    }
}

/// What the model's own distributions say about one generated segment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Critique {
    pub p_lm: f32,
    pub isrel: Option<IsRelDistribution>,
    pub issup: Option<IsSupDistribution>,
    pub isuse: Option<IsUseDistribution>,
}

/// p_LM: `exp(Σ log p / n)` over the generated tokens `over` names, 0 when there are none.
/// The sum is in f64, as vLLM's `cumulative_logprob` is a Python float.
pub(crate) fn p_lm(tokens: &[GeneratedToken], vocab: &ReflectionVocab, over: PLmTokens) -> f32 {
    let counted = tokens.iter().filter(|t| match over {
        PLmTokens::All => true,
        PLmTokens::Text => vocab.is_text(t.id),
    });
    let (sum, n) = counted.fold((0.0f64, 0usize), |(sum, n), t| {
        (sum + f64::from(t.logprob), n + 1)
    });
    if n == 0 {
        0.0
    } else {
        (sum / n as f64).exp() as f32
    }
}

/// Reads p_LM (over the tokens `p_lm_tokens` names) and the IsRel / IsSup / IsUse
/// distributions from a generation made with `vocab.critique_watch_ids()` as its watch list.
/// IsRel is read only with a passage.
pub(crate) fn read(
    tokens: &[GeneratedToken],
    vocab: &ReflectionVocab,
    retrieved: bool,
    p_lm_tokens: PLmTokens,
) -> Critique {
    let p_lm = p_lm(tokens, vocab, p_lm_tokens);
    // A watched vector shorter than the watch list is a backend fault; treating the gap as
    // "no distribution" (score 0) is the safe reading, never a sentinel like -100.
    let watched = |token: &GeneratedToken| -> Option<[f32; watch::LEN]> {
        token.watched.get(..watch::LEN)?.try_into().ok()
    };
    let first_of = |group: TokenGroup| {
        tokens
            .iter()
            .find(|t| vocab.group(t.id) == Some(group))
            .and_then(watched)
    };
    let isrel = if retrieved {
        tokens.first().and_then(watched).map(|w| IsRelDistribution {
            relevant: w[watch::RELEVANT],
            irrelevant: w[watch::IRRELEVANT],
        })
    } else {
        None
    };
    let issup = first_of(TokenGroup::IsSup).map(|w| IsSupDistribution {
        fully: w[watch::FULLY],
        partially: w[watch::PARTIALLY],
        no_support: w[watch::NO_SUPPORT],
    });
    let isuse = first_of(TokenGroup::IsUse).map(|w| IsUseDistribution {
        u1: w[watch::UTILITY],
        u2: w[watch::UTILITY + 1],
        u3: w[watch::UTILITY + 2],
        u4: w[watch::UTILITY + 3],
        u5: w[watch::UTILITY + 4],
    });
    Critique {
        p_lm,
        isrel,
        issup,
        isuse,
    }
}

impl Candidate {
    /// Recomputes s_rel, s_sup, s_use and f from the stored distributions and p_LM.
    pub(crate) fn rescore(&mut self, weights: CritiqueWeights, use_p_lm: bool) {
        let scores = CritiqueScores::from_distributions(
            self.isrel.as_ref(),
            self.issup.as_ref(),
            self.isuse.as_ref(),
        );
        self.s_rel = scores.s_rel;
        self.s_sup = scores.s_sup;
        self.s_use = scores.s_use;
        self.score = segment_score(self.p_lm, scores, weights, use_p_lm, self.passage.is_some());
        self.refresh_verdicts();
    }

    /// Recomputes [`Candidate::verdicts`] and [`Candidate::violates`] from the distributions.
    fn refresh_verdicts(&mut self) {
        self.verdicts = Verdicts {
            isrel: self.isrel.map(|d| d.verdict()),
            issup: self.issup.map(|d| d.verdict()),
            isuse: self.isuse.map(|d| d.verdict()),
        };
        self.violates = self.hard_constraint_verdicts().collect();
    }

    /// What the hard constraints drop it for: the model judged its passage irrelevant or it
    /// unsupported (step 6). A missing distribution is no verdict, so it does not drop.
    fn hard_constraint_verdicts(&self) -> impl Iterator<Item = HardConstraint> {
        let irrelevant = self.isrel.is_some_and(|d| d.is_irrelevant());
        let unsupported = self.issup.is_some_and(|d| d.is_unsupported());
        [
            (irrelevant, HardConstraint::Irrelevant),
            (unsupported, HardConstraint::Unsupported),
        ]
        .into_iter()
        .filter_map(|(holds, verdict)| holds.then_some(verdict))
    }

    /// Whether the hard constraints drop it (read by every replay step: no allocation).
    pub(crate) fn violates_hard_constraints(&self) -> bool {
        self.hard_constraint_verdicts().next().is_some()
    }
}

impl Answer {
    /// Recomputes what the core derives from each candidate's distributions, its verdicts and
    /// what the hard constraints hold against it, for a trace read back from disk: one saved by
    /// an older version lacks them, and the UI shows only what the core decided.
    pub fn refresh_verdicts(&mut self) {
        let segments = self.segments.iter_mut().flat_map(|s| &mut s.candidates);
        let expansions = self.expansions.iter_mut().flat_map(|e| &mut e.candidates);
        for candidate in segments.chain(expansions) {
            candidate.refresh_verdicts();
        }
    }
}

/// Indices the hard constraints keep (all of them when off, or when nothing would be left).
pub(crate) fn eligible(candidates: &[Candidate], hard_constraints: bool) -> Vec<usize> {
    let all = 0..candidates.len();
    if hard_constraints {
        let kept: Vec<usize> = all
            .clone()
            .filter(|&i| !candidates[i].violates_hard_constraints())
            .collect();
        if !kept.is_empty() {
            return kept;
        }
    }
    all.collect()
}

/// Indices the hard constraints leave out of the choice: the complement of [`eligible`].
pub(crate) fn excluded(candidates: &[Candidate], hard_constraints: bool) -> Vec<usize> {
    let kept = eligible(candidates, hard_constraints);
    (0..candidates.len())
        .filter(|i| !kept.contains(i))
        .collect()
}

/// The candidate with the highest f among the eligible ones; ties go to the lowest index.
pub(crate) fn choose(candidates: &[Candidate], hard_constraints: bool) -> usize {
    let mut best: Option<usize> = None;
    for i in eligible(candidates, hard_constraints) {
        // Strictly greater keeps the earlier (better retrieved) candidate on a tie.
        if best.is_none_or(|b| candidates[i].score > candidates[b].score) {
            best = Some(i);
        }
    }
    best.unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn verdicts_are_the_most_probable_token_and_ties_go_to_the_better_one() {
        let rel = |relevant, irrelevant| IsRelDistribution {
            relevant,
            irrelevant,
        };
        assert_eq!(rel(0.4, 0.6).verdict(), IsRelVerdict::Irrelevant);
        assert_eq!(rel(0.5, 0.5).verdict(), IsRelVerdict::Relevant);
        let sup = |fully, partially, no_support| IsSupDistribution {
            fully,
            partially,
            no_support,
        };
        assert_eq!(sup(0.2, 0.5, 0.3).verdict(), IsSupVerdict::Partially);
        assert_eq!(sup(0.4, 0.4, 0.2).verdict(), IsSupVerdict::Fully);
        assert_eq!(sup(0.1, 0.45, 0.45).verdict(), IsSupVerdict::Partially);
        assert_eq!(sup(0.1, 0.2, 0.7).verdict(), IsSupVerdict::NoSupport);
        let utility = |p: [f32; 5]| IsUseDistribution {
            u1: p[0],
            u2: p[1],
            u3: p[2],
            u4: p[3],
            u5: p[4],
        };
        assert_eq!(utility([0.1, 0.1, 0.6, 0.1, 0.1]).verdict(), 3);
        assert_eq!(utility([0.4, 0.0, 0.0, 0.0, 0.4]).verdict(), 5);
        // The hard constraints read the same verdicts.
        assert!(sup(0.1, 0.45, 0.45).verdict() != IsSupVerdict::NoSupport);
        assert!(!sup(0.3, 0.3, 0.3).is_unsupported());
    }

    #[test]
    fn a_trace_read_back_without_verdicts_gets_them_again() {
        let mut candidate = Candidate {
            passage: Some(0),
            text: "x".into(),
            raw: String::new(),
            p_lm: 0.5,
            isrel: Some(IsRelDistribution {
                relevant: 0.2,
                irrelevant: 0.8,
            }),
            issup: None,
            isuse: None,
            s_rel: 0.0,
            s_sup: 0.0,
            s_use: 0.0,
            score: 0.0,
            ends_answer: false,
            continued: false,
            evidence_issup: None,
            passages_dropped: 0,
            violates: Vec::new(),
            verdicts: Verdicts::default(),
        };
        candidate.refresh_verdicts();
        assert_eq!(candidate.verdicts.isrel, Some(IsRelVerdict::Irrelevant));
        assert_eq!(candidate.verdicts.issup, None);
        assert_eq!(candidate.violates, vec![HardConstraint::Irrelevant]);
    }

    #[test]
    fn s_rel_renormalises_within_the_group() {
        let d = IsRelDistribution {
            relevant: 0.6,
            irrelevant: 0.2,
        };
        assert!(close(d.s_rel(), 0.75));
    }

    #[test]
    fn s_sup_counts_partial_support_half() {
        // (0.3 + 0.5·0.2) / 0.6 = 2/3
        let d = IsSupDistribution {
            fully: 0.3,
            partially: 0.2,
            no_support: 0.1,
        };
        assert!(close(d.s_sup(), 0.4 / 0.6));
    }

    #[test]
    fn s_use_is_the_weighted_mean_utility() {
        // (-1·0.1 - 0.5·0.1 + 0 + 0.5·0.2 + 1·0.4) / 1.0 = 0.35
        let d = IsUseDistribution {
            u1: 0.1,
            u2: 0.1,
            u3: 0.2,
            u4: 0.2,
            u5: 0.4,
        };
        assert!(close(d.s_use(), 0.35));
    }

    #[test]
    fn zero_denominators_score_zero_not_nan() {
        let rel = IsRelDistribution {
            relevant: 0.0,
            irrelevant: 0.0,
        };
        let sup = IsSupDistribution {
            fully: 0.0,
            partially: 0.0,
            no_support: 0.0,
        };
        let usefulness = IsUseDistribution {
            u1: 0.0,
            u2: 0.0,
            u3: 0.0,
            u4: 0.0,
            u5: 0.0,
        };
        assert_eq!(rel.s_rel(), 0.0);
        assert_eq!(sup.s_sup(), 0.0);
        assert_eq!(usefulness.s_use(), 0.0);
        assert_eq!(
            CritiqueScores::from_distributions(None, None, None),
            CritiqueScores::default()
        );
    }

    #[test]
    fn f_drops_evidence_terms_without_retrieval() {
        let scores = CritiqueScores {
            s_rel: 0.5,
            s_sup: 0.25,
            s_use: 1.0,
        };
        let w = CritiqueWeights::default();
        assert!(close(
            segment_score(0.5, scores, w, true, true),
            0.5 + 0.5 + 0.25 + 0.5
        ));
        assert!(close(
            segment_score(0.5, scores, w, false, true),
            0.5 + 0.25 + 0.5
        ));
        assert!(close(segment_score(0.5, scores, w, true, false), 0.5 + 0.5));
    }
}
