// Works in the UI: the labels (held equal to the Rust side's by golden/works.json), the full
// reference, the reference form's rules, a citation chip in both modes, the evidence panel's
// reference and "Open in Zotero", a library row's work line with its "Edit reference" form, and
// what "Add Zotero library…" reports.

import { render, screen, waitFor, within } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";

import App from "../App.svelte";
import Citation from "$lib/components/Citation.svelte";
import CitationSwitch from "$lib/components/CitationSwitch.svelte";
import LibraryPane from "$lib/components/LibraryPane.svelte";
import PassagePanel from "$lib/components/PassagePanel.svelte";
import StreamingAnswer from "$lib/components/StreamingAnswer.svelte";
import * as ipc from "$lib/ipc";
import type {
  DocumentInfo,
  IndexEvent,
  IndexFinished,
  Passage,
  ReferenceImport,
  Work,
} from "$lib/ipc/types";
import { LibraryController } from "$lib/library.svelte";
import {
  draftErrors,
  draftOf,
  formatAuthors,
  parseAuthors,
  parseDate,
  personRecord,
} from "$lib/workedit";
import {
  authorYear,
  authorYearCitation,
  collectionsOf,
  doiUrl,
  fullReference,
  inCollection,
  printedPage,
} from "$lib/works";
import {
  answer,
  deviceStatus,
  loadedSettings,
  localEmbedder,
  localLibrary,
  record,
  status,
} from "./fixtures";
import worksJson from "./golden/works.json";

vi.mock("$lib/ipc", (real) => import("./mock-ipc").then((m) => m.mockIpc(real)));
const mocked = vi.mocked(ipc);

/** selfrag-works' and selfrag-core's answers on a set of records (src-tauri's bindings test writes them). */
const golden = worksJson as unknown as {
  authorYear: { work: Work; label: string | null }[];
  printedPage: { passage: Passage; page: string | null }[];
  doiUrl: { doi: string; url: string }[];
};

/** "Marrow & Ødegård 1998" in Journal of Telemetry, from Zotero, with a guessed date. */
const TELEMETRY: Work = {
  kind: { value: "journalArticle", source: "referenceManager" },
  title: { value: "Telemetry of the Ålesund fjord", source: "referenceManager" },
  authors: {
    value: [
      { kind: "person", family: "Marrow", given: "Ann" },
      { kind: "person", family: "Ødegård", given: "Bjørn" },
    ],
    source: "referenceManager",
  },
  date: { value: { year: 1998 }, source: "firstPageGuess" },
  container: { value: "Journal of Telemetry", source: "referenceManager" },
  volume: { value: "12", source: "referenceManager" },
  issue: { value: "3", source: "referenceManager" },
  pages: { value: "117--129", source: "referenceManager" },
  doi: { value: "10.1000/tel.1998.12", source: "referenceManager" },
  citationKey: { value: "marrow1998telemetry", source: "person" },
  zotero: { itemKey: "ABCD2345", attachmentKey: "EFGH6789", collections: ["Thesis/Chapter 2"] },
};

const PAPER: DocumentInfo = {
  id: "d1",
  path: "/home/ada/Zotero/storage/EFGH6789/marrow.pdf",
  title: "marrow",
  pages: 13,
  passages: 40,
  passagesExpected: null,
  work: TELEMETRY,
  workSources: ["firstPageGuess", "referenceManager", "person"],
};

const FINISHED: IndexFinished = {
  kind: "finished",
  indexed: 12,
  skipped: 0,
  failed: 0,
  removed: 0,
  cancelled: false,
  paused: false,
};

function passage(overrides: Partial<Passage> = {}): Passage {
  return {
    id: "d1#5",
    title: "marrow",
    path: PAPER.path,
    page: 3,
    page_label: "119",
    text: "The fjord's telemetry buoys report every ten minutes.",
    work: TELEMETRY,
    ...overrides,
  };
}

beforeEach(() => {
  vi.resetAllMocks();
  mocked.libraryStats.mockResolvedValue(undefined as never);
  mocked.watchedFolders.mockResolvedValue([]);
  mocked.pausedIndexing.mockResolvedValue([]);
});

