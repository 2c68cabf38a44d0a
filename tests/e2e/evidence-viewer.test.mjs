// The evidence viewer, through a real drop and real answers: a two-column PDF printed from page
// 117 is cited from its second page, and the citation opens the viewer at that physical page,
// painted by pdf.js, with the passage marked on it (its text equal to the passage's), the
// printed number beside the PDF page in the preview, the panel and the viewer. A Markdown note
// cited next opens as text with the passage marked at its span.

import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./driver.mjs";
import { askQuestion, dropAndIndex, launchWithTestModels, setControl, twoColumnPdf } from "./helpers.mjs";

/** Letters and digits, folded as the viewer folds them to compare two readings of a text. */
const fold = (text) =>
  [...text.normalize("NFKC").toLowerCase()].filter((c) => /[\p{L}\p{N}]/u.test(c)).join("");

const PAGE_ONE = [
  ["Tidal records from the northern", "harbour were kept by hand for", "two hundred years."],
  ["Each ledger lists the height of", "the water at noon and at", "midnight."],
];
// The cited page: its one passage runs down the left column and on in the right one.
const PAGE_TWO = [
  ["Reflection tokens let Self-RAG", "critique its own output: after", "each segment the model writes"],
  ["whether the passage is relevant,", "whether it supports the segment,", "and how useful the answer is."],
];

test("a citation opens the source in the viewer at its page with the passage marked", async () => {
  const dir = tempDir("evidence");
  const pdf = join(dir, "article.pdf");
  writeFileSync(pdf, twoColumnPdf([PAGE_ONE, PAGE_TWO], 117), "latin1");
  const note = join(dir, "harbour.md");
  writeFileSync(
    note,
    "# Harbour notes\n\nThe lighthouse keeper logged fog on forty mornings.\n\nGulls nest on the breakwater each spring, said the harbour master.\n",
  );
  const session = await launchWithTestModels();
  try {
    await session.waitFor('[data-testid="question-input"]');
    await dropAndIndex(session, [pdf, note]);
    // The random-weight model's retrieve decision is arbitrary: always retrieve, one passage,
    // which the question's words pick out.
    await setControl(session, "mode-select", "always");
    await setControl(session, "k-input", 1);
    await askQuestion(session, "How does Self-RAG critique its output with reflection tokens?");
    await session.waitFor('[data-testid="answer"]', { timeout: 120000, text: (t) => t.includes("[1]") });

    const preview = await session.exec(
      `return document.getElementById(document.querySelector('[data-testid="citation-1"]').getAttribute("aria-describedby")).textContent;`,
    );
    assert.match(preview, /p\. 118 \(PDF page 2\)/, preview);
    await session.click(await session.find('[data-testid="citation-1"]'));
    const page = await session.waitFor('[data-testid="passage-page"]');
    assert.equal((await session.text(page)).trim(), "118 (PDF page 2)");
    const open = await session.text(await session.find('[data-testid="open-source"]'));
    assert.match(open, /Open in default app \(PDF page 2\)/, open);

    // The viewer: pdf.js painted physical page 2, the printed number shown, the passage marked.
    const status = await session.waitFor('[data-testid="mark-status"]', { timeout: 30000 });
    assert.equal(await session.exec(`return arguments[0].dataset.match;`, session.ref(status)), "exact");
    const shown = await session.find('[data-testid="pdf-page"]');
    assert.equal(await session.exec(`return arguments[0].dataset.page;`, session.ref(shown)), "2");
    assert.equal(
      (await session.text(await session.find('[data-testid="viewer-page"]'))).trim(),
      "p. 118 (PDF page 2 of 2)",
    );
    const passage = await session.exec(`return document.querySelector('[data-testid="passage-text"]').textContent;`);
    const marked = await session.exec(`return document.querySelector('[data-testid="marked-text"]').textContent;`);
    assert.ok(fold(passage).length > 50, passage);
    assert.equal(fold(marked), fold(passage), `marked: ${marked}\npassage: ${passage}`);
    // Both columns are in the passage, in reading order, and marked on the page.
    assert.ok(fold(passage).startsWith(fold("Reflection tokens")) && fold(passage).endsWith(fold("how useful the answer is")), passage);
    const marks = await session.exec(
      `return [...document.querySelectorAll('[data-testid="pdf-page"] mark.passage-mark')].map((m) => { const r = m.getBoundingClientRect(); return [Math.round(r.left), Math.round(r.top), Math.round(r.width)]; });`,
    );
    assert.equal(marks.length, 6, JSON.stringify(marks));
    assert.ok(marks[3][0] > marks[0][0] + 50, `the right column's marks lie right of the left's: ${JSON.stringify(marks)}`);
    assert.ok(marks.every(([, , width]) => width > 20), JSON.stringify(marks));
    // The canvas is painted: dark pixels where the text is.
    const ink = await session.exec(`
      const c = document.querySelector('[data-testid="pdf-page"] canvas');
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let dark = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i] < 100 && d[i + 3] > 0) dark++;
      return dark;`);
    assert.ok(ink > 200, `the page has ${ink} dark pixels`);
    // Scrolling to the passage moved the viewer only: the ask box is still in view.
    const askTop = await session.exec(`return document.querySelector('[data-testid="question-input"]').getBoundingClientRect().top;`);
    assert.ok(askTop >= 0 && askTop < 200, `the ask box moved to ${askTop}`);
    await session.movePointer(600, 780);
    await session.screenshot("evidence-viewer-pdf");

    // Page navigation and back.
    await session.click(await session.find('[aria-label="Previous page"]'));
    await session.waitFor('[data-testid="viewer-page"]', { text: (t) => t.includes("p. 117 (PDF page 1 of 2)") });
    await session.click(await session.waitFor('[data-testid="viewer-back"]'));
    await session.waitFor('[data-testid="mark-status"]', { timeout: 30000 });
    // Zoom in repaints at a larger size, the passage still marked.
    const width = () => session.exec(`return document.querySelector('[data-testid="pdf-page"] canvas').getBoundingClientRect().width;`);
    const fitWidth = await width();
    await session.click(await session.find('[aria-label="Zoom in"]'));
    await session.waitFor('[data-testid="viewer-zoom"]', { text: (t) => t.trim() === "125%" });
    await session.waitFor('[data-testid="mark-status"]', { timeout: 30000 });
    assert.ok((await width()) > fitWidth * 1.2, `zoomed ${await width()} from ${fitWidth}`);

    // A Markdown note: shown as text, the passage marked at its span.
    await session.click(await session.find('button[aria-label="Close evidence (Esc)"]'));
    await askQuestion(session, "Where do gulls nest according to the harbour master?");
    await session.waitFor("#answer-question", { timeout: 120000, text: (t) => t.includes("gulls") });
    await session.waitFor('[data-testid="answer"]', { timeout: 120000, text: (t) => t.includes("[1]") });
    await session.click(await session.find('[data-testid="citation-1"]'));
    const mark = await session.waitFor('[data-testid="text-mark"]', { timeout: 30000 });
    const notePassage = await session.exec(`return document.querySelector('[data-testid="passage-text"]').textContent;`);
    assert.equal((await session.text(mark)).trim(), notePassage.trim());
    assert.match(notePassage, /Gulls nest on the breakwater/);
    const whole = await session.exec(`return document.querySelector('[data-testid="text-source"]').textContent;`);
    assert.match(whole, /# Harbour notes/);
    await session.movePointer(100, 700);
    await session.movePointer(600, 780);
    await session.screenshot("evidence-viewer-text");
  } finally {
    await session.close();
  }
});
