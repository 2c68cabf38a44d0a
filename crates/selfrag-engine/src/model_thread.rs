//! The one thread that owns the model weights, and what it is asked to do: typed [`Command`]s
//! over a channel, each with its own reply, so no lock on a model is ever held across an
//! `.await` (the pattern of text-embeddings-inference). Models load on first use; a load error
//! is the reply to the request that needed the model. The embedder also loads beside the
//! generator, which an answer opens before it embeds its query; an error there is logged, and
//! the next request that needs the embedder loads it again and gets the error. Choosing
//! another device drops the loaded models, so the next request loads them there.
//!
//! A generation (a batch of candidates, or the probabilities after one prompt) runs a forward
//! pass at a time ([`selfrag_models::BatchDecode`]). Between two passes the thread serves the
//! commands that have arrived, so an indexing job goes on while an answer is generated instead
//! of waiting for it, but the answer comes first: a question's own queries are embedded at
//! once, and an indexing job's batches get at most [`BACKGROUND_SHARE`] of the thread's time
//! while a generation runs (all of it when none does). An indexing batch is embedded in pieces
//! of about [`BACKGROUND_PIECE`], with commands served between them, so that a question asked
//! during a job waits at most one piece for its query's embedding, and so that the share can
//! be given within an answer of a few seconds (a whole batch of a BERT-base on two cores takes
//! about 7 s). Generations queue in the order they
//! came, one at a time (the attention cache is the generator's), and a device or file change
//! waits behind them. A cancelled generation stops at the next block of its pass.
//!
//! Each run asks for its numerics (KV cache and dummy prefix) when it opens the generator, and
//! each of its generations puts them in force before it begins, so a run's trace records what
//! its generations ran with, even when the choice changes while it runs.
//!
//! [`ThreadGenerator`] is the client a Self-RAG run uses: `selfrag_core::Generator` over these
//! commands, from the run's own thread. It is a peer of the server generator: the engine runs
//! both the same way (see `Engine::ask`).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use selfrag_core::{
    BackendError, BatchTiming, CachePrecision, DeviceChoice, DeviceKind, EmbedderInfo,
    EmbedderPrecision, GenerateRequest, Generation, Generator, GeneratorInfo, ModelRole, TokenId,
    Tokenizer,
};
use selfrag_models::{
    BatchDecode, BertEmbedder, GgufTokenizer, LlamaGenerator, ModelError, TimedGeneration,
};
use tokio::sync::oneshot;

use crate::EngineError;
use crate::config::GeneratorNumerics;

/// The most of the model thread's time that an indexing job's embeddings get while an answer
/// is being generated: after a batch that took `t`, the next waits until the generation has
/// run for `t × (1 − share) / share`. A quarter keeps an answer at least three quarters as fast
/// (on the thread; the job's parsing and writing share the CPU too) and indexing moving.
pub const BACKGROUND_SHARE: f64 = 0.25;

/// About the longest one piece of an indexing batch holds the thread: what a question asked
/// meanwhile waits for its query's embedding, and what a generation waits between two of its
/// passes. A piece holds as many texts as the last piece's time per text says fit (at least
/// one; at most the batch): on the CPU the embedder lays its rows end to end with no padding,
/// so a row's cost does not depend on how many share its pass.
pub const BACKGROUND_PIECE: Duration = Duration::from_millis(500);

/// How long the thread waits idle before it frees the attention cache a probe left for the
/// batch that follows ([`LlamaGenerator::release_kept_prompt`]): a run searches between the
/// two, in well under a second.
const KEPT_PROMPT_IDLE: Duration = Duration::from_secs(10);

/// Who is waiting for an embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedFor {
    /// A question (its retrieval query) or a search: served at once.
    Answer,
    /// An indexing job: served within [`BACKGROUND_SHARE`] while a generation runs.
    Indexing,
}

type EmbedReply = oneshot::Sender<Result<Embedded, EngineError>>;

/// Vectors, and the embedder that made them (for the trace of the answer that searched with
/// them).
pub struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    pub by: EmbedderInfo,
}

/// What the model thread is asked to do.
/// What the indexer needs to know of the local embedder.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EmbedderShape {
    /// Length of every vector.
    pub dim: usize,
    /// Texts per call while indexing: the rows of one of its passes on its device (32 on a
    /// CPU, 256 on a GPU).
    pub texts_per_call: usize,
}

enum Command {
    /// Embeds texts with the embedder.
    Embed {
        texts: Vec<String>,
        purpose: EmbedFor,
        reply: EmbedReply,
    },
    /// The embedder's vector size and texts per call, loading it if needed.
    EmbedderShape {
        reply: oneshot::Sender<Result<EmbedderShape, EngineError>>,
    },
    /// Loads the generator if needed; replies with what a client needs to know about it, and
    /// the seconds the load took (0 when it was loaded).
    OpenGenerator {
        numerics: GeneratorNumerics,
        reply: oneshot::Sender<Result<(Arc<GeneratorFacts>, f64), EngineError>>,
    },
    /// A generation, queued behind the one running.
    Generate(GenerateJob),
    /// Loads the models on another device from now on (after the queued generations).
    SetDevice(DeviceChoice),
    /// Loads the embedder in another precision from now on (generations do not use it).
    SetEmbedderPrecision(EmbedderPrecision),
    /// Points at other model files (after the queued generations).
    SetPaths {
        generator: Option<PathBuf>,
        embedder: Option<PathBuf>,
    },
    /// Whether the generator is loaded (for tests of reloading).
    #[cfg(test)]
    GeneratorLoaded { reply: oneshot::Sender<bool> },
    /// The loaded generator's KV cache and dummy prefix in force (for tests of numerics).
    #[cfg(test)]
    NumericsInForce {
        reply: oneshot::Sender<Option<(selfrag_core::CachePrecision, selfrag_core::DummyPrefix)>>,
    },
    /// Whether the embedder is loaded (for tests of loading it beside the generator).
    #[cfg(test)]
    EmbedderLoaded { reply: oneshot::Sender<bool> },
}

/// One generation: what to run, when to give up, and where the result goes.
struct GenerateJob {
    work: Work,
    /// The KV cache and dummy prefix of the run it belongs to, put in force before it begins.
    numerics: GeneratorNumerics,
    cancel: Arc<AtomicBool>,
    reply: oneshot::Sender<Result<TimedGeneration, BackendError>>,
}

enum Work {
    /// Greedy continuation of every prompt as one batch.
    Batch {
        prompts: Vec<Vec<TokenId>>,
        request: GenerateRequest,
    },
    /// Probabilities of `watch_ids` after `prompt`.
    Probe {
        prompt: Vec<TokenId>,
        watch_ids: Vec<TokenId>,
    },
}

