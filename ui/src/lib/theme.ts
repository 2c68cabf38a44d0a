// The colour theme: the system's (prefers-color-scheme) unless the user picks light or dark.
// `theme` is the one store to set (the settings code persists it); the choice is applied as a
// class on <html> that app.css reads.

import { writable } from "svelte/store";

export type ThemeChoice = "system" | "light" | "dark";

export const THEME_CHOICES: readonly ThemeChoice[] = ["system", "light", "dark"];

/** The theme in force. Set it to change the look at once. */
export const theme = writable<ThemeChoice>("system");

/** Puts `choice` on `root`: `theme-light` / `theme-dark`, or neither to follow the system. */
export function applyTheme(choice: ThemeChoice, root: HTMLElement): void {
  root.classList.toggle("theme-light", choice === "light");
  root.classList.toggle("theme-dark", choice === "dark");
}

if (typeof document !== "undefined") {
  theme.subscribe((choice) => applyTheme(choice, document.documentElement));
}
