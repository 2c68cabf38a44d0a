//! [`Engine`]: the application API. Async methods; compute runs on the model thread, or on the
//! generator server. A Self-RAG run itself runs on a blocking thread of its own, whichever
//! generator answers (see [`Engine::ask`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use selfrag_core::{
    Answer, ClosedSetQuestion, CritiqueWeights, DeviceChoice, EmbedderPrecision, Generator,
    Passage, Progress, Question, Retriever, Settings,
};
use selfrag_index::{Extractor, IndexError, Library, PassageEmbedder};
use tokio::sync::OnceCell;

use crate::config::GeneratorNumerics;
use crate::history::History;
use crate::history::SavedAnswer;
use crate::model_thread::{ModelPaths, ModelThread};
use crate::retriever::{GivenPassages, LibraryRetriever};
use crate::status::{AppStatus, DeviceStatus, DocumentInfo, ModelRole, ModelStatus};
use crate::{AnswerRecord, EngineConfig, EngineError, ExportOptions, HistoryEntry};

/// The application: models, library, history.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    pub(crate) models: ModelThread,
    /// The embedder in use: the model thread's, or an embeddings server (see `embedding.rs`).
    pub(crate) embeddings: crate::embedding::Embeddings,
    /// Replaced when the models are looked for again (see `downloads.rs`).
    pub(crate) model_status: std::sync::RwLock<Vec<ModelStatus>>,
    pub(crate) embedder_path: std::sync::RwLock<Option<PathBuf>>,
    library: OnceCell<Arc<Library>>,
    history: History,
    /// The device choice in force (`config.device` until [`Engine::set_device`]).
    device: std::sync::Mutex<DeviceChoice>,
    /// The embedder's precision in force (`config.embedder_precision` until
    /// [`Engine::set_embedder_precision`]).
    embedder_precision: std::sync::Mutex<EmbedderPrecision>,
    /// The generator's KV cache and dummy prefix in force (`config.generator_numerics` until
    /// [`Engine::set_generator_numerics`]).
    generator_numerics: std::sync::Mutex<GeneratorNumerics>,
    /// The generator server in use, if any (see `generator_server.rs`).
    pub(crate) server: std::sync::Mutex<crate::generator_server::ServerSlot>,
    /// What runs now and how to stop it; the indexing lock; the watcher's restart signal.
    pub(crate) jobs: crate::jobs::Jobs,
    /// Whether indexing jobs look works up by their DOI or arXiv id, and where (see
    /// `lookup.rs`).
    pub(crate) lookup: crate::lookup::LookupState,
}

impl Engine {
    /// Starts the engine. Missing models are not an error here: [`Engine::status`] reports them
    /// and the calls that need them fail with a message that says what to do.
    pub fn new(config: EngineConfig) -> Result<Self, EngineError> {
        let generator = selfrag_hub::store::resolve_generator(config.generator.as_deref());
        let embedder = selfrag_hub::store::resolve_embedder(config.embedder.as_deref());
        let model_status = vec![
            model_status(ModelRole::Generator, &generator),
            embedder_status(&config, &embedder),
        ];
        let models = ModelThread::spawn(ModelPaths {
            generator: generator.found.clone(),
            // With an embeddings server the local embedder is never loaded.
            embedder: embedder
                .found
                .clone()
                .filter(|_| config.embedder_server.is_none()),
            device: config.device,
            embedder_precision: config.embedder_precision,
            kernel_memory: Some(selfrag_models::KernelMemory::in_data_folder(
                &config.data_dir,
            )),
        })?;
        let embeddings =
            crate::embedding::Embeddings::new(models.clone(), config.embedder_server.clone());
        Ok(Self {
            history: History::new(config.history_dir()),
            device: std::sync::Mutex::new(config.device),
            embedder_precision: std::sync::Mutex::new(config.embedder_precision),
            generator_numerics: std::sync::Mutex::new(config.generator_numerics),
            server: std::sync::Mutex::new(crate::generator_server::ServerSlot::new(
                config.generator_server.clone(),
            )),
            config,
            models,
            embeddings,
            model_status: std::sync::RwLock::new(model_status),
            embedder_path: std::sync::RwLock::new(embedder.found),
            library: OnceCell::new(),
            jobs: crate::jobs::Jobs::default(),
            lookup: crate::lookup::LookupState::default(),
        })
    }

