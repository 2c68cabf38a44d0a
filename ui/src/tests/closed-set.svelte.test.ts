import { fireEvent, render, screen, within } from "@testing-library/svelte";
import { tick } from "svelte";
import { beforeEach, describe, expect, it, vi } from "vitest";

import AnswerView from "$lib/components/AnswerView.svelte";
import AskBox from "$lib/components/AskBox.svelte";
import type { ClosedSetScores } from "$lib/ipc/types";
import { defaultSettings } from "$lib/settings";
import { answer, record } from "./fixtures";

const tauri = vi.hoisted(() => ({
  invoke: vi.fn(),
  Channel: class {
    onmessage: (m: unknown) => void = () => {};
  },
}));
vi.mock("@tauri-apps/api/core", () => ({ invoke: tauri.invoke, Channel: tauri.Channel }));

function scores(overrides: Partial<ClosedSetScores> = {}): ClosedSetScores {
  return {
    kind: "multiple_choice",
    question: "Which is a mammal?",
    options: [
      { label: "A", text: "whale", score: 3.6, candidates: [2, 3] },
      { label: "B", text: "shark", score: 3.65, candidates: [0] },
      { label: "C", text: "trout", score: 0, candidates: [] },
    ],
    chosen: 1,
    ...overrides,
  };
}

describe("a multiple-choice answer", () => {
  beforeEach(() => {
    tauri.invoke.mockReset();
    tauri.invoke.mockResolvedValue(record());
  });

  it("shows the question as asked and every option with its score, the chosen one marked", () => {
    const asked = answer({
      question: "Given three answer candidates, A, B and C, choose the best answer choice. …",
      closed_set: scores(),
    });
    render(AnswerView, { record: record({ answer: asked }) });
    expect(screen.getByRole("heading", { level: 2 })).toHaveTextContent(/^Which is a mammal\?$/);
    const shown = screen.getByTestId("closed-set");
    expect(within(shown).getAllByRole("listitem")).toHaveLength(3);
    const b = screen.getByTestId("option-B");
    // Named by the sources the candidates were written from, as the inspector cites them.
    expect(b).toHaveTextContent("B shark 3.65 from [1] chosen");
    expect(screen.getByTestId("option-A")).toHaveTextContent(
      "A whale 3.60 from candidate 3, candidate 4",
    );
    expect(screen.getByTestId("option-A")).not.toHaveTextContent("chosen");
    expect(screen.getByTestId("option-C")).toHaveTextContent("no candidate names it");
    expect(screen.queryByTestId("no-option")).toBeNull();
  });

  it("says when no candidate named an option, and shows nothing for an open question", () => {
    const { unmount } = render(AnswerView, {
      record: record({ answer: answer({ closed_set: scores({ chosen: null }) }) }),
    });
    expect(screen.getByTestId("no-option")).toHaveTextContent("No candidate names an option.");
    unmount();
    render(AnswerView, { record: record() });
    expect(screen.queryByTestId("closed-set")).toBeNull();
  });

  it("sends the options with the question", async () => {
    const ipc = await import("$lib/ipc");
    await ipc.ask("Which is a mammal?", defaultSettings(), () => {}, ["whale", "shark"]);
    const [command, args] = tauri.invoke.mock.lastCall as [string, Record<string, unknown>];
    expect(command).toBe("ask");
    expect(args.options).toEqual(["whale", "shark"]);
    await ipc.ask("Why?", defaultSettings(), () => {});
    expect((tauri.invoke.mock.lastCall as [string, Record<string, unknown>])[1].options).toBe(
      undefined,
    );
  });

  it("takes the options one a line, and not for a long answer", async () => {
    const props = $state({
      question: "Which is a mammal?",
      options: "",
      settings: defaultSettings(),
      running: false,
      disabled: null,
      onask: () => {},
      onstop: () => {},
    });
    render(AskBox, props);
    const input = screen.getByTestId("options-input") as HTMLTextAreaElement;
    const summary = screen.getByTestId("answer-options-summary");
    await fireEvent.input(input, { target: { value: "whale" } });
    expect(summary).toHaveTextContent(/^Answer options$/);
    await fireEvent.input(input, { target: { value: "whale\nshark" } });
    expect(props.options).toBe("whale\nshark");
    expect(input.disabled).toBe(false);
    // Folded away, the options still say the next question is multiple choice.
    expect(summary).toHaveTextContent("Answer options (2: the next question is multiple choice)");
    props.settings.long_form = true;
    await tick();
    expect(input.disabled).toBe(true);
    expect(screen.getByTestId("answer-options")).toHaveTextContent("Not with long answers.");
  });
});
