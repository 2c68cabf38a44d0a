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
    const text = await session.text(screen);
    assert.match(text, /Self-RAG/i, "names the generator");
    assert.match(text, /contriever/i, "names the embedder");
    assert.ok(text.includes(hfHome), `says where it looked (${hfHome}): ${text}`);
    assert.match(text, /download|selfrag models pull|huggingface-cli|hf download/i, "says what to do");
    // Said once: the library's reads that need the missing embedder add no banner of their own.
    await session.waitFor('[data-testid="embedder-missing"]');
    await sleep(1000);
    assert.equal((await session.findAll('[data-testid="error-banner"]')).length, 0, "no banner repeats it");
    await session.screenshot("missing-models");
  } finally {
    await session.close();
  }
});