    /// The configuration the engine started with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Models found or missing, and the library's size.
    pub async fn status(&self) -> AppStatus {
        let library = match self.library().await {
            Ok(lib) => lib.stats().await.unwrap_or_default(),
            Err(_) => selfrag_index::LibraryStats::default(),
        };
        AppStatus {
            data_dir: self.config.data_dir.display().to_string(),
            models: self
                .model_status
                .read()
                .map(|m| m.clone())
                .unwrap_or_default(),
            library,
            device: self.device_status(),
        }
    }

    /// The device chosen, the one in use, and the ones this build offers.
    pub fn device_status(&self) -> DeviceStatus {
        let numerics = self.generator_numerics();
        DeviceStatus {
            chosen: *self.device_lock(),
            in_use: self.models.device_in_use(),
            available: selfrag_models::compiled_devices(),
            fixed_by_env: crate::settings::device_fixed_by_env(),
            embedder_precision: *self
                .embedder_precision
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            int8_available: selfrag_models::int8_embedder_available(),
            precision_fixed_by_env: crate::settings::embedder_precision_fixed_by_env(),
            cache_precision: numerics.cache_precision,
            cache_precision_fixed_by_env: crate::settings::cache_precision_fixed_by_env(),
            dummy_prefix: numerics.dummy_prefix,
            dummy_prefix_fixed_by_env: crate::settings::dummy_prefix_fixed_by_env(),
        }
    }

