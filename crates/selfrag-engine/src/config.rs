//! Where the engine keeps its data and finds its models: platform directories by default,
//! overridden by `SELFRAG_DATA_DIR`, `SELFRAG_LIBRARY` (a folder, or a shared library's
//! `s3://`, `gs://` or `az://` location), `SELFRAG_GENERATOR` and `SELFRAG_EMBEDDER`; a generator
//! server by `SELFRAG_GENERATOR_URL` (with `SELFRAG_GENERATOR_API_KEY`); the device and the
//! embedder's precision by `SELFRAG_DEVICE` and `SELFRAG_EMBEDDER_PRECISION`; the generator's
//! KV cache and dummy prefix by `SELFRAG_KV_CACHE` and `SELFRAG_DUMMY_PREFIX`.

use std::path::PathBuf;

use selfrag_core::{CachePrecision, DeviceChoice, DummyPrefix, EmbedderPrecision};
use selfrag_index::LibraryLocation;

use crate::EngineError;

/// Paths and choices the engine starts with.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Library, history and settings live here.
    pub data_dir: PathBuf,
    /// The library, where it is not the folder `library` in `data_dir`: another folder, or a
    /// shared library in an object store (`SELFRAG_LIBRARY`, the CLI's `--library`).
    pub library: Option<LibraryLocation>,
    /// A GGUF file chosen explicitly; otherwise the default model is looked up in the HF cache.
    pub generator: Option<PathBuf>,
    /// A BERT model folder chosen explicitly; otherwise looked up in the HF cache.
    pub embedder: Option<PathBuf>,
    /// Where the models run (`SELFRAG_DEVICE`, else `auto`).
    pub device: DeviceChoice,
    /// How the embedder multiplies on the CPU (`SELFRAG_EMBEDDER_PRECISION`, else int8).
    pub embedder_precision: EmbedderPrecision,
    /// The generator's KV cache and dummy prefix (`SELFRAG_KV_CACHE`, `SELFRAG_DUMMY_PREFIX`,
    /// else the device's default cache and the prefix of fine-tuning).
    pub generator_numerics: GeneratorNumerics,
    /// The executable documents are parsed in (run as `EXE --selfrag-extract-worker PATH`, see
    /// `selfrag_index::worker`); by default this very program. `None` parses in this process,
    /// where a parser crash takes the process down: only for tests.
    pub extract_worker: Option<PathBuf>,
    /// Answer through this server (llama.cpp's, or OpenAI-compatible) instead of the local
    /// generator. The GGUF file (`generator`, or the default one found in the HF cache) still
    /// gives the tokenizer.
    pub generator_server: Option<selfrag_remote::ServerConfig>,
    /// Embed through this server (OpenAI-compatible `/v1/embeddings`) instead of the local
    /// embedder: queries, passages and the library's fingerprint (see `embedding.rs`).
    pub embedder_server: Option<selfrag_remote::EmbedderServerConfig>,
    /// The largest file this computer keeps in a shared library's store for the other
    /// computers' evidence viewers (`SELFRAG_SHARED_SOURCES_MAX_MB`, default 100 MiB); 0 keeps
    /// every source on this computer.
    pub shared_source_limit: u64,
}

impl EngineConfig {
    /// The models at `generator` and `embedder` on the CPU, every other choice its default,
    /// and documents parsed in this process: what tests and benchmarks start an engine with.
    pub fn in_process(data_dir: PathBuf, generator: PathBuf, embedder: PathBuf) -> Self {
        Self {
            data_dir,
            library: None,
            generator: Some(generator),
            embedder: Some(embedder),
            device: DeviceChoice::Cpu,
            embedder_precision: EmbedderPrecision::default(),
            generator_numerics: GeneratorNumerics::default(),
            extract_worker: None,
            generator_server: None,
            embedder_server: None,
            shared_source_limit: selfrag_index::DEFAULT_SHARED_SOURCE_LIMIT,
        }
    }
}

/// How the generator's numbers are made, where a person may choose: its KV cache's precision
/// and where its tokenizer puts the dummy prefix. Both are recorded in every answer's trace
/// (`GeneratorInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GeneratorNumerics {
    /// The local generator's KV cache; `None`: the device's default (8-bit on most CPUs, f32
    /// on GPUs). A server keeps its own.
    pub cache_precision: Option<CachePrecision>,
    /// Where the prompts' dummy prefix goes, locally and for a server (prompts travel as ids).
    pub dummy_prefix: DummyPrefix,
}

