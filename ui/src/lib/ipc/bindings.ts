// Generated from the Rust types by src-tauri/src/bindings.rs. Do not edit.
// Regenerate: UPDATE_BINDINGS=1 cargo test -p selfrag-desktop bindings

export type RetrieveMode = "adaptive" | "always" | "never" | "model";

export type PLmTokens = "all" | "text";

export type LongFormRanking = "normalised" | "raw";

export type CritiqueWeights = { 
/**
 * Weight of s_rel (IsRel).
 */
rel: number, 
/**
 * Weight of s_sup (IsSup).
 */
sup: number, 
/**
 * Weight of s_use (IsUse).
 */
use: number, };

export type Settings = { mode: RetrieveMode, 
/**
 * δ: the retrieve threshold for `adaptive` mode.
 */
threshold: number, 
/**
 * K: passages retrieved, and so candidates written, per segment.
 */
k: number, weights: CritiqueWeights, 
/**
 * Include the length-normalised sequence probability p_LM in `f`.
 */
use_p_lm: boolean, 
/**
 * Which generated tokens p_LM is taken over.
 */
p_lm_tokens: PLmTokens, 
/**
 * Drop unsupported or irrelevant candidates unless nothing would be left (step 6).
 */
hard_constraints: boolean, 
/**
 * Segment-level beam search instead of one segment.
 */
long_form: boolean, 
/**
 * B: beams kept in long form.
 */
beam_width: number, 
/**
 * Long form stops after this many segments.
 */
max_segments: number, 
/**
 * How long form's beam search compares paths whose segments are of different kinds.
 */
long_form_ranking: LongFormRanking, 
/**
 * Most tokens a prompt and its continuation may take together: the fine-tuning length
 * (2,048) by default, up to the model's context. Where a long-form path's carried passages
 * would pass it, the oldest are left out first (every reflection token stays).
 */
prompt_budget: number, 
/**
 * New-token limit of a short-form answer.
 */
max_new_tokens: number, 
/**
 * New-token limit of one long-form segment.
 */
max_segment_tokens: number, };

export type FieldSource = "firstPageGuess" | "identifier" | "fileMetadata" | "lookup" | "bibliographyFile" | "referenceManager" | "person";

export type Sourced<T> = { value: T, source: FieldSource, };

export type WorkType = "journalArticle" | "conferencePaper" | "book" | "chapter" | "thesis" | "report" | "webPage" | "other";

export type Author = { "kind": "person", family: string, 
/**
 * Empty where only the family name is known.
 */
given: string, } | { "kind": "organisation", name: string, };

export type WorkDate = { year: number, month?: number, day?: number, };

export type ZoteroLink = { 
/**
 * The group library's id; `None` in the person's own library.
 */
group?: number, 
/**
 * The regular item's eight-character key.
 */
itemKey: string, 
/**
 * The attachment item's key, where the document is a file attached to it.
 */
attachmentKey?: string, 
/**
 * The names of the collections the item is in, each as a path from the top
 * (`Thesis/Chapter 2`).
 */
collections: Array<string>, };

export type Work = { kind?: Sourced<WorkType>, title?: Sourced<string>, 
/**
 * In the order the work lists them.
 */
authors?: Sourced<Array<Author>>, date?: Sourced<WorkDate>, 
/**
 * The journal, the proceedings or the book a part of it appeared in.
 */
container?: Sourced<string>, volume?: Sourced<string>, issue?: Sourced<string>, 
/**
 * The work's pages in its container (`117--129`), not the pages an answer cites.
 */
pages?: Sourced<string>, publisher?: Sourced<string>, 
/**
 * Bare (`10.1000/xyz`), lower-cased: DOIs are case-insensitive.
 */
doi?: Sourced<string>, 
/**
 * `2310.11511` or `hep-th/9901001`, without a version.
 */
arxiv?: Sourced<string>, 
/**
 * Digits (and a final X) only.
 */
isbn?: Sourced<string>, url?: Sourced<string>, 
/**
 * The person's own key (Better BibTeX, a bibliography file, their edit).
 */
citationKey?: Sourced<string>, 
/**
 * Where the document is in Zotero, when it came from there.
 */
zotero?: ZoteroLink, };

