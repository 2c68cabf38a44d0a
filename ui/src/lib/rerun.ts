// What re-running a question with other retrieval settings would change, worked out from the
// answer's trace (its retrieve probabilities and candidates) before spending a model call.

import type { Answer, RetrieveMode, Settings } from "./ipc/types";
import { fixed2 } from "./format";

/**
 * Whether step 1 retrieves with probability `p` under `mode` and threshold `delta`: the core's
 * rule (`RetrieveMode::retrieves`, pinned by tests/golden/retrieve-rule.json). `argmax` is
 * whether [Retrieval] was the most probable token over the whole vocabulary, read only in model
 * mode; without it, model mode's decision is unknown (null) until the model runs again.
 */
export function wouldRetrieve(
  p: number,
  mode: RetrieveMode,
  delta: number,
  argmax?: boolean | null,
): boolean | null {
  switch (mode) {
    case "adaptive":
      return p > delta;
    case "always":
      return true;
    case "never":
      return false;
    case "model":
      return argmax ?? null;
  }
}

/** The settings a re-run depends on that weights cannot change, as they differ. */
export function changedRunSettings(asked: Settings, now: Settings): string[] {
  const changed: string[] = [];
  if (asked.mode !== now.mode) changed.push(`mode ${asked.mode} → ${now.mode}`);
  if (now.mode === "adaptive" && asked.threshold !== now.threshold) {
    changed.push(`δ ${fixed2(asked.threshold)} → ${fixed2(now.threshold)}`);
  }
  if (asked.k !== now.k) changed.push(`K ${asked.k} → ${now.k}`);
  if (asked.long_form !== now.long_form) {
    changed.push(now.long_form ? "short → long answer" : "long → short answer");
  }
  if (now.long_form && asked.long_form && asked.beam_width !== now.beam_width) {
    changed.push(`beam ${asked.beam_width} → ${now.beam_width}`);
  }
  if (asked.p_lm_tokens !== now.p_lm_tokens) {
    changed.push(`p_LM over ${asked.p_lm_tokens} → ${now.p_lm_tokens} tokens`);
  }
  if (now.long_form && asked.long_form_ranking !== now.long_form_ranking) {
    changed.push(`long-answer ranking ${asked.long_form_ranking} → ${now.long_form_ranking}`);
  }
  if (asked.prompt_budget !== now.prompt_budget) {
    changed.push(`prompt budget ${asked.prompt_budget} → ${now.prompt_budget}`);
  }
  return changed;
}

/**
 * What a re-run of `answer` under `now` would change, one sentence each; empty when the
 * settings a re-run depends on are the ones the answer was asked with.
 */
export function rerunEffects(answer: Answer, now: Settings): string[] {
  const asked = answer.settings;
  if (changedRunSettings(asked, now).length === 0) return [];
  const effects: string[] = [];
  const p = answer.retrieve.p_retrieve;
  const before = answer.retrieve.retrieved;
  const after = wouldRetrieve(p, now.mode, now.threshold, answer.retrieve.retrieval_is_argmax);
  const rule =
    now.mode === "adaptive"
      ? `p = ${fixed2(p)} ${p > now.threshold ? ">" : "≤"} δ ${fixed2(now.threshold)}`
      : `mode ${now.mode}, p = ${fixed2(p)}`;
  if (after === null) {
    effects.push(
      `Model mode retrieves when [Retrieval] is the model's most likely next token; this answer, asked in ${asked.mode} mode, did not read that, so only the re-run can tell.`,
    );
  } else if (before === after) {
    effects.push(`The first retrieve decision stays the same (${rule}).`);
  } else if (after) {
    effects.push(`It would retrieve this time (${rule}) and cite passages.`);
  } else {
    effects.push(`It would answer without retrieval (${rule}): no passages, no citations.`);
  }

  if (asked.long_form || now.long_form) {
    const later = answer.segments.slice(1).filter((s) => s.retrieve !== null);
    const flips = later.filter(
      (s) =>
        s.retrieve !== null &&
        wouldRetrieve(
          s.retrieve.p_retrieve,
          now.mode,
          now.threshold,
          s.retrieve.retrieval_is_argmax,
        ) === !s.retrieve.retrieved,
    ).length;
    if (flips > 0) effects.push(`${flips} later segment decisions would go the other way.`);
  }

  if (after) {
    const first = answer.segments[0];
    const written = before && first ? first.candidates.length : 0;
    if (!before) {
      effects.push(`It would read up to ${now.k} passages and write one candidate per passage.`);
    } else if (now.k < written && first) {
      const kept = first.candidates.slice(0, now.k);
      const best = kept.reduce((b, c, i) => (c.score > kept[b].score ? i : b), 0);
      effects.push(
        first.chosen >= now.k
          ? `Only the ${now.k} best-retrieved passages would be read: the current winner (passage rank ${first.chosen + 1}) would not be written, and candidate ${best + 1} would lead.`
          : `Only the ${now.k} best-retrieved passages would be read; the current winner is among them.`,
      );
    } else if (now.k > asked.k) {
      effects.push(
        written < asked.k
          ? `The library returned only ${written} passages for K ${asked.k}, so a larger K reads no more.`
          : `Up to ${now.k - asked.k} more passages would be read, each a new candidate that could win.`,
      );
    }
  }
  if (asked.long_form !== now.long_form) {
    effects.push(
      now.long_form
        ? `It would write up to ${now.max_segments} segments by beam search (beam ${now.beam_width}).`
        : "It would write one segment.",
    );
  } else if (now.long_form && asked.beam_width !== now.beam_width) {
    effects.push(
      `Beam search would keep ${now.beam_width} paths instead of ${asked.beam_width}; later segments could differ.`,
    );
  }
  if (answer.closed_set && now.long_form) {
    effects.push(
      "Its answer options would be left out: a long answer is asked as an open question, not as multiple choice.",
    );
  }
  if (asked.p_lm_tokens !== now.p_lm_tokens) {
    effects.push(
      now.p_lm_tokens === "all"
        ? "p_LM would count every generated token, reflection tokens included, so every f changes."
        : "p_LM would count the text tokens only, so every f changes.",
    );
  }
  if (now.long_form && asked.long_form && asked.long_form_ranking !== now.long_form_ranking) {
    effects.push(
      now.long_form_ranking === "normalised"
        ? "Paths would be compared like with like (each segment against what its kind can score); a different path could win."
        : "Paths would be compared by raw f, which favours segments with passages; a different path could win.",
    );
  }
  if (asked.prompt_budget !== now.prompt_budget && (asked.long_form || now.long_form)) {
    effects.push(
      `Prompts would be held to ${now.prompt_budget} tokens (with the answer), so long answers carry ${now.prompt_budget < asked.prompt_budget ? "fewer" : "more"} earlier passages.`,
    );
  }
  return effects;
}
