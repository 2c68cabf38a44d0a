// The live status line of a running question, from the Progress events of selfrag-core.

import type { Progress, RetrieveMode } from "./ipc/types";
import { excerpt, fixed2, plural } from "./format";

/** What the status line knows between events. */
export interface RunStatus {
  /** The sentence shown. */
  line: string;
  /** Candidates finished in the current segment (they finish in any order). */
  finished: number;
  /** Whether the run writes several segments (then each line names its segment). */
  longForm: boolean;
}

export function startRun(longForm: boolean): RunStatus {
  return { line: "Starting…", finished: 0, longForm };
}

/** Why retrieval happened or not, e.g. "p = 0.83 > δ 0.20 → retrieving". */
export function retrieveReason(
  p: number,
  threshold: number,
  mode: RetrieveMode,
  retrieved: boolean,
): string {
  const outcome = retrieved ? "retrieving" : "answering without retrieval";
  switch (mode) {
    case "adaptive":
      return `p = ${fixed2(p)} ${p > threshold ? ">" : "≤"} δ ${fixed2(threshold)} → ${outcome}`;
    case "model":
      return `p = ${fixed2(p)}, model's choice → ${outcome}`;
    case "always":
      return `mode always (p = ${fixed2(p)}) → ${outcome}`;
    case "never":
      return `mode never (p = ${fixed2(p)}) → ${outcome}`;
  }
}

/** The status after one more event. */
export function nextStatus(status: RunStatus, event: Progress): RunStatus {
  const prefix = (segment: number) => (status.longForm ? `Segment ${segment + 1}: ` : "");
  switch (event.kind) {
    case "retrieve_decided":
      return {
        ...status,
        line: `Deciding whether to retrieve: ${retrieveReason(
          event.p_retrieve,
          event.threshold,
          event.mode,
          event.retrieved,
        )}`,
      };
    case "passages_retrieved":
      return {
        ...status,
        line: `${prefix(event.segment)}Retrieved ${plural(event.count, "passage")}`,
      };
    case "candidates_started":
      return {
        ...status,
        finished: 0,
        line: `${prefix(event.segment)}Writing candidates 0/${event.count}`,
      };
    case "candidate_finished": {
      const finished = Math.min(status.finished + 1, event.count);
      return {
        ...status,
        finished,
        line: `${prefix(event.segment)}Writing candidates ${finished}/${event.count}`,
      };
    }
    case "segment_chosen": {
      const cite = event.citation === null ? "" : ` [${event.citation}]`;
      return {
        ...status,
        line: `${prefix(event.segment)}Chose “${excerpt(event.text, 80)}”${cite}`,
      };
    }
  }
}