impl EngineConfig {
    /// The platform data dir (e.g. `~/.local/share/selfrag-desktop`) with the environment's
    /// overrides applied. A `SELFRAG_DEVICE` that names no device, or a
    /// `SELFRAG_EMBEDDER_PRECISION` that names no precision, is an error that says so.
    pub fn from_env() -> Result<Self, EngineError> {
        let data_dir = non_empty_var("SELFRAG_DATA_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                directories::ProjectDirs::from("org", "selfrag", "selfrag-desktop")
                    .map(|d| d.data_dir().to_path_buf())
            })
            .unwrap_or_else(|| PathBuf::from(".selfrag"));
        let shared_source_limit = shared_source_limit_from_env()?;
        let library = non_empty_var(LIBRARY_ENV)
            .map(|v| LibraryLocation::parse(&v.to_string_lossy()))
            .transpose()
            .map_err(|e| EngineError::Index(set_by(e, LIBRARY_ENV)))?;
        Ok(Self {
            data_dir,
            library,
            generator: non_empty_var("SELFRAG_GENERATOR").map(PathBuf::from),
            embedder: non_empty_var("SELFRAG_EMBEDDER").map(PathBuf::from),
            device: device_from_env()?,
            embedder_precision: embedder_precision_from_env()?,
            generator_numerics: GeneratorNumerics {
                cache_precision: cache_precision_from_env()?,
                dummy_prefix: dummy_prefix_from_env()?,
            },
            // Both binaries (the app and `selfrag`) start as a worker when asked to.
            extract_worker: std::env::current_exe().ok(),
            generator_server: non_empty_var("SELFRAG_GENERATOR_URL").map(|url| {
                let text = |name| non_empty_var(name).map(|v| v.to_string_lossy().into_owned());
                crate::generator_server::server_config(
                    &url.to_string_lossy(),
                    text("SELFRAG_GENERATOR_MODEL"),
                    text("SELFRAG_GENERATOR_API_KEY"),
                )
            }),
            embedder_server: non_empty_var(EMBEDDER_URL_ENV).map(|url| {
                let text = |name| non_empty_var(name).map(|v| v.to_string_lossy().into_owned());
                embedder_server_config(
                    &url.to_string_lossy(),
                    text(EMBEDDER_MODEL_ENV),
                    text(EMBEDDER_API_KEY_ENV),
                )
            }),
            shared_source_limit,
        })
    }

    /// This configuration with exact numbers: the local generator's KV cache and the embedder
    /// in f32 (slower, more memory), whatever the environment says. A generator server keeps
    /// its own cache.
    #[must_use]
    pub fn with_exact_numbers(mut self) -> Self {
        self.embedder_precision = EmbedderPrecision::F32;
        self.generator_numerics.cache_precision = Some(CachePrecision::F32);
        self
    }

    /// Where the library is: the location set, else the folder `library` in the data folder.
    pub fn library_location(&self) -> LibraryLocation {
        self.library
            .clone()
            .unwrap_or_else(|| LibraryLocation::Folder(self.data_dir.join("library")))
    }

    /// This machine's state of the library (its job, its watched folders, its Zotero link):
    /// the library's folder, or a folder of the data folder for a shared library.
    pub fn library_state_dir(&self) -> PathBuf {
        selfrag_index::machine_state_dir(&self.library_location(), &self.data_dir)
    }

    /// Saved answers, one JSON trace per file.
    pub fn history_dir(&self) -> PathBuf {
        self.data_dir.join("history")
    }
}

/// The variable that sets the embeddings server's address.
pub const EMBEDDER_URL_ENV: &str = "SELFRAG_EMBEDDER_URL";
/// The variable that names the model to ask the embeddings server for.
pub const EMBEDDER_MODEL_ENV: &str = "SELFRAG_EMBEDDER_MODEL";
/// The variable that holds the embeddings server's API key (never a command-line argument,
/// which other users of the computer can read).
pub const EMBEDDER_API_KEY_ENV: &str = "SELFRAG_EMBEDDER_API_KEY";

/// The embeddings server at `url` asking for `model`, with `api_key`; blank values are none.
pub fn embedder_server_config(
    url: &str,
    model: Option<String>,
    api_key: Option<String>,
) -> selfrag_remote::EmbedderServerConfig {
    let given = |v: Option<String>| v.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    let mut config = selfrag_remote::EmbedderServerConfig::new(url.trim());
    config.model = given(model);
    config.api_key = given(api_key);
    config
}

