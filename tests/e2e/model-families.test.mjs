// The model families people bring (issue 47, item 8), each answering in the real app: a
// random-weight GGUF in Llama-3's layout (byte-level BPE, `llama-bpe` split, 4 heads on 1 KV
// head), in Llama-3.1's (RoPE frequency factors) and in Mistral 7B v0.1's (grouped-query
// attention 8:2), written by `selfrag-fixtures` beside the Llama-2 test model. Each one indexes a
// note, answers with a citation and its reflection badges, and saves a trace naming its file.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { tempDir } from "./driver.mjs";
import { askQuestion, dropAndIndex, launchWithTestModels, setControl, writeDocs } from "./helpers.mjs";

const FAMILIES = ["tiny-selfrag-llama3.gguf", "tiny-selfrag-llama31.gguf", "tiny-selfrag-mistral.gguf"];

for (const file of FAMILIES) {
  test(`${file} answers with a citation and its reflection tokens`, async () => {
    const model = join(dirname(process.env.SELFRAG_TEST_GENERATOR), file);
    const data = tempDir("data");
    const session = await launchWithTestModels({ SELFRAG_GENERATOR: model, SELFRAG_DATA_DIR: data });
    try {
      await session.waitFor('[data-testid="question-input"]');
      const [note] = writeDocs({
        "quokka.md": "# Quokkas\n\nThe quokka is a small marsupial that lives on Rottnest Island near Perth.\n",
      });
      await dropAndIndex(session, [note]);
      // The random-weight model's retrieve decision is arbitrary: always retrieve.
      await setControl(session, "mode-select", "always");
      await askQuestion(session, "Where do quokkas live? Café, naïve, 東京 ✓");
      await session.waitFor('[data-testid="answer"]', { timeout: 120000, text: (t) => t.includes("[1]") });
      for (const badge of ["badge-retrieve", "badge-isrel", "badge-issup", "badge-isuse"]) {
        const el = await session.find(`[data-testid="${badge}"]`);
        assert.ok((await session.text(el)).trim().length > 0, `${badge} has text`);
      }
      const saved = readdirSync(join(data, "history")).filter((f) => f.endsWith(".json"));
      assert.equal(saved.length, 1, saved.join(", "));
      const trace = JSON.parse(readFileSync(join(data, "history", saved[0]), "utf8"));
      const generator = (trace.answer ?? trace).generator;
      assert.equal(generator?.model, file, JSON.stringify(generator));
      // The dummy-prefix setting is SentencePiece's `▁`: a BPE model's record has none.
      if (file === "tiny-selfrag-llama3.gguf") assert.equal(generator.dummy_prefix, undefined, JSON.stringify(generator));
      else assert.ok(generator.dummy_prefix, JSON.stringify(generator));
    } finally {
      await session.close();
    }
  });
}
