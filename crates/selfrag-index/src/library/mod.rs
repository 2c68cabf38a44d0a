//! The embedded LanceDB library: a `documents` table (one row per file path) and a `passages`
//! table (one row per passage, stored once per distinct content) under one directory, written
//! so that a crash at any moment leaves every document as its row describes it.
//!
//! A document's passages are added first and its `documents` row after them: the row is the
//! commit marker, and says how many of the document's passages are stored (a long document is
//! written in slices, see `ingest`). Passages no row counts (an interrupted run's, content
//! replaced by an edit, a slice whose row was not written) are never returned by a search;
//! those no row refers to at all are removed when the library opens, and those past a partly
//! written document's count before it goes on. `library.json` ([`meta`]) names the current
//! tables, so migrations and re-embeddings swap whole tables atomically.

mod durable;
mod fingerprint;
pub use fingerprint::{
    Agreement as FingerprintAgreement, PROBES as FINGERPRINT_SENTENCES, SAME_MODEL_COSINE,
    SAME_MODEL_LENGTH_RATIO, agreement as fingerprint_agreement,
};
mod ingest;
pub(crate) mod location;
mod maintain;
pub(crate) mod meta;
mod schema;
mod search;
mod source;
mod stored_sources;
mod works;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use arrow_array::{RecordBatch, RecordBatchIterator, UInt32Array};
use futures::TryStreamExt;
use lancedb::query::{ExecutableQuery, QueryBase, Select};

pub use ingest::{IndexOutcome, PartlySearchable};
pub(crate) use ingest::{ParsedAhead, Prepared, SmallFile};
use location::SharedStore;
pub use location::{
    LibraryLocation, StoreCheck, StoreUri, check_location, check_store, machine_state_dir,
};
use meta::{LibraryMeta, SCHEMA_VERSION};
pub use schema::{DocumentRecord, embedding_input};
use schema::{column, documents_schema, passages_schema, sql_string, string_column, vector_dim};
pub(crate) use search::reciprocal_rank_fusion;
pub use search::{SearchDepth, SearchFilter, SearchHit, SearchMode, SearchRequest, VectorScan};
pub use source::{PassageSource, SourceView};
pub use stored_sources::DEFAULT_SHARED_SOURCE_LIMIT;

use crate::{Extractor, IndexError, PassageEmbedder};

/// The most LanceDB keeps of search indexes in memory: the 8-bit codes of a million 768-d
/// passages (about 0.8 GB), their HNSW graph (about 0.2 GB at 20 edges a passage; not
/// measured) and the full-text index still fit.
const INDEX_CACHE_BYTES: usize = 2 << 30;
/// The most LanceDB keeps of manifests, fragment and file metadata in memory.
const METADATA_CACHE_BYTES: usize = 256 << 20;

/// The library's size: the start screen's counts, the library pane's line and `selfrag
/// library stats` (one type from the store to the UI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct LibraryStats {
    pub documents: usize,
    pub passages: usize,
    /// Distinct contents (several paths may hold the same file).
    pub contents: usize,
    #[cfg_attr(feature = "typescript", ts(type = "number"))]
    pub pages: u64,
    /// Bytes the library's folder takes on disk.
    #[cfg_attr(feature = "typescript", ts(type = "number"))]
    pub disk_bytes: u64,
    /// Whether the passages have an approximate-nearest-neighbour index (made past a size
    /// threshold) and a full-text index.
    pub vector_index: bool,
    pub text_index: bool,
}

/// The committed documents, kept in memory: the `documents` table is small (one row per file)
/// and every search filters its hits through it.
#[derive(Debug, Default)]
struct Committed {
    by_path: BTreeMap<String, DocumentRecord>,
}

impl Committed {
    fn referenced(&self, doc_id: &str) -> bool {
        self.by_path.values().any(|d| d.id == doc_id)
    }

    fn by_id(&self) -> HashMap<&str, &DocumentRecord> {
        let mut map = HashMap::new();
        for d in self.by_path.values() {
            map.entry(d.id.as_str()).or_insert(d);
        }
        map
    }
}

/// Where the file being indexed is: what the job's log and the engine's slow-step notice name
/// when a file takes long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexStage {
    Idle,
    WaitingForWriter,
    Reading,
    Parsing,
    Embedding,
    Writing,
    Syncing,
    /// Between files or at the job's end: the library's tables compacted and indexed.
    Compacting,
}

impl IndexStage {
    /// Every stage, in the order of a file's steps.
    pub const ALL: [IndexStage; 8] = [
        IndexStage::Idle,
        IndexStage::WaitingForWriter,
        IndexStage::Reading,
        IndexStage::Parsing,
        IndexStage::Embedding,
        IndexStage::Writing,
        IndexStage::Syncing,
        IndexStage::Compacting,
    ];

    fn position(self) -> usize {
        Self::ALL.iter().position(|s| *s == self).unwrap_or(0)
    }

    /// The step in words, as a person reads it after "still …".
    pub fn describe(self) -> &'static str {
        match self {
            IndexStage::Idle => "between steps",
            IndexStage::WaitingForWriter => "waiting for the library's writer",
            IndexStage::Reading => "reading the file",
            IndexStage::Parsing => "parsing in the worker process",
            IndexStage::Embedding => "embedding its passages",
            IndexStage::Writing => "writing to LanceDB",
            IndexStage::Syncing => "syncing to disk",
            IndexStage::Compacting => "compacting and indexing the library's tables",
        }
    }
}

/// The step the library's writer is at, on which file, and when the step began: set by every
/// step of indexing, read by the job's slow-file log and by whoever watches a job for a step
/// that makes no progress ([`Library::current_step`]). Read from other tasks and threads while
/// the job's own thread is busy embedding. One writer works at a time (the job, or a watched
/// folder's batch beside it), and only the writer moves the clock: a caller waiting for the
/// writer leaves the writer's step on it, so a wait that lasts shows what the writer does.
/// It also sums the time spent in each stage ([`StepClock::spent`]): where a job's time goes.
#[derive(Debug)]
pub(crate) struct StepClock(std::sync::Mutex<(CurrentStep, [std::time::Duration; 8])>);