describe("work labels", () => {
  it("say what the Rust side says: author–year, the printed page and the DOI's address", () => {
    expect(golden.authorYear.length).toBeGreaterThan(8);
    for (const { work, label } of golden.authorYear) {
      expect(authorYear(work), JSON.stringify(work)).toBe(label);
    }
    for (const { passage, page } of golden.printedPage) {
      expect(printedPage(passage)).toBe(page);
    }
    for (const { doi, url } of golden.doiUrl) {
      expect(doiUrl(doi)).toBe(url);
    }
  });

  it("cite a passage by author–year and printed page, or by its title's first words", () => {
    expect(authorYearCitation(passage())).toBe("Marrow & Ødegård 1998, p. 119");
    expect(authorYearCitation(passage({ page_label: undefined }))).toBe(
      "Marrow & Ødegård 1998, p. 3",
    );
    expect(
      authorYearCitation(
        passage({
          work: undefined,
          title: "Self-RAG: Learning to Retrieve, Generate, and Critique",
        }),
      ),
    ).toBe("Self-RAG: Learning to Retrieve,…, p. 119");
    expect(
      authorYearCitation(
        passage({ work: undefined, title: "Notes", page: null, page_label: undefined }),
      ),
    ).toBe("Notes");
  });

  it("place a work in a collection and in the collections holding it, as the search filter does", () => {
    expect(inCollection(TELEMETRY, "Thesis")).toBe(true);
    expect(inCollection(TELEMETRY, "Thesis/Chapter 2")).toBe(true);
    expect(inCollection(TELEMETRY, "Thes")).toBe(false);
    expect(inCollection({}, "Thesis")).toBe(false);
    expect(collectionsOf([TELEMETRY, null, {}])).toEqual(["Thesis", "Thesis/Chapter 2"]);
  });

  it("write the full reference with what the record has", () => {
    expect(fullReference(TELEMETRY)).toBe(
      "Ann Marrow & Bjørn Ødegård (1998). Telemetry of the Ålesund fjord. Journal of Telemetry, 12(3), pp. 117–129. https://doi.org/10.1000/tel.1998.12",
    );
    expect(
      fullReference({
        authors: {
          value: [
            { kind: "organisation", name: "World Health Organization" },
            { kind: "person", family: "Marrow", given: "" },
            { kind: "person", family: "Ødegård", given: "Bjørn" },
          ],
          source: "bibliographyFile",
        },
        title: { value: "Why?", source: "bibliographyFile" },
        publisher: { value: "WHO Press", source: "bibliographyFile" },
      }),
    ).toBe("World Health Organization, Marrow & Bjørn Ødegård (n.d.). Why? WHO Press.");
    expect(fullReference({})).toBeNull();
    expect(fullReference(undefined)).toBeNull();
  });
});

