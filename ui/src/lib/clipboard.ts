// Puts text on the system clipboard from the webview: the asynchronous Clipboard API where the
// webview grants it, else a selected off-screen textarea and the "copy" command, which WebKitGTK
// and WebView2 both honour during a click. No plugin and no extra capability are needed.

/** Copies `text`; rejects with a message for people when neither way works. */
export async function copyText(text: string): Promise<void> {
  if (typeof navigator !== "undefined" && navigator.clipboard?.writeText) {
    try {
      await navigator.clipboard.writeText(text);
      return;
    } catch {
      // Denied (no permission or no user activation): fall back to the copy command.
    }
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.left = "-10000px";
  area.style.top = "0";
  const focused = document.activeElement as HTMLElement | null;
  document.body.appendChild(area);
  area.focus();
  area.select();
  let copied = false;
  try {
    copied = document.execCommand("copy");
  } finally {
    area.remove();
    focused?.focus();
  }
  if (!copied) throw new Error("The clipboard is not available here; use Export… instead.");
}
