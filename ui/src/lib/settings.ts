import { DEFAULT_SETTINGS } from "./ipc/bindings";
import type { Settings } from "./ipc/types";

/**
 * The paper's defaults: a fresh copy of `Settings::default()` of selfrag-core, generated into
 * the bindings (so they are stated once, in Rust).
 */
export function defaultSettings(): Settings {
  return structuredClone(DEFAULT_SETTINGS);
}
