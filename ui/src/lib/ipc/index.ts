// Every call from the UI to the Rust side. This is the only module that imports @tauri-apps/*,
// so the rest of the UI can be tested with `vi.mock("$lib/ipc")`.

import { Channel, invoke, type InvokeArgs } from "@tauri-apps/api/core";
import { listen } from "@tauri-apps/api/event";
import { getCurrentWebview } from "@tauri-apps/api/webview";

import type { Command } from "./bindings";
import type {
  AnswerRecord,
  AppStatus,
  CritiqueWeights,
  AppSettings,
  DeviceStatus,
  DocumentInfo,
  EmbedderServerCheck,
  EmbedderServerState,
  ExportOptions,
  GeneratorState,
  HistoryEntry,
  IndexEvent,
  IndexFinished,
  JobKind,
  LibraryEvent,
  LibraryLocationState,
  LibraryStats,
  LoadedSettings,
  PassageSource,
  Progress,
  ReferenceImport,
  ServerCheck,
  Settings,
  StoreCheck,
  WatchResult,
  Work,
} from "./types";

import type { ModelDownloadProgress } from "./types";

export type * from "./types";

/**
 * Invokes a command by its name from the generated list: a command renamed or removed on the
 * Rust side fails this module's type check.
 */
function call<T>(command: Command, args?: InvokeArgs): Promise<T> {
  return args === undefined ? invoke<T>(command) : invoke<T>(command, args);
}

/** Which models were found, where the data lives, and how big the library is. */
export function appStatus(): Promise<AppStatus> {
  return call<AppStatus>("app_status");
}

/** Indexes files and folders, streaming one event per file; resolves with the `finished` event. */
export function indexPaths(
  paths: string[],
  onEvent: (event: IndexEvent) => void,
): Promise<IndexFinished> {
  const channel = new Channel<IndexEvent>();
  channel.onmessage = onEvent;
  return call<IndexFinished>("index_paths", { paths, onEvent: channel });
}

/** The documents of the library. */
export function listDocuments(): Promise<DocumentInfo[]> {
  return call<DocumentInfo[]>("list_documents");
}

/**
 * Answers a question, streaming the steps of Self-RAG as they happen. With `options` (two or
 * more), a multiple-choice question: each option is scored, in the answer's `closed_set`.
 */
export function ask(
  question: string,
  settings: Settings,
  onEvent: (event: Progress) => void,
  options?: string[],
): Promise<AnswerRecord> {
  const channel = new Channel<Progress>();
  channel.onmessage = onEvent;
  return call<AnswerRecord>("ask", { question, settings, options, onEvent: channel });
}

/**
 * Asks the running question to stop at its next step; its `ask` then rejects with the
 * IpcError code "cancelled". Does nothing when no question runs.
 */
export async function cancelAsk(): Promise<void> {
  await cancelJob({ kind: "answer" });
}

/**
 * Stops every running job of one kind at its next step (the engine's one cancel); resolves
 * with whether one was running.
 */
export function cancelJob(job: JobKind): Promise<boolean> {
  return call<boolean>("cancel_job", { job });
}

/** Re-chooses the candidates of a stored answer under new weights; no model call. */
export function rerank(
  answerId: string,
  weights: CritiqueWeights,
  hardConstraints: boolean,
): Promise<AnswerRecord> {
  return call<AnswerRecord>("rerank", { answerId, weights, hardConstraints });
}

/**
 * Asks where to save the answer (the Rust side shows the dialog, proposing the format's
 * extension) and writes it there; resolves with the path, or null when cancelled.
 */
export function exportAnswer(answerId: string, options: ExportOptions): Promise<string | null> {
  return call<string | null>("export_answer", { answerId, options });
}

/** The answer rendered as the export would write it (for the clipboard). */
export function renderAnswer(answerId: string, options: ExportOptions): Promise<string> {
  return call<string>("render_answer", { answerId, options });
}

/** Saved answers whose question or answer contains every word of `query`, newest first. */
export function listHistory(query: string): Promise<HistoryEntry[]> {
  return call<HistoryEntry[]>("list_history", { query });
}

/** A saved answer, to show again and re-rank. */
export function openAnswer(answerId: string): Promise<AnswerRecord> {
  return call<AnswerRecord>("open_answer", { answerId });
}