/// The variable that sets the library's location.
pub const LIBRARY_ENV: &str = "SELFRAG_LIBRARY";

/// A location's error saying which setting gave the location.
pub fn set_by(error: selfrag_index::IndexError, setting: &str) -> selfrag_index::IndexError {
    match error {
        selfrag_index::IndexError::Location { location, problem } => {
            selfrag_index::IndexError::Location {
                location: format!("{location} (set by {setting})"),
                problem,
            }
        }
        other => other,
    }
}

/// The variable that caps the files kept in a shared library's store, in MiB (0: none).
pub const SHARED_SOURCES_ENV: &str = "SELFRAG_SHARED_SOURCES_MAX_MB";

/// `SELFRAG_SHARED_SOURCES_MAX_MB` in bytes; unset or empty is the default.
fn shared_source_limit_from_env() -> Result<u64, EngineError> {
    let Some(value) = non_empty_var(SHARED_SOURCES_ENV) else {
        return Ok(selfrag_index::DEFAULT_SHARED_SOURCE_LIMIT);
    };
    let value = value.to_string_lossy();
    value
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|mib| mib.checked_mul(1 << 20))
        .ok_or_else(|| EngineError::Device {
            choice: format!("{SHARED_SOURCES_ENV}={}", value.trim()),
            message: format!(
                "{SHARED_SOURCES_ENV} is not a number of MiB: set it to the largest file to keep \
                 in a shared library's store (e.g. 100), to 0 to keep every source on this \
                 computer, or unset it"
            ),
        })
}

/// `SELFRAG_DEVICE` parsed; unset or empty is `auto`.
fn device_from_env() -> Result<DeviceChoice, EngineError> {
    let Some(value) = non_empty_var("SELFRAG_DEVICE") else {
        return Ok(DeviceChoice::Auto);
    };
    let value = value.to_string_lossy();
    value.parse().map_err(|_| EngineError::Device {
        choice: value.trim().to_owned(),
        message: "SELFRAG_DEVICE names no device: set it to auto, cpu, cuda or metal, or unset it"
            .to_owned(),
    })
}

/// `SELFRAG_EMBEDDER_PRECISION` parsed; unset or empty is int8.
fn embedder_precision_from_env() -> Result<EmbedderPrecision, EngineError> {
    let Some(value) = non_empty_var(crate::settings::EMBEDDER_PRECISION_ENV) else {
        return Ok(EmbedderPrecision::default());
    };
    let value = value.to_string_lossy();
    value.parse().map_err(|_| EngineError::Device {
        choice: format!("SELFRAG_EMBEDDER_PRECISION={}", value.trim()),
        message:
            "SELFRAG_EMBEDDER_PRECISION names no precision: set it to int8 or f32, or unset it"
                .to_owned(),
    })
}

/// `SELFRAG_KV_CACHE` parsed; unset or empty is the device's default (`None`).
fn cache_precision_from_env() -> Result<Option<CachePrecision>, EngineError> {
    let Some(value) = non_empty_var(selfrag_models::KV_CACHE_ENV) else {
        return Ok(None);
    };
    let value = value.to_string_lossy();
    value.parse().map(Some).map_err(|_| EngineError::Device {
        choice: format!("SELFRAG_KV_CACHE={}", value.trim()),
        message:
            "SELFRAG_KV_CACHE names no KV-cache precision: set it to q8, f16 or f32, or unset it"
                .to_owned(),
    })
}

/// `SELFRAG_DUMMY_PREFIX` parsed; unset or empty is the prefix of fine-tuning (`text-start`).
fn dummy_prefix_from_env() -> Result<DummyPrefix, EngineError> {
    let Some(value) = non_empty_var(crate::settings::DUMMY_PREFIX_ENV) else {
        return Ok(DummyPrefix::default());
    };
    let value = value.to_string_lossy();
    value.parse().map_err(|_| EngineError::Device {
        choice: format!("SELFRAG_DUMMY_PREFIX={}", value.trim()),
        message: "SELFRAG_DUMMY_PREFIX names no dummy prefix: set it to text-start (as in \
                  fine-tuning) or every-fragment (as the reference code's inference), or unset it"
            .to_owned(),
    })
}

/// An environment variable that is set and not empty (an empty value means "unset").
fn non_empty_var(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}
