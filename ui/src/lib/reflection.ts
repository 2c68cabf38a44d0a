// Labels for the reflection tokens of one candidate: what the badges and the candidate list say.
// The verdicts themselves are the core's (`Candidate.verdicts`); this module only words them.

import type {
  Answer,
  Candidate,
  CritiqueWeights,
  IsRelDistribution,
  IsSupDistribution,
  IsUseDistribution,
  IsSupVerdict,
} from "./ipc/types";
import { fixed2, fixed3 } from "./format";
import { retrieveReason } from "./progress";

/** How a badge looks: its tone selects the colour, always together with an icon and text. */
export type Tone = "good" | "partial" | "bad" | "neutral";

export interface Badge {
  /** The reflection token family, e.g. "IsSup". */
  name: string;
  icon: string;
  /** The short verdict, e.g. "Fully supported". */
  label: string;
  /** The score that enters f, e.g. "s_sup 0.95"; empty when there is none. */
  score: string;
  tone: Tone;
  /** Every token probability, one per line, three decimals. */
  distribution: string;
  /** The same probabilities as numbers, for the tooltip's bars; empty when none. */
  rows: DistributionRow[];
  /** A sentence under the bars, e.g. why retrieval happened; empty when none. */
  note: string;
}

/** One reflection token and its probability. */
export interface DistributionRow {
  token: string;
  p: number;
}

/** The token probabilities of `dist` in their order, or none. */
export function distributionRows(dist: object | null): DistributionRow[] {
  if (dist === null) return [];
  return Object.entries(dist as Record<string, number>).map(([token, p]) => ({ token, p }));
}

/** "[Relevant] 0.920\n[Irrelevant] 0.080". */
export function describeDistribution(dist: object | null): string {
  if (dist === null) return "The model emitted no token here.";
  return Object.entries(dist as Record<string, number>)
    .map(([token, p]) => `${token} ${fixed3(p)}`)
    .join("\n");
}

/** The badge of a critique group the model emitted no token of. */
function unjudged(name: string): Badge {
  const none = describeDistribution(null);
  return {
    name,
    icon: "–",
    label: "—",
    score: "",
    tone: "neutral",
    distribution: none,
    rows: [],
    note: none,
  };
}

export function retrieveBadge(answer: Answer): Badge {
  const { p_retrieve, retrieved, found_nothing } = answer.retrieve;
  const { threshold, mode } = answer.settings;
  const label = retrieved
    ? "Retrieved"
    : found_nothing
      ? "Chose to retrieve, found nothing"
      : "No retrieval";
  const why =
    mode === "adaptive"
      ? `p ${fixed2(p_retrieve)} ${p_retrieve > threshold ? ">" : "≤"} δ ${fixed2(threshold)}`
      : `p ${fixed2(p_retrieve)}, mode ${mode}`;
  return {
    name: "Retrieve",
    icon: retrieved ? "⤓" : "∅",
    label: `${label} (${why})`,
    score: "",
    tone: "neutral",
    distribution: [
      `[Retrieval] ${fixed3(p_retrieve)}`,
      `[No Retrieval] ${fixed3(1 - p_retrieve)}`,
      retrieveReason(p_retrieve, threshold, mode, retrieved),
    ].join("\n"),
    rows: [
      { token: "[Retrieval]", p: p_retrieve },
      { token: "[No Retrieval]", p: 1 - p_retrieve },
    ],
    note: found_nothing
      ? `${retrieveReason(p_retrieve, threshold, mode, true)}; the library returned no passage, so the answer was written without one`
      : retrieveReason(p_retrieve, threshold, mode, retrieved),
  };
}

export function isRelBadge(c: Candidate): Badge {
  const dist: IsRelDistribution | null = c.isrel;
  const verdict = c.verdicts.isrel;
  if (dist === null || verdict === null) {
    return unjudged("IsRel");
  }
  const relevant = verdict === "relevant";
  return {
    name: "IsRel",
    icon: relevant ? "✓" : "✗",
    label: relevant ? "Relevant" : "Irrelevant",
    score: `s_rel ${fixed2(c.s_rel)}`,
    tone: relevant ? "good" : "bad",
    distribution: describeDistribution(dist),
    rows: distributionRows(dist),
    note: "",
  };
}

const SUPPORT: Record<IsSupVerdict, { label: string; icon: string; tone: Tone }> = {
  fully: { label: "Fully supported", icon: "✓", tone: "good" },
  partially: { label: "Partially supported", icon: "◐", tone: "partial" },
  no_support: { label: "Not supported", icon: "✗", tone: "bad" },
};

export function isSupBadge(c: Candidate): Badge {
  const dist: IsSupDistribution | null = c.issup;
  if (dist === null || c.verdicts.issup === null) {
    return unjudged("IsSup");
  }
  const verdict = SUPPORT[c.verdicts.issup];
  return {
    name: "IsSup",
    icon: verdict.icon,
    label: verdict.label,
    score: `s_sup ${fixed2(c.s_sup)}`,
    tone: verdict.tone,
    distribution: describeDistribution(dist),
    rows: distributionRows(dist),
    note: "",
  };
}

export function isUseBadge(c: Candidate): Badge {
  const dist: IsUseDistribution | null = c.isuse;
  const utility = c.verdicts.isuse;
  if (dist === null || utility === null) {
    return unjudged("IsUse");
  }
  return {
    name: "IsUse",
    icon: "★",
    label: `Utility ${utility}`,
    score: `s_use ${fixed2(c.s_use)}`,
    tone: utility >= 4 ? "good" : utility >= 3 ? "partial" : "bad",
    distribution: describeDistribution(dist),
    rows: distributionRows(dist),
    note: "",
  };
}

/** "p_LM 0.62 + 1.00·0.92 + 1.00·0.95 + 0.50·0.75 = 2.87" (p_LM only when it counts). */
export function scoreBreakdown(c: Candidate, weights: CritiqueWeights, usePLm: boolean): string {
  const terms = [
    ...(usePLm ? [`p_LM ${fixed2(c.p_lm)}`] : []),
    `${fixed2(weights.rel)}·s_rel ${fixed2(c.s_rel)}`,
    `${fixed2(weights.sup)}·s_sup ${fixed2(c.s_sup)}`,
    `${fixed2(weights.use)}·s_use ${fixed2(c.s_use)}`,
  ];
  return `${terms.join(" + ")} = ${fixed2(c.score)}`;
}