export type Passage = { 
/**
 * Stable id of the passage in the library.
 */
id: string, 
/**
 * Title of the source document.
 */
title: string, 
/**
 * Path of the source file on disk.
 */
path: string, 
/**
 * 1-based page in the source, where the format has pages: the page a viewer opens.
 */
page: number | null, 
/**
 * The number printed on that page, where the source's page labels give one that differs
 * from `page` (`xii`, `117`).
 */
page_label?: string, 
/**
 * Where the page was a scan read by OCR: the engine's mean word confidence, 0–1 (the text
 * may hold misread words).
 */
ocr_confidence?: number, 
/**
 * The passage text the model read.
 */
text: string, 
/**
 * The work its document holds (authors, year, DOI, citation key) as the library knew it
 * when the answer was written: what an export cites where the document is gone since.
 * `None` in traces written before works existed and for documents without a record.
 */
work?: Work, };

export type RetrieveDecision = { 
/**
 * p(Retrieval) / (p(Retrieval) + p(No Retrieval)) at the first position after the prompt.
 */
p_retrieve: number, 
/**
 * Whether passages were retrieved.
 */
retrieved: boolean, 
/**
 * The run chose to retrieve and the library returned no passage, so the answer was
 * written without one (`retrieved` is then false). Absent when false.
 */
found_nothing?: boolean | undefined, 
/**
 * Passages of earlier segments left out of the prompt it was read after, to fit the
 * context (long form; see [`Candidate::passages_dropped`]). Absent when 0.
 */
passages_dropped?: number | undefined, 
/**
 * Whether `[Retrieval]` was the most probable next token over the whole vocabulary: read
 * in `model` mode only (see [`crate::RetrieveMode::retrieves`]). Absent when not read.
 */
retrieval_is_argmax?: boolean | undefined, };

export type IsRelDistribution = { "[Relevant]": number, "[Irrelevant]": number, };

export type IsSupDistribution = { "[Fully supported]": number, "[Partially supported]": number, "[No support / Contradictory]": number, };

export type IsUseDistribution = { "[Utility:1]": number, "[Utility:2]": number, "[Utility:3]": number, "[Utility:4]": number, "[Utility:5]": number, };

export type HardConstraint = "irrelevant" | "unsupported";

export type Verdicts = { isrel: IsRelVerdict | null, issup: IsSupVerdict | null, 
/**
 * 1 to 5, as in `[Utility:n]`.
 */
isuse: number | null, };

export type IsRelVerdict = "relevant" | "irrelevant";

export type IsSupVerdict = "fully" | "partially" | "no_support";

export type Candidate = { 
/**
 * Index into `Answer::passages` of the passage it was written from; `None` without retrieval.
 */
passage: number | null, 
/**
 * The segment text with every reflection token, `<pad>` and `</s>` stripped.
 */
text: string, 
/**
 * The raw generated text, reflection tokens included (for the inspector).
 */
raw: string, 
/**
 * p_LM: exp(mean log p) over the generated tokens the trace's `settings.p_lm_tokens`
 * names (every token, or the text tokens only).
 */
p_lm: number, isrel: IsRelDistribution | null, issup: IsSupDistribution | null, isuse: IsUseDistribution | null, s_rel: number, s_sup: number, s_use: number, 
/**
 * The segment score f under the trace's settings.
 */
score: number, 
/**
 * The model ended the answer with it (`</s>`): a long-form path through it goes no
 * further. Absent when false.
 */
ends_answer?: boolean | undefined, 
/**
 * Written after `[Continue to Use Evidence]` (long form): it reads the passage of the
 * segment before, already in its prompt, and carries that segment's IsRel judgement, as
 * the model does not judge a passage twice. Absent when false.
 */
continued?: boolean | undefined, 
/**
 * Continued segments only: the IsSup last given on the passage it reads on, along its
 * path. The model never writes IsSup after `[Continue to Use Evidence]` in its training
 * data, so long form ranked `normalised` counts this one where the segment wrote none.
 * It is not this segment's own judgement: `issup`, its badge and `score` (f) do not
 * include it. Absent otherwise.
 */
evidence_issup?: IsSupDistribution, 
/**
 * Passages of earlier segments left out of its prompt, oldest first, because the whole
 * path did not fit the prompt budget (`settings.prompt_budget`, held to the model's
 * context; long form). Their `[Retrieval]` tokens and every
 * reflection token stay. Absent when 0: the prompt held the path exactly as the model
 * wrote it, passages included, as in training.
 */
passages_dropped?: number | undefined, 
/**
 * What the hard constraints (step 6) hold against it, whether or not they are on: its
 * passage judged irrelevant, its text judged unsupported. Absent when nothing.
 */
violates?: Array<HardConstraint> | undefined, 
/**
 * What the model's critique says of it, group by group: what its badges show.
 */
verdicts: Verdicts, };

