// The library pane with the IPC module mocked: the job's progress bar, rate and ETA, Stop,
// Pause with Resume and Forget,
// per-document rows and their states, remove with its confirmation, re-index, the failed file
// with its reason, watched folders and the background work's events.

import { render, screen, waitFor, within } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { tick } from "svelte";
import { beforeEach, describe, expect, it, vi } from "vitest";

import LibraryPane from "$lib/components/LibraryPane.svelte";
import { elsewhereText, libraryRows, nextActivity, statsText, type Activity } from "$lib/activity";
import * as ipc from "$lib/ipc";
import type {
  DocumentInfo,
  IndexEvent,
  IndexFinished,
  LibraryEvent,
  LibraryStats,
} from "$lib/ipc/types";
import { LibraryController } from "$lib/library.svelte";

vi.mock("$lib/ipc", (real) => import("./mock-ipc").then((m) => m.mockIpc(real)));

const mocked = vi.mocked(ipc);

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((res) => (resolve = res));
  return { promise, resolve };
}

const PAPER: DocumentInfo = {
  id: "d1",
  path: "/home/ada/papers/selfrag.pdf",
  title: "Self-RAG paper",
  pages: 30,
  passages: 120,
  passagesExpected: null,
  work: {},
  workSources: [],
};
const NOTES: DocumentInfo = {
  id: "d2",
  path: "/home/ada/notes/retrieval.md",
  title: "Notes on retrieval",
  pages: 1,
  passages: 4,
  passagesExpected: null,
  work: {},
  workSources: [],
};

function overview(over: Partial<LibraryStats> = {}): LibraryStats {
  return {
    documents: 2,
    passages: 124,
    contents: 2,
    pages: 31,
    diskBytes: 4_200_000,
    vectorIndex: false,
    textIndex: true,
    ...over,
  };
}

const FINISHED: IndexFinished = {
  kind: "finished",
  indexed: 1,
  skipped: 0,
  failed: 0,
  removed: 0,
  cancelled: false,
  paused: false,
};

let errors: unknown[] = [];
let libraryEvent: (event: LibraryEvent) => void = () => {};

async function setup(documents: DocumentInfo[] = [PAPER, NOTES], ready = true) {
  errors = [];
  const library = new LibraryController((e) => errors.push(e));
  mocked.listDocuments.mockResolvedValue(documents);
  await library.refresh();
  await library.listen();
  return {
    library,
    view: render(LibraryPane, { library, dropActive: false, missingEmbedder: null, ready }),
  };
}

beforeEach(() => {
  vi.resetAllMocks();
  mocked.libraryStats.mockResolvedValue(overview());
  mocked.watchedFolders.mockResolvedValue([]);
  mocked.pausedIndexing.mockResolvedValue([]);
  mocked.onLibraryEvent.mockImplementation(async (onEvent) => {
    libraryEvent = onEvent;
    return () => {};
  });
});

