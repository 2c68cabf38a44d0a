// The IPC payload types. They are generated from the Rust types (bindings.ts, checked by a
// Rust test so they cannot drift); this file adds only names the UI finds convenient.

export type * from "./bindings";
import type { IndexEvent } from "./bindings";

/** The event an indexing job ends with (also what `indexPaths` resolves to). */
export type IndexFinished = Extract<IndexEvent, { kind: "finished" }>;
