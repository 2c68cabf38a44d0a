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

  it("says when the answer could not be saved, and why, and otherwise says nothing", () => {
    const { unmount } = render(AnswerView, { record: record() });
    expect(screen.queryByTestId("not-saved")).toBeNull();
    unmount();
    render(AnswerView, {
      record: record({
        notSaved:
          "cannot write /data/history/a1.json: No space left on device. The answer stays open until the app closes: export it to keep it",
      }),
    });
    expect(screen.getByTestId("not-saved")).toHaveTextContent(
      "This answer could not be saved: cannot write /data/history/a1.json: No space left on device.",
    );
    expect(screen.getByTestId("not-saved")).toHaveTextContent("export it to keep it");
  });

  it("says when and why the answer stops early, and otherwise says nothing", () => {
    const { unmount } = render(AnswerView, { record: record() });
    expect(screen.queryByTestId("cut-short")).toBeNull();
    unmount();
    render(AnswerView, {
      record: record({
        answer: answer({
          cut_short:
            "the language model failed while generating candidates: the generator server at http://lab:8080 stopped answering",
        }),
      }),
    });
    const note = screen.getByTestId("cut-short");
    expect(note).toHaveTextContent("The answer stops after 1 segment:");
    expect(note).toHaveTextContent("http://lab:8080 stopped answering");
    expect(note).toHaveTextContent("ask again to write the rest");
  });

  it("says which segment a re-run would write on a path the answer did not continue", () => {
    const { unmount } = render(AnswerView, { record: record() });
    expect(screen.queryByTestId("rerun-note")).toBeNull();
    unmount();
    render(AnswerView, { record: record({ unexploredSegment: 2 }) });
    const note = screen.getByTestId("rerun-note");
    expect(note).toHaveTextContent("would write segment 3 on a path this answer did not continue");
    expect(note).toHaveTextContent("the best path the run explored");
  });

  it("says where a candidate continued its passage or left earlier passages out", () => {
    const seg = answer().segments[0];
    const shown = answer({
      segments: [
        {
          ...seg,
          candidates: [
            candidate({
              continued: true,
              evidence_issup: {
                "[Fully supported]": 0.9,
                "[Partially supported]": 0.05,
                "[No support / Contradictory]": 0.05,
              },
              passages_dropped: 2,
            }),
            ...seg.candidates.slice(1),
          ],
        },
      ],
    });
    render(AnswerView, { record: record({ answer: shown }) });
    expect(screen.getByTestId("candidate-continued")).toHaveTextContent(
      "IsRel carried from the segment before, and the passage's IsSup counts toward the answer's rank",
    );
    expect(screen.getByTestId("candidate-dropped")).toHaveTextContent(
      "2 earlier passages left out of its prompt",
    );
  });

  it("says when the run chose to retrieve and the library had nothing", () => {
    render(AnswerView, {
      record: record({
        answer: answer({ retrieve: { p_retrieve: 0.83, retrieved: false, found_nothing: true } }),
      }),
    });
    expect(screen.getByTestId("badge-retrieve")).toHaveTextContent(
      "Chose to retrieve, found nothing (p 0.83 > δ 0.20)",
    );
  });

  it("says which generator wrote the answer", () => {
    render(AnswerView, {
      record: record({
        answer: answer({
          generator: {
            kind: "server",
            model: "m.gguf",
            runtime: "llama.cpp b1",
            url: "http://lab:8080",
          },
        }),
      }),
    });
    expect(screen.getByTestId("answer-generator")).toHaveTextContent(
      "Written on the server http://lab:8080 (llama.cpp b1) by m.gguf",
    );
  });

  it("says under the answer and in the inspector which numerics the scores came from", async () => {
    render(AnswerView, {
      record: record({
        answer: answer({
          generator: {
            kind: "local",
            model: "/m/selfrag_llama2_7b.q4_k_m.gguf",
            runtime: "cpu",
            cache_precision: "q8",
            dummy_prefix: "text-start",
          },
          embedder: { model: "facebook/contriever-msmarco@r", precision: "int8", device: "cpu" },
        }),
      }),
    });
    const line =
      "Written on this computer (CPU) by selfrag_llama2_7b.q4_k_m.gguf · KV cache 8-bit · embedder int8";
    expect(screen.getByTestId("answer-generator")).toHaveTextContent(line);
    await fireEvent.click(screen.getByText(/and why this one won/));
    expect(screen.getByTestId("inspector-provenance")).toHaveTextContent(`Scores from: ${line}`);
  });

  it("lists every token probability in each badge's tooltip", () => {
    render(AnswerView, { record: record() });

    const tip = (id: string) =>
      document.getElementById(screen.getByTestId(id).getAttribute("aria-describedby") ?? "");
    const sup = tip("badge-issup");
    expect(sup).toHaveAttribute("role", "tooltip");
    expect(sup).toHaveTextContent("[Fully supported] 0.900");
    expect(sup).toHaveTextContent("[Partially supported] 0.070");
    expect(sup).toHaveTextContent("[No support / Contradictory] 0.030");
    expect(tip("badge-isuse")?.querySelectorAll(".row")).toHaveLength(5);
    expect(tip("badge-retrieve")).toHaveTextContent("[Retrieval] 0.830");
    expect(tip("badge-retrieve")).toHaveTextContent("p = 0.83 > δ 0.20 → retrieving");
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

  it("shows the printed page number beside the PDF page in the preview and the evidence panel", async () => {
    const labelled = record();
    labelled.answer.passages[0] = { ...labelled.answer.passages[0], page: 3, page_label: "117" };
    render(AnswerView, { record: labelled });
    const preview = document.getElementById(
      screen.getByTestId("citation-1").getAttribute("aria-describedby") ?? "",
    );
    expect(preview).toHaveTextContent(", p. 117 (PDF page 3)");
    await fireEvent.click(screen.getByTestId("citation-1"));
    const panel = screen.getByTestId("passage-panel");
    expect(within(panel).getByTestId("passage-page")).toHaveTextContent("117 (PDF page 3)");
    // The viewer opens the file's page.
    expect(within(panel).getByTestId("open-source")).toHaveTextContent(
      "Open in default app (PDF page 3)",
    );
  });

  it("says in the evidence panel that a passage was read from a scan by OCR", async () => {
    const scanned = record();
    scanned.answer.passages[0] = { ...scanned.answer.passages[0], ocr_confidence: 0.91 };
    render(AnswerView, { record: scanned });
    await fireEvent.click(screen.getByTestId("citation-1"));
    expect(screen.getByTestId("passage-ocr")).toHaveTextContent("OCR text, confidence 91%");
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

  it("lists the candidates with their score broken down and says why the winner won", async () => {
    render(AnswerView, { record: record() });
    await fireEvent.click(screen.getByText(/Candidates \(2\) and why this one won/));

    const items = screen.getAllByTestId("candidate");
    expect(items).toHaveLength(2);
    expect(within(items[0]).getByTestId("winner")).toBeInTheDocument();
    expect(within(items[1]).queryByTestId("winner")).toBeNull();
    // p_LM, w_rel·s_rel, w_sup·s_sup, w_use·s_use, f
    expect(items[0]).toHaveTextContent(/0\.62\s*0\.92\s*0\.94\s*0\.45\s*2\.922/);
    expect(items[1]).toHaveTextContent("from [2] Notes on retrieval");
    expect(screen.getByTestId("why-chosen")).toHaveTextContent(
      "It beats the candidate from [2] Notes on retrieval by 0.522 in f, mostly from w_sup·s_sup (+0.385).",
    );
  });

  it("marks the candidates the trace excludes, with the verdict the core recorded", async () => {
    const base = answer();
    const [first, second] = base.segments[0].candidates;
    const strict = {
      ...base,
      settings: { ...base.settings, hard_constraints: true },
      segments: [
        {
          ...base.segments[0],
          candidates: [first, { ...second, violates: ["unsupported" as const] }],
          excluded: [1],
        },
      ],
    };
    render(AnswerView, { record: record({ answer: strict }) });
    await fireEvent.click(screen.getByText(/Candidates \(2\) and why this one won/));
    const items = screen.getAllByTestId("candidate");
    expect(within(items[0]).queryByTestId("candidate-excluded")).toBeNull();
    expect(within(items[1]).getByTestId("candidate-excluded")).toHaveTextContent(
      "dropped by hard constraints: judged unsupported",
    );
    expect(screen.getByTestId("why-chosen")).toHaveTextContent(
      "It was the only candidate left. The hard constraints dropped 1 (judged unsupported).",
    );
  });

  it("marks each segment's support in the answer text with icon and words", () => {
    render(AnswerView, { record: record() });
    const mark = screen.getByTestId("support-1");
    expect(mark).toHaveTextContent("✓");
    expect(mark).toHaveTextContent("Fully supported");
    expect(mark).toHaveAccessibleName("IsSup: Fully supported, s_sup 0.94");
  });

  it("toggles the inspector with Ctrl+I and opens source [n] with Ctrl+n", async () => {
    render(AnswerView, { record: record() });
    const details = screen.getByTestId("candidates") as HTMLDetailsElement;
    expect(details.open).toBe(false);
    await fireEvent.keyDown(window, { key: "i", ctrlKey: true });
    expect(details.open).toBe(true);
    await fireEvent.keyDown(window, { key: "2", ctrlKey: true });
    expect(screen.getByTestId("passage-panel")).toHaveTextContent("Notes on retrieval");
  });
});
