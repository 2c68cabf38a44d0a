// Answer traces and engine replies shaped exactly as the Rust side serializes them.

import type {
  EmbedderServerState,
  Answer,
  AnswerRecord,
  AppSettings,
  AppStatus,
  Candidate,
  DeviceStatus,
  LibraryLocationState,
  LoadedSettings,
} from "$lib/ipc/types";
import { DEFAULT_APP_SETTINGS } from "$lib/ipc/bindings";
import { defaultSettings } from "$lib/settings";

export function candidate(overrides: Partial<Candidate> = {}): Candidate {
  return {
    passage: 0,
    text: "Self-RAG retrieves passages only when it needs them.",
    raw: "[Relevant]Self-RAG retrieves passages only when it needs them.[Fully supported][Utility:5]",
    p_lm: 0.62,
    isrel: { "[Relevant]": 0.92, "[Irrelevant]": 0.08 },
    issup: {
      "[Fully supported]": 0.9,
      "[Partially supported]": 0.07,
      "[No support / Contradictory]": 0.03,
    },
    isuse: {
      "[Utility:1]": 0.01,
      "[Utility:2]": 0.02,
      "[Utility:3]": 0.07,
      "[Utility:4]": 0.2,
      "[Utility:5]": 0.7,
    },
    s_rel: 0.92,
    s_sup: 0.935,
    s_use: 0.895,
    score: 2.9225,
    verdicts: { isrel: "relevant", issup: "fully", isuse: 5 },
    ...overrides,
  };
}

export function answer(overrides: Partial<Answer> = {}): Answer {
  return {
    question: "When does Self-RAG retrieve?",
    settings: defaultSettings(),
    retrieve: { p_retrieve: 0.83, retrieved: true },
    passages: [
      {
        id: "doc1#3",
        title: "Self-RAG: Learning to Retrieve, Generate, and Critique",
        path: "/home/ada/papers/selfrag.pdf",
        page: 3,
        text: "Self-RAG trains a single LM that adaptively retrieves passages on-demand, and generates and reflects on retrieved passages and its own generations using special tokens, called reflection tokens.",
      },
      {
        id: "doc2#1",
        title: "Notes on retrieval",
        path: "/home/ada/notes/retrieval.md",
        page: null,
        text: "Retrieval helps factual questions; it rarely helps creative writing.",
      },
    ],
    segments: [
      {
        text: "Self-RAG retrieves passages only when it needs them.",
        citation: 1,
        chosen: 0,
        retrieve: { p_retrieve: 0.83, retrieved: true },
        candidates: [
          candidate(),
          candidate({
            passage: 1,
            text: "It retrieves for factual questions.",
            raw: "[Relevant]It retrieves for factual questions.[Partially supported][Utility:4]",
            p_lm: 0.55,
            issup: {
              "[Fully supported]": 0.2,
              "[Partially supported]": 0.7,
              "[No support / Contradictory]": 0.1,
            },
            s_sup: 0.55,
            score: 2.4,
            verdicts: { isrel: "relevant", issup: "partially", isuse: 5 },
          }),
        ],
      },
    ],
    answer: "Self-RAG retrieves passages only when it needs them.[1]",
    ...overrides,
  };
}

export function record(overrides: Partial<AnswerRecord> = {}): AnswerRecord {
  return { id: "a1", answer: answer(), ...overrides };
}

/** The same answer after a rerank that prefers the second candidate. */
export function reranked(): AnswerRecord {
  const base = answer();
  const segment = base.segments[0];
  return record({
    answer: {
      ...base,
      settings: { ...base.settings, weights: { rel: 1, sup: 1.5, use: 0.5 } },
      passages: [base.passages[1], base.passages[0]],
      segments: [{ ...segment, text: "It retrieves for factual questions.", chosen: 1 }],
      answer: "It retrieves for factual questions.[1]",
    },
  });
}

export function status(overrides: Partial<AppStatus> = {}): AppStatus {
  return {
    dataDir: "/home/ada/.local/share/selfrag",
    models: [
      {
        role: "generator",
        name: "selfrag_llama2_7b Q4_K_M",
        found: true,
        path: "/models/selfrag.gguf",
        searched: [],
        fix: "",
      },
      {
        role: "embedder",
        name: "facebook/contriever-msmarco",
        found: true,
        path: "/models/contriever",
        searched: [],
        fix: "",
      },
    ],
    library: {
      documents: 1,
      passages: 12,
      contents: 1,
      pages: 3,
      diskBytes: 43_000,
      vectorIndex: false,
      textIndex: true,
    },
    device: deviceStatus(),
    ...overrides,
  };
}

export function deviceStatus(overrides: Partial<DeviceStatus> = {}): DeviceStatus {
  return {
    chosen: "auto",
    inUse: null,
    available: ["auto", "cpu"],
    fixedByEnv: false,
    embedderPrecision: "int8",
    int8Available: true,
    precisionFixedByEnv: false,
    cachePrecision: null,
    cachePrecisionFixedByEnv: false,
    dummyPrefix: "text-start",
    dummyPrefixFixedByEnv: false,
    ...overrides,
  };
}

/** The settings as `load_settings` returns them on a first start. */
export function loadedSettings(overrides: Partial<AppSettings> = {}): LoadedSettings {
  return {
    settings: { ...structuredClone(DEFAULT_APP_SETTINGS), ...overrides },
    path: "/home/ada/.config/selfrag-desktop/settings.json",
    notice: null,
  };
}

/** The library in its default folder on this computer, as the Library setting shows it. */
/** The embedder on this computer, no server saved. */
export function localEmbedder(overrides: Partial<EmbedderServerState> = {}): EmbedderServerState {
  return {
    url: null,
    model: null,
    fixedByEnv: false,
    nextStart: null,
    nextModel: null,
    hasApiKey: false,
    ...overrides,
  };
}

export function localLibrary(overrides: Partial<LibraryLocationState> = {}): LibraryLocationState {
  return {
    location: "/data/library",
    shared: false,
    defaultFolder: "/data/library",
    fixedByEnv: false,
    nextStart: null,
    ...overrides,
  };
}
