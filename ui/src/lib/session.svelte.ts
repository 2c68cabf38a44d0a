// The question being answered and the answer on screen: asking (its streamed progress and the
// segments chosen so far), stopping, re-ranking as the weights move (a reply overtaken by a
// newer request is dropped), and reopening or forgetting a saved answer. It lives outside
// App.svelte, as the library's controller does; the settings stay the page's.

import { toAppError, type AppError } from "./errors";
import { ask, cancelAsk, rerank } from "./ipc";
import type { AnswerRecord, CritiqueWeights, Progress, Settings } from "./ipc/types";
import { measureRepaint } from "./latency";
import { nextStatus, startRun, type RunStatus } from "./progress";

/** A segment chosen while the question runs, shown until the answer arrives. */
export interface DraftSegment {
  text: string;
  citation: number | null;
}

/** What the page hears from the session. */
export interface SessionHooks {
  /** A question starts: earlier errors and export notes go. */
  onstart: () => void;
  /** An answer arrived (and is in the history). */
  onanswered: () => void;
  /** A question failed (a stop is not a failure). */
  onaskfailed: (failure: AppError) => void;
  /** Another call failed. */
  onerror: (e: unknown) => void;
}

/** The weights an answer was ranked with. */
interface Ranking {
  weights: CritiqueWeights;
  hardConstraints: boolean;
}

export class AnswerSession {
  /** The question being answered, as the streaming view shows it. */
  asking = $state("");
  running = $state(false);
  run = $state<RunStatus | null>(null);
  draft = $state<DraftSegment[]>([]);
  record = $state<AnswerRecord | null>(null);
  /** Stop was pressed and the run has not ended yet. */
  stopping = $state(false);

  readonly #hooks: SessionHooks;
  /** Bumped by every new answer and rerank request: a reply older than the newest applied is stale. */
  #requestSeq = 0;
  #appliedSeq = 0;
  /** The weights the answer on screen was last asked or re-ranked with. */
  #rankedWith: Ranking | null = null;

  constructor(hooks: SessionHooks) {
    this.#hooks = hooks;
  }

  /**
   * Answers `text` with `asked`; resolves when it has ended (answered, stopped or failed).
   * Weights moved while it ran (`current()` then) apply to the answer on screen, new or kept.
   * With `options`, a multiple-choice question whose options are scored.
   */
  async ask(
    text: string,
    asked: Settings,
    current: () => Settings,
    options?: string[],
  ): Promise<void> {
    if (text.length === 0 || this.running) return;
    this.running = true;
    this.asking = text;
    this.stopping = false;
    this.draft = [];
    this.#hooks.onstart();
    this.run = startRun(asked.long_form);
    const seq = ++this.#requestSeq;
    const started = performance.now();
    try {
      const onEvent = (event: Progress) => {
        if (this.run && !this.stopping) this.run = nextStatus(this.run, event);
        if (event.kind === "segment_chosen") {
          this.draft = [...this.draft, { text: event.text, citation: event.citation }];
        }
      };
      // An open question is asked as before, without an options argument.
      const answered = await (options === undefined
        ? ask(text, asked, onEvent)
        : ask(text, asked, onEvent, options));
      this.#appliedSeq = seq;
      this.record = answered;
      this.#hooks.onanswered();
      this.#rankedWith = { weights: asked.weights, hardConstraints: asked.hard_constraints };
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      this.run = { ...startRun(asked.long_form), line: `Answered in ${seconds} s` };
    } catch (e) {
      const failure = toAppError(e);
      if (failure.code === "cancelled") {
        // Stopping is not a failure: the previous answer, if any, stays.
        this.run = { ...startRun(asked.long_form), line: "Stopped." };
      } else {
        this.run = null;
        this.#hooks.onaskfailed(failure);
      }
    } finally {
      this.running = false;
      this.stopping = false;
      this.draft = [];
    }
    const now = current();
    const ranked = this.#rankedWith;
    if (
      ranked !== null &&
      (JSON.stringify(now.weights) !== JSON.stringify(ranked.weights) ||
        now.hard_constraints !== ranked.hardConstraints)
    ) {
      this.rerank(now.weights, now.hard_constraints);
    }
  }

  /** Asks the running question to stop; its end comes through `ask`. */
  async stop(): Promise<void> {
    if (!this.running || this.stopping) return;
    this.stopping = true;
    this.run = this.run ? { ...this.run, line: "Stopping…" } : this.run;
    try {
      await cancelAsk();
    } catch (e) {
      this.stopping = false;
      this.#hooks.onerror(e);
    }
  }

  /** Re-ranks the answer on screen with new weights (not while a question runs). */
  rerank(weights: CritiqueWeights, hardConstraints: boolean): void {
    const current = this.record;
    if (current === null || this.running) return;
    // Sent at once and in order; replies overtaken by a newer one are dropped.
    const seq = ++this.#requestSeq;
    this.#rankedWith = { weights: { ...weights }, hardConstraints };
    rerank(current.id, { ...weights }, hardConstraints).then(
      (reranked) => {
        if (seq <= this.#appliedSeq) return;
        this.#appliedSeq = seq;
        this.record = reranked;
        measureRepaint();
      },
      (e) => {
        if (seq > this.#appliedSeq) this.#hooks.onerror(e);
      },
    );
  }

  /** Shows a saved answer again; false while a question runs. */
  reopen(reopened: AnswerRecord): boolean {
    if (this.running) return false;
    this.#appliedSeq = ++this.#requestSeq;
    this.record = reopened;
    this.run = null;
    const s = reopened.answer.settings;
    this.#rankedWith = { weights: { ...s.weights }, hardConstraints: s.hard_constraints };
    return true;
  }

  /** A deleted answer leaves the screen too; true when it was the one on screen. */
  forget(id: string): boolean {
    if (this.record?.id !== id) return false;
    this.#appliedSeq = ++this.#requestSeq;
    this.record = null;
    this.#rankedWith = null;
    return true;
  }
}
