// A long file in the real app: dropped alone, it is listed with "x of n passages" while its
// first slices are already searchable; paused midway, it stays listed as partly indexed with
// what it has, and "Index the rest" finishes it without starting over.

import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { sleep, tempDir } from "./driver.mjs";
import { launchWithTestModels } from "./helpers.mjs";

/** Paragraphs of about 90 words: one passage each, thousands of them. */
const PARAGRAPHS = 6000;

function longText() {
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
  const parts = [];
  for (let p = 0; p < PARAGRAPHS; p++) {
    const words = [`Paragraph ${p}.`];
    for (let w = 0; w < 90; w++) words.push(`w${next() % 3000}`);
    parts.push(words.join(" "));
  }
  return parts.join("\n\n") + "\n";
}

/** The long file's row in the library list, read in one go (rows re-render), or null. */
function bookRow(session) {
  return session.exec(
    `const row = [...document.querySelectorAll('[data-testid="document-item"]')]
       .find((el) => el.innerText.includes("long-book.txt"));
     return row ? { text: row.innerText, state: row.getAttribute("data-state") } : null;`,
  );
}

async function waitForRow(session, predicate, timeout, what) {
  const deadline = Date.now() + timeout;
  let last = null;
  while (Date.now() < deadline) {
    last = await bookRow(session);
    if (last && predicate(last)) return last;
    await sleep(100);
  }
  throw new Error(`timed out after ${timeout} ms waiting for ${what}; row: ${JSON.stringify(last)}`);
}

test("a long file is listed as its slices become searchable, pauses partly indexed and is finished", async () => {
  const docs = tempDir("long-docs");
  const book = join(docs, "long-book.txt");
  writeFileSync(book, longText());
  const session = await launchWithTestModels();
  try {
    await session.waitFor('[data-testid="question-input"]');
    assert.equal(await session.dropFiles([book]), "ok");

    // Listed while it is written: its first passages are searchable, the rest being embedded.
    const working = await waitForRow(
      session,
      (r) => r.state === "working" && /\d+ of \d+ passages/.test(r.text),
      60000,
      "the long file listed while it is written",
    );
    const total = Number(/\d+ of (\d+) passages/.exec(working.text)[1]);
    console.log(`while writing: ${JSON.stringify(working)}`);
    assert.ok(total >= PARAGRAPHS / 2, working.text);
    const status = await session.text(await session.find('[data-testid="index-status"]'));
    assert.match(status, /of \d+ passages searchable/);

    // Paused midway: listed as partly indexed, with what it has and a way to finish it.
    await session.click(await session.find('[data-testid="pause-indexing"]'));
    const partial = await waitForRow(session, (r) => r.state === "partial", 60000, "Partly indexed");
    const stored = Number(/(\d+) of \d+ passages/.exec(partial.text)[1]);
    console.log(`paused: ${JSON.stringify(partial)}`);
    assert.ok(stored > 0 && stored < total, partial.text);
    assert.match(partial.text, /Partly indexed/);
    assert.match(partial.text, /its first passages are searchable/);
    const pausedStatus = await session.text(await session.find('[data-testid="index-status"]'));
    assert.match(pausedStatus, /long-book\.txt partly \(\d+ of \d+ passages\)$/);
    await session.movePointer(900, 700);
    await session.screenshot("library-partly-indexed");

    // Index the rest: the document is finished, only its rest embedded.
    await session.click(await session.find('[data-testid="finish-document"]'));
    const whole = await waitForRow(
      session,
      (r) => r.state === "indexed" && r.text.includes(`${total} passages`) && !r.text.includes(" of "),
      120000,
      "the long file indexed whole",
    );
    console.log(`finished: ${JSON.stringify(whole)}`);
    const done = await session.waitFor('[data-testid="index-status"]', {
      timeout: 30000,
      text: (t) => t.startsWith("Indexed 1 file"),
    });
    assert.match(await session.text(done), new RegExp(`^Indexed 1 file, ${total} passages`));
    assert.equal((await session.findAll('[data-testid="finish-document"]')).length, 0);
  } finally {
    await session.close();
  }
});
