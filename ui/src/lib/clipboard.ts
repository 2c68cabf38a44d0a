// Puts text on the system clipboard from the webview. WebKit (the Linux and macOS webviews)
// allows a copy only inside the click that asked for it, so the text must already be at hand:
// the caller renders it beforehand and calls this synchronously from the click handler. The
// "copy" command on a selected off-screen textarea is tried first (it runs before any await,
// inside the click); the asynchronous Clipboard API is the fallback. No plugin and no extra
// capability are needed.

/** Copies `text`; rejects with a message for people when neither way works. */
export async function copyText(text: string): Promise<void> {
  if (copyWithCommand(text)) return;
  if (typeof navigator !== "undefined" && navigator.clipboard?.writeText) {
    try {
      await navigator.clipboard.writeText(text);
      return;
    } catch {
      // Denied: no permission, or the click's activation is gone.
    }
  }
  throw new Error("The clipboard is not available here; use Export… instead.");
}

/** The "copy" command on a selected, focused, off-screen textarea; whether it copied. */
function copyWithCommand(text: string): boolean {
  if (typeof document === "undefined" || typeof document.execCommand !== "function") return false;
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
  try {
    return document.execCommand("copy");
  } catch {
    return false;
  } finally {
    area.remove();
    focused?.focus();
  }
}
