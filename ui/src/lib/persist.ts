// Saving settings as they change: at most one save per quiet period, the last value wins, and
// a pending save can be flushed (when the window closes).

export interface Saver<T> {
  /** Saves `value` once nothing newer arrives for the delay. */
  schedule(value: T): void;
  /** Saves the pending value now, if any. */
  flush(): Promise<void>;
}

/** A saver that calls `save` `delayMs` after the last `schedule`; failures go to `onError`. */
export function debouncedSaver<T>(
  save: (value: T) => Promise<unknown>,
  delayMs: number,
  onError: (e: unknown) => void,
): Saver<T> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let pending: { value: T } | null = null;

  async function run() {
    timer = null;
    const next = pending;
    pending = null;
    if (next === null) return;
    try {
      await save(next.value);
    } catch (e) {
      onError(e);
    }
  }

  return {
    schedule(value: T) {
      pending = { value };
      if (timer !== null) clearTimeout(timer);
      timer = setTimeout(() => void run(), delayMs);
    },
    flush() {
      if (timer !== null) clearTimeout(timer);
      return run();
    },
  };
}
