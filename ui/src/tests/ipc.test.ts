// The argument shapes the Rust side must accept, and that the ipc module reaches every command
// of the Rust side's list.

import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";

const tauri = vi.hoisted(() => {
  class Channel<T> {
    onmessage: (message: T) => void = () => {};
  }
  return {
    invoke: vi.fn(),
    Channel,
    dragDrop: null as null | ((event: { payload: unknown }) => void),
  };
});

vi.mock("@tauri-apps/api/core", () => ({ invoke: tauri.invoke, Channel: tauri.Channel }));
vi.mock("@tauri-apps/api/webview", () => ({
  getCurrentWebview: () => ({
    onDragDropEvent: async (handler: (event: { payload: unknown }) => void) => {
      tauri.dragDrop = handler;
      return () => {};
    },
  }),
}));

import * as ipc from "$lib/ipc";
import { COMMANDS } from "$lib/ipc/bindings";
import { defaultSettings } from "$lib/settings";

beforeEach(() => {
  tauri.invoke.mockReset();
  tauri.invoke.mockResolvedValue(undefined);
});

// Every command of the Rust side's list (generated into the bindings) is called by some
// function of the ipc module in these tests, and nothing else is: the module's names are
// type-checked against that list, and this checks the module covers it.
const invoked = new Set<string>();
afterEach(() => {
  for (const [name] of tauri.invoke.mock.calls) invoked.add(name as string);
});
afterAll(() => {
  expect([...invoked].sort()).toEqual([...COMMANDS].sort());
});

