// Stop in the real app: a long answer is streaming (Self-RAG steps on screen), Esc cancels it
// at the engine's next step, the status says so, and the app is ready for the next question.

import { test } from "node:test";
import assert from "node:assert/strict";
import { askQuestion, launchWithTestModels, prepareLongAnswer, setControl } from "./helpers.mjs";

test("Esc stops a streaming answer", async () => {
  const session = await launchWithTestModels();
  try {
    await session.waitFor('[data-testid="question-input"]');
    await prepareLongAnswer(session);

    // The page itself presses Esc the moment candidates are being written: no WebDriver round
    // trip between seeing the step and stopping it.
    await session.exec(
      `const line = document.querySelector('[data-testid="status-line"]');
       window.__stopSeen = [];
       const obs = new MutationObserver(() => {
         window.__stopSeen.push(line.textContent);
         if (/Writing candidates/.test(line.textContent) && document.querySelector('[data-testid="stop-button"]')) {
           obs.disconnect();
           window.__streamedBeforeStop = document.querySelector('[data-testid="answer-draft"]')?.innerText ?? "";
           document.activeElement.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
         }
       });
       obs.observe(line, { childList: true, characterData: true, subtree: true });`,
    );
    const started = Date.now();
    await askQuestion(session, "How does the critic judge the passages?");
    await session.waitFor('[data-testid="status-line"]', { timeout: 120000, text: (t) => t.trim() === "Stopped." });
    console.log(`stopped after ${Date.now() - started} ms; status lines seen: ${JSON.stringify(await session.exec("return window.__stopSeen;"))}`);

    const streamed = await session.exec("return window.__streamedBeforeStop;");
    assert.match(streamed, /Candidates/, "the Self-RAG steps were on screen while it streamed");
    assert.equal((await session.findAll('[data-testid="answer"]')).length, 0, "no answer after Stop");
    assert.equal((await session.findAll('[data-testid="stop-button"]')).length, 0, "Stop is gone");
    assert.equal((await session.findAll('[data-testid="error-banner"]')).length, 0, "stopping is not an error");
    await session.movePointer(5, 5);
    await session.screenshot("stopped");

    // The next question runs to the end.
    await setControl(session, "long-form", false);
    await askQuestion(session, "What does the critic judge?");
    await session.waitFor('[data-testid="answer"]', { timeout: 120000 });
  } finally {
    await session.close();
  }
});