/** Deletes a saved answer for good. */
export function deleteAnswer(answerId: string): Promise<void> {
  return call<void>("delete_answer", { answerId });
}

/** The settings saved last time (defaults if none), and a notice if the file was broken. */
export function loadSettings(): Promise<LoadedSettings> {
  return call<LoadedSettings>("load_settings");
}

/** Saves the settings; resolves with the device status (a new device loads on the next ask). */
export function saveSettings(settings: AppSettings): Promise<DeviceStatus> {
  return call<DeviceStatus>("save_settings", { settings });
}

/** Where the model generates now: this computer, or a server (`url`, `model`). */
export function generatorState(): Promise<GeneratorState> {
  return call<GeneratorState>("generator_state");
}

/** Where the library is, and the location chosen for the next start. */
export function libraryLocationState(): Promise<LibraryLocationState> {
  return call<LibraryLocationState>("library_location_state");
}

/**
 * Tests a library location without opening it (null: the default folder): a shared one's store
 * answers, takes this computer's credentials and honours conditional writes. A location other
 * than the open one is tested only after a native confirmation.
 */
export function testLibraryLocation(location: string | null): Promise<StoreCheck> {
  return call<StoreCheck>("test_library_location", { location });
}

/**
 * Opens the library at `location` (null: the default folder) from the next start, after a
 * native confirmation and the location's test; returns the state to show.
 */
export function useLibraryLocation(location: string | null): Promise<LibraryLocationState> {
  return call<LibraryLocationState>("use_library_location", { location });
}

/** The embedder in use (this computer's, or a server's), and the choice for the next start. */
export function embedderServerState(): Promise<EmbedderServerState> {
  return call<EmbedderServerState>("embedder_server_state");
}

/**
 * Tests the embeddings server at `url` for `model` (null: the one it serves), changing nothing;
 * `apiKey` null or empty uses the key saved for its origin. A server not in use is tested only
 * after a native confirmation.
 */
export function testEmbedderServer(
  url: string,
  model: string | null,
  apiKey: string | null,
): Promise<EmbedderServerCheck> {
  return call<EmbedderServerCheck>("test_embedder_server", { url, model, apiKey });
}

/**
 * Embeds on the server at `url` (null: this computer) from the next start, after a native
 * confirmation and its connection test; `apiKey` replaces the saved key (empty removes it), null
 * keeps it. Returns the state to show.
 */
export function useEmbedderServer(
  url: string | null,
  model: string | null,
  apiKey: string | null,
): Promise<EmbedderServerState> {
  return call<EmbedderServerState>("use_embedder_server", { url, model, apiKey });
}

/** Restarts the app, which then opens the library chosen for the next start. */
export function restartApp(): Promise<void> {
  return call<void>("restart_app");
}

/**
 * Checks the server at `url` for `model` (null: the one it serves) as an answer would, changing
 * nothing; no key: the saved one.
 */
export function testGeneratorServer(
  url: string,
  model: string | null,
  apiKey: string | null,
): Promise<ServerCheck> {
  return call<ServerCheck>("test_generator_server", { url, model, apiKey });
}

/**
 * Generates on the server at `url`, asked for `model` (null: the one it serves), from the next
 * question on (`url` null: this computer). A new server is used only once the person confirms
 * it in a native dialog; declined, the state is unchanged. `apiKey`: a new key (empty removes
 * it), null keeps the saved one.
 */
export function useGeneratorServer(
  url: string | null,
  model: string | null,
  apiKey: string | null,
): Promise<GeneratorState> {
  return call<GeneratorState>("use_generator_server", { url, model, apiKey });
}

/**
 * Lets the user pick documents to index without drag and drop; null when cancelled. The Rust
 * side shows the native dialog, so the paths it returns are ones `indexPaths` accepts.
 */
export async function pickFiles(): Promise<string[] | null> {
  const picked = await call<string[]>("pick_files");
  return picked.length > 0 ? picked : null;
}

/**
 * Calls `onDrop` with the paths of files dropped on the window, and `onHover(true/false)`
 * while files are dragged over it, so the UI can show where they will go.
 * Resolves with a function that stops listening.
 */
