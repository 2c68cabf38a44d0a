// The answer-inspection pieces: the support span, the inspector's arithmetic, the re-run offer,
// the streaming view, "Open source", the latency read-out and the theme switch.

import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import { get } from "svelte/store";
import { beforeEach, describe, expect, it, vi } from "vitest";

import PassagePanel from "$lib/components/PassagePanel.svelte";
import RerunNotice from "$lib/components/RerunNotice.svelte";
import StreamingAnswer from "$lib/components/StreamingAnswer.svelte";
import ThemeSwitch from "$lib/components/ThemeSwitch.svelte";
import WeightControls from "$lib/components/WeightControls.svelte";
import { contentWords, sentences, supportSpan } from "$lib/evidence";
import { constraintReason, scoreTerms, whyChosen } from "$lib/inspector";
import * as ipc from "$lib/ipc";
import { markInput, measureRepaint, rerankLatency } from "$lib/latency";
import { nextStatus, startRun } from "$lib/progress";
import { changedRunSettings, rerunEffects, wouldRetrieve } from "$lib/rerun";
import type { RetrieveMode } from "$lib/ipc/types";
import retrieveRuleJson from "./golden/retrieve-rule.json";

/** The core's `RetrieveMode::retrieves` on a grid (written by src-tauri's bindings test). */
const retrieveRule = retrieveRuleJson as {
  mode: RetrieveMode;
  p: number;
  threshold: number;
  argmax: boolean | null;
  retrieves: boolean | null;
}[];
import { defaultSettings } from "$lib/settings";
import { applyTheme, theme } from "$lib/theme";
import { answer, candidate } from "./fixtures";

vi.mock("$lib/ipc", () => ({ openSource: vi.fn(), passageSource: vi.fn(), sourcePdf: vi.fn() }));
const mocked = vi.mocked(ipc);

beforeEach(() => {
  vi.resetAllMocks();
});

describe("support span", () => {
  it("splits a passage into sentences that join back to it exactly", () => {
    const text = "One fact. Two facts!\nThree? Tail without stop";
    expect(sentences(text)).toEqual(["One fact. ", "Two facts!\n", "Three? ", "Tail without stop"]);
    expect(sentences(text).join("")).toBe(text);
  });

  it("ignores stopwords and short words", () => {
    expect(contentWords("The model is on demand, and it retrieves 42 passages")).toEqual([
      "model",
      "demand",
      "retrieves",
      "passages",
    ]);
  });

  it("highlights the sentences sharing the most content words with the segment", () => {
    const passage =
      "Retrieval is costly. Self-RAG retrieves passages on demand using reflection tokens. It was trained on many tasks.";
    const span = supportSpan(passage, ["Self-RAG retrieves passages only on demand."]);
    expect(span.pieces.filter((p) => p.highlight).map((p) => p.text)).toEqual([
      "Self-RAG retrieves passages on demand using reflection tokens. ",
    ]);
    expect(span.shared).toEqual(["self", "rag", "retrieves", "passages", "demand"]);
    expect(span.pieces.map((p) => p.text).join("")).toBe(passage);
  });

  it("highlights nothing when no content word is shared", () => {
    const span = supportSpan("Paris is in France.", ["Gibberish zzq wug."]);
    expect(span.pieces.some((p) => p.highlight)).toBe(false);
    expect(span.shared).toEqual([]);
  });
});

