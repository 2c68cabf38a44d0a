// The library's state in the UI and every action on it: the documents, the statistics, the
// watched folders, the indexing job on screen (one the user started, the resumption of an
// interrupted one, or the watched folders' catch-up) and what each file's events said; the
// Zotero libraries and bibliography files added (with what the last import did) and the
// person's edits of a document's work. It lives
// outside the pane so that a job keeps being followed while another panel covers the pane.

import type { AppError } from "./errors";
import { nextActivity, queue, type Activity } from "./activity";
import { nextJob, startJob, type IndexJob } from "./indexing";
import {
  addBibliography,
  addSampleDocuments,
  addZoteroLibrary,
  cancelIndexing,
  forgetPausedIndexing,
  indexPaths,
  libraryStats,
  listDocuments,
  onLibraryEvent,
  pauseIndexing,
  pausedIndexing,
  pickBibliography,
  pickFiles,
  pickFolder,
  pickZoteroFolder,
  reindexDocument,
  removeDocument,
  resumeIndexing,
  setWork,
  unwatchFolder,
  watchedFolders,
  watchFolders,
} from "./ipc";
import type {
  DocumentInfo,
  IndexEvent,
  IndexFinished,
  JobSource,
  LibraryEvent,
  LibraryStats,
  ReferenceImport,
  Work,
} from "./ipc/types";

/** Who started the job on screen. */
export type JobOrigin = "user" | JobSource;

/** Where a reference import read its records. */
export type ReferenceOrigin = "zotero" | "bibliography";

/** What the last Zotero library or bibliography file added did. */
export interface ImportReport {
  from: ReferenceOrigin;
  result: ReferenceImport;
}

/** How long the watcher's changes wait before the document list is read again. */
const REFRESH_DELAY_MS = 250;

export class LibraryController {
  documents = $state<DocumentInfo[]>([]);
  /** Set while the documents cannot be read (a shared library's store out of reach): the pane
   * says so rather than that the library is empty. */
  unreadable = $state(false);
  stats = $state<LibraryStats | null>(null);
  /** What other computers added to and removed from a shared library since it opened here. */
  elsewhere = $state<{ added: number; removed: number } | null>(null);
  watched = $state<string[]>([]);
  job = $state<IndexJob | null>(null);
  origin = $state<JobOrigin | null>(null);
  activity = $state<Activity>({});
  /** Folders added or dropped are watched, not only indexed once. */
  keepWatching = $state(false);
  /** Stop or Pause was pressed and the job has not ended yet. */
  stopping = $state(false);
  /** Which of the two it was. */
  pausing = $state(false);
  /** Whether Pause suits the job on screen: not a re-index, whose document is removed first. */
  pausable = $state(true);
  /** The files and folders of the paused job, waiting for Resume or Forget. */
  paused = $state<string[]>([]);
  /** What the last Zotero library or bibliography file added did; null once another job starts. */
  imported = $state<ImportReport | null>(null);

