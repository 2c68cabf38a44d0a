import type { IpcErrorCode, JobSource } from "./ipc/types";

/** The codes the UI gives failures it finds itself, not reported by a command. */
export type UiErrorCode =
  "unknown" | "settings_reset" | "embedder_missing" | "busy" | `library_${JobSource}`;

/** Every code a failure shown to the user can have: the Rust side's (generated) and the UI's. */
export type AppErrorCode = IpcErrorCode | UiErrorCode;

/** A failure as the UI shows it: what kind, and a message that says what to do. */
export interface AppError {
  code: AppErrorCode;
  message: string;
}

/**
 * A short title for each code, shown above the message. A `Record` over the whole union: a code
 * added on the Rust side fails the type check here until it has a title.
 */
export const ERROR_TITLES: Record<AppErrorCode, string> = {
  model_missing: "Model missing",
  model_load: "Model could not be loaded",
  device: "Device unavailable",
  index: "Library error",
  cancelled: "Stopped",
  empty_question: "Empty question",
  selfrag: "Answer failed",
  generator_server: "Generator server",
  embedder_server: "Embedder server",
  unknown_answer: "Answer not found",
  write: "Not saved",
  read_trace: "Answer file unreadable",
  model_thread: "Model thread stopped",
  download_cancelled: "Download stopped",
  offline: "Offline",
  unknown_model: "Unknown model",
  download: "Download failed",
  path_not_granted: "Not allowed",
  not_in_library: "Not in the library",
  nothing_paused: "Nothing paused",
  references: "References not added",
  unknown_source: "Unknown citation",
  source_missing: "Source file missing",
  open_failed: "Could not open",
  not_confirmed: "Not confirmed",
  download_busy: "Already downloading",
  unknown: "Error",
  settings_reset: "Settings reset",
  embedder_missing: "Embedder missing",
  busy: "Busy",
  library_resume: "Indexing not resumed",
  library_watch: "Watched folders",
  library_zotero: "Zotero library not synced",
};

function isAppErrorCode(code: unknown): code is AppErrorCode {
  return typeof code === "string" && Object.hasOwn(ERROR_TITLES, code);
}

/**
 * The `{code, message}` of anything a call rejected with. The Rust side always sends an
 * IpcError; a plain string or an Error (a missing command, a broken channel) is wrapped, and a
 * code this build does not know becomes `unknown`.
 */
export function toAppError(error: unknown): AppError {
  if (typeof error === "object" && error !== null) {
    const { code, message } = error as Partial<Record<keyof AppError, unknown>>;
    if (typeof message === "string") {
      return { code: isAppErrorCode(code) ? code : "unknown", message };
    }
  }
  if (typeof error === "string") return { code: "unknown", message: error };
  return { code: "unknown", message: String(error) };
}
