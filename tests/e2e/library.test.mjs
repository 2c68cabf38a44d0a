// The library pane in the real app: a dropped folder is indexed with a progress line, paused
// and resumed where it stopped, and its documents listed with pages and passages, one is removed after its confirmation and the
// library stats follow; then, with "keep watching" ticked, a dropped folder becomes a watched
// folder, and a file the test writes into it afterwards appears in the pane by itself.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { launch, sleep, tempDir } from "./driver.mjs";

const NOTES = {
  "alpha.md": "# Alpha notes\n\nSelf-RAG decides when to retrieve passages with a reflection token.\n",
  "beta.md": "# Beta notes\n\nThe critic scores each candidate segment for relevance and support.\n",
  "gamma.txt": "Gamma notes. Beam search keeps the best segments by a weighted score.\n",
};
/** Enough more files that the job runs long enough to watch its progress bar. */
const BULK = 60;
const TOTAL = Object.keys(NOTES).length + BULK;

/** The texts of the library list's document rows, read in one go (rows re-render). */
function documentTexts(session) {
  return session.exec(
    `return [...document.querySelectorAll('[data-testid="document-item"]')].map((el) => el.innerText);`,
  );
}

async function waitForDocuments(session, predicate, timeout, what) {
  const deadline = Date.now() + timeout;
  let last = [];
  while (Date.now() < deadline) {
    last = await documentTexts(session);
    if (predicate(last)) return last;
    await sleep(150);
  }
  throw new Error(`timed out after ${timeout} ms waiting for ${what}; documents: ${JSON.stringify(last)}`);
}