    /// The generator's KV cache and dummy prefix in force.
    pub fn generator_numerics(&self) -> GeneratorNumerics {
        *self
            .generator_numerics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps the local generator's KV cache and places the prompts' dummy prefix as `numerics`
    /// says from the next answer on; an answer being written keeps those it began with. A
    /// loaded generator is changed in place, not reloaded; a server's answers take the dummy
    /// prefix and keep their own cache. Every answer's trace records both.
    pub fn set_generator_numerics(&self, numerics: GeneratorNumerics) {
        *self
            .generator_numerics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = numerics;
    }

    /// Embeds in `precision` from the next embedding on; a loaded embedder is dropped and
    /// loads again in it. The library is not re-embedded: on the models measured, vectors of
    /// the two precisions are within cosine 0.998 of each other.
    pub fn set_embedder_precision(&self, precision: EmbedderPrecision) -> Result<(), EngineError> {
        let mut current = self
            .embedder_precision
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *current != precision {
            self.models.set_embedder_precision(precision)?;
            *current = precision;
        }
        Ok(())
    }

    /// Runs the models on `device` from the next request on; the loaded models are dropped
    /// once the running request, if any, is done.
    pub fn set_device(&self, device: DeviceChoice) -> Result<(), EngineError> {
        let mut current = self.device_lock();
        if *current != device {
            self.models.set_device(device)?;
            *current = device;
        }
        Ok(())
    }

    fn device_lock(&self) -> std::sync::MutexGuard<'_, DeviceChoice> {
        self.device.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The library, where it was opened already.
    pub(crate) fn library_if_open(&self) -> Option<Arc<Library>> {
        self.library.get().cloned()
    }

    /// The library, opened on first use (it needs the embedder to know the vector size).
    pub(crate) async fn library(&self) -> Result<Arc<Library>, EngineError> {
        self.library
            .get_or_try_init(|| async {
                let embedder = self.passage_embedder().await?;
                let extractor = match &self.config.extract_worker {
                    Some(exe) => Extractor::worker(exe),
                    None => Extractor::in_process(),
                };
                let lib = Library::open_at(
                    &self.config.library_location(),
                    &self.config.library_state_dir(),
                    &embedder,
                )
                .await?
                .with_extractor(extractor)
                .with_shared_sources(self.config.shared_source_limit);
                Ok::<_, EngineError>(Arc::new(lib))
            })
            .await
            .cloned()
    }

    pub(crate) async fn passage_embedder(&self) -> Result<EngineEmbedder, EngineError> {
        let (id, dim, texts_per_call) = match self.embeddings.server_identity().await {
            Some(identity) => {
                let (id, dim) = identity?;
                (id, dim, selfrag_index::DEFAULT_TEXTS_PER_CALL)
            }
            None => {
                let shape = self.embeddings.local_shape().await?;
                let id = embedder_identity(
                    self.embedder_path
                        .read()
                        .ok()
                        .and_then(|p| p.clone())
                        .as_deref(),
                );
                (id, shape.dim, shape.texts_per_call)
            }
        };
        Ok(EngineEmbedder {
            embeddings: self.embeddings.clone(),
            id,
            dim,
            texts_per_call,
        })
    }

    /// The documents in the library; empty while there is no embedder to open it with.
    pub async fn documents(&self) -> Result<Vec<DocumentInfo>, EngineError> {
        let library = match self.library().await {
            Ok(library) => library,
            Err(EngineError::ModelMissing { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut docs: Vec<DocumentInfo> = library
            .documents()
            .into_iter()
            .map(|d| DocumentInfo {
                work: d.work(),
                work_sources: d.works.as_ref().map(|w| w.sources()).unwrap_or_default(),
                id: d.id,
                path: d.path,
                title: d.title,
                pages: d.pages,
                passages: d.passages,
                passages_expected: d.passages_expected,
            })
            .collect();
        docs.sort_by_key(|d| d.title.to_lowercase());
        Ok(docs)
    }

    /// Answers `question` with Self-RAG, streaming progress. [`Engine::cancel`] with
    /// [`crate::JobKind::Answer`] stops it between steps and a generation before the next
    /// block of its forward pass (or, on a server, at its next token).
    pub async fn ask(
        &self,
        question: String,
        settings: Settings,
        on_progress: impl Fn(Progress) + Send + 'static,
    ) -> Result<AnswerRecord, EngineError> {
        let answer = self
            .answer_question(Question::Open(question), None, settings, on_progress)
            .await?;
        Ok(self.keep(SavedAnswer::new(new_answer_id(), answer)))
    }

    /// Answers a question with answer options as [`Engine::ask`] answers any question, each
    /// option scored from the candidates into the trace's `closed_set` (selfrag-core's
    /// `closed_set`: the paper's appendix B.2). Long form is refused.
    pub async fn ask_closed_set(
        &self,
        question: ClosedSetQuestion,
        settings: Settings,
        on_progress: impl Fn(Progress) + Send + 'static,
    ) -> Result<AnswerRecord, EngineError> {
        let answer = self
            .answer_question(Question::ClosedSet(question), None, settings, on_progress)
            .await?;
        Ok(self.keep(SavedAnswer::new(new_answer_id(), answer)))
    }

    /// Answers `question` with the generator [`Engine::ask`] uses, over `passages` instead of
    /// the library (the top K in the order given, whatever the query), and saves nothing: for
    /// evaluation data that comes with its retrieved passages (`selfrag eval`).
    pub async fn answer_over_passages(
        &self,
        question: Question,
        passages: Vec<Passage>,
        settings: Settings,
    ) -> Result<Answer, EngineError> {
        self.answer_question(question, Some(passages), settings, |_| {})
            .await
    }

    /// One Self-RAG run on this computer's generator or the server, over the library or over
    /// `given` passages.
    async fn answer_question(
        &self,
        question: Question,
        given: Option<Vec<Passage>>,
        settings: Settings,
        on_progress: impl Fn(Progress) + Send + 'static,
    ) -> Result<Answer, EngineError> {
        let job = self.jobs.start(crate::JobKind::Answer);
        let cancel = job.flag().clone();
        // The local generator opens first: where the library is not open yet, the embedder it
        // opens with loads beside the generator (`ModelThread`), not after it.
        let local = match self.server_config() {
            Some(_) => None,
            None => Some(
                self.models
                    .open_generator(cancel.clone(), self.generator_numerics())
                    .await?,
            ),
        };
        // Without an embedder the library cannot open; Self-RAG can still answer without it.
        let library = match given {
            Some(_) => None,
            None => self.library().await.ok(),
        };
        let run = SelfRagRun {
            question,
            settings,
            on_progress: Box::new(on_progress),
            cancel: cancel.clone(),
            library,
            given,
        };
        let answer = if let Some(generator) = local {
            let load_seconds = generator.load_seconds();
            let mut answer = self.run_self_rag(generator, run).await?.1?;
            if let Some(timings) = answer.timings.as_mut() {
                timings.load_seconds = load_seconds;
                *timings = timings.to_microseconds();
            }
            answer
        } else {
            self.ask_server(run).await?
        };
        Ok(answer)
    }

    /// Runs `run` with `generator` on a blocking thread of its own: the local generator's
    /// forward passes go to the model thread one at a time, a server's requests to the server,
    /// and every query is embedded by the model thread between them. Returns the generator
    /// (a server connection is kept for the next question) and the answer.
    pub(crate) async fn run_self_rag<G: Generator + Send + 'static>(
        &self,
        mut generator: G,
        run: SelfRagRun,
    ) -> Result<(G, Result<Answer, EngineError>), EngineError> {
        let mut retriever: Box<dyn Retriever + Send> = match run.given {
            Some(passages) => Box::new(GivenPassages(passages)),
            None => Box::new(LibraryRetriever {
                embeddings: self.embeddings.clone(),
                library: run.library,
                runtime: tokio::runtime::Handle::current(),
                embedded_with: None,
            }),
        };
        tokio::task::spawn_blocking(move || {
            let mut on_progress = run.on_progress;
            let answer = run.question.answer(
                &run.settings,
                &mut generator,
                &mut *retriever,
                &mut on_progress,
                run.cancel.as_ref(),
            );
            (generator, answer.map_err(EngineError::from))
        })
        .await
        .map_err(|_| EngineError::ModelThreadGone)
    }

    /// Views answer `id` with new weights: re-chooses among its stored candidates (in long
    /// form, replays the beam search over its stored tree); no model call. The answer as
    /// generated is kept: its own weights show it again, byte for byte.
    pub fn rerank(
        &self,
        id: &str,
        weights: CritiqueWeights,
        hard_constraints: bool,
    ) -> Result<AnswerRecord, EngineError> {
        weights.validate()?;
        let mut stored = self.history.get(id)?;
        stored.view_with(weights, hard_constraints);
        Ok(self.keep(stored))
    }

    /// Adds an answer written elsewhere (a trace saved by `selfrag ask --json`) to the
    /// history as a new entry, as generated.
    pub fn import_answer(&self, answer: Answer) -> AnswerRecord {
        self.keep(SavedAnswer::new(new_answer_id(), answer))
    }

    /// Saves `record` to the history; where that fails (a full disk, a folder that is not
    /// writable) the answer is still returned and kept for this session, with why it was not
    /// saved: minutes of generation are never lost to a write error.
    fn keep(&self, mut record: SavedAnswer) -> AnswerRecord {
        record.not_saved = None;
        if let Err(e) = self.history.put(record.clone()) {
            tracing::warn!(id = %record.id, error = %e, "answer not saved");
            record.not_saved = Some(format!(
                "{e}. The answer stays open until the app closes: export it to keep it"
            ));
            self.history.keep_unsaved(record.clone());
        }
        record.shown()
    }

    /// The stored answer `id`, under the weights it was last viewed with.
    pub fn answer(&self, id: &str) -> Result<AnswerRecord, EngineError> {
        Ok(self.history.get(id)?.shown())
    }

    /// Writes answer `id` to `path` as `options` say (a format alone is the whole answer
    /// without labels), atomically.
    pub fn export(
        &self,
        id: &str,
        options: impl Into<ExportOptions>,
        path: &Path,
    ) -> Result<(), EngineError> {
        crate::write_atomically(path, self.render(id, options)?.as_bytes())
    }

    /// Answer `id` rendered as `options` say (for the clipboard).
    pub fn render(
        &self,
        id: &str,
        options: impl Into<ExportOptions>,
    ) -> Result<String, EngineError> {
        let mut answer = self.history.get(id)?.shown().answer;
        if let Some(library) = self.library.get() {
            with_current_works(&mut answer, library);
        }
        Ok(crate::render_with(&answer, &options.into()))
    }

    /// Gives each passage of `answer` (a trace read from a file) the work its document holds
    /// now, as [`Engine::render`] does for saved answers. Where there is no library here, or it
    /// cannot open (no embedder), the answer keeps what its trace recorded.
    pub async fn cite_current_works(&self, answer: &mut Answer) {
        if let selfrag_index::LibraryLocation::Folder(dir) = self.config.library_location()
            && !dir.exists()
        {
            return;
        }
        if let Ok(library) = self.library().await {
            with_current_works(answer, &library);
        }
    }

    /// The saved answers matching `query` (every word, in the question or the answer), newest
    /// first.
    pub fn history(&self, query: &str) -> Result<Vec<HistoryEntry>, EngineError> {
        self.history.list(query)
    }

    /// Deletes saved answer `id`.
    pub fn delete_answer(&self, id: &str) -> Result<(), EngineError> {
        self.history.delete(id)
    }
}

/// Embeds passages for the indexer, on the model thread or the embeddings server.
pub(crate) struct EngineEmbedder {
    embeddings: crate::embedding::Embeddings,
    id: String,
    dim: usize,
    /// The local embedder's pass on its device; the library's default for a server.
    texts_per_call: usize,
}

impl PassageEmbedder for EngineEmbedder {
    fn model_id(&self) -> String {
        self.id.clone()
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn texts_per_call(&self) -> usize {
        self.texts_per_call
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        self.embeddings
            .embed_blocking(texts, crate::model_thread::EmbedFor::Indexing)
            .map(|embedded| embedded.vectors)
            .map_err(|e| IndexError::Embedder(e.to_string()))
    }
}

/// One question and how to run it, for [`Engine::run_self_rag`].
pub(crate) struct SelfRagRun {
    pub question: Question,
    pub settings: Settings,
    pub on_progress: Box<dyn FnMut(Progress) + Send>,
    pub cancel: Arc<std::sync::atomic::AtomicBool>,
    pub library: Option<Arc<Library>>,
    /// Passages to answer over instead of the library's.
    pub given: Option<Vec<Passage>>,
}

pub(crate) fn model_status(
    role: ModelRole,
    location: &selfrag_hub::store::Resolved,
) -> ModelStatus {
    ModelStatus {
        role,
        name: location.name.clone(),
        found: location.found.is_some(),
        path: location.found.as_ref().map(|p| p.display().to_string()),
        searched: location
            .searched
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        fix: location.fix.clone(),
        download: crate::downloads::offer(location),
    }
}

/// The embedder's status: the embeddings server's where one is set, else the local model's.
pub(crate) fn embedder_status(
    config: &EngineConfig,
    local: &selfrag_hub::store::Resolved,
) -> ModelStatus {
    match &config.embedder_server {
        Some(server) => ModelStatus::on_server(ModelRole::Embedder, &server.url),
        None => model_status(ModelRole::Embedder, local),
    }
}

/// A stable name for the embedder: the HF repo and revision for a cache snapshot
/// (`models--org--name/snapshots/REV`), else the folder's path.
pub(crate) fn embedder_identity(path: Option<&Path>) -> String {
    let Some(path) = path else {
        return "none".into();
    };
    let parts: Vec<String> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.iter().rposition(|p| p == "snapshots") {
        Some(i) if i >= 1 && i + 1 < parts.len() => {
            let repo = parts[i - 1]
                .trim_start_matches("models--")
                .replace("--", "/");
            format!("{repo}@{}", parts[i + 1])
        }
        _ => path.display().to_string(),
    }
}

fn new_answer_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    format!("{millis:x}-{:x}", COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Cites each passage of `answer` with the work its document holds now (an edit, a Zotero sync
/// since the answer was written), found by path or by content id; a document removed since
/// keeps what the trace recorded.
fn with_current_works(answer: &mut Answer, library: &Library) {
    for passage in &mut answer.passages {
        let document_id = passage.id.rsplit_once(':').map_or("", |(doc, _)| doc);
        if let Some(work) = library.work_of(&passage.path, document_id) {
            passage.work = Some(work);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedder_identity_names_the_hf_repo_and_revision() {
        let p = Path::new("/c/hub/models--facebook--contriever-msmarco/snapshots/abc123");
        assert_eq!(
            embedder_identity(Some(p)),
            "facebook/contriever-msmarco@abc123"
        );
        assert_eq!(embedder_identity(Some(Path::new("/m/bert"))), "/m/bert");
    }
}
