import { describe, expect, it } from "vitest";
import { foldText, markedText, markOnPage, utf16Span } from "$lib/sourcemark";

describe("markOnPage", () => {
  it("marks the passage across items however the two readers space and break it", () => {
    const items = [
      "Running head, page 117",
      "Self-RAG trains a model to re-",
      "trieve on demand and to criti",
      "que its output with reflection",
      "tokens. Another sentence follows.",
    ];
    const passage =
      "Self-RAG trains a model to retrieve on demand and to critique its output with reflection tokens.";
    const mark = markOnPage(items, passage);
    expect(mark?.match).toBe("exact");
    expect(mark?.ranges).toEqual([
      { item: 1, start: 0, end: 29 },
      { item: 2, start: 0, end: 29 },
      { item: 3, start: 0, end: 30 },
      { item: 4, start: 0, end: 6 },
    ]);
    expect(foldText(markedText(items, mark?.ranges ?? []))).toBe(foldText(passage));
  });

  it("folds ligatures, case and accents' compatibility forms as one", () => {
    const items = ["The eﬃcient ﬁlter", "is ﬁne."];
    const mark = markOnPage(items, "the EFFICIENT filter is fine");
    expect(mark?.match).toBe("exact");
    expect(markedText(items, mark?.ranges ?? [])).toBe("The eﬃcient ﬁlter is ﬁne");
  });

  it("finds a passage whose accents the library composed from TeX's separate accent glyphs", () => {
    const items = ["Trabalhos de Conclus˜ao de Curso, Teses e Disserta¸c˜oes,", "por Vin´ıcius"];
    const mark = markOnPage(
      items,
      "Trabalhos de Conclusão de Curso, Teses e Dissertações, por Vinícius",
    );
    expect(mark?.match).toBe("exact");
  });

  it("falls back to the passage's two ends where the readers differ inside it", () => {
    const head = "Reflection tokens are special tokens that signal the need for retrieval";
    const tail = "and confirm the output's relevance, support or completeness of the answer";
    const items = [head, "[a formula pdf.js reads differently]", tail];
    const passage = `${head} (a formula our reader wrote) ${tail}`;
    const mark = markOnPage(items, passage);
    expect(mark?.match).toBe("ends");
    expect(mark?.ranges.map((r) => r.item)).toEqual([0, 1, 2]);
  });

  it("finds nothing rather than something else", () => {
    expect(markOnPage(["An unrelated page of text."], "Self-RAG critiques itself.")).toBeNull();
    expect(markOnPage(["Anything"], " — ")).toBeNull();
    // Two ends far apart are not one passage.
    const head = "a".repeat(30);
    const tail = "b".repeat(30);
    expect(markOnPage([head, "x".repeat(500), tail], `${head}yy${tail}`)).toBeNull();
  });
});

describe("utf16Span", () => {
  it("turns the library's character offsets into JavaScript string indices", () => {
    const text = "𝐀 note: 😀 then the passage.";
    const [start, end] = utf16Span(text, 10, 27);
    expect(text.slice(start, end)).toBe("then the passage.");
    expect(utf16Span("abc", 0, 3)).toEqual([0, 3]);
    expect(utf16Span("abc", 1, 99)).toEqual([1, 3]);
  });
});
