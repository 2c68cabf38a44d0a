//! Where the engine keeps its data and finds its models: platform directories by default,
//! overridden by `SELFRAG_DATA_DIR`, `SELFRAG_GENERATOR` and `SELFRAG_EMBEDDER`; a generator
//! server by `SELFRAG_GENERATOR_URL` (with `SELFRAG_GENERATOR_API_KEY`); the device and the
//! embedder's precision by `SELFRAG_DEVICE` and `SELFRAG_EMBEDDER_PRECISION`.

use std::path::PathBuf;

use selfrag_core::{DeviceChoice, EmbedderPrecision};

use crate::EngineError;

/// Paths and choices the engine starts with.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Library, history and settings live here.
    pub data_dir: PathBuf,
    /// A GGUF file chosen explicitly; otherwise the default model is looked up in the HF cache.
    pub generator: Option<PathBuf>,
    /// A BERT model folder chosen explicitly; otherwise looked up in the HF cache.
    pub embedder: Option<PathBuf>,
    /// Where the models run (`SELFRAG_DEVICE`, else `auto`).
    pub device: DeviceChoice,
    /// How the embedder multiplies on the CPU (`SELFRAG_EMBEDDER_PRECISION`, else int8).
    pub embedder_precision: EmbedderPrecision,
    /// The executable documents are parsed in (run as `EXE --selfrag-extract-worker PATH`, see
    /// `selfrag_index::worker`); by default this very program. `None` parses in this process,
    /// where a parser crash takes the process down: only for tests.
    pub extract_worker: Option<PathBuf>,
    /// Answer through this server (llama.cpp's, or OpenAI-compatible) instead of the local
    /// generator. The GGUF file (`generator`, or the default one found in the HF cache) still
    /// gives the tokenizer.
    pub generator_server: Option<selfrag_remote::ServerConfig>,
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
        Ok(Self {
            data_dir,
            generator: non_empty_var("SELFRAG_GENERATOR").map(PathBuf::from),
            embedder: non_empty_var("SELFRAG_EMBEDDER").map(PathBuf::from),
            device: device_from_env()?,
            embedder_precision: embedder_precision_from_env()?,
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
        })
    }

    /// The LanceDB library directory.
    pub fn library_dir(&self) -> PathBuf {
        self.data_dir.join("library")
    }

    /// Saved answers, one JSON trace per file.
    pub fn history_dir(&self) -> PathBuf {
        self.data_dir.join("history")
    }
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

/// An environment variable that is set and not empty (an empty value means "unset").
fn non_empty_var(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}
