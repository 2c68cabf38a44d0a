import type { IpcError } from "./ipc/types";

/**
 * The `{code, message}` of anything a call rejected with. The Rust side always sends an
 * IpcError; a plain string or an Error (a missing command, a broken channel) is wrapped.
 */
export function toIpcError(error: unknown): IpcError {
  if (typeof error === "object" && error !== null) {
    const { code, message } = error as Partial<Record<keyof IpcError, unknown>>;
    if (typeof message === "string") {
      return { code: typeof code === "string" ? code : "unknown", message };
    }
  }
  if (typeof error === "string") return { code: "unknown", message: error };
  return { code: "unknown", message: String(error) };
}
