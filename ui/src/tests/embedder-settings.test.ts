// The embedder setting: this computer or an embeddings server, the connection test's report and
// its errors, the key kept on the Rust side, the choice for the next start and the restart (the
// confirmations themselves are native, on the Rust side). The IPC module is mocked.

import { render, screen, waitFor } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";

import EmbedderSettings from "$lib/components/EmbedderSettings.svelte";
import * as ipc from "$lib/ipc";
import { localEmbedder } from "./fixtures";

vi.mock("$lib/ipc", (real) => import("./mock-ipc").then((m) => m.mockIpc(real)));

const mocked = vi.mocked(ipc);

describe("the embedder setting", () => {
  beforeEach(() => {
    vi.resetAllMocks();
    mocked.embedderServerState.mockResolvedValue(localEmbedder());
  });

  it("tests a server, chooses it with its key for the next start and offers the restart", async () => {
    const user = userEvent.setup();
    mocked.testEmbedderServer.mockResolvedValue({
      url: "http://gpu-box:8081/v1",
      model: "contriever-msmarco",
      dimensions: 768,
      roundTripMs: 41.6,
    });
    mocked.useEmbedderServer.mockResolvedValue(
      localEmbedder({ nextStart: "http://gpu-box:8081", hasApiKey: true }),
    );
    render(EmbedderSettings);
    await waitFor(() =>
      expect(screen.getByTestId("embedder-in-use")).toHaveTextContent("this computer"),
    );
    expect(screen.queryByTestId("embedder-restart")).toBeNull();
    await user.click(screen.getByTestId("embedder-server"));
    await user.type(screen.getByTestId("embedder-url"), "http://gpu-box:8081");
    await user.type(screen.getByTestId("embedder-api-key"), "lab-key");
    await user.click(screen.getByTestId("embedder-test"));
    await waitFor(() =>
      expect(screen.getByTestId("embedder-result")).toHaveTextContent(
        "contriever-msmarco at http://gpu-box:8081/v1 · 768 dimensions · 42 ms",
      ),
    );
    expect(mocked.testEmbedderServer).toHaveBeenCalledWith("http://gpu-box:8081", null, "lab-key");
    await user.click(screen.getByTestId("embedder-use"));
    await waitFor(() =>
      expect(screen.getByTestId("embedder-result")).toHaveTextContent(
        "Chosen: it is used when Self-RAG Desktop starts next.",
      ),
    );
    expect(mocked.useEmbedderServer).toHaveBeenCalledWith("http://gpu-box:8081", null, "lab-key");
    // The key went to the Rust side and is not kept in the page.
    expect(screen.getByTestId("embedder-api-key")).toHaveValue("");
    expect(screen.getByTestId("embedder-api-key")).toHaveAttribute(
      "placeholder",
      "saved (leave empty to keep)",
    );
    await user.click(screen.getByTestId("embedder-restart"));
    expect(mocked.restartApp).toHaveBeenCalled();
  });

  it("shows the server's refusal as an error, and a declined choice as not changed", async () => {
    const user = userEvent.setup();
    mocked.testEmbedderServer.mockRejectedValue({
      code: "embedder_server",
      message:
        "the embedder server at http://gpu-box:8081/v1 refused the request (401): check its API key (SELFRAG_EMBEDDER_API_KEY)",
    });
    mocked.useEmbedderServer.mockResolvedValue(localEmbedder());
    render(EmbedderSettings);
    await user.click(await screen.findByTestId("embedder-server"));
    await user.type(screen.getByTestId("embedder-url"), "http://gpu-box:8081");
    await user.click(screen.getByTestId("embedder-test"));
    await waitFor(() =>
      expect(screen.getByTestId("embedder-result")).toHaveTextContent("refused the request (401)"),
    );
    expect(screen.getByTestId("embedder-result")).toHaveClass("error");
    await user.click(screen.getByTestId("embedder-use"));
    await waitFor(() =>
      expect(screen.getByTestId("embedder-result")).toHaveTextContent("Not changed."),
    );
  });

  it("says a new key for the server in use is saved for the next start", async () => {
    const user = userEvent.setup();
    const inUse = localEmbedder({ url: "http://gpu-box:8081", hasApiKey: true });
    mocked.embedderServerState.mockResolvedValue(inUse);
    mocked.useEmbedderServer.mockResolvedValue(inUse);
    render(EmbedderSettings);
    await waitFor(() =>
      expect(screen.getByTestId("embedder-url")).toHaveValue("http://gpu-box:8081"),
    );
    await user.type(screen.getByTestId("embedder-api-key"), "new-key");
    await user.click(screen.getByTestId("embedder-use"));
    await waitFor(() =>
      expect(screen.getByTestId("embedder-result")).toHaveTextContent("The key is saved"),
    );
    expect(mocked.useEmbedderServer).toHaveBeenCalledWith("http://gpu-box:8081", null, "new-key");
  });

  it("shows the server in use, and a choice the environment fixes", async () => {
    mocked.embedderServerState.mockResolvedValue(
      localEmbedder({ url: "http://gpu-box:8081", fixedByEnv: true }),
    );
    render(EmbedderSettings);
    await waitFor(() => expect(screen.getByTestId("embedder-in-use")).toHaveTextContent("gpu-box"));
    expect(screen.getByTestId("embedder-result")).toHaveTextContent(
      "Set by the SELFRAG_EMBEDDER_URL environment variable.",
    );
    expect(screen.getByTestId("embedder-use")).toBeDisabled();
    expect(screen.getByTestId("embedder-url")).toHaveValue("http://gpu-box:8081");
  });
});