/// Indexing embeddings waiting for their share of the thread, and the account of that share.
#[derive(Default)]
struct Background {
    /// The batches in the order they came; the first may be partly embedded.
    waiting: VecDeque<BackgroundBatch>,
    /// Time the generations have run since the last indexing piece.
    generated: Duration,
    /// What the last indexing piece took.
    last_piece: Duration,
    /// Seconds per text of the last piece; `None` before the first.
    seconds_per_text: Option<f64>,
}

/// One indexing job's call: its texts, the vectors of those embedded so far, and its reply,
/// sent when the last piece is in (or at the first error).
struct BackgroundBatch {
    texts: Vec<String>,
    /// The vectors of the first `embedded.vectors.len()` texts, all by one embedder.
    embedded: Option<Embedded>,
    reply: EmbedReply,
}

impl Background {
    /// Whether an indexing piece may run now, with a generation in progress.
    fn due(&self) -> bool {
        self.generated.as_secs_f64()
            >= self.last_piece.as_secs_f64() * (1.0 - BACKGROUND_SHARE) / BACKGROUND_SHARE
    }

    /// Embeds the next piece of the first waiting batch with `embed`, and replies to the batch
    /// when it is complete or failed. Nothing happens when no batch waits.
    fn run_piece(&mut self, embed: impl FnOnce(&[String]) -> Result<Embedded, EngineError>) {
        // A batch whose job stopped waiting (its reply dropped) is not embedded further.
        while self.waiting.front().is_some_and(|b| b.reply.is_closed()) {
            self.waiting.pop_front();
        }
        let Some(batch) = self.waiting.front_mut() else {
            return;
        };
        let done = batch.embedded.as_ref().map_or(0, |e| e.vectors.len());
        let piece = &batch.texts[done..];
        let piece = &piece[..piece_len(self.seconds_per_text, piece.len())];
        let started = Instant::now();
        let result = embed(piece).and_then(|more| {
            if more.vectors.len() == piece.len() {
                Ok(more)
            } else {
                Err(EngineError::Index(selfrag_index::IndexError::Embedder(
                    format!(
                        "the embedder returned {} vectors for {} texts",
                        more.vectors.len(),
                        piece.len()
                    ),
                )))
            }
        });
        self.last_piece = started.elapsed();
        self.generated = Duration::ZERO;
        self.seconds_per_text = Some(self.last_piece.as_secs_f64() / piece.len().max(1) as f64);
        match result {
            Ok(more) => match batch.embedded.take() {
                Some(mut so_far) if so_far.by == more.by => {
                    so_far.vectors.extend(more.vectors);
                    batch.embedded = Some(so_far);
                }
                // Another embedder since the batch began (the device, precision or file was
                // changed between two pieces): its vectors must not be mixed with the earlier
                // ones, so the batch begins again.
                Some(_) => {}
                None => batch.embedded = Some(more),
            },
            Err(e) => {
                if let Some(failed) = self.waiting.pop_front() {
                    let _ = failed.reply.send(Err(e));
                }
                return;
            }
        }
        let complete = batch
            .embedded
            .as_ref()
            .is_some_and(|e| e.vectors.len() == batch.texts.len());
        if complete
            && let Some(BackgroundBatch {
                embedded: Some(embedded),
                reply,
                ..
            }) = self.waiting.pop_front()
        {
            let _ = reply.send(Ok(embedded));
        }
    }
}

/// How many of `remaining` texts the next indexing piece takes: as many as the last piece's
/// time per text says fit in [`BACKGROUND_PIECE`], at least one (none of none); one before any
/// piece was timed.
fn piece_len(seconds_per_text: Option<f64>, remaining: usize) -> usize {
    let fit = match seconds_per_text {
        // A float-to-integer `as` saturates: a time of 0 gives the most, NaN gives 0.
        Some(seconds) => (BACKGROUND_PIECE.as_secs_f64() / seconds) as usize,
        None => 1,
    };
    fit.max(1).min(remaining)
}

/// What waits for the generator, in order.
enum Queued {
    Generate(GenerateJob),
    SetDevice(DeviceChoice),
    SetPaths {
        generator: Option<PathBuf>,
        embedder: Option<PathBuf>,
    },
}

/// The generation in progress.
struct Active {
    batch: BatchDecode,
    cancel: Arc<AtomicBool>,
    reply: oneshot::Sender<Result<TimedGeneration, BackendError>>,
}

/// What a client of the loaded generator knows without asking the thread: its tokenizer
/// (tokenizing and decoding need no weights) and its limits, under one run's numerics.
#[derive(Debug)]
pub(crate) struct GeneratorFacts {
    tokenizer: GgufTokenizer,
    context_length: usize,
    info: Option<GeneratorInfo>,
    /// The KV cache and dummy prefix the run asked for; every generation of the run runs
    /// under them (`GenerateJob::numerics`), so `info` is what they ran with.
    numerics: GeneratorNumerics,
}

/// Handle to the model thread; cheap to clone.
#[derive(Clone, Debug)]
pub struct ModelThread {
    commands: mpsc::Sender<Command>,
    /// The kind of device the models were last loaded on; `None` until
    /// a model loads. Read without waiting for the thread, which may be busy answering.
    in_use: Arc<Mutex<Option<DeviceKind>>>,
}

/// Where the models are, as resolved at start-up.
#[derive(Debug, Clone, Default)]
pub struct ModelPaths {
    pub generator: Option<PathBuf>,
    pub embedder: Option<PathBuf>,
    pub device: DeviceChoice,
    pub embedder_precision: EmbedderPrecision,
    /// Where the CPU kernels' timing is remembered (the data folder's); `None`: timed at
    /// every load.
    pub kernel_memory: Option<selfrag_models::KernelMemory>,
}

/// The models, loaded lazily on the model thread.
struct LoadedModels {
    paths: ModelPaths,
    in_use: Arc<Mutex<Option<DeviceKind>>>,
    device: Option<selfrag_models::Device>,
    /// The generator, and its facts under the numerics in force on it.
    generator: Option<(LlamaGenerator, Arc<GeneratorFacts>)>,
    embedder: Option<BertEmbedder>,
}

impl LoadedModels {
    /// Frees what the generator's last probe left in its cache, if it is loaded.
    fn release_kept_prompt(&mut self) {
        if let Some((generator, _)) = self.generator.as_mut() {
            generator.release_kept_prompt();
        }
    }

    fn device(&mut self) -> selfrag_models::Device {
        if let Some(d) = &self.device {
            return d.clone();
        }
        let d = selfrag_models::pick_device(self.paths.device);
        self.device = Some(d.clone());
        *lock(&self.in_use) = Some(selfrag_models::device_kind(&d));
        d
    }

