// The indexing progress line of the library pane, from the IndexEvents of one job.

import type { IndexEvent } from "./ipc/types";
import { fileName, plural } from "./format";

export interface FileProblem {
  path: string;
  /** Why the file was skipped or failed, as the engine said it. */
  reason: string;
}

export interface IndexJob {
  running: boolean;
  total: number;
  /** Files done so far, whatever the outcome. */
  done: number;
  current: string | null;
  indexed: number;
  passages: number;
  skipped: FileProblem[];
  failed: FileProblem[];
  /** Indexed files with something worth knowing, e.g. a page without a text layer. */
  notes: FileProblem[];
}

export function startJob(): IndexJob {
  return {
    running: true,
    total: 0,
    done: 0,
    current: null,
    indexed: 0,
    passages: 0,
    skipped: [],
    failed: [],
    notes: [],
  };
}

export function nextJob(job: IndexJob, event: IndexEvent): IndexJob {
  switch (event.kind) {
    case "started":
      return { ...job, total: event.total };
    case "fileStarted":
      return { ...job, current: event.path };
    case "fileIndexed":
      return {
        ...job,
        done: job.done + 1,
        indexed: job.indexed + 1,
        passages: job.passages + event.passages,
        notes: [...job.notes, ...event.notes.map((reason) => ({ path: event.path, reason }))],
      };
    case "fileSkipped":
      return {
        ...job,
        done: job.done + 1,
        skipped: [...job.skipped, { path: event.path, reason: event.reason }],
      };
    case "fileFailed":
      return {
        ...job,
        done: job.done + 1,
        failed: [...job.failed, { path: event.path, reason: event.error }],
      };
    case "finished":
      return { ...job, running: false, current: null };
  }
}

/** "Indexing notes.md (2/5)…" while running, "Indexed 1 file, 3 passages" when done. */
export function jobSummary(job: IndexJob): string {
  if (job.running) {
    const where = job.total > 0 ? ` (${Math.min(job.done + 1, job.total)}/${job.total})` : "";
    return job.current ? `Indexing ${fileName(job.current)}${where}…` : "Indexing…";
  }
  const parts = [`Indexed ${plural(job.indexed, "file")}, ${plural(job.passages, "passage")}`];
  if (job.skipped.length > 0) parts.push(`${job.skipped.length} skipped`);
  if (job.failed.length > 0) parts.push(`${job.failed.length} failed`);
  return parts.join(", ");
}
