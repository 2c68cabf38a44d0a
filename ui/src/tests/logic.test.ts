import { describe, expect, it } from "vitest";

import { toAppError } from "$lib/errors";
import {
  excerpt,
  fileName,
  generatorLine,
  ocrText,
  pageText,
  provenanceLine,
  secondsText,
  timingsLine,
} from "$lib/format";
import { etaText, jobSummary, nextJob, startJob } from "$lib/indexing";
import type { EmbedderInfo, GeneratorInfo, IndexEvent } from "$lib/ipc/types";
import { nextStatus, retrieveReason, startRun } from "$lib/progress";
import { isUseBadge, scoreBreakdown } from "$lib/reflection";
import { defaultSettings } from "$lib/settings";
import { isCommand } from "$lib/shortcuts";
import { candidate } from "./fixtures";
import provenanceJson from "./golden/provenance.json";

describe("status line", () => {
  it("explains every retrieve mode", () => {
    expect(retrieveReason(0.1, 0.2, "adaptive", false)).toBe(
      "p = 0.10 ≤ δ 0.20 → answering without retrieval",
    );
    expect(retrieveReason(0.1, 0.2, "always", true)).toBe("mode always (p = 0.10) → retrieving");
    expect(retrieveReason(0.9, 0.2, "never", false)).toBe(
      "mode never (p = 0.90) → answering without retrieval",
    );
  });

  it("names the segment in long form and restarts the candidate count per segment", () => {
    let s = startRun(true);
    s = nextStatus(s, { kind: "candidates_started", segment: 1, count: 2 });
    s = nextStatus(s, { kind: "candidate_finished", segment: 1, index: 1, count: 2 });
    expect(s.line).toBe("Segment 2: Writing candidates 1/2");
    s = nextStatus(s, { kind: "candidates_started", segment: 2, count: 2 });
    expect(s.line).toBe("Segment 3: Writing candidates 0/2");
  });
});

describe("indexing summary", () => {
  it("counts files and passages, and lists skipped and failed files", () => {
    const events: IndexEvent[] = [
      { kind: "started", total: 3, resumed: [] },
      { kind: "fileIndexed", path: "/a.md", passages: 2, notes: [] },
      {
        kind: "fileIndexed",
        path: "C:\\docs\\b.pdf",
        passages: 5,
        notes: ["page 2 has no text layer (scanned?)"],
      },
      { kind: "fileSkipped", path: "/c.md", reason: "unchanged" },
      {
        kind: "finished",
        indexed: 2,
        skipped: 1,
        failed: 0,
        removed: 0,
        cancelled: false,
        paused: false,
      },
    ];
    const job = events.reduce(nextJob, startJob());
    expect(jobSummary(job)).toBe("Indexed 2 files, 7 passages, 1 skipped");
    expect(job.notes).toEqual([
      { path: "C:\\docs\\b.pdf", reason: "page 2 has no text layer (scanned?)" },
    ]);
    expect(job.skipped).toEqual([{ path: "/c.md", reason: "unchanged" }]);
  });
});

