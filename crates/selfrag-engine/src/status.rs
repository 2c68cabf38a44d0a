//! What the front ends show before anything runs: which models were found and where the engine
//! looked, and how big the library is.

use serde::{Deserialize, Serialize};

pub use selfrag_core::ModelRole;
use selfrag_core::{CachePrecision, DeviceChoice, DeviceKind, DummyPrefix, EmbedderPrecision};
use selfrag_works::{FieldSource, Work};

/// One model's availability, with the places searched and the fix when it is missing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ModelStatus {
    pub role: ModelRole,
    /// Human name, e.g. "Self-RAG Llama-2 7B (Q4_K_M)".
    pub name: String,
    pub found: bool,
    /// Where it was found.
    pub path: Option<String>,
    /// Every place the engine looked.
    pub searched: Vec<String>,
    /// What to do when it is missing.
    pub fix: String,
    /// How to download it from the app; absent when an environment variable names the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub download: Option<crate::downloads::ModelOffer>,
}

impl ModelStatus {
    /// A model an inference server runs (`SELFRAG_EMBEDDER_URL`): found, there.
    pub(crate) fn on_server(role: ModelRole, url: &str) -> Self {
        Self {
            role,
            name: format!("the {role} server"),
            found: true,
            path: Some(url.to_owned()),
            searched: Vec::new(),
            fix: String::new(),
            download: None,
        }
    }
}

/// Where the models run: the choice, what it resolved to, and what this build offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct DeviceStatus {
    /// As chosen.
    pub chosen: DeviceChoice,
    /// What the choice resolved to once a model is loaded; `null` before.
    pub in_use: Option<DeviceKind>,
    /// The choices this build supports: `auto` and `cpu`, plus `cuda` / `metal` when compiled in.
    pub available: Vec<DeviceChoice>,
    /// Set when the choice is fixed by the `SELFRAG_DEVICE` environment variable.
    pub fixed_by_env: bool,
    /// How the embedder multiplies on the CPU, as chosen.
    pub embedder_precision: EmbedderPrecision,
    /// Whether this CPU runs the int8 embedder (AVX-512 VNNI or AVX-VNNI); without, int8 runs as f32.
    pub int8_available: bool,
    /// Set when the precision is fixed by `SELFRAG_EMBEDDER_PRECISION`.
    pub precision_fixed_by_env: bool,
    /// How the local generator's KV cache holds keys and values, as chosen; `null`: the
    /// device's default.
    pub cache_precision: Option<CachePrecision>,
    /// Set when the KV cache is fixed by `SELFRAG_KV_CACHE`.
    pub cache_precision_fixed_by_env: bool,
    /// Where the generator's tokenizer puts the dummy prefix, as chosen.
    pub dummy_prefix: DummyPrefix,
    /// Set when the dummy prefix is fixed by `SELFRAG_DUMMY_PREFIX`.
    pub dummy_prefix_fixed_by_env: bool,
}

/// Everything the start screen needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct AppStatus {
    pub data_dir: String,
    pub models: Vec<ModelStatus>,
    pub library: selfrag_index::LibraryStats,
    pub device: DeviceStatus,
}

/// A document of the library as listed in the library pane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct DocumentInfo {
    pub id: String,
    pub path: String,
    pub title: String,
    /// Pages (PDF) or 1; 0 for a document indexed before pages were counted.
    pub pages: u32,
    /// Passages stored: all of them, or so far while a long file is written slice by slice.
    pub passages: u32,
    /// While a long file is written slice by slice (or was cut off midway: indexing it again
    /// goes on from there), the passages it will have; null once all are stored.
    pub passages_expected: Option<u32>,
    /// The work the file holds: each field from the best source that gave it.
    pub work: Work,
    /// The sources that gave a record of it, from the least to the most trusted.
    pub work_sources: Vec<FieldSource>,
}

/// Progress of an indexing job or of a watched folder's changes, streamed to the front end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum IndexEvent {
    /// The job found this many files; `resumed` lists the folders of an interrupted job it
    /// finishes too.
    Started {
        total: usize,
        resumed: Vec<String>,
    },
    FileStarted {
        path: String,
    },
    /// A long file's first `passages` of `of` are stored and searchable; the rest is being
    /// embedded.
    FileSearchable {
        path: String,
        passages: u32,
        of: u32,
    },
    /// Indexed; `notes` says what was noticed on the way (e.g. a page with no text layer).
    FileIndexed {
        path: String,
        passages: u32,
        notes: Vec<String>,
    },
    /// Not indexed, and not an error: already in the library, the same content as another
    /// file (a rename or a copy: its passages are reused), or a format that is not read.
    FileSkipped {
        path: String,
        reason: String,
    },
    FileFailed {
        path: String,
        error: String,
    },
    /// A document whose file is gone was removed from the library.
    Removed {
        path: String,
    },
    /// After each file: how far the job is, its rate and the time left at that rate.
    #[serde(rename_all = "camelCase")]
    Progress {
        done: usize,
        total: usize,
        #[cfg_attr(feature = "typescript", ts(type = "number"))]
        passages: u64,
        files_per_second: f64,
        eta_seconds: Option<f64>,
    },
    Finished {
        indexed: usize,
        skipped: usize,
        failed: usize,
        removed: usize,
        /// Stopped before the end, paused or not.
        cancelled: bool,
        /// Paused: its folders wait for Resume (or Forget), not for the next start.
        paused: bool,
    },
    /// A step of the job has lasted `seconds` (first after 20 s, then again at each further
    /// 20 s while it goes on): `step` says which in words ("parsing in the worker process"),
    /// `path` names the file, none when the step is the library's own (compacting it). The
    /// job can be stopped; a parser that stops answering is killed at its time limit and its
    /// file reported as failed.
    SlowStep {
        path: Option<String>,
        step: String,
        #[cfg_attr(feature = "typescript", ts(type = "number"))]
        seconds: u64,
    },
    /// After the job, the works of the documents it indexed were looked up by their DOI or
    /// arXiv id (only where the person turned look-ups on): `found` got a registry's record,
    /// `already` had one; each failure names the document, the service and what to do.
    WorksLookedUp {
        found: usize,
        already: usize,
        failed: Vec<crate::LookupFailure>,
    },
    /// A watched folder's changes could not be applied (the library's disk gone or full, for
    /// one); they are tried again in `retryInSeconds`, and watching goes on.
    #[serde(rename_all = "camelCase")]
    WatchRetrying {
        error: String,
        retry_in_seconds: f64,
    },
}
