// The supporting span of a passage, as the evidence panel highlights it. Self-RAG's IsSup token
// judges a whole segment against a whole passage and points at no span, so the span here is an
// estimate made in the UI: the passage sentences that share the most content words with the
// segments citing the passage. The panel says so in its tooltip.

/** A run of passage text, highlighted or not; the pieces concatenate to the passage text. */
export interface PassagePiece {
  text: string;
  highlight: boolean;
}

export interface SupportSpan {
  pieces: PassagePiece[];
  /** The content words the highlighted sentences share with the segments, in passage order. */
  shared: string[];
}

/** Words too common to count as evidence of support. */
const STOPWORDS = new Set(
  (
    "the a an and or but of to in on at by for with from as is are was were be been being it its " +
    "this that these those which who whom what when where why how not no can could will would " +
    "shall should may might must do does did has have had there their they them then than so " +
    "such into onto over under about also only very more most some any each other its our we you"
  ).split(" "),
);

/** Lower-case content words of `text` (letters and digits, at least three characters). */
export function contentWords(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter(
    (w) => w.length >= 3 && !STOPWORDS.has(w),
  );
}

/**
 * `text` cut into sentences (ending at . ! ? or a line break), each keeping its trailing
 * whitespace, so that joining them gives `text` back exactly.
 */
export function sentences(text: string): string[] {
  return text.match(/[^.!?\n]*(?:[.!?]+|\n+|$)\s*/g)?.filter((s) => s.length > 0) ?? [];
}

/** The sentences of `passage` with the highest content-word overlap with `segments`. */
export function supportSpan(passage: string, segments: string[]): SupportSpan {
  const wanted = new Set(segments.flatMap(contentWords));
  const parts = sentences(passage);
  const overlap = parts.map((s) => new Set(contentWords(s).filter((w) => wanted.has(w))));
  const best = Math.max(0, ...overlap.map((o) => o.size));
  const shared: string[] = [];
  const pieces = parts.map((text, i) => {
    const highlight = best > 0 && overlap[i].size === best;
    if (highlight) for (const w of overlap[i]) if (!shared.includes(w)) shared.push(w);
    return { text, highlight };
  });
  return { pieces, shared };
}
