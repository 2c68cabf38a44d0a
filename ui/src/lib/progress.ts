// The live status line of a running question, from the Progress events of selfrag-core.

import type { Progress, RetrieveMode } from "./ipc/types";
import { excerpt, fixed2, plural } from "./format";

/** The steps of one Self-RAG segment, in order, as the progress strip shows them. */
export type RunStage = "decide" | "retrieve" | "write" | "choose";

export const RUN_STAGES: readonly { stage: RunStage; label: string }[] = [
  { stage: "decide", label: "Retrieve?" },
  { stage: "retrieve", label: "Passages" },
  { stage: "write", label: "Candidates" },
  { stage: "choose", label: "Critique & choose" },
];

/** What the status line knows between events. */
export interface RunStatus {
  /** The step under way. */
  stage: RunStage;
  /** Candidates being written in the current segment (0 before any). */
  total: number;
  /** The sentence shown. */
  line: string;
  /** Candidates finished in the current segment (they finish in any order). */
  finished: number;
  /** Whether the run writes several segments (then each line names its segment). */
  longForm: boolean;
}

export function startRun(longForm: boolean): RunStatus {
  return { line: "Starting…", stage: "decide", total: 0, finished: 0, longForm };
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
        stage: event.retrieved ? "retrieve" : "write",
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
        stage: "write",
        line: `${prefix(event.segment)}Retrieved ${plural(event.count, "passage")}`,
      };
    case "candidates_started":
      return {
        ...status,
        stage: "write",
        finished: 0,
        total: event.count,
        line: `${prefix(event.segment)}Writing candidates 0/${event.count}`,
      };
    case "candidate_finished": {
      const finished = Math.min(status.finished + 1, event.count);
      const all = finished === event.count;
      return {
        ...status,
        finished,
        total: event.count,
        stage: all ? "choose" : "write",
        line: all
          ? `${prefix(event.segment)}Critiquing: choosing among ${plural(event.count, "candidate")} by f`
          : `${prefix(event.segment)}Writing candidates ${finished}/${event.count}`,
      };
    }
    case "segment_chosen": {
      const cite = event.citation === null ? "" : ` [${event.citation}]`;
      return {
        ...status,
        stage: "decide",
        line: `${prefix(event.segment)}Chose “${excerpt(event.text, 80)}”${cite}`,
      };
    }
  }
}
