// A broken file dropped onto the window: the app names the file and the reason, indexes the
// good file dropped with it, and keeps working.

import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./driver.mjs";
import { dropAndIndex, launchWithTestModels } from "./helpers.mjs";

/** A PDF cut off after its first object: header, no xref table, no trailer. */
const TRUNCATED_PDF = "%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Cou";

test("a truncated PDF is reported with its reason; the good file is indexed", async () => {
  const dir = tempDir("docs");
  const broken = join(dir, "truncated-report.pdf");
  writeFileSync(broken, Buffer.from(TRUNCATED_PDF, "latin1"));
  const good = join(dir, "good-notes.md");
  writeFileSync(good, "# Good notes\n\nThis file is fine and is indexed next to the broken one.\n");
  const session = await launchWithTestModels();
  try {
    await session.waitFor('[data-testid="question-input"]');
    await dropAndIndex(session, [broken, good], 1);
    const problems = await session.waitFor('[data-testid="index-problems"]', {
      text: (t) => t.includes("truncated-report.pdf"),
    });
    const text = await session.text(problems);
    console.log(`reported: ${text}`);
    assert.match(text, /truncated-report\.pdf/);
    assert.ok(text.replace(/.*truncated-report\.pdf\s*:?/s, "").trim().length > 5, "a reason is given");
    const status = await session.text(await session.find('[data-testid="index-status"]'));
    assert.match(status, /1 failed|failed/i, `status: ${status}`);
    const docs = await session.text(await session.find('[data-testid="library-list"]'));
    assert.match(docs, /Good notes/);
    assert.doesNotMatch(docs, /truncated-report/);
    await session.movePointer(900, 700);
    await session.screenshot("broken-file");
  } finally {
    await session.close();
  }
});
