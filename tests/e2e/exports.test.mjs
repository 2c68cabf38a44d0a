// Exports, history and settings in the real app: every export format written through the real
// save dialog (which proposes the format's extension) and read back from disk, HTML with
// hostile document text escaped, copy to the system clipboard, the history panel (search,
// reopen, delete), and settings that survive a restart, including a broken settings file that
// is kept aside and reported.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { launch, tempDir, sleep } from "./driver.mjs";

const XSS_IMG = "<img src=x onerror=alert(1)>";
const XSS_SCRIPT = "<script>alert('owned')</script>";
const PASSAGE =
  "Self-RAG trains a language model to retrieve passages on demand and to critique its own output with reflection tokens.";
const QUESTION = "How does Self-RAG critique itself?";

function models(extra = {}) {
  return {
    SELFRAG_DATA_DIR: tempDir("data"),
    SELFRAG_CONFIG_DIR: tempDir("config"),
    SELFRAG_GENERATOR: process.env.SELFRAG_TEST_GENERATOR,
    SELFRAG_EMBEDDER: process.env.SELFRAG_TEST_EMBEDDER,
    HF_HOME: tempDir("hf"),
    ...extra,
  };
}

/** Sets a <select> or checkbox the way a user's change arrives. */
async function setControl(session, testid, value) {
  const el = await session.find(`[data-testid="${testid}"]`);
  await session.exec(
    `const el = arguments[0], v = arguments[1];
     if (el.type === "checkbox") { if (el.checked !== v) el.click(); }
     else { el.value = v; el.dispatchEvent(new Event("change", { bubbles: true })); }`,
    session.ref(el),
    value,
  );
}

/**
 * Answers the save dialog by putting `dir/` in front of the name the dialog proposes, so the
 * file lands under the proposed name: the test then sees which extension was proposed.
 */
async function saveUnderProposedName(dir, timeout = 15000) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    let ids = [];
    try {
      ids = execFileSync("xdotool", ["search", "--onlyvisible", "--name", "Export answer"], {
        encoding: "utf8",
      })
        .trim()
        .split("\n")
        .filter(Boolean);
    } catch {
      // No such window yet.
    }
    if (ids.length > 0) {
      await sleep(400);
      execFileSync("xdotool", ["windowfocus", "--sync", ids[ids.length - 1], "key", "--clearmodifiers", "Home"]);
      execFileSync("xdotool", ["type", "--delay", "5", `${dir}/`]);
      execFileSync("xdotool", ["key", "Return"]);
      return;
    }
    await sleep(200);
  }
  throw new Error(`no save dialog appeared within ${timeout} ms`);
}

async function waitForFile(path) {
  for (let i = 0; i < 100 && !existsSync(path); i++) await sleep(100);
  return readFileSync(path, "utf8");
}

async function askOne(session) {
  await setControl(session, "mode-select", "always");
  await session.type(await session.find('[data-testid="question-input"]'), QUESTION);
  await session.click(await session.find('[data-testid="ask-button"]'));
  return session.waitFor('[data-testid="answer"]', { timeout: 120000, text: (t) => t.includes("[1]") });
}