export type Segment = { 
/**
 * Text of the chosen candidate.
 */
text: string, 
/**
 * 1-based index into `Answer::passages`, numbered by first use; `None` if uncited.
 */
citation: number | null, 
/**
 * Index into `candidates` of the chosen one.
 */
chosen: number, candidates: Array<Candidate>, 
/**
 * The retrieve decision at this segment's boundary; `None` where none was made (a
 * long-form segment that continued with its passage after `[Continue to Use Evidence]`).
 */
retrieve: RetrieveDecision | null, 
/**
 * Indices into `candidates` that the hard constraints left out of the choice under the
 * trace's settings: none when they are off, or when they would leave nothing. Absent when
 * none.
 */
excluded?: Array<number> | undefined, };

export type TreeNode = { 
/**
 * Index into `Answer::expansions`.
 */
expansion: number, 
/**
 * Index into that expansion's `candidates`.
 */
candidate: number, };

export type Expansion = { 
/**
 * The path it continues, named by its last segment; `None` for the first segment.
 */
parent: TreeNode | null, 
/**
 * The retrieve decision at the boundary; `None` after `[Continue to Use Evidence]`.
 */
retrieve: RetrieveDecision | null, 
/**
 * One per passage (or one without); empty when `no_room`.
 */
candidates: Array<Candidate>, 
/**
 * The path's prompt no longer fit the context, even with every earlier passage left out:
 * the path ends at its parent. Absent when false.
 */
no_room?: boolean | undefined, };

export type GeneratorKind = "local" | "server";

export type CachePrecision = "q8" | "f16" | "f32";

export type DummyPrefix = "text-start" | "every-fragment";

export type GeneratorInfo = { kind: GeneratorKind, 
/**
 * The model: the GGUF file's name locally, the server's model path or alias there.
 */
model: string, 
/**
 * The device locally (`cpu`, `cuda`, `metal`); the server's software and build there
 * (e.g. `llama.cpp b6800-abc1234`).
 */
runtime: string, 
/**
 * The server's URL; `None` locally.
 */
url?: string, 
/**
 * How the KV cache held keys and values: the precision in force locally; `None` on a
 * server (which keeps its own, unknown here) and in traces saved before it was recorded.
 */
cache_precision?: CachePrecision, 
/**
 * Where the prompts' tokenizer put SentencePiece's dummy-prefix `▁` (prompts travel to a
 * server as ids from the same tokenizer); `None` for a byte-level BPE model (Llama-3's),
 * which has no `▁`, and in traces saved before it was recorded.
 */
dummy_prefix?: DummyPrefix, };

export type EmbedderInfo = { 
/**
 * The model: its Hugging Face repository and revision, or its folder.
 */
model: string, 
/**
 * The precision it multiplied in (int8 only where asked for and the CPU runs it).
 */
precision: EmbedderPrecision, 
/**
 * The device it ran on.
 */
device: DeviceKind, 
/**
 * The embeddings server's API address, where the vectors came from one. A server does not
 * report its numerics: `precision` and `device` then say nothing (f32 and CPU are written)
 * and are not shown.
 */
server?: string, };

export type AnswerTimings = { 
/**
 * Loading the generator before the answer could start (the first answer after a start or
 * a change of model or device), with the embedder where it loaded at the same time; 0
 * when it was loaded, and on a server.
 */
load_seconds: number, 
/**
 * Reading the question up to the retrieve decision.
 */
decide_seconds: number, 
/**
 * Embedding the query and searching the library.
 */
search_seconds: number, 
/**
 * Writing the candidates: reading their prompts and decoding them.
 */
generate_seconds: number, 
/**
 * Of `generate_seconds`, reading the prompts (the passages), where the generator can tell;
 * `None` on a server.
 */
prefill_seconds?: number, 
/**
 * Of `generate_seconds`, the decode steps, where the generator can tell.
 */
decode_seconds?: number, 
/**
 * Scoring the candidates by their reflection tokens and choosing.
 */
critique_seconds: number, 
/**
 * The whole answer, loading aside; the steps' sum and what lies between them.
 */
answer_seconds: number, };

