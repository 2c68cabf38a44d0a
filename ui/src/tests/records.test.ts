// The export menu, the clipboard, the history panel and the persisted settings, with the IPC
// module mocked.

import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { get } from "svelte/store";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import App from "../App.svelte";
import ExportMenu from "$lib/components/ExportMenu.svelte";
import * as ipc from "$lib/ipc";
import type { AppSettings, ExportOptions, HistoryEntry } from "$lib/ipc/types";
import { debouncedSaver } from "$lib/persist";
import { theme } from "$lib/theme";
import {
  deviceStatus,
  loadedSettings,
  localEmbedder,
  localLibrary,
  record,
  reranked,
  status,
} from "./fixtures";

vi.mock("$lib/ipc", (real) => import("./mock-ipc").then((m) => m.mockIpc(real)));

const mocked = vi.mocked(ipc);

const HISTORY: HistoryEntry[] = [
  {
    id: "a2",
    question: "Who wrote <b>Self-RAG</b>?",
    answer: "Asai et al.",
    createdMs: 1_700_000_100_000,
    citations: 1,
  },
  {
    id: "a1",
    question: "When does Self-RAG retrieve?",
    answer: "Self-RAG retrieves passages only when it needs them.",
    createdMs: 1_700_000_000_000,
    citations: 2,
  },
];

beforeEach(() => {
  vi.resetAllMocks();
  mocked.generatorState.mockResolvedValue({
    url: null,
    model: null,
    fixedByEnv: false,
    hasApiKey: false,
  });
  mocked.libraryLocationState.mockResolvedValue(localLibrary());
  mocked.embedderServerState.mockResolvedValue(localEmbedder());
  mocked.libraryStats.mockResolvedValue({
    documents: 0,
    passages: 0,
    contents: 0,
    pages: 0,
    diskBytes: 0,
    vectorIndex: false,
    textIndex: false,
  });
  mocked.watchedFolders.mockResolvedValue([]);
  mocked.onLibraryEvent.mockResolvedValue(() => {});
  theme.set("system");
  mocked.appStatus.mockResolvedValue(status());
  mocked.listDocuments.mockResolvedValue([]);
  mocked.loadSettings.mockResolvedValue(loadedSettings());
  mocked.saveSettings.mockResolvedValue(deviceStatus());
  mocked.listHistory.mockResolvedValue(HISTORY);
  mocked.onFilesDropped.mockResolvedValue(() => {});
});

afterEach(() => {
  Reflect.deleteProperty(document, "execCommand");
});

async function askAndAnswer() {
  mocked.ask.mockResolvedValue(record());
  const user = userEvent.setup();
  await user.type(await screen.findByTestId("question-input"), "When does Self-RAG retrieve?");
  await user.keyboard("{Enter}");
  await screen.findByTestId("answer");
  return user;
}

/** The last settings the app saved. */
function lastSaved(): AppSettings {
  const call = mocked.saveSettings.mock.lastCall;
  if (!call) throw new Error("nothing was saved");
  return call[0];
}

