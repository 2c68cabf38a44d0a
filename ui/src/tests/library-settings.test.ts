// The library's location: this computer or a library shared on object storage, the connection
// test's report and its errors, the choice for the next start and the restart (the
// confirmations themselves are native, on the Rust side). The IPC module is mocked.

import { render, screen, waitFor } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";

import LibrarySettings from "$lib/components/LibrarySettings.svelte";
import * as ipc from "$lib/ipc";

vi.mock("$lib/ipc", (real) => import("./mock-ipc").then((m) => m.mockIpc(real)));

const mocked = vi.mocked(ipc);

const local = {
  location: "/home/ada/.local/share/selfrag-desktop/library",
  shared: false,
  defaultFolder: "/home/ada/.local/share/selfrag-desktop/library",
  fixedByEnv: false,
  nextStart: null,
};

describe("the library location setting", () => {
  beforeEach(() => {
    vi.resetAllMocks();
    mocked.libraryLocationState.mockResolvedValue(local);
  });

  it("tests a shared location, chooses it for the next start and offers the restart", async () => {
    const user = userEvent.setup();
    mocked.testLibraryLocation.mockResolvedValue({
      endpoint: "http://minio.lab:9000",
      libraryExists: true,
    });
    mocked.useLibraryLocation.mockResolvedValue({ ...local, nextStart: "s3://lab/papers" });
    render(LibrarySettings);
    await waitFor(() =>
      expect(screen.getByTestId("library-location-in-use")).toHaveTextContent("this computer"),
    );
    expect(screen.queryByTestId("library-location-restart")).toBeNull();
    await user.click(screen.getByTestId("library-location-shared"));
    // Written with a trailing slash: the Rust side keeps it as s3://lab/papers.
    await user.type(screen.getByTestId("library-location-uri"), "s3://lab/papers/");
    await user.click(screen.getByTestId("library-location-test"));
    await waitFor(() =>
      expect(screen.getByTestId("library-location-result")).toHaveTextContent(
        "http://minio.lab:9000: reachable, credentials accepted, conditional writes honoured; a library is there",
      ),
    );
    expect(mocked.testLibraryLocation).toHaveBeenCalledWith("s3://lab/papers/");
    await user.click(screen.getByTestId("library-location-use"));
    await waitFor(() =>
      expect(screen.getByTestId("library-location-result")).toHaveTextContent(
        "Chosen: it opens when Self-RAG Desktop starts next.",
      ),
    );
    expect(mocked.useLibraryLocation).toHaveBeenCalledWith("s3://lab/papers/");
    await user.click(screen.getByTestId("library-location-restart"));
    expect(mocked.restartApp).toHaveBeenCalled();
  });

  it("shows the store's refusal, and says when the confirmation was declined", async () => {
    const user = userEvent.setup();
    mocked.testLibraryLocation.mockRejectedValue({
      code: "index",
      message:
        "the library location s3://lab/papers cannot be used: the store at http://minio.lab:9000 overwrote an object that a conditional write (If-None-Match: *) must leave alone",
    });
    mocked.useLibraryLocation.mockResolvedValue(local);
    render(LibrarySettings);
    await user.click(await screen.findByTestId("library-location-shared"));
    await user.type(screen.getByTestId("library-location-uri"), "s3://lab/papers");
    await user.click(screen.getByTestId("library-location-test"));
    await waitFor(() =>
      expect(screen.getByTestId("library-location-result")).toHaveTextContent(
        "overwrote an object that a conditional write",
      ),
    );
    expect(screen.getByTestId("library-location-result")).toHaveClass("error");
    await user.click(screen.getByTestId("library-location-use"));
    await waitFor(() =>
      expect(screen.getByTestId("library-location-result")).toHaveTextContent("Not changed."),
    );
  });

  it("names a shared library open now, and is locked by SELFRAG_LIBRARY", async () => {
    mocked.libraryLocationState.mockResolvedValue({
      ...local,
      location: "s3://lab/papers",
      shared: true,
      fixedByEnv: true,
    });
    render(LibrarySettings);
    await waitFor(() =>
      expect(screen.getByTestId("library-location-in-use")).toHaveTextContent("s3://lab/papers"),
    );
    expect(screen.getByTestId("library-location-result")).toHaveTextContent(
      "Set by the SELFRAG_LIBRARY environment variable.",
    );
    expect(screen.getByTestId("library-location-use")).toBeDisabled();
    expect(screen.getByTestId("library-location-uri")).toHaveValue("s3://lab/papers");
  });
});