  readonly #onerror: (e: unknown) => void;
  #refreshTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(onerror: (e: unknown) => void) {
    this.#onerror = onerror;
  }

  get running(): boolean {
    return this.job?.running ?? false;
  }

  /** Whether Stop can end the job on screen (the watcher's catch-up ends by unwatching). */
  get stoppable(): boolean {
    return this.running && this.origin !== "watch";
  }

  /** Reads the documents (rejects when that fails), then the statistics and watched folders. */
  async refresh(): Promise<void> {
    try {
      this.documents = await listDocuments();
      this.unreadable = false;
    } catch (e) {
      this.unreadable = true;
      throw e;
    }
    try {
      const [stats, watched, paused] = await Promise.all([
        libraryStats(),
        watchedFolders(),
        pausedIndexing(),
      ]);
      this.stats = stats ?? null;
      this.watched = watched ?? [];
      this.paused = paused ?? [];
    } catch (e) {
      this.#onerror(e);
    }
  }

  /** Dropped or picked paths: folders are watched when asked, everything else indexed once. */
  async add(paths: string[]): Promise<void> {
    if (paths.length === 0) return;
    if (this.#busy()) return;
    try {
      if (this.keepWatching) {
        const result = await watchFolders(paths);
        this.watched = result.watched;
        if (result.notFolders.length > 0) await this.index(result.notFolders);
      } else {
        await this.index(paths);
      }
    } catch (e) {
      this.#onerror(e);
    }
  }

  async addFiles(): Promise<void> {
    try {
      const paths = await pickFiles();
      // Files are never watched; only folders are.
      if (paths) await this.index(paths);
    } catch (e) {
      this.#onerror(e);
    }
  }

  async addFolder(): Promise<void> {
    try {
      const folder = await pickFolder();
      if (folder) await this.add([folder]);
    } catch (e) {
      this.#onerror(e);
    }
  }

  /**
   * Adds a Zotero library the user picks (its items' files indexed as one job the user can
   * stop, each given its item's record).
   */
  async addZotero(): Promise<void> {
    await this.#addReferences("zotero", pickZoteroFolder, addZoteroLibrary);
  }

  /** Adds a bibliography file the user picks (the files its entries name, with their records). */
  async addBibliography(): Promise<void> {
    await this.#addReferences("bibliography", pickBibliography, addBibliography);
  }

  async #addReferences(
    from: ReferenceOrigin,
    pick: () => Promise<string | null>,
    add: (path: string, onEvent: (event: IndexEvent) => void) => Promise<ReferenceImport>,
  ): Promise<void> {
    if (this.#busy()) return;
    let picked: string | null;
    try {
      picked = await pick();
    } catch (e) {
      this.#onerror(e);
      return;
    }
    if (picked === null || this.#busy()) return;
    const path = picked;
    // Not pausable: the records are given once the job ends, to the files indexed by then.
    const result = await this.#userJob(
      (onEvent) => add(path, onEvent),
      false,
      (done) => (done.indexing?.kind === "finished" ? done.indexing : null),
    );
    if (result !== null) this.imported = { from, result };
  }

  /**
   * Sets the person's record of `document`'s work (an empty one undoes their edits) and reads
   * the library again; resolves with whether it was saved.
   */
  async setWork(document: DocumentInfo, work: Work): Promise<boolean> {
    try {
      await setWork(document.path, work);
    } catch (e) {
      this.#onerror(e);
      return false;
    }
    try {
      await this.refresh();
    } catch (e) {
      this.#onerror(e);
    }
    return true;
  }

  /** Indexes the sample documents that ship with the app, as one job the user can stop. */
  async addSamples(): Promise<void> {
    if (this.#busy()) return;
    await this.#userJob((onEvent) => addSampleDocuments(onEvent));
  }

  /** Indexes `paths` as one job the user can stop. */
  async index(paths: string[]): Promise<void> {
    if (this.#busy()) return;
    await this.#userJob((onEvent) => indexPaths(paths, onEvent));
  }

  /** Parses and embeds the file again (the engine removes it first: see library.rs). */
  async reindex(path: string): Promise<void> {
    if (this.#busy()) return;
    this.activity = queue(this.activity, [path]);
    await this.#userJob((onEvent) => reindexDocument(path, onEvent), false);
  }

  /** Indexes the rest of a document a job was cut off inside. */
  async finish(path: string): Promise<void> {
    if (this.#busy()) return;
    this.activity = queue(this.activity, [path]);
    await this.#userJob((onEvent) => indexPaths([path], onEvent));
  }

  async remove(document: DocumentInfo): Promise<void> {
    try {
      await removeDocument(document.id);
      const next = { ...this.activity };
      delete next[document.path];
      this.activity = next;
      await this.refresh();
    } catch (e) {
      this.#onerror(e);
    }
  }

  async stop(): Promise<void> {
    if (!this.stoppable || this.stopping) return;
    this.stopping = true;
    try {
      await cancelIndexing();
    } catch (e) {
      this.stopping = false;
      this.#onerror(e);
    }
  }

  /** Stops the job so that Resume takes it up later where it stopped. */
  async pause(): Promise<void> {
    if (!this.stoppable || !this.pausable || this.stopping) return;
    this.stopping = true;
    this.pausing = true;
    try {
      // False: no job had started yet (it waits for another); nothing is pausing.
      if (!(await pauseIndexing())) {
        this.stopping = false;
        this.pausing = false;
      }
    } catch (e) {
      this.stopping = false;
      this.pausing = false;
      this.#onerror(e);
    }
  }

  /** Takes up the paused job as a job the user can stop or pause again. */
  async resume(): Promise<void> {
    if (this.paused.length === 0 || this.#busy()) return;
    // The job on screen is the paused one now.
    this.paused = [];
    if ((await this.#userJob((onEvent) => resumeIndexing(onEvent))) !== null) return;
    // It failed (the refresh after a job that ends re-reads the paused list): what waits now.
    try {
      this.paused = (await pausedIndexing()) ?? [];
    } catch (e) {
      this.#onerror(e);
    }
  }

  /** Forgets the paused job; what it indexed stays. */
  async forget(): Promise<void> {
    try {
      await forgetPausedIndexing();
      this.paused = [];
    } catch (e) {
      this.#onerror(e);
    }
  }

  async unwatch(folder: string): Promise<void> {
    try {
      this.watched = await unwatchFolder(folder);
    } catch (e) {
      this.#onerror(e);
    }
  }

  /** Follows the background work (resumed job, watched folders); resolves with the unlistener. */
  async listen(): Promise<() => void> {
    const stop = await onLibraryEvent((event) => this.background(event));
    return () => {
      stop?.();
      if (this.#refreshTimer !== null) clearTimeout(this.#refreshTimer);
    };
  }

  /** One event of the background work. */
  background(event: LibraryEvent): void {
    if (event.kind === "changedElsewhere") {
      this.elsewhere = { added: event.added, removed: event.removed };
      this.#refreshSoon();
      return;
    }
    if (event.kind === "failed") {
      this.#onerror({
        code: `library_${event.source}`,
        message: event.message,
      } satisfies AppError);
      return;
    }
    const e = event.event;
    if (e.kind === "watchRetrying") {
      // Watching goes on; the user learns why the list lags behind the folder.
      this.#onerror({
        code: "library_watch",
        message: `Changes in the watched folders could not be applied: ${e.error}. Trying again in ${Math.round(e.retryInSeconds)} s.`,
      });
      return;
    }
    if (e.kind === "started") {
      this.job = startJob();
      this.origin = event.source;
      this.stopping = false;
      this.pausing = false;
      // A Zotero sync gives its records once its job ends: stopped, not paused (see #addReferences).
      this.pausable = event.source !== "zotero";
    }
    const inJob = this.running && this.origin === event.source;
    this.#apply(e, inJob);
    // A watched folder's change outside a job, or the end of a job: the list changed.
    if (!inJob || e.kind === "finished") this.#refreshSoon();
  }

  #apply(event: IndexEvent, inJob = true): void {
    if (inJob && this.job) this.job = nextJob(this.job, event);
    this.activity = nextActivity(this.activity, event);
    // A long file's first slices are searchable: list it now, not once it is done.
    if (event.kind === "fileSearchable") this.#refreshSoon();
    if (event.kind === "finished") {
      this.stopping = false;
      this.pausing = false;
    }
  }

  #busy(): boolean {
    if (!this.running) return false;
    const message =
      this.origin === "watch"
        ? "Catching up with the watched folders; add more when it is done."
        : "Already indexing; add more when it is done, or stop it.";
    this.#onerror({ code: "busy", message } satisfies AppError);
    return true;
  }

  /**
   * Runs a job the user started; resolves with what it resolved to once it ended and the
   * library was read again, or null when it failed. `finishedOf` finds the job's `finished`
   * event in that result (null: the job indexed nothing, and ends without one).
   */
  async #userJob<T = IndexFinished>(
    start: (onEvent: (event: IndexEvent) => void) => Promise<T>,
    pausable = true,
    finishedOf: (result: T) => IndexFinished | null = (result) => result as IndexFinished,
  ): Promise<T | null> {
    this.job = startJob();
    this.origin = "user";
    this.stopping = false;
    this.pausing = false;
    this.pausable = pausable;
    this.imported = null;
    try {
      const result = await start((event) => this.#apply(event));
      const finished = finishedOf(result);
      if (finished !== null) this.#apply(finished);
      else this.job = null;
      await this.refresh();
      return result;
    } catch (e) {
      if (this.job) this.job = { ...this.job, running: false };
      this.stopping = false;
      this.pausing = false;
      this.#onerror(e);
      return null;
    }
  }

  #refreshSoon(): void {
    if (this.#refreshTimer !== null) clearTimeout(this.#refreshTimer);
    this.#refreshTimer = setTimeout(() => {
      this.#refreshTimer = null;
      this.refresh().catch((e) => this.#onerror(e));
    }, REFRESH_DELAY_MS);
  }
}
