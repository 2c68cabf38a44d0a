// What the end-to-end tests of answers share: the app with the tiny test models, documents on
// disk, and the few UI moves every test makes (drop, pick a mode, ask, move a slider).

import { spawn } from "node:child_process";
import assert from "node:assert/strict";
import { openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort, launch, sleep, tempDir } from "./driver.mjs";

/** The app on a fresh data folder with the tiny test generator and embedder, plus `env`. */
export function launchWithTestModels(env = {}) {
  return launch({
    SELFRAG_DATA_DIR: tempDir("data"),
    SELFRAG_GENERATOR: process.env.SELFRAG_TEST_GENERATOR,
    SELFRAG_EMBEDDER: process.env.SELFRAG_TEST_EMBEDDER,
    HF_HOME: tempDir("hf"),
    ...env,
  });
}

/**
 * Starts llama-server (built by `cargo xtask test`) on `model` with `args` on a free loopback
 * port, its output in files of a new folder; resolves with it and its URL once it is healthy.
 */
export async function startLlamaServer(model, args) {
  const binary = process.env.SELFRAG_LLAMA_SERVER;
  assert.ok(binary, "SELFRAG_LLAMA_SERVER names no llama-server (cargo xtask test builds one)");
  const port = await freePort();
  const logs = tempDir("llama-server");
  const server = spawn(
    binary,
    ["-m", model, "--host", "127.0.0.1", "--port", String(port), "-t", "2", "-ngl", "0", ...args],
    { stdio: ["ignore", openSync(join(logs, "out.log"), "w"), openSync(join(logs, "err.log"), "w")] },
  );
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (server.exitCode !== null) throw new Error(`llama-server exited (${server.exitCode}); logs in ${logs}`);
    try {
      if ((await fetch(`${url}/health`)).ok) return { server, url };
    } catch {
      // Not listening yet.
    }
    await sleep(100);
  }
  server.kill();
  throw new Error(`llama-server did not answer within 60 s; logs in ${logs}`);
}

/** Writes `files` ({name: text}) into a new folder; returns their paths in the same order. */
export function writeDocs(files) {
  const dir = tempDir("docs");
  return Object.entries(files).map(([name, text]) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  });
}

/** Drops `paths` on the window and waits until the library lists `count` documents. */
export async function dropAndIndex(session, paths, count = paths.length) {
  const result = await session.dropFiles(paths);
  if (result !== "ok") throw new Error(`drop failed: ${result}`);
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) {
    const items = await session.findAll('[data-testid="document-item"]');
    if (items.length >= count) return items;
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(`the library did not list ${count} documents within 60 s`);
}

/** Sets a form control by test id as a person would, firing `input` and `change`. */
export function setControl(session, testid, value) {
  return session.exec(
    `const el = document.querySelector('[data-testid="' + arguments[0] + '"]');
     if (el.type === "checkbox") el.checked = arguments[1]; else el.value = String(arguments[1]);
     el.dispatchEvent(new Event("input", { bubbles: true }));
     el.dispatchEvent(new Event("change", { bubbles: true }));`,
    testid,
    value,
  );
}

/** Types `question` and presses Ask. */
export async function askQuestion(session, question) {
  const box = await session.find('[data-testid="question-input"]');
  await session.exec(`arguments[0].value = ""; arguments[0].dispatchEvent(new Event("input", { bubbles: true }));`, session.ref(box));
  await session.type(box, question);
  await session.click(await session.find('[data-testid="ask-button"]'));
}

/** Resizes the window (the viewport follows; Xvfb runs no window manager to refuse). */
export function setWindowSize(session, width, height) {
  return session.cmd("POST", "/window/rect", { width, height });
}

/**
 * Indexes twelve short notes and sets the controls for a long run (always retrieve, K = 12,
 * long form): K candidates per segment and several segments, so an answer streams for a while.
 */
export async function prepareLongAnswer(session) {
  const notes = Object.fromEntries(
    Array.from({ length: 12 }, (_, i) => [
      `note-${i + 1}.md`,
      `# Note ${i + 1}\n\nSelf-RAG note number ${i + 1}: the retriever reads passages, the critic judges relevance, support and usefulness, and the generator writes one candidate per passage.\n`,
    ]),
  );
  await dropAndIndex(session, writeDocs(notes));
  await setControl(session, "mode-select", "always");
  await setControl(session, "k-input", 12);
  await setControl(session, "long-form", true);
}

/** A PDF string with a correct xref, whose objects are `objects` (object 1 is the catalog). */
export function assemblePdf(objects) {
  let out = "%PDF-1.4\n";
  const offsets = [];
  objects.forEach((object, i) => {
    offsets.push(out.length);
    out += `${i + 1} 0 obj\n${object}\nendobj\n`;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) out += `${String(offset).padStart(10, "0")} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return out;
}

/**
 * A PDF whose pages each hold two columns of Helvetica lines (`[left, right]`, written left
 * column first, as a typesetter writes them) and whose page labels start at `start`.
 */
export function twoColumnPdf(pages, start) {
  const objects = [
    `<< /Type /Catalog /Pages 2 0 R /PageLabels << /Nums [0 << /S /D /St ${start} >>] >> >>`,
    "",
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
  ];
  const kids = [];
  for (const columns of pages) {
    const column = (lines, x) =>
      `BT /F1 10 Tf 12 TL ${x} 760 Td ${lines.map((l) => `(${l}) Tj T*`).join(" ")} ET`;
    const content = `${column(columns[0], 56)}\n${column(columns[1], 312)}`;
    kids.push(`${objects.length + 1} 0 R`);
    objects.push(
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> /Contents ${objects.length + 2} 0 R >>`,
    );
    objects.push(`<< /Length ${content.length} >>\nstream\n${content}\nendstream`);
  }
  objects[1] = `<< /Type /Pages /Kids [${kids.join(" ")}] /Count ${pages.length} >>`;
  return assemblePdf(objects);
}