    /// Chooses the device the models load on from now on; what was loaded elsewhere is dropped.
    /// Does nothing when `device` is the current choice.
    fn set_device(&mut self, device: DeviceChoice) {
        if device == self.paths.device {
            return;
        }
        tracing::info!(from = %self.paths.device, to = %device, "device changed; models reload on next use");
        self.paths.device = device;
        self.device = None;
        self.generator = None;
        self.embedder = None;
        *lock(&self.in_use) = None;
    }

    /// Embeds in `precision` from now on: a loaded embedder is dropped and loads again in it.
    fn set_embedder_precision(&mut self, precision: EmbedderPrecision) {
        if precision != self.paths.embedder_precision {
            tracing::info!(from = %self.paths.embedder_precision, to = %precision, "embedder precision changed; it reloads on next use");
            self.paths.embedder_precision = precision;
            self.embedder = None;
        }
    }

    /// Points at the model files found now (after a download); a model whose file changed is
    /// dropped and loads from the new one on its next use.
    fn set_paths(&mut self, generator: Option<PathBuf>, embedder: Option<PathBuf>) {
        if self.paths.generator != generator {
            self.paths.generator = generator;
            self.generator = None;
        }
        if self.paths.embedder != embedder {
            self.paths.embedder = embedder;
            self.embedder = None;
        }
    }

    /// The generator and its facts, loading it if needed.
    ///
    /// A run that opens the generator embeds its retrieval query next, so an embedder not yet
    /// loaded loads at the same time, on a thread of its own: each load waits on memory and
    /// leaves cores idle for part of its time (the generator's repacking keeps about 1.4 of two
    /// cores busy), and the embedder's took 0.55–0.6 s after the generator's 0.9 s. Its error,
    /// if any, is not this request's: the embedder is then left unloaded and the next request
    /// that needs it loads it again and reports it.
    fn generator(
        &mut self,
    ) -> Result<(&mut LlamaGenerator, &mut Arc<GeneratorFacts>), EngineError> {
        if self.generator.is_none() {
            let device = self.device();
            let embedder_path = self
                .paths
                .embedder
                .clone()
                .filter(|_| self.embedder.is_none());
            let precision = self.paths.embedder_precision;
            let (generator, embedder) = std::thread::scope(|scope| {
                let embedder = embedder_path.map(|path| {
                    let device = &device;
                    scope.spawn(move || load_embedder(Some(path), device, precision))
                });
                let kernel_memory = self.paths.kernel_memory.clone();
                let generator = load_model(
                    ModelRole::Generator,
                    self.paths.generator.clone(),
                    "no Self-RAG GGUF file was found; see the start screen",
                    &device,
                    |path, device| match kernel_memory {
                        Some(memory) => {
                            LlamaGenerator::load_remembering_kernels(path, device, memory)
                        }
                        None => LlamaGenerator::load(path, device),
                    },
                );
                (generator, embedder.map(|thread| thread.join()))
            });
            match embedder {
                Some(Ok(Ok(embedder))) => self.embedder = Some(embedder),
                Some(Ok(Err(e))) => {
                    tracing::warn!(error = %e, "the embedder did not load beside the generator");
                }
                Some(Err(_)) => tracing::warn!("loading the embedder panicked"),
                None => {}
            }
            let mut generator = generator?;
            let numerics = GeneratorNumerics::default();
            apply_numerics(&mut generator, numerics, &device);
            let facts = facts_for(&generator, numerics, &device);
            self.generator = Some((generator, facts));
        }
        let (generator, facts) = self
            .generator
            .as_mut()
            .ok_or(EngineError::ModelThreadGone)?;
        Ok((generator, facts))
    }

    /// The embedder, loading it if needed.
    fn embedder(&mut self) -> Result<&BertEmbedder, EngineError> {
        if self.embedder.is_none() {
            let device = self.device();
            let embedder = load_embedder(
                self.paths.embedder.clone(),
                &device,
                self.paths.embedder_precision,
            )?;
            self.embedder = Some(embedder);
        }
        self.embedder.as_ref().ok_or(EngineError::ModelThreadGone)
    }

    fn embed(&mut self, texts: &[String]) -> Result<Embedded, EngineError> {
        let device = self.device();
        let model = crate::engine::embedder_identity(self.paths.embedder.as_deref());
        let embedder = self.embedder()?;
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = embedder
            .embed(&refs)
            .map_err(|e| EngineError::Index(selfrag_index::IndexError::Embedder(e.to_string())))?;
        let by = EmbedderInfo {
            model,
            precision: embedder.precision(),
            device: selfrag_models::device_kind(&device),
            server: None,
        };
        Ok(Embedded { vectors, by })
    }

    /// Serves a command that waits for nothing; hands back the ones that wait for the
    /// generator, and keeps an indexing job's embeddings in `background`. A device or file
    /// change waits only where a generation runs or waits (`generating`).
    fn serve(
        &mut self,
        command: Command,
        generating: bool,
        background: &mut Background,
    ) -> Option<Queued> {
        match command {
            Command::Embed {
                texts,
                purpose: EmbedFor::Answer,
                reply,
            } => {
                let _ = reply.send(self.embed(&texts));
            }
            Command::Embed {
                texts,
                purpose: EmbedFor::Indexing,
                reply,
            } => background.waiting.push_back(BackgroundBatch {
                texts,
                embedded: None,
                reply,
            }),
            Command::EmbedderShape { reply } => {
                let _ = reply.send(self.embedder().map(|embedder| EmbedderShape {
                    dim: embedder.dim(),
                    texts_per_call: embedder.batching().rows,
                }));
            }
            Command::OpenGenerator { numerics, reply } => {
                let (loading, loaded) = (Instant::now(), self.generator.is_some());
                let device = self.device();
                // What the run will read and write with, worked out without touching the
                // generator: a generation of another run may be in progress on it.
                let opened = self.generator().map(|(generator, facts)| {
                    if facts.numerics == numerics {
                        facts.clone()
                    } else {
                        facts_for(generator, numerics, &device)
                    }
                });
                let load_seconds = if loaded {
                    0.0
                } else {
                    loading.elapsed().as_secs_f64()
                };
                let _ = reply.send(opened.map(|facts| (facts, load_seconds)));
            }
            Command::Generate(job) => return Some(Queued::Generate(job)),
            Command::SetDevice(device) if generating => return Some(Queued::SetDevice(device)),
            Command::SetDevice(device) => self.set_device(device),
            Command::SetEmbedderPrecision(precision) => self.set_embedder_precision(precision),
            Command::SetPaths {
                generator,
                embedder,
            } if generating => {
                return Some(Queued::SetPaths {
                    generator,
                    embedder,
                });
            }
            Command::SetPaths {
                generator,
                embedder,
            } => self.set_paths(generator, embedder),
            #[cfg(test)]
            Command::GeneratorLoaded { reply } => {
                let _ = reply.send(self.generator.is_some());
            }
            #[cfg(test)]
            Command::NumericsInForce { reply } => {
                let _ = reply.send(self.generator.as_ref().map(|(generator, _)| {
                    (
                        generator.cache_precision(),
                        generator.tokenizer().dummy_prefix(),
                    )
                }));
            }
            #[cfg(test)]
            Command::EmbedderLoaded { reply } => {
                let _ = reply.send(self.embedder.is_some());
            }
        }
        None
    }

