// Input-to-repaint time of the last re-rank: from the control's input event to the animation
// frame that paints the re-ranked answer. Shown next to the sliders and read by the e2e test.

import { tick } from "svelte";
import { writable } from "svelte/store";

/** Milliseconds of the last re-rank, input to repaint; null before the first. */
export const rerankLatency = writable<number | null>(null);

let inputAt: number | null = null;

/** Call from the input handler with the event's timeStamp (the performance.now() clock). */
export function markInput(timeStamp: number): void {
  inputAt = timeStamp > 0 && timeStamp <= performance.now() ? timeStamp : performance.now();
}

/** Call once the re-ranked answer is in state: measures up to the frame that paints it. */
export function measureRepaint(): void {
  const since = inputAt;
  inputAt = null;
  if (since === null) return;
  void tick().then(() =>
    requestAnimationFrame(() => rerankLatency.set(Math.max(0, performance.now() - since))),
  );
}