describe("ipc", () => {
  it("calls each command with its camelCase arguments", async () => {
    await ipc.appStatus();
    expect(tauri.invoke).toHaveBeenLastCalledWith("app_status");
    await ipc.listDocuments();
    expect(tauri.invoke).toHaveBeenLastCalledWith("list_documents");
    await ipc.rerank("a1", { rel: 1, sup: 2, use: 0 }, true);
    expect(tauri.invoke).toHaveBeenLastCalledWith("rerank", {
      answerId: "a1",
      weights: { rel: 1, sup: 2, use: 0 },
      hardConstraints: true,
    });
    await ipc.cancelAsk();
    expect(tauri.invoke).toHaveBeenLastCalledWith("cancel_job", { job: { kind: "answer" } });
    const options = {
      format: "html",
      supportLabels: true,
      onlySupported: false,
      citations: "authorYear",
      bibtexEncoding: "utf8",
    } as const;
    await ipc.exportAnswer("a1", options);
    expect(tauri.invoke).toHaveBeenLastCalledWith("export_answer", { answerId: "a1", options });
    await ipc.renderAnswer("a1", options);
    expect(tauri.invoke).toHaveBeenLastCalledWith("render_answer", { answerId: "a1", options });
    await ipc.listHistory("self rag");
    expect(tauri.invoke).toHaveBeenLastCalledWith("list_history", { query: "self rag" });
    tauri.invoke.mockResolvedValueOnce(["/papers/a.pdf"]);
    expect(await ipc.pickFiles()).toEqual(["/papers/a.pdf"]);
    expect(tauri.invoke).toHaveBeenLastCalledWith("pick_files");
    tauri.invoke.mockResolvedValueOnce([]);
    expect(await ipc.pickFiles()).toBeNull();
    tauri.invoke.mockResolvedValueOnce(null);
    expect(await ipc.pickFolder()).toBeNull();
    expect(tauri.invoke).toHaveBeenLastCalledWith("pick_folder");
    await ipc.openAnswer("a1");
    expect(tauri.invoke).toHaveBeenLastCalledWith("open_answer", { answerId: "a1" });
    await ipc.deleteAnswer("a1");
    expect(tauri.invoke).toHaveBeenLastCalledWith("delete_answer", { answerId: "a1" });
    await ipc.loadSettings();
    expect(tauri.invoke).toHaveBeenLastCalledWith("load_settings");
    const settings = {
      ask: defaultSettings(),
      theme: "dark",
      device: "cpu",
      embedderPrecision: "int8",
      dummyPrefix: "text-start",
      export: options,
      citationDisplay: "authorYear",
      lookUpWorks: true,
    } as const;
    await ipc.saveSettings(settings);
    expect(tauri.invoke).toHaveBeenLastCalledWith("save_settings", { settings });
  });

  it("calls the library, model, source and generator commands with their arguments", async () => {
    const last = () => tauri.invoke.mock.lastCall as [string, Record<string, unknown>?];
    await ipc.openSource("a1", 2);
    expect(last()).toEqual(["open_source", { answerId: "a1", citation: 2 }]);
    await ipc.passageSource("doc:3");
    expect(last()).toEqual(["passage_source", { passageId: "doc:3" }]);
    // A PDF's bytes arrive as an ArrayBuffer (a raw IPC response) and are handed on as bytes.
    tauri.invoke.mockResolvedValueOnce(new Uint8Array([37, 80, 68, 70]).buffer);
    expect(await ipc.sourcePdf("doc")).toEqual(new Uint8Array([37, 80, 68, 70]));
    expect(last()).toEqual(["source_pdf", { documentId: "doc" }]);
    await ipc.downloadModel("selfrag-7b", () => {});
    expect(last()[0]).toBe("download_model");
    expect(last()[1]?.modelId).toBe("selfrag-7b");
    await ipc.cancelDownload("selfrag-7b");
    expect(last()).toEqual(["cancel_job", { job: { kind: "download", model: "selfrag-7b" } }]);
    await ipc.refreshModels();
    expect(last()).toEqual(["refresh_models"]);
    await ipc.cancelIndexing();
    expect(last()).toEqual(["cancel_job", { job: { kind: "indexing" } }]);
    await ipc.pauseIndexing();
    expect(last()).toEqual(["pause_indexing"]);
    await ipc.resumeIndexing(() => {});
    expect(last()[0]).toBe("resume_indexing");
    await ipc.pausedIndexing();
    expect(last()).toEqual(["paused_indexing"]);
    await ipc.forgetPausedIndexing();
    expect(last()).toEqual(["forget_paused_indexing"]);
    await ipc.removeDocument("d1");
    expect(last()).toEqual(["remove_document", { documentId: "d1" }]);
    await ipc.addSampleDocuments(() => {});
    expect(last()[0]).toBe("add_sample_documents");
    await ipc.reindexDocument("/a.pdf", () => {});
    expect(last()[0]).toBe("reindex_document");
    expect(last()[1]?.path).toBe("/a.pdf");
    await ipc.libraryStats();
    expect(last()).toEqual(["library_stats"]);
    await ipc.watchedFolders();
    expect(last()).toEqual(["watched_folders"]);
    await ipc.watchFolders(["/papers"]);
    expect(last()).toEqual(["watch_folders", { paths: ["/papers"] }]);
    await ipc.unwatchFolder("/papers");
    expect(last()).toEqual(["unwatch_folder", { folder: "/papers" }]);
    const work = { title: { value: "Telemetry", source: "person" } } as const;
    await ipc.setWork("/a.pdf", work);
    expect(last()).toEqual(["set_work", { path: "/a.pdf", work }]);
    await ipc.pickZoteroFolder();
    expect(last()).toEqual(["pick_zotero_folder"]);
    await ipc.addZoteroLibrary("/home/ada/Zotero", () => {});
    expect(last()[0]).toBe("add_zotero_library");
    expect(last()[1]?.dir).toBe("/home/ada/Zotero");
    await ipc.pickBibliography();
    expect(last()).toEqual(["pick_bibliography"]);
    await ipc.addBibliography("/home/ada/thesis.bib", () => {});
    expect(last()[0]).toBe("add_bibliography");
    expect(last()[1]?.path).toBe("/home/ada/thesis.bib");
    await ipc.zoteroLink("/a.pdf", 3);
    expect(last()).toEqual(["zotero_link", { documentPath: "/a.pdf", page: 3 }]);
    await ipc.openInZotero("/a.pdf", null);
    expect(last()).toEqual(["open_in_zotero", { documentPath: "/a.pdf", page: null }]);
    await ipc.libraryLocationState();
    expect(last()).toEqual(["library_location_state"]);
    await ipc.testLibraryLocation("s3://lab/papers");
    expect(last()).toEqual(["test_library_location", { location: "s3://lab/papers" }]);
    await ipc.useLibraryLocation(null);
    expect(last()).toEqual(["use_library_location", { location: null }]);
    await ipc.restartApp();
    expect(last()).toEqual(["restart_app"]);
    await ipc.embedderServerState();
    expect(last()).toEqual(["embedder_server_state"]);
    await ipc.testEmbedderServer("http://gpu:8081", "bge", "k");
    expect(last()).toEqual([
      "test_embedder_server",
      { url: "http://gpu:8081", model: "bge", apiKey: "k" },
    ]);
    await ipc.useEmbedderServer(null, null, "");
    expect(last()).toEqual(["use_embedder_server", { url: null, model: null, apiKey: "" }]);
    await ipc.generatorState();
    expect(last()).toEqual(["generator_state"]);
    await ipc.testGeneratorServer("http://gpu:8080", null, null);
    expect(last()).toEqual([
      "test_generator_server",
      { url: "http://gpu:8080", model: null, apiKey: null },
    ]);
    await ipc.useGeneratorServer("http://gpu:8000/v1", "selfrag-13b", null);
    expect(last()).toEqual([
      "use_generator_server",
      { url: "http://gpu:8000/v1", model: "selfrag-13b", apiKey: null },
    ]);
  });

  it("streams ask and index events through a Channel named onEvent", async () => {
    const progress = vi.fn();
    await ipc.ask("Why?", defaultSettings(), progress);
    const [command, args] = tauri.invoke.mock.lastCall as [string, Record<string, unknown>];
    expect(command).toBe("ask");
    expect(args.question).toBe("Why?");
    expect(args.settings).toEqual(defaultSettings());
    const channel = args.onEvent as InstanceType<typeof tauri.Channel>;
    channel.onmessage({ kind: "passages_retrieved", segment: 0, count: 5 });
    expect(progress).toHaveBeenCalledWith({ kind: "passages_retrieved", segment: 0, count: 5 });

    const indexed = vi.fn();
    await ipc.indexPaths(["/a.pdf"], indexed);
    const [indexCommand, indexArgs] = tauri.invoke.mock.lastCall as [
      string,
      Record<string, unknown>,
    ];
    expect(indexCommand).toBe("index_paths");
    expect(indexArgs.paths).toEqual(["/a.pdf"]);
    (indexArgs.onEvent as InstanceType<typeof tauri.Channel>).onmessage({
      kind: "started",
      total: 1,
      resumed: [],
    });
    expect(indexed).toHaveBeenCalledWith({ kind: "started", total: 1, resumed: [] });
  });

  it("reports drops with their paths, and hovering while files are over the window", async () => {
    const dropped = vi.fn();
    const hovering = vi.fn();
    await ipc.onFilesDropped(dropped, hovering);
    const send = tauri.dragDrop!;

    send({ payload: { type: "enter", paths: ["/a.pdf"], position: { x: 0, y: 0 } } });
    send({ payload: { type: "over", position: { x: 1, y: 1 } } });
    send({ payload: { type: "leave" } });
    expect(hovering.mock.calls).toEqual([[true], [true], [false]]);

    send({ payload: { type: "drop", paths: ["/a.pdf", "/b.md"], position: { x: 1, y: 1 } } });
    expect(dropped).toHaveBeenCalledWith(["/a.pdf", "/b.md"]);
    expect(hovering).toHaveBeenLastCalledWith(false);
  });
});