/// What [`Library::current_step`] says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentStep {
    pub stage: IndexStage,
    /// When this step began; the next step, even of the same kind, begins later.
    pub began: std::time::Instant,
    /// The file the step is about; none for the library's own work (compacting).
    pub file: Option<String>,
}

impl StepClock {
    fn new() -> Self {
        Self(std::sync::Mutex::new((
            CurrentStep {
                stage: IndexStage::Idle,
                began: std::time::Instant::now(),
                file: None,
            },
            [std::time::Duration::ZERO; 8],
        )))
    }

    /// Moves the clock to `next`, adding the time of the step that ends to its stage's sum.
    fn step(&self, next: impl FnOnce(&CurrentStep) -> Option<CurrentStep>) {
        if let Ok(mut clock) = self.0.lock() {
            let (step, spent) = &mut *clock;
            if let Some(next) = next(step) {
                spent[step.stage.position()] += next.began.saturating_duration_since(step.began);
                *step = next;
            }
        }
    }

    /// Enters `stage` of the same file, even the same stage again (a long file's next slice is
    /// progress too).
    pub(crate) fn enter(&self, stage: IndexStage) {
        self.step(|step| {
            let keeps_file = stage != IndexStage::Idle && stage != IndexStage::Compacting;
            Some(CurrentStep {
                stage,
                began: std::time::Instant::now(),
                file: step.file.clone().filter(|_| keeps_file),
            })
        });
    }

    /// Enters `stage` of `file`.
    pub(crate) fn enter_file(&self, stage: IndexStage, file: &Path) {
        self.step(|_| {
            Some(CurrentStep {
                stage,
                began: std::time::Instant::now(),
                file: Some(file.display().to_string()),
            })
        });
    }

    /// Enters `stage` of `file` only when no step is under way (the writer is idle).
    pub(crate) fn enter_file_if_idle(&self, stage: IndexStage, file: &Path) {
        self.step(|step| {
            (step.stage == IndexStage::Idle).then(|| CurrentStep {
                stage,
                began: std::time::Instant::now(),
                file: Some(file.display().to_string()),
            })
        });
    }

    pub(crate) fn now(&self) -> CurrentStep {
        match self.0.lock() {
            Ok(clock) => clock.0.clone(),
            Err(_) => CurrentStep {
                stage: IndexStage::Idle,
                began: std::time::Instant::now(),
                file: None,
            },
        }
    }

    /// The time spent so far in each stage, the current step's included.
    pub(crate) fn spent(&self) -> Vec<(IndexStage, std::time::Duration)> {
        let Ok(clock) = self.0.lock() else {
            return Vec::new();
        };
        let (step, spent) = &*clock;
        let mut spent = *spent;
        spent[step.stage.position()] += step.began.elapsed();
        IndexStage::ALL.into_iter().zip(spent).collect()
    }
}

/// The library: the documents and passages tables, in a folder or in a shared object store.
pub struct Library {
    location: LibraryLocation,
    /// This machine's state of the library (its job, its watched folders, the lock): the
    /// library's folder itself for a local library.
    state_dir: PathBuf,
    meta: LibraryMeta,
    documents: lancedb::Table,
    passages: lancedb::Table,
    extractor: Extractor,
    /// The most passages one document may have (see [`Library::with_passage_limit`]).
    passage_limit: usize,
    committed: RwLock<Committed>,
    /// The `documents` table's version `committed` was read at: another machine's commit to a
    /// shared library moves the table past it ([`Library::catch_up`]).
    committed_version: AtomicU64,
    /// What other computers changed in a shared library since it was opened, as this one saw it.
    elsewhere: std::sync::Mutex<ChangesElsewhere>,
    /// One writer at a time inside the process (a job and the folder watcher may overlap).
    write: tokio::sync::Mutex<()>,
    /// Passages added whose document row does not count them yet; searches fetch this many more
    /// rows than asked so that filtering them out never leaves a result short.
    uncommitted: AtomicUsize,
    /// Contents with a slice stored whose row was not written and that could not be deleted
    /// then (the store failed twice): cleared before they are written again.
    unclean: std::sync::Mutex<HashSet<String>>,
    /// Whether the passages have a vector (ANN) index and a full-text index; read by every
    /// search, so kept here rather than asked of LanceDB each time.
    vector_indexed: AtomicBool,
    text_indexed: AtomicBool,
    /// What is on disk: every write to a local library ends with [`Library::make_durable`]. A
    /// shared library has none: a store's write is durable once it is acknowledged.
    durability: Option<Arc<durable::Durability>>,
    /// A shared library's store, for what lives beside its tables.
    shared: Option<SharedStore>,
    /// The largest file this computer keeps in a shared library's store; 0: none (see
    /// `stored_sources`).
    shared_source_limit: u64,
    /// Where the file being indexed is and since when ([`Library::current_step`]).
    pub(crate) step: Arc<StepClock>,
    /// Held while `job.json` is read and written again (a job's end, forgetting a paused job).
    pub(crate) job_record: std::sync::Mutex<()>,
    /// Held for the library's lifetime: one process of this machine writes a library at a time
    /// (several machines may write a shared one).
    _lock: std::fs::File,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("location", &self.location)
            .finish()
    }
}

/// Documents other computers added to and removed from a shared library, counted since it was
/// opened here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChangesElsewhere {
    pub added: usize,
    pub removed: usize,
}

/// How often a shared library looks for other machines' commits: a search sees a document
/// another machine committed at most this long after it was committed.
pub const SHARED_READ_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

