// The first-run screen: what each missing model is, downloading it with progress, cancel and
// resume, and the app going on once every model is there. The IPC module is mocked.

import { render, screen, waitFor, within } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";

import App from "../App.svelte";
import MissingModels from "$lib/components/MissingModels.svelte";
import { downloadLabel, formatBytes, formatDuration, fraction, progressText } from "$lib/downloads";
import * as ipc from "$lib/ipc";
import type { AppStatus, ModelDownloadProgress, ModelStatus } from "$lib/ipc/types";
import { status } from "./fixtures";

// Every export of the IPC module becomes a mock, whatever the module grows.
vi.mock("$lib/ipc", (real) => import("./mock-ipc").then((m) => m.mockIpc(real)));

const mocked = vi.mocked(ipc);

/** A call that never answers: what every command does unless a test says otherwise. */
function pending(): Promise<never> {
  return new Promise(() => {});
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function generator(overrides: Partial<ModelStatus> = {}): ModelStatus {
  return {
    role: "generator",
    name: "Self-RAG Llama-2 7B, Q4_K_M GGUF",
    found: false,
    path: null,
    searched: ["/home/ada/.cache/huggingface/hub/models--m4r1--selfrag_llama2_7b-GGUF"],
    fix: "Download it here, or with `selfrag models pull selfrag-7b-q4km`.",
    download: {
      id: "selfrag-7b-q4km",
      repo: "m4r1/selfrag_llama2_7b-GGUF",
      license: "mit",
      licenseTerms:
        "MIT (the Self-RAG model card), for weights fine-tuned from Llama 2, whose use is also governed by the Llama 2 Community License (including its acceptable use policy)",
      sizeBytes: 4_080_000_000,
      partialBytes: 0,
      note: null,
    },
    ...overrides,
  };
}

function embedder(overrides: Partial<ModelStatus> = {}): ModelStatus {
  return {
    role: "embedder",
    name: "facebook/contriever-msmarco, BERT-base uncased, 768-d",
    found: false,
    path: null,
    searched: ["/home/ada/.cache/huggingface/hub/models--facebook--contriever-msmarco"],
    fix: "Download it here, or with `selfrag models pull contriever-msmarco`.",
    download: {
      id: "contriever-msmarco",
      repo: "facebook/contriever-msmarco",
      license: "cc-by-nc-4.0",
      licenseTerms:
        "Creative Commons Attribution-NonCommercial 4.0 (CC BY-NC 4.0): free to use and share with credit, but not for commercial purposes",
      sizeBytes: 438_000_000,
      partialBytes: 0,
      note: null,
    },
    ...overrides,
  };
}

function progress(overrides: Partial<ModelDownloadProgress> = {}): ModelDownloadProgress {
  return {
    modelId: "selfrag-7b-q4km",
    stage: "downloading",
    file: "selfrag_llama2_7b.q4_k_m.gguf",
    bytesDone: 1_020_000_000,
    bytesTotal: 4_080_000_000,
    bytesPerSecond: 12_500_000,
    etaSeconds: 245,
    ...overrides,
  };
}

/** The status once both models are in place. */
function allFound(): AppStatus {
  return status();
}

beforeEach(() => {
  vi.resetAllMocks();
  for (const fn of Object.values(mocked))
    vi.mocked(fn as () => unknown).mockImplementation(pending);
});

describe("download formatting", () => {
  it("reads sizes, rates and times like the hub does", () => {
    expect(formatBytes(4_080_000_000)).toBe("4.08 GB");
    expect(formatBytes(438_000_000)).toBe("438.0 MB");
    expect(formatBytes(12_000)).toBe("12 kB");
    expect(formatDuration(245)).toBe("4 min 5 s");
    expect(formatDuration(7500)).toBe("2 h 5 min");
    expect(progressText(progress())).toBe("1.02 GB of 4.08 GB · 12.5 MB/s · about 4 min 5 s left");
    expect(progressText(progress({ stage: "verifying" }))).toMatch(/^Verifying .*SHA-256/);
    expect(progressText(progress({ stage: "checking", bytesTotal: 0, bytesDone: 0 }))).toMatch(
      /Asking the hub/,
    );
    expect(fraction(progress())).toBeCloseTo(0.25);
    expect(fraction(progress({ bytesTotal: 0 }))).toBeNull();
    const offer = generator().download!;
    expect(downloadLabel(offer)).toBe("Download (4.08 GB)");
    expect(downloadLabel({ ...offer, partialBytes: 1_200_000_000 })).toBe(
      "Resume download (1.20 GB of 4.08 GB already here)",
    );
  });
});

describe("MissingModels", () => {
  it("shows each missing model's size, license and repository, where it looked and the fix", () => {
    render(MissingModels, { models: [generator(), embedder()], dataDir: "/data" });
    const items = screen.getAllByTestId("missing-model");
    expect(items).toHaveLength(2);
    expect(items[0]).toHaveTextContent("4.08 GB");
    expect(items[0]).toHaveTextContent("license mit");
    expect(items[0]).toHaveTextContent("m4r1/selfrag_llama2_7b-GGUF");
    expect(items[0]).toHaveTextContent("models--m4r1--selfrag_llama2_7b-GGUF");
    expect(items[0]).toHaveTextContent("selfrag models pull selfrag-7b-q4km");
    expect(items[1]).toHaveTextContent("cc-by-nc-4.0");
    // The licence in words: the embedder's forbids commercial use, the generator's is Llama 2's too.
    expect(within(items[1]).getByTestId("model-license")).toHaveTextContent(
      "not for commercial purposes",
    );
    expect(within(items[0]).getByTestId("model-license")).toHaveTextContent(
      "Llama 2 Community License",
    );
    expect(within(items[1]).getByTestId("download-model")).toHaveTextContent("Download (438.0 MB)");
    expect(screen.getByTestId("download-all")).toHaveTextContent("Download all (4.52 GB)");
    // A newcomer sees the Download button; the command lines and paths wait, folded, for those
    // who want them.
    const otherWays = within(items[0]).getByTestId("other-ways");
    expect(otherWays.tagName).toBe("DETAILS");
    expect(otherWays).not.toHaveAttribute("open");
    expect(otherWays).toHaveTextContent("selfrag models pull selfrag-7b-q4km");
    expect(otherWays).toHaveTextContent("models--m4r1--selfrag_llama2_7b-GGUF");
  });

  it("offers no download for a model the environment points at", () => {
    render(MissingModels, {
      models: [generator({ download: undefined, fix: "SELFRAG_GENERATOR points at /x.gguf" })],
      dataDir: "/data",
    });
    expect(screen.queryByTestId("download-model")).toBeNull();
    expect(screen.getByTestId("missing-model")).toHaveTextContent("SELFRAG_GENERATOR");
    // With no download to offer, the fix is the way: shown, not folded.
    expect(screen.queryByTestId("other-ways")).toBeNull();
  });

  it("downloads with a progress bar (bytes, rate, time left) and hands on the new status", async () => {
    const call = deferred<AppStatus>();
    let send: (event: ModelDownloadProgress) => void = () => {};
    mocked.downloadModel.mockImplementation((_id, onEvent) => {
      send = onEvent;
      return call.promise;
    });
    const onStatus = vi.fn();
    const user = userEvent.setup();
    render(MissingModels, { models: [generator()], dataDir: "/data", onStatus });

    await user.click(screen.getByTestId("download-model"));
    expect(mocked.downloadModel).toHaveBeenCalledWith("selfrag-7b-q4km", expect.any(Function));
    expect(await screen.findByTestId("download-progress-text")).toHaveTextContent("Starting");
    expect(screen.queryByTestId("download-model")).toBeNull();

    send(progress());
    await waitFor(() =>
      expect(screen.getByTestId("download-progress-text")).toHaveTextContent(
        "1.02 GB of 4.08 GB · 12.5 MB/s · about 4 min 5 s left",
      ),
    );
    const bar = screen.getByRole("progressbar", { name: /Downloading Self-RAG/ });
    expect((bar as HTMLProgressElement).value).toBeCloseTo(0.25);

    call.resolve(allFound());
    await waitFor(() => expect(onStatus).toHaveBeenCalledWith(allFound()));
    expect(mocked.refreshModels).not.toHaveBeenCalled();
  });

  it("cancels, keeps the partial download, and offers to resume it", async () => {
    const call = deferred<AppStatus>();
    mocked.downloadModel.mockReturnValue(call.promise);
    mocked.cancelDownload.mockImplementation(async () => {
      call.reject({ code: "download_cancelled", message: "the download was cancelled" });
    });
    const partial = status({
      models: [
        generator({
          download: { ...generator().download!, partialBytes: 1_200_000_000 },
        }),
        status().models[1],
      ],
    });
    mocked.refreshModels.mockResolvedValue(partial);
    const onStatus = vi.fn();
    const user = userEvent.setup();
    const view = render(MissingModels, { models: [generator()], dataDir: "/data", onStatus });

    await user.click(screen.getByTestId("download-model"));
    await user.click(await screen.findByTestId("cancel-download"));
    expect(mocked.cancelDownload).toHaveBeenCalledWith("selfrag-7b-q4km");
    expect(await screen.findByTestId("download-cancelled")).toHaveTextContent("resumes");
    expect(screen.queryByRole("alert")).toBeNull();
    await waitFor(() => expect(onStatus).toHaveBeenCalledWith(partial));

    // The app hands the new status back down: the button now resumes.
    await view.rerender({ models: [partial.models[0]], dataDir: "/data", onStatus });
    expect(screen.getByTestId("download-model")).toHaveTextContent(
      "Resume download (1.20 GB of 4.08 GB already here)",
    );
  });

  it("shows a failed download's message, which names the file and the fix", async () => {
    mocked.downloadModel.mockRejectedValue({
      code: "download",
      message:
        "cannot reach https://huggingface.co/... for selfrag_llama2_7b.q4_k_m.gguf: connection refused; check the internet connection",
    });
    mocked.refreshModels.mockResolvedValue(status({ models: [generator(), embedder()] }));
    const user = userEvent.setup();
    render(MissingModels, { models: [generator()], dataDir: "/data" });
    await user.click(screen.getByTestId("download-model"));
    const alert = await screen.findByRole("alert");
    expect(alert).toHaveTextContent("selfrag_llama2_7b.q4_k_m.gguf");
    expect(alert).toHaveTextContent("internet connection");
    expect(screen.getByTestId("download-model")).toBeEnabled();
  });

  it("downloads all missing models one after the other", async () => {
    const order: string[] = [];
    mocked.downloadModel.mockImplementation(async (id) => {
      order.push(id);
      return status();
    });
    const user = userEvent.setup();
    render(MissingModels, { models: [generator(), embedder()], dataDir: "/data" });
    await user.click(screen.getByTestId("download-all"));
    await waitFor(() => expect(order).toEqual(["selfrag-7b-q4km", "contriever-msmarco"]));
  });

  it("looks again on request", async () => {
    mocked.refreshModels.mockResolvedValue(allFound());
    const onStatus = vi.fn();
    const user = userEvent.setup();
    render(MissingModels, { models: [generator()], dataDir: "/data", onStatus });
    await user.click(screen.getByTestId("check-again"));
    await waitFor(() => expect(onStatus).toHaveBeenCalledWith(allFound()));
  });
});

describe("first run in the app", () => {
  it("goes on to the main screen once the download completes", async () => {
    // Settings, history and the rest stay pending: the first-run screen needs none of them.
    mocked.appStatus.mockResolvedValue(status({ models: [generator(), status().models[1]] }));
    mocked.listDocuments.mockResolvedValue([]);
    mocked.downloadModel.mockResolvedValue(allFound());
    const user = userEvent.setup();
    render(App);

    await user.click(await screen.findByTestId("download-model"));
    await waitFor(() => expect(screen.queryByTestId("missing-models")).toBeNull());
    expect(await screen.findByTestId("question-input")).toBeInTheDocument();
    expect(screen.queryByText(/Asking needs the missing models/)).toBeNull();
  });
});
