// The sample documents in the real app: an empty library offers them, one click writes them
// into the data folder and indexes them as a job, and the pane lists the three of them (the
// tour of the badges among them), ready for a first question.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { launch, sleep, tempDir } from "./driver.mjs";

test("samples: an empty library offers the sample documents and indexes them in one click", async () => {
  const data = tempDir("data");
  const session = await launch({
    SELFRAG_DATA_DIR: data,
    SELFRAG_GENERATOR: process.env.SELFRAG_TEST_GENERATOR,
    SELFRAG_EMBEDDER: process.env.SELFRAG_TEST_EMBEDDER,
    HF_HOME: tempDir("hf"),
  });
  try {
    await session.waitFor('[data-testid="question-input"]');
    const offer = await session.waitFor('[data-testid="add-samples"]');
    // Enabled once the app knows the embedder is there.
    const deadline = Date.now() + 30000;
    while (await session.exec("return arguments[0].disabled;", session.ref(offer))) {
      assert.ok(Date.now() < deadline, "the samples button stayed disabled");
      await sleep(150);
    }
    await session.screenshot("samples-offered");
    await session.click(offer);

    const titles = async () =>
      session.exec(`return [...document.querySelectorAll('[data-testid="document-item"]')].map((el) => el.innerText);`);
    let listed = [];
    const until = Date.now() + 60000;
    while (Date.now() < until) {
      listed = await titles();
      if (listed.length === 3) break;
      await sleep(200);
    }
    assert.equal(listed.length, 3, JSON.stringify(listed));
    assert.ok(listed.some((t) => t.includes("Reading the badges")), JSON.stringify(listed));
    assert.ok(existsSync(join(data, "samples", "reading-the-badges.md")));
    assert.equal((await session.findAll('[data-testid="add-samples"]')).length, 0, "offered only while empty");
    assert.equal((await session.findAll('[data-testid="error-banner"]')).length, 0, "no error");
    await session.screenshot("samples-added");
  } finally {
    await session.close();
  }
});
