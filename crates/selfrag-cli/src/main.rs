//! The `selfrag` command-line tool: the same engine as the desktop app, for scripts, tests and
//! power users. Its command names and JSON outputs are a public contract.

mod concurrency;
mod embed_agreement;
mod eval;
mod library;
mod prompt;
mod pull;
mod rerank_latency;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use selfrag_core::{
    Answer, ClosedSetQuestion, ClosedSetScores, CritiqueWeights, DeviceChoice, DummyPrefix,
    EmbedderPrecision, GenerateRequest, LongFormRanking, PLmTokens, RetrieveMode, Settings,
};
use selfrag_engine::{Engine, EngineConfig, ExportFormat, SearchFilter};
use selfrag_models::{BertEmbedder, GgufTokenizer, LlamaGenerator, pick_device};
use serde::Serialize;

#[derive(Parser)]
#[command(
    name = "selfrag",
    version,
    about = "Self-RAG over your own documents, on your own machine"
)]
struct Cli {
    /// The library: a folder, or a library shared on object storage (s3://bucket/prefix,
    /// gs://bucket/prefix, az://container/prefix) with the store's credentials and endpoint
    /// from its usual environment (AWS_*, ~/.aws, GOOGLE_APPLICATION_CREDENTIALS,
    /// AZURE_STORAGE_*). Default: SELFRAG_LIBRARY, else the folder `library` in the data
    /// folder.
    #[arg(long, global = true, value_name = "LOCATION")]
    library: Option<String>,
    /// Embed through this OpenAI-compatible embeddings server (llama-server --embedding,
    /// text-embeddings-inference, vLLM, Ollama) instead of the local embedder: queries,
    /// passages and the library's fingerprint. Its API key comes from SELFRAG_EMBEDDER_API_KEY.
    /// Default: SELFRAG_EMBEDDER_URL.
    #[arg(long, global = true, value_name = "URL")]
    embedder_url: Option<String>,
    /// The model to ask the embeddings server for (default: SELFRAG_EMBEDDER_MODEL, else the
    /// one it serves).
    #[arg(long, global = true, value_name = "NAME")]
    embedder_model: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// `--library`, where given: read by [`engine_config`].
pub(crate) static LIBRARY_OPTION: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `--embedder-url` and `--embedder-model`, where given: read by [`engine_config`].
static EMBEDDER_OPTIONS: std::sync::OnceLock<(Option<String>, Option<String>)> =
    std::sync::OnceLock::new();

/// The engine's configuration: the environment's, with `--library` over `SELFRAG_LIBRARY` and
/// `--embedder-url`/`--embedder-model` over `SELFRAG_EMBEDDER_URL`/`SELFRAG_EMBEDDER_MODEL`.
pub(crate) fn engine_config() -> Result<EngineConfig> {
    let mut config = EngineConfig::from_env()?;
    if let Some(location) = LIBRARY_OPTION.get() {
        let location = selfrag_engine::LibraryLocation::parse(location)
            .map_err(|e| selfrag_engine::set_by(e, "--library"))?;
        config.library = Some(location);
    }
    if let Some((url, model)) = EMBEDDER_OPTIONS.get() {
        let env = |name| std::env::var(name).ok();
        let url = url
            .clone()
            .or_else(|| config.embedder_server.as_ref().map(|s| s.url.clone()));
        if url.is_none() {
            anyhow::bail!(
                "--embedder-model names a model of an embeddings server, and no server is given: add --embedder-url URL (or set SELFRAG_EMBEDDER_URL)"
            );
        }
        if let Some(url) = url {
            config.embedder_server = Some(selfrag_engine::embedder_server_config(
                &url,
                model
                    .clone()
                    .or_else(|| env(selfrag_engine::EMBEDDER_MODEL_ENV)),
                env(selfrag_engine::EMBEDDER_API_KEY_ENV),
            ));
        }
    }
    Ok(config)
}

#[derive(Subcommand)]
enum Command {
    /// Index files and folders into the library; with no PATH, finish an interrupted job.
    Index {
        paths: Vec<PathBuf>,
        /// Then keep the folders in sync with the library (until Ctrl-C); they stay watched.
        #[arg(long)]
        watch: bool,
        /// Also the sample documents that ship with the app (written into the data folder):
        /// how an answer is made, a tour of the badges, how to check a citation.
        #[arg(long)]
        samples: bool,
        /// Take up the job paused in the app (its Pause button) where it stopped, instead of
        /// new paths.
        #[arg(long, conflicts_with_all = ["paths", "samples", "watch"])]
        resume: bool,
        /// Embed in f32 (slower), for vectors equal to PyTorch's; as `ask --exact`.
        #[arg(long, conflicts_with = "resume")]
        exact: bool,
        /// Also the files of a Zotero library, each with its item's record (authors, year,
        /// DOI, Better BibTeX key), read-only while Zotero runs. DIR is Zotero's data directory
        /// (Settings ▸ Advanced ▸ Files and Folders); without it, ~/Zotero.
        #[arg(long, value_name = "DIR", num_args = 0..=1, default_missing_value = "", conflicts_with = "resume")]
        zotero: Option<PathBuf>,
        /// Also the files a BibTeX, BibLaTeX or CSL-JSON file names (`file = {…}`), each with
        /// its entry's record and citation key.
        #[arg(long, value_name = "FILE", conflicts_with = "resume")]
        bibliography: Option<PathBuf>,
        /// Then look the works of the documents indexed up online by their DOI (doi.org:
        /// Crossref, DataCite) or arXiv id (export.arxiv.org), sending only the identifier.
        /// Without it, indexing sends nothing anywhere.
        #[arg(long = "look-up", conflicts_with = "resume")]
        look_up: bool,
    },
    /// The documents in the library.
    Library {
        #[command(subcommand)]
        command: library::LibraryCommand,
    },
    /// Search the library's passages (no model call but the query's embedding).
    Search {
        query: String,
        /// vector, fts (BM25) or hybrid (both, fused by reciprocal rank).
        #[arg(long, default_value = "hybrid")]
        mode: selfrag_engine::SearchMode,
        #[arg(short = 'k', long, default_value_t = 5)]
        k: usize,
        /// Only documents under this folder.
        #[arg(long)]
        folder: Option<PathBuf>,
        /// Only documents of Zotero items in this collection or one inside it (`Thesis`,
        /// `Thesis/Chapter 2`).
        #[arg(long)]
        collection: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Ask a question; prints the answer, or the full trace with --json.
    Ask {
        question: String,
        /// An answer option; repeat it for each (2 to 26, labelled A, B, C…): the question is
        /// asked as a multiple-choice one, each option scored from the candidates (the paper's
        /// closed-set tasks), and the options are printed with their scores.
        #[arg(long = "option", value_name = "TEXT", conflicts_with = "long_form")]
        options: Vec<String>,
        #[arg(long)]
        json: bool,
        #[arg(long, default_value = "adaptive")]
        mode: RetrieveMode,
        /// Retrieve threshold δ (adaptive mode).
        #[arg(long)]
        threshold: Option<f32>,
        /// Passages retrieved, candidates written.
        #[arg(long)]
        k: Option<usize>,
        #[command(flatten)]
        weights: WeightArgs,
        /// Drop unsupported or irrelevant candidates unless none would be left.
        #[arg(long)]
        hard_constraints: bool,
        /// Long form: segment by segment, a beam search over the segments' candidates.
        #[arg(long)]
        long_form: bool,
        /// Long form: paths kept by the beam search (B).
        #[arg(long, value_name = "B")]
        beam: Option<usize>,
        /// Long form: segments at most.
        #[arg(long)]
        max_segments: Option<usize>,
        /// New tokens per candidate at most: the whole answer in short form, each segment in
        /// long form.
        #[arg(long)]
        max_tokens: Option<usize>,
        #[command(flatten)]
        scoring: ScoringArgs,
        /// Generate on this server instead of this computer: llama.cpp's llama-server
        /// (http://host:8080), or an OpenAI-compatible one such as vLLM (http://host:8000/v1).
        /// The GGUF file it serves must be here too, for its tokenizer (SELFRAG_GENERATOR or the
        /// HF cache). The API key, if any, comes from SELFRAG_GENERATOR_API_KEY. Default:
        /// SELFRAG_GENERATOR_URL.
        #[arg(long, value_name = "URL")]
        generator_url: Option<String>,
        /// The model to ask the server for, where it serves several (vLLM's
        /// --served-model-name). Default: SELFRAG_GENERATOR_MODEL, else the one it serves.
        #[arg(long, value_name = "NAME", requires = "generator_url")]
        generator_model: Option<String>,
        #[command(flatten)]
        numerics: NumericsArgs,
    },
    /// Run a benchmark of the paper's Table 2 (PopQA, TriviaQA, PubHealth, ARC-Challenge,
    /// ASQA) from the reference's evaluation file, over each item's own passages; prints each
    /// item and a table beside the paper's figures (docs/EVALUATION.md).
    Eval(eval::EvalArgs),
    /// Re-rank a saved trace with new weights, without running the model. Says on stderr when
    /// a re-run could write the answer differently.
    Rerank {
        trace: PathBuf,
        #[command(flatten)]
        weights: WeightArgs,
        /// Drop unsupported or irrelevant candidates (`--hard-constraints=false` to keep them);
        /// default: as the trace was asked.
        #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
        hard_constraints: Option<bool>,
        #[arg(long)]
        json: bool,
    },
    /// Render a saved trace (from `ask --json`) as Markdown, HTML, JSON, or its cited works as
    /// BibTeX, BibLaTeX, CSL-JSON or RIS, or the answer as LaTeX citing them.
    Export {
        trace: PathBuf,
        /// md, html, json, bib, biblatex, csl-json, ris or latex.
        #[arg(long, default_value = "md")]
        format: ExportFormat,
        /// Mark each segment with its IsSup verdict (Markdown, HTML and LaTeX).
        #[arg(long)]
        support_labels: bool,
        /// Keep only fully supported segments, each gap marked […] (every format but json).
        #[arg(long)]
        only_supported: bool,
        /// How Markdown and HTML cite: numbers (footnotes), author-year ("Marrow & Ødegård
        /// 1998, p. 2" and a reference list) or pandoc (`[@key, p. 2]`, for
        /// `pandoc --citeproc --bibliography refs.json`; author–year in HTML).
        #[arg(long, default_value = "numbers", value_name = "STYLE")]
        citations: selfrag_engine::export::CitationStyle,
        /// BibTeX, BibLaTeX and LaTeX in ASCII: letters outside it as LaTeX escapes
        /// (`{\o}`, `{\"o}`), for classic BibTeX; UTF-8 (for biber) without it.
        #[arg(long)]
        ascii: bool,
        /// Output file; standard output when absent.
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// The models the app knows, and where they are on this machine.
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
    /// Look inside a model file: tokens, next-token log-probabilities, timed decoding (JSON).
    Debug {
        #[command(subcommand)]
        command: DebugCommand,
    },
}

#[derive(Subcommand)]
enum ModelsCommand {
    /// Every shipped model manifest, whether it is in the Hugging Face cache, and where.
    List {
        #[arg(long)]
        json: bool,
    },
    /// The path of model ID in the Hugging Face cache (a GGUF file or a model folder).
    Path { id: String },
    /// Download model ID into the Hugging Face cache (resumes; honours HF_ENDPOINT, HF_TOKEN),
    /// then print its path. Progress on stderr.
    Pull {
        id: String,
        /// Use only what is already in the cache (also HF_HUB_OFFLINE=1).
        #[arg(long)]
        offline: bool,
    },
    /// Check the size and SHA-256 of the cached files of model ID (default: every model).
    Verify {
        id: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Serialize)]
struct ModelListing {
    id: String,
    role: String,
    description: String,
    repo: String,
    license: String,
    license_terms: String,
    license_sources: Vec<String>,
    size_bytes: u64,
    /// Whether `selfrag models pull` can download it; `false` for a checkpoint to convert.
    downloadable: bool,
    note: Option<String>,
    found: Option<PathBuf>,
    searched: Vec<PathBuf>,
}

#[derive(Subcommand)]
enum DebugCommand {
    /// Token ids and pieces of TEXT, BOS first when the GGUF asks for it.
    Tokenize {
        /// The GGUF file whose tokenizer to use.
        #[arg(long)]
        model: PathBuf,
        /// Recognise special and reflection tokens written in TEXT (diagnostics only).
        #[arg(long)]
        parse_special: bool,
        /// Where `▁` goes after a special token recognised in TEXT, as `ask --dummy-prefix`.
        #[arg(long, value_name = "WHERE", default_value = "text-start")]
        dummy_prefix: DummyPrefix,
        text: String,
    },
    /// The exact prompts a question builds (the retrieve decision's, the one without a
    /// passage, one per passage): ids and pieces, as the model reads them.
    Prompt {
        question: String,
        /// The GGUF file whose tokenizer and context length to use (no weights are read).
        #[arg(long)]
        model: PathBuf,
        /// A file whose text is a passage (its name the title); repeat for more.
        #[arg(long)]
        passage: Vec<PathBuf>,
        /// New tokens reserved for the answer, as `ask --max-tokens`.
        #[arg(long)]
        max_tokens: Option<usize>,
        /// Tokens a prompt and its continuation may take, as `ask --prompt-budget` (default
        /// 2048; at most the model's context counts).
        #[arg(long, value_name = "TOKENS")]
        prompt_budget: Option<usize>,
        /// Where the tokenizer puts `▁`, as `ask --dummy-prefix`.
        #[arg(long, value_name = "WHERE", default_value = "text-start")]
        dummy_prefix: DummyPrefix,
        #[arg(long)]
        json: bool,
    },
    /// The most likely tokens after the last of IDS, with log-probabilities.
    Logits {
        /// The GGUF model file.
        #[arg(long)]
        model: PathBuf,
        /// Prompt token ids, comma-separated (include BOS yourself).
        #[arg(long, value_delimiter = ',', required = true)]
        ids: Vec<u32>,
        /// How many of the most likely tokens to list.
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// auto, cpu, cuda or metal.
        #[arg(long, default_value = "cpu")]
        device: DeviceChoice,
    },
    /// Mean-pooled, unnormalised embeddings of each TEXT (Contriever's recipe).
    Embed {
        /// The BERT model folder (config.json, weights, tokenizer.json or vocab.txt).
        #[arg(long)]
        model: PathBuf,
        #[arg(required = true)]
        texts: Vec<String>,
        /// auto, cpu, cuda or metal.
        #[arg(long, default_value = "cpu")]
        device: DeviceChoice,
        /// int8 or f32: how the CPU multiplies (int8 only where the CPU has AVX-512 VNNI or AVX-VNNI).
        #[arg(long, default_value = "int8")]
        precision: EmbedderPrecision,
    },
    /// How far the int8 embedder's vectors and top 10 are from f32's on the text of FILES (for
    /// `cargo xtask bench embedder`): 100-word passages, the start of every 8th as a query.
    EmbedAgreement {
        /// The BERT model folder.
        #[arg(long)]
        model: PathBuf,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// The library's search at its default depth and at the other ANN settings of the search
    /// benchmark's sweep, on the library's own passages (the start of passages taken at an even
    /// stride, as queries): recall@10 against exact search, and the times, as JSON.
    SearchDepths {
        #[arg(long, default_value_t = 100, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
        queries: usize,
    },
    /// What the embedder read for COUNT of the library's passages, taken at an even stride
    /// through it (title, then text), as a JSON list: the same passages an indexing job
    /// embedded, for timing `selfrag debug embed` against it (`cargo xtask bench index`).
    Passages {
        #[arg(long, default_value_t = 256)]
        count: usize,
    },
    /// Time how long a document one computer indexes into the shared library `--library`
    /// takes to turn up in another's searches (for `cargo xtask bench shared`).
    SharedVisibility {
        /// A new folder for the two computers' state and the notes.
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value_t = 10)]
        rounds: usize,
    },
    /// Time the search of a synthetic library of N passages (for `cargo xtask bench search`);
    /// with `--library`, of one built there (a shared library's new prefix), `--dir` holding
    /// this computer's state of it.
    BenchSearch {
        /// Where to build the library (a new folder).
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        passages: usize,
        #[arg(long, default_value_t = 768)]
        dim: usize,
        #[arg(long, default_value_t = 100, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
        queries: usize,
        /// Also measure the same queries at the other settings of the ANN index (HNSW `ef`,
        /// refine factors) of `selfrag_index::bench::sweep_depths`.
        #[arg(long)]
        sweep: bool,
    },
    /// Time the re-rank of a saved answer as a weight slider moves (for `cargo xtask bench
    /// rerank`): the replay alone and the engine's whole re-rank, saving included.
    RerankLatency {
        /// A trace written by `selfrag ask --json`.
        trace: PathBuf,
        /// Where to put the history it is imported into (a new folder).
        #[arg(long)]
        dir: PathBuf,
        /// Slider positions, IsSup weight 0 to 2.
        #[arg(long, default_value_t = 41)]
        moves: usize,
    },
    /// Index a corpus alone and then while answering a question in the same engine, timed
    /// (for `cargo xtask bench server`; models and server as for `selfrag ask`).
    IndexWhileAnswering {
        /// Where to write the corpus and the library (a new folder).
        #[arg(long)]
        dir: PathBuf,
        /// Notes indexed alone (the job beside the question has 20 times as many).
        #[arg(long, default_value_t = 40)]
        files: usize,
        #[arg(long)]
        question: String,
        /// Candidates per answer (always retrieving).
        #[arg(long, default_value_t = 5)]
        k: usize,
        /// New tokens per candidate at most.
        #[arg(long, default_value_t = 64)]
        max_tokens: usize,
    },
    /// Extract the text of FILES in this process, timed (for `cargo xtask bench index`).
    Extract {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Write the one file's pages and passages (with the page each claims) as JSON here
        /// (for `scripts/bench/pdf_corpus.py`).
        #[arg(long)]
        pages_to: Option<PathBuf>,
    },
    /// How fast this machine reads memory, as a decode step reads a model's weights: the best
    /// of ROUNDS reads of a buffer of MB megabytes by THREADS threads (for `cargo xtask bench
    /// generator`), as JSON.
    ReadRate {
        /// The buffer's size in megabytes (10⁶ bytes): the model file's, to read as much.
        #[arg(long)]
        mb: usize,
        #[arg(long, default_value_t = 2)]
        threads: usize,
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// Greedy continuation of IDS with timings; with --batch K, K copies decoded as one batch.
    Generate {
        /// The GGUF model file.
        #[arg(long)]
        model: PathBuf,
        /// Prompt token ids, comma-separated (include BOS yourself).
        #[arg(long, value_delimiter = ',', required = true)]
        ids: Vec<u32>,
        /// New tokens per row at most.
        #[arg(long)]
        max_tokens: usize,
        /// Rows: the same prompt K times, decoded together (`decode_tokens` counts all rows).
        #[arg(long, default_value_t = 1)]
        batch: usize,
        /// Keep decoding after EOS (for benchmarks).
        #[arg(long)]
        ignore_eos: bool,
        /// Compute threads (RAYON_NUM_THREADS for candle).
        #[arg(long)]
        threads: Option<usize>,
        /// auto, cpu, cuda or metal.
        #[arg(long, default_value = "cpu")]
        device: DeviceChoice,
    },
}

#[derive(Serialize)]
struct TokenizeOutput {
    ids: Vec<u32>,
    tokens: Vec<String>,
}

#[derive(Serialize)]
struct TopLogprob {
    id: u32,
    logprob: f32,
}

#[derive(Serialize)]
struct LogitsOutput {
    top: Vec<TopLogprob>,
}

#[derive(Serialize)]
struct EmbedOutput {
    embeddings: Vec<Vec<f32>>,
    /// The precision that ran (f32 where int8 was asked for but the CPU cannot run it).
    precision: EmbedderPrecision,
    /// Time spent tokenizing and embedding, model loading excluded (for benchmarks).
    seconds: f64,
}

#[derive(Serialize)]
struct GenerateOutput {
    /// Which CPU kernels multiplied the Q4_K and Q6_K matrices, and why.
    kernels: String,
    /// How far ahead the packed tiles' decode kernel read, and why.
    prefetch: String,
    prompt_tokens: usize,
    prompt_seconds: f64,
    decode_tokens: usize,
    decode_seconds: f64,
    ids: Vec<Vec<u32>>,
}

/// How the generator's and the embedder's numbers are made (`ask`).
#[derive(clap::Args)]
struct NumericsArgs {
    /// Exact numbers: the KV cache and the embedder in f32 (slower, more memory; a generator
    /// server keeps its own cache). Default: SELFRAG_KV_CACHE and SELFRAG_EMBEDDER_PRECISION,
    /// else an 8-bit cache on most CPUs and an int8 embedder.
    #[arg(long)]
    exact: bool,
    /// Where the tokenizer puts SentencePiece's `▁`: text-start (as in fine-tuning) or
    /// every-fragment (after every special token too, as the reference code's inference: to
    /// reproduce its numbers). Default: SELFRAG_DUMMY_PREFIX, else text-start.
    #[arg(long, value_name = "WHERE")]
    dummy_prefix: Option<DummyPrefix>,
}

impl NumericsArgs {
    /// `config` with these choices over the environment's.
    fn apply(&self, mut config: EngineConfig) -> EngineConfig {
        if let Some(dummy_prefix) = self.dummy_prefix {
            config.generator_numerics.dummy_prefix = dummy_prefix;
        }
        if self.exact {
            config = config.with_exact_numbers();
        }
        config
    }
}

#[derive(clap::Args)]
struct WeightArgs {
    #[arg(long)]
    w_rel: Option<f32>,
    #[arg(long)]
    w_sup: Option<f32>,
    #[arg(long)]
    w_use: Option<f32>,
}

impl WeightArgs {
    fn apply(&self, mut w: CritiqueWeights) -> CritiqueWeights {
        w.rel = self.w_rel.unwrap_or(w.rel);
        w.sup = self.w_sup.unwrap_or(w.sup);
        w.use_ = self.w_use.unwrap_or(w.use_);
        w
    }
}

/// The scoring rules of docs/SELF-RAG-FIDELITY.md, as flags of the commands that answer.
#[derive(clap::Args)]
struct ScoringArgs {
    /// Which generated tokens p_LM is taken over: all (reflection tokens and </s> included,
    /// as the reference) or text (text tokens only). Default: all.
    #[arg(long, value_name = "TOKENS")]
    p_lm_tokens: Option<PLmTokens>,
    /// Long form: how paths whose segments are of different kinds are compared: normalised
    /// (each segment's f over the most its kind can score) or raw (the mean of f). Default:
    /// normalised.
    #[arg(long, value_name = "RULE")]
    long_form_ranking: Option<LongFormRanking>,
    /// Tokens a prompt and its continuation may take together; the oldest passages of a
    /// long-form path are left out first. Default: 2048, the fine-tuning length; at most the
    /// model's context counts.
    #[arg(long, value_name = "TOKENS")]
    prompt_budget: Option<usize>,
}

impl ScoringArgs {
    /// `settings` with the rules given here over its own.
    fn apply(&self, settings: Settings) -> Settings {
        Settings {
            p_lm_tokens: self.p_lm_tokens.unwrap_or(settings.p_lm_tokens),
            long_form_ranking: self.long_form_ranking.unwrap_or(settings.long_form_ranking),
            prompt_budget: self.prompt_budget.unwrap_or(settings.prompt_budget),
            ..settings
        }
    }
}

/// The engine the answering commands (`ask`, `eval`) start: the environment's configuration
/// with `numerics`, generating on `server` (its URL and the model to ask it for) where given.
fn answering_engine(
    server: Option<(String, Option<String>)>,
    numerics: &NumericsArgs,
) -> Result<Engine> {
    let mut config = numerics.apply(engine_config()?);
    if let Some((url, model)) = server {
        // The environment's model and key, also where SELFRAG_GENERATOR_URL is unset.
        let env = |name| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        config.generator_server = Some(selfrag_engine::generator_server::server_config(
            &url,
            model.or_else(|| env("SELFRAG_GENERATOR_MODEL")),
            env("SELFRAG_GENERATOR_API_KEY"),
        ));
    }
    Ok(Engine::new(config)?)
}

/// Counts a parsing worker's heap so that its memory limit holds on every OS; off otherwise.
#[global_allocator]
static HEAP: selfrag_engine::ExtractWorkerHeap = selfrag_engine::ExtractWorkerHeap;

fn main() -> std::process::ExitCode {
    // Document parsing runs in a child copy of this binary (see selfrag_index::worker).
    if let Some(code) = selfrag_engine::main_if_extract_worker() {
        return code;
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            // Lance warns once per process, at the library's first reading of the vector
            // index's statistics, that a future version will leave the centroids out of them:
            // not the user's concern (the library reads only segment sizes from them).
            tracing_subscriber::EnvFilter::try_from_env("SELFRAG_LOG")
                .unwrap_or_else(|_| "warn,lance::index::vector::ivf=error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if let Command::Debug {
        command:
            DebugCommand::Generate {
                threads: Some(threads),
                ..
            },
    } = &cli.command
        && std::env::var("RAYON_NUM_THREADS").ok() != Some(threads.to_string())
    {
        return run_with_threads(*threads);
    }
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs this same command line again with `RAYON_NUM_THREADS` set: candle and rayon read it
/// once, when their thread pools start, so it cannot be changed from inside the process.
fn run_with_threads(threads: usize) -> std::process::ExitCode {
    let status = std::env::current_exe()
        .context("finding the selfrag executable")
        .and_then(|exe| {
            std::process::Command::new(exe)
                .args(std::env::args_os().skip(1))
                .env("RAYON_NUM_THREADS", threads.to_string())
                .status()
                .context("re-running selfrag with RAYON_NUM_THREADS set")
        });
    match status {
        Ok(status) => status
            .code()
            .and_then(|code| u8::try_from(code).ok())
            .map_or(
                std::process::ExitCode::FAILURE,
                std::process::ExitCode::from,
            ),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    if let Some(location) = cli.library {
        let _ = LIBRARY_OPTION.set(location);
    }
    if cli.embedder_url.is_some() || cli.embedder_model.is_some() {
        let _ = EMBEDDER_OPTIONS.set((cli.embedder_url, cli.embedder_model));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        match cli.command {
            Command::Index {
                paths,
                watch,
                samples,
                resume: false,
                exact,
                zotero,
                bibliography,
                look_up,
            } => {
                let references = library::References {
                    zotero,
                    bibliography,
                };
                library::index(paths, watch, samples, exact, references, look_up).await
            }
            Command::Index { resume: true, .. } => library::resume().await,
            Command::Library { command } => library::library(command).await,
            Command::Search {
                query,
                mode,
                k,
                folder,
                collection,
                json,
            } => {
                let filter = SearchFilter {
                    folder,
                    collection,
                    ..SearchFilter::default()
                };
                library::search(query, mode, k, filter, json).await
            }
            Command::Ask {
                question,
                options,
                json,
                mode,
                threshold,
                k,
                weights,
                hard_constraints,
                long_form,
                beam,
                max_segments,
                max_tokens,
                scoring,
                generator_url,
                generator_model,
                numerics,
            } => {
                let defaults = Settings::default();
                let settings = Settings {
                    mode,
                    threshold: threshold.unwrap_or(defaults.threshold),
                    k: k.unwrap_or(defaults.k),
                    weights: weights.apply(defaults.weights),
                    hard_constraints,
                    long_form,
                    beam_width: beam.unwrap_or(defaults.beam_width),
                    max_segments: max_segments.unwrap_or(defaults.max_segments),
                    max_new_tokens: max_tokens.unwrap_or(defaults.max_new_tokens),
                    max_segment_tokens: max_tokens.unwrap_or(defaults.max_segment_tokens),
                    ..scoring.apply(defaults)
                };
                let server = generator_url.map(|url| (url, generator_model));
                ask(question, options, settings, server, &numerics, json).await
            }
            Command::Eval(args) => eval::run(args).await,
            Command::Rerank {
                trace,
                weights,
                hard_constraints,
                json,
            } => {
                let answer = read_trace(&trace)?;
                let reranked = selfrag_core::rerank(
                    &answer,
                    weights.apply(answer.settings.weights),
                    hard_constraints.unwrap_or(answer.settings.hard_constraints),
                );
                if let Some(segment) = reranked.unexplored_segment {
                    let _ = writeln!(
                        std::io::stderr(),
                        "note: rerun could differ from segment {n} on: with these weights the \
                         beam search would write segment {n} on a path this answer did not \
                         continue, so the answer shown is the best path it explored; ask again \
                         to regenerate it with these weights",
                        n = segment + 1
                    );
                }
                print_answer(&reranked.answer, json)
            }
            // Synchronous model calls, no engine.
            Command::Models { command } => models(command),
            Command::Debug {
                command:
                    DebugCommand::BenchSearch {
                        dir,
                        passages,
                        dim,
                        queries,
                        sweep,
                    },
            } => library::bench_search(dir, passages, dim, queries, sweep).await,
            Command::Debug {
                command: DebugCommand::SharedVisibility { dir, rounds },
            } => library::shared_visibility(dir, rounds).await,
            Command::Debug {
                command: DebugCommand::SearchDepths { queries },
            } => library::search_depths(queries).await,
            Command::Debug {
                command: DebugCommand::Passages { count },
            } => library::sample_passages(count).await,
            Command::Debug {
                command: DebugCommand::Extract { files, pages_to },
            } => library::extract(files, pages_to).await,
            Command::Debug {
                command:
                    DebugCommand::IndexWhileAnswering {
                        dir,
                        files,
                        question,
                        k,
                        max_tokens,
                    },
            } => concurrency::index_while_answering(dir, files, question, k, max_tokens).await,
            Command::Debug {
                command: DebugCommand::RerankLatency { trace, dir, moves },
            } => write_stdout(&format!(
                "{}\n",
                rerank_latency::run(&trace, &dir, moves).await?
            )),
            Command::Debug { command } => debug(command),
            Command::Export {
                trace,
                format,
                support_labels,
                only_supported,
                citations,
                ascii,
                output,
            } => {
                let mut answer = read_trace(&trace)?;
                // Cited with the works as the library knows them now, where there is one.
                Engine::new(engine_config()?)?
                    .cite_current_works(&mut answer)
                    .await;
                let text = selfrag_engine::render_with(
                    &answer,
                    &selfrag_engine::ExportOptions {
                        format,
                        support_labels,
                        only_supported,
                        citations,
                        bibtex_encoding: if ascii {
                            selfrag_engine::export::BibEncoding::Ascii
                        } else {
                            selfrag_engine::export::BibEncoding::Utf8
                        },
                    },
                );
                match output {
                    Some(path) => selfrag_engine::write_atomically(&path, text.as_bytes())
                        .with_context(|| format!("exporting to {}", path.display())),
                    None => write_stdout(&text),
                }
            }
        }
    })
}

fn models(command: ModelsCommand) -> Result<()> {
    match command {
        ModelsCommand::List { json } => {
            let listings: Vec<ModelListing> = selfrag_hub::ModelSpec::all()?
                .into_iter()
                .map(|spec| {
                    let location = selfrag_hub::locate(&spec);
                    ModelListing {
                        role: format!("{:?}", spec.role).to_lowercase(),
                        found: location.found,
                        searched: location.searched,
                        id: spec.id,
                        description: spec.description,
                        repo: spec.repo,
                        license: spec.license,
                        license_terms: spec.license_terms,
                        license_sources: spec.license_sources,
                        size_bytes: spec.size_bytes,
                        downloadable: spec.downloadable,
                        note: spec.note,
                    }
                })
                .collect();
            if json {
                return write_stdout(&format!("{}\n", serde_json::to_string_pretty(&listings)?));
            }
            let mut text = String::new();
            let width = listings.iter().map(|m| m.id.len()).max().unwrap_or(0);
            for m in &listings {
                let place = match &m.found {
                    Some(path) => format!("found at {}", path.display()),
                    None if m.downloadable => "not downloaded".to_string(),
                    None => "no GGUF published: convert it, see docs/MODELS.md".to_string(),
                };
                text.push_str(&format!(
                    "{:<width$} {:<9} {:>6.2} GB  {}  ({}; {})\n",
                    m.id,
                    m.role,
                    m.size_bytes as f64 / 1e9,
                    m.repo,
                    m.license,
                    place
                ));
                if !m.license_terms.is_empty() {
                    text.push_str(&format!(
                        "{:<width$} licence: {} ({})\n",
                        "",
                        m.license_terms,
                        m.license_sources.join(", ")
                    ));
                }
            }
            write_stdout(&text)
        }
        ModelsCommand::Pull { id, offline } => pull::pull(&id, offline),
        ModelsCommand::Verify { id, json } => pull::verify(id.as_deref(), json),
        ModelsCommand::Path { id } => {
            let spec = selfrag_hub::ModelSpec::by_id(&id).with_context(|| {
                format!("`{id}` is not a known model; `selfrag models list` shows the ids")
            })?;
            let location = selfrag_hub::locate(&spec);
            match location.found {
                Some(path) => write_stdout(&format!("{}\n", path.display())),
                None if !spec.downloadable => {
                    let file = spec.primary_file().map(|f| f.name.as_str()).unwrap_or("");
                    anyhow::bail!(
                        "{id} has no published GGUF: convert {} with llama.cpp (docs/MODELS.md, \"Checkpoints of other families\") into {file} and point SELFRAG_GENERATOR at it",
                        spec.repo
                    )
                }
                None => anyhow::bail!(
                    "{id} is not in the Hugging Face cache (looked in {}); download it with `selfrag models pull {id}` or `huggingface-cli download {}`",
                    location
                        .searched
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    spec.repo
                ),
            }
        }
    }
}

fn debug(command: DebugCommand) -> Result<()> {
    let load = |model: &PathBuf, device: DeviceChoice| -> Result<LlamaGenerator> {
        let device = pick_device(device);
        LlamaGenerator::load(model, &device)
            .with_context(|| format!("loading the generator {}", model.display()))
    };
    let json = match command {
        DebugCommand::BenchSearch { .. }
        | DebugCommand::SharedVisibility { .. }
        | DebugCommand::SearchDepths { .. }
        | DebugCommand::Passages { .. }
        | DebugCommand::Extract { .. }
        | DebugCommand::RerankLatency { .. }
        | DebugCommand::IndexWhileAnswering { .. } => {
            anyhow::bail!("this debug command runs in the async runtime")
        }
        DebugCommand::Prompt {
            question,
            model,
            passage,
            max_tokens,
            prompt_budget,
            dummy_prefix,
            json,
        } => {
            let limits = prompt::Limits {
                max_tokens,
                prompt_budget,
            };
            return prompt::print(&question, &model, &passage, limits, dummy_prefix, json);
        }
        DebugCommand::Tokenize {
            model,
            parse_special,
            dummy_prefix,
            text,
        } => {
            let tokenizer = GgufTokenizer::from_gguf_file(&model)
                .with_context(|| format!("reading the tokenizer of {}", model.display()))?
                .with_dummy_prefix(dummy_prefix);
            let mut ids = Vec::new();
            if tokenizer.add_bos() {
                ids.push(tokenizer.bos_id());
            }
            ids.extend(tokenizer.encode(&text, parse_special));
            let tokens = ids
                .iter()
                .map(|&id| tokenizer.id_to_token(id).unwrap_or_default().to_owned())
                .collect();
            serde_json::to_string(&TokenizeOutput { ids, tokens })?
        }
        DebugCommand::Logits {
            model,
            ids,
            top,
            device,
        } => {
            let mut generator = load(&model, device)?;
            let top = generator
                .top_logprobs(&ids, top)
                .context("computing the next-token log-probabilities")?
                .into_iter()
                .map(|(id, logprob)| TopLogprob { id, logprob })
                .collect();
            serde_json::to_string(&LogitsOutput { top })?
        }
        DebugCommand::Embed {
            model,
            texts,
            device,
            precision,
        } => {
            let device = pick_device(device);
            let embedder = BertEmbedder::load_with_precision(&model, &device, precision)
                .with_context(|| format!("loading the embedder {}", model.display()))?;
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let started = std::time::Instant::now();
            let embeddings = embedder.embed(&refs).context("embedding the texts")?;
            let seconds = started.elapsed().as_secs_f64();
            serde_json::to_string(&EmbedOutput {
                embeddings,
                precision: embedder.precision(),
                seconds,
            })?
        }
        DebugCommand::EmbedAgreement { model, files } => {
            serde_json::to_string(&embed_agreement::measure(&model, &files)?)?
        }
        DebugCommand::ReadRate {
            mb,
            threads,
            rounds,
        } => {
            let rate = selfrag_models::read_rate(mb.saturating_mul(1_000_000), threads, rounds)
                .context("nothing to read: --mb and --rounds must be at least 1, and the buffer at least 8 bytes a thread")?;
            serde_json::json!({
                "mb": mb,
                "threads": threads,
                "rounds": rounds,
                "gb_per_second": rate / 1e9,
            })
            .to_string()
        }
        DebugCommand::Generate {
            model,
            ids,
            max_tokens,
            batch,
            ignore_eos,
            threads: _,
            device,
        } => {
            let mut generator = load(&model, device)?;
            let request = GenerateRequest {
                max_new_tokens: max_tokens,
                stop_ids: Vec::new(),
                markup_ids: Vec::new(),
                watch_ids: Vec::new(),
            };
            let timed = generator
                .generate_timed(&vec![ids; batch], &request, !ignore_eos)
                .context("generating")?;
            serde_json::to_string(&GenerateOutput {
                kernels: generator.kernel_choice().to_string(),
                prefetch: generator.prefetch_choice().to_string(),
                prompt_tokens: timed.prompt_tokens,
                prompt_seconds: timed.prompt_seconds,
                decode_tokens: timed.decode_tokens,
                decode_seconds: timed.decode_seconds,
                ids: timed
                    .rows
                    .iter()
                    .map(|row| row.tokens.iter().map(|t| t.id).collect())
                    .collect(),
            })?
        }
    };
    write_stdout(&format!("{json}\n"))
}

async fn ask(
    question: String,
    options: Vec<String>,
    settings: Settings,
    server: Option<(String, Option<String>)>,
    numerics: &NumericsArgs,
    json: bool,
) -> Result<()> {
    let engine = answering_engine(server, numerics)?;
    let record = if options.is_empty() {
        engine.ask(question, settings, |_| {}).await?
    } else {
        let question = ClosedSetQuestion::multiple_choice(&question, &options)?;
        engine.ask_closed_set(question, settings, |_| {}).await?
    };
    print_answer(&record.answer, json)
}

fn print_answer(answer: &Answer, json: bool) -> Result<()> {
    if let Some(why) = &answer.cut_short {
        let _ = writeln!(
            std::io::stderr(),
            "warning: the answer stops after {} segment(s): {why}",
            answer.segments.len()
        );
    }
    if json {
        write_stdout(&format!("{}\n", serde_json::to_string_pretty(answer)?))
    } else {
        let options = answer.closed_set.as_ref().map(options_text);
        write_stdout(&format!(
            "{}\n{}",
            answer.answer,
            options.unwrap_or_default()
        ))
    }
}

/// A closed-set answer's options, one a line with its score and the candidates that name it,
/// the chosen one marked.
fn options_text(scores: &ClosedSetScores) -> String {
    let mut text =
        String::from("\nOptions, each scored the sum of f over the candidates that name it:\n");
    for (i, option) in scores.options.iter().enumerate() {
        let mark = if scores.chosen == Some(i) { "*" } else { " " };
        let named = match option.candidates.as_slice() {
            [] => "no candidate names it".to_owned(),
            list => {
                let numbers: Vec<String> = list.iter().map(|c| (c + 1).to_string()).collect();
                format!("named by candidate {}", numbers.join(", "))
            }
        };
        text.push_str(&format!(
            "{mark} {}: {}  {:.3}  ({named})\n",
            option.label, option.text, option.score
        ));
    }
    if scores.chosen.is_none() {
        text.push_str("No candidate names an option.\n");
    }
    text
}

fn read_trace(path: &PathBuf) -> Result<Answer> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{} is not a Self-RAG trace (write one with `selfrag ask --json`)",
            path.display()
        )
    })
}

fn write_stdout(text: &str) -> Result<()> {
    std::io::stdout()
        .write_all(text.as_bytes())
        .context("writing to standard output")
}