    /// Takes the next queued item: applies changes, begins a generation (replying at once
    /// when it cannot begin). Returns the generation begun, if any.
    fn begin_next(&mut self, queue: &mut VecDeque<Queued>) -> Option<Active> {
        while let Some(item) = queue.pop_front() {
            let job = match item {
                Queued::SetDevice(device) => {
                    self.set_device(device);
                    continue;
                }
                Queued::SetPaths {
                    generator,
                    embedder,
                } => {
                    self.set_paths(generator, embedder);
                    continue;
                }
                Queued::Generate(job) => job,
            };
            if job.cancel.load(Ordering::Relaxed) {
                let _ = job.reply.send(Err(cancelled()));
                continue;
            }
            let device = self.device();
            let begun = self
                .generator()
                .map_err(BackendError::from)
                .map(|(generator, facts)| {
                    // The run's numerics, where the last generation ran under others (a run
                    // asked after a change, or two runs side by side).
                    if facts.numerics != job.numerics {
                        apply_numerics(generator, job.numerics, &device);
                        *facts = facts_for(generator, job.numerics, &device);
                    }
                    generator
                })
                .and_then(|generator| match job.work {
                    Work::Batch { prompts, request } => generator
                        .begin_batch(prompts, request, true)
                        .map_err(BackendError::from),
                    Work::Probe { prompt, watch_ids } => generator
                        .begin_probe(prompt, watch_ids)
                        .map_err(BackendError::from),
                });
            match begun {
                Ok(mut batch) => {
                    batch.stop_when(job.cancel.clone());
                    return Some(Active {
                        batch,
                        cancel: job.cancel,
                        reply: job.reply,
                    });
                }
                Err(e) => {
                    let _ = job.reply.send(Err(e));
                }
            }
        }
        None
    }

    /// Runs one forward pass of `active`; returns it while it has more to run.
    fn step(&mut self, mut active: Active) -> Option<Active> {
        let Some((generator, _)) = self.generator.as_mut() else {
            let _ = active.reply.send(Err(EngineError::ModelThreadGone.into()));
            return None;
        };
        if active.cancel.load(Ordering::Relaxed) {
            generator.abandon(active.batch);
            let _ = active.reply.send(Err(cancelled()));
            return None;
        }
        match generator.step(&mut active.batch) {
            Ok(None) => Some(active),
            Ok(Some(done)) => {
                let _ = active.reply.send(Ok(done));
                None
            }
            // A pass stopped by the cancel flag fails: the run was cancelled.
            Err(_) if active.cancel.load(Ordering::Relaxed) => {
                let _ = active.reply.send(Err(cancelled()));
                None
            }
            Err(e) => {
                let _ = active.reply.send(Err(e.into()));
                None
            }
        }
    }
}

/// Loads one model from `path`, the file the paths name for `role`, on `device`.
fn load_model<M>(
    role: ModelRole,
    path: Option<PathBuf>,
    missing: &str,
    device: &selfrag_models::Device,
    load: impl FnOnce(&std::path::Path, &selfrag_models::Device) -> Result<M, ModelError>,
) -> Result<M, EngineError> {
    let path = path.ok_or_else(|| EngineError::ModelMissing {
        role,
        message: missing.into(),
    })?;
    let model = load(&path, device).map_err(|e| EngineError::ModelLoad {
        role,
        path: path.clone(),
        message: e.to_string(),
    })?;
    tracing::info!(%role, path = %path.display(), "model loaded");
    Ok(model)
}

/// Loads the embedder from `path` on `device`, in `precision`.
fn load_embedder(
    path: Option<PathBuf>,
    device: &selfrag_models::Device,
    precision: EmbedderPrecision,
) -> Result<BertEmbedder, EngineError> {
    load_model(
        ModelRole::Embedder,
        path,
        "no Contriever model folder was found; see the start screen",
        device,
        |path, device| BertEmbedder::load_with_precision(path, device, precision),
    )
}

/// The KV-cache precision `numerics` asks for on `device` (the device's default where it
/// names none).
fn asked_cache(numerics: GeneratorNumerics, device: &selfrag_models::Device) -> CachePrecision {
    numerics
        .cache_precision
        .unwrap_or_else(|| selfrag_models::default_cache_precision(device))
}

/// Holds `generator`'s KV cache and places its dummy prefix as `numerics` says, on `device`
/// (the device's default cache where `numerics` names none). Empties its cache.
fn apply_numerics(
    generator: &mut LlamaGenerator,
    numerics: GeneratorNumerics,
    device: &selfrag_models::Device,
) {
    tracing::info!(?numerics, "generator numerics in force");
    generator.set_cache_precision(asked_cache(numerics, device));
    generator.set_dummy_prefix(numerics.dummy_prefix);
}

/// What a client of `generator` knows without asking the thread, under `numerics`: the
/// tokenizer with their dummy prefix, and the record of the cache they put in force.
fn facts_for(
    generator: &LlamaGenerator,
    numerics: GeneratorNumerics,
    device: &selfrag_models::Device,
) -> Arc<GeneratorFacts> {
    let tokenizer = generator
        .tokenizer()
        .clone()
        .with_dummy_prefix(numerics.dummy_prefix);
    let info = generator.describe().map(|info| GeneratorInfo {
        cache_precision: Some(generator.cache_precision_for(asked_cache(numerics, device))),
        dummy_prefix: tokenizer.dummy_prefix_in_force(),
        ..info
    });
    Arc::new(GeneratorFacts {
        tokenizer,
        context_length: generator.context_length(),
        info,
        numerics,
    })
}

/// What a cancelled generation replies; the engine reports the run as cancelled.
fn cancelled() -> BackendError {
    "cancelled".into()
}

