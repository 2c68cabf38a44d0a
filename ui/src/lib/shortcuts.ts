// The app-wide keyboard shortcuts: Ctrl (⌘ on macOS) plus a letter.

/** Whether the platform's command key is ⌘ rather than Ctrl, for the labels. */
export const onMac =
  typeof navigator !== "undefined" && /Mac|iPhone|iPad/.test(navigator.userAgent);

/** How the command key is written in hints: "⌘" or "Ctrl+". */
export const modKey = onMac ? "⌘" : "Ctrl+";

/**
 * Whether `event` is Ctrl+`letter` or ⌘+`letter` (no Alt, no Shift). Ctrl and ⌘ are both
 * accepted everywhere so a Mac keyboard on Linux or a PC keyboard on a Mac work alike.
 */
export function isCommand(event: KeyboardEvent, letter: string): boolean {
  if (!(event.ctrlKey || event.metaKey) || event.altKey || event.shiftKey || event.isComposing) {
    return false;
  }
  const key = event.key.toLowerCase();
  // Layouts without Latin letters report another character; then the physical key decides.
  if (/^[a-z]$/.test(key)) return key === letter;
  return event.code === `Key${letter.toUpperCase()}`;
}
