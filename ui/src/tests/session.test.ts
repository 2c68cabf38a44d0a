// The answer session on its own: a rerank reply overtaken by a newer request is dropped, and a
// saved answer cannot replace one being written. The IPC module is mocked.

import { beforeEach, describe, expect, it, vi } from "vitest";

import * as ipc from "$lib/ipc";
import type { AnswerRecord } from "$lib/ipc/types";
import { AnswerSession } from "$lib/session.svelte";
import { defaultSettings } from "$lib/settings";
import { record, reranked } from "./fixtures";

vi.mock("$lib/ipc", () => ({ ask: vi.fn(), cancelAsk: vi.fn(), rerank: vi.fn() }));
const mocked = vi.mocked(ipc);

function hooks() {
  return { onstart: vi.fn(), onanswered: vi.fn(), onaskfailed: vi.fn(), onerror: vi.fn() };
}

beforeEach(() => {
  vi.resetAllMocks();
});

describe("the answer session", () => {
  it("keeps the newest rerank when replies arrive out of order", async () => {
    const session = new AnswerSession(hooks());
    session.reopen(record());
    let first!: (r: AnswerRecord) => void;
    mocked.rerank.mockReturnValueOnce(new Promise((resolve) => (first = resolve)));
    const newest = reranked();
    mocked.rerank.mockResolvedValueOnce(newest);
    session.rerank({ rel: 1, sup: 0.2, use: 0.5 }, false);
    session.rerank({ rel: 1, sup: 1.5, use: 0.5 }, false);
    await vi.waitFor(() => expect(session.record?.answer.answer).toBe(newest.answer.answer));
    first(record({ id: "stale" }));
    await new Promise((r) => setTimeout(r, 0));
    expect(session.record?.id).toBe(newest.id);
    expect(session.record?.answer.answer).toBe(newest.answer.answer);
  });

  it("does not reopen a saved answer while a question runs, and forgets only its own", async () => {
    const session = new AnswerSession(hooks());
    let answer!: (r: AnswerRecord) => void;
    mocked.ask.mockReturnValueOnce(new Promise((resolve) => (answer = resolve)));
    const asking = session.ask("Why?", defaultSettings(), defaultSettings);
    expect(session.running).toBe(true);
    expect(session.reopen(record({ id: "old" }))).toBe(false);
    answer(record({ id: "new" }));
    await asking;
    expect(session.record?.id).toBe("new");
    expect(session.forget("other")).toBe(false);
    expect(session.forget("new")).toBe(true);
    expect(session.record).toBeNull();
  });
});