describe("ExportMenu", () => {
  function menu(options: ExportOptions) {
    const onexport = vi.fn();
    const oncopy = vi.fn();
    const view = render(ExportMenu, { options, disabled: false, status: "", onexport, oncopy });
    return { onexport, oncopy, unmount: view.unmount };
  }

  /** Options as saved by default, with `format`. */
  function options(format: ExportOptions["format"]): ExportOptions {
    return {
      format,
      supportLabels: false,
      onlySupported: false,
      citations: "numbers",
      bibtexEncoding: "utf8",
    };
  }

  it("offers each option for the formats it applies to", () => {
    // format, labels, filter, citation style, ASCII
    const expected: [ExportOptions["format"], boolean, boolean, boolean, boolean][] = [
      ["md", true, true, true, false],
      ["html", true, true, true, false],
      ["json", false, false, false, false],
      ["bib", false, true, false, true],
      ["biblatex", false, true, false, true],
      ["csl-json", false, true, false, false],
      ["ris", false, true, false, false],
      ["latex", true, true, false, true],
    ];
    for (const [format, labels, only, citations, ascii] of expected) {
      const { unmount } = menu(options(format));
      expect(screen.getByTestId("export-format")).toHaveValue(format);
      expect(screen.getByTestId("export-labels").hasAttribute("disabled")).toBe(!labels);
      const filter = screen.getByTestId("export-only-supported");
      expect(filter.hasAttribute("disabled")).toBe(!only);
      expect(filter.closest("label")?.getAttribute("title")).toMatch(
        only ? /partially supported/ : /always complete/,
      );
      expect(screen.getByTestId("export-citations").hasAttribute("disabled")).toBe(!citations);
      expect(screen.getByTestId("export-ascii").hasAttribute("disabled")).toBe(!ascii);
      unmount();
    }
  });

  it("names every format and citation style and calls back on Export and Copy", async () => {
    const { onexport, oncopy } = menu(options("md"));
    const names = (testId: string) =>
      within(screen.getByTestId(testId))
        .getAllByRole("option")
        .map((o) => o.textContent);
    expect(names("export-format")).toEqual([
      "Markdown",
      "HTML page",
      "JSON trace",
      "BibTeX sources",
      "BibLaTeX sources",
      "CSL-JSON sources",
      "RIS sources",
      "LaTeX",
    ]);
    expect(names("export-citations")).toEqual(["Numbers", "Author–year", "Pandoc"]);
    await fireEvent.click(screen.getByTestId("export-button"));
    await fireEvent.click(screen.getByTestId("copy-button"));
    expect(onexport).toHaveBeenCalledOnce();
    expect(oncopy).toHaveBeenCalledOnce();
  });
});

describe("Export and copy in the app", () => {
  it("exports with the chosen format and options", async () => {
    render(App);
    const user = await askAndAnswer();
    await user.selectOptions(screen.getByTestId("export-format"), "html");
    await user.click(screen.getByTestId("export-only-supported"));
    await user.click(screen.getByTestId("export-labels"));
    mocked.exportAnswer.mockResolvedValue("/home/ada/answer.html");
    await user.click(screen.getByTestId("export-button"));
    expect(mocked.exportAnswer).toHaveBeenCalledWith("a1", {
      format: "html",
      supportLabels: true,
      onlySupported: true,
      citations: "numbers",
      bibtexEncoding: "utf8",
    });
    await waitFor(() =>
      expect(screen.getByTestId("export-status")).toHaveTextContent(
        "Saved to /home/ada/answer.html",
      ),
    );
  });

  it("exports with the chosen citation style and encoding", async () => {
    render(App);
    const user = await askAndAnswer();
    await user.selectOptions(screen.getByTestId("export-citations"), "pandoc");
    await user.selectOptions(screen.getByTestId("export-format"), "biblatex");
    // The style stays chosen, but applies to Markdown and HTML only.
    expect(screen.getByTestId("export-citations")).toBeDisabled();
    await user.click(screen.getByTestId("export-ascii"));
    mocked.exportAnswer.mockResolvedValue("/home/ada/refs.bib");
    await user.click(screen.getByTestId("export-button"));
    expect(mocked.exportAnswer).toHaveBeenCalledWith("a1", {
      format: "biblatex",
      supportLabels: false,
      onlySupported: false,
      citations: "pandoc",
      bibtexEncoding: "ascii",
    });
  });

  it("copies the Rust-rendered text, rendered before the click, with the Clipboard API", async () => {
    mocked.renderAnswer.mockResolvedValue("# md\n");
    render(App);
    const user = await askAndAnswer();
    // After user-event's setup, which installs its own clipboard.
    const writeText = vi.fn().mockResolvedValue(undefined);
    Object.defineProperty(navigator, "clipboard", { value: { writeText }, configurable: true });
    mocked.renderAnswer.mockResolvedValue("@misc{x,\n}\n");
    await user.selectOptions(screen.getByTestId("export-format"), "bib");
    // Rendered as soon as the options change, before any click.
    await waitFor(() =>
      expect(mocked.renderAnswer).toHaveBeenLastCalledWith("a1", {
        format: "bib",
        supportLabels: false,
        onlySupported: false,
        citations: "numbers",
        bibtexEncoding: "utf8",
      }),
    );
    const renders = mocked.renderAnswer.mock.calls.length;
    await user.click(screen.getByTestId("copy-button"));
    expect(mocked.renderAnswer).toHaveBeenCalledTimes(renders);
    await waitFor(() => expect(writeText).toHaveBeenCalledWith("@misc{x,\n}\n"));
    expect(screen.getByTestId("export-status")).toHaveTextContent(
      "Copied to the clipboard (11 characters)",
    );
  });

  it("uses the copy command inside the click, and says so when nothing works", async () => {
    let copied = "";
    const execCommand = vi.fn((command: string) => {
      copied = (document.activeElement as HTMLTextAreaElement).value;
      return command === "copy";
    });
    Object.defineProperty(document, "execCommand", { value: execCommand, configurable: true });
    mocked.renderAnswer.mockResolvedValue("# Answer\n");
    render(App);
    const user = await askAndAnswer();
    const writeText = vi.fn().mockRejectedValue(new Error("NotAllowedError"));
    Object.defineProperty(navigator, "clipboard", { value: { writeText }, configurable: true });
    await waitFor(() => expect(mocked.renderAnswer).toHaveBeenCalled());
    await user.click(screen.getByTestId("copy-button"));
    await waitFor(() => expect(execCommand).toHaveBeenCalledWith("copy"));
    expect(copied).toBe("# Answer\n");
    expect(writeText).not.toHaveBeenCalled();
    expect(document.querySelector("textarea[readonly]")).toBeNull();
    expect(screen.getByTestId("export-status")).toHaveTextContent("Copied to the clipboard");

    // Neither way works: the user is told to export instead.
    execCommand.mockReturnValue(false);
    await user.click(screen.getByTestId("copy-button"));
    expect(await screen.findByTestId("error-banner")).toHaveTextContent(/use Export/);
  });
});

