// pdf.js, loaded on first use (its own chunk, so the app starts without it) and set up for the
// app's CSP: the worker and the data pdf.js reads (CMaps, the standard fonts, the wasm image
// decoders, ICC profiles) are the app's own files (vite.config.ts copies them to `pdfjs/`), no
// string is evaluated as code, and the PDF's bytes come over IPC, never by URL.

import type { PDFDocumentProxy, PDFPageProxy } from "pdfjs-dist/legacy/build/pdf.mjs";
import workerUrl from "pdfjs-dist/legacy/build/pdf.worker.min.mjs?url";

export type { PDFDocumentProxy, PDFPageProxy };

type PdfJs = typeof import("pdfjs-dist/legacy/build/pdf.mjs");

let loading: Promise<PdfJs> | null = null;

/**
 * The pdf.js module, imported once, with its worker started by the app: pdf.js would start it
 * itself only where it judges the page's origin the worker's (else through a `blob:` URL, which
 * the CSP refuses, and then on the main thread, freezing the window on a large PDF).
 */
export function pdfjs(): Promise<PdfJs> {
  loading ??= import("pdfjs-dist/legacy/build/pdf.mjs").then((lib) => {
    lib.GlobalWorkerOptions.workerSrc = workerUrl;
    try {
      lib.GlobalWorkerOptions.workerPort = new Worker(workerUrl, { type: "module" });
    } catch {
      // No module workers: pdf.js falls back to its own means.
    }
    return lib;
  });
  return loading;
}

/** An absolute URL of one of the data folders under the app's `pdfjs/`. */
function dataUrl(folder: string): string {
  return new URL(`pdfjs/${folder}/`, document.baseURI).href;
}

/** Opens a PDF from its bytes. */
export async function openPdf(data: Uint8Array): Promise<PDFDocumentProxy> {
  const lib = await pdfjs();
  return lib.getDocument({
    data,
    cMapUrl: dataUrl("cmaps"),
    cMapPacked: true,
    standardFontDataUrl: dataUrl("standard_fonts"),
    wasmUrl: dataUrl("wasm"),
    iccUrl: dataUrl("iccs"),
    isEvalSupported: false,
    enableXfa: false,
  }).promise;
}

/** A rendered page: the canvas painted and the text layer laid over it. */
export interface RenderedPage {
  /** The strings of the text layer's spans, in order (what the passage is looked for in). */
  items: string[];
  /** The text layer's spans, one per item. */
  spans: HTMLElement[];
}

/**
 * Paints `page` at `scale` CSS pixels per PDF point into `canvas` and lays its text into
 * `textLayer` (positioned over the canvas by the caller's CSS). `signal` cancels the paint.
 */
export async function renderPage(
  page: PDFPageProxy,
  scale: number,
  canvas: HTMLCanvasElement,
  textLayer: HTMLElement,
  signal: AbortSignal,
): Promise<RenderedPage> {
  const lib = await pdfjs();
  signal.throwIfAborted();
  const viewport = page.getViewport({ scale });
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.floor(viewport.width * ratio);
  canvas.height = Math.floor(viewport.height * ratio);
  canvas.style.width = `${Math.floor(viewport.width)}px`;
  canvas.style.height = `${Math.floor(viewport.height)}px`;
  const task = page.render({
    canvas,
    viewport,
    transform: ratio === 1 ? undefined : [ratio, 0, 0, ratio, 0, 0],
  });
  const cancel = () => task.cancel();
  signal.addEventListener("abort", cancel);
  if (signal.aborted) task.cancel();
  textLayer.replaceChildren();
  textLayer.style.setProperty("--total-scale-factor", String(scale));
  const text = new lib.TextLayer({
    textContentSource: page.streamTextContent(),
    container: textLayer,
    viewport,
  });
  signal.addEventListener("abort", () => text.cancel());
  if (signal.aborted) text.cancel();
  try {
    await Promise.all([task.promise, text.render()]);
  } finally {
    signal.removeEventListener("abort", cancel);
  }
  return { items: [...text.textContentItemsStr], spans: [...text.textDivs] };
}