describe("the reference form's rules", () => {
  it("reads dates as YYYY, YYYY-MM or YYYY-MM-DD with a real month and day", () => {
    expect(parseDate("1998")).toEqual({ year: 1998 });
    expect(parseDate(" 1998-03 ")).toEqual({ year: 1998, month: 3 });
    expect(parseDate("2024-02-29")).toEqual({ year: 2024, month: 2, day: 29 });
    for (const bad of ["98", "1998-3", "1998-13", "2023-02-29", "1998/03/15", "March 1998"]) {
      expect(parseDate(bad), bad).toBeNull();
    }
  });

  it("writes authors one a line, a person as Family, Given and an organisation by name", () => {
    const authors = [
      { kind: "person", family: "van Beethoven", given: "Ludwig" },
      { kind: "person", family: "Marrow", given: "" },
      { kind: "organisation", name: "World Health Organization" },
    ] as const;
    const text = formatAuthors([...authors]);
    expect(text).toBe("van Beethoven, Ludwig\nMarrow,\nWorld Health Organization");
    expect(parseAuthors(`${text}\n\n`)).toEqual(authors);
  });

  it("refuses a malformed date, a DOI that is not one, and an author without a family name", () => {
    const draft = {
      ...draftOf(TELEMETRY),
      date: "15.03.1998",
      doi: "https://doi.org/10.1000/x",
      authors: ", Ann",
    };
    const errors = draftErrors(draft);
    expect(errors.date).toContain("YYYY, YYYY-MM or YYYY-MM-DD");
    expect(errors.doi).toContain("starts with 10.");
    expect(errors.authors).toContain("Author 1 has no family name");
    expect(draftErrors(draftOf(TELEMETRY))).toEqual({});
  });

  it("sends the fields changed now and the person's earlier edits, and nothing else", () => {
    const draft = { ...draftOf(TELEMETRY), title: "Telemetry of a fjord", date: "1999-04" };
    expect(personRecord(TELEMETRY, draft)).toEqual({
      title: { value: "Telemetry of a fjord", source: "person" },
      date: { value: { year: 1999, month: 4 }, source: "person" },
      citationKey: { value: "marrow1998telemetry", source: "person" },
    });
    // Emptying the person's own field drops their edit; emptying a source's keeps nothing.
    expect(personRecord(TELEMETRY, { ...draftOf(TELEMETRY), citationKey: "", volume: "" })).toEqual(
      {},
    );
  });
});

describe("citation chips", () => {
  it("read [n] by default and author–year with the printed page on request", async () => {
    const p = passage();
    const { unmount } = render(Citation, { n: 1, passage: p, onopen: () => {} });
    expect(screen.getByTestId("citation-1")).toHaveTextContent(/^\[1\]$/);
    unmount();

    render(Citation, { n: 1, passage: p, style: "authorYear", onopen: () => {} });
    const chip = screen.getByTestId("citation-1");
    expect(chip).toHaveTextContent(/^Marrow & Ødegård 1998, p\. 119$/);
    expect(chip).toHaveAccessibleName("Source 1: Marrow & Ødegård 1998, p. 119");
    // The hover shows the full reference.
    expect(screen.getByTestId("citation-1-reference")).toHaveTextContent(
      "Ann Marrow & Bjørn Ødegård (1998). Telemetry of the Ålesund fjord.",
    );
  });

  it("keeps the chip's box while the answer streams, and switches with Cite as", async () => {
    render(StreamingAnswer, {
      question: "How often do the buoys report?",
      draft: [{ text: "Every ten minutes.", citation: 1 }],
      run: null,
      citeAs: "authorYear",
    });
    expect(screen.getByTestId("draft-citation")).toHaveClass("chip");

    let style: "numbers" | "authorYear" = "numbers";
    const user = userEvent.setup();
    const { rerender } = render(CitationSwitch, {
      get style() {
        return style;
      },
      set style(next) {
        style = next;
      },
    });
    expect(screen.getByTestId("cite-as-numbers")).toHaveAttribute("aria-pressed", "true");
    await user.click(screen.getByTestId("cite-as-authorYear"));
    expect(style).toBe("authorYear");
    await rerender({ style });
    expect(screen.getByTestId("cite-as-authorYear")).toHaveAttribute("aria-pressed", "true");
  });
});

