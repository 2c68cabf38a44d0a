// "Add files…" and "Add folder…" in the real app: the Rust side shows the native open dialog
// (pick_files, pick_folder), the test answers it as a person would, and what was picked is
// indexed. These dialogs and a native drop are the only ways a path reaches the library.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { answerOpenDialog, sleep, tempDir } from "./driver.mjs";
import { launchWithTestModels } from "./helpers.mjs";

async function documentTitles(session, count) {
  const deadline = Date.now() + 30000;
  let texts = [];
  while (Date.now() < deadline) {
    texts = await session.exec(
      `return [...document.querySelectorAll('[data-testid="document-item"]')].map((el) => el.innerText);`,
    );
    if (texts.length >= count) return texts;
    await sleep(150);
  }
  throw new Error(`the library did not list ${count} documents within 30 s: ${JSON.stringify(texts)}`);
}

test("Add files… and Add folder… index what the native open dialog picked", async () => {
  const root = tempDir("picked");
  const file = join(root, "picked-file.md");
  writeFileSync(file, "# Picked file\n\nChosen in the Add files dialog.\n");
  const folder = join(root, "picked-folder");
  mkdirSync(folder);
  writeFileSync(join(folder, "inside.md"), "# Inside the folder\n\nChosen with Add folder.\n");
  writeFileSync(join(folder, "also.txt"), "Also inside the picked folder.\n");

  const session = await launchWithTestModels();
  try {
    await session.click(await session.waitFor('[data-testid="add-files"]:not([disabled])', { timeout: 15000 }));
    await answerOpenDialog("Add documents to the library", file);
    const one = await documentTitles(session, 1);
    assert.ok(one.some((t) => t.includes("Picked file")), JSON.stringify(one));

    await session.click(await session.find('[data-testid="add-folder"]'));
    await answerOpenDialog("Add a folder to the library", folder, { folder: true });
    const three = await documentTitles(session, 3);
    assert.ok(three.some((t) => t.includes("Inside the folder")), JSON.stringify(three));
    assert.equal(three.length, 3, JSON.stringify(three));
  } finally {
    await session.close();
  }
});