/// The thread's loop: serve what has arrived, an indexing batch when it is due, then one pass
/// of the generation in progress.
fn run(commands: mpsc::Receiver<Command>, mut models: LoadedModels) {
    let mut queue: VecDeque<Queued> = VecDeque::new();
    let mut active: Option<Active> = None;
    let mut background = Background::default();
    loop {
        let idle = active.is_none() && queue.is_empty() && background.waiting.is_empty();
        // Idle, the thread waits for a command; busy, it takes only those already there.
        let waited = if idle {
            // A probe's prompt is kept for the batch that follows it, after the run's search;
            // when no command comes for a while, none follows, and it would only hold memory.
            let command = match commands.recv_timeout(KEPT_PROMPT_IDLE) {
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    models.release_kept_prompt();
                    commands.recv().ok()
                }
                received => received.ok(),
            };
            match command {
                Some(command) => Some(command),
                None => return,
            }
        } else {
            None
        };
        for command in waited
            .into_iter()
            .chain(std::iter::from_fn(|| commands.try_recv().ok()))
        {
            let generating = active.is_some() || !queue.is_empty();
            if let Some(queued) = models.serve(command, generating, &mut background) {
                queue.push_back(queued);
            }
        }
        if active.is_none() {
            active = models.begin_next(&mut queue);
        }
        if active.is_none() || background.due() {
            background.run_piece(|texts| models.embed(texts));
        }
        if let Some(running) = active.take() {
            let started = Instant::now();
            active = models.step(running);
            background.generated += started.elapsed();
            #[cfg(test)]
            after_step_hook();
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Called on the model thread after every forward pass (tests only).
    static AFTER_STEP: std::cell::RefCell<Option<Box<dyn FnMut()>>> = const { std::cell::RefCell::new(None) };
}

#[cfg(test)]
fn after_step_hook() {
    AFTER_STEP.with(|hook| {
        if let Some(hook) = hook.borrow_mut().as_mut() {
            hook();
        }
    });
}

impl ModelThread {
    /// Starts the thread; nothing is loaded until a command needs it.
    pub fn spawn(paths: ModelPaths) -> Result<Self, EngineError> {
        Self::spawn_with(paths, || {})
    }

    fn spawn_with(
        paths: ModelPaths,
        on_start: impl FnOnce() + Send + 'static,
    ) -> Result<Self, EngineError> {
        let (commands, rx) = mpsc::channel::<Command>();
        let in_use = Arc::new(Mutex::new(None));
        let thread_in_use = in_use.clone();
        std::thread::Builder::new()
            .name("selfrag-models".into())
            .spawn(move || {
                on_start();
                run(
                    rx,
                    LoadedModels {
                        paths,
                        in_use: thread_in_use,
                        device: None,
                        generator: None,
                        embedder: None,
                    },
                );
            })
            .map_err(|_| EngineError::ModelThreadGone)?;
        Ok(Self { commands, in_use })
    }

    fn send(&self, command: Command) -> Result<(), EngineError> {
        self.commands
            .send(command)
            .map_err(|_| EngineError::ModelThreadGone)
    }

    /// Loads the models on `device` from the next request on, once the generations queued now
    /// are done.
    pub fn set_device(&self, device: DeviceChoice) -> Result<(), EngineError> {
        self.send(Command::SetDevice(device))
    }

    /// Loads the embedder in `precision` from the next embedding on.
    pub fn set_embedder_precision(&self, precision: EmbedderPrecision) -> Result<(), EngineError> {
        self.send(Command::SetEmbedderPrecision(precision))
    }

    /// Points at new model files once the generations queued now are done (a model whose file
    /// changed loads from the new one on its next use).
    pub fn set_paths(
        &self,
        generator: Option<PathBuf>,
        embedder: Option<PathBuf>,
    ) -> Result<(), EngineError> {
        self.send(Command::SetPaths {
            generator,
            embedder,
        })
    }

    /// The kind of device the models are loaded on, if any are.
    pub fn device_in_use(&self) -> Option<DeviceKind> {
        *lock(&self.in_use)
    }

    /// Embeds `texts` for `purpose`, blocking the calling thread (which must not be a runtime
    /// worker: use `spawn_blocking` or `block_in_place`).
    pub fn embed_blocking(
        &self,
        texts: Vec<String>,
        purpose: EmbedFor,
    ) -> Result<Embedded, EngineError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::Embed {
            texts,
            purpose,
            reply,
        })?;
        rx.blocking_recv()
            .map_err(|_| EngineError::ModelThreadGone)?
    }

    /// Embeds `texts` for a search, at once.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EngineError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::Embed {
            texts,
            purpose: EmbedFor::Answer,
            reply,
        })?;
        Ok(rx.await.map_err(|_| EngineError::ModelThreadGone)??.vectors)
    }

    /// The embedder's vector size and texts per call, loading it if needed.
    pub async fn embedder_shape(&self) -> Result<EmbedderShape, EngineError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::EmbedderShape { reply })?;
        rx.await.map_err(|_| EngineError::ModelThreadGone)?
    }

    /// The local generator, loading it if needed, as a `Generator` for one Self-RAG run under
    /// `numerics` (its KV cache and dummy prefix, in force for each of its generations, whatever
    /// other runs ask meanwhile), whose generations stop before the next block of their forward
    /// pass once `cancel` is set.
    pub(crate) async fn open_generator(
        &self,
        cancel: Arc<AtomicBool>,
        numerics: GeneratorNumerics,
    ) -> Result<ThreadGenerator, EngineError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::OpenGenerator { numerics, reply })?;
        let (facts, load_seconds) = rx.await.map_err(|_| EngineError::ModelThreadGone)??;
        Ok(ThreadGenerator {
            models: self.clone(),
            facts,
            cancel,
            load_seconds,
        })
    }

    /// Runs `work` on the thread and waits for it, blocking the calling thread.
    fn generate_blocking(
        &self,
        work: Work,
        numerics: GeneratorNumerics,
        cancel: &Arc<AtomicBool>,
    ) -> Result<TimedGeneration, BackendError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::Generate(GenerateJob {
            work,
            numerics,
            cancel: cancel.clone(),
            reply,
        }))?;
        rx.blocking_recv()
            .map_err(|_| EngineError::ModelThreadGone)?
    }

    #[cfg(test)]
    async fn generator_loaded(&self) -> bool {
        let (reply, rx) = oneshot::channel();
        self.send(Command::GeneratorLoaded { reply }).unwrap();
        rx.await.unwrap()
    }

    #[cfg(test)]
    async fn numerics_in_force(&self) -> (CachePrecision, selfrag_core::DummyPrefix) {
        let (reply, rx) = oneshot::channel();
        self.send(Command::NumericsInForce { reply }).unwrap();
        rx.await.unwrap().unwrap()
    }

    #[cfg(test)]
    async fn embedder_loaded(&self) -> bool {
        let (reply, rx) = oneshot::channel();
        self.send(Command::EmbedderLoaded { reply }).unwrap();
        rx.await.unwrap()
    }
}

/// The local generator as seen from a Self-RAG run on another thread: tokenizing and decoding
/// here, every forward pass on the model thread.
#[derive(Debug)]
pub(crate) struct ThreadGenerator {
    models: ModelThread,
    facts: Arc<GeneratorFacts>,
    cancel: Arc<AtomicBool>,
    /// How long opening it took on the model thread: its load, or 0 when it was loaded.
    load_seconds: f64,
}

impl ThreadGenerator {
    /// Seconds the model thread spent loading the generator for this run (0 when it was
    /// loaded), and the embedder where it loaded beside it; the wait for the thread is not in
    /// it.
    pub(crate) fn load_seconds(&self) -> f64 {
        self.load_seconds
    }
}