describe("indexing progress", () => {
  it("shows the rate and the time left while running, and removals and a stop when done", () => {
    let job = nextJob(startJob(), { kind: "started", total: 400, resumed: ["/papers"] });
    job = nextJob(job, { kind: "fileStarted", path: "/papers/x.pdf" });
    job = nextJob(job, {
      kind: "progress",
      done: 100,
      total: 400,
      passages: 900,
      filesPerSecond: 2.5,
      etaSeconds: 120,
    });
    expect(job.resumed).toEqual(["/papers"]);
    expect(jobSummary(job)).toBe("Indexing x.pdf (101/400)… · 2.5 files/s, 2 min left");
    job = nextJob(job, { kind: "fileIndexed", path: "/papers/x.pdf", passages: 3, notes: [] });
    job = nextJob(job, { kind: "removed", path: "/papers/gone.pdf" });
    job = nextJob(job, {
      kind: "finished",
      indexed: 1,
      skipped: 0,
      failed: 0,
      removed: 1,
      cancelled: true,
      paused: false,
    });
    expect(jobSummary(job)).toBe(
      "Stopped after indexing 1 file, 3 passages, 1 removed (files gone)",
    );
    expect(jobSummary({ ...job, paused: true })).toBe(
      "Paused after indexing 1 file, 3 passages, 1 removed (files gone)",
    );
  });

  it("says which step has lasted, on which file, until the job moves on", () => {
    let job = nextJob(startJob(), { kind: "started", total: 63, resumed: [] });
    job = nextJob(job, { kind: "fileStarted", path: "/papers/stuck.pdf" });
    job = nextJob(job, {
      kind: "slowStep",
      path: "/papers/stuck.pdf",
      step: "parsing in the worker process",
      seconds: 40,
    });
    expect(jobSummary(job)).toBe(
      "Indexing stuck.pdf (1/63): still parsing in the worker process after 40 s. Stop ends the job; what is indexed stays.",
    );
    job = nextJob(job, { kind: "fileFailed", path: "/papers/stuck.pdf", error: "ran out of time" });
    expect(job.slow).toBeNull();
    job = nextJob(job, {
      kind: "slowStep",
      path: null,
      step: "compacting and indexing the library's tables",
      seconds: 20,
    });
    expect(jobSummary(job)).toBe(
      "Indexing still compacting and indexing the library's tables after 20 s. Stop ends the job; what is indexed stays.",
    );
  });

  it("says how much of a long file is searchable while it is written", () => {
    let job = nextJob(startJob(), { kind: "started", total: 1, resumed: [] });
    job = nextJob(job, { kind: "fileStarted", path: "/books/long.pdf" });
    expect(jobSummary(job)).toBe("Indexing long.pdf (1/1)…");
    job = nextJob(job, { kind: "fileSearchable", path: "/books/long.pdf", passages: 16, of: 900 });
    job = nextJob(job, { kind: "fileSearchable", path: "/books/long.pdf", passages: 32, of: 900 });
    expect(jobSummary(job)).toBe("Indexing long.pdf (1/1)… · 32 of 900 passages searchable");
    const pausedEnd: IndexEvent = {
      kind: "finished",
      indexed: 0,
      skipped: 0,
      failed: 0,
      removed: 0,
      cancelled: true,
      paused: true,
    };
    const paused = nextJob(job, pausedEnd);
    expect(jobSummary(paused)).toBe(
      "Paused after indexing 0 files, 0 passages, long.pdf partly (32 of 900 passages)",
    );
    // The end told again (the stream's last event, then the job's result) keeps it.
    const again = nextJob(paused, pausedEnd);
    expect(jobSummary(again)).toBe(jobSummary(paused));
    job = nextJob(job, { kind: "fileStarted", path: "/books/next.md" });
    expect(job.currentSearchable).toBeNull();
  });

  it("says the time left in seconds, minutes or hours", () => {
    expect(etaText(null)).toBe("");
    expect(etaText(0.2)).toBe("1 s left");
    expect(etaText(42)).toBe("42 s left");
    expect(etaText(600)).toBe("10 min left");
    expect(etaText(3900)).toBe("1 h 5 min left");
  });
});

describe("reflection labels", () => {
  it("words the core's verdict", () => {
    const third = candidate({
      isuse: {
        "[Utility:1]": 0.1,
        "[Utility:2]": 0.1,
        "[Utility:3]": 0.6,
        "[Utility:4]": 0.1,
        "[Utility:5]": 0.1,
      },
      verdicts: { isrel: "relevant", issup: "fully", isuse: 3 },
    });
    expect(isUseBadge(third).label).toBe("Utility 3");
    expect(isUseBadge(third).tone).toBe("partial");
  });

  it("leaves p_LM out of the breakdown when it does not count", () => {
    expect(scoreBreakdown(candidate(), { rel: 1, sup: 1, use: 0.5 }, false)).toBe(
      "1.00·s_rel 0.92 + 1.00·s_sup 0.94 + 0.50·s_use 0.90 = 2.92",
    );
  });
});

describe("helpers", () => {
  it("hands out a fresh copy of the Rust defaults each time", () => {
    const mine = defaultSettings();
    mine.weights.sup = 9;
    expect(defaultSettings().weights.sup).toBe(1);
  });

  it("wraps whatever a call rejected with as {code, message}", () => {
    expect(toAppError({ code: "unknown_answer", message: "no such answer" })).toEqual({
      code: "unknown_answer",
      message: "no such answer",
    });
    // A code this build does not know keeps its message and is shown as unknown.
    expect(toAppError({ code: "from_the_future", message: "new" })).toEqual({
      code: "unknown",
      message: "new",
    });
    expect(toAppError("command ask not found")).toEqual({
      code: "unknown",
      message: "command ask not found",
    });
    expect(toAppError(new Error("boom"))).toEqual({ code: "unknown", message: "boom" });
  });

  it("shortens text at a word and names files on any platform", () => {
    expect(excerpt("one two three four", 10)).toBe("one two…");
    expect(fileName("C:\\docs\\b.pdf")).toBe("b.pdf");
    expect(fileName("/home/a/c.md")).toBe("c.md");
  });

  it("gives a page as printed, with its place in the file where the two differ", () => {
    expect(pageText({ page: 3, page_label: "117" })).toBe("117 (PDF page 3)");
    expect(pageText({ page: 2, page_label: "ii" })).toBe("ii (PDF page 2)");
    expect(pageText({ page: 3 })).toBe("3");
    expect(pageText({ page: null })).toBeNull();
  });

  it("says a passage was read from a scan by OCR, with the engine's confidence", () => {
    expect(ocrText({ ocr_confidence: 0.874 })).toBe("OCR text, confidence 87%");
    expect(ocrText({})).toBeNull();
  });
});

