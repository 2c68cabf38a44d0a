// The embedder on a lab's server, in the real app: a real llama-server (built by `cargo xtask
// test`) serves the tiny test BERT converted to GGUF with --embedding. The app indexes a note
// with its own embedder, then the Embedder setting tests the server and chooses it for the next
// start (each after a native confirmation); started again, the app embeds on the server: the
// library made here keeps its vectors (same model, by its fingerprint), a note indexed now is
// found, and the answer says where its question was embedded.

import { test } from "node:test";
import assert from "node:assert/strict";
import { answerMessageDialog, tempDir } from "./driver.mjs";
import {
  askQuestion,
  dropAndIndex,
  launchWithTestModels,
  setControl,
  startLlamaServer,
  writeDocs,
} from "./helpers.mjs";

/** llama-server embedding with the test BERT converted to GGUF. */
function startEmbeddingServer() {
  return startLlamaServer(`${process.env.SELFRAG_TEST_EMBEDDER}.gguf`, [
    "--embedding", "--pooling", "mean", "-c", "512", "-b", "512", "-ub", "512", "-np", "1",
  ]);
}

test("the embedder setting chooses an embeddings server for the next start, and the app embeds there", async () => {
  const { server, url } = await startEmbeddingServer();
  const env = { SELFRAG_DATA_DIR: tempDir("embedder-data"), SELFRAG_CONFIG_DIR: tempDir("embedder-config") };
  try {
    let session = await launchWithTestModels(env);
    try {
      await session.waitFor('[data-testid="question-input"]');
      const [harbour] = writeDocs({
        "harbour.md": "# Harbour\n\nThe harbour authority keeps ledgers of the tides since eighteen ninety.\n",
      });
      await dropAndIndex(session, [harbour]);

      await session.click(await session.find('[data-testid="embedder-menu"] summary'));
      await session.waitFor('[data-testid="embedder-in-use"]', { text: (t) => t.includes("this computer") });
      await session.click(await session.find('[data-testid="embedder-server"]'));
      await session.type(await session.waitFor('[data-testid="embedder-url"]'), url);
      await session.click(await session.find('[data-testid="embedder-test"]'));
      await answerMessageDialog("Test an embedder server");
      const report = await session.waitFor('[data-testid="embedder-result"]', {
        timeout: 30000,
        text: (t) => t.includes("dimensions"),
      });
      const reportText = await session.text(report);
      assert.ok(reportText.includes(`${url}/v1`) && reportText.includes("32 dimensions"), reportText);
      await session.click(await session.find('[data-testid="embedder-use"]'));
      await answerMessageDialog("Use an embedder server");
      await session.waitFor('[data-testid="embedder-result"]', {
        timeout: 30000,
        text: (t) => t.includes("starts next"),
      });
      await session.waitFor('[data-testid="embedder-restart"]');
      await session.movePointer(600, 780);
      await session.screenshot("embedder-server-chosen");
    } finally {
      await session.close();
    }

    // Started again (as Restart now does): the server embeds; the local model is never loaded.
    session = await launchWithTestModels(env);
    try {
      await session.waitFor('[data-testid="question-input"]');
      await session.waitFor('[data-testid="embedder-in-use"]', { text: (t) => t.includes("127.0.0.1") });
      const [marsh] = writeDocs({
        "marsh.md": "# Marsh\n\nSediment cores show that the salt marsh grew two millimetres a year.\n",
      });
      // Both listed: the note indexed with this computer's embedder is kept.
      await dropAndIndex(session, [marsh], 2);
      await setControl(session, "mode-select", "always");
      await setControl(session, "k-input", 1);
      await askQuestion(session, "How fast did the salt marsh grow?");
      await session.waitFor('[data-testid="answer"]', { timeout: 120000, text: (t) => t.includes("[1]") });
      const line = await session.text(await session.waitFor('[data-testid="answer-generator"]'));
      assert.ok(line.includes(`embedder on the server ${url}/v1`), `provenance: ${line}`);
      await session.click(await session.find('[data-testid="citation-1"]'));
      const cited = await session.waitFor('[data-testid="passage-text"]');
      assert.match(await session.text(cited), /salt marsh/);
      await session.movePointer(600, 780);
      await session.screenshot("embedder-server-answer");
    } finally {
      await session.close();
    }
  } finally {
    server.kill();
  }
});
