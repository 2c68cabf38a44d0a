// What the first-run screen says about a model download: sizes, rate, time left, and the label
// of the button that starts or resumes it. Pure functions over the IPC payloads.

import type { ModelDownloadProgress, ModelOffer } from "$lib/ipc/types";

/** "4.08 GB", "438.0 MB", "12 kB", "512 B": decimal units, as the Hugging Face hub shows sizes. */
export function formatBytes(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${Math.round(n / 1e3)} kB`;
  return `${Math.round(n)} B`;
}

/** "12.3 MB/s". */
export function formatRate(bytesPerSecond: number): string {
  return `${formatBytes(bytesPerSecond)}/s`;
}

/** "45 s", "3 min 12 s", "2 h 5 min". */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** The whole download as a fraction in [0, 1]; null while the size is not known yet. */
export function fraction(p: ModelDownloadProgress): number | null {
  if (p.bytesTotal <= 0) return null;
  return Math.min(1, p.bytesDone / p.bytesTotal);
}

/** One line under the progress bar: what is happening, how much, how fast, how long. */
export function progressText(p: ModelDownloadProgress): string {
  const amount =
    p.bytesTotal > 0
      ? `${formatBytes(p.bytesDone)} of ${formatBytes(p.bytesTotal)}`
      : formatBytes(p.bytesDone);
  switch (p.stage) {
    case "checking":
      return p.bytesTotal > 0
        ? `Checking ${p.file} · ${amount}`
        : `Asking the hub about ${p.file}…`;
    case "verifying":
      return `Verifying ${p.file} (SHA-256) · ${amount}`;
    case "done":
      return `Done · ${amount}`;
    case "downloading": {
      const parts = [amount];
      if (p.bytesPerSecond > 0) parts.push(formatRate(p.bytesPerSecond));
      if (p.etaSeconds !== null) parts.push(`about ${formatDuration(p.etaSeconds)} left`);
      return parts.join(" · ");
    }
  }
}

/** "Download (4.08 GB)", or "Resume download (1.20 GB of 4.08 GB already here)". */
export function downloadLabel(offer: ModelOffer, partialBytes = offer.partialBytes): string {
  if (partialBytes > 0) {
    return `Resume download (${formatBytes(partialBytes)} of ${formatBytes(offer.sizeBytes)} already here)`;
  }
  return `Download (${formatBytes(offer.sizeBytes)})`;
}