describe("evidence panel", () => {
  const props = (p: Passage) => ({
    answerId: "a1",
    n: 1,
    passage: p,
    segments: ["The buoys report every ten minutes."],
    candidate: undefined,
    onclose: () => {},
  });

  beforeEach(() => {
    mocked.passageSource.mockReturnValue(new Promise(() => {}));
    mocked.zoteroLink.mockResolvedValue(null);
  });

  it("shows the cited document's reference above the passage", () => {
    render(PassagePanel, props(passage()));
    const reference = screen.getByTestId("passage-reference");
    expect(within(reference).getByTestId("reference-authors")).toHaveTextContent(
      "Ann Marrow & Bjørn Ødegård (1998)",
    );
    expect(within(reference).getByTestId("reference-title")).toHaveTextContent(
      "Telemetry of the Ålesund fjord",
    );
    expect(within(reference).getByTestId("reference-where")).toHaveTextContent(
      "Journal of Telemetry, 12(3), pp. 117–129",
    );
    expect(within(reference).getByTestId("reference-doi")).toHaveTextContent(
      "https://doi.org/10.1000/tel.1998.12",
    );
  });

  it("opens the document in Zotero at the passage's page, by the address the Rust side builds", async () => {
    mocked.zoteroLink.mockResolvedValue("zotero://open-pdf/library/items/EFGH6789?page=3");
    mocked.openInZotero.mockResolvedValue("zotero://open-pdf/library/items/EFGH6789?page=3");
    const user = userEvent.setup();
    render(PassagePanel, props(passage()));
    const button = screen.getByTestId("open-in-zotero");
    expect(mocked.zoteroLink).toHaveBeenCalledWith(PAPER.path, 3);
    await waitFor(() =>
      expect(button).toHaveAttribute("title", "zotero://open-pdf/library/items/EFGH6789?page=3"),
    );
    await user.click(button);
    expect(mocked.openInZotero).toHaveBeenCalledWith(PAPER.path, 3);
    await waitFor(() =>
      expect(screen.getByTestId("open-status")).toHaveTextContent(
        "Opened in Zotero (zotero://open-pdf/library/items/EFGH6789?page=3)",
      ),
    );

    mocked.openInZotero.mockRejectedValue({
      code: "open_failed",
      message: "Zotero is not installed or does not handle zotero:// links",
    });
    await user.click(button);
    await waitFor(() =>
      expect(screen.getByTestId("open-error")).toHaveTextContent("Zotero is not installed"),
    );
  });

  it("offers no Zotero button for a document that did not come from Zotero", () => {
    const { zotero: _, ...notFromZotero } = TELEMETRY;
    render(PassagePanel, props(passage({ work: notFromZotero })));
    expect(screen.queryByTestId("open-in-zotero")).toBeNull();
    expect(mocked.zoteroLink).not.toHaveBeenCalled();
    // And a passage of a trace written before works existed has no reference.
    render(PassagePanel, props(answer().passages[1]));
    expect(screen.getAllByTestId("passage-reference")).toHaveLength(1);
  });
});

