// One step of a settings menu (a connection test, a choice): busy while it runs, then its report
// or its error, as the menu's note shows them. The Generator, Library and Embedder menus share it.

import { toAppError } from "$lib/errors";

/** What a step says: `ok` false for an error or a choice that changed nothing. */
export interface StepReport {
  ok: boolean;
  text: string;
}

export class SettingAction {
  busy = $state(false);
  result = $state<StepReport | null>(null);

  /** Runs `step`; its report, or its error, becomes the result. */
  async run(step: () => Promise<StepReport>): Promise<void> {
    this.busy = true;
    this.result = null;
    try {
      this.result = await step();
    } catch (e) {
      this.fail(e);
    } finally {
      this.busy = false;
    }
  }

  /** Shows `e` as the result. */
  fail(e: unknown): void {
    this.result = { ok: false, text: toAppError(e).message };
  }
}