impl Generator for ThreadGenerator {
    fn tokenizer(&self) -> &dyn Tokenizer {
        &self.facts.tokenizer
    }

    fn context_length(&self) -> usize {
        self.facts.context_length
    }

    fn describe(&self) -> Option<GeneratorInfo> {
        self.facts.info.clone()
    }

    fn next_token_probs(
        &mut self,
        prompt: &[TokenId],
        watch_ids: &[TokenId],
    ) -> Result<Vec<f32>, BackendError> {
        let work = Work::Probe {
            prompt: prompt.to_vec(),
            watch_ids: watch_ids.to_vec(),
        };
        Ok(selfrag_models::probe_result(
            self.models
                .generate_blocking(work, self.facts.numerics, &self.cancel)?,
        ))
    }

    fn generate_batch(
        &mut self,
        prompts: &[Vec<TokenId>],
        request: &GenerateRequest,
    ) -> Result<Vec<Generation>, BackendError> {
        let work = Work::Batch {
            prompts: prompts.to_vec(),
            request: request.clone(),
        };
        Ok(self
            .models
            .generate_blocking(work, self.facts.numerics, &self.cancel)?
            .rows)
    }

    fn generate_batch_timed(
        &mut self,
        prompts: &[Vec<TokenId>],
        request: &GenerateRequest,
    ) -> Result<(Vec<Generation>, Option<BatchTiming>), BackendError> {
        let work = Work::Batch {
            prompts: prompts.to_vec(),
            request: request.clone(),
        };
        let timed = self
            .models
            .generate_blocking(work, self.facts.numerics, &self.cancel)?;
        let timing = timed.timing();
        Ok((timed.rows, Some(timing)))
    }
}