export type ClosedSetKind = "multiple_choice" | "true_false";

export type OptionScore = { label: string, text: string, 
/**
 * The sum of f over [`candidates`](Self::candidates); 0 when none names it.
 */
score: number, 
/**
 * Indices into the first segment's candidates of those that name this option.
 */
candidates: Array<number>, };

export type ClosedSetScores = { kind: ClosedSetKind, 
/**
 * The question as the person wrote it, without the instruction and the options that the
 * trace's `question`, what the model read, holds.
 */
question: string, options: Array<OptionScore>, 
/**
 * Index into `options` of the answer: the highest score among the options at least one
 * counted candidate names, the earlier on a tie; `None` when no candidate names an option.
 */
chosen: number | null, };

export type Answer = { question: string, 
/**
 * The settings it was written under. A setting added after the trace was saved reads as
 * the rule it was written under (see `settings::deserialize_recorded`).
 */
settings: Settings, retrieve: RetrieveDecision, 
/**
 * The passages the answer read, in citation order first, then the unused ones.
 */
passages: Array<Passage>, segments: Array<Segment>, 
/**
 * Long form: every expansion the beam search made, in the order it made them (the
 * chosen path's segments among them). Empty for short form and for traces saved before
 * the tree was kept.
 */
expansions?: Array<Expansion>, 
/**
 * The final answer text with `[n]` citation markers.
 */
answer: string, 
/**
 * The generator that wrote it; absent in traces saved before it was recorded.
 */
generator?: GeneratorInfo, 
/**
 * The embedder that made the query's vector; absent where no query was searched, and in
 * traces saved before it was recorded.
 */
embedder?: EmbedderInfo, 
/**
 * Why the answer stops early: the generator failed (a server that stopped answering) after
 * the segments kept here, which are complete and scored. `None` for a finished answer.
 */
cut_short?: string, 
/**
 * Where the answer's time went; absent in traces saved before it was recorded, and in
 * answers not written by a run (imported, built by hand).
 */
timings?: AnswerTimings, 
/**
 * A closed-set question's options with their scores (see [`crate::closed_set`]); absent
 * for an open question, and in traces saved before it was recorded.
 */
closed_set?: ClosedSetScores, };

export type Progress = { "kind": "retrieve_decided", p_retrieve: number, threshold: number, mode: RetrieveMode, retrieved: boolean, } | { "kind": "passages_retrieved", segment: number, count: number, } | { "kind": "candidates_started", segment: number, count: number, } | { "kind": "candidate_finished", segment: number, index: number, count: number, } | { "kind": "segment_chosen", segment: number, text: string, citation: number | null, };

export type ModelRole = "generator" | "embedder";

export type ModelOffer = { 
/**
 * The manifest id, what `download_model` takes.
 */
id: string, 
/**
 * Hugging Face repository, `org/name`.
 */
repo: string, 
/**
 * SPDX-style license of the weights.
 */
license: string, 
/**
 * The licence in words (what it allows and forbids).
 */
licenseTerms: string, 
/**
 * Approximate download size in bytes.
 */
sizeBytes: number, 
/**
 * Bytes an interrupted download already has on disk; it resumes from there.
 */
partialBytes: number, 
/**
 * A caveat from the manifest (e.g. that no public conversion exists).
 */
note: string | null, };

export type ModelStatus = { role: ModelRole, 
/**
 * Human name, e.g. "Self-RAG Llama-2 7B (Q4_K_M)".
 */
name: string, found: boolean, 
/**
 * Where it was found.
 */
path: string | null, 
/**
 * Every place the engine looked.
 */
searched: Array<string>, 
/**
 * What to do when it is missing.
 */
fix: string, 
/**
 * How to download it from the app; absent when an environment variable names the path.
 */
download?: ModelOffer, };

export type DownloadStage = "checking" | "downloading" | "verifying" | "done";

export type ModelDownloadProgress = { modelId: string, stage: DownloadStage, 
/**
 * The file being worked on, as named in the repository.
 */
file: string, 
/**
 * Bytes of the whole model on disk so far.
 */
bytesDone: number, 
/**
 * Bytes of the whole model; 0 until the hub has answered.
 */
bytesTotal: number, bytesPerSecond: number, 
/**
 * Seconds left at the current rate, when there is one.
 */
etaSeconds: number | null, };

