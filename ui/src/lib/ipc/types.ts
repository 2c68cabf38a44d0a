// The shapes that cross the Tauri IPC boundary.
//
// Hand-written for now; they mirror the Rust serde output exactly and will be replaced by types
// generated from Rust (ts-rs). The answer trace (selfrag-core: trace.rs, settings.rs, backend.rs)
// is snake_case; the engine's own payloads (selfrag-engine, src-tauri) are camelCase.

// ---- selfrag-core::settings ----

/** How the retrieve decision is made. */
export type RetrieveMode = "adaptive" | "always" | "never" | "model";

/** Weights of the critique terms in the segment score f. */
export interface CritiqueWeights {
  rel: number;
  sup: number;
  use: number;
}

/** Everything that shapes one answer; serialized into the trace as `settings`. */
export interface Settings {
  mode: RetrieveMode;
  /** δ: the retrieve threshold for `adaptive` mode. */
  threshold: number;
  /** K: passages retrieved, and so candidates written, per segment. */
  k: number;
  weights: CritiqueWeights;
  use_p_lm: boolean;
  hard_constraints: boolean;
  long_form: boolean;
  beam_width: number;
  max_segments: number;
  max_new_tokens: number;
  max_segment_tokens: number;
}

// ---- selfrag-core::backend ----

/** A passage of the user's library, as cited in an answer. */
export interface Passage {
  id: string;
  title: string;
  path: string;
  /** 1-based page in the source, where the format has pages. */
  page: number | null;
  text: string;
}

// ---- selfrag-core::trace ----

export interface RetrieveDecision {
  p_retrieve: number;
  retrieved: boolean;
}

export interface IsRelDistribution {
  "[Relevant]": number;
  "[Irrelevant]": number;
}

export interface IsSupDistribution {
  "[Fully supported]": number;
  "[Partially supported]": number;
  "[No support / Contradictory]": number;
}

export interface IsUseDistribution {
  "[Utility:1]": number;
  "[Utility:2]": number;
  "[Utility:3]": number;
  "[Utility:4]": number;
  "[Utility:5]": number;
}

export interface Candidate {
  /** 0-based index into `Answer.passages`; null without retrieval. */
  passage: number | null;
  text: string;
  raw: string;
  p_lm: number;
  isrel: IsRelDistribution | null;
  issup: IsSupDistribution | null;
  isuse: IsUseDistribution | null;
  s_rel: number;
  s_sup: number;
  s_use: number;
  score: number;
}

export interface Segment {
  text: string;
  /** 1-based index into `Answer.passages`; null if uncited. */
  citation: number | null;
  /** Index into `candidates` of the chosen one. */
  chosen: number;
  candidates: Candidate[];
}

export interface Answer {
  question: string;
  settings: Settings;
  retrieve: RetrieveDecision;
  passages: Passage[];
  segments: Segment[];
  answer: string;
}

// ---- selfrag-core::progress ----

/** Events emitted while an answer is being written (`segment` and `index` are 0-based). */
export type Progress =
  | {
      kind: "retrieve_decided";
      p_retrieve: number;
      threshold: number;
      mode: RetrieveMode;
      retrieved: boolean;
    }
  | { kind: "passages_retrieved"; segment: number; count: number }
  | { kind: "candidates_started"; segment: number; count: number }
  | { kind: "candidate_finished"; segment: number; index: number; count: number }
  | { kind: "segment_chosen"; segment: number; text: string; citation: number | null };

// ---- selfrag-engine / src-tauri (camelCase) ----

export type ModelRole = "generator" | "embedder";

export interface ModelStatus {
  role: ModelRole;
  name: string;
  found: boolean;
  path: string | null;
  /** Every place the engine looked for the model. */
  searched: string[];
  /** What the user can do to make the model found. */
  fix: string;
}

export interface LibraryStats {
  documents: number;
  passages: number;
}

export interface AppStatus {
  dataDir: string;
  models: ModelStatus[];
  library: LibraryStats;
}

export type IndexEvent =
  | { kind: "started"; total: number }
  | { kind: "fileStarted"; path: string }
  | { kind: "fileIndexed"; path: string; passages: number }
  | { kind: "fileSkipped"; path: string; reason: string }
  | { kind: "fileFailed"; path: string; error: string }
  | { kind: "finished"; indexed: number; skipped: number; failed: number };

export type IndexFinished = Extract<IndexEvent, { kind: "finished" }>;

export interface DocumentInfo {
  id: string;
  path: string;
  title: string;
  passages: number;
}

export interface AnswerRecord {
  id: string;
  answer: Answer;
  rerunCouldDiffer: boolean;
}

/** What a rejected invoke throws. */
export interface IpcError {
  code: string;
  message: string;
}

export type ExportFormat = "md";
