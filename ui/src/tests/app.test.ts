import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { tick } from "svelte";
import { beforeEach, describe, expect, it, vi } from "vitest";

import App from "../App.svelte";
import * as ipc from "$lib/ipc";
import type { AnswerRecord, IndexEvent, IndexFinished, Progress } from "$lib/ipc/types";
import { defaultSettings } from "$lib/settings";
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

const MARKDOWN = {
  format: "md",
  supportLabels: false,
  onlySupported: false,
  citations: "numbers",
  bibtexEncoding: "utf8",
} as const;

/** A promise the test settles by hand, to look at the UI while a call is in flight. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

let drop: (paths: string[]) => void = () => {};
let hover: (hovering: boolean) => void = () => {};

beforeEach(() => {
  vi.resetAllMocks();
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
  mocked.appStatus.mockResolvedValue(status());
  mocked.loadSettings.mockResolvedValue(loadedSettings());
  mocked.saveSettings.mockResolvedValue(deviceStatus());
  mocked.listHistory.mockResolvedValue([]);
  mocked.generatorState.mockResolvedValue({
    url: null,
    model: null,
    fixedByEnv: false,
    hasApiKey: false,
  });
  mocked.libraryLocationState.mockResolvedValue(localLibrary());
  mocked.embedderServerState.mockResolvedValue(localEmbedder());
  mocked.listDocuments.mockResolvedValue([
    {
      id: "d1",
      path: "/home/ada/papers/selfrag.pdf",
      title: "Self-RAG paper",
      pages: 30,
      passages: 12,
      passagesExpected: null,
      work: {},
      workSources: [],
    },
  ]);
  mocked.onFilesDropped.mockImplementation(async (onDrop, onHover) => {
    drop = onDrop;
    hover = onHover ?? (() => {});
    return () => {};
  });
});

async function askAndAnswer(answered: AnswerRecord = record()) {
  mocked.ask.mockResolvedValue(answered);
  const user = userEvent.setup();
  await user.type(await screen.findByTestId("question-input"), "When does Self-RAG retrieve?");
  await user.keyboard("{Enter}");
  await screen.findByTestId("answer");
}

describe("App", () => {
  it("lists the documents of the library", async () => {
    render(App);
    const items = await screen.findAllByTestId("document-item");
    expect(items).toHaveLength(1);
    expect(items[0]).toHaveTextContent("Self-RAG paper");
    expect(items[0]).toHaveTextContent("12 passages");
  });

  it("shows where each missing model was looked for and how to fix it", async () => {
    mocked.appStatus.mockResolvedValue(
      status({
        models: [
          {
            role: "generator",
            name: "selfrag_llama2_7b Q4_K_M",
            found: false,
            path: null,
            searched: ["/home/ada/.cache/huggingface/hub", "/home/ada/.local/share/selfrag/models"],
            fix: "Run `selfrag models download generator`.",
          },
          {
            role: "embedder",
            name: "facebook/contriever-msmarco",
            found: false,
            path: null,
            searched: ["/home/ada/.cache/huggingface/hub"],
            fix: "Run `selfrag models download embedder`.",
          },
        ],
      }),
    );
    render(App);

    const screenEl = await screen.findByTestId("missing-models");
    expect(screenEl).toHaveTextContent("selfrag_llama2_7b Q4_K_M");
    expect(screenEl).toHaveTextContent("/home/ada/.local/share/selfrag/models");
    expect(screenEl).toHaveTextContent("Run `selfrag models download generator`.");
    expect(screen.getAllByTestId("searched-path").map((el) => el.textContent)).toEqual([
      "/home/ada/.cache/huggingface/hub",
      "/home/ada/.local/share/selfrag/models",
      "/home/ada/.cache/huggingface/hub",
    ]);
    expect(screen.queryByTestId("question-input")).toBeNull();
    // The library still works, and says why it cannot index.
    expect(await screen.findAllByTestId("document-item")).toHaveLength(1);
    expect(screen.getByTestId("embedder-missing")).toHaveTextContent("facebook/contriever-msmarco");
  });

  it("says a missing model once, on the start screen, not again in a banner", async () => {
    const embedderMissing = status({
      models: [
        {
          role: "embedder",
          name: "facebook/contriever-msmarco",
          found: false,
          path: null,
          searched: ["/home/ada/.cache/huggingface/hub"],
          fix: "Download it on this screen.",
        },
      ],
    });
    const modelMissing = {
      code: "model_missing",
      message: "the embedder model is not available: no Contriever model folder was found",
    };
    mocked.appStatus.mockResolvedValue(embedderMissing);
    mocked.libraryStats.mockRejectedValue(modelMissing);
    render(App);
    await screen.findByTestId("missing-models");
    await waitFor(() => expect(mocked.libraryStats).toHaveBeenCalled());
    await tick();
    expect(screen.queryByTestId("error-banner")).toBeNull();
    expect(screen.getByTestId("embedder-missing")).toHaveTextContent("Indexing starts once");
  });

  it("shows a model_missing failure in a banner when no model is known to be missing", async () => {
    mocked.libraryStats.mockRejectedValue({ code: "model_missing", message: "gone since start" });
    render(App);
    expect(await screen.findByTestId("error-banner")).toHaveTextContent("gone since start");
    // A title for people; the raw code only in its tooltip.
    const title = screen.getByTestId("error-title");
    expect(title).toHaveTextContent(/^Model missing\.$/);
    expect(title).toHaveAttribute("title", "Error code: model_missing");
  });

  it("asks on Enter and renders the Progress events in the status line", async () => {
    const reply = deferred<AnswerRecord>();
    let send: (event: Progress) => void = () => {};
    mocked.ask.mockImplementation((_q, _s, onEvent) => {
      send = onEvent;
      return reply.promise;
    });
    const user = userEvent.setup();
    render(App);

    await user.type(await screen.findByTestId("question-input"), "When does Self-RAG retrieve?");
    await user.keyboard("{Enter}");
    expect(mocked.ask).toHaveBeenCalledWith(
      "When does Self-RAG retrieve?",
      defaultSettings(),
      expect.any(Function),
    );
    expect(screen.getByTestId("ask-button")).toBeDisabled();

    const line = screen.getByTestId("status-line");
    const steps: [Progress, string][] = [
      [
        {
          kind: "retrieve_decided",
          p_retrieve: 0.83,
          threshold: 0.2,
          mode: "adaptive",
          retrieved: true,
        },
        "Deciding whether to retrieve: p = 0.83 > δ 0.20 → retrieving",
      ],
      [{ kind: "passages_retrieved", segment: 0, count: 5 }, "Retrieved 5 passages"],
      [{ kind: "candidates_started", segment: 0, count: 5 }, "Writing candidates 0/5"],
      [{ kind: "candidate_finished", segment: 0, index: 2, count: 5 }, "Writing candidates 1/5"],
      [{ kind: "candidate_finished", segment: 0, index: 0, count: 5 }, "Writing candidates 2/5"],
      [
        { kind: "segment_chosen", segment: 0, text: "Self-RAG retrieves on demand.", citation: 1 },
        "Chose “Self-RAG retrieves on demand.” [1]",
      ],
    ];
    for (const [event, text] of steps) {
      send(event);
      await tick();
      expect(line).toHaveTextContent(text);
    }
    expect(screen.getByTestId("answer-draft")).toHaveTextContent("Self-RAG retrieves on demand.");

    reply.resolve(record());
    expect(await screen.findByTestId("answer")).toHaveTextContent(
      "Self-RAG retrieves passages only when it needs them.",
    );
    expect(line).toHaveTextContent(/Answered in \d+\.\d s/);
  });

  it("does not ask on Shift+Enter", async () => {
    const user = userEvent.setup();
    render(App);
    await user.type(await screen.findByTestId("question-input"), "line one{Shift>}{Enter}{/Shift}");
    expect(mocked.ask).not.toHaveBeenCalled();
    expect(screen.getByTestId("question-input")).toHaveValue("line one\n");
  });

  it("reranks when a weight slider moves and shows the re-ranked answer", async () => {
    render(App);
    await askAndAnswer();
    mocked.rerank.mockResolvedValue(reranked());

    await fireEvent.input(screen.getByTestId("slider-sup"), { target: { value: "1.5" } });

    expect(mocked.rerank).toHaveBeenCalledWith("a1", { rel: 1, sup: 1.5, use: 0.5 }, false);
    await waitFor(() =>
      expect(screen.getByTestId("answer")).toHaveTextContent("It retrieves for factual questions."),
    );
    expect(screen.getByTestId("badge-issup")).toHaveTextContent("Partially supported");
    expect(screen.getByTestId("weight-sup")).toHaveTextContent("1.50");
  });

  it("ignores a rerank reply that arrives after a newer one", async () => {
    render(App);
    await askAndAnswer();
    const first = deferred<AnswerRecord>();
    const second = deferred<AnswerRecord>();
    mocked.rerank.mockReturnValueOnce(first.promise).mockReturnValueOnce(second.promise);

    await fireEvent.input(screen.getByTestId("slider-rel"), { target: { value: "0.5" } });
    await fireEvent.input(screen.getByTestId("slider-rel"), { target: { value: "0.25" } });
    expect(mocked.rerank).toHaveBeenNthCalledWith(1, "a1", { rel: 0.5, sup: 1, use: 0.5 }, false);
    expect(mocked.rerank).toHaveBeenNthCalledWith(2, "a1", { rel: 0.25, sup: 1, use: 0.5 }, false);

    second.resolve(reranked());
    await waitFor(() =>
      expect(screen.getByTestId("answer")).toHaveTextContent("It retrieves for factual questions."),
    );
    first.resolve(record());
    await new Promise((r) => setTimeout(r, 0));
    await tick();
    expect(screen.getByTestId("answer")).toHaveTextContent("It retrieves for factual questions.");
  });

  it("applies weights moved during a run to its answer once it arrives", async () => {
    const reply = deferred<AnswerRecord>();
    mocked.ask.mockReturnValue(reply.promise);
    mocked.rerank.mockResolvedValue(reranked());
    const user = userEvent.setup();
    render(App);
    await user.type(await screen.findByTestId("question-input"), "Why?{Enter}");

    await fireEvent.input(screen.getByTestId("slider-sup"), { target: { value: "1.5" } });
    expect(mocked.rerank).not.toHaveBeenCalled();

    reply.resolve(record());
    await waitFor(() =>
      expect(mocked.rerank).toHaveBeenCalledWith("a1", { rel: 1, sup: 1.5, use: 0.5 }, false),
    );
    await waitFor(() =>
      expect(screen.getByTestId("answer")).toHaveTextContent("It retrieves for factual questions."),
    );
  });

  it("reranks with hard constraints when the checkbox is ticked", async () => {
    render(App);
    await askAndAnswer();
    mocked.rerank.mockResolvedValue(record());
    await fireEvent.click(screen.getByTestId("hard-constraints"));
    expect(mocked.rerank).toHaveBeenCalledWith("a1", { rel: 1, sup: 1, use: 0.5 }, true);
  });

  it("says in the Device menu when a server generates and the device runs the embedder", async () => {
    mocked.appStatus.mockResolvedValue(
      status({ device: deviceStatus({ chosen: "cpu", inUse: "cpu" }) }),
    );
    mocked.generatorState.mockResolvedValue({
      url: "http://gpu-box:8080",
      model: null,
      fixedByEnv: false,
      hasApiKey: false,
    });
    render(App);
    await waitFor(() =>
      expect(screen.getByTestId("device-in-use")).toHaveTextContent("CPU · embedder only"),
    );
    expect(screen.getByTestId("device-server-note")).toHaveTextContent(
      "Answers are generated on gpu-box:8080; this device runs the embedder",
    );
  });

  it("says nothing of a server in the Device menu when this computer generates", async () => {
    mocked.appStatus.mockResolvedValue(
      status({ device: deviceStatus({ chosen: "cpu", inUse: "cpu" }) }),
    );
    render(App);
    await waitFor(() => expect(screen.getByTestId("device-in-use")).toHaveTextContent("· CPU"));
    expect(screen.getByTestId("generator-in-use")).toHaveTextContent("this computer");
    expect(screen.getByTestId("device-in-use")).not.toHaveTextContent("embedder");
    expect(screen.queryByTestId("device-server-note")).toBeNull();
  });

  it("asks with the scoring rules chosen under Retrieval settings", async () => {
    mocked.ask.mockRejectedValue({ code: "selfrag", message: "stop here" });
    const user = userEvent.setup();
    render(App);
    await user.type(await screen.findByTestId("question-input"), "Why?");
    await user.selectOptions(screen.getByTestId("p-lm-tokens"), "text");
    await user.click(screen.getByTestId("long-form"));
    await user.selectOptions(screen.getByTestId("long-form-ranking"), "raw");
    await user.clear(screen.getByTestId("prompt-budget"));
    await user.type(screen.getByTestId("prompt-budget"), "4096");
    await user.click(screen.getByTestId("ask-button"));
    await screen.findByTestId("error-banner");
    expect(mocked.ask).toHaveBeenCalledWith(
      "Why?",
      expect.objectContaining({
        p_lm_tokens: "text",
        long_form: true,
        long_form_ranking: "raw",
        prompt_budget: 4096,
      }),
      expect.anything(),
    );
  });

  it("shows a failed call's message in a banner that can be dismissed", async () => {
    mocked.ask.mockRejectedValue({
      code: "selfrag",
      message: "The model ran out of memory.",
    });
    const user = userEvent.setup();
    render(App);
    await user.type(await screen.findByTestId("question-input"), "Why?");
    await user.click(screen.getByTestId("ask-button"));

    const banner = await screen.findByTestId("error-banner");
    expect(banner).toHaveTextContent("The model ran out of memory.");
    await user.click(screen.getByRole("button", { name: "Dismiss error" }));
    expect(screen.queryByTestId("error-banner")).toBeNull();
  });

  it("exports the answer as Markdown and says where it went", async () => {
    render(App);
    await askAndAnswer();
    mocked.exportAnswer.mockResolvedValueOnce("/home/ada/answer.md").mockResolvedValueOnce(null);

    await fireEvent.click(screen.getByTestId("export-button"));
    expect(mocked.exportAnswer).toHaveBeenCalledWith("a1", MARKDOWN);
    await waitFor(() =>
      expect(screen.getByTestId("export-status")).toHaveTextContent("Saved to /home/ada/answer.md"),
    );

    // Cancelling the save dialog says nothing.
    await fireEvent.click(screen.getByTestId("export-button"));
    await waitFor(() => expect(screen.getByTestId("export-status")).toHaveTextContent(""));
    expect(screen.getByTestId("export-status").textContent?.trim()).toBe("");
  });

  it("indexes dropped files and reports each file's outcome", async () => {
    render(App);
    await screen.findAllByTestId("document-item");
    await waitFor(() => expect(mocked.onFilesDropped).toHaveBeenCalled());

    hover(true);
    await tick();
    expect(screen.getByTestId("library")).toHaveClass("drop-active");

    const done = deferred<IndexFinished>();
    let send: (event: IndexEvent) => void = () => {};
    mocked.indexPaths.mockImplementation((_paths, onEvent) => {
      send = onEvent;
      return done.promise;
    });
    hover(false);
    drop(["/home/ada/new.md", "/home/ada/broken.pdf"]);
    await tick();
    expect(screen.getByTestId("library")).not.toHaveClass("drop-active");
    expect(mocked.indexPaths).toHaveBeenCalledWith(
      ["/home/ada/new.md", "/home/ada/broken.pdf"],
      expect.any(Function),
    );

    send({ kind: "started", total: 2, resumed: [] });
    send({ kind: "fileStarted", path: "/home/ada/new.md" });
    await tick();
    expect(screen.getByTestId("index-status")).toHaveTextContent("Indexing new.md (1/2)…");
    send({ kind: "fileIndexed", path: "/home/ada/new.md", passages: 3, notes: [] });
    send({ kind: "fileStarted", path: "/home/ada/broken.pdf" });
    send({ kind: "fileFailed", path: "/home/ada/broken.pdf", error: "the PDF parser timed out" });

    mocked.listDocuments.mockResolvedValue([
      {
        id: "d1",
        path: "/home/ada/papers/selfrag.pdf",
        title: "Self-RAG paper",
        pages: 30,
        passages: 12,
        passagesExpected: null,
        work: {},
        workSources: [],
      },
      {
        id: "d2",
        path: "/home/ada/new.md",
        title: "new",
        pages: 1,
        passages: 3,
        passagesExpected: null,
        work: {},
        workSources: [],
      },
    ]);
    done.resolve({
      kind: "finished",
      indexed: 1,
      skipped: 0,
      failed: 1,
      removed: 0,
      cancelled: false,
      paused: false,
    });

    await waitFor(() =>
      expect(screen.getByTestId("index-status")).toHaveTextContent(
        "Indexed 1 file, 3 passages, 1 failed",
      ),
    );
    expect(screen.getByTestId("index-problems")).toHaveTextContent(
      "broken.pdf: the PDF parser timed out",
    );
    await waitFor(() => expect(screen.getAllByTestId("document-item")).toHaveLength(2));
  });
});

describe("Stop", () => {
  /** Starts a question whose reply the test settles, and waits until it runs. */
  async function startQuestion(question = "Why?") {
    const reply = deferred<AnswerRecord>();
    mocked.ask.mockReturnValue(reply.promise);
    mocked.cancelAsk.mockImplementation(async () => {
      reply.reject({ code: "cancelled", message: "The question was stopped." });
    });
    const user = userEvent.setup();
    await user.type(await screen.findByTestId("question-input"), `${question}{Enter}`);
    await screen.findByTestId("stop-button");
    return { reply, user };
  }

  it("turns Ask into Stop while a question runs, and Stop cancels it", async () => {
    render(App);
    expect(await screen.findByTestId("ask-button")).toBeInTheDocument();
    expect(screen.queryByTestId("stop-button")).toBeNull();

    const { user } = await startQuestion();
    expect(screen.getByTestId("ask-button")).toBeDisabled();
    await user.click(screen.getByTestId("stop-button"));

    expect(mocked.cancelAsk).toHaveBeenCalledTimes(1);
    await waitFor(() => expect(screen.queryByTestId("stop-button")).toBeNull());
  });

  it("stops on Esc while a question runs, and only then", async () => {
    const user = userEvent.setup();
    render(App);
    await screen.findByTestId("question-input");
    await user.keyboard("{Escape}");
    expect(mocked.cancelAsk).not.toHaveBeenCalled();

    await startQuestion();
    await user.keyboard("{Escape}");
    expect(mocked.cancelAsk).toHaveBeenCalledTimes(1);
  });

  it("says Stopped., shows no error, and keeps the previous answer", async () => {
    render(App);
    await askAndAnswer();

    const { user } = await startQuestion("A second question");
    expect(screen.queryByTestId("answer")).toBeNull();
    await user.click(screen.getByTestId("stop-button"));

    expect(await screen.findByTestId("answer")).toHaveTextContent(
      "Self-RAG retrieves passages only when it needs them.",
    );
    expect(screen.getByTestId("status-line")).toHaveTextContent(/^Stopped\.$/);
    expect(screen.queryByTestId("error-banner")).toBeNull();
    expect(screen.getByTestId("export-button")).toBeEnabled();
  });

  it("applies weights moved during a stopped run to the answer that stays", async () => {
    render(App);
    await askAndAnswer();
    mocked.rerank.mockResolvedValue(reranked());
    const { user } = await startQuestion("A second question");

    await fireEvent.input(screen.getByTestId("slider-sup"), { target: { value: "1.5" } });
    expect(mocked.rerank).not.toHaveBeenCalled();
    await user.click(screen.getByTestId("stop-button"));

    await waitFor(() =>
      expect(mocked.rerank).toHaveBeenCalledWith("a1", { rel: 1, sup: 1.5, use: 0.5 }, false),
    );
    await waitFor(() =>
      expect(screen.getByTestId("answer")).toHaveTextContent("It retrieves for factual questions."),
    );
  });
});