export function onFilesDropped(
  onDrop: (paths: string[]) => void,
  onHover: (hovering: boolean) => void = () => {},
): Promise<() => void> {
  return getCurrentWebview().onDragDropEvent((event) => {
    const payload = event.payload;
    switch (payload.type) {
      case "enter":
      case "over":
        onHover(true);
        break;
      case "leave":
        onHover(false);
        break;
      case "drop":
        onHover(false);
        onDrop(payload.paths);
        break;
    }
  });
}

/**
 * Opens the file of source [`citation`] of answer `answerId` in the platform's default app and
 * resolves with its path. The Rust side looks the path up in the answer; the page cannot be
 * passed to the platform opener.
 */
export function openSource(answerId: string, citation: number): Promise<string> {
  return call<string>("open_source", { answerId, citation });
}

/**
 * Where passage `passageId` (as an answer's trace names it) is in its source: a PDF's page, or
 * the text it was cut from with its span. The Rust side serves only passages of the library.
 */
export function passageSource(passageId: string): Promise<PassageSource> {
  return call<PassageSource>("passage_source", { passageId });
}

/** The bytes of the library's PDF with content id `documentId`, for the viewer to render. */
export async function sourcePdf(documentId: string): Promise<Uint8Array> {
  return new Uint8Array(await call<ArrayBuffer>("source_pdf", { documentId }));
}

/**
 * Downloads a missing model (by its manifest id) into the Hugging Face cache, streaming
 * progress; resolves with the new status once it is complete and checked, so the app can go on
 * without a restart. Rejects with the IpcError code "download_cancelled" after
 * `cancelDownload`; the partial file is kept and the next call resumes it.
 */
export function downloadModel(
  modelId: string,
  onEvent: (event: ModelDownloadProgress) => void,
): Promise<AppStatus> {
  const channel = new Channel<ModelDownloadProgress>();
  channel.onmessage = onEvent;
  return call<AppStatus>("download_model", { modelId, onEvent: channel });
}

/** Stops the download of a model; does nothing when it is not running. */
export async function cancelDownload(modelId: string): Promise<void> {
  await cancelJob({ kind: "download", model: modelId });
}

/** Looks for the models again (e.g. after copying them in by hand) and returns the new status. */
export function refreshModels(): Promise<AppStatus> {
  return call<AppStatus>("refresh_models");
}

// The library pane: stopping a job, removing and re-indexing documents, statistics, watched
// folders and the background work's events (src-tauri/src/library.rs).

/** Stops the running indexing job at the next file or embedding batch; its `indexPaths` resolves as cancelled. */
export async function cancelIndexing(): Promise<void> {
  await cancelJob({ kind: "indexing" });
}

/**
 * Pauses the running indexing job at the next file or embedding batch; its `indexPaths`
 * resolves as paused, and the job waits in `pausedIndexing` until resumed or forgotten.
 */
export function pauseIndexing(): Promise<boolean> {
  return call<boolean>("pause_indexing");
}

/** Takes up the paused indexing job where it stopped, streaming its events like `indexPaths`. */
export function resumeIndexing(onEvent: (event: IndexEvent) => void): Promise<IndexFinished> {
  const channel = new Channel<IndexEvent>();
  channel.onmessage = onEvent;
  return call<IndexFinished>("resume_indexing", { onEvent: channel });
}

/** The files and folders of the paused indexing job; empty when none is paused. */
export function pausedIndexing(): Promise<string[]> {
  return call<string[]>("paused_indexing");
}

/** Forgets the paused indexing job; what it indexed stays in the library. */
export function forgetPausedIndexing(): Promise<void> {
  return call<void>("forget_paused_indexing");
}

/** Removes the library's document `documentId` (the file stays on disk); resolves with the paths removed. */
export function removeDocument(documentId: string): Promise<string[]> {
  return call<string[]>("remove_document", { documentId });
}

/**
 * Writes the sample documents that ship with the app into its data folder and indexes them,
 * streaming the job's events like `indexPaths`.
 */
export function addSampleDocuments(onEvent: (event: IndexEvent) => void): Promise<IndexFinished> {
  const channel = new Channel<IndexEvent>();
  channel.onmessage = onEvent;
  return call<IndexFinished>("add_sample_documents", { onEvent: channel });
}

