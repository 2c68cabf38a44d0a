// The generator setting: this computer or a server (llama.cpp's or OpenAI-compatible), the connection test's report and
// its errors, and switching (the confirmation itself is native, on the Rust side). The IPC
// module is mocked.

import { render, screen, waitFor } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";

import GeneratorSettings from "$lib/components/GeneratorSettings.svelte";
import * as ipc from "$lib/ipc";

vi.mock("$lib/ipc", (real) => import("./mock-ipc").then((m) => m.mockIpc(real)));

const mocked = vi.mocked(ipc);

describe("the generator setting", () => {
  beforeEach(() => {
    vi.resetAllMocks();
    mocked.generatorState.mockResolvedValue({
      url: null,
      model: null,
      fixedByEnv: false,
      hasApiKey: false,
    });
  });

  it("tests a server, reports what it serves, and switches to it", async () => {
    const user = userEvent.setup();
    mocked.testGeneratorServer.mockResolvedValue({
      url: "http://gpu-box:8080",
      model: "/models/selfrag_llama2_7b.q4_k_m.gguf",
      runtime: "llama.cpp b6800-abc1234",
      contextLength: 4096,
      slots: 5,
      roundTripMs: 12.4,
    });
    mocked.useGeneratorServer.mockResolvedValue({
      url: "http://gpu-box:8080",
      model: null,
      fixedByEnv: false,
      hasApiKey: true,
    });
    render(GeneratorSettings);
    await waitFor(() =>
      expect(screen.getByTestId("generator-in-use")).toHaveTextContent("this computer"),
    );
    await user.click(screen.getByTestId("generator-server"));
    await user.type(screen.getByTestId("generator-url"), "http://gpu-box:8080");
    await user.type(screen.getByTestId("generator-api-key"), "sesame");
    await user.click(screen.getByTestId("generator-test"));
    await waitFor(() =>
      expect(screen.getByTestId("generator-result")).toHaveTextContent(
        "selfrag_llama2_7b.q4_k_m.gguf on llama.cpp b6800-abc1234 · 5 slots × 4096 tokens · reflection tokens and tokenizer match · 12 ms",
      ),
    );
    expect(mocked.testGeneratorServer).toHaveBeenCalledWith("http://gpu-box:8080", null, "sesame");
    await user.click(screen.getByTestId("generator-use"));
    await waitFor(() =>
      expect(screen.getByTestId("generator-in-use")).toHaveTextContent("gpu-box:8080"),
    );
    expect(mocked.useGeneratorServer).toHaveBeenCalledWith("http://gpu-box:8080", null, "sesame");
    expect(screen.getByTestId("generator-result")).toHaveTextContent(
      "Answers are generated on http://gpu-box:8080.",
    );
  });

  it("names the model for an OpenAI-compatible server, which reports no slots", async () => {
    const user = userEvent.setup();
    mocked.testGeneratorServer.mockResolvedValue({
      url: "http://lab:8000/v1",
      model: "selfrag-13b",
      runtime: "vLLM 0.11.0, OpenAI-compatible API",
      contextLength: 4096,
      slots: null,
      roundTripMs: 31,
    });
    mocked.useGeneratorServer.mockResolvedValue({
      url: "http://lab:8000/v1",
      model: "selfrag-13b",
      fixedByEnv: false,
      hasApiKey: false,
    });
    render(GeneratorSettings);
    await user.click(await screen.findByTestId("generator-server"));
    await user.type(screen.getByTestId("generator-url"), "http://lab:8000/v1");
    await user.type(screen.getByTestId("generator-model"), " selfrag-13b ");
    await user.click(screen.getByTestId("generator-test"));
    await waitFor(() =>
      expect(screen.getByTestId("generator-result")).toHaveTextContent(
        "selfrag-13b on vLLM 0.11.0, OpenAI-compatible API · 4096 tokens · reflection tokens and tokenizer match · 31 ms",
      ),
    );
    expect(mocked.testGeneratorServer).toHaveBeenCalledWith(
      "http://lab:8000/v1",
      "selfrag-13b",
      null,
    );
    await user.click(screen.getByTestId("generator-use"));
    await waitFor(() =>
      expect(screen.getByTestId("generator-in-use")).toHaveTextContent("lab:8000"),
    );
    expect(mocked.useGeneratorServer).toHaveBeenCalledWith(
      "http://lab:8000/v1",
      "selfrag-13b",
      null,
    );
  });

  it("shows the server's error as it is, and a declined confirmation as no change", async () => {
    const user = userEvent.setup();
    mocked.testGeneratorServer.mockRejectedValue({
      code: "generator_server",
      message:
        "could not reach the generator server at http://gpu-box:8080, or it did not answer in time",
    });
    mocked.useGeneratorServer.mockResolvedValue({
      url: null,
      model: null,
      fixedByEnv: false,
      hasApiKey: false,
    });
    render(GeneratorSettings);
    await user.click(await screen.findByTestId("generator-server"));
    await user.type(screen.getByTestId("generator-url"), "http://gpu-box:8080");
    await user.click(screen.getByTestId("generator-test"));
    await waitFor(() =>
      expect(screen.getByTestId("generator-result")).toHaveTextContent(
        "could not reach the generator server",
      ),
    );
    await user.click(screen.getByTestId("generator-use"));
    await waitFor(() =>
      expect(screen.getByTestId("generator-result")).toHaveTextContent("Not changed."),
    );
    expect(screen.getByTestId("generator-in-use")).toHaveTextContent("this computer");
  });

  it("is read-only when SELFRAG_GENERATOR_URL fixes it", async () => {
    mocked.generatorState.mockResolvedValue({
      url: "http://lab:8080",
      model: null,
      fixedByEnv: true,
      hasApiKey: false,
    });
    render(GeneratorSettings);
    await waitFor(() =>
      expect(screen.getByTestId("generator-result")).toHaveTextContent("SELFRAG_GENERATOR_URL"),
    );
    expect(screen.getByTestId("generator-use")).toBeDisabled();
  });
});