describe("candidate inspector", () => {
  it("splits f into its weighted terms", () => {
    const t = scoreTerms(candidate(), { rel: 1, sup: 2, use: 0.5 }, true);
    expect(t.pLm).toBeCloseTo(0.62);
    expect(t.rel).toBeCloseTo(0.92);
    expect(t.sup).toBeCloseTo(1.87);
    expect(t.use).toBeCloseTo(0.4475);
    expect(scoreTerms(candidate(), { rel: 1, sup: 1, use: 1 }, false).pLm).toBeNull();
  });

  it("explains the only candidate, ties and hard-constraint drops", () => {
    const base = answer();
    const seg = base.segments[0];
    expect(whyChosen(base, { ...seg, candidates: [seg.candidates[0]] })).toBe(
      "It was the only candidate.",
    );
    const twin = { ...seg, candidates: [seg.candidates[0], { ...seg.candidates[0], passage: 1 }] };
    expect(whyChosen(base, twin)).toMatch(/ties with the candidate from \[2\] Notes on retrieval/);
    // What the core decided is read from the trace, not decided again: the higher-scoring
    // candidate is out because the trace excludes it, and says why.
    const irrelevant = { ...seg.candidates[1], violates: ["irrelevant" as const], score: 9 };
    const strict = { ...base, settings: { ...base.settings, hard_constraints: true } };
    const candidates = [seg.candidates[0], irrelevant];
    expect(whyChosen(strict, { ...seg, candidates, excluded: [1] })).toBe(
      "It was the only candidate left. The hard constraints dropped 1 (passage judged irrelevant).",
    );
    expect(whyChosen(strict, { ...seg, candidates })).toMatch(/^The beam search chose it/);
    expect(constraintReason({ ...irrelevant, violates: ["irrelevant", "unsupported"] })).toBe(
      "passage judged irrelevant, judged unsupported",
    );
  });
});

describe("re-run offer", () => {
  it("applies the core's retrieve rule, case for case", () => {
    expect(retrieveRule.length).toBeGreaterThan(100);
    for (const row of retrieveRule) {
      expect(wouldRetrieve(row.p, row.mode, row.threshold, row.argmax), JSON.stringify(row)).toBe(
        row.retrieves,
      );
    }
  });

  it("says model mode cannot be foreseen from an answer asked in another mode", () => {
    const now = { ...defaultSettings(), mode: "model" as const };
    expect(rerunEffects(answer(), now)[0]).toMatch(/asked in adaptive mode, did not read that/);
    const asked = answer({
      settings: now,
      retrieve: { p_retrieve: 0.83, retrieved: true, retrieval_is_argmax: true },
    });
    expect(rerunEffects(asked, { ...now, k: now.k + 1 })[0]).toBe(
      "The first retrieve decision stays the same (mode model, p = 0.83).",
    );
  });

  it("offers nothing when only the weights changed", () => {
    const now = { ...defaultSettings(), weights: { rel: 2, sup: 0, use: 0 } };
    expect(changedRunSettings(answer().settings, now)).toEqual([]);
    expect(rerunEffects(answer(), now)).toEqual([]);
  });

  it("says retrieval would stop when δ rises above p", () => {
    const now = { ...defaultSettings(), threshold: 0.9 };
    expect(changedRunSettings(answer().settings, now)).toEqual(["δ 0.20 → 0.90"]);
    expect(rerunEffects(answer(), now)[0]).toBe(
      "It would answer without retrieval (p = 0.83 ≤ δ 0.90): no passages, no citations.",
    );
  });

  it("says when a smaller K would leave out the current winner", () => {
    const base = answer();
    const seg = { ...base.segments[0], chosen: 1 };
    const now = { ...defaultSettings(), k: 1 };
    const effects = rerunEffects({ ...base, segments: [seg] }, now);
    expect(effects[0]).toBe("The first retrieve decision stays the same (p = 0.83 > δ 0.20).");
    expect(effects[1]).toMatch(/current winner \(passage rank 2\) would not be written/);
  });

  it("offers a re-run when a scoring rule changed, and says what it changes", () => {
    const asked = answer({ settings: { ...defaultSettings(), long_form: true } });
    const now = {
      ...asked.settings,
      p_lm_tokens: "text" as const,
      long_form_ranking: "raw" as const,
      prompt_budget: 4096,
    };
    expect(changedRunSettings(asked.settings, now)).toEqual([
      "p_LM over all → text tokens",
      "long-answer ranking normalised → raw",
      "prompt budget 2048 → 4096",
    ]);
    const effects = rerunEffects(asked, now);
    expect(effects).toContain("p_LM would count the text tokens only, so every f changes.");
    expect(effects.some((e) => e.startsWith("Paths would be compared by raw f"))).toBe(true);
    expect(effects.some((e) => e.includes("carry more earlier passages"))).toBe(true);
  });

  it("says a long answer would leave a multiple-choice question's options out", () => {
    const asked = answer({
      closed_set: {
        kind: "multiple_choice",
        question: "Which is a mammal?",
        options: [
          { label: "A", text: "whale", score: 3.6, candidates: [0] },
          { label: "B", text: "shark", score: 0, candidates: [] },
        ],
        chosen: 0,
      },
    });
    const effects = rerunEffects(asked, { ...asked.settings, long_form: true });
    expect(effects).toContain(
      "Its answer options would be left out: a long answer is asked as an open question, not as multiple choice.",
    );
    expect(rerunEffects(asked, { ...asked.settings, k: 3 }).join(" ")).not.toMatch(/options/);
  });

  it("shows the offer and re-runs on click", async () => {
    const onrerun = vi.fn();
    render(RerunNotice, {
      answer: answer(),
      settings: { ...defaultSettings(), mode: "never" },
      running: false,
      onrerun,
    });
    expect(screen.getByTestId("rerun-offer")).toHaveTextContent("mode adaptive → never");
    expect(screen.getByTestId("rerun-effects")).toHaveTextContent("without retrieval");
    await fireEvent.click(screen.getByTestId("rerun-button"));
    expect(onrerun).toHaveBeenCalledOnce();
  });
});

