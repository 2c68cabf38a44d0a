// The first-run download in the real app: with the generator missing, the screen offers it,
// Download fetches it from a stand-in for the Hugging Face hub on 127.0.0.1 (HF_ENDPOINT; the
// tiny test GGUF served the way the hub serves a Git LFS file: HEAD metadata, a redirect to a
// "CDN", Range requests), the progress bar moves, and the app goes on to the ask screen without a
// restart. No network beyond this machine.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { launch, sleep, tempDir } from "./driver.mjs";

const REPO = "m4r1/selfrag_llama2_7b-GGUF";
const FILE = "selfrag_llama2_7b.q4_k_m.gguf";
const COMMIT = "0123456789abcdef0123456789abcdef01234567";

/** Serves `bytes` as REPO/FILE, slowly enough that the progress can be seen. */
async function startHub(bytes) {
  const sha = createHash("sha256").update(bytes).digest("hex");
  const requests = [];
  const server = createServer(async (req, res) => {
    requests.push(`${req.method} ${req.url} ${req.headers.range ?? ""}`.trim());
    const port = server.address().port;
    if (req.url === `/${REPO}/resolve/main/${FILE}`) {
      res.writeHead(302, {
        "X-Repo-Commit": COMMIT,
        "X-Linked-Etag": `"${sha}"`,
        "X-Linked-Size": String(bytes.length),
        ETag: '"0000000000000000000000000000000000000000"',
        Location: `http://127.0.0.1:${port}/cdn/${sha}`,
        "Content-Length": "0",
      });
      res.end();
      return;
    }
    if (req.url === `/cdn/${sha}`) {
      const start = Number(/bytes=(\d+)-/.exec(req.headers.range ?? "")?.[1] ?? 0);
      const body = bytes.subarray(start);
      const headers = { "Content-Length": String(body.length), "X-Repo-Commit": COMMIT };
      if (req.headers.range) {
        headers["Content-Range"] = `bytes ${start}-${bytes.length - 1}/${bytes.length}`;
      }
      res.writeHead(req.headers.range ? 206 : 200, headers);
      if (req.method === "HEAD") return res.end();
      // About three seconds in all, so the progress bar is on screen for a while.
      const chunk = Math.max(4096, Math.ceil(body.length / 60));
      for (let at = 0; at < body.length; at += chunk) {
        res.write(body.subarray(at, at + chunk));
        await sleep(50);
      }
      res.end();
      return;
    }
    res.writeHead(404, { "X-Error-Code": "EntryNotFound", "Content-Length": "0" });
    res.end();
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, requests, server, sha };
}

test("the first-run screen downloads the missing generator and the app goes on", async () => {
  const gguf = readFileSync(process.env.SELFRAG_TEST_GENERATOR);
  const hub = await startHub(gguf);
  const hfHome = tempDir("hf-download");
  const session = await launch({
    SELFRAG_DATA_DIR: tempDir("data"),
    HF_HOME: hfHome,
    HF_HUB_CACHE: "",
    HF_ENDPOINT: hub.url,
    HF_HUB_OFFLINE: "",
    SELFRAG_GENERATOR: "",
    SELFRAG_EMBEDDER: process.env.SELFRAG_TEST_EMBEDDER,
  });
  try {
    const screen = await session.waitFor('[data-testid="missing-models"]');
    const text = await session.text(screen);
    assert.match(text, /Self-RAG/, "names the missing generator");
    assert.match(text, /license mit/, "shows the license");
    assert.match(text, /4\.08 GB/, "shows the size");
    assert.ok(text.includes(REPO), "shows the repository");

    await session.click(await session.find('[data-testid="download-model"]'));
    const progress = await session.waitFor('[data-testid="download-progress-text"]', {
      text: (t) => / of /.test(t),
    });
    const line = await session.text(progress);
    assert.match(line, /kB|MB/, `the progress names bytes: ${line}`);
    await session.screenshot("first-run-downloading");

    // Once the download is complete and checked, the ask screen replaces the first-run screen.
    await session.waitFor('[data-testid="question-input"]', { timeout: 60000 });
    assert.equal((await session.findAll('[data-testid="missing-models"]')).length, 0);

    const cached = join(hfHome, "hub", "models--m4r1--selfrag_llama2_7b-GGUF");
    assert.equal(readFileSync(join(cached, "refs", "main"), "utf8"), COMMIT);
    assert.ok(existsSync(join(cached, "blobs", hub.sha)), "the blob is named by its SHA-256");
    assert.ok(
      readFileSync(join(cached, "snapshots", COMMIT, FILE)).equals(gguf),
      "the snapshot holds the served bytes",
    );
    assert.ok(
      hub.requests.some((r) => r.startsWith(`HEAD /${REPO}/resolve/main/${FILE}`)),
      hub.requests.join("\n"),
    );
  } finally {
    await session.close();
    hub.server.close();
  }
});
