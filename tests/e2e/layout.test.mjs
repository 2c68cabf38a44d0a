// Layout in the real webview: nothing on screen moves while an answer streams in, and the app is
// still usable at 200% zoom (Ctrl+= five times, Tauri's zoom hotkeys), with no sideways
// scrolling and every control of the question within reach.

import { test } from "node:test";
import assert from "node:assert/strict";
import { askQuestion, dropAndIndex, launchWithTestModels, prepareLongAnswer, writeDocs } from "./helpers.mjs";

/** The page records where the fixed parts of the window are at every change of the stream. */
const RECORD_POSITIONS = `
  window.__moves = [];
  const place = (id) => {
    const el = document.querySelector('[data-testid="' + id + '"]');
    if (!el) return null;
    const r = el.getBoundingClientRect();
    return [Math.round(r.left), Math.round(r.top), Math.round(r.width), Math.round(r.height)].join(",");
  };
  const fixed = ["question-input", "ask-button", "mode-select", "k-input", "library"];
  const start = Object.fromEntries(fixed.map((id) => [id, place(id)]));
  let draftTop = null;
  const obs = new MutationObserver(() => {
    for (const id of fixed) {
      const now = place(id);
      if (now !== start[id]) window.__moves.push(id + ": " + start[id] + " -> " + now);
    }
    const draft = document.querySelector('[data-testid="answer-draft"]');
    if (draft) {
      const top = Math.round(draft.getBoundingClientRect().top);
      if (draftTop !== null && top !== draftTop) window.__moves.push("answer-draft top: " + draftTop + " -> " + top);
      draftTop = top;
    }
  });
  obs.observe(document.body, { childList: true, characterData: true, subtree: true, attributes: true });
  window.__stopRecording = () => obs.disconnect();
`;

test("nothing moves while the answer streams", async () => {
  const session = await launchWithTestModels();
  try {
    await session.waitFor('[data-testid="question-input"]');
    await prepareLongAnswer(session);
    await session.movePointer(5, 5);

    await session.exec(RECORD_POSITIONS);
    // Every text the status line shows, recorded by the page itself: the tiny model can write
    // all its candidates between two polls of the driver.
    await session.exec(
      `const line = document.querySelector('[data-testid="status-line"]');
       window.__statusSeen = [];
       new MutationObserver(() => window.__statusSeen.push(line.textContent))
         .observe(line, { childList: true, characterData: true, subtree: true });`,
    );
    await askQuestion(session, "How does the critic judge the passages?");
    // The screenshot of candidates being written, steps on screen, when a poll sees that step.
    const line = await session.waitFor('[data-testid="status-line"]', {
      timeout: 120000,
      text: (t) => /Writing candidates|Answered in/.test(t),
    });
    if (/Writing candidates/.test(await session.text(line))) await session.screenshot("streaming");
    await session.waitFor('[data-testid="answer"]', { timeout: 180000 });
    const moves = await session.exec("window.__stopRecording(); return window.__moves;");
    const seen = await session.exec("return window.__statusSeen;");
    assert.ok(
      seen.some((t) => /Writing candidates/.test(t)),
      `the answer streamed, its steps on screen: ${JSON.stringify(seen)}`,
    );
    assert.deepEqual(moves, [], "the question, the controls, the library and the top of the answer stay where they are");
  } finally {
    await session.close();
  }
});

test("usable at 200% zoom", async () => {
  const session = await launchWithTestModels();
  try {
    await session.waitFor('[data-testid="question-input"]');
    const before = await session.exec("return window.innerWidth;");
    // Tauri's zoom hotkeys: 20% a step, as a person pressing Ctrl+= would.
    for (let i = 0; i < 5; i++) {
      await session.exec(
        `window.dispatchEvent(new KeyboardEvent("keydown", { key: "=", code: "Equal", ctrlKey: true, bubbles: true }));`,
      );
    }
    let after = before;
    for (let i = 0; i < 50 && after > before * 0.55; i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await session.exec("return window.innerWidth;");
    }
    assert.ok(Math.abs(after - before / 2) <= 2, `the page is at 200%: ${before} CSS px wide before, ${after} after`);

    await dropAndIndex(session, writeDocs({ "zoom.md": "# Zoomed\n\nText that must stay readable at twice the size.\n" }));
    const layout = await session.exec(
      `const box = (id) => document.querySelector('[data-testid="' + id + '"]').getBoundingClientRect();
       const doc = document.scrollingElement;
       return {
         sideways: doc.scrollWidth - doc.clientWidth,
         width: window.innerWidth,
         input: box("question-input").right,
         ask: box("ask-button").right,
         library: box("library").right,
       };`,
    );
    assert.ok(layout.sideways <= 1, `no sideways scrolling at 200%: ${JSON.stringify(layout)}`);
    for (const part of ["input", "ask", "library"]) {
      assert.ok(layout[part] <= layout.width + 1, `${part} fits the width at 200%: ${JSON.stringify(layout)}`);
    }
    await session.movePointer(5, 5);
    await session.screenshot("zoom-200");
  } finally {
    await session.close();
  }
});