describe("library pane", () => {
  async function setup(documents: DocumentInfo[] = [PAPER]) {
    const errors: unknown[] = [];
    const library = new LibraryController((e) => errors.push(e));
    mocked.listDocuments.mockResolvedValue(documents);
    await library.refresh();
    render(LibraryPane, { library, dropActive: false, missingEmbedder: null, ready: true });
    return { library, errors };
  }

  it("shows each document's work under its title, a guess in muted italics, and its collections", async () => {
    await setup();
    const row = screen.getByTestId("document-item");
    const line = within(row).getByTestId("document-work");
    expect(line).toHaveTextContent("Marrow & Ødegård 1998 · Journal of Telemetry");
    expect(line).toHaveTextContent("doi:10.1000/tel.1998.12");
    // The year was guessed from the first page.
    const label = within(row).getByTestId("work-label");
    expect(label).toHaveClass("guessed");
    expect(label).toHaveAttribute("title", "guessed from the first page");
    expect(within(row).getByTestId("work-collections")).toHaveTextContent("Thesis/Chapter 2");
  });

  it("filters the list by Zotero collection, a collection holding the ones inside it", async () => {
    const other: DocumentInfo = {
      ...PAPER,
      id: "d2",
      path: "/home/ada/notes.md",
      title: "notes",
      work: { title: { value: "Notes", source: "fileMetadata" } },
      workSources: ["fileMetadata"],
    };
    await setup([PAPER, other]);
    const user = userEvent.setup();
    const filter = screen.getByTestId("collection-filter");
    expect(
      within(filter)
        .getAllByRole("option")
        .map((o) => o.textContent),
    ).toEqual(["All documents", "Thesis", "Thesis/Chapter 2"]);
    expect(screen.getAllByTestId("document-item")).toHaveLength(2);
    await user.selectOptions(filter, "Thesis");
    expect(screen.getAllByTestId("document-item")).toHaveLength(1);
    expect(screen.getByTestId("document-item")).toHaveTextContent("Marrow & Ødegård 1998");
    await user.selectOptions(filter, "");
    expect(screen.getAllByTestId("document-item")).toHaveLength(2);
  });

  it("offers no collection filter where no document came from Zotero", async () => {
    await setup([{ ...PAPER, work: {}, workSources: [] }]);
    expect(screen.queryByTestId("collection-filter")).toBeNull();
  });

  it("saves only the fields the person changed, with their earlier edits", async () => {
    const { library } = await setup();
    const user = userEvent.setup();
    mocked.setWork.mockResolvedValue(TELEMETRY);
    await user.click(screen.getByTestId("edit-work"));
    const form = screen.getByTestId("work-form");
    // Each field says where its value came from.
    expect(form).toHaveTextContent("Zotero");
    expect(form).toHaveTextContent("guessed from the first page");
    expect(form).toHaveTextContent("your edit");

    const title = within(form).getByTestId("work-title");
    await user.clear(title);
    await user.type(title, "Telemetry of a fjord");
    await user.selectOptions(within(form).getByTestId("work-kind"), "report");
    await user.click(within(form).getByTestId("save-work"));
    expect(mocked.setWork).toHaveBeenCalledTimes(1);
    expect(mocked.setWork).toHaveBeenCalledWith(PAPER.path, {
      kind: { value: "report", source: "person" },
      title: { value: "Telemetry of a fjord", source: "person" },
      citationKey: { value: "marrow1998telemetry", source: "person" },
    });
    // The library is read again, and the form closes.
    await waitFor(() => expect(screen.queryByTestId("work-form")).toBeNull());
    expect(mocked.listDocuments).toHaveBeenCalledTimes(2);
    expect(library.documents).toHaveLength(1);
  });

  it("refuses a bad date or DOI inline, and undoes the person's edits on request", async () => {
    await setup();
    const user = userEvent.setup();
    await user.click(screen.getByTestId("edit-work"));
    const form = screen.getByTestId("work-form");
    await user.clear(within(form).getByTestId("work-date"));
    await user.type(within(form).getByTestId("work-date"), "March 1998");
    await user.clear(within(form).getByTestId("work-doi"));
    await user.type(within(form).getByTestId("work-doi"), "doi:10.1000/x");
    await user.click(within(form).getByTestId("save-work"));
    expect(within(form).getByTestId("work-date-error")).toHaveTextContent(
      "Write the date as YYYY, YYYY-MM or YYYY-MM-DD",
    );
    expect(within(form).getByTestId("work-doi-error")).toHaveTextContent("starts with 10.");
    expect(within(form).getByTestId("work-date")).toHaveAttribute("aria-invalid", "true");
    expect(mocked.setWork).not.toHaveBeenCalled();

    mocked.setWork.mockResolvedValue({});
    await user.click(within(form).getByTestId("undo-work"));
    expect(mocked.setWork).toHaveBeenCalledWith(PAPER.path, {});
  });

  it("offers no undo where the person has not edited the record", async () => {
    await setup([{ ...PAPER, workSources: ["referenceManager"] }]);
    await userEvent.setup().click(screen.getByTestId("edit-work"));
    expect(screen.getByTestId("work-form")).toBeInTheDocument();
    expect(screen.queryByTestId("undo-work")).toBeNull();
  });

  it("adds a Zotero library the person picks and says what was added and skipped", async () => {
    await setup([]);
    const user = userEvent.setup();
    mocked.pickZoteroFolder.mockResolvedValueOnce(null);
    await user.click(screen.getByTestId("add-zotero"));
    expect(mocked.addZoteroLibrary).not.toHaveBeenCalled();

    const imported: ReferenceImport = {
      files: 14,
      withRecord: 12,
      skipped: [
        "Field notes (QRST2345): EPUB is not a format the app reads",
        "/home/ada/gone.pdf: not indexed (see the indexing report)",
      ],
      indexing: FINISHED,
    };
    mocked.pickZoteroFolder.mockResolvedValueOnce("/home/ada/Zotero");
    mocked.addZoteroLibrary.mockImplementation(async (_dir, onEvent) => {
      onEvent({ kind: "started", total: 14, resumed: [] } satisfies IndexEvent);
      return imported;
    });
    mocked.listDocuments.mockResolvedValue([PAPER]);
    await user.click(screen.getByTestId("add-zotero"));
    expect(mocked.addZoteroLibrary).toHaveBeenCalledWith("/home/ada/Zotero", expect.any(Function));
    const result = await screen.findByTestId("import-result");
    expect(result).toHaveTextContent("Added 12 files from Zotero; 2 skipped");
    expect(within(result).getByTestId("import-skipped")).toHaveTextContent(
      "Field notes (QRST2345): EPUB is not a format the app reads",
    );
    expect(screen.getByTestId("document-item")).toHaveTextContent("Marrow & Ødegård 1998");
  });

  it("follows a Zotero sync's job, which Stop can end but Pause cannot", async () => {
    const { library } = await setup([]);
    library.background({
      kind: "index",
      source: "zotero",
      event: { kind: "started", total: 2, resumed: [] },
    });
    library.background({
      kind: "index",
      source: "zotero",
      event: { kind: "fileStarted", path: PAPER.path },
    });
    await waitFor(() =>
      expect(screen.getByTestId("index-status")).toHaveTextContent("Zotero changed:"),
    );
    expect(screen.getByTestId("stop-indexing")).toBeInTheDocument();
    expect(screen.queryByTestId("pause-indexing")).toBeNull();
  });

  it("adds a bibliography file the person picks", async () => {
    await setup([]);
    mocked.pickBibliography.mockResolvedValue("/home/ada/thesis.bib");
    mocked.addBibliography.mockResolvedValue({
      files: 0,
      withRecord: 0,
      skipped: ["marrow1998: names no file"],
      indexing: null,
    });
    await userEvent.setup().click(screen.getByTestId("add-bibliography"));
    expect(mocked.addBibliography).toHaveBeenCalledWith(
      "/home/ada/thesis.bib",
      expect.any(Function),
    );
    expect(await screen.findByTestId("import-result")).toHaveTextContent(
      "Added 0 files from the bibliography; 1 skipped",
    );
    // Nothing was indexed: no job is left running.
    expect(screen.getByTestId("add-bibliography")).toBeEnabled();
  });
});