test("every export format from the real app, copy, and the history panel", async () => {
  const docs = tempDir("docs");
  // Hostile markup in the file name, the title and the passage.
  const file = join(docs, `notes ${XSS_IMG}.md`);
  writeFileSync(file, `# Notes ${XSS_SCRIPT}\n\n${PASSAGE} ${XSS_IMG}\n`);
  const out = tempDir("export");
  const session = await launch(models());
  try {
    await session.waitFor('[data-testid="question-input"]');
    assert.equal(await session.dropFiles([file]), "ok");
    await session.waitFor('[data-testid="document-item"]', { text: (t) => t.includes("Notes") });
    await askOne(session);

    const exported = {};
    for (const [format, labels, only] of [
      ["md", true, true],
      ["html", true, false],
      ["json", false, false],
      ["bib", false, false],
    ]) {
      await setControl(session, "export-format", format);
      if (format !== "json") await setControl(session, "export-only-supported", only);
      if (format === "md" || format === "html") await setControl(session, "export-labels", labels);
      const dir = join(out, format);
      execFileSync("mkdir", ["-p", dir]);
      await session.click(await session.find('[data-testid="export-button"]'));
      await saveUnderProposedName(dir);
      const target = join(dir, `answer.${format}`);
      await session.waitFor('[data-testid="export-status"]', { text: (t) => t.includes(target) });
      exported[format] = await waitForFile(target);
      assert.deepEqual(readdirSync(dir), [`answer.${format}`], `the dialog proposed answer.${format}`);
    }
    await session.screenshot("export-menu");

    // Markdown with labels and only fully supported sentences: the note says what was left out.
    const md = exported.md;
    assert.match(md, /^# How does Self-RAG critique itself\?\n/);
    assert.match(md, /\*Only fully supported sentences: /);
    assert.match(md, /Fully supported\)\*|\[…\]/, "a kept segment is labelled, or the gap is marked");
    assert.ok(!/[^\\]<(img|script)/.test(md), "markup is escaped in Markdown");

    // HTML: self-contained, no script, everything escaped.
    const html = exported.html;
    assert.match(html, /^<!DOCTYPE html>/);
    assert.ok(html.includes("default-src 'none'"), "the page forbids scripts itself");
    assert.ok(!/<script|<img/i.test(html), "no script or img tag in the page");
    assert.ok(html.includes("&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;"), "the title shows as text");
    assert.ok(html.includes("&lt;img src=x onerror=alert(1)&gt;"), "the passage and file name show as text");
    assert.ok(html.includes("<span class=\"support support-"), "support labels");
    assert.ok(html.includes("<section class=\"sources\">"));

    // JSON: the full trace.
    const trace = JSON.parse(exported.json);
    assert.equal(trace.question, QUESTION);
    assert.ok(trace.passages.some((p) => p.text.includes(PASSAGE)));
    assert.ok(trace.segments.every((s) => Array.isArray(s.candidates) && s.candidates.length > 0));

    // BibTeX: one entry for the one document, braces balanced, special characters escaped.
    const bib = exported.bib;
    assert.equal(bib.match(/@misc\{/g)?.length, 1, bib);
    // A document without a work record: keyed by its title's first word, typed `misc`.
    assert.match(bib, /@misc\{notes,\n/);
    assert.ok(bib.includes(`file = {${file}}`), bib);
    // The note says where it is cited and which generator and numerics its scores came from.
    assert.match(bib, /note = \{Cited as \[1\]\. Written on this computer \(CPU\) by tiny-selfrag\.gguf · KV cache [^}]+\},\n/, bib);
    let depth = 0;
    for (const c of bib) depth += c === "{" ? 1 : c === "}" ? -1 : 0;
    assert.equal(depth, 0, "balanced braces");

    // Copy: the Rust side renders, the webview puts it on the system clipboard; pasting it into
    // the question box through the X server reads it back.
    await setControl(session, "export-format", "md");
    await setControl(session, "export-only-supported", false);
    await setControl(session, "export-labels", false);
    await session.click(await session.find('[data-testid="copy-button"]'));
    await session.waitFor('[data-testid="export-status"]', { text: (t) => t.includes("Copied to the clipboard") });
    const input = await session.find('[data-testid="question-input"]');
    await session.exec(`arguments[0].value = ""; arguments[0].focus();`, session.ref(input));
    const win = execFileSync("xdotool", ["search", "--onlyvisible", "--name", "Self-RAG Desktop"], { encoding: "utf8" })
      .trim()
      .split("\n")[0];
    execFileSync("xdotool", ["windowfocus", "--sync", win, "key", "--clearmodifiers", "ctrl+v"]);
    let pasted = "";
    for (let i = 0; i < 50 && !pasted; i++) {
      pasted = await session.exec("return arguments[0].value;", session.ref(input));
      if (!pasted) await sleep(100);
    }
    assert.ok(pasted.startsWith(`# ${QUESTION}`), `pasted: ${JSON.stringify(pasted.slice(0, 200))}`);
    assert.ok(pasted.includes("[^1]:"), "the copied Markdown has its footnote");
    await session.exec(`arguments[0].value = ""; arguments[0].dispatchEvent(new Event("input"));`, session.ref(input));

    // History: the answer is listed; search filters; reopen shows it; delete asks first.
    await session.click(await session.find('[data-testid="history-toggle"]'));
    const item = await session.waitFor('[data-testid="history-item"]', { text: (t) => t.includes(QUESTION) });
    assert.ok((await session.text(item)).includes("citation"));
    await sleep(500); // let the webview repaint before the screenshot
    await session.screenshot("history-panel");
    await session.type(await session.find('[data-testid="history-search"]'), "zebra");
    await session.waitFor('[data-testid="history-empty"]', { text: (t) => t.includes("zebra") });
    await session.exec(
      `const s = document.querySelector('[data-testid="history-search"]'); s.value = "critique"; s.dispatchEvent(new Event("input", { bubbles: true }));`,
    );
    await session.click(await session.waitFor('[data-testid="history-open"]'));
    await session.waitFor('[data-testid="answer"]', { text: (t) => t.includes("[1]") });
    await session.click(await session.find('[data-testid="history-delete"]'));
    await session.click(await session.waitFor('[data-testid="history-confirm-delete"]'));
    await session.waitFor('[data-testid="history-empty"]');
    assert.equal((await session.findAll('[data-testid="answer"]')).length, 0, "the deleted answer left the screen");
  } finally {
    await session.close();
  }
});

test("settings survive a restart, and a broken settings file is kept aside and reported", async () => {
  const env = models();
  const config = env.SELFRAG_CONFIG_DIR;
  let session = await launch(env);
  try {
    await session.waitFor('[data-testid="export-format"]');
    await setControl(session, "theme-select", "dark");
    await setControl(session, "export-format", "bib");
    await setControl(session, "device-select", "cpu");
    await setControl(session, "precision-select", "f32");
    await setControl(session, "mode-select", "never");
    const settingsFile = join(config, "settings.json");
    let saved = null;
    for (let i = 0; i < 50; i++) {
      if (existsSync(settingsFile)) {
        saved = JSON.parse(readFileSync(settingsFile, "utf8"));
        if (saved.ask?.mode === "never" && saved.device === "cpu" && saved.embedderPrecision === "f32") break;
      }
      await sleep(100);
    }
    assert.equal(saved?.theme, "dark");
    assert.equal(saved?.export?.format, "bib");
    assert.equal(saved?.device, "cpu");
    assert.equal(saved?.embedderPrecision, "f32");
    assert.equal(saved?.ask?.mode, "never");
  } finally {
    await session.close();
  }

  session = await launch(env);
  try {
    const select = await session.waitFor('[data-testid="export-format"]');
    await sleep(300);
    assert.equal(await session.exec("return arguments[0].value;", session.ref(select)), "bib");
    assert.equal(await session.exec(`return document.querySelector('[data-testid="mode-select"]').value;`), "never");
    assert.equal(await session.exec(`return document.querySelector('[data-testid="device-select"]').value;`), "cpu");
    assert.equal(await session.exec(`return document.querySelector('[data-testid="precision-select"]').value;`), "f32");
    assert.equal(await session.exec("return document.documentElement.classList.contains('theme-dark');"), true);
    await session.exec(`document.querySelector('[data-testid="device-menu"]').open = true;`);
    await session.screenshot("settings-device-menu");
    await session.screenshot("settings-restored-dark");
  } finally {
    await session.close();
  }

  writeFileSync(join(config, "settings.json"), '{"theme": "dark", oops');
  session = await launch(env);
  try {
    const banner = await session.waitFor('[data-testid="error-banner"]', { text: (t) => t.includes("could not be parsed") });
    const kept = readdirSync(config).filter((n) => n.startsWith("settings.json.broken-"));
    assert.equal(kept.length, 1, `kept: ${kept}`);
    assert.ok((await session.text(banner)).includes(kept[0]), "the banner names the kept file");
    assert.equal(readFileSync(join(config, kept[0]), "utf8"), '{"theme": "dark", oops');
    const select = await session.find('[data-testid="export-format"]');
    assert.equal(await session.exec("return arguments[0].value;", session.ref(select)), "md", "defaults");
  } finally {
    await session.close();
  }
});