export type LibraryStats = { documents: number, passages: number, 
/**
 * Distinct contents (several paths may hold the same file).
 */
contents: number, pages: number, 
/**
 * Bytes the library's folder takes on disk.
 */
diskBytes: number, 
/**
 * Whether the passages have an approximate-nearest-neighbour index (made past a size
 * threshold) and a full-text index.
 */
vectorIndex: boolean, textIndex: boolean, };

export type PassageSource = { passageId: string, 
/**
 * The content's id: what [`Library::document_pdf`] takes.
 */
documentId: string, 
/**
 * The file checked to hold the indexed content.
 */
path: string, title: string, 
/**
 * 1-based page of the passage (PDF), the page the viewer opens.
 */
page: number | null, 
/**
 * The number printed on that page, where it differs from `page`.
 */
pageLabel: string | null, 
/**
 * The OCR engine's mean word confidence (0–1) where the page was a scan read by OCR.
 */
ocrConfidence: number | null, 
/**
 * Pages of the document: 1 for formats without pages.
 */
pages: number, 
/**
 * The passage text as stored and cited.
 */
text: string, view: SourceView, 
/**
 * Shown from the copy a shared library keeps in its store: no file on this computer holds
 * the content (it was indexed on another).
 */
storedCopy: boolean, };

export type SourceView = { "kind": "pdf" } | { "kind": "text", text: string, 
/**
 * The passage's place in `text`, in characters (Unicode scalar values), `[start, end)`;
 * `None` where the text read now no longer holds the passage there or anywhere (the
 * parser changed since the file was indexed).
 */
span: [number, number] | null, };

export type AppStatus = { dataDir: string, models: Array<ModelStatus>, library: LibraryStats, device: DeviceStatus, };

export type DocumentInfo = { id: string, path: string, title: string, 
/**
 * Pages (PDF) or 1; 0 for a document indexed before pages were counted.
 */
pages: number, 
/**
 * Passages stored: all of them, or so far while a long file is written slice by slice.
 */
passages: number, 
/**
 * While a long file is written slice by slice (or was cut off midway: indexing it again
 * goes on from there), the passages it will have; null once all are stored.
 */
passagesExpected: number | null, 
/**
 * The work the file holds: each field from the best source that gave it.
 */
work: Work, 
/**
 * The sources that gave a record of it, from the least to the most trusted.
 */
workSources: Array<FieldSource>, };

export type LookupFailure = { path: string, identifier: string, 
/**
 * Names the service and what to do.
 */
error: string, };

export type IndexEvent = { "kind": "started", total: number, resumed: Array<string>, } | { "kind": "fileStarted", path: string, } | { "kind": "fileSearchable", path: string, passages: number, of: number, } | { "kind": "fileIndexed", path: string, passages: number, notes: Array<string>, } | { "kind": "fileSkipped", path: string, reason: string, } | { "kind": "fileFailed", path: string, error: string, } | { "kind": "removed", path: string, } | { "kind": "progress", done: number, total: number, passages: number, filesPerSecond: number, etaSeconds: number | null, } | { "kind": "finished", indexed: number, skipped: number, failed: number, removed: number, 
/**
 * Stopped before the end, paused or not.
 */
cancelled: boolean, 
/**
 * Paused: its folders wait for Resume (or Forget), not for the next start.
 */
paused: boolean, } | { "kind": "slowStep", path: string | null, step: string, seconds: number, } | { "kind": "worksLookedUp", found: number, already: number, failed: Array<LookupFailure>, } | { "kind": "watchRetrying", error: string, retryInSeconds: number, };

export type AnswerRecord = { id: string, answer: Answer, 
/**
 * Long form, re-ranked: the first segment (0-based) that a re-run with these weights would
 * write on a path the run did not continue. The answer shown is the best path the run
 * explored; a re-run could differ from that segment on. Absent when a re-run gives it.
 */
unexploredSegment?: number, 
/**
 * Set when the answer could not be saved: why, naming the file and the fix. The answer
 * is kept for this session (re-rank and export work) and is not lost to the error.
 */
notSaved?: string, };

export type ExportFormat = "md" | "html" | "json" | "bib" | "biblatex" | "csl-json" | "ris" | "latex";

export type CitationStyle = "numbers" | "authorYear" | "pandoc";

export type BibEncoding = "utf8" | "ascii";

