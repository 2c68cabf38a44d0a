import type { Answer, AnswerTimings, CachePrecision, GeneratorInfo, Passage } from "$lib/ipc/types";

/** A probability or score with two decimals, as shown in labels. */
export function fixed2(x: number): string {
  return x.toFixed(2);
}

/** A probability with three decimals, as shown in distributions. */
export function fixed3(x: number): string {
  return x.toFixed(3);
}

/** "1 file" / "3 files". */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** The last component of a path, for either separator. */
export function fileName(path: string): string {
  const parts = path.split(/[\\/]/);
  return parts[parts.length - 1] || path;
}

/** At most `max` characters, cut at a word boundary where there is one, with an ellipsis. */
/** A server's address as people read it: the URL without its scheme, e.g. "gpu-box:8080". */
export function serverHost(url: string): string {
  return url.replace(/^https?:\/\//, "");
}

/** Whether two server addresses share scheme, host and port (a saved API key's reach). */
export function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
}

export function excerpt(text: string, max = 200): string {
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat.length <= max) return flat;
  const cut = flat.slice(0, max);
  const space = cut.lastIndexOf(" ");
  return `${space > max * 0.6 ? cut.slice(0, space) : cut}…`;
}

/** Where the answer was written, from its trace; null for traces saved before it was recorded. */
export function generatorLine(info: GeneratorInfo | undefined): string | null {
  if (!info) return null;
  const model = fileName(info.model) || "the model";
  if (info.kind === "local") {
    return `Written on this computer (${info.runtime.toUpperCase()}) by ${model}`;
  }
  return `Written on the server ${info.url ?? "(unknown address)"} (${info.runtime}) by ${model}`;
}

/** How a KV cache's precision reads (the core's `CachePrecision::label`). */
export const CACHE_LABELS: Record<CachePrecision, string> = { q8: "8-bit", f16: "f16", f32: "f32" };

/**
 * Which generator wrote the answer and with which numerics, the same line the exports write
 * (`selfrag_export::provenance`, held equal by a golden file): "Written on this computer (CPU)
 * by selfrag_llama2_7b.q4_k_m.gguf · KV cache 8-bit · embedder int8". A server keeps its own
 * cache; the dummy prefix is named only where it is the reference code's. Null for a trace that
 * records neither generator nor embedder.
 */
export function provenanceLine(answer: Pick<Answer, "generator" | "embedder">): string | null {
  const parts: string[] = [];
  const generator = answer.generator;
  if (generator) {
    parts.push(generatorLine(generator) ?? "");
    if (generator.kind === "server") parts.push("the server's own KV cache");
    else if (generator.cache_precision)
      parts.push(`KV cache ${CACHE_LABELS[generator.cache_precision]}`);
    if (generator.dummy_prefix === "every-fragment")
      parts.push("space prefix after special tokens (as the reference code)");
  }
  if (answer.embedder?.server) parts.push(`embedder on the server ${answer.embedder.server}`);
  else if (answer.embedder) parts.push(`embedder ${answer.embedder.precision}`);
  return parts.length > 0 ? parts.join(" · ") : null;
}

/** A duration read at a glance: "40 ms", "2.5 s", "73 s". */
export function secondsText(seconds: number): string {
  if (seconds < 0.1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  return `${Math.round(seconds)} s`;
}

/**
 * Where an answer's time went, in the order the steps ran: "Where the time went: loading the
 * model 2.1 s · deciding 0.4 s · searching 60 ms · reading the passages 9.8 s · writing 4.6 s ·
 * critique 2 ms" (the status line above the answer gives the whole). A generator that does not tell reading from writing (a server) shows them as one step;
 * loading is left out when the model was already loaded. Null for answers saved without times.
 */
export function timingsLine(timings: AnswerTimings | undefined): string | null {
  if (!timings) return null;
  const steps: [string, number][] = [];
  // Opening a loaded model takes microseconds; only a real load is worth a word.
  if (timings.load_seconds >= 0.05) steps.push(["loading the model", timings.load_seconds]);
  steps.push(["deciding", timings.decide_seconds], ["searching", timings.search_seconds]);
  if (timings.prefill_seconds !== undefined && timings.decode_seconds !== undefined) {
    steps.push(["reading the passages", timings.prefill_seconds]);
    steps.push(["writing", timings.decode_seconds]);
  } else {
    steps.push(["writing", timings.generate_seconds]);
  }
  steps.push(["critique", timings.critique_seconds]);
  return `Where the time went: ${steps.map(([step, s]) => `${step} ${secondsText(s)}`).join(" · ")}`;
}

/**
 * A passage's page as the reader finds it: the number printed on the page, and where that
 * differs from the page's place in the file, that place too ("117 (PDF page 3)"); null for
 * formats without pages.
 */
export function pageText(passage: Pick<Passage, "page" | "page_label">): string | null {
  if (passage.page === null) return null;
  return passage.page_label
    ? `${passage.page_label} (PDF page ${passage.page})`
    : `${passage.page}`;
}

/**
 * "OCR text, confidence 91%" for a passage read from a scan by OCR (the same words as the
 * exports' `ocr_note`), else null.
 */
export function ocrText(passage: Pick<Passage, "ocr_confidence">): string | null {
  const confidence = passage.ocr_confidence;
  return confidence === undefined ? null : `OCR text, confidence ${Math.round(confidence * 100)}%`;
}
