// Looking works up online: the setting is off by default and says what is sent where, the
// person's switch is saved with the settings, and a look-up that failed after indexing shows
// as a note on its file. The IPC module is mocked.

import { render, screen, waitFor } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";

import App from "../App.svelte";
import { nextJob, startJob } from "$lib/indexing";
import * as ipc from "$lib/ipc";
import { deviceStatus, loadedSettings, localEmbedder, localLibrary, status } from "./fixtures";

vi.mock("$lib/ipc", (real) => import("./mock-ipc").then((m) => m.mockIpc(real)));

const mocked = vi.mocked(ipc);

const WHAT_IS_SENT =
  "Sends only the DOI to doi.org (Crossref, DataCite) and the arXiv id to export.arxiv.org; nothing of your documents' text.";

beforeEach(() => {
  vi.resetAllMocks();
  mocked.appStatus.mockResolvedValue(status());
  mocked.saveSettings.mockResolvedValue(deviceStatus());
  mocked.listDocuments.mockResolvedValue([]);
  mocked.listHistory.mockResolvedValue([]);
  mocked.watchedFolders.mockResolvedValue([]);
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
});

describe("the look-up setting", () => {
  it("is off by default, says what is sent where, and saves the person's switch", async () => {
    mocked.loadSettings.mockResolvedValue(loadedSettings());
    render(App);
    const user = userEvent.setup();
    const toggle = await screen.findByTestId("lookup-switch");
    await waitFor(() => expect(mocked.loadSettings).toHaveBeenCalled());
    expect(toggle).not.toBeChecked();
    expect(screen.getByTestId("lookup-state")).toHaveTextContent("off");
    const note = screen.getByTestId("lookup-note");
    expect(note.textContent?.replace(/\s+/g, " ")).toContain(WHAT_IS_SENT);
    expect(note).toHaveTextContent("Off: nothing is sent.");

    await user.click(screen.getByText("Look-ups"));
    await user.click(toggle);
    expect(screen.getByTestId("lookup-state")).toHaveTextContent("on");
    await waitFor(() => expect(mocked.saveSettings).toHaveBeenCalled(), { timeout: 2000 });
    expect(mocked.saveSettings.mock.lastCall?.[0].lookUpWorks).toBe(true);
  });

  it("shows the saved choice when the app starts", async () => {
    mocked.loadSettings.mockResolvedValue(loadedSettings({ lookUpWorks: true }));
    render(App);
    await waitFor(() => expect(screen.getByTestId("lookup-switch")).toBeChecked());
    expect(screen.getByTestId("lookup-state")).toHaveTextContent("on");
    // Restoring is no change: nothing is saved.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(mocked.saveSettings).not.toHaveBeenCalled();
  });
});

describe("look-ups after indexing", () => {
  it("adds each failed look-up as a note on its file, after the job's end", () => {
    let job = nextJob(startJob(), {
      kind: "finished",
      indexed: 1,
      skipped: 0,
      failed: 0,
      removed: 0,
      cancelled: false,
      paused: false,
    });
    job = nextJob(job, {
      kind: "worksLookedUp",
      found: 0,
      already: 0,
      failed: [
        {
          path: "/papers/a.pdf",
          identifier: "DOI 10.5555/x",
          error: "could not reach doi.org to look up DOI 10.5555/x",
        },
      ],
    });
    expect(job.running).toBe(false);
    expect(job.notes).toEqual([
      { path: "/papers/a.pdf", reason: "could not reach doi.org to look up DOI 10.5555/x" },
    ]);
  });
});