impl Library {
    /// Opens (or creates) the library in the folder `dir` for vectors of `embedder`: migrates
    /// an older schema, re-embeds every passage if the embedder changed (from the stored
    /// passage text, without re-parsing a file), and removes passages left behind by an
    /// interrupted run.
    pub async fn open(dir: &Path, embedder: &dyn PassageEmbedder) -> Result<Self, IndexError> {
        Self::open_at(&LibraryLocation::Folder(dir.to_path_buf()), dir, embedder).await
    }

    /// Opens (or creates) the library at `location`, keeping this machine's state of it in
    /// `state_dir` ([`machine_state_dir`]). A local library is opened as [`Library::open`]
    /// does. A shared one is first tested ([`check_store`]: reachable, credentials taken,
    /// conditional writes honoured); one whose vectors another embedder made is refused
    /// ([`IndexError::EmbedderMismatch`]), never re-embedded under the other machines' feet.
    pub async fn open_at(
        location: &LibraryLocation,
        state_dir: &Path,
        embedder: &dyn PassageEmbedder,
    ) -> Result<Self, IndexError> {
        std::fs::create_dir_all(state_dir).map_err(|source| IndexError::Read {
            path: state_dir.to_path_buf(),
            source,
        })?;
        let lock = lock_library(state_dir).await?;
        let store_err = store_error(location);
        // LanceDB's default caches may grow to 6 GiB of index and 1 GiB of metadata, and every
        // optimize leaves the previous index version cached: bounded here for a desktop app.
        let session = Arc::new(lancedb::Session::new(
            INDEX_CACHE_BYTES,
            METADATA_CACHE_BYTES,
            Arc::new(lancedb::ObjectStoreRegistry::default()),
        ));
        let (db, meta, durability, shared) = match location {
            LibraryLocation::Folder(dir) => {
                // Before LanceDB reads anything: the tables go back to their last durable
                // versions.
                let (durability, _rolled_back) = durable::Durability::open(dir)?;
                let durability = Arc::new(durability);
                let db = lancedb::connect(&dir.to_string_lossy())
                    .session(session)
                    .execute()
                    .await
                    .map_err(&store_err)?;
                let meta = match LibraryMeta::load(dir)? {
                    Some(meta) => meta,
                    None => create_or_migrate(&db, dir, embedder, &durability).await?,
                };
                // A local library has one user: another embedder re-embeds it. The same model
                // under another name (moved, or served by an embeddings server) keeps its
                // vectors where the library recorded a fingerprint to tell.
                let meta = if meta.embedder == embedder.model_id() && meta.dim == embedder.dim() {
                    meta
                } else if meta.fingerprint.is_some() && other_embedder(&meta, embedder)?.is_none() {
                    renamed_embedder(dir, meta, embedder)?
                } else {
                    reembed(&db, dir, &meta, embedder, &durability).await?
                };
                drop_stray_tables(&db, dir, &meta).await?;
                (db, meta, Some(durability), None)
            }
            LibraryLocation::Shared(uri) => {
                check_store(uri).await?;
                let options = location::storage_options(
                    location::LIBRARY_RETRIES,
                    location::LIBRARY_RETRY_TIMEOUT,
                );
                let shared = SharedStore::connect(uri, options.clone()).await?;
                let db = lancedb::connect(uri.as_str())
                    .session(session)
                    .storage_options(options)
                    .read_consistency_interval(SHARED_READ_INTERVAL)
                    .execute()
                    .await
                    .map_err(&store_err)?;
                let meta = match LibraryMeta::load_shared(&shared).await? {
                    Some(meta) => meta,
                    None => create_shared(&db, &shared, embedder).await?,
                };
                if let Some(detail) = other_embedder(&meta, embedder)? {
                    return Err(IndexError::EmbedderMismatch {
                        location: uri.as_str().to_owned(),
                        library_embedder: format!("{} ({} dimensions)", meta.embedder, meta.dim),
                        this_embedder: format!(
                            "{} ({} dimensions)",
                            embedder.model_id(),
                            embedder.dim()
                        ),
                        detail,
                    });
                }
                (db, meta, None, Some(shared))
            }
        };
        let documents = db
            .open_table(&meta.documents_table)
            .execute()
            .await
            .map_err(&store_err)?;
        let passages = db
            .open_table(&meta.passages_table)
            .execute()
            .await
            .map_err(&store_err)?;
        add_missing_columns(&passages, &documents)
            .await
            .map_err(&store_err)?;
        let library = Self {
            location: location.clone(),
            state_dir: state_dir.to_path_buf(),
            meta,
            documents,
            passages,
            extractor: Extractor::default(),
            passage_limit: Self::DEFAULT_PASSAGE_LIMIT,
            committed: RwLock::new(Committed::default()),
            committed_version: AtomicU64::new(0),
            elsewhere: std::sync::Mutex::new(ChangesElsewhere::default()),
            write: tokio::sync::Mutex::new(()),
            uncommitted: AtomicUsize::new(0),
            unclean: std::sync::Mutex::new(HashSet::new()),
            vector_indexed: AtomicBool::new(false),
            text_indexed: AtomicBool::new(false),
            durability,
            shared,
            shared_source_limit: stored_sources::DEFAULT_SHARED_SOURCE_LIMIT,
            step: Arc::new(StepClock::new()),
            job_record: std::sync::Mutex::new(()),
            _lock: lock,
        };
        library.refresh_index_flags().await?;
        library.reload_committed().await?;
        // Passages no row refers to are another machine's document being written, in a shared
        // library: only a local library's are an interrupted run's. (Searches never return
        // them either way.)
        if !library.location.is_shared() {
            library.remove_orphans().await?;
        }
        library.make_durable().await?;
        Ok(library)
    }

    /// Parses files with `extractor` from now on (in this process until this is called; the app
    /// passes a worker process).
    pub fn with_extractor(mut self, extractor: Extractor) -> Self {
        self.extractor = extractor;
        self
    }

