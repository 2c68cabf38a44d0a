// With no models on disk and no network, the app starts, names the missing models, says where
// it looked (the Hugging Face cache) and what to do. No crash, no hang.

import { test } from "node:test";
import assert from "node:assert/strict";
import { launch, sleep, tempDir } from "./driver.mjs";

test("without models the app explains what is missing, where it looked and what to do", async () => {
  const hfHome = tempDir("empty-hf");
  const session = await launch({
    SELFRAG_DATA_DIR: tempDir("data"),
    HF_HOME: hfHome,
    HF_HUB_CACHE: "",
    SELFRAG_GENERATOR: "",
    SELFRAG_EMBEDDER: "",
  });
  try {
    const screen = await session.waitFor('[data-testid="missing-models"]');
    const first = await session.text(screen);
    assert.match(first, /Self-RAG/i, "names the generator");
    assert.match(first, /contriever/i, "names the embedder");
    assert.match(first, /Download \(4\.08 GB\)/, "offers the download");
    // What a newcomer must not need: the command lines and the paths, folded until asked for.
    assert.ok(!first.includes(hfHome), `the searched paths are folded: ${first}`);
    await session.screenshot("missing-models");
    for (const summary of await session.findAll('[data-testid="other-ways"] summary')) {
      await session.click(summary);
    }
    const text = await session.text(screen);
    assert.ok(text.includes(hfHome), `says where it looked (${hfHome}): ${text}`);
    assert.match(text, /selfrag models pull|huggingface-cli|hf download/i, "says what else to do");
    // Said once: the library's reads that need the missing embedder add no banner of their own.
    await session.waitFor('[data-testid="embedder-missing"]');
    await sleep(1000);
    assert.equal((await session.findAll('[data-testid="error-banner"]')).length, 0, "no banner repeats it");
    await session.screenshot("missing-models-other-ways");
  } finally {
    await session.close();
  }
});
