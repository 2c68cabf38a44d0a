// Document text, titles and file names are shown as text, never run as HTML: a document whose
// name, title and body carry <img onerror> and <script> payloads is indexed, cited and opened
// in the evidence panel, the characters are on screen, and no payload ran in the real webview.

import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./driver.mjs";
import { askQuestion, dropAndIndex, launchWithTestModels, setControl } from "./helpers.mjs";

const IMG = (n) => `<img src=x onerror=window.__pwned=${n}>`;
const SCRIPT = (n) => `<script>window.__pwned=${n}</script>`;

test("hostile document text, title and file name are shown and never run", async () => {
  const dir = tempDir("docs");
  const file = join(dir, `${IMG(1)}${SCRIPT(2).replace("/", "")}.md`);
  writeFileSync(
    file,
    `# Title ${IMG(3)} ${SCRIPT(4)}\n\nSelf-RAG critiques its output ${IMG(5)} and ${SCRIPT(6)} with reflection tokens.\n`,
  );
  const session = await launchWithTestModels();
  try {
    await session.waitFor('[data-testid="question-input"]');
    await dropAndIndex(session, [file]);
    const library = await session.text(await session.find('[data-testid="library-list"]'));
    assert.ok(library.includes(IMG(3)), `the title is shown as text: ${library}`);

    await setControl(session, "mode-select", "always");
    await askQuestion(session, `How does Self-RAG critique ${IMG(7)} itself?`);
    await session.waitFor('[data-testid="answer"]', { timeout: 120000, text: (t) => t.includes("[1]") });
    await session.click(await session.find('[data-testid="citation-1"]'));
    const panel = await session.waitFor('[data-testid="passage-panel"]');
    const shown = await session.text(panel);
    assert.ok(shown.includes(IMG(3)), "the panel shows the title's markup as text");
    assert.ok(shown.includes(SCRIPT(6)), "the panel shows the body's <script> as text");
    assert.ok(shown.includes("onerror=window.__pwned=1"), "the panel shows the file name as text");
    const question = await session.text(await session.find("#answer-question"));
    assert.ok(question.includes(IMG(7)), "the question is shown as text");

    // Hover the citation so its preview renders the passage too, then look for any effect.
    await session.movePointer(5, 5);
    const verdict = await session.exec(
      `return {
         pwned: typeof window.__pwned,
         imgs: document.querySelectorAll("img").length,
         scripts: [...document.querySelectorAll("script")].filter((s) => !s.src).length,
       };`,
    );
    assert.deepEqual(verdict, { pwned: "undefined", imgs: 0, scripts: 0 });
    await session.screenshot("hostile-document");
  } finally {
    await session.close();
  }
});
