// The app answering through a real llama.cpp server: llama-server (built by `cargo xtask test`)
// serves the same tiny GGUF. The app is pointed at its own API with SELFRAG_GENERATOR_URL, and
// through the Generator setting at its OpenAI-compatible one (`/v1`, the API vLLM serves), with
// the model named; each answer says where it was written. That the server's trace equals the local one is held by
// crates/selfrag-remote/tests/llama_server.rs and the CLI's tests.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { answerMessageDialog, sleep } from "./driver.mjs";
import {
  askQuestion,
  dropAndIndex,
  launchWithTestModels,
  setControl,
  startLlamaServer,
  writeDocs,
} from "./helpers.mjs";

/** llama-server on the test GGUF, as the Rust tests start it. */
function startGeneratorServer() {
  return startLlamaServer(process.env.SELFRAG_TEST_GENERATOR, [
    "-c", "1024", "-np", "2", "-ctk", "f32", "-ctv", "f32", "-fa", "off",
  ]);
}

test("the app answers through a llama.cpp server and says so", async () => {
  const { server, url } = await startGeneratorServer();
  const session = await launchWithTestModels({ SELFRAG_GENERATOR_URL: url });
  try {
    await session.waitFor('[data-testid="question-input"]');
    const [file] = writeDocs({
      "server-notes.md": "# Server notes\n\nA llama.cpp server runs the model on a GPU for every laptop in the lab.\n",
    });
    await dropAndIndex(session, [file]);
    await setControl(session, "mode-select", "always");
    await askQuestion(session, "Where does the model run?");
    await session.waitFor('[data-testid="answer"]', { timeout: 120000 });
    const line = await session.waitFor('[data-testid="answer-generator"]');
    const text = await session.text(line);
    assert.ok(text.includes(url) && text.includes("llama.cpp"), `generator line: ${text}`);
    // A server's tokens do not tell reading the passages from writing: one step.
    const times = await session.text(await session.find('[data-testid="answer-timings"]'));
    assert.match(times, /^Where the time went: deciding .+ · searching .+ · writing .+ · critique .+$/, times);
    await session.movePointer(600, 700);
    await session.screenshot("answer-from-server");
  } finally {
    await session.close();
    server.kill();
  }
});

test("the generator setting tests an OpenAI-compatible server, switches after the native confirmation, and the answer comes from it", async () => {
  const { server, url: root } = await startGeneratorServer();
  const url = `${root}/v1`;
  const session = await launchWithTestModels();
  try {
    await session.waitFor('[data-testid="question-input"]');
    await session.click(await session.find('[data-testid="generator-menu"] summary'));
    await session.waitFor('[data-testid="generator-in-use"]', { text: (t) => t.includes("this computer") });
    await session.click(await session.find('[data-testid="generator-server"]'));
    await session.type(await session.waitFor('[data-testid="generator-url"]'), url);
    // llama-server names its model by the file it loaded.
    await session.type(await session.find('[data-testid="generator-model"]'), process.env.SELFRAG_TEST_GENERATOR);
    await session.click(await session.find('[data-testid="generator-test"]'));
    // A new server is tested only once the person confirms it natively.
    await answerMessageDialog("Test a generator server");
    const report = await session.waitFor('[data-testid="generator-result"]', {
      timeout: 30000,
      text: (t) => t.includes("llama.cpp"),
    });
    const reportText = await session.text(report);
    assert.match(
      reportText,
      /tiny-selfrag\.gguf on llama\.cpp, OpenAI-compatible API · \d+ tokens · reflection tokens and tokenizer match/,
      reportText,
    );
    await session.screenshot("generator-setting-tested");

    // Use: the native confirmation names the server; the page cannot answer it, a person can.
    await session.click(await session.find('[data-testid="generator-use"]'));
    await answerMessageDialog("Use a generator server");
    await session.waitFor('[data-testid="generator-in-use"]', {
      timeout: 30000,
      text: (t) => t.includes(url.replace("http://", "")),
    });

    const [file] = writeDocs({ "lab.md": "# Lab\n\nThe lab's server runs the model for everyone.\n" });
    await dropAndIndex(session, [file]);
    await setControl(session, "mode-select", "always");
    await askQuestion(session, "Who runs the model?");
    await session.waitFor('[data-testid="answer"]', { timeout: 120000 });
    const line = await session.text(await session.waitFor('[data-testid="answer-generator"]'));
    assert.ok(line.includes(url), `generator line: ${line}`);
  } finally {
    await session.close();
    server.kill();
  }
});