export type ExportOptions = { format: ExportFormat, 
/**
 * Write each segment's IsSup verdict after it (Markdown, HTML and LaTeX).
 */
supportLabels: boolean, 
/**
 * Keep only the segments judged fully supported (see the module doc); the bibliographies
 * then list only the documents those segments cite.
 */
onlySupported: boolean, 
/**
 * How Markdown and HTML cite (LaTeX always uses `\cite`, the bibliographies none).
 */
citations: CitationStyle, 
/**
 * How BibTeX, BibLaTeX and LaTeX write letters outside ASCII.
 */
bibtexEncoding: BibEncoding, };

export type HistoryEntry = { id: string, question: string, 
/**
 * The answer text without citation markers.
 */
answer: string, 
/**
 * When it was asked, in milliseconds since the Unix epoch (0 when unknown).
 */
createdMs: number, 
/**
 * How many passages the answer cites.
 */
citations: number, };

export type DeviceStatus = { 
/**
 * As chosen.
 */
chosen: DeviceChoice, 
/**
 * What the choice resolved to once a model is loaded; `null` before.
 */
inUse: DeviceKind | null, 
/**
 * The choices this build supports: `auto` and `cpu`, plus `cuda` / `metal` when compiled in.
 */
available: Array<DeviceChoice>, 
/**
 * Set when the choice is fixed by the `SELFRAG_DEVICE` environment variable.
 */
fixedByEnv: boolean, 
/**
 * How the embedder multiplies on the CPU, as chosen.
 */
embedderPrecision: EmbedderPrecision, 
/**
 * Whether this CPU runs the int8 embedder (AVX-512 VNNI or AVX-VNNI); without, int8 runs as f32.
 */
int8Available: boolean, 
/**
 * Set when the precision is fixed by `SELFRAG_EMBEDDER_PRECISION`.
 */
precisionFixedByEnv: boolean, 
/**
 * How the local generator's KV cache holds keys and values, as chosen; `null`: the
 * device's default.
 */
cachePrecision: CachePrecision | null, 
/**
 * Set when the KV cache is fixed by `SELFRAG_KV_CACHE`.
 */
cachePrecisionFixedByEnv: boolean, 
/**
 * Where the generator's tokenizer puts the dummy prefix, as chosen.
 */
dummyPrefix: DummyPrefix, 
/**
 * Set when the dummy prefix is fixed by `SELFRAG_DUMMY_PREFIX`.
 */
dummyPrefixFixedByEnv: boolean, };

export type Theme = "system" | "light" | "dark";

export type DeviceChoice = "auto" | "cpu" | "cuda" | "metal";

export type EmbedderPrecision = "int8" | "f32";

export type DeviceKind = "cpu" | "cuda" | "metal";

export type AppSettings = { 
/**
 * The settings a question is asked with.
 */
ask: Settings, theme: Theme, device: DeviceChoice, 
/**
 * How the embedder multiplies on the CPU.
 */
embedderPrecision: EmbedderPrecision, 
/**
 * How the local generator's KV cache holds keys and values; `None`: the device's default
 * (8-bit on most CPUs). With `embedder_precision` f32 it is the app's "Exact numbers".
 */
cachePrecision?: CachePrecision, 
/**
 * Where the generator's tokenizer puts the dummy prefix: the fine-tuning's (the default),
 * or the reference code's, to reproduce its numbers.
 */
dummyPrefix: DummyPrefix, 
/**
 * The server that generates (llama.cpp's, or OpenAI-compatible at a URL ending in `/v1`);
 * `None`: this computer. Its API key is not here (see `generator_server`).
 */
generatorUrl?: string, 
/**
 * The model to ask that server for, where it serves several; `None`: the one it serves.
 */
generatorModel?: string, 
/**
 * The library's location from the next start on: a folder, or a shared library's
 * `s3://`, `gs://` or `az://` location; `None`: the folder `library` in the data folder.
 * Its credentials are not here: they come from the store's own environment and files.
 */
libraryLocation?: string, 
/**
 * The embeddings server (OpenAI-compatible `/v1/embeddings`) from the next start on;
 * `None`: the embedder on this computer. Its API key is not here (`embedder-api-key`).
 */
embedderUrl?: string, 
/**
 * The model to ask that server for, where it serves several; `None`: the one it serves.
 */
embedderModel?: string, 
/**
 * The export menu's last choices.
 */
export: ExportOptions, 
/**
 * How the answer on screen cites its passages: numbers (`[1]`, the default) or
 * author–year (`Marrow & Ødegård 1998, p. 2`); pandoc citations show as author–year.
 */
citationDisplay: CitationStyle, 
/**
 * Look up the works of indexed documents by their DOI (doi.org: Crossref, DataCite) or
 * arXiv id (export.arxiv.org). Off by default: only the identifier is sent, nothing of a
 * document's text, and nothing at all while this is off.
 */
lookUpWorks: boolean, };

