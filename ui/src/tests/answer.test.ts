import { fireEvent, render, screen, within } from "@testing-library/svelte";
import { describe, expect, it } from "vitest";

import AnswerView from "$lib/components/AnswerView.svelte";
import { answer, candidate, record } from "./fixtures";

describe("AnswerView", () => {
  it("shows the answer text, its citation and the four reflection badges", () => {
    render(AnswerView, { record: record() });

    const shown = screen.getByTestId("answer");
    expect(shown).toHaveTextContent("Self-RAG retrieves passages only when it needs them.");
    expect(screen.getByTestId("citation-1")).toHaveTextContent("[1]");

    expect(screen.getByTestId("badge-retrieve")).toHaveTextContent("Retrieved (p 0.83 > δ 0.20)");
    expect(screen.getByTestId("badge-isrel")).toHaveTextContent("Relevant");
    expect(screen.getByTestId("badge-isrel")).toHaveTextContent("s_rel 0.92");
    expect(screen.getByTestId("badge-issup")).toHaveTextContent("Fully supported");
    expect(screen.getByTestId("badge-isuse")).toHaveTextContent("Utility 5");
    expect(screen.getByTestId("badge-isuse")).toHaveTextContent("s_use 0.90");
  });

  it("lists every token probability in each badge's tooltip", () => {
    render(AnswerView, { record: record() });

    const sup = screen.getByTestId("badge-issup").getAttribute("title") ?? "";
    expect(sup).toContain("[Fully supported] 0.900");
    expect(sup).toContain("[Partially supported] 0.070");
    expect(sup).toContain("[No support / Contradictory] 0.030");
    const use = screen.getByTestId("badge-isuse").getAttribute("title") ?? "";
    expect(use.split("\n")).toHaveLength(5);
    expect(screen.getByTestId("badge-retrieve").getAttribute("title")).toContain(
      "[Retrieval] 0.830",
    );
  });

  it("says when there was no retrieval and when the model emitted no IsSup", () => {
    const base = answer();
    const quiet = candidate({ passage: null, isrel: null, issup: null, isuse: null });
    render(AnswerView, {
      record: record({
        answer: {
          ...base,
          retrieve: { p_retrieve: 0.1, retrieved: false },
          passages: [],
          segments: [
            { text: "Paris.", citation: null, chosen: 0, retrieve: null, candidates: [quiet] },
          ],
        },
      }),
    });

    expect(screen.getByTestId("badge-retrieve")).toHaveTextContent(
      "No retrieval (p 0.10 ≤ δ 0.20)",
    );
    expect(screen.getByTestId("badge-issup")).toHaveTextContent("—");
    expect(screen.queryByTestId("citation-1")).toBeNull();
  });

  it("marks partial and missing support with an icon and words, not colour alone", () => {
    const base = answer();
    const partial = base.segments[0].candidates[1];
    render(AnswerView, {
      record: record({
        answer: { ...base, segments: [{ ...base.segments[0], chosen: 0, candidates: [partial] }] },
      }),
    });
    const badge = screen.getByTestId("badge-issup");
    expect(badge).toHaveTextContent("◐");
    expect(badge).toHaveTextContent("Partially supported");
  });

  it("opens the evidence panel with the whole passage when a citation is clicked", async () => {
    render(AnswerView, { record: record() });
    expect(screen.queryByTestId("passage-panel")).toBeNull();

    await fireEvent.click(screen.getByTestId("citation-1"));

    const panel = screen.getByTestId("passage-panel");
    const passage = answer().passages[0];
    expect(panel).toHaveTextContent(passage.title);
    expect(within(panel).getByTestId("passage-path")).toHaveTextContent(passage.path);
    expect(within(panel).getByTestId("passage-page")).toHaveTextContent("3");
    expect(within(panel).getByTestId("passage-text").textContent).toBe(passage.text);

    await fireEvent.keyDown(window, { key: "Escape" });
    expect(screen.queryByTestId("passage-panel")).toBeNull();
  });

  it("shows the passage title and the start of its text on hover", () => {
    render(AnswerView, { record: record() });
    const button = screen.getByTestId("citation-1");
    const tip = document.getElementById(button.getAttribute("aria-describedby") ?? "");
    expect(tip).toHaveAttribute("role", "tooltip");
    expect(tip).toHaveTextContent("Self-RAG: Learning to Retrieve, Generate, and Critique");
    expect(tip).toHaveTextContent("Self-RAG trains a single LM");
  });

  it("renders document text as text, never as HTML", async () => {
    const hostile = "<img src=x onerror=alert(1)> <b>bold</b>";
    const base = answer();
    const passages = [{ ...base.passages[0], title: "<i>t</i>", text: hostile }];
    const segments = [{ ...base.segments[0], text: `Answer ${hostile}` }];
    const { container } = render(AnswerView, {
      record: record({ answer: { ...base, passages, segments } }),
    });

    await fireEvent.click(screen.getByTestId("citation-1"));

    expect(screen.getByTestId("passage-text").textContent).toBe(hostile);
    expect(screen.getByTestId("answer")).toHaveTextContent("<img src=x onerror=alert(1)>");
    expect(container.querySelector("img")).toBeNull();
    expect(container.querySelector("b")).toBeNull();
    expect(container.querySelector("i")).toBeNull();
    expect(document.querySelector("img")).toBeNull();
  });

  it("lists the other candidates with their score breakdown and marks the winner", async () => {
    render(AnswerView, { record: record() });
    await fireEvent.click(screen.getByText(/Other candidates/));

    const items = screen.getAllByTestId("candidate");
    expect(items).toHaveLength(2);
    expect(within(items[0]).getByTestId("winner")).toBeInTheDocument();
    expect(within(items[1]).queryByTestId("winner")).toBeNull();
    expect(within(items[0]).getByTestId("score-breakdown")).toHaveTextContent(
      "p_LM 0.62 + 1.00·s_rel 0.92 + 1.00·s_sup 0.94 + 0.50·s_use 0.90 = 2.92",
    );
    expect(items[1]).toHaveTextContent("from [2] Notes on retrieval");
  });
});