describe("History panel", () => {
  it("lists, searches, reopens and re-ranks a past answer", async () => {
    const user = userEvent.setup();
    render(App);
    await screen.findByTestId("question-input");
    await user.click(screen.getByTestId("history-toggle"));
    const items = await screen.findAllByTestId("history-item");
    expect(mocked.listHistory).toHaveBeenCalledWith("");
    expect(items).toHaveLength(2);
    // Text from the history is shown as text, never as markup.
    expect(items[0]).toHaveTextContent("Who wrote <b>Self-RAG</b>?");
    expect(items[0].querySelector("b")).toBeNull();
    expect(items[1]).toHaveTextContent("2 citations");
    expect(screen.queryByTestId("library")).toBeNull();

    mocked.listHistory.mockResolvedValue([HISTORY[1]]);
    await user.type(screen.getByTestId("history-search"), "retrieve");
    await waitFor(() => expect(mocked.listHistory).toHaveBeenLastCalledWith("retrieve"));
    await waitFor(() => expect(screen.getAllByTestId("history-item")).toHaveLength(1));
    // One search per pause in typing, not one per key.
    expect(mocked.listHistory.mock.calls.length).toBeLessThan(5);

    // The saved answer was ranked with other weights: the sliders follow it.
    const saved = reranked();
    mocked.openAnswer.mockResolvedValue(saved);
    await user.click(screen.getByTestId("history-open"));
    expect(mocked.openAnswer).toHaveBeenCalledWith("a1");
    expect(await screen.findByTestId("answer")).toHaveTextContent(
      "It retrieves for factual questions.",
    );
    expect(screen.getByTestId("weight-sup")).toHaveTextContent("1.50");
    expect(screen.getByTestId("history-open")).toHaveAttribute("aria-current", "true");

    mocked.rerank.mockResolvedValue(record());
    await fireEvent.input(screen.getByTestId("slider-sup"), { target: { value: "0.5" } });
    expect(mocked.rerank).toHaveBeenCalledWith("a1", { rel: 1, sup: 0.5, use: 0.5 }, false);
    await waitFor(() =>
      expect(screen.getByTestId("answer")).toHaveTextContent(
        "Self-RAG retrieves passages only when it needs them.",
      ),
    );
  });

  it("deletes only after confirmation, and the deleted answer leaves the screen", async () => {
    render(App);
    const user = await askAndAnswer();
    await user.keyboard("{Control>}h{/Control}");
    await screen.findAllByTestId("history-item");

    const second = () => screen.getAllByTestId("history-item")[1];
    await user.click(within(second()).getByTestId("history-delete"));
    await user.click(within(second()).getByTestId("history-cancel-delete"));
    expect(mocked.deleteAnswer).not.toHaveBeenCalled();
    expect(screen.getAllByTestId("history-item")).toHaveLength(2);

    mocked.deleteAnswer.mockResolvedValue(undefined);
    await user.click(within(second()).getByTestId("history-delete"));
    expect(within(second()).getByText("Delete this answer?")).toBeInTheDocument();
    await user.click(within(second()).getByTestId("history-confirm-delete"));
    expect(mocked.deleteAnswer).toHaveBeenCalledWith("a1");
    await waitFor(() => expect(screen.getAllByTestId("history-item")).toHaveLength(1));
    // a1 was on screen.
    expect(screen.queryByTestId("answer")).toBeNull();
    expect(screen.getByTestId("export-button")).toBeDisabled();

    await user.keyboard("{Control>}h{/Control}");
    expect(screen.queryByTestId("history-panel")).toBeNull();
    expect(screen.getByTestId("library")).toBeInTheDocument();
  });

  it("says when nothing matches and reloads after a new answer", async () => {
    mocked.listHistory.mockResolvedValue([]);
    render(App);
    const user = userEvent.setup();
    await screen.findByTestId("question-input");
    await user.click(screen.getByTestId("history-toggle"));
    expect(await screen.findByTestId("history-empty")).toHaveTextContent("No questions asked yet.");
    await user.type(screen.getByTestId("history-search"), "zebra");
    await waitFor(() =>
      expect(screen.getByTestId("history-empty")).toHaveTextContent("Nothing matches “zebra”."),
    );

    const calls = mocked.listHistory.mock.calls.length;
    mocked.listHistory.mockResolvedValue([HISTORY[1]]);
    mocked.ask.mockResolvedValue(record());
    await user.type(screen.getByTestId("question-input"), "When?");
    await user.keyboard("{Enter}");
    await screen.findByTestId("answer");
    await waitFor(() => expect(mocked.listHistory.mock.calls.length).toBeGreaterThan(calls));
    expect(await screen.findAllByTestId("history-item")).toHaveLength(1);
  });
});