export type GeneratorState = { 
/**
 * The server in use; `None`: this computer.
 */
url: string | null, 
/**
 * The model asked of it; `None`: the one it serves.
 */
model: string | null, 
/**
 * Set when `SELFRAG_GENERATOR_URL` fixes the choice for this run.
 */
fixedByEnv: boolean, 
/**
 * Whether an API key is saved (the key itself never leaves the Rust side).
 */
hasApiKey: boolean, };

export type ServerCheck = { url: string, 
/**
 * The model file, alias or name the server serves.
 */
model: string, 
/**
 * The server and its version, and the API where it is not the server's own, e.g.
 * `llama.cpp b6800-abc1234` or `vLLM 0.11.0, OpenAI-compatible API`.
 */
runtime: string, 
/**
 * Tokens of context per request.
 */
contextLength: number, 
/**
 * Requests the server decodes at once, where it says (llama-server).
 */
slots: number | null, 
/**
 * The first request's round trip, in milliseconds.
 */
roundTripMs: number, };

export type LibraryLocationState = { 
/**
 * The library open now: a folder's path, or a shared library's `s3://`, `gs://` or `az://`
 * location.
 */
location: string, 
/**
 * Whether several computers may share it.
 */
shared: boolean, 
/**
 * The folder the library is in when no location is chosen.
 */
defaultFolder: string, 
/**
 * Set when `SELFRAG_LIBRARY` fixes the location for this run.
 */
fixedByEnv: boolean, 
/**
 * The location chosen for the next start, where it is not the one open now.
 */
nextStart: string | null, };

export type EmbedderServerState = { 
/**
 * The server embedding now; `None`: this computer.
 */
url: string | null, 
/**
 * The model asked of it; `None`: the one it serves.
 */
model: string | null, 
/**
 * Set when `SELFRAG_EMBEDDER_URL` fixes the choice for this run.
 */
fixedByEnv: boolean, 
/**
 * The choice saved for the next start, where it is not the one in use: a server's address,
 * or `""` for this computer.
 */
nextStart: string | null, 
/**
 * The model saved with that choice.
 */
nextModel: string | null, 
/**
 * Whether an API key is saved for the server of the saved choice (the key itself never
 * leaves the Rust side).
 */
hasApiKey: boolean, };

export type EmbedderServerCheck = { 
/**
 * The API's address requests go to (ending in `/v1`).
 */
url: string, 
/**
 * The model the server names in its replies.
 */
model: string, 
/**
 * The length of its vectors.
 */
dimensions: number, 
/**
 * The test's round trip (finding the model and embedding one sentence), in milliseconds.
 */
roundTripMs: number, };

export type StoreCheck = { 
/**
 * The endpoint the requests went to, in words.
 */
endpoint: string, 
/**
 * Whether a library is there already (its `library.json`).
 */
libraryExists: boolean, };

export type LoadedSettings = { settings: AppSettings, 
/**
 * The settings file.
 */
path: string, 
/**
 * Set when the file could not be used: what happened and where the old file is now.
 */
notice: string | null, };

export type JobKind = { "kind": "answer" } | { "kind": "indexing" } | { "kind": "download", model: string, };

export type JobSource = "resume" | "watch" | "zotero";

export type LibraryEvent = { "kind": "index", source: JobSource, event: IndexEvent, } | { "kind": "failed", source: JobSource, message: string, } | { "kind": "changedElsewhere", added: number, removed: number, };

export type WatchResult = { 
/**
 * The folders now watched (every one, not only the new ones).
 */
watched: Array<string>, 
/**
 * Paths that are not folders (files, or gone): the UI indexes them once instead.
 */
notFolders: Array<string>, };

export type ReferenceImport = { 
/**
 * The files the reference manager or bibliography names that the app reads.
 */
files: number, 
/**
 * The documents of those files the library holds now, each with its record.
 */
withRecord: number, 
/**
 * What was not added, and why (a missing file, a format the app does not read), one line
 * each.
 */
skipped: Array<string>, 
/**
 * The indexing job's last event.
 */
indexing: IndexEvent | null, };