test("library pane: drop a folder, progress, documents, remove; watch a folder and see a new file", async () => {
  const docs = tempDir("library-docs");
  for (const [name, text] of Object.entries(NOTES)) writeFileSync(join(docs, name), text);
  mkdirSync(join(docs, "bulk"));
  for (let i = 0; i < BULK; i++) {
    writeFileSync(join(docs, "bulk", `note-${String(i).padStart(2, "0")}.md`), `# Bulk note ${i}\n\nPassage number ${i} about retrieval and critique.\n`);
  }
  const session = await launch({
    SELFRAG_DATA_DIR: tempDir("data"),
    SELFRAG_GENERATOR: process.env.SELFRAG_TEST_GENERATOR,
    SELFRAG_EMBEDDER: process.env.SELFRAG_TEST_EMBEDDER,
    HF_HOME: tempDir("hf"),
  });
  try {
    await session.waitFor('[data-testid="question-input"]');

    // A folder through the drop code path: one job, its progress, then the documents.
    assert.equal(await session.dropFiles([docs]), "ok");
    // While it runs: files done of the total, the rate and the time left, and Stop.
    const running = await session.waitFor('[data-testid="index-status"]', {
      timeout: 30000,
      text: (t) => /files\/s, \d+ (s|min) left/.test(t),
    });
    const runningText = await session.text(running);
    const paceText = await session.text(await session.find('[data-testid="index-pace"]'));
    console.log(`while indexing: ${runningText} | ${paceText}`);
    assert.match(runningText, new RegExp(`^Indexing .+ \\(\\d+/${TOTAL}\\)…`));
    assert.match(paceText, new RegExp(`^\\d+ of ${TOTAL} files done$`));
    assert.ok(await session.find('[data-testid="index-progress"]'), "the progress bar is shown");
    assert.ok(await session.find('[data-testid="stop-indexing"]'), "Stop is offered");
    await session.movePointer(900, 700);
    await session.screenshot("library-progress");

    // Pause: the job ends at the next file, what it indexed is listed, and the rest waits.
    await session.click(await session.find('[data-testid="pause-indexing"]'));
    const paused = await session.waitFor('[data-testid="index-status"]', {
      timeout: 60000,
      text: (t) => t.startsWith("Paused after indexing"),
    });
    const pausedText = await session.text(paused);
    const done = Number(/^Paused after indexing (\d+) files?/.exec(pausedText)?.[1]);
    assert.ok(done > 0 && done < TOTAL, pausedText);
    const waiting = await session.text(await session.waitFor('[data-testid="paused-job"]'));
    console.log(`paused: ${pausedText} | ${waiting}`);
    assert.match(waiting, /^Paused: selfrag-library-docs\S*\. What was indexed is searchable\./);
    await waitForDocuments(session, (t) => t.length === done, 30000, `${done} documents`);
    await session.movePointer(900, 700);
    await session.screenshot("library-paused");

    // Resume: the rest is indexed, and the files done before are only checked.
    await session.click(await session.find('[data-testid="resume-indexing"]'));
    const status = await session.waitFor('[data-testid="index-status"]', {
      timeout: 120000,
      text: (t) => t.startsWith(`Indexed ${TOTAL - done} files`),
    });
    console.log(`job: ${await session.text(status)}`);
    assert.match(await session.text(status), new RegExp(`, ${done} skipped$`));
    assert.equal((await session.findAll('[data-testid="paused-job"]')).length, 0);
    const all = await waitForDocuments(session, (t) => t.length === TOTAL, 30000, `${TOTAL} documents`);
    const rows = all.filter((t) => !t.includes("Bulk note"));
    console.log(`rows: ${JSON.stringify(rows)}`);
    const alpha = rows.find((t) => t.includes("Alpha notes"));
    assert.ok(alpha, "the Markdown title is the row's title");
    assert.match(alpha, /alpha\.md/);
    assert.match(alpha, /1 page/);
    assert.match(alpha, /\d+ passages?/);
    assert.match(alpha, /Indexed/);
    const counts = await session.text(await session.find('[data-testid="library-counts"]'));
    assert.match(counts, new RegExp(`^${TOTAL} documents · \\d+ passages? · \\d+ pages? · .+ on disk$`), counts);
    await session.movePointer(900, 700);
    await session.screenshot("library-indexed");

    // Remove asks first; Keep keeps; Remove removes.
    const items = await session.findAll('[data-testid="document-item"]');
    let beta = null;
    for (const el of items) if ((await session.text(el)).includes("Beta notes")) beta = el;
    assert.ok(beta, "the beta row is listed");
    const remove = await session.cmd("POST", `/element/${beta}/element`, {
      using: "css selector",
      value: '[data-testid="remove-document"]',
    });
    await session.click(Object.values(remove)[0]);
    const confirm = await session.waitFor('[data-testid="confirm-remove"]');
    await session.screenshot("library-remove-confirm");
    await session.click(confirm);
    await waitForDocuments(
      session,
      (t) => t.length === TOTAL - 1 && !t.some((x) => x.includes("Beta notes")),
      15000,
      "beta removed",
    );
    await session.waitFor('[data-testid="library-counts"]', { text: (t) => t.startsWith(`${TOTAL - 1} documents`) });

    // Watching: tick "keep watching", drop a folder, then write a new file into it.
    const inbox = tempDir("library-inbox");
    writeFileSync(join(inbox, "first.md"), "# Inbox first\n\nA paper waiting to be read about adaptive retrieval.\n");
    await session.click(await session.find('[data-testid="keep-watching"]'));
    assert.equal(await session.dropFiles([inbox]), "ok");
    const watched = await session.waitFor('[data-testid="watched-folder"]', { timeout: 15000 });
    assert.equal(await session.exec("return arguments[0].title;", session.ref(watched)), inbox);
    await waitForDocuments(session, (t) => t.some((x) => x.includes("Inbox first")), 30000, "the watched folder's catch-up");

    const written = Date.now();
    writeFileSync(join(inbox, "second.md"), "# Inbox second\n\nWritten while the app was watching the folder.\n");
    await waitForDocuments(session, (t) => t.some((x) => x.includes("Inbox second")), 10000, "the new file within 10 s");
    const seconds = ((Date.now() - written) / 1000).toFixed(1);
    console.log(`a file written into the watched folder was listed after ${seconds} s`);
    await session.movePointer(900, 700);
    await session.screenshot("library-watching");

    // Stop watching: the folder leaves the list, its documents stay.
    await session.click(await session.find('[data-testid="unwatch-folder"]'));
    for (let i = 0; i < 50 && (await session.findAll('[data-testid="watched-folder"]')).length > 0; i++) await sleep(100);
    assert.equal((await session.findAll('[data-testid="watched-folder"]')).length, 0, "no folder is watched");
    assert.ok((await documentTexts(session)).some((x) => x.includes("Inbox second")), "its documents stay");
  } finally {
    await session.close();
  }
});