/// The value is replaced whole under the lock, so a poisoned lock still holds a good one.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_paths(dir: &std::path::Path) -> ModelPaths {
        let gguf = dir.join("tiny.gguf");
        selfrag_fixtures::write_tiny_llama_gguf(&gguf).unwrap();
        let bert = dir.join("bert");
        selfrag_fixtures::write_tiny_bert(&bert).unwrap();
        ModelPaths {
            generator: Some(gguf),
            embedder: Some(bert),
            device: DeviceChoice::Cpu,
            embedder_precision: EmbedderPrecision::default(),
            kernel_memory: None,
        }
    }

    #[tokio::test]
    async fn a_new_device_drops_the_models_and_the_next_request_reloads_them() {
        let tmp = tempfile::tempdir().unwrap();
        let thread = ModelThread::spawn(tiny_paths(tmp.path())).unwrap();
        assert_eq!(
            thread.device_in_use(),
            None,
            "nothing loads before it is needed"
        );
        let never = Arc::new(AtomicBool::new(false));
        thread
            .open_generator(never.clone(), GeneratorNumerics::default())
            .await
            .unwrap();
        assert_eq!(thread.device_in_use(), Some(DeviceKind::Cpu));

        // The same choice again keeps what is loaded.
        thread.set_device(DeviceChoice::Cpu).unwrap();
        assert!(thread.generator_loaded().await);

        thread.set_device(DeviceChoice::Auto).unwrap();
        // The change waits for the queue: the next command sees it applied.
        assert!(!thread.generator_loaded().await);
        assert_eq!(thread.device_in_use(), None);
        thread
            .open_generator(never, GeneratorNumerics::default())
            .await
            .unwrap();
        assert!(
            thread.device_in_use().is_some(),
            "reloaded on the new device"
        );
    }

    /// Opening the generator loads the embedder beside it, once: the run embeds its query next.
    #[tokio::test]
    async fn opening_the_generator_loads_the_embedder_beside_it() {
        let tmp = tempfile::tempdir().unwrap();
        let thread = ModelThread::spawn(tiny_paths(tmp.path())).unwrap();
        assert!(!thread.embedder_loaded().await);
        let never = Arc::new(AtomicBool::new(false));
        let generator = thread
            .open_generator(never, GeneratorNumerics::default())
            .await
            .unwrap();
        assert!(generator.load_seconds() > 0.0);
        assert!(thread.generator_loaded().await);
        assert!(thread.embedder_loaded().await, "loaded with the generator");
        let vectors = thread.embed(vec!["a query".into()]).await.unwrap();
        assert_eq!(vectors[0].len(), thread.embedder_shape().await.unwrap().dim);
    }

    /// An embedder that cannot load beside the generator does not fail the generator's open;
    /// the request that needs the embedder gets the error, naming the folder.
    #[tokio::test]
    async fn an_embedder_that_fails_beside_the_generator_fails_only_its_own_request() {
        let tmp = tempfile::tempdir().unwrap();
        let mut paths = tiny_paths(tmp.path());
        let empty = tmp.path().join("not-a-model");
        std::fs::create_dir(&empty).unwrap();
        paths.embedder = Some(empty.clone());
        let thread = ModelThread::spawn(paths).unwrap();
        let never = Arc::new(AtomicBool::new(false));
        thread
            .open_generator(never, GeneratorNumerics::default())
            .await
            .unwrap();
        assert!(thread.generator_loaded().await);
        assert!(!thread.embedder_loaded().await);
        match thread.embed(vec!["a query".into()]).await {
            Err(EngineError::ModelLoad { role, path, .. }) => {
                assert_eq!(role, ModelRole::Embedder);
                assert_eq!(path, empty);
            }
            other => panic!("expected the embedder's load error, got {other:?}"),
        }
    }

    /// A run's numerics reach the tokenizer it builds its prompts with and the loaded generator
    /// (in place, no reload) before each of its generations: under the reference code's dummy
    /// prefix a passage after `<paragraph>` starts with `▁`, and the cache is the one asked
    /// for. A run opened before keeps its own, and gets them back for its next generation.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_runs_numerics_reach_its_prompts_and_are_in_force_for_each_of_its_generations() {
        use selfrag_core::{CachePrecision, DummyPrefix};

        let tmp = tempfile::tempdir().unwrap();
        let thread = ModelThread::spawn(tiny_paths(tmp.path())).unwrap();
        let never = Arc::new(AtomicBool::new(false));
        // The run's tokenizer, as `Generator::tokenizer` gives it to the prompt builder.
        let starts_with_marker = |generator: &ThreadGenerator| {
            let first = generator
                .tokenizer()
                .tokenize_after_special("Boilers")
                .unwrap()[0];
            let piece = generator.facts.tokenizer.id_to_token(first);
            piece.unwrap_or_default().starts_with('\u{2581}')
        };
        let probe = |mut generator: ThreadGenerator| async move {
            tokio::task::spawn_blocking(move || {
                let bos = generator.tokenizer().bos_id();
                generator.next_token_probs(&[bos, 5], &[bos]).unwrap();
                generator
            })
            .await
            .unwrap()
        };
        let exact = GeneratorNumerics {
            cache_precision: Some(CachePrecision::F32),
            dummy_prefix: DummyPrefix::EveryFragment,
        };

        let before = thread
            .open_generator(never.clone(), GeneratorNumerics::default())
            .await
            .unwrap();
        assert!(!starts_with_marker(&before));
        let default_cache = before.describe().unwrap().cache_precision.unwrap();
        assert_eq!(
            before.describe().unwrap().dummy_prefix,
            Some(DummyPrefix::TextStart)
        );

        let after = thread.open_generator(never.clone(), exact).await.unwrap();
        assert_eq!(after.load_seconds(), 0.0, "changed in place, not reloaded");
        assert!(starts_with_marker(&after));
        let info = after.describe().unwrap();
        assert_eq!(info.cache_precision, Some(CachePrecision::F32));
        assert_eq!(info.dummy_prefix, Some(DummyPrefix::EveryFragment));
        // Opening changes nothing a generation in progress could see; the run's first one does.
        let in_force = thread.numerics_in_force().await;
        assert_eq!(in_force, (default_cache, DummyPrefix::TextStart));
        let _after = probe(after).await;
        let in_force = thread.numerics_in_force().await;
        assert_eq!(in_force, (CachePrecision::F32, DummyPrefix::EveryFragment));
        // The run opened before gets its own back for its next generation.
        let _before = probe(before).await;
        let in_force = thread.numerics_in_force().await;
        assert_eq!(in_force, (default_cache, DummyPrefix::TextStart));
    }

    /// A new precision reloads the embedder in it: int8 and f32 vectors differ (by rounding)
    /// where this CPU runs int8, and going back gives the first vectors again, bit for bit.
    #[tokio::test]
    async fn a_new_embedder_precision_reloads_the_embedder_in_it() {
        let tmp = tempfile::tempdir().unwrap();
        let thread = ModelThread::spawn(tiny_paths(tmp.path())).unwrap();
        let texts = || vec!["a passage about boilers and radiators".to_owned()];
        let int8 = thread.embed(texts()).await.unwrap();
        thread
            .set_embedder_precision(EmbedderPrecision::F32)
            .unwrap();
        let f32 = thread.embed(texts()).await.unwrap();
        thread
            .set_embedder_precision(EmbedderPrecision::Int8)
            .unwrap();
        assert_eq!(thread.embed(texts()).await.unwrap(), int8);
        if selfrag_models::int8_embedder_available() {
            assert_ne!(int8, f32, "the precision reached the loader");
        } else {
            assert_eq!(int8, f32, "without VNNI both are f32");
        }
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        let cosine =
            dot(&int8[0], &f32[0]) / (dot(&int8[0], &int8[0]) * dot(&f32[0], &f32[0])).sqrt();
        assert!(cosine > 0.995, "{cosine}");
    }

    /// The point of the thread's design: an indexing job's embedding asked for while a batch is
    /// being decoded is served between two of its forward passes, not after the batch.
    /// A model thread on `paths` that, after the first forward pass of a generation, is asked
    /// (from itself) to embed `texts` for an indexing job, answering `reply`; `on_pass` runs
    /// after every pass.
    fn thread_indexing_after_first_pass(
        paths: ModelPaths,
        texts: Vec<String>,
        reply: EmbedReply,
        mut on_pass: impl FnMut() + Send + 'static,
    ) -> ModelThread {
        let (sender, sent) = std::sync::mpsc::channel::<ModelThread>();
        let thread = ModelThread::spawn_with(paths, move || {
            let thread = sent.recv().unwrap();
            let mut job = Some((texts, reply));
            AFTER_STEP.with(|hook| {
                *hook.borrow_mut() = Some(Box::new(move || {
                    on_pass();
                    if let Some((texts, reply)) = job.take() {
                        thread
                            .send(Command::Embed {
                                texts,
                                purpose: EmbedFor::Indexing,
                                reply,
                            })
                            .unwrap();
                    }
                }));
            });
        })
        .unwrap();
        sender.send(thread.clone()).unwrap();
        thread
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_embedding_is_served_between_two_passes_of_a_running_batch() {
        let tmp = tempfile::tempdir().unwrap();
        let (embedded_tx, mut embedded) = oneshot::channel();
        let passes = Arc::new(Mutex::new(Vec::<&'static str>::new()));
        let log = passes.clone();
        let thread = thread_indexing_after_first_pass(
            tiny_paths(tmp.path()),
            vec!["a passage being indexed".into()],
            embedded_tx,
            move || lock(&log).push("pass"),
        );

        let never = Arc::new(AtomicBool::new(false));
        let mut generator = thread
            .open_generator(never, GeneratorNumerics::default())
            .await
            .unwrap();
        let prompt = {
            let mut p = vec![generator.tokenizer().bos_id()];
            p.extend(
                generator
                    .tokenizer()
                    .tokenize("It was made in the year")
                    .unwrap(),
            );
            p
        };
        let watch = lock(&passes).len();
        let rows = tokio::task::spawn_blocking(move || {
            generator.generate_batch(
                &[prompt.clone(), prompt],
                &GenerateRequest {
                    max_new_tokens: 6,
                    stop_ids: vec![],
                    markup_ids: Vec::new(),
                    watch_ids: vec![],
                },
            )
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(rows.len(), 2);
        let passes = lock(&passes).len() - watch;
        assert!(passes >= 3, "{passes} passes");
        // Sent after the first pass, answered before the batch's reply: served between passes.
        let vectors = embedded
            .try_recv()
            .expect("embedded before the batch ended");
        assert_eq!(vectors.unwrap().vectors.len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_indexing_batch_embedded_in_pieces_beside_a_generation_equals_one_call() {
        let tmp = tempfile::tempdir().unwrap();
        let texts: Vec<String> = ["a passage", "another, longer passage of the job", "a third"]
            .map(String::from)
            .into();
        let (embedded_tx, embedded) = oneshot::channel();
        let thread = thread_indexing_after_first_pass(
            tiny_paths(tmp.path()),
            texts.clone(),
            embedded_tx,
            || {},
        );
        let never = Arc::new(AtomicBool::new(false));
        let mut generator = thread
            .open_generator(never, GeneratorNumerics::default())
            .await
            .unwrap();
        let prompt = vec![generator.tokenizer().bos_id(), 5, 6];
        tokio::task::spawn_blocking(move || {
            generator.generate_batch(
                &[prompt],
                &GenerateRequest {
                    max_new_tokens: 8,
                    stop_ids: vec![],
                    markup_ids: Vec::new(),
                    watch_ids: vec![],
                },
            )
        })
        .await
        .unwrap()
        .unwrap();
        // The first piece is one text (none was timed yet) and the rest come in the next: the
        // batch is embedded in at least two pieces, whether they ran between the generation's
        // passes or after it (that depends on the machine's timing), and its one reply holds
        // every vector in order.
        let pieces = embedded.await.unwrap().unwrap();
        let whole = thread.embed(texts).await.unwrap();
        assert_eq!(pieces.vectors, whole);
    }

    /// A batch of `texts` for [`Background`], and the receiver of its reply.
    fn waiting(
        texts: &[&str],
    ) -> (
        BackgroundBatch,
        oneshot::Receiver<Result<Embedded, EngineError>>,
    ) {
        let (reply, replied) = oneshot::channel();
        let batch = BackgroundBatch {
            texts: texts.iter().map(|t| (*t).to_owned()).collect(),
            embedded: None,
            reply,
        };
        (batch, replied)
    }

    /// What an embedder called `model` gives `texts`: each text's length as its vector.
    fn lengths_by(model: &str, texts: &[String]) -> Result<Embedded, EngineError> {
        Ok(Embedded {
            vectors: texts.iter().map(|t| vec![t.len() as f32]).collect(),
            by: EmbedderInfo {
                model: model.to_owned(),
                precision: EmbedderPrecision::default(),
                device: DeviceKind::Cpu,
                server: None,
            },
        })
    }

    #[test]
    fn a_piece_holds_what_the_last_pieces_time_per_text_says_fits() {
        assert_eq!(piece_len(None, 32), 1, "one text before any was timed");
        assert_eq!(piece_len(Some(0.1), 32), 5);
        assert_eq!(piece_len(Some(0.1), 3), 3, "never more than remain");
        assert_eq!(piece_len(Some(2.0), 32), 1, "at least one, however slow");
        assert_eq!(piece_len(Some(0.0), 32), 32);
        assert_eq!(piece_len(Some(f64::NAN), 32), 1);
        assert_eq!(piece_len(Some(0.1), 0), 0);
    }

    #[test]
    fn pieces_reply_once_with_every_vector_in_order_and_an_empty_batch_replies_at_once() {
        let mut background = Background::default();
        let (batch, mut replied) = waiting(&["a", "bb", "ccc", "dddd"]);
        let (empty, mut empty_replied) = waiting(&[]);
        background.waiting.extend([batch, empty]);
        let mut pieces = Vec::new();
        for _ in 0..3 {
            background.seconds_per_text = background.seconds_per_text.map(|_| 0.25);
            background.run_piece(|texts| {
                pieces.push(texts.len());
                lengths_by("m", texts)
            });
        }
        assert_eq!(
            pieces,
            [1, 2, 1],
            "1 untimed, then 2 a piece at 0.25 s a text"
        );
        let reply = replied.try_recv().unwrap().unwrap();
        assert_eq!(reply.vectors, [[1.0], [2.0], [3.0], [4.0]]);
        assert_eq!(reply.by.model, "m");
        assert!(empty_replied.try_recv().is_err(), "not yet run");
        background.run_piece(|texts| lengths_by("m", texts));
        assert!(
            empty_replied
                .try_recv()
                .unwrap()
                .unwrap()
                .vectors
                .is_empty()
        );
        assert!(background.waiting.is_empty());
    }

    #[test]
    fn a_batch_begins_again_when_the_embedder_changes_between_its_pieces() {
        let mut background = Background::default();
        let (batch, mut replied) = waiting(&["a", "bb", "ccc"]);
        background.waiting.push_back(batch);
        background.run_piece(|texts| lengths_by("before", texts));
        background.seconds_per_text = Some(0.0);
        background.run_piece(|texts| lengths_by("after", texts));
        assert!(replied.try_recv().is_err(), "the mixed batch is not sent");
        background.run_piece(|texts| lengths_by("after", texts));
        let reply = replied.try_recv().unwrap().unwrap();
        assert_eq!(reply.by.model, "after");
        assert_eq!(reply.vectors, [[1.0], [2.0], [3.0]]);
    }

    #[test]
    fn a_failed_or_miscounted_piece_fails_only_its_batch_and_a_dropped_one_is_skipped() {
        let mut background = Background::default();
        let (failing, mut failed) = waiting(&["a", "bb"]);
        let (miscounted, mut wrong) = waiting(&["a"]);
        let (abandoned, dropped) = waiting(&["never embedded"]);
        let (last, mut done) = waiting(&["e"]);
        drop(dropped);
        background
            .waiting
            .extend([failing, miscounted, abandoned, last]);
        background.run_piece(|_| Err(EngineError::ModelThreadGone));
        assert!(failed.try_recv().unwrap().is_err());
        background.run_piece(|texts| {
            let mut more = lengths_by("m", texts)?;
            more.vectors.push(vec![0.0]);
            Ok(more)
        });
        let error = wrong.try_recv().unwrap().err().unwrap().to_string();
        assert!(error.contains("2 vectors for 1 texts"), "{error}");
        let mut seen = Vec::new();
        background.run_piece(|texts| {
            seen.extend_from_slice(texts);
            lengths_by("m", texts)
        });
        assert_eq!(seen, ["e"], "the abandoned batch was skipped");
        assert_eq!(done.try_recv().unwrap().unwrap().vectors, [[1.0]]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_batch_stops_and_the_thread_goes_on() {
        let tmp = tempfile::tempdir().unwrap();
        let thread = ModelThread::spawn(tiny_paths(tmp.path())).unwrap();
        let cancel = Arc::new(AtomicBool::new(true));
        let mut generator = thread
            .open_generator(cancel.clone(), GeneratorNumerics::default())
            .await
            .unwrap();
        let prompt = vec![generator.tokenizer().bos_id(), 5, 6];
        let request = GenerateRequest {
            max_new_tokens: 4,
            stop_ids: vec![],
            markup_ids: Vec::new(),
            watch_ids: vec![],
        };
        let (generator, result) = tokio::task::spawn_blocking(move || {
            let result = generator.generate_batch(&[prompt], &request);
            (generator, result)
        })
        .await
        .unwrap();
        assert_eq!(result.unwrap_err().to_string(), "cancelled");
        cancel.store(false, Ordering::Relaxed);
        let mut generator = generator;
        let probs = tokio::task::spawn_blocking(move || {
            let eos = generator.tokenizer().eos_id();
            generator.next_token_probs(&[generator.tokenizer().bos_id(), 5], &[eos])
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(probs.len(), 1);
        assert_eq!(thread.embed_blocking_in_test().len(), 1);
    }

    impl ModelThread {
        fn embed_blocking_in_test(&self) -> Vec<Vec<f32>> {
            let thread = self.clone();
            std::thread::spawn(move || {
                thread
                    .embed_blocking(vec!["x".into()], EmbedFor::Indexing)
                    .unwrap()
                    .vectors
            })
            .join()
            .unwrap()
        }
    }
}
