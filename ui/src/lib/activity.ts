// What the library pane knows about each file from the IndexEvents it has seen: queued (asked
// for by the user, not started), working (parsing and embedding: the engine reports both as one
// step; a long file's first slices are searchable meanwhile), indexed, skipped (with the
// engine's reason) or failed (with its error). Files the events never named have no entry; a
// document without one is simply in the library, whole or, when a job was cut off inside it,
// partly.

import type { DocumentInfo, IndexEvent, LibraryStats } from "./ipc/types";
import { formatBytes } from "./downloads";
import { fileName, plural } from "./format";

export type FileState = "queued" | "working" | "indexed" | "partial" | "skipped" | "failed";

export interface FileActivity {
  state: FileState;
  /** Why it was skipped or failed, or the notes of an indexed file; null when nothing to say. */
  reason: string | null;
  /** Passages made, once indexed; searchable so far while a long file is written. */
  passages: number | null;
  /** While a long file is written slice by slice: the passages it will have. */
  passagesExpected: number | null;
}

/** By path, as the engine names the file. */
export type Activity = Record<string, FileActivity>;

function entry(
  state: FileState,
  reason: string | null = null,
  passages: number | null = null,
  passagesExpected: number | null = null,
): FileActivity {
  return { state, reason, passages, passagesExpected };
}

/** Marks `paths` as waiting for the job the user just started (e.g. a re-index). */
export function queue(activity: Activity, paths: string[]): Activity {
  const next = { ...activity };
  for (const path of paths) next[path] = entry("queued");
  return next;
}

export function nextActivity(activity: Activity, event: IndexEvent): Activity {
  switch (event.kind) {
    case "started": {
      // A new job: what earlier jobs said is history; what was queued for this one stays.
      const next: Activity = {};
      for (const [path, a] of Object.entries(activity)) {
        if (a.state === "queued") next[path] = a;
      }
      return next;
    }
    case "fileStarted":
      return { ...activity, [event.path]: entry("working") };
    case "fileSearchable":
      return { ...activity, [event.path]: entry("working", null, event.passages, event.of) };
    case "fileIndexed":
      return {
        ...activity,
        [event.path]: entry(
          "indexed",
          event.notes.length > 0 ? event.notes.join("; ") : null,
          event.passages,
        ),
      };
    case "fileSkipped":
      return { ...activity, [event.path]: entry("skipped", event.reason) };
    case "fileFailed":
      return { ...activity, [event.path]: entry("failed", event.error) };
    case "removed": {
      const next = { ...activity };
      delete next[event.path];
      return next;
    }
    case "progress":
    case "watchRetrying":
    case "slowStep":
    case "worksLookedUp":
      return activity;
    case "finished": {
      // Stopped before their turn: no longer waiting.
      const next: Activity = {};
      for (const [path, a] of Object.entries(activity)) {
        if (a.state !== "queued" && a.state !== "working") next[path] = a;
      }
      return next;
    }
  }
}

/** One line of the library list: a document, or a file of the running job not listed yet. */
export interface LibraryRow {
  path: string;
  title: string;
  fileName: string;
  /** Null for a file not in the library yet. */
  document: DocumentInfo | null;
  state: FileState;
  reason: string | null;
  pages: number | null;
  passages: number | null;
  /** Set while only `passages` of this many are stored (written now, or cut off midway). */
  passagesExpected: number | null;
}

/** What a document row says when a job was cut off inside it. */
export const PARTIAL_REASON =
  "Indexing stopped inside this file: its first passages are searchable. Index the rest to finish it.";

const PENDING_ORDER: FileState[] = ["working", "queued", "indexed"];

/**
 * The library list: files of the running job that are not documents yet (working first, then
 * queued, then just indexed), then the documents with what the events said about them.
 * Failed and skipped files are not documents; the pane lists them apart with their reasons.
 */
export function libraryRows(documents: DocumentInfo[], activity: Activity): LibraryRow[] {
  const listed = new Set(documents.map((d) => d.path));
  const pending: LibraryRow[] = Object.entries(activity)
    .filter(([path, a]) => !listed.has(path) && PENDING_ORDER.includes(a.state))
    .sort(
      ([pa, a], [pb, b]) =>
        PENDING_ORDER.indexOf(a.state) - PENDING_ORDER.indexOf(b.state) || pa.localeCompare(pb),
    )
    .map(([path, a]) => ({
      path,
      title: fileName(path),
      fileName: fileName(path),
      document: null,
      state: a.state,
      reason: a.reason,
      pages: null,
      passages: a.passages,
      passagesExpected: a.passagesExpected,
    }));
  const docs: LibraryRow[] = documents.map((d) => {
    const a = activity[d.path];
    const whole = d.passagesExpected === null ? "indexed" : "partial";
    // A skipped document is one the library already had.
    const state = a && a.state !== "skipped" ? a.state : whole;
    const said = a?.state === "skipped" ? null : (a?.reason ?? null);
    return {
      path: d.path,
      title: d.title,
      fileName: fileName(d.path),
      document: d,
      state,
      reason: said ?? (state === "partial" ? PARTIAL_REASON : null),
      pages: d.pages > 0 ? d.pages : null,
      ...passageCounts(d, a),
    };
  });
  return [...pending, ...docs];
}

/** A document's passage counts: the events' where they run ahead of the list (which is read
 * again shortly after them), else the list's. */
function passageCounts(
  d: DocumentInfo,
  a: FileActivity | undefined,
): Pick<LibraryRow, "passages" | "passagesExpected"> {
  if (a?.state === "indexed" && a.passages !== null) {
    return { passages: a.passages, passagesExpected: null };
  }
  if (a?.state === "working" && a.passages !== null) {
    return { passages: a.passages, passagesExpected: a.passagesExpected };
  }
  return { passages: d.passages, passagesExpected: d.passagesExpected };
}

/** The status word of a row, as read out and shown beside its icon. */
export function stateLabel(state: FileState): string {
  switch (state) {
    case "queued":
      return "Queued";
    case "working":
      return "Parsing and embedding";
    case "indexed":
      return "Indexed";
    case "partial":
      return "Partly indexed";
    case "skipped":
      return "Skipped";
    case "failed":
      return "Error";
  }
}

/** "12 documents · 340 passages · 55 pages · 4.2 MB on disk". */
export function statsText(stats: LibraryStats): string {
  return [
    plural(stats.documents, "document"),
    plural(stats.passages, "passage"),
    plural(stats.pages, "page"),
    `${formatBytes(stats.diskBytes)} on disk`,
  ].join(" · ");
}

/**
 * What other computers changed in a shared library since it opened here: "2 documents added by
 * other computers", "1 added, 3 removed by other computers"; null when nothing.
 */
export function elsewhereText(added: number, removed: number): string | null {
  if (added === 0 && removed === 0) return null;
  if (removed === 0) return `${plural(added, "document")} added by other computers`;
  if (added === 0) return `${plural(removed, "document")} removed by other computers`;
  return `${added} added, ${removed} removed by other computers`;
}

/** "3 of 10 files" for the progress bar's label. */
export function progressLabel(done: number, total: number): string {
  return `${done} of ${plural(total, "file")}`;
}
