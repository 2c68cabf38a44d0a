// The candidate inspector's words: each candidate's segment score f split into its terms, and
// one sentence on why the chosen candidate won. What the hard constraints decided comes from
// the trace (`Segment.excluded`, `Candidate.violates`); nothing here decides it again.

import type { Answer, Candidate, CritiqueWeights, HardConstraint, Segment } from "./ipc/types";
import { fixed2 } from "./format";

/** The terms of f = p_LM + w_rel·s_rel + w_sup·s_sup + w_use·s_use (p_LM only when it counts). */
export interface ScoreTerms {
  pLm: number | null;
  rel: number;
  sup: number;
  use: number;
}

export function scoreTerms(c: Candidate, weights: CritiqueWeights, usePLm: boolean): ScoreTerms {
  return {
    pLm: usePLm ? c.p_lm : null,
    rel: weights.rel * c.s_rel,
    sup: weights.sup * c.s_sup,
    use: weights.use * c.s_use,
  };
}

const VERDICT_NAMES: Record<HardConstraint, string> = {
  irrelevant: "passage judged irrelevant",
  unsupported: "judged unsupported",
};

/** Why the hard constraints hold `c` back, as the core recorded it, e.g. "judged unsupported". */
export function constraintReason(c: Candidate): string {
  return (c.violates ?? []).map((v) => VERDICT_NAMES[v]).join(", ");
}

/** Whether the core left candidate `i` of `segment` out of the choice (hard constraints). */
export function isExcluded(segment: Segment, i: number): boolean {
  return segment.excluded?.includes(i) ?? false;
}

const TERM_NAMES: Record<keyof ScoreTerms, string> = {
  pLm: "p_LM",
  rel: "w_rel·s_rel",
  sup: "w_sup·s_sup",
  use: "w_use·s_use",
};

/** Who a candidate was written from, e.g. "[2] Notes on retrieval". */
export function candidateSource(answer: Answer, c: Candidate): string {
  if (c.passage === null) return "no passage";
  const p = answer.passages[c.passage];
  return p ? `[${c.passage + 1}] ${p.title}` : `passage ${c.passage + 1}`;
}

/** One sentence: why `segment.chosen` won under the answer's weights and constraints. */
export function whyChosen(answer: Answer, segment: Segment): string {
  const { weights, use_p_lm } = answer.settings;
  const candidates = segment.candidates;
  const winner = candidates[segment.chosen];
  if (winner === undefined) return "No candidate was chosen.";
  if (candidates.length === 1) return "It was the only candidate.";
  const kept = candidates.map((_, i) => i).filter((i) => !isExcluded(segment, i));
  const dropped = candidates.length - kept.length;
  const reasons = [
    ...new Set(candidates.flatMap((c, i) => (isExcluded(segment, i) ? (c.violates ?? []) : []))),
  ];
  const droppedNote =
    dropped > 0
      ? ` The hard constraints dropped ${dropped} (${reasons.map((v) => VERDICT_NAMES[v]).join(" or ")}).`
      : "";
  const rivals = kept.filter((i) => i !== segment.chosen);
  if (rivals.length === 0) return `It was the only candidate left.${droppedNote}`;
  const runnerUp = rivals.reduce((b, i) => (candidates[i].score > candidates[b].score ? i : b));
  const rival = candidates[runnerUp];
  const margin = winner.score - rival.score;
  if (Math.abs(margin) < 5e-4) {
    return `It ties with the candidate from ${candidateSource(answer, rival)} at f ${fixed2(
      winner.score,
    )}; ties go to the better-retrieved passage.${droppedNote}`;
  }
  if (margin < 0) {
    // Long form chooses whole paths by beam search, so a segment's winner can score lower alone.
    return `The beam search chose it for the whole answer's score; alone, the candidate from ${candidateSource(
      answer,
      rival,
    )} scores ${(-margin).toFixed(3)} higher in f.${droppedNote}`;
  }
  const mine = scoreTerms(winner, weights, use_p_lm);
  const theirs = scoreTerms(rival, weights, use_p_lm);
  const diffs = (Object.keys(mine) as (keyof ScoreTerms)[])
    .filter((k) => mine[k] !== null && theirs[k] !== null)
    .map((k) => ({ k, d: (mine[k] as number) - (theirs[k] as number) }));
  const lead = diffs.reduce((b, x) => (x.d > b.d ? x : b), { k: "rel" as keyof ScoreTerms, d: 0 });
  const because = lead.d > 0 ? `, mostly from ${TERM_NAMES[lead.k]} (+${lead.d.toFixed(3)})` : "";
  return `It beats the candidate from ${candidateSource(answer, rival)} by ${margin.toFixed(
    3,
  )} in f${because}.${droppedNote}`;
}