describe("library pane", () => {
  it("lists each document with title, file name, pages, passages and state, and the stats", async () => {
    await setup();
    const items = screen.getAllByTestId("document-item");
    expect(items).toHaveLength(2);
    expect(items[0]).toHaveTextContent("Self-RAG paper");
    expect(items[0]).toHaveTextContent("selfrag.pdf · 30 pages · 120 passages");
    expect(items[0]).toHaveTextContent("Indexed");
    expect(items[0]).toHaveAccessibleName("Self-RAG paper, Indexed");
    expect(screen.getByTestId("library-counts")).toHaveTextContent(
      "2 documents · 124 passages · 31 pages · 4.2 MB on disk",
    );
  });

  it("offers the sample documents on an empty library and indexes them as a job", async () => {
    await setup([]);
    const user = userEvent.setup();
    mocked.addSampleDocuments.mockImplementation(async (onEvent) => {
      onEvent({ kind: "started", total: 3, resumed: [] });
      return { ...FINISHED, indexed: 3 };
    });
    const samples: DocumentInfo = {
      id: "s1",
      path: "/data/samples/reading-the-badges.md",
      title: "Reading the badges: a short tour of the reflection tokens",
      pages: 1,
      passages: 5,
      passagesExpected: null,
      work: {},
      workSources: [],
    };
    mocked.listDocuments.mockResolvedValue([samples]);
    await user.click(screen.getByTestId("add-samples"));
    expect(mocked.addSampleDocuments).toHaveBeenCalledOnce();
    expect(await screen.findByText(/Reading the badges/)).toBeInTheDocument();
    expect(screen.queryByTestId("add-samples")).toBeNull();
    expect(errors).toEqual([]);
  });

  it("says the library could not be read, not that it is empty, until it can be", async () => {
    errors = [];
    const library = new LibraryController((e) => errors.push(e));
    mocked.listDocuments.mockRejectedValue({
      code: "index",
      message:
        "the library location s3://lab/papers cannot be used: the store at http://minio:9000 could not be used",
    });
    await expect(library.refresh()).rejects.toMatchObject({ code: "index" });
    render(LibraryPane, { library, dropActive: false, missingEmbedder: null, ready: true });
    expect(screen.getByTestId("library-unreadable")).toHaveTextContent("could not be read");
    expect(screen.queryByTestId("add-samples")).toBeNull();
    mocked.listDocuments.mockResolvedValue([]);
    await library.refresh();
    expect(await screen.findByTestId("add-samples")).toBeInTheDocument();
    expect(screen.queryByTestId("library-unreadable")).toBeNull();
  });

  it("keeps the samples button disabled until the app can index", async () => {
    await setup([], false);
    expect(screen.getByTestId("add-samples")).toBeDisabled();
  });

  it("shows the job's progress bar with files done, rate and ETA, and stops it", async () => {
    const { library } = await setup();
    const done = deferred<IndexFinished>();
    let send: (event: IndexEvent) => void = () => {};
    mocked.indexPaths.mockImplementation((_paths, onEvent) => {
      send = onEvent;
      return done.promise;
    });
    mocked.cancelIndexing.mockResolvedValue();
    void library.add(["/home/ada/new"]);
    await tick();

    send({ kind: "started", total: 10, resumed: [] });
    send({ kind: "fileStarted", path: "/home/ada/new/a.md" });
    send({ kind: "fileIndexed", path: "/home/ada/new/a.md", passages: 3, notes: [] });
    send({
      kind: "progress",
      done: 3,
      total: 10,
      passages: 9,
      filesPerSecond: 0.5,
      etaSeconds: 14,
    });
    send({ kind: "fileStarted", path: "/home/ada/new/d.md" });
    await tick();

    const bar = screen.getByTestId("index-progress") as HTMLProgressElement;
    expect(bar.value).toBe(3);
    expect(bar.max).toBe(10);
    expect(bar).toHaveAttribute("aria-valuetext", "3 of 10 files");
    expect(screen.getByTestId("index-pace")).toHaveTextContent("3 of 10 files done");
    expect(screen.getByTestId("index-status")).toHaveTextContent(
      "Indexing d.md (4/10)… · 0.5 files/s, 14 s left",
    );
    // The file being worked on and the one just indexed appear before the list is re-read.
    const pending = screen.getAllByTestId("pending-item");
    expect(pending.map((p) => p.getAttribute("data-state"))).toEqual(["working", "indexed"]);
    expect(pending[0]).toHaveTextContent("Parsing and embedding");

    const user = userEvent.setup();
    await user.click(screen.getByTestId("stop-indexing"));
    expect(mocked.cancelIndexing).toHaveBeenCalledOnce();
    expect(screen.getByTestId("stop-indexing")).toHaveTextContent("Stopping…");
    expect(screen.getByTestId("stop-indexing")).toBeDisabled();

    mocked.listDocuments.mockResolvedValue([PAPER, NOTES]);
    done.resolve({ ...FINISHED, indexed: 1, cancelled: true });
    await waitFor(() =>
      expect(screen.getByTestId("index-status")).toHaveTextContent(
        "Stopped after indexing 1 file, 3 passages",
      ),
    );
    expect(screen.queryByTestId("index-progress")).toBeNull();
    expect(screen.queryByTestId("stop-indexing")).toBeNull();
  });

  it("pauses a job, offers Resume and Forget, and resumes it as a job of its own", async () => {
    const { library } = await setup();
    const user = userEvent.setup();
    const first = deferred<IndexFinished>();
    let send: (event: IndexEvent) => void = () => {};
    mocked.indexPaths.mockImplementation((_paths, onEvent) => {
      send = onEvent;
      return first.promise;
    });
    mocked.pauseIndexing.mockResolvedValue(true);
    void library.add(["/home/ada/thesis"]);
    await tick();
    send({ kind: "started", total: 40, resumed: [] });
    send({ kind: "fileIndexed", path: "/home/ada/thesis/ch1.pdf", passages: 30, notes: [] });
    send({ kind: "fileStarted", path: "/home/ada/thesis/ch2.pdf" });
    await tick();

    // Nothing registered yet (the job waits for another): nothing is pausing.
    mocked.pauseIndexing.mockResolvedValueOnce(false);
    await user.click(screen.getByTestId("pause-indexing"));
    await waitFor(() => expect(screen.getByTestId("pause-indexing")).toHaveTextContent("Pause"));
    expect(screen.getByTestId("pause-indexing")).toBeEnabled();
    expect(screen.getByTestId("stop-indexing")).toBeEnabled();

    await user.click(screen.getByTestId("pause-indexing"));
    expect(mocked.pauseIndexing).toHaveBeenCalledTimes(2);
    expect(mocked.cancelIndexing).not.toHaveBeenCalled();
    expect(screen.getByTestId("pause-indexing")).toHaveTextContent("Pausing…");
    expect(screen.getByTestId("stop-indexing")).toHaveTextContent("Stop");
    expect(screen.getByTestId("stop-indexing")).toBeDisabled();

    mocked.pausedIndexing.mockResolvedValue(["/home/ada/thesis"]);
    first.resolve({ ...FINISHED, indexed: 1, cancelled: true, paused: true });
    await waitFor(() =>
      expect(screen.getByTestId("index-status")).toHaveTextContent(
        "Paused after indexing 1 file, 30 passages",
      ),
    );
    const paused = await screen.findByTestId("paused-job");
    expect(paused).toHaveTextContent("Paused: thesis. What was indexed is searchable.");
    expect(screen.queryByTestId("pause-indexing")).toBeNull();

    // Resume runs the rest as a job with its own progress, Pause and Stop.
    const second = deferred<IndexFinished>();
    mocked.resumeIndexing.mockImplementation((onEvent) => {
      send = onEvent;
      return second.promise;
    });
    await user.click(within(paused).getByTestId("resume-indexing"));
    expect(mocked.resumeIndexing).toHaveBeenCalledOnce();
    send({ kind: "started", total: 40, resumed: [] });
    await tick();
    expect(screen.queryByTestId("paused-job")).toBeNull();
    expect(screen.getByTestId("pause-indexing")).toBeEnabled();
    send({ kind: "fileIndexed", path: "/home/ada/thesis/ch2.pdf", passages: 20, notes: [] });
    mocked.pausedIndexing.mockResolvedValue([]);
    second.resolve({ ...FINISHED, indexed: 1 });
    await waitFor(() =>
      expect(screen.getByTestId("index-status")).toHaveTextContent("Indexed 1 file, 20 passages"),
    );
    expect(screen.queryByTestId("paused-job")).toBeNull();
    expect(errors).toEqual([]);
  });

  it("says so when Resume finds nothing paused, and shows what waits then", async () => {
    mocked.pausedIndexing.mockResolvedValue(["/home/ada/thesis"]);
    await setup();
    const user = userEvent.setup();
    const paused = await screen.findByTestId("paused-job");
    mocked.pausedIndexing.mockResolvedValue([]);
    mocked.resumeIndexing.mockRejectedValue({
      code: "nothing_paused",
      message: "no indexing job is paused (it ended, or was forgotten)",
    });
    await user.click(within(paused).getByTestId("resume-indexing"));
    await waitFor(() => expect(errors).toHaveLength(1));
    expect(errors[0]).toMatchObject({ code: "nothing_paused" });
    expect(mocked.pausedIndexing).toHaveBeenCalledTimes(2);
    expect(screen.queryByTestId("paused-job")).toBeNull();
    expect(screen.queryByTestId("pause-indexing")).toBeNull();
  });

  it("forgets a paused job, keeping what it indexed", async () => {
    mocked.pausedIndexing.mockResolvedValue(["/home/ada/thesis", "/home/ada/slides.pdf"]);
    await setup();
    const user = userEvent.setup();
    const paused = await screen.findByTestId("paused-job");
    expect(paused).toHaveTextContent("Paused: thesis, slides.pdf.");
    mocked.forgetPausedIndexing.mockResolvedValue();
    await user.click(within(paused).getByTestId("forget-paused"));
    expect(mocked.forgetPausedIndexing).toHaveBeenCalledOnce();
    expect(screen.queryByTestId("paused-job")).toBeNull();
    expect(screen.getAllByTestId("document-item")).toHaveLength(2);
    expect(errors).toEqual([]);
  });

  it("asks before removing a document, and Keep or Esc keeps it", async () => {
    await setup();
    mocked.removeDocument.mockResolvedValue([PAPER.path]);
    const user = userEvent.setup();
    const row = screen.getAllByTestId("document-item")[0];

    await user.click(within(row).getByRole("button", { name: "Remove Self-RAG paper" }));
    expect(row).toHaveTextContent("Remove from the library? The file stays on disk.");
    expect(within(row).getByTestId("cancel-remove")).toHaveFocus();
    await user.keyboard("{Escape}");
    expect(within(row).queryByTestId("confirm-remove")).toBeNull();
    expect(within(row).getByTestId("remove-document")).toHaveFocus();
    expect(mocked.removeDocument).not.toHaveBeenCalled();

    await user.click(within(row).getByTestId("remove-document"));
    await user.click(within(row).getByTestId("cancel-remove"));
    expect(mocked.removeDocument).not.toHaveBeenCalled();

    mocked.listDocuments.mockResolvedValue([NOTES]);
    mocked.libraryStats.mockResolvedValue(overview({ documents: 1, passages: 4, pages: 1 }));
    await user.click(within(row).getByTestId("remove-document"));
    await user.click(within(row).getByTestId("confirm-remove"));
    expect(mocked.removeDocument).toHaveBeenCalledWith(PAPER.id);
    await waitFor(() => expect(screen.getAllByTestId("document-item")).toHaveLength(1));
    expect(screen.getByTestId("library-counts")).toHaveTextContent("1 document · 4 passages");
  });

  it("re-indexes a document: queued, then parsing, then indexed", async () => {
    await setup();
    const done = deferred<IndexFinished>();
    let send: (event: IndexEvent) => void = () => {};
    mocked.reindexDocument.mockImplementation((_path, onEvent) => {
      send = onEvent;
      return done.promise;
    });
    const user = userEvent.setup();
    await user.click(screen.getByRole("button", { name: "Re-index Notes on retrieval" }));
    expect(mocked.reindexDocument).toHaveBeenCalledWith(NOTES.path, expect.any(Function));
    const state = () =>
      screen
        .getAllByTestId("document-item")
        .find((r) => r.textContent?.includes("Notes on retrieval"))
        ?.getAttribute("data-state");
    expect(state()).toBe("queued");
    send({ kind: "started", total: 1, resumed: [] });
    await tick();
    expect(state()).toBe("queued");
    send({ kind: "fileStarted", path: NOTES.path });
    await tick();
    expect(state()).toBe("working");
    // Stop, but no Pause: a re-index removes the document first, so a paused one would be gone.
    expect(screen.getByTestId("stop-indexing")).toBeEnabled();
    expect(screen.queryByTestId("pause-indexing")).toBeNull();
    // No other re-index while one runs.
    expect(screen.getByRole("button", { name: "Re-index Self-RAG paper" })).toBeDisabled();
    send({ kind: "fileIndexed", path: NOTES.path, passages: 4, notes: [] });
    done.resolve(FINISHED);
    await waitFor(() => expect(state()).toBe("indexed"));
  });

  it("lists a long file once its first slice is searchable, with how much of it is", async () => {
    const { library } = await setup([PAPER]);
    const done = deferred<IndexFinished>();
    let send: (event: IndexEvent) => void = () => {};
    mocked.indexPaths.mockImplementation((_paths, onEvent) => {
      send = onEvent;
      return done.promise;
    });
    void library.add(["/home/ada/books/long.pdf"]);
    await tick();
    const BOOK: DocumentInfo = {
      id: "d3",
      path: "/home/ada/books/long.pdf",
      title: "A long book",
      pages: 300,
      passages: 16,
      passagesExpected: 900,
      work: {},
      workSources: [],
    };
    send({ kind: "started", total: 1, resumed: [] });
    send({ kind: "fileStarted", path: BOOK.path });
    mocked.listDocuments.mockResolvedValue([PAPER, BOOK]);
    send({ kind: "fileSearchable", path: BOOK.path, passages: 16, of: 900 });
    const row = await screen.findByRole("listitem", { name: "A long book, Parsing and embedding" });
    expect(row).toHaveTextContent("long.pdf · 300 pages · 16 of 900 passages");
    expect(screen.getByTestId("index-status")).toHaveTextContent("16 of 900 passages searchable");
    // The events run ahead of the list, read again shortly after them.
    send({ kind: "fileSearchable", path: BOOK.path, passages: 32, of: 900 });
    await tick();
    expect(row).toHaveTextContent("32 of 900 passages");
    mocked.listDocuments.mockResolvedValue([
      PAPER,
      { ...BOOK, passages: 900, passagesExpected: null },
    ]);
    send({ kind: "fileIndexed", path: BOOK.path, passages: 900, notes: [] });
    done.resolve(FINISHED);
    await waitFor(() =>
      expect(screen.getByRole("listitem", { name: "A long book, Indexed" })).toHaveTextContent(
        "long.pdf · 300 pages · 900 passages",
      ),
    );
  });

  it("says a document cut off midway is partly indexed and indexes the rest of it", async () => {
    const CUT: DocumentInfo = {
      id: "d3",
      path: "/home/ada/books/long.pdf",
      title: "A long book",
      pages: 300,
      passages: 64,
      passagesExpected: 900,
      work: {},
      workSources: [],
    };
    await setup([PAPER, CUT]);
    const row = screen.getByRole("listitem", { name: "A long book, Partly indexed" });
    expect(row).toHaveTextContent("64 of 900 passages");
    expect(within(row).getByTestId("document-reason")).toHaveTextContent(
      "its first passages are searchable",
    );
    expect(
      within(screen.getAllByTestId("document-item")[0]).queryByTestId("finish-document"),
    ).toBeNull();
    mocked.indexPaths.mockResolvedValue(FINISHED);
    await userEvent
      .setup()
      .click(within(row).getByRole("button", { name: "Index the rest of A long book" }));
    expect(mocked.indexPaths).toHaveBeenCalledWith([CUT.path], expect.any(Function));
    expect(mocked.reindexDocument).not.toHaveBeenCalled();
  });

  it("shows a failed file with its reason and offers to retry it", async () => {
    const { library } = await setup([PAPER]);
    mocked.indexPaths.mockImplementation(async (_paths, onEvent) => {
      onEvent({ kind: "started", total: 1, resumed: [] });
      onEvent({ kind: "fileStarted", path: "/home/ada/broken.pdf" });
      onEvent({
        kind: "fileFailed",
        path: "/home/ada/broken.pdf",
        error: "the PDF parser timed out after 60 s",
      });
      return { ...FINISHED, indexed: 0, failed: 1 };
    });
    await library.add(["/home/ada/broken.pdf"]);
    await tick();
    const failed = screen.getByTestId("failed-item");
    expect(failed).toHaveTextContent("broken.pdf: the PDF parser timed out after 60 s");
    // Not a document: the list holds only what is in the library.
    expect(screen.getByTestId("library-list")).not.toHaveTextContent("broken.pdf");
    expect(screen.getByTestId("index-status")).toHaveTextContent("1 failed");

    mocked.reindexDocument.mockResolvedValue(FINISHED);
    await userEvent
      .setup()
      .click(within(failed).getByRole("button", { name: "Try broken.pdf again" }));
    expect(mocked.reindexDocument).toHaveBeenCalledWith(
      "/home/ada/broken.pdf",
      expect.any(Function),
    );
  });

  it("watches dropped folders when asked, lists them and stops watching", async () => {
    const { library } = await setup();
    mocked.watchFolders.mockResolvedValue({
      watched: ["/home/ada/inbox"],
      notFolders: ["/home/ada/one.md"],
    });
    mocked.indexPaths.mockResolvedValue(FINISHED);
    mocked.watchedFolders.mockResolvedValue(["/home/ada/inbox"]);
    const user = userEvent.setup();
    await user.click(screen.getByRole("checkbox", { name: "Keep watching folders I add or drop" }));
    await library.add(["/home/ada/inbox", "/home/ada/one.md"]);
    expect(mocked.watchFolders).toHaveBeenCalledWith(["/home/ada/inbox", "/home/ada/one.md"]);
    // The file is indexed once; the folder is the watcher's.
    expect(mocked.indexPaths).toHaveBeenCalledWith(["/home/ada/one.md"], expect.any(Function));
    await tick();
    const folders = screen.getAllByTestId("watched-folder");
    expect(folders).toHaveLength(1);
    expect(folders[0]).toHaveTextContent("inbox");

    mocked.unwatchFolder.mockResolvedValue([]);
    await user.click(screen.getByRole("button", { name: "Stop watching /home/ada/inbox" }));
    expect(mocked.unwatchFolder).toHaveBeenCalledWith("/home/ada/inbox");
    await waitFor(() => expect(screen.queryByTestId("watched-folders")).toBeNull());
  });

  it("follows the watched folders' catch-up and their changes", async () => {
    await setup([PAPER]);
    libraryEvent({
      kind: "index",
      source: "watch",
      event: { kind: "started", total: 2, resumed: [] },
    });
    libraryEvent({
      kind: "index",
      source: "watch",
      event: { kind: "fileStarted", path: "/home/ada/inbox/new.md" },
    });
    await tick();
    expect(screen.getByTestId("index-status")).toHaveTextContent(
      "Watched folders: Indexing new.md (1/2)…",
    );
    // The catch-up ends by unwatching, not with Stop.
    expect(screen.queryByTestId("stop-indexing")).toBeNull();

    mocked.listDocuments.mockResolvedValue([
      PAPER,
      {
        id: "d3",
        path: "/home/ada/inbox/new.md",
        title: "New",
        pages: 1,
        passages: 2,
        passagesExpected: null,
        work: {},
        workSources: [],
      },
    ]);
    libraryEvent({
      kind: "index",
      source: "watch",
      event: { kind: "fileIndexed", path: "/home/ada/inbox/new.md", passages: 2, notes: [] },
    });
    libraryEvent({ kind: "index", source: "watch", event: FINISHED });
    await waitFor(() => expect(screen.getAllByTestId("document-item")).toHaveLength(2));

    // A change after the catch-up: a file deleted on disk leaves the list.
    mocked.listDocuments.mockResolvedValue([PAPER]);
    libraryEvent({
      kind: "index",
      source: "watch",
      event: { kind: "removed", path: "/home/ada/inbox/new.md" },
    });
    await waitFor(() => expect(screen.getAllByTestId("document-item")).toHaveLength(1));

    // A batch that could not be applied: the user is told, and the list is left as it is.
    libraryEvent({
      kind: "index",
      source: "watch",
      event: { kind: "watchRetrying", error: "the library's disk is gone", retryInSeconds: 4 },
    });
    expect(errors).toContainEqual({
      code: "library_watch",
      message:
        "Changes in the watched folders could not be applied: the library's disk is gone. Trying again in 4 s.",
    });
    expect(screen.getAllByTestId("document-item")).toHaveLength(1);

    libraryEvent({ kind: "failed", source: "watch", message: "Watching folders stopped: gone" });
    expect(errors).toContainEqual({
      code: "library_watch",
      message: "Watching folders stopped: gone",
    });

    // Another computer added two documents to the shared library: listed, and said so.
    expect(screen.queryByTestId("library-elsewhere")).toBeNull();
    mocked.listDocuments.mockResolvedValue([PAPER, NOTES, { ...NOTES, path: "/lab/third.md" }]);
    libraryEvent({ kind: "changedElsewhere", added: 2, removed: 0 });
    await waitFor(() => expect(screen.getAllByTestId("document-item")).toHaveLength(3));
    expect(screen.getByTestId("library-elsewhere")).toHaveTextContent(
      "2 documents added by other computers",
    );
    libraryEvent({ kind: "changedElsewhere", added: 2, removed: 1 });
    await waitFor(() =>
      expect(screen.getByTestId("library-elsewhere")).toHaveTextContent(
        "2 added, 1 removed by other computers",
      ),
    );
  });

  it("keeps Add files and Add folder off until the app's status has arrived", async () => {
    const { library, view } = await setup([PAPER], false);
    expect(screen.getByTestId("add-files")).toBeDisabled();
    expect(screen.getByTestId("add-folder")).toBeDisabled();
    await view.rerender({ library, dropActive: false, missingEmbedder: null, ready: true });
    expect(screen.getByTestId("add-files")).toBeEnabled();
    expect(screen.getByTestId("add-folder")).toBeEnabled();
  });
});