describe("Persisted settings", () => {
  it("restores the saved settings at start", async () => {
    const saved = loadedSettings({
      theme: "dark",
      device: "cpu",
      export: {
        format: "bib",
        supportLabels: false,
        onlySupported: true,
        citations: "authorYear",
        bibtexEncoding: "ascii",
      },
    });
    saved.settings.ask = { ...saved.settings.ask, mode: "always", k: 3 };
    saved.settings.ask.weights = { rel: 0.5, sup: 2, use: 0 };
    mocked.loadSettings.mockResolvedValue(saved);
    mocked.appStatus.mockResolvedValue(
      status({ device: deviceStatus({ chosen: "cpu", inUse: "cpu" }) }),
    );
    render(App);
    await waitFor(() => expect(screen.getByTestId("mode-select")).toHaveValue("always"));
    expect(screen.getByTestId("weight-sup")).toHaveTextContent("2.00");
    expect(screen.getByTestId("export-format")).toHaveValue("bib");
    expect(screen.getByTestId("export-only-supported")).toBeChecked();
    expect(screen.getByTestId("export-citations")).toHaveValue("authorYear");
    expect(screen.getByTestId("export-ascii")).toBeChecked();
    expect(screen.getByTestId("device-select")).toHaveValue("cpu");
    expect(screen.getByTestId("device-in-use")).toHaveTextContent("CPU");
    expect(get(theme)).toBe("dark");
    expect(document.documentElement).toHaveClass("theme-dark");
    // Loading is not a change: nothing is written back.
    await new Promise((r) => setTimeout(r, 600));
    expect(mocked.saveSettings).not.toHaveBeenCalled();
  });

  it("saves once after a burst of changes, with every setting", async () => {
    render(App);
    const user = userEvent.setup();
    await screen.findByTestId("question-input");
    await fireEvent.input(screen.getByTestId("slider-rel"), { target: { value: "0.5" } });
    await fireEvent.input(screen.getByTestId("slider-rel"), { target: { value: "0.25" } });
    await user.selectOptions(screen.getByTestId("export-format"), "html");
    await user.selectOptions(screen.getByTestId("theme-select"), "light");
    await waitFor(() => expect(mocked.saveSettings).toHaveBeenCalled(), { timeout: 2000 });
    await new Promise((r) => setTimeout(r, 500));
    expect(mocked.saveSettings).toHaveBeenCalledOnce();
    const saved = lastSaved();
    expect(saved.ask.weights.rel).toBe(0.25);
    expect(saved.export.format).toBe("html");
    expect(saved.theme).toBe("light");
    expect(saved.device).toBe("auto");
  });

  it("offers the devices this build has and shows the one in use after a change", async () => {
    mocked.appStatus.mockResolvedValue(
      status({ device: deviceStatus({ available: ["auto", "cpu", "cuda"], inUse: "cuda" }) }),
    );
    mocked.saveSettings.mockResolvedValue(
      deviceStatus({ chosen: "cpu", available: ["auto", "cpu", "cuda"], inUse: null }),
    );
    render(App);
    const user = userEvent.setup();
    const select = await screen.findByTestId("device-select");
    const options = within(select)
      .getAllByRole("option")
      .map((o) => (o as HTMLOptionElement).value);
    expect(options).toEqual(["auto", "cpu", "cuda"]);
    expect(screen.getByTestId("device-in-use")).toHaveTextContent("CUDA");

    await user.selectOptions(select, "cpu");
    await waitFor(() => expect(mocked.saveSettings).toHaveBeenCalled(), { timeout: 2000 });
    expect(lastSaved().device).toBe("cpu");
    await waitFor(() =>
      expect(screen.getByTestId("device-in-use")).toHaveTextContent("not loaded yet"),
    );
    expect(screen.getByTestId("device-note")).toHaveTextContent(/next question/);
  });

  it("locks the device when the environment fixes it", async () => {
    mocked.appStatus.mockResolvedValue(
      status({ device: deviceStatus({ chosen: "cpu", fixedByEnv: true }) }),
    );
    render(App);
    expect(await screen.findByTestId("device-select")).toBeDisabled();
    await waitFor(() =>
      expect(screen.getByTestId("device-note")).toHaveTextContent("SELFRAG_DEVICE"),
    );
  });

  it("saves the embedder's arithmetic, and says when the CPU or the environment decides it", async () => {
    render(App);
    const user = userEvent.setup();
    const select = await screen.findByTestId("precision-select");
    expect(select).toHaveValue("int8");
    expect(screen.getByTestId("precision-note")).toHaveTextContent(/nothing is re-indexed/);
    await user.selectOptions(select, "f32");
    await waitFor(() => expect(mocked.saveSettings).toHaveBeenCalled(), { timeout: 2000 });
    expect(lastSaved().embedderPrecision).toBe("f32");
    cleanup();

    mocked.appStatus.mockResolvedValue(status({ device: deviceStatus({ int8Available: false }) }));
    render(App);
    await waitFor(() =>
      expect(screen.getByTestId("precision-note")).toHaveTextContent(
        /neither AVX-512 VNNI nor AVX-VNNI/,
      ),
    );
    cleanup();

    mocked.appStatus.mockResolvedValue(
      status({ device: deviceStatus({ embedderPrecision: "f32", precisionFixedByEnv: true }) }),
    );
    render(App);
    await waitFor(() => expect(screen.getByTestId("precision-select")).toBeDisabled());
    await waitFor(() =>
      expect(screen.getByTestId("precision-note")).toHaveTextContent(
        "SELFRAG_EMBEDDER_PRECISION environment variable (f32)",
      ),
    );
  });

  it("saves exact numbers as both precisions at f32, and the reference tokenizer's prefix", async () => {
    render(App);
    const user = userEvent.setup();
    const exact = await screen.findByTestId("exact-switch");
    expect(exact).not.toBeChecked();
    expect(screen.getByTestId("exact-switch").parentElement).toHaveTextContent(
      "Exact numbers (f32 cache and embedder: slower, more memory)",
    );
    await user.click(exact);
    await waitFor(() => expect(mocked.saveSettings).toHaveBeenCalled(), { timeout: 2000 });
    expect(lastSaved().cachePrecision).toBe("f32");
    expect(lastSaved().embedderPrecision).toBe("f32");
    // One model: the embedder's menu follows, and choosing 8 bits there turns exact off.
    expect(screen.getByTestId("precision-select")).toHaveValue("f32");
    await user.selectOptions(screen.getByTestId("precision-select"), "int8");
    expect(screen.getByTestId("exact-switch")).not.toBeChecked();
    await user.click(screen.getByTestId("exact-switch"));
    await user.click(screen.getByTestId("exact-switch"));
    const prefix = screen.getByTestId("dummy-prefix-select");
    expect(prefix).toHaveValue("text-start");
    expect(screen.getByTestId("dummy-prefix-note")).toHaveTextContent(
      "For reproducing the reference code's numbers; the default matches fine-tuning.",
    );
    await user.selectOptions(prefix, "every-fragment");
    await waitFor(() => expect(lastSaved().dummyPrefix).toBe("every-fragment"), {
      timeout: 2000,
    });
    expect(lastSaved().cachePrecision).toBeUndefined();
    expect(lastSaved().embedderPrecision).toBe("int8");
    cleanup();

    mocked.appStatus.mockResolvedValue(
      status({
        device: deviceStatus({
          cachePrecision: "f32",
          cachePrecisionFixedByEnv: true,
          dummyPrefixFixedByEnv: true,
          dummyPrefix: "every-fragment",
        }),
      }),
    );
    render(App);
    await waitFor(() => expect(screen.getByTestId("exact-switch")).toBeDisabled());
    expect(screen.getByTestId("exact-note")).toHaveTextContent("SELFRAG_KV_CACHE");
    expect(screen.getByTestId("dummy-prefix-select")).toBeDisabled();
    expect(screen.getByTestId("dummy-prefix-note")).toHaveTextContent(
      "SELFRAG_DUMMY_PREFIX environment variable (every-fragment)",
    );
  });

  it("reports a broken settings file", async () => {
    const loaded = loadedSettings();
    loaded.notice =
      "The settings file /c/settings.json could not be parsed (EOF). It was kept as /c/settings.json.broken-1 and the defaults are in use.";
    mocked.loadSettings.mockResolvedValue(loaded);
    render(App);
    expect(await screen.findByTestId("error-banner")).toHaveTextContent(
      "kept as /c/settings.json.broken-1",
    );
  });
});

describe("debouncedSaver", () => {
  it("saves the last value once per quiet period and flushes on demand", async () => {
    vi.useFakeTimers();
    try {
      const save = vi.fn().mockResolvedValue(undefined);
      const onError = vi.fn();
      const saver = debouncedSaver(save, 100, onError);
      saver.schedule(1);
      vi.advanceTimersByTime(50);
      saver.schedule(2);
      vi.advanceTimersByTime(99);
      expect(save).not.toHaveBeenCalled();
      vi.advanceTimersByTime(1);
      expect(save).toHaveBeenCalledExactlyOnceWith(2);

      saver.schedule(3);
      await saver.flush();
      expect(save).toHaveBeenLastCalledWith(3);
      vi.advanceTimersByTime(200);
      expect(save).toHaveBeenCalledTimes(2);
      await saver.flush();
      expect(save).toHaveBeenCalledTimes(2);

      save.mockRejectedValueOnce(new Error("disk full"));
      saver.schedule(4);
      await saver.flush();
      expect(onError).toHaveBeenCalledWith(new Error("disk full"));
    } finally {
      vi.useRealTimers();
    }
  });
});