    /// Keeps the files this computer indexes into a shared library, up to `limit` bytes each,
    /// in its store for every computer's evidence viewer; 0 keeps them on this computer only.
    /// The default is [`DEFAULT_SHARED_SOURCE_LIMIT`]; a local library keeps none.
    pub fn with_shared_sources(mut self, limit: u64) -> Self {
        self.shared_source_limit = limit;
        self
    }

    /// The most passages one document may have by default: about ten million words, far past
    /// any book, well short of what a decompression bomb inflates to.
    pub const DEFAULT_PASSAGE_LIMIT: usize = 100_000;

    /// Refuses documents of more than `limit` passages ([`IndexError::TooManyPassages`]).
    pub fn with_passage_limit(mut self, limit: usize) -> Self {
        self.passage_limit = limit;
        self
    }

    /// Where the library lives.
    pub fn location(&self) -> &LibraryLocation {
        &self.location
    }

    /// The folder of this machine's state of the library: its job, its watched folders.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The embedder whose vectors the library holds.
    pub fn embedder_id(&self) -> &str {
        &self.meta.embedder
    }

    /// Reads the documents other computers committed to a shared library since this one last
    /// looked (at most [`SHARED_READ_INTERVAL`] ago), and counts what they added and removed
    /// ([`Library::changes_elsewhere`]). A local library has no other writer: nothing to do.
    pub async fn catch_up(&self) -> Result<(), IndexError> {
        if !self.location.is_shared() {
            return Ok(());
        }
        let version = self.documents.version().await.map_err(self.store_err())?;
        if version == self.committed_version.load(Ordering::Acquire) {
            return Ok(());
        }
        // While this process writes, its writer reads the rows again before each file
        // (`reload_if_shared`); a search does not wait for a file to be indexed.
        let Ok(_writer) = self.write.try_lock() else {
            return Ok(());
        };
        let before: HashSet<String> = self.committed().by_path.keys().cloned().collect();
        self.reload_committed().await?;
        self.tally_elsewhere(&before);
        // Another computer may have made the search indexes.
        self.refresh_index_flags().await
    }

    /// In a shared library, reads the rows as other computers left them, before this one
    /// writes (the caller holds the writer); a local library's are this process's own.
    pub(crate) async fn reload_if_shared(&self) -> Result<(), IndexError> {
        if !self.location.is_shared() {
            return Ok(());
        }
        let before: HashSet<String> = self.committed().by_path.keys().cloned().collect();
        self.reload_committed().await?;
        self.tally_elsewhere(&before);
        Ok(())
    }

    /// Counts what other computers added and removed, from the paths before a reload.
    fn tally_elsewhere(&self, before: &HashSet<String>) {
        let committed = self.committed();
        let added = committed
            .by_path
            .keys()
            .filter(|p| !before.contains(*p))
            .count();
        let removed = before
            .iter()
            .filter(|p| !committed.by_path.contains_key(*p))
            .count();
        let mut tally = self.elsewhere.lock().unwrap_or_else(|e| e.into_inner());
        tally.added += added;
        tally.removed += removed;
    }

    /// What other computers added to and removed from a shared library since it was opened, as
    /// far as [`Library::catch_up`] has seen (every search catches up).
    pub fn changes_elsewhere(&self) -> ChangesElsewhere {
        *self.elsewhere.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes every write so far durable (see [`durable`]): the files LanceDB wrote are synced,
    /// then the tables' versions recorded. A write counts as done only after this. A shared
    /// library's writes are durable once the store acknowledged them.
    pub(crate) async fn make_durable(&self) -> Result<(), IndexError> {
        let Some(durability) = self.durability.clone() else {
            return Ok(());
        };
        let versions = [
            (
                self.meta.documents_table.clone(),
                self.documents.version().await,
            ),
            (
                self.meta.passages_table.clone(),
                self.passages.version().await,
            ),
        ];
        let versions = versions
            .into_iter()
            .map(|(name, version)| version.map(|v| (name, v)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.store_err())?;
        tokio::task::spawn_blocking(move || {
            let named: Vec<(&str, u64)> = versions.iter().map(|(n, v)| (n.as_str(), *v)).collect();
            durability.commit(&named)
        })
        .await
        .map_err(|e| IndexError::Write {
            path: self.state_dir.clone(),
            source: std::io::Error::other(e),
        })?
    }

    fn store_err(&self) -> impl Fn(lancedb::Error) -> IndexError + use<> {
        store_error(&self.location)
    }
    /// Runs `query` and gathers all its result batches.
    async fn collect(&self, query: impl ExecutableQuery) -> Result<Vec<RecordBatch>, IndexError> {
        collect(&self.location, query).await
    }

    async fn reload_committed(&self) -> Result<(), IndexError> {
        // The version first: a commit that lands while the rows are read makes the next
        // catch-up read them again, never miss them.
        let version = self.documents.version().await.map_err(self.store_err())?;
        let batches = self.collect(self.documents.query()).await?;
        let mut by_path = BTreeMap::new();
        for b in &batches {
            for d in schema::documents_from(b)? {
                by_path.insert(d.path.clone(), d);
            }
        }
        *self.committed_mut() = Committed { by_path };
        self.committed_version.store(version, Ordering::Release);
        Ok(())
    }

    fn committed(&self) -> std::sync::RwLockReadGuard<'_, Committed> {
        self.committed.read().unwrap_or_else(|e| e.into_inner())
    }

    fn committed_mut(&self) -> std::sync::RwLockWriteGuard<'_, Committed> {
        self.committed.write().unwrap_or_else(|e| e.into_inner())
    }

