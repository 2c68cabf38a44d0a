// The colour theme: the system's (prefers-color-scheme) unless the user picks light or dark.
// `theme` is the one store to set (the settings code persists it); the choice is applied as a
// class on <html> that app.css reads.

import { writable } from "svelte/store";

import { DEFAULT_APP_SETTINGS } from "./ipc/bindings";
import type { Theme } from "./ipc/types";

/** The theme in force, the Rust default until the saved one loads. Set it to change the look. */
export const theme = writable<Theme>(DEFAULT_APP_SETTINGS.theme);

/** Puts `choice` on `root`: `theme-light` / `theme-dark`, or neither to follow the system. */
export function applyTheme(choice: Theme, root: HTMLElement): void {
  root.classList.toggle("theme-light", choice === "light");
  root.classList.toggle("theme-dark", choice === "dark");
}

if (typeof document !== "undefined") {
  theme.subscribe((choice) => applyTheme(choice, document.documentElement));
}
