// A lab's library on object storage, in the real app: a real S3-compatible server
// (selfrag-s3-server, built by `cargo xtask test`) on a loopback port, and two computers, each an
// app with its own data and config folders. The first chooses the shared library in its Library
// setting (connection test and choice, each after a native confirmation), restarts into it and
// adds a PDF; the second, pointed at the same library, lists the PDF, cites it in an answer and
// opens the cited page in its viewer (from the copy the store keeps: the PDF is on the first
// computer only), and sees a note a third computer (the command line) adds while it is open.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { answerMessageDialog, freePort, tempDir } from "./driver.mjs";
import {
  askQuestion,
  dropAndIndex,
  launchWithTestModels,
  setControl,
  twoColumnPdf,
  writeDocs,
} from "./helpers.mjs";

const LIBRARY = "s3://lab/e2e";

/** Starts the S3 server over a new folder; resolves with it and the environment a client needs. */
async function startStore() {
  const binary = process.env.SELFRAG_S3_SERVER;
  assert.ok(binary, "SELFRAG_S3_SERVER names no selfrag-s3-server (cargo xtask test builds one)");
  const server = spawn(
    binary,
    ["--access-key", "e2e", "--secret-key", "e2e-secret", "--bucket", "lab", tempDir("store")],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const line = await new Promise((resolve, reject) => {
    const lines = createInterface({ input: server.stdout });
    lines.once("line", resolve);
    server.once("exit", (code) => reject(new Error(`selfrag-s3-server exited (${code})`)));
  });
  const endpoint = line.replace("listening on ", "").trim();
  assert.match(endpoint, /^http:\/\/127\.0\.0\.1:\d+$/, line);
  const env = {
    AWS_ENDPOINT_URL: endpoint,
    AWS_ALLOW_HTTP: "true",
    AWS_ACCESS_KEY_ID: "e2e",
    AWS_SECRET_ACCESS_KEY: "e2e-secret",
    AWS_REGION: "us-east-1",
  };
  return { server, endpoint, env };
}

// The cited page of the shared paper.
const PAGE_ONE = [
  ["The harbour authority keeps", "ledgers of the tides since", "eighteen ninety."],
  ["Each ledger lists the height of", "the water at noon and at", "midnight."],
];
const PAGE_TWO = [
  ["Sediment cores from the estuary", "show that the salt marsh grew", "two millimetres a year"],
  ["while the sea rose around it,", "keeping the marsh above", "the spring tides."],
];

test("two computers share one library on object storage: one adds a PDF, the other cites it and opens the page", async () => {
  const { server, endpoint, env } = await startStore();
  const alice = { SELFRAG_DATA_DIR: tempDir("alice-data"), SELFRAG_CONFIG_DIR: tempDir("alice-config"), ...env };
  try {
    // Alice chooses the shared library in the Library setting.
    let session = await launchWithTestModels(alice);
    try {
      await session.waitFor('[data-testid="question-input"]');
      await session.click(await session.find('[data-testid="library-location-menu"] summary'));
      await session.waitFor('[data-testid="library-location-in-use"]', { text: (t) => t.includes("this computer") });
      await session.click(await session.find('[data-testid="library-location-shared"]'));
      await session.type(await session.waitFor('[data-testid="library-location-uri"]'), LIBRARY);
      await session.click(await session.find('[data-testid="library-location-test"]'));
      await answerMessageDialog("Test a library location");
      const report = await session.waitFor('[data-testid="library-location-result"]', {
        timeout: 30000,
        text: (t) => t.includes("conditional writes"),
      });
      const reportText = await session.text(report);
      assert.ok(
        reportText.includes(endpoint) && reportText.includes("no library yet"),
        `the test's report: ${reportText}`,
      );
      await session.click(await session.find('[data-testid="library-location-use"]'));
      await answerMessageDialog("Use another library");
      await session.waitFor('[data-testid="library-location-result"]', {
        timeout: 30000,
        text: (t) => t.includes("opens when Self-RAG Desktop starts next"),
      });
      await session.waitFor('[data-testid="library-location-restart"]');
      await session.movePointer(600, 780);
      await session.screenshot("library-location-chosen");
    } finally {
      await session.close();
    }

    // Started again (as Restart now does), Alice's app opens the shared library and adds a PDF.
    const dir = tempDir("alice-papers");
    const pdf = join(dir, "salt-marsh.pdf");
    writeFileSync(pdf, twoColumnPdf([PAGE_ONE, PAGE_TWO], 41), "latin1");
    session = await launchWithTestModels(alice);
    try {
      await session.waitFor('[data-testid="question-input"]');
      await session.waitFor('[data-testid="library-location-in-use"]', { text: (t) => t.includes(LIBRARY) });
      await dropAndIndex(session, [pdf]);
    } finally {
      await session.close();
    }
    // The PDF stays on Alice's computer: Bob has no file at its path.
    renameSync(pdf, join(tempDir("alice-elsewhere"), "salt-marsh.pdf"));

    // Bob's computer: its own folders, the same library (here through SELFRAG_LIBRARY).
    session = await launchWithTestModels({
      SELFRAG_DATA_DIR: tempDir("bob-data"),
      SELFRAG_CONFIG_DIR: tempDir("bob-config"),
      SELFRAG_LIBRARY: LIBRARY,
      ...env,
    });
    try {
      await session.waitFor('[data-testid="question-input"]');
      const item = await session.waitFor('[data-testid="document-item"]', { timeout: 30000 });
      assert.match(await session.text(item), /salt-marsh/);
      await session.click(await session.find('[data-testid="library-location-menu"] summary'));
      const locked = await session.text(await session.waitFor('[data-testid="library-location-result"]'));
      assert.match(locked, /SELFRAG_LIBRARY/, locked);
      await setControl(session, "mode-select", "always");
      await setControl(session, "k-input", 1);
      await askQuestion(session, "How fast did the salt marsh grow while the sea rose?");
      await session.waitFor('[data-testid="answer"]', { timeout: 120000, text: (t) => t.includes("[1]") });
      await session.click(await session.find('[data-testid="citation-1"]'));
      const page = await session.waitFor('[data-testid="passage-page"]');
      assert.equal((await session.text(page)).trim(), "42 (PDF page 2)");
      const status = await session.waitFor('[data-testid="mark-status"]', { timeout: 30000 });
      assert.equal(await session.exec(`return arguments[0].dataset.match;`, session.ref(status)), "exact");
      const shown = await session.find('[data-testid="pdf-page"]');
      assert.equal(await session.exec(`return arguments[0].dataset.page;`, session.ref(shown)), "2");
      const copy = await session.find('[data-testid="source-stored-copy"]');
      assert.match(await session.text(copy), /another computer/);
      await session.movePointer(600, 780);
      await session.screenshot("shared-library-cited");

      // While Bob's app is open, a third computer (the command line, with folders of its own)
      // adds a note: Bob's list shows it, and says where it came from.
      const [note] = writeDocs({ "tides.md": "# Tides\n\nSpring tides flood the marsh twice a month.\n" });
      execFileSync(process.env.SELFRAG_CLI, ["index", note, "--library", LIBRARY], {
        env: {
          ...process.env,
          ...env,
          SELFRAG_DATA_DIR: tempDir("carol-data"),
          SELFRAG_CONFIG_DIR: tempDir("carol-config"),
          SELFRAG_EMBEDDER: process.env.SELFRAG_TEST_EMBEDDER,
          SELFRAG_GENERATOR: "",
          SELFRAG_DEVICE: "cpu",
        },
        stdio: ["ignore", "ignore", "inherit"],
      });
      await session.waitFor('[data-testid="library-elsewhere"]', {
        timeout: 30000,
        text: (t) => t.includes("1 document added by other computers"),
      });
      await session.waitFor('[data-testid="library-list"]', { timeout: 30000, text: (t) => t.includes("tides") });
      assert.equal((await session.findAll('[data-testid="document-item"]')).length, 2);
      await session.waitFor('[data-testid="library-counts"]', { text: (t) => t.startsWith("2 documents") });
      await session.screenshot("shared-library-elsewhere");
    } finally {
      await session.close();
    }
  } finally {
    server.kill();
  }
});

test("a shared library whose store cannot be reached: the app opens, says what to do, and history and settings work", async () => {
  const nowhere = `http://127.0.0.1:${await freePort()}`;
  const config = tempDir("unreachable-config");
  const session = await launchWithTestModels({
    SELFRAG_CONFIG_DIR: config,
    SELFRAG_LIBRARY: LIBRARY,
    AWS_ENDPOINT_URL: nowhere,
    AWS_ALLOW_HTTP: "true",
    AWS_ACCESS_KEY_ID: "e2e",
    AWS_SECRET_ACCESS_KEY: "e2e-secret",
    AWS_REGION: "us-east-1",
  });
  try {
    await session.waitFor('[data-testid="question-input"]');
    const banner = await session.waitFor('[data-testid="error-banner"]', {
      timeout: 60000,
      text: (t) => t.includes(nowhere),
    });
    const said = await session.text(banner);
    assert.ok(said.includes(LIBRARY) && said.includes("AWS_ENDPOINT_URL"), `the banner: ${said}`);
    // No job was interrupted here: the message is the library's, not a resumed job's.
    assert.ok(!said.includes("interrupted indexing job"), `the banner: ${said}`);
    await session.waitFor('[data-testid="library-unreadable"]');
    await session.movePointer(600, 780);
    await session.screenshot("shared-library-unreachable");
    // History is this computer's: it opens.
    await session.click(await session.find('[data-testid="history-toggle"]'));
    await session.waitFor('[data-testid="history-empty"]');
    await session.click(await session.find('[data-testid="history-close"]'));
    // Settings are this computer's: a change is saved.
    await setControl(session, "theme-select", "dark");
    const settings = join(config, "settings.json");
    let saved = "";
    for (let i = 0; i < 50 && !/"theme":\s*"dark"/.test(saved); i++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      try {
        saved = readFileSync(settings, "utf8");
      } catch {
        // Not written yet.
      }
    }
    assert.match(saved, /"theme":\s*"dark"/, saved);
  } finally {
    await session.close();
  }
});