    async fn remove_orphans(&self) -> Result<(), IndexError> {
        let batches = self
            .collect(self.passages.query().select(Select::columns(&["doc_id"])))
            .await?;
        let mut stored = HashSet::new();
        for batch in &batches {
            let ids = string_column(batch, "doc_id")?;
            for i in 0..batch.num_rows() {
                stored.insert(ids.value(i).to_string());
            }
        }
        let orphans: Vec<String> = {
            let committed = self.committed();
            let referenced: HashSet<&str> =
                committed.by_path.values().map(|d| d.id.as_str()).collect();
            stored
                .into_iter()
                .filter(|id| !referenced.contains(id.as_str()))
                .collect()
        };
        for doc_id in orphans {
            tracing::warn!(%doc_id, "removing passages no document refers to (interrupted run)");
            self.delete_passages_of(&doc_id).await?;
        }
        Ok(())
    }

    /// Deletes every passage of content `doc_id`; not in a shared library, where another
    /// computer may hold the same content (see `delete_passages`).
    async fn delete_passages_of(&self, doc_id: &str) -> Result<(), IndexError> {
        if self.location.is_shared() {
            return Ok(());
        }
        self.passages
            .delete(format!("doc_id = {}", sql_string(doc_id)).as_str())
            .await
            .map_err(self.store_err())?;
        Ok(())
    }

    /// Removes the passages of `doc_id` when no document row refers to it any more.
    async fn collect_garbage(&self, doc_id: &str) -> Result<(), IndexError> {
        if !self.committed().referenced(doc_id) {
            self.delete_passages_of(doc_id).await?;
        }
        Ok(())
    }

    /// All documents, ordered by path.
    pub fn documents(&self) -> Vec<DocumentRecord> {
        self.committed().by_path.values().cloned().collect()
    }

    /// The document at `path`, if indexed.
    pub fn document(&self, path: &str) -> Option<DocumentRecord> {
        self.committed().by_path.get(path).cloned()
    }

    /// Removes the document at `path`, or every document under `path` when it is a folder (or
    /// was one: the folder need not exist any more). Returns the paths removed.
    pub async fn remove(&self, path: &Path) -> Result<Vec<String>, IndexError> {
        let _writer = self.write.lock().await;
        self.reload_if_shared().await?;
        let removed = self.remove_locked(&path_key(path)).await?;
        self.make_durable().await?;
        Ok(removed)
    }

    async fn remove_locked(&self, key: &str) -> Result<Vec<String>, IndexError> {
        let prefix = format!("{}{}", key.trim_end_matches('/'), std::path::MAIN_SEPARATOR);
        let removed: Vec<DocumentRecord> = self
            .committed()
            .by_path
            .values()
            .filter(|d| d.path == key || d.path.starts_with(&prefix))
            .cloned()
            .collect();
        if removed.is_empty() {
            return Ok(Vec::new());
        }
        for chunk in removed.chunks(500) {
            let list: Vec<String> = chunk.iter().map(|d| sql_string(&d.path)).collect();
            self.documents
                .delete(format!("path IN ({})", list.join(",")).as_str())
                .await
                .map_err(self.store_err())?;
        }
        {
            let mut committed = self.committed_mut();
            for d in &removed {
                committed.by_path.remove(&d.path);
            }
        }
        let ids: HashSet<&str> = removed.iter().map(|d| d.id.as_str()).collect();
        for id in ids {
            self.collect_garbage(id).await?;
        }
        Ok(removed.into_iter().map(|d| d.path).collect())
    }

    /// Document, passage and page counts, and which indexes exist.
    pub async fn stats(&self) -> Result<LibraryStats, IndexError> {
        let (documents, contents, pages) = {
            let committed = self.committed();
            let contents: HashSet<&str> =
                committed.by_path.values().map(|d| d.id.as_str()).collect();
            let pages = committed.by_path.values().map(|d| d.pages as u64).sum();
            (committed.by_path.len(), contents.len(), pages)
        };
        let indices = self
            .passages
            .list_indices()
            .await
            .map_err(self.store_err())?;
        Ok(LibraryStats {
            documents,
            contents,
            pages,
            passages: self
                .passages
                .count_rows(None)
                .await
                .map_err(self.store_err())?,
            disk_bytes: match &self.shared {
                Some(store) => store.size().await?,
                None => dir_size(&self.state_dir),
            },
            vector_index: indices
                .iter()
                .any(|i| i.columns.iter().any(|c| c == "vector")),
            text_index: indices
                .iter()
                .any(|i| i.columns.iter().any(|c| c == "text")),
        })
    }

    /// The stored passages of one content, in order: what a citation shows and exports quote.
    pub async fn passages_of(&self, doc_id: &str) -> Result<Vec<SearchHit>, IndexError> {
        let batches = self
            .collect(
                self.passages
                    .query()
                    .only_if(format!("doc_id = {}", sql_string(doc_id)))
                    .select(Select::columns(search::HIT_COLUMNS)),
            )
            .await?;
        let mut hits = Vec::new();
        {
            let committed = self.committed();
            let by_id = committed.by_id();
            for b in &batches {
                hits.extend(search::hits_from(b, &by_id, None)?);
            }
        }
        hits.sort_by_key(|h| schema::passage_number(&h.passage_id));
        Ok(hits)
    }
}

/// The key a path is stored under: absolute when it can be made so, as text.
pub(crate) fn path_key(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    absolute.to_string_lossy().into_owned()
}

async fn collect(
    location: &(dyn std::fmt::Display + Sync),
    query: impl ExecutableQuery,
) -> Result<Vec<RecordBatch>, IndexError> {
    let store_err = store_error(location);
    query
        .execute()
        .await
        .map_err(&store_err)?
        .try_collect()
        .await
        .map_err(&store_err)
}

/// The error of a LanceDB call on the library at `location`.
fn store_error(location: &dyn std::fmt::Display) -> impl Fn(lancedb::Error) -> IndexError + use<> {
    let location = location.to_string();
    move |source| IndexError::Store {
        location: location.clone(),
        source,
    }
}