describe("the app", () => {
  it("cites author–year where the saved setting says so, and saves the person's switch", async () => {
    mocked.appStatus.mockResolvedValue(status());
    mocked.loadSettings.mockResolvedValue(loadedSettings({ citationDisplay: "authorYear" }));
    mocked.saveSettings.mockResolvedValue(deviceStatus());
    mocked.listDocuments.mockResolvedValue([PAPER]);
    mocked.listHistory.mockResolvedValue([]);
    mocked.onLibraryEvent.mockResolvedValue(() => {});
    mocked.onFilesDropped.mockResolvedValue(() => {});
    mocked.generatorState.mockResolvedValue({
      url: null,
      model: null,
      fixedByEnv: false,
      hasApiKey: false,
    });
    mocked.libraryLocationState.mockResolvedValue(localLibrary());
    mocked.embedderServerState.mockResolvedValue(localEmbedder());
    const base = answer();
    mocked.ask.mockResolvedValue(record({ answer: { ...base, passages: [passage()] } }));
    render(App);
    const user = userEvent.setup();
    await user.type(await screen.findByTestId("question-input"), "How often do buoys report?");
    await user.keyboard("{Enter}");
    await screen.findByTestId("answer");
    await waitFor(() =>
      expect(screen.getByTestId("citation-1")).toHaveTextContent("Marrow & Ødegård 1998, p. 119"),
    );

    await user.click(screen.getByTestId("cite-as-numbers"));
    expect(screen.getByTestId("citation-1")).toHaveTextContent(/^\[1\]$/);
    await waitFor(() => expect(mocked.saveSettings).toHaveBeenCalled(), { timeout: 2000 });
    expect(mocked.saveSettings.mock.lastCall?.[0].citationDisplay).toBe("numbers");
  });
});
