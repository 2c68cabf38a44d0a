// A Zotero library in the real app: "Add Zotero library…" picks a Zotero data directory (written
// by selfrag-references' fixture: Zotero's real table and column names, a Better BibTeX key
// store, a storage/ tree) in the native folder dialog; its items' files are indexed with their
// records; the library pane shows the work of each; an answer cites the article author–year with
// the printed page of its PDF; the BibTeX export holds the Better BibTeX key, the authors, the
// year and the DOI; and "Open in Zotero" carries the zotero:// address of the PDF at its page,
// built by the app from the library's record.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { answerOpenDialog, sleep, tempDir } from "./driver.mjs";
import { askQuestion, assemblePdf, launchWithTestModels, setControl } from "./helpers.mjs";

/** The sentence of the article's PDF; the question asks it word for word, so it ranks first. */
const SENTENCE = "Reindeer herds were followed across the plateau by satellite telemetry collars.";

/** A one-page PDF holding `text`, whose page is printed as page `start`. */
function labelledPdf(text, start) {
  const content = `BT /F1 11 Tf 56 760 Td (${text}) Tj ET`;
  const objects = [
    `<< /Type /Catalog /Pages 2 0 R /PageLabels << /Nums [0 << /S /D /St ${start} >>] >> >>`,
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
    `<< /Length ${content.length} >>\nstream\n${content}\nendstream`,
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
  ];
  return assemblePdf(objects);
}

/** Writes the Zotero data directory with `pdf` and `text` as the article's files; what it holds. */
function writeZoteroDir(dir, pdf, text) {
  const writer = process.env.SELFRAG_ZOTERO_FIXTURE;
  if (!writer) {
    throw new Error("SELFRAG_ZOTERO_FIXTURE is not set: run the end-to-end tests through `cargo xtask test`");
  }
  return JSON.parse(execFileSync(writer, [dir, pdf, text], { encoding: "utf8" }));
}

/** Answers the export's save dialog with `path`. */
async function saveAs(path, timeout = 45000) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    let ids = [];
    try {
      ids = execFileSync("xdotool", ["search", "--onlyvisible", "--name", "Export answer"], { encoding: "utf8" })
        .trim()
        .split("\n")
        .filter(Boolean);
    } catch {
      // No such window yet.
    }
    if (ids.length > 0) {
      await sleep(400);
      execFileSync("xdotool", ["windowfocus", "--sync", ids[ids.length - 1], "key", "--clearmodifiers", "ctrl+a"]);
      execFileSync("xdotool", ["type", "--delay", "5", path]);
      await sleep(300);
      execFileSync("xdotool", ["key", "Return"]);
      return;
    }
    await sleep(200);
  }
  throw new Error(`no save dialog appeared within ${timeout} ms`);
}

test("a Zotero library added in the app: works in the library, author–year citations, BibTeX, Open in Zotero", async () => {
  const files = tempDir("zotero-files");
  const pdf = join(files, "reindeer.pdf");
  writeFileSync(pdf, labelledPdf(SENTENCE, 117), "latin1");
  const text = join(files, "field-notes.txt");
  writeFileSync(text, "Field notes: the collars were fitted in March, before the thaw.\n");
  const zoteroDir = join(tempDir("zotero"), "Zotero");
  const zotero = writeZoteroDir(zoteroDir, pdf, text);

  const session = await launchWithTestModels();
  try {
    await session.click(await session.waitFor('[data-testid="add-zotero"]:not([disabled])', { timeout: 30000 }));
    await answerOpenDialog("Add a Zotero library", zoteroDir, { folder: true });
    const result = await session.waitFor('[data-testid="import-result"]', {
      timeout: 120000,
      text: (t) => /Added \d+ files? from Zotero/.test(t),
    });
    const report = await session.text(result);
    // The EPUB attachment is not a format the app reads: it is said, not lost.
    assert.match(report, /skipped/, report);

    // The article's PDF is listed with its work: authors, year, journal, DOI, collection.
    const pdfRow = `[data-testid="document-item"][title="${zotero.articlePdf.path}"]`;
    const row = await session.waitFor(pdfRow, { text: (t) => t.includes("Marrow & Ødegård 1998") });
    const rowText = await session.text(row);
    assert.match(rowText, /Thesis\/Chapter 2/, rowText);
    const doi = await session.exec(
      `return document.querySelector(arguments[0] + ' [data-testid="work-doi"]')?.innerText ?? null;`,
      pdfRow,
    );
    assert.match(doi ?? "", /^doi:10\.\d{4,}\//, `the article's DOI is shown: ${doi}`);
    await session.screenshot("zotero-library");

    // Author–year, the one passage retrieved being the PDF's: its printed page, not its place.
    await session.click(await session.find('[data-testid="cite-as-authorYear"]'));
    await setControl(session, "mode-select", "always");
    await setControl(session, "k-input", 1);
    await askQuestion(session, SENTENCE);
    const chip = await session.waitFor('[data-testid="citation-1"]', { timeout: 120000 });
    assert.equal((await session.text(chip)).trim(), "Marrow & Ødegård 1998, p. 117");
    await session.screenshot("zotero-author-year");

    // BibTeX: the Better BibTeX key, the authors, the year and the DOI.
    const out = tempDir("zotero-export");
    mkdirSync(out, { recursive: true });
    const bibPath = join(out, "refs.bib");
    await setControl(session, "export-format", "bib");
    await session.click(await session.find('[data-testid="export-button"]'));
    await saveAs(bibPath);
    for (let i = 0; i < 100 && !existsSync(bibPath); i++) await sleep(100);
    const bib = readFileSync(bibPath, "utf8");
    assert.ok(bib.includes(`{${zotero.article.citationKey},`), `the Better BibTeX key: ${bib}`);
    assert.match(bib, /Marrow, Jane and Ødegård, Kjetil|Marrow, Jane and {\\O}deg{\\aa}rd, Kjetil/, bib);
    assert.match(bib, /year\s*=\s*\{?1998/, bib);
    assert.ok(bib.includes(doi.replace(/^doi:/, "")), `the DOI ${doi}: ${bib}`);

    // Open in Zotero: the PDF at the passage's page, by the app's own record of the document.
    await session.click(chip);
    const open = await session.waitFor('[data-testid="open-in-zotero"][data-uri]', { timeout: 15000 });
    const expected = `zotero://open-pdf/library/items/${zotero.articlePdf.attachmentKey}?page=1`;
    assert.equal(await session.exec("return arguments[0].dataset.uri;", session.ref(open)), expected);
    await session.click(open);
    // Zotero handles the link where it is installed; elsewhere the app says that it is not.
    let saidText = "";
    for (let i = 0; i < 100 && saidText === ""; i++) {
      saidText = await session.exec(
        `return ['open-status', 'open-error']
           .map((id) => document.querySelector('[data-testid="' + id + '"]')?.innerText.trim() ?? "")
           .join("");`,
      );
      if (saidText === "") await sleep(150);
    }
    assert.ok(
      saidText.includes(`Opened in Zotero (${expected})`) || /Zotero is not installed/.test(saidText),
      saidText,
    );
    await session.screenshot("zotero-evidence");
  } finally {
    await session.close();
  }
});