/** A loopback HTTP server that records each request's headers and fails it with a body that must
 * never reach the page. */
async function recordingServer() {
  const requests = [];
  const server = createServer((req, res) => {
    requests.push({ path: req.url, authorization: req.headers.authorization ?? null });
    res.statusCode = 500;
    res.end("internal-service-secret-4711");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, requests, url: `http://127.0.0.1:${server.address().port}` };
}

/** Starts `cmd` from the page as an injected script would, without waiting for it. */
const START = `
  const [cmd, args] = arguments;
  window.__probe = null;
  window.__TAURI_INTERNALS__.invoke(cmd, args).then(
    (v) => (window.__probe = "ok: " + JSON.stringify(v)),
    (e) => (window.__probe = "denied: " + (typeof e === "string" ? e : JSON.stringify(e))),
  );`;

async function probeResult(session, timeout = 30000) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    const result = await session.exec("return window.__probe;");
    if (result !== null) return result;
    await sleep(100);
  }
  throw new Error("the page's call did not finish");
}

test("a saved API key goes only to its own server: a page script testing another port sends none", async () => {
  const saved = await recordingServer();
  const other = await recordingServer();
  const session = await launchWithTestModels();
  try {
    await session.waitFor('[data-testid="question-input"]');
    // The person saves a key for one server, through the setting and its native confirmation.
    await session.click(await session.find('[data-testid="generator-menu"] summary'));
    await session.click(await session.find('[data-testid="generator-server"]'));
    await session.type(await session.waitFor('[data-testid="generator-url"]'), saved.url);
    await session.type(await session.find('[data-testid="generator-api-key"]'), "sesame");
    await session.click(await session.find('[data-testid="generator-use"]'));
    await answerMessageDialog("Use a generator server");
    await session.waitFor('[data-testid="generator-in-use"]', {
      timeout: 30000,
      text: (t) => t.includes(saved.url.replace("http://", "")),
    });

    // A script in the page asks for a test of another loopback port, leaving the key out so the
    // saved one would be used. Declined: the port hears nothing.
    const attack = { url: other.url, model: null, apiKey: null };
    await session.exec(START, "test_generator_server", attack);
    await answerMessageDialog("Test a generator server", ["Escape"]);
    const declined = await probeResult(session);
    assert.match(declined, /^denied: .*not_confirmed/, declined);
    assert.equal(other.requests.length, 0, `the port was reached: ${JSON.stringify(other.requests)}`);

    // Confirmed by a person who did not look: the port is reached, with no key, and the page
    // learns nothing of its reply.
    await session.exec(START, "test_generator_server", attack);
    await answerMessageDialog("Test a generator server");
    const tested = await probeResult(session);
    assert.match(tested, /^denied: .*generator_server/, tested);
    assert.doesNotMatch(tested, /internal-service-secret/, `the reply reached the page: ${tested}`);
    assert.ok(other.requests.length > 0, "the confirmed test reached no server");
    assert.deepEqual(
      other.requests.filter((r) => r.authorization !== null),
      [],
      "the saved key went to another port",
    );

    // The key still goes to its own server (so the check above could fail), with no dialog:
    // that server is the one in use.
    await session.exec(START, "test_generator_server", { url: `${saved.url}/v1`, model: null, apiKey: null });
    await probeResult(session);
    assert.ok(
      saved.requests.some((r) => r.authorization === "Bearer sesame"),
      `the key did not reach its own server: ${JSON.stringify(saved.requests)}`,
    );
  } finally {
    await session.close();
    saved.server.close();
    other.server.close();
  }
});