/// Gives tables made before a column existed that column, all nulls (a change of the schema
/// only: no row is rewritten): a passages table made before page labels or OCR its
/// `page_label` and `ocr_confidence` (its PDFs get labels and their scanned pages OCR text
/// when they are indexed again), a documents table made before documents were written in
/// slices its `passages_expected` (null: complete).
async fn add_missing_columns(
    passages: &lancedb::Table,
    documents: &lancedb::Table,
) -> Result<(), lancedb::Error> {
    use arrow_schema::DataType;
    let wanted = [
        (passages, schema::PAGE_LABEL, DataType::Utf8),
        (passages, schema::OCR_CONFIDENCE, DataType::Float32),
        (documents, schema::PASSAGES_EXPECTED, DataType::UInt32),
        (documents, schema::WORKS, DataType::Utf8),
    ];
    for (table, name, kind) in wanted {
        if table.schema().await?.field_with_name(name).is_ok() {
            continue;
        }
        let column = arrow_schema::Schema::new(vec![arrow_schema::Field::new(name, kind, true)]);
        table
            .add_columns()
            .transform(lancedb::table::NewColumnTransform::AllNulls(Arc::new(
                column,
            )))
            .execute()
            .await?;
    }
    Ok(())
}

/// How long an opener waits for the library's lock before saying it is in use: the lock of a
/// process that was killed is released by the kernel, but a worker it was starting at that
/// instant holds a copy of the lock's file until its `exec` closes it (milliseconds, longer
/// on a loaded machine). A live holder still gets its clear error after this wait.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Takes the library's lock (`library.lock`, an advisory lock the kernel releases when its
/// holder dies), waiting up to [`LOCK_WAIT`] for a holder that is going away.
async fn lock_library(dir: &Path) -> Result<std::fs::File, IndexError> {
    let path = dir.join("library.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| IndexError::Read {
            path: path.clone(),
            source,
        })?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(IndexError::Busy {
                    path: dir.to_path_buf(),
                    holders: lock_holders(&file),
                });
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(IndexError::Read { path, source });
            }
        }
    }
}

/// The live processes that hold a lock on `file`, as "pid (name)", from the kernel's table of
/// locks (Linux); empty where that table cannot be read or names none alive.
fn lock_holders(file: &std::fs::File) -> String {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = file.metadata() else {
            return String::new();
        };
        let Ok(table) = std::fs::read_to_string("/proc/locks") else {
            return String::new();
        };
        // The kernel's encoding of a device number: major in bits 8..20 and 32.., minor in 0..8
        // and 20..32; /proc/locks prints them in hex as `major:minor:inode`.
        let dev = meta.dev();
        let (major, minor) = (
            ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff),
            (dev & 0xff) | ((dev >> 12) & !0xff),
        );
        let wanted = format!("{major:02x}:{minor:02x}:{}", meta.ino());
        let holders: Vec<String> = table
            .lines()
            // "->" marks a process waiting for the lock, not holding it.
            .filter(|line| !line.contains("->"))
            .filter_map(|line| {
                // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF": pid, then the file.
                let fields: Vec<&str> = line.split_whitespace().collect();
                let at = fields.iter().position(|f| *f == wanted)?;
                let pid = fields.get(at.checked_sub(1)?)?;
                let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
                Some(format!("{pid} ({})", name.trim()))
            })
            .collect();
        holders.join(", ")
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        String::new()
    }
}

async fn table_names(db: &lancedb::Connection, dir: &Path) -> Result<HashSet<String>, IndexError> {
    Ok(db
        .table_names()
        .execute()
        .await
        .map_err(store_error(&dir.display()))?
        .into_iter()
        .collect())
}

/// A new library gets empty tables; a schema-1 library (the walking skeleton's: documents keyed
/// by content, no `library.json`) gets a schema-2 documents table built from its rows. Its
/// passages are kept as they are: the passage schema did not change.
async fn create_or_migrate(
    db: &lancedb::Connection,
    dir: &Path,
    embedder: &dyn PassageEmbedder,
    durability: &durable::Durability,
) -> Result<LibraryMeta, IndexError> {
    let store_err = store_error(&dir.display());
    let names = table_names(db, dir).await?;
    let documents_table = "documents_v2".to_string();
    if names.contains(&documents_table) {
        // A migration that crashed before library.json was written: do it again.
        db.drop_table(&documents_table, &[])
            .await
            .map_err(&store_err)?;
    }
    let mut meta = LibraryMeta {
        schema_version: SCHEMA_VERSION,
        embedder: embedder.model_id(),
        dim: embedder.dim(),
        documents_table,
        passages_table: "passages".into(),
        fingerprint: Some(fingerprint::fingerprint(embedder)?),
    };
    let mut rows = Vec::new();
    if names.contains("documents") && names.contains("passages") {
        let old = db
            .open_table("documents")
            .execute()
            .await
            .map_err(&store_err)?;
        let passages = db
            .open_table("passages")
            .execute()
            .await
            .map_err(&store_err)?;
        meta.dim = vector_dim(&*passages.schema().await.map_err(&store_err)?)?;
        for b in &collect(&dir.display(), old.query()).await? {
            let (id, path, title, emb) = (
                string_column(b, "doc_id")?,
                string_column(b, "path")?,
                string_column(b, "title")?,
                string_column(b, "embedder")?,
            );
            let count = column::<UInt32Array>(b, "passages")?;
            for i in 0..b.num_rows() {
                meta.embedder = emb.value(i).to_string();
                rows.push(DocumentRecord {
                    id: id.value(i).into(),
                    path: path.value(i).into(),
                    title: title.value(i).into(),
                    pages: 0,
                    passages: count.value(i),
                    // Unknown: the next index run reads the file and compares its hash.
                    size: 0,
                    modified_ns: 0,
                    indexed_at_ms: 0,
                    passages_expected: None,
                    works: None,
                });
            }
        }
        tracing::info!(documents = rows.len(), "migrating the library to schema 2");
    } else {
        for name in ["documents", "passages"] {
            if names.contains(name) {
                db.drop_table(name, &[]).await.map_err(&store_err)?;
            }
        }
        db.create_empty_table("passages", passages_schema(embedder.dim()))
            .execute()
            .await
            .map_err(&store_err)?;
    }
    let table = db
        .create_empty_table(&meta.documents_table, documents_schema())
        .execute()
        .await
        .map_err(&store_err)?;
    if !rows.is_empty() {
        table
            .add(schema::documents_batch(&rows)?)
            .execute()
            .await
            .map_err(&store_err)?;
    }
    // Migrated vectors are the old rows' embedder's: the fingerprint of the embedder here is
    // not theirs, so none is recorded and a change of name re-embeds them, as before.
    if meta.embedder != embedder.model_id() {
        meta.fingerprint = None;
    }
    // The new tables reach the disk before library.json names them.
    durability.sync_new_files()?;
    meta.store(dir)?;
    Ok(meta)
}