describe("streaming view", () => {
  it("shows the question, the segments so far and the step under way", () => {
    let run = startRun(false);
    run = nextStatus(run, {
      kind: "retrieve_decided",
      p_retrieve: 0.83,
      threshold: 0.2,
      mode: "adaptive",
      retrieved: true,
    });
    run = nextStatus(run, { kind: "passages_retrieved", segment: 0, count: 3 });
    run = nextStatus(run, { kind: "candidates_started", segment: 0, count: 3 });
    run = nextStatus(run, { kind: "candidate_finished", segment: 0, index: 0, count: 3 });
    render(StreamingAnswer, {
      question: "When does Self-RAG retrieve?",
      draft: [{ text: "On demand.", citation: 1 }],
      run,
    });
    const view = screen.getByTestId("answer-draft");
    expect(view).toHaveTextContent("When does Self-RAG retrieve?");
    expect(view).toHaveTextContent("On demand.[1]");
    const current = view.querySelector('[aria-current="step"]');
    expect(current).toHaveTextContent("Candidates 1/3");
  });

  it("says it is critiquing once every candidate is written", () => {
    let run = startRun(false);
    run = nextStatus(run, { kind: "candidates_started", segment: 0, count: 2 });
    run = nextStatus(run, { kind: "candidate_finished", segment: 0, index: 1, count: 2 });
    run = nextStatus(run, { kind: "candidate_finished", segment: 0, index: 0, count: 2 });
    expect(run.line).toBe("Critiquing: choosing among 2 candidates by f");
    expect(run.stage).toBe("choose");
  });
});

