// The command names and argument shapes the Rust side must accept.

import { beforeEach, describe, expect, it, vi } from "vitest";

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
import { defaultSettings } from "$lib/settings";

beforeEach(() => {
  tauri.invoke.mockReset();
  tauri.invoke.mockResolvedValue(undefined);
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
    expect(tauri.invoke).toHaveBeenLastCalledWith("cancel_ask");
    const options = { format: "html", supportLabels: true, onlySupported: false } as const;
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
      export: options,
    } as const;
    await ipc.saveSettings(settings);
    expect(tauri.invoke).toHaveBeenLastCalledWith("save_settings", { settings });
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
