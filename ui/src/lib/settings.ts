import { DEFAULT_APP_SETTINGS } from "./ipc/bindings";
import type { Settings } from "./ipc/types";

/**
 * The paper's defaults: a fresh copy of `Settings::default()` of selfrag-core (the `ask` of the
 * generated `DEFAULT_APP_SETTINGS`), so they are stated once, in Rust.
 */
export function defaultSettings(): Settings {
  return structuredClone(DEFAULT_APP_SETTINGS.ask);
}