export type ErrorCode = "model_missing" | "model_load" | "device" | "index" | "cancelled" | "empty_question" | "selfrag" | "generator_server" | "embedder_server" | "unknown_answer" | "write" | "read_trace" | "model_thread" | "download_cancelled" | "offline" | "unknown_model" | "download_busy" | "download" | "not_in_library" | "nothing_paused" | "references";

export type ShellErrorCode = "path_not_granted" | "unknown_source" | "source_missing" | "open_failed" | "not_confirmed";

export type IpcErrorCode = ErrorCode | ShellErrorCode;

export type IpcError = { code: IpcErrorCode, message: string, };

/** `AppSettings::default()`: what a first start remembers; `ask` is `Settings::default()` of selfrag-core, the paper's defaults. */
export const DEFAULT_APP_SETTINGS: AppSettings = {
  "ask": {
    "mode": "adaptive",
    "threshold": 0.2,
    "k": 5,
    "weights": {
      "rel": 1.0,
      "sup": 1.0,
      "use": 0.5
    },
    "use_p_lm": true,
    "p_lm_tokens": "all",
    "hard_constraints": false,
    "long_form": false,
    "beam_width": 2,
    "max_segments": 7,
    "long_form_ranking": "normalised",
    "prompt_budget": 2048,
    "max_new_tokens": 100,
    "max_segment_tokens": 200
  },
  "theme": "system",
  "device": "auto",
  "embedderPrecision": "int8",
  "dummyPrefix": "text-start",
  "export": {
    "format": "md",
    "supportLabels": false,
    "onlySupported": false,
    "citations": "numbers",
    "bibtexEncoding": "utf8"
  },
  "citationDisplay": "numbers",
  "lookUpWorks": false
};

/** `FieldSource::label()` of each source: how the UI says where a field of a work came from. */
export const FIELD_SOURCE_LABELS: Record<FieldSource, string> = {
  "bibliographyFile": "bibliography file",
  "fileMetadata": "the file's metadata",
  "firstPageGuess": "guessed from the first page",
  "identifier": "identifier in the text",
  "lookup": "looked up by its DOI/arXiv id",
  "person": "your edit",
  "referenceManager": "Zotero"
};

/** `WorkType::ALL` with each type's `label()`, in the order a type select lists them. */
export const WORK_TYPES: { kind: WorkType; label: string }[] = [
  {
    "kind": "journalArticle",
    "label": "Journal article"
  },
  {
    "kind": "conferencePaper",
    "label": "Conference paper"
  },
  {
    "kind": "book",
    "label": "Book"
  },
  {
    "kind": "chapter",
    "label": "Book chapter"
  },
  {
    "kind": "thesis",
    "label": "Thesis"
  },
  {
    "kind": "report",
    "label": "Report"
  },
  {
    "kind": "webPage",
    "label": "Web page"
  },
  {
    "kind": "other",
    "label": "Other"
  }
];

/** The commands the UI may invoke (build.rs's one list). */
export const COMMANDS = [
  "app_status",
  "index_paths",
  "list_documents",
  "ask",
  "cancel_job",
  "rerank",
  "export_answer",
  "download_model",
  "refresh_models",
  "list_history",
  "open_answer",
  "delete_answer",
  "render_answer",
  "load_settings",
  "save_settings",
  "generator_state",
  "test_generator_server",
  "use_generator_server",
  "library_location_state",
  "test_library_location",
  "use_library_location",
  "restart_app",
  "embedder_server_state",
  "test_embedder_server",
  "use_embedder_server",
  "open_source",
  "passage_source",
  "source_pdf",
  "remove_document",
  "reindex_document",
  "pause_indexing",
  "resume_indexing",
  "paused_indexing",
  "forget_paused_indexing",
  "library_stats",
  "watched_folders",
  "watch_folders",
  "unwatch_folder",
  "add_sample_documents",
  "set_work",
  "add_zotero_library",
  "add_bibliography",
  "zotero_link",
  "open_in_zotero",
  "pick_files",
  "pick_folder",
  "pick_zotero_folder",
  "pick_bibliography"
] as const;

/** The name of a command. */
export type Command = (typeof COMMANDS)[number];