describe("evidence panel", () => {
  const base = answer();
  const props = {
    answerId: "a1",
    n: 1,
    passage: base.passages[0],
    segments: ["Self-RAG adaptively retrieves passages."],
    candidate: base.segments[0].candidates[0],
    onclose: () => {},
  };

  it("highlights the supporting sentence, says how, and shows the passage's IsRel", () => {
    render(PassagePanel, props);
    expect(screen.getByTestId("support-span")).toHaveTextContent("Self-RAG trains a single LM");
    expect(screen.getByTestId("span-hint")).toHaveTextContent("word-overlap estimate");
    expect(screen.getByTestId("passage-isrel")).toHaveTextContent("Relevant");
    expect(screen.getByTestId("open-source")).toHaveTextContent("Open in default app (PDF page 3)");
  });

  it("opens the source through the IPC and shows where", async () => {
    mocked.openSource.mockResolvedValue("/home/ada/papers/selfrag.pdf");
    render(PassagePanel, props);
    await fireEvent.click(screen.getByTestId("open-source"));
    expect(mocked.openSource).toHaveBeenCalledWith("a1", 1);
    await waitFor(() =>
      expect(screen.getByTestId("open-status")).toHaveTextContent("Opened selfrag.pdf"),
    );
  });

  it("shows a text source with the passage marked at its span, counted in characters", async () => {
    const cited = base.passages[0].text;
    const text = `# Notes 📝\n\nFirst paragraph.\n\n${cited}\n\nLast one.`;
    const start = Array.from(text).indexOf("S");
    const source = {
      passageId: "d1:1",
      documentId: "d1",
      path: "/home/ada/notes.md",
      title: "Notes",
      page: null,
      pageLabel: null,
      ocrConfidence: null,
      pages: 1,
      text: cited,
      storedCopy: false,
      view: {
        kind: "text" as const,
        text,
        span: [start, start + Array.from(cited).length] as [number, number],
      },
    };
    mocked.passageSource.mockResolvedValue(source);
    const { unmount } = render(PassagePanel, props);
    expect(mocked.passageSource).toHaveBeenCalledWith(base.passages[0].id);
    await waitFor(() => expect(screen.getByTestId("text-mark")).toHaveTextContent(cited));
    expect(screen.getByTestId("text-source").textContent).toBe(text);
    expect(mocked.sourcePdf).not.toHaveBeenCalled();
    // The cited text is the library's: nothing says otherwise.
    expect(screen.queryByTestId("source-changed")).toBeNull();
    expect(screen.queryByTestId("source-stored-copy")).toBeNull();
    unmount();

    // Indexed on another computer of a shared library: shown from the store's copy, and said so.
    mocked.passageSource.mockResolvedValue({ ...source, storedCopy: true });
    const stored = render(PassagePanel, props);
    await waitFor(() =>
      expect(screen.getByTestId("source-stored-copy")).toHaveTextContent("another computer"),
    );
    expect(screen.getByTestId("text-mark")).toHaveTextContent(cited);
    stored.unmount();

    // A re-index since the answer gave the same passage id other text: said so.
    mocked.passageSource.mockResolvedValue({ ...source, text: "Other text now." });
    render(PassagePanel, props);
    await waitFor(() =>
      expect(screen.getByTestId("source-changed")).toHaveTextContent("re-indexed"),
    );
  });

  it("says why the source cannot be shown and keeps the passage the model read", async () => {
    mocked.passageSource.mockRejectedValue({
      code: "index",
      message:
        "/home/ada/notes.md changed since it was indexed; re-index it to see the passage in its source",
    });
    render(PassagePanel, props);
    await waitFor(() =>
      expect(screen.getByTestId("source-error")).toHaveTextContent("changed since it was indexed"),
    );
    expect(screen.getByTestId("passage-text").textContent).toBe(base.passages[0].text);
  });

  it("shows why the source could not be opened", async () => {
    mocked.openSource.mockRejectedValue({
      code: "source_missing",
      message: "/home/ada/papers/selfrag.pdf is no longer there (moved or deleted)",
    });
    render(PassagePanel, props);
    await fireEvent.click(screen.getByTestId("open-source"));
    await waitFor(() =>
      expect(screen.getByTestId("open-error")).toHaveTextContent("no longer there"),
    );
  });
});

describe("weight controls", () => {
  it("reports the input-to-repaint time of a re-rank", async () => {
    const onchange = vi.fn(() => {
      // What App does once the re-ranked answer is in state.
      measureRepaint();
    });
    render(WeightControls, {
      weights: { rel: 1, sup: 1, use: 0.5 },
      hardConstraints: false,
      onchange,
    });
    await fireEvent.input(screen.getByTestId("slider-rel"), { target: { value: "0" } });
    expect(onchange).toHaveBeenCalledWith({ rel: 0, sup: 1, use: 0.5 }, false);
    await waitFor(() => expect(get(rerankLatency)).not.toBeNull());
    expect(screen.getByTestId("rerank-ms")).toHaveTextContent(/re-ranked in \d+ ms/);
  });

  it("measures nothing without an input first", () => {
    rerankLatency.set(null);
    measureRepaint();
    expect(get(rerankLatency)).toBeNull();
    markInput(performance.now());
  });
});

describe("theme", () => {
  it("puts the chosen theme on <html> and follows the system otherwise", async () => {
    const root = document.createElement("html");
    applyTheme("dark", root);
    expect(root.className).toBe("theme-dark");
    applyTheme("light", root);
    expect(root.className).toBe("theme-light");
    applyTheme("system", root);
    expect(root.className).toBe("");

    render(ThemeSwitch);
    await fireEvent.change(screen.getByTestId("theme-select"), { target: { value: "dark" } });
    expect(get(theme)).toBe("dark");
    expect(document.documentElement.classList.contains("theme-dark")).toBe(true);
    theme.set("system");
    expect(document.documentElement.classList.contains("theme-dark")).toBe(false);
  });
});