describe("Weight presets", () => {
  it("re-ranks once per preset with its weights and marks the matching one pressed", async () => {
    render(App);
    await askAndAnswer();
    mocked.rerank.mockResolvedValue(record());
    const pressed = () =>
      ["strict", "balanced", "fluent"].filter(
        (id) => screen.getByTestId(`preset-${id}`).getAttribute("aria-pressed") === "true",
      );
    // The paper's defaults are the balanced preset.
    expect(pressed()).toEqual(["balanced"]);

    const presets: [string, { rel: number; sup: number; use: number }, boolean][] = [
      ["strict", { rel: 1, sup: 2, use: 0.5 }, true],
      ["fluent", { rel: 0.5, sup: 0.5, use: 1 }, false],
      ["balanced", { rel: 1, sup: 1, use: 0.5 }, false],
    ];
    for (const [i, [id, weights, hard]] of presets.entries()) {
      await fireEvent.click(screen.getByTestId(`preset-${id}`));
      expect(mocked.rerank).toHaveBeenCalledTimes(i + 1);
      expect(mocked.rerank).toHaveBeenLastCalledWith("a1", weights, hard);
      expect(pressed()).toEqual([id]);
      expect(screen.getByTestId("weight-sup")).toHaveTextContent(weights.sup.toFixed(2));
      expect(screen.getByTestId("hard-constraints")).toHaveProperty("checked", hard);
    }

    // A slider off every preset's value leaves none pressed.
    await fireEvent.input(screen.getByTestId("slider-use"), { target: { value: "0.75" } });
    expect(pressed()).toEqual([]);
  });
});

describe("Keyboard shortcuts", () => {
  it("exports Markdown on Ctrl+E once an answer is shown", async () => {
    const user = userEvent.setup();
    render(App);
    await screen.findByTestId("question-input");
    await user.keyboard("{Control>}e{/Control}");
    expect(mocked.exportAnswer).not.toHaveBeenCalled();

    await askAndAnswer();
    mocked.exportAnswer.mockResolvedValue("/home/ada/answer.md");
    await user.keyboard("{Control>}e{/Control}");
    expect(mocked.exportAnswer).toHaveBeenCalledWith("a1", MARKDOWN);
    await waitFor(() =>
      expect(screen.getByTestId("export-status")).toHaveTextContent("Saved to /home/ada/answer.md"),
    );
  });

  it("focuses the question box on Ctrl+K", async () => {
    const user = userEvent.setup();
    render(App);
    await askAndAnswer();
    await user.click(screen.getByTestId("slider-sup"));
    expect(screen.getByTestId("question-input")).not.toHaveFocus();

    await user.keyboard("{Control>}k{/Control}");
    expect(screen.getByTestId("question-input")).toHaveFocus();
  });
});