describe("isCommand", () => {
  const key = (init: KeyboardEventInit) => new KeyboardEvent("keydown", init);

  it("accepts Ctrl or ⌘ with the letter, in either case", () => {
    expect(isCommand(key({ key: "e", ctrlKey: true }), "e")).toBe(true);
    expect(isCommand(key({ key: "K", metaKey: true }), "k")).toBe(true);
  });

  it("rejects the bare letter, other letters and extra modifiers", () => {
    expect(isCommand(key({ key: "e" }), "e")).toBe(false);
    expect(isCommand(key({ key: "k", ctrlKey: true }), "e")).toBe(false);
    expect(isCommand(key({ key: "E", ctrlKey: true, shiftKey: true }), "e")).toBe(false);
    expect(isCommand(key({ key: "e", ctrlKey: true, altKey: true }), "e")).toBe(false);
  });

  it("uses the physical key on a layout without Latin letters", () => {
    expect(isCommand(key({ key: "у", code: "KeyE", ctrlKey: true }), "e")).toBe(true);
    expect(isCommand(key({ key: "л", code: "KeyK", ctrlKey: true }), "e")).toBe(false);
  });
});

describe("which generator wrote the answer", () => {
  it("names this computer's device or the server's address and build", () => {
    expect(generatorLine(undefined)).toBeNull();
    expect(
      generatorLine({ kind: "local", model: "selfrag_llama2_7b.q4_k_m.gguf", runtime: "cpu" }),
    ).toBe("Written on this computer (CPU) by selfrag_llama2_7b.q4_k_m.gguf");
    expect(
      generatorLine({
        kind: "server",
        model: "/models/selfrag_llama2_13b.Q4_K_M.gguf",
        runtime: "llama.cpp b6800-abc1234",
        url: "http://gpu-box:8080",
      }),
    ).toBe(
      "Written on the server http://gpu-box:8080 (llama.cpp b6800-abc1234) by selfrag_llama2_13b.Q4_K_M.gguf",
    );
  });
});

describe("which numerics an answer's scores came from", () => {
  it("writes the line the exports write, for every kind of trace", () => {
    // Written by src-tauri's bindings test from `selfrag_export::provenance`.
    const cases = provenanceJson as {
      generator: GeneratorInfo | null;
      embedder: EmbedderInfo | null;
      line: string | null;
    }[];
    expect(cases.length).toBeGreaterThan(20);
    for (const { generator, embedder, line } of cases) {
      expect(
        provenanceLine({ generator: generator ?? undefined, embedder: embedder ?? undefined }),
      ).toBe(line);
    }
  });
});

describe("where an answer's time went", () => {
  const local = {
    load_seconds: 2.1,
    decide_seconds: 0.42,
    search_seconds: 0.06,
    generate_seconds: 14.5,
    prefill_seconds: 9.8,
    decode_seconds: 4.6,
    critique_seconds: 0.002,
    answer_seconds: 15.1,
  };

  it("lists the steps in order, loading only when the model was loaded for it", () => {
    expect(timingsLine(undefined)).toBeNull();
    expect(timingsLine(local)).toBe(
      "Where the time went: loading the model 2.1 s · deciding 0.4 s · searching 60 ms · reading the passages 9.8 s · writing 4.6 s · critique 2 ms",
    );
    expect(timingsLine({ ...local, load_seconds: 0.0001, answer_seconds: 9.5 })).toBe(
      "Where the time went: deciding 0.4 s · searching 60 ms · reading the passages 9.8 s · writing 4.6 s · critique 2 ms",
    );
  });

  it("shows a server's generation as one step", () => {
    const server = {
      ...local,
      load_seconds: 0,
      prefill_seconds: undefined,
      decode_seconds: undefined,
    };
    expect(timingsLine(server)).toBe(
      "Where the time went: deciding 0.4 s · searching 60 ms · writing 15 s · critique 2 ms",
    );
    expect([0.0004, 0.099, 0.1, 9.94, 10.4].map(secondsText)).toEqual([
      "0 ms",
      "99 ms",
      "0.1 s",
      "9.9 s",
      "10 s",
    ]);
  });
});
