// A PDF whose printed page numbers differ from its pages' places in the file (here an article
// printed from page 117): indexed through a real drop, cited by a real answer, and shown in the
// citation's preview and the evidence panel as "117 (PDF page 1)".

import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./driver.mjs";
import { askQuestion, dropAndIndex, launchWithTestModels, setControl } from "./helpers.mjs";

/** A one-page PDF of `text` in Helvetica whose page label is `start` (decimal), with a correct xref. */
function labelledPdf(text, start) {
  const content = `BT /F1 12 Tf 72 720 Td (${text}) Tj ET`;
  const objects = [
    `<< /Type /Catalog /Pages 2 0 R /PageLabels << /Nums [0 << /S /D /St ${start} >>] >> >>`,
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    `<< /Length ${content.length} >>\nstream\n${content}\nendstream`,
  ];
  let out = "%PDF-1.4\n";
  const offsets = [];
  objects.forEach((object, i) => {
    offsets.push(out.length);
    out += `${i + 1} 0 obj\n${object}\nendobj\n`;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) out += `${String(offset).padStart(10, "0")} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return out;
}

test("a printed page number is shown beside the PDF page in the preview and the evidence panel", async () => {
  const file = join(tempDir("labelled"), "article.pdf");
  writeFileSync(file, labelledPdf("Reflection tokens let Self-RAG critique its own output.", 117), "latin1");
  const session = await launchWithTestModels();
  try {
    await session.waitFor('[data-testid="question-input"]');
    await dropAndIndex(session, [file]);
    // The random-weight model's retrieve decision is arbitrary: always retrieve.
    await setControl(session, "mode-select", "always");
    await askQuestion(session, "How does Self-RAG critique itself?");
    await session.waitFor('[data-testid="answer"]', { timeout: 120000, text: (t) => t.includes("[1]") });

    const preview = await session.exec(
      `return document.getElementById(document.querySelector('[data-testid="citation-1"]').getAttribute("aria-describedby")).textContent;`,
    );
    assert.match(preview, /p\. 117 \(PDF page 1\)/, preview);
    await session.click(await session.find('[data-testid="citation-1"]'));
    const page = await session.waitFor('[data-testid="passage-page"]');
    assert.equal((await session.text(page)).trim(), "117 (PDF page 1)");
    const open = await session.text(await session.find('[data-testid="open-source"]'));
    assert.match(open, /Open source \(PDF page 1\)/, open);
    await session.movePointer(600, 700);
    await session.screenshot("evidence-printed-page");
  } finally {
    await session.close();
  }
});
