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
  /** A step that has lasted (the engine says so after 20 s): which, in words, and how long. */
  slow: { path: string | null; step: string; seconds: number } | null;
  /** Of the file being indexed, when it is long: passages searchable so far, of how many. */
  currentSearchable: { passages: number; of: number } | null;
  /** The long file a stopped or paused job was cut off inside, with what it has. */
  cutOff: { path: string; passages: number; of: number } | null;
  indexed: number;
  passages: number;
  skipped: FileProblem[];
  failed: FileProblem[];
  /** Indexed files with something worth knowing, e.g. a page without a text layer. */
  notes: FileProblem[];
  /** Documents removed because their files are gone. */
  removed: number;
  /** Files per second so far and seconds left at that rate (null before the first file). */
  rate: number;
  etaSeconds: number | null;
  /** Folders of an interrupted job that this one finishes. */
  resumed: string[];
  cancelled: boolean;
  /** Stopped to be resumed later (`cancelled` is set too). */
  paused: boolean;
}

export function startJob(): IndexJob {
  return {
    running: true,
    total: 0,
    done: 0,
    current: null,
    slow: null,
    currentSearchable: null,
    cutOff: null,
    indexed: 0,
    passages: 0,
    skipped: [],
    failed: [],
    notes: [],
    removed: 0,
    rate: 0,
    etaSeconds: null,
    resumed: [],
    cancelled: false,
    paused: false,
  };
}

export function nextJob(job: IndexJob, event: IndexEvent): IndexJob {
  // Any news from the job but the notice itself means the step that lasted is over.
  if (event.kind !== "slowStep" && job.slow) job = { ...job, slow: null };
  switch (event.kind) {
    case "started":
      return { ...job, total: event.total, resumed: event.resumed };
    case "fileStarted":
      return { ...job, current: event.path, currentSearchable: null };
    case "fileSearchable":
      return { ...job, currentSearchable: { passages: event.passages, of: event.of } };
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
    case "removed":
      return { ...job, removed: job.removed + 1 };
    case "slowStep":
      return { ...job, slow: { path: event.path, step: event.step, seconds: event.seconds } };
    case "watchRetrying":
      return job;
    case "worksLookedUp":
      // The files are indexed; a look-up that failed is worth knowing, as a note on its file.
      return {
        ...job,
        notes: [...job.notes, ...event.failed.map((f) => ({ path: f.path, reason: f.error }))],
      };
    case "progress":
      return {
        ...job,
        done: event.done,
        total: event.total,
        rate: event.filesPerSecond,
        etaSeconds: event.etaSeconds,
      };
    case "finished":
      return {
        ...job,
        running: false,
        current: null,
        currentSearchable: null,
        // The end may be told twice (the stream's last event, then the job's result).
        cutOff:
          event.cancelled && job.current && job.currentSearchable
            ? { path: job.current, ...job.currentSearchable }
            : job.cutOff,
        cancelled: event.cancelled,
        paused: event.paused,
      };
  }
}

/** "12 s left" / "3 min left" / "1 h 5 min left"; empty until a rate is known. */
export function etaText(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds)) return "";
  if (seconds < 60) return `${Math.max(1, Math.round(seconds))} s left`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min left`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min left`;
}

/** "Indexing notes.md (2/5)…" while running, "Indexed 1 file, 3 passages" when done. */
export function jobSummary(job: IndexJob): string {
  if (job.running) {
    const where = job.total > 0 ? ` (${Math.min(job.done + 1, job.total)}/${job.total})` : "";
    const eta = etaText(job.etaSeconds);
    const pace = job.rate > 0 ? ` · ${job.rate.toFixed(1)} files/s${eta ? `, ${eta}` : ""}` : "";
    const part = job.currentSearchable;
    const searchable = part
      ? ` · ${part.passages} of ${plural(part.of, "passage")} searchable`
      : "";
    if (job.slow) {
      const { path, step, seconds } = job.slow;
      const what = path ? `${fileName(path)}${where}: ` : "";
      return `Indexing ${what}still ${step} after ${seconds} s. Stop ends the job; what is indexed stays.`;
    }
    return job.current
      ? `Indexing ${fileName(job.current)}${where}…${searchable}${pace}`
      : "Indexing…";
  }
  const parts = [
    `${job.paused ? "Paused after indexing" : job.cancelled ? "Stopped after indexing" : "Indexed"} ${plural(job.indexed, "file")}, ${plural(job.passages, "passage")}`,
  ];
  if (job.cutOff) {
    const { path, passages, of } = job.cutOff;
    parts.push(`${fileName(path)} partly (${passages} of ${plural(of, "passage")})`);
  }
  if (job.removed > 0) parts.push(`${job.removed} removed (files gone)`);
  if (job.skipped.length > 0) parts.push(`${job.skipped.length} skipped`);
  if (job.failed.length > 0) parts.push(`${job.failed.length} failed`);
  return parts.join(", ");
}