/// Builds a new passages table with `embedder`'s vectors of every stored passage, then points
/// `library.json` at it. Nothing is parsed again; a crash midway leaves the old library.
async fn reembed(
    db: &lancedb::Connection,
    dir: &Path,
    meta: &LibraryMeta,
    embedder: &dyn PassageEmbedder,
    durability: &durable::Durability,
) -> Result<LibraryMeta, IndexError> {
    let store_err = store_error(&dir.display());
    tracing::warn!(
        from = %meta.embedder,
        to = %embedder.model_id(),
        "the embedder changed: re-embedding every passage"
    );
    let old = db
        .open_table(&meta.passages_table)
        .execute()
        .await
        .map_err(&store_err)?;
    let new_name = format!(
        "passages_{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default()
    );
    let new = db
        .create_empty_table(&new_name, passages_schema(embedder.dim()))
        .execute()
        .await
        .map_err(&store_err)?;
    let columns: Vec<&str> = search::HIT_COLUMNS.to_vec();
    let mut stream = old
        .query()
        .select(Select::columns(&columns))
        .execute()
        .await
        .map_err(&store_err)?;
    while let Some(batch) = stream.try_next().await.map_err(&store_err)? {
        let rows = schema::PassageRows::from_batch(&batch)?;
        let inputs = rows.embedding_inputs();
        let mut vectors = Vec::with_capacity(inputs.len());
        for chunk in inputs.chunks(embedder.texts_per_call().max(1)) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            vectors.extend(embed_blocking(embedder, &refs)?);
        }
        if !rows.is_empty() {
            new.add(rows.into_batch(vectors, embedder.dim())?)
                .execute()
                .await
                .map_err(&store_err)?;
        }
    }
    let updated = LibraryMeta {
        embedder: embedder.model_id(),
        dim: embedder.dim(),
        passages_table: new_name,
        fingerprint: Some(fingerprint::fingerprint(embedder)?),
        ..meta.clone()
    };
    durability.sync_new_files()?;
    updated.store(dir)?;
    Ok(updated)
}

/// `meta` naming `embedder`, whose fingerprint agrees with the recorded one: the same model
/// under another name keeps the library's vectors.
fn renamed_embedder(
    dir: &Path,
    meta: LibraryMeta,
    embedder: &dyn PassageEmbedder,
) -> Result<LibraryMeta, IndexError> {
    tracing::info!(
        from = %meta.embedder,
        to = %embedder.model_id(),
        "the embedder has another name and the same vectors: the library keeps its own"
    );
    let updated = LibraryMeta {
        embedder: embedder.model_id(),
        ..meta
    };
    updated.store(dir)?;
    Ok(updated)
}

/// Why `embedder` is not the model whose vectors a library's `meta` records, or `None`
/// where it is: compared by dimension, then by fingerprint (by name alone where none is
/// recorded). Fingerprints are always compared: two computers may give different models one
/// name, and one model different names (its path on each).
fn other_embedder(
    meta: &LibraryMeta,
    embedder: &dyn PassageEmbedder,
) -> Result<Option<String>, IndexError> {
    if meta.dim != embedder.dim() {
        return Ok(Some(format!(
            "{} dimensions against {}",
            meta.dim,
            embedder.dim()
        )));
    }
    let Some(recorded) = &meta.fingerprint else {
        return Ok((meta.embedder != embedder.model_id()).then(|| {
            format!(
                "the library names {}, and records no fingerprint to compare",
                meta.embedder
            )
        }));
    };
    let this = fingerprint::fingerprint(embedder)?;
    Ok(match fingerprint::agreement(recorded, &this) {
        Some(agreement) if agreement.same_model() => None,
        Some(agreement) => Some(format!(
            "their vectors of the same sentences agree to a cosine of {:.4} and a length ratio of \
             {:.4}; one model agrees to at least {} and {}",
            agreement.cosine,
            agreement.length_ratio,
            fingerprint::SAME_MODEL_COSINE,
            fingerprint::SAME_MODEL_LENGTH_RATIO
        )),
        None => Some("their fingerprints cannot be compared".to_owned()),
    })
}

/// A new shared library: its empty tables (opened as they are where another machine made them
/// a moment ago), then its `library.json`, written only if no machine wrote one first.
async fn create_shared(
    db: &lancedb::Connection,
    store: &SharedStore,
    embedder: &dyn PassageEmbedder,
) -> Result<LibraryMeta, IndexError> {
    let store_err = store_error(&store.uri.as_str());
    let meta = LibraryMeta {
        schema_version: SCHEMA_VERSION,
        embedder: embedder.model_id(),
        dim: embedder.dim(),
        documents_table: "documents_v2".into(),
        passages_table: "passages".into(),
        fingerprint: Some(fingerprint::fingerprint(embedder)?),
    };
    // Keyed, so that two computers writing the same passages or the same path's row at once
    // keep one of each (see `Library::add_passages`).
    for (name, schema) in [
        (
            &meta.passages_table,
            schema::with_primary_key(&passages_schema(embedder.dim()), "id"),
        ),
        (
            &meta.documents_table,
            schema::with_primary_key(&documents_schema(), "path"),
        ),
    ] {
        db.create_empty_table(name, schema)
            .mode(lancedb::database::CreateTableMode::exist_ok(|open| open))
            .execute()
            .await
            .map_err(&store_err)?;
    }
    tracing::info!(library = %store.uri.as_str(), "made a new shared library");
    meta.create_shared(store).await
}