/** Parses and embeds one document again, streaming the job's events like `indexPaths`. */
export function reindexDocument(
  path: string,
  onEvent: (event: IndexEvent) => void,
): Promise<IndexFinished> {
  const channel = new Channel<IndexEvent>();
  channel.onmessage = onEvent;
  return call<IndexFinished>("reindex_document", { path, onEvent: channel });
}

/** Document, passage and page counts and the disk the library takes. */
export function libraryStats(): Promise<LibraryStats> {
  return call<LibraryStats>("library_stats");
}

/** The folders kept in sync with the library. */
export function watchedFolders(): Promise<string[]> {
  return call<string[]>("watched_folders");
}

/**
 * Watches the folders among `paths`; they are indexed in the background (see
 * `onLibraryEvent`). Paths that are not folders come back in `notFolders`.
 */
export function watchFolders(paths: string[]): Promise<WatchResult> {
  return call<WatchResult>("watch_folders", { paths });
}

/** Stops watching a folder (its documents stay); resolves with the folders still watched. */
export function unwatchFolder(folder: string): Promise<string[]> {
  return call<string[]>("unwatch_folder", { folder });
}

/** Lets the user pick one folder to add (a native dialog shown by the Rust side); null when cancelled. */
export function pickFolder(): Promise<string | null> {
  return call<string | null>("pick_folder");
}

/**
 * Calls `onEvent` for the library work the UI did not start: the resumed job of a crash and
 * the watched folders. Resolves with a function that stops listening.
 */
export function onLibraryEvent(onEvent: (event: LibraryEvent) => void): Promise<() => void> {
  return listen<LibraryEvent>("library-event", (e) => onEvent(e.payload));
}

// The works the documents hold: the person's edit of a record, Zotero libraries and
// bibliography files added with their files, and "Open in Zotero" (src-tauri/src/library.rs).

/**
 * Sets the person's own record of the work in the library's document at `path`: every field of
 * `work` is theirs and wins over every source (an empty work undoes their edits). Resolves with
 * the work as it now reads.
 */
export function setWork(path: string, work: Work): Promise<Work> {
  return call<Work>("set_work", { path, work });
}

/** Lets the user pick a Zotero data directory (a native dialog opening at ~/Zotero); null when cancelled. */
export function pickZoteroFolder(): Promise<string | null> {
  return call<string | null>("pick_zotero_folder");
}

/**
 * Adds the Zotero library in `dir` (picked with `pickZoteroFolder`): its items' files are
 * indexed as one job, streaming events like `indexPaths`, and each gets its item's record.
 */
export function addZoteroLibrary(
  dir: string,
  onEvent: (event: IndexEvent) => void,
): Promise<ReferenceImport> {
  const channel = new Channel<IndexEvent>();
  channel.onmessage = onEvent;
  return call<ReferenceImport>("add_zotero_library", { dir, onEvent: channel });
}

/** Lets the user pick a BibTeX, BibLaTeX or CSL-JSON file (a native dialog); null when cancelled. */
export function pickBibliography(): Promise<string | null> {
  return call<string | null>("pick_bibliography");
}

/**
 * Adds the bibliography file at `path` (picked with `pickBibliography`): the files its entries
 * name are indexed as one job, streaming events like `indexPaths`, and each gets its entry's record.
 */
export function addBibliography(
  path: string,
  onEvent: (event: IndexEvent) => void,
): Promise<ReferenceImport> {
  const channel = new Channel<IndexEvent>();
  channel.onmessage = onEvent;
  return call<ReferenceImport>("add_bibliography", { path, onEvent: channel });
}

/**
 * The `zotero://` address "Open in Zotero" opens for the library's document at `documentPath`
 * (its PDF at `page`, else its item); null where it did not come from Zotero. Built by the Rust
 * side from the library's record.
 */
export function zoteroLink(documentPath: string, page: number | null): Promise<string | null> {
  return call<string | null>("zotero_link", { documentPath, page });
}

/**
 * Opens the library's document at `documentPath` in Zotero (its PDF at `page`, else its item);
 * resolves with the address opened. Rejects with a message naming Zotero where it is missing.
 */
export function openInZotero(documentPath: string, page: number | null): Promise<string> {
  return call<string>("open_in_zotero", { documentPath, page });
}