describe("activity", () => {
  it("forgets the previous job's files when a new one starts, but keeps what is queued", () => {
    let a: Activity = {};
    a = nextActivity(a, { kind: "fileFailed", path: "/a.pdf", error: "broken" });
    a = {
      ...a,
      "/b.md": { state: "queued", reason: null, passages: null, passagesExpected: null },
    };
    a = nextActivity(a, { kind: "started", total: 1, resumed: [] });
    expect(Object.keys(a)).toEqual(["/b.md"]);
    a = nextActivity(a, FINISHED);
    expect(a).toEqual({});
  });

  it("orders files in progress before the documents and keeps notes as the reason", () => {
    const a: Activity = {
      "/x/new.md": { state: "indexed", reason: null, passages: 2, passagesExpected: null },
      "/x/now.md": { state: "working", reason: null, passages: null, passagesExpected: null },
      [PAPER.path]: {
        state: "indexed",
        reason: "page 3 has no text layer",
        passages: 120,
        passagesExpected: null,
      },
    };
    const rows = libraryRows([PAPER], a);
    expect(rows.map((r) => [r.fileName, r.state])).toEqual([
      ["now.md", "working"],
      ["new.md", "indexed"],
      ["selfrag.pdf", "indexed"],
    ]);
    expect(rows[2].reason).toBe("page 3 has no text layer");
    expect(rows[2].document).toBe(PAPER);
  });

  it("takes a long file's counts from the events until the list is read again", () => {
    const cut: DocumentInfo = { ...PAPER, passages: 64, passagesExpected: 229 };
    const counts = (a: Activity) => {
      const [row] = libraryRows([cut], a);
      return [row.state, row.passages, row.passagesExpected];
    };
    expect(counts({})).toEqual(["partial", 64, 229]);
    const working = { state: "working", reason: null } as const;
    // Going on: the list's counts until the first slice's event, then the event's.
    expect(counts({ [cut.path]: { ...working, passages: null, passagesExpected: null } })).toEqual([
      "working",
      64,
      229,
    ]);
    expect(counts({ [cut.path]: { ...working, passages: 128, passagesExpected: 229 } })).toEqual([
      "working",
      128,
      229,
    ]);
    // Done: whole, though the list still says 64 of 229.
    expect(
      counts({
        [cut.path]: { state: "indexed", reason: null, passages: 229, passagesExpected: null },
      }),
    ).toEqual(["indexed", 229, null]);
  });

  it("says what other computers changed in a shared library", () => {
    expect(elsewhereText(0, 0)).toBeNull();
    expect(elsewhereText(1, 0)).toBe("1 document added by other computers");
    expect(elsewhereText(0, 3)).toBe("3 documents removed by other computers");
    expect(elsewhereText(4, 1)).toBe("4 added, 1 removed by other computers");
  });

  it("writes the stats with the disk size", () => {
    expect(statsText(overview({ documents: 1, passages: 1, pages: 1, diskBytes: 900 }))).toBe(
      "1 document · 1 passage · 1 page · 900 B on disk",
    );
  });
});