/// Tables `library.json` does not name: left by a migration or re-embedding that crashed, or
/// replaced by one that finished.
async fn drop_stray_tables(
    db: &lancedb::Connection,
    dir: &Path,
    meta: &LibraryMeta,
) -> Result<(), IndexError> {
    for name in table_names(db, dir).await? {
        let ours = name.starts_with("documents") || name.starts_with("passages");
        if ours && name != meta.documents_table && name != meta.passages_table {
            tracing::info!(table = %name, "dropping a table the library no longer uses");
            db.drop_table(&name, &[])
                .await
                .map_err(store_error(&dir.display()))?;
        }
    }
    Ok(())
}

/// Embeds on this thread, telling the runtime it blocks (the embedder runs a model).
pub(crate) fn embed_blocking(
    embedder: &dyn PassageEmbedder,
    texts: &[&str],
) -> Result<Vec<Vec<f32>>, IndexError> {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
            tokio::task::block_in_place(|| embedder.embed(texts))
        }
        _ => embedder.embed(texts),
    }
}

pub(crate) fn one_batch(
    batch: RecordBatch,
) -> Box<dyn arrow_array::RecordBatchReader + Send + 'static> {
    let schema = batch.schema();
    Box::new(RecordBatchIterator::new(vec![Ok(batch)], schema))
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// Marks `n` passages as added-but-not-committed for as long as the guard lives.
pub(crate) struct Uncommitted<'a> {
    counter: &'a AtomicUsize,
    n: usize,
}

impl<'a> Uncommitted<'a> {
    fn new(counter: &'a AtomicUsize, n: usize) -> Self {
        counter.fetch_add(n, Ordering::SeqCst);
        Self { counter, n }
    }
}

impl Drop for Uncommitted<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.n, Ordering::SeqCst);
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Library>();
    is::<Arc<Library>>();
}

/// Rows of the synthetic benchmark library ([`crate::bench`]), written without a file.
#[derive(Default)]
pub(crate) struct PassageRowsForBench(schema::PassageRows);

impl PassageRowsForBench {
    pub fn push(&mut self, doc: &str, path: &str, title: &str, text: &str) {
        let chunk = crate::Chunk {
            text: text.to_string(),
            span: (0, text.chars().count()),
            section: None,
        };
        self.0.push(doc, path, title, (None, None, None), chunk);
    }
}

impl Library {
    pub(crate) async fn write_bench_rows(
        &self,
        rows: PassageRowsForBench,
        vectors: Vec<Vec<f32>>,
    ) -> Result<(), IndexError> {
        let batch = rows.0.into_batch(vectors, self.meta.dim)?;
        self.passages
            .add(batch)
            .execute()
            .await
            .map_err(self.store_err())?;
        Ok(())
    }

    pub(crate) async fn commit_bench_documents(
        &self,
        docs: Vec<DocumentRecord>,
    ) -> Result<(), IndexError> {
        self.documents
            .add(schema::documents_batch(&docs)?)
            .execute()
            .await
            .map_err(self.store_err())?;
        self.reload_committed().await?;
        self.make_durable().await
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{IndexStage, StepClock};

    /// Each step's time goes to its stage's sum, the current one's included.
    #[test]
    fn the_clock_sums_the_time_of_each_stage() {
        let clock = StepClock::new();
        let pause = std::time::Duration::from_millis(20);
        clock.enter_file(IndexStage::Reading, Path::new("/docs/a.md"));
        std::thread::sleep(pause);
        clock.enter(IndexStage::Embedding);
        std::thread::sleep(pause);
        clock.enter(IndexStage::Embedding);
        std::thread::sleep(pause);
        let spent: std::collections::HashMap<_, _> = clock.spent().into_iter().collect();
        assert!(spent[&IndexStage::Reading] >= pause);
        assert!(spent[&IndexStage::Embedding] >= 2 * pause, "{spent:?}");
        assert!(spent[&IndexStage::Writing].is_zero());
        assert_eq!(spent.len(), IndexStage::ALL.len());
    }

    /// Issue 50 review: a watched folder's batch waiting for the writer reset the step of the
    /// job that held it, so the job's stuck parse was reported as "waiting for the library's
    /// writer". Only the writer moves the clock; a waiter marks it only when nobody works.
    #[test]
    fn a_caller_waiting_for_the_writer_leaves_the_writers_step_on_the_clock() {
        let clock = StepClock::new();
        clock.enter_file(IndexStage::Parsing, Path::new("/docs/stuck.pdf"));
        let before = clock.now();
        clock.enter_file_if_idle(IndexStage::WaitingForWriter, Path::new("/watched/new.md"));
        assert_eq!(clock.now(), before);
        clock.enter(IndexStage::Idle);
        assert_eq!(clock.now().file, None);
        clock.enter_file_if_idle(IndexStage::WaitingForWriter, Path::new("/watched/new.md"));
        let waiting = clock.now();
        assert_eq!(waiting.stage, IndexStage::WaitingForWriter);
        assert_eq!(waiting.file.as_deref(), Some("/watched/new.md"));
        // Another step of the same file keeps the file and starts a new step.
        clock.enter(IndexStage::Embedding);
        let embedding = clock.now();
        assert_eq!(embedding.file.as_deref(), Some("/watched/new.md"));
        assert!(embedding.began >= waiting.began);
        clock.enter(IndexStage::Compacting);
        assert_eq!(clock.now().file, None);
    }
}
