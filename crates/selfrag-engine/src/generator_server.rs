//! The generator server: answering through it, its connection test, switching to it and back,
//! and where its API key is kept (and the embeddings server's, by the same rules: [`KeyFile`]).
//!
//! A server answer runs as a local one does (`Engine::run_self_rag`), with the server
//! generator in place of the model thread's; the model thread only embeds the queries. The
//! connected generator is kept for the next question while the choice stands.
//!
//! The URL and the model name are settings (`generatorUrl`, `generatorModel` in
//! settings.json). The API key is kept apart, in
//! `generator-api-key` in the data folder, created readable by the user only (mode 0600 on
//! Unix), and never written to the settings file, a trace or a log. `SELFRAG_GENERATOR_URL`
//! fixes the choice for a run, as `SELFRAG_DEVICE` fixes the device.
//!
//! A saved key belongs to the origin (scheme, host, port) it was saved for, written on the
//! file's first line, and is sent to that origin alone: a connection test or a new server
//! elsewhere gets no key unless one is typed for it. A key file from before origins (the key
//! alone) is bound at start-up to the server the settings name, the one it was saved with.

use std::path::{Path, PathBuf};

use selfrag_core::Answer;
use selfrag_remote::{ServerConfig, ServerGenerator, ServerUrl};
use serde::{Deserialize, Serialize};

use crate::engine::SelfRagRun;
use crate::{Engine, EngineError};

/// The server in use: its configuration, and the generator once connected and checked.
#[derive(Debug)]
pub(crate) struct ServerSlot {
    config: Option<ServerConfig>,
    connected: Option<ServerGenerator>,
}

impl ServerSlot {
    pub(crate) fn new(config: Option<ServerConfig>) -> Self {
        Self {
            config,
            connected: None,
        }
    }
}

/// The key file's name in the data folder.
const API_KEY_FILE: &str = "generator-api-key";

/// What a successful connection test found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ServerCheck {
    pub url: String,
    /// The model file, alias or name the server serves.
    pub model: String,
    /// The server and its version, and the API where it is not the server's own, e.g.
    /// `llama.cpp b6800-abc1234` or `vLLM 0.11.0, OpenAI-compatible API`.
    pub runtime: String,
    /// Tokens of context per request.
    pub context_length: usize,
    /// Requests the server decodes at once, where it says (llama-server).
    pub slots: Option<usize>,
    /// The first request's round trip, in milliseconds.
    pub round_trip_ms: f64,
}

/// The generator choice as the settings panel shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct GeneratorState {
    /// The server in use; `None`: this computer.
    pub url: Option<String>,
    /// The model asked of it; `None`: the one it serves.
    pub model: Option<String>,
    /// Set when `SELFRAG_GENERATOR_URL` fixes the choice for this run.
    pub fixed_by_env: bool,
    /// Whether an API key is saved (the key itself never leaves the Rust side).
    pub has_api_key: bool,
}

/// Whether `SELFRAG_GENERATOR_URL` fixes the generator for this run.
pub fn generator_fixed_by_env() -> bool {
    std::env::var_os("SELFRAG_GENERATOR_URL").is_some_and(|v| !v.is_empty())
}

/// The configuration of the server at `url` (trimmed) asked for `model` (`None` or blank: the
/// one it serves) with `api_key`.
pub fn server_config(url: &str, model: Option<String>, api_key: Option<String>) -> ServerConfig {
    ServerConfig {
        api_key,
        model: model.map(|m| m.trim().to_owned()).filter(|m| !m.is_empty()),
        ..ServerConfig::new(url.trim())
    }
}

/// The file an API key is kept in, in the data folder: one per kind of server, each created
/// readable by the user only and bound to the origin it was saved for (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFile {
    /// `generator-api-key`.
    Generator,
    /// `embedder-api-key`, the embeddings server's (see `embedder_server.rs`).
    Embedder,
}

impl KeyFile {
    fn path(self, data_dir: &Path) -> PathBuf {
        data_dir.join(match self {
            Self::Generator => API_KEY_FILE,
            Self::Embedder => "embedder-api-key",
        })
    }
}

fn key_path(data_dir: &Path) -> PathBuf {
    KeyFile::Generator.path(data_dir)
}

/// The key file's contents: the origin the key belongs to (`None`: a file from before origins)
/// and the key.
#[derive(Debug, PartialEq)]
struct SavedApiKey {
    origin: Option<String>,
    key: String,
}

fn read_saved_key(path: &Path) -> Option<SavedApiKey> {
    let text = std::fs::read_to_string(path).ok()?;
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match lines[..] {
        [key] => Some(SavedApiKey {
            origin: None,
            key: key.to_owned(),
        }),
        [origin, key] => Some(SavedApiKey {
            origin: Some(origin.to_owned()),
            key: key.to_owned(),
        }),
        _ => None,
    }
}

/// The origin a key for `url` belongs to; `None` for an address the generator cannot use.
fn origin_of(url: &str) -> Option<String> {
    ServerUrl::parse(url).ok().map(|u| u.origin())
}

/// The generator server's API key saved for `url`: only where `url` has the origin the key was
/// saved for.
pub fn saved_api_key(data_dir: &Path, url: &str) -> Option<String> {
    saved_key(data_dir, KeyFile::Generator, url)
}

/// The API key of `file` saved for `url`: only where `url` has the origin it was saved for.
pub fn saved_key(data_dir: &Path, file: KeyFile, url: &str) -> Option<String> {
    let saved = read_saved_key(&file.path(data_dir))?;
    (saved.origin.is_some() && saved.origin == origin_of(url)).then_some(saved.key)
}

/// Binds a key file from before origins to `url`, the server the settings name (the key was
/// saved with it), so the key keeps working there and is sent nowhere else.
pub fn bind_unbound_api_key(data_dir: &Path, url: &str) -> Result<(), EngineError> {
    match (read_saved_key(&key_path(data_dir)), origin_of(url)) {
        (Some(SavedApiKey { origin: None, key }), Some(origin)) => {
            save_api_key(data_dir, &origin, Some(&key))
        }
        _ => Ok(()),
    }
}

/// Writes the generator server's API key for `origin` (or with `None` removes the key file).
fn save_api_key(data_dir: &Path, origin: &str, key: Option<&str>) -> Result<(), EngineError> {
    save_key(data_dir, KeyFile::Generator, origin, key)
}

/// Writes `file`'s API key for `origin` (or with `None` or a blank key removes the file),
/// readable by the user only.
pub(crate) fn save_key(
    data_dir: &Path,
    file: KeyFile,
    origin: &str,
    key: Option<&str>,
) -> Result<(), EngineError> {
    let path = file.path(data_dir);
    let write_error = |source| EngineError::Write {
        path: path.clone(),
        source,
    };
    let Some(key) = key.map(str::trim).filter(|k| !k.is_empty()) else {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(write_error(e)),
            _ => Ok(()),
        };
    };
    selfrag_index::atomic::write_private(&path, format!("{origin}\n{key}\n").as_bytes())
        .map_err(write_error)
}

impl Engine {
    fn slot(&self) -> std::sync::MutexGuard<'_, ServerSlot> {
        // The slot is replaced whole under the lock, so a poisoned lock still holds a good one.
        self.server.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The generator server in use, if any.
    pub(crate) fn server_config(&self) -> Option<ServerConfig> {
        self.slot().config.clone()
    }

    /// Answers through the generator server (see the module docs).
    pub(crate) async fn ask_server(&self, run: SelfRagRun) -> Result<Answer, EngineError> {
        let (config, connected) = {
            let mut slot = self.slot();
            (slot.config.clone(), slot.connected.take())
        };
        let config = config.ok_or(EngineError::ModelThreadGone)?;
        let mut generator = match connected {
            Some(generator) => generator,
            None => {
                let gguf = self.tokenizer_gguf()?;
                let connect_config = config.clone();
                tokio::task::spawn_blocking(move || {
                    ServerGenerator::connect(&connect_config, &gguf)
                })
                .await
                .map_err(|_| EngineError::ModelThreadGone)??
            }
        };
        generator.set_cancel(Some(run.cancel.clone()));
        // Prompts reach the server as ids from the local tokenizer: its dummy prefix is ours.
        generator.set_dummy_prefix(self.generator_numerics().dummy_prefix);
        let (mut generator, answer) = self.run_self_rag(generator, run).await?;
        generator.set_cancel(None);
        // Kept for the next question, unless the choice changed meanwhile.
        let mut slot = self.slot();
        if slot.config.as_ref() == Some(&config) && slot.connected.is_none() {
            slot.connected = Some(generator);
        }
        answer
    }

    /// The GGUF file whose tokenizer the server must share.
    fn tokenizer_gguf(&self) -> Result<PathBuf, EngineError> {
        self.model_status
            .read()
            .ok()
            .and_then(|models| {
                models
                    .iter()
                    .find(|m| m.role == crate::ModelRole::Generator)
                    .and_then(|m| m.path.clone())
            })
            .map(PathBuf::from)
            .ok_or(EngineError::ModelMissing {
                role: crate::ModelRole::Generator,
                message: "a generator server needs the GGUF file it loaded here too, for its \
                          tokenizer: download the model on the start screen or set \
                          SELFRAG_GENERATOR"
                    .into(),
            })
    }

    /// Connects to the server at `url` for `model` and checks it as an answer would (the
    /// reflection tokens and the tokenizer); `api_key` `None` uses the key saved for `url`'s
    /// origin, if any. Nothing is changed.
    pub async fn test_generator_server(
        &self,
        url: String,
        model: Option<String>,
        api_key: Option<String>,
    ) -> Result<ServerCheck, EngineError> {
        let api_key = api_key
            .filter(|k| !k.trim().is_empty())
            .or_else(|| saved_api_key(&self.config().data_dir, &url));
        let config = server_config(&url, model, api_key);
        let gguf = self.tokenizer_gguf()?;
        let generator =
            tokio::task::spawn_blocking(move || ServerGenerator::connect(&config, &gguf))
                .await
                .map_err(|_| EngineError::ModelThreadGone)??;
        let info = generator.info();
        Ok(ServerCheck {
            url: info.url.clone(),
            model: info.model.clone(),
            runtime: info.runtime.clone(),
            context_length: info.context_length,
            slots: info.slots,
            round_trip_ms: info.round_trip_ms,
        })
    }

    /// Generates on the server at `url` (asked for `model`) from the next question on, or on
    /// this computer with `None`. `api_key`: `Some` saves it for `url`'s origin (an empty one
    /// removes it), `None` keeps the saved one, which is sent only where `url` has its origin.
    /// Ignored where `SELFRAG_GENERATOR_URL` fixes the choice.
    pub fn set_generator_server(
        &self,
        url: Option<String>,
        model: Option<String>,
        api_key: Option<String>,
    ) -> Result<(), EngineError> {
        if generator_fixed_by_env() {
            return Ok(());
        }
        let data_dir = &self.config().data_dir;
        let url = url.filter(|u| !u.trim().is_empty());
        let origin = url
            .as_deref()
            .map(ServerUrl::parse)
            .transpose()?
            .map(|u| u.origin());
        match (api_key.as_deref().map(str::trim), &origin) {
            (Some(""), _) => save_api_key(data_dir, "", None)?,
            (Some(key), Some(origin)) => save_api_key(data_dir, origin, Some(key))?,
            // A key with no server to belong to is not kept.
            (Some(_), None) | (None, _) => {}
        }
        let server = url.map(|u| {
            let key = saved_api_key(data_dir, &u);
            server_config(&u, model, key)
        });
        let mut slot = self.slot();
        if slot.config != server {
            tracing::info!(
                server = server.as_ref().map_or("this computer", |s| s.url.as_str()),
                "generator changed"
            );
            *slot = ServerSlot::new(server);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_key_is_kept_apart_readable_by_the_user_only_and_removable() {
        let dir = tempfile::tempdir().unwrap();
        let server = "http://gpu-box:8080";
        assert_eq!(saved_api_key(dir.path(), server), None);
        save_api_key(dir.path(), "http://gpu-box:8080", Some(" sesame \n")).unwrap();
        assert_eq!(saved_api_key(dir.path(), server).as_deref(), Some("sesame"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(key_path(dir.path()))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        save_api_key(dir.path(), "http://gpu-box:8080", Some("")).unwrap();
        assert_eq!(saved_api_key(dir.path(), server), None);
        assert!(!key_path(dir.path()).exists());
        save_api_key(dir.path(), "", None).unwrap();
    }

    #[test]
    fn a_saved_key_is_given_only_to_the_origin_it_was_saved_for() {
        let dir = tempfile::tempdir().unwrap();
        save_api_key(dir.path(), "http://gpu-box:8080", Some("sesame")).unwrap();
        for same in [
            "http://gpu-box:8080",
            "http://GPU-box:8080/v1",
            "http://gpu-box:8080/",
        ] {
            assert_eq!(
                saved_api_key(dir.path(), same).as_deref(),
                Some("sesame"),
                "{same}"
            );
        }
        for other in [
            "http://gpu-box:8081",
            "https://gpu-box:8080",
            "http://gpu-box",
            "http://127.0.0.1:8080",
            "http://gpu-box.evil.example:8080",
            "http://gpu-box:8080@evil.example",
            "not a url",
        ] {
            assert_eq!(saved_api_key(dir.path(), other), None, "{other}");
        }
    }

    #[test]
    fn a_key_file_from_before_origins_is_sent_nowhere_until_bound_to_the_saved_server() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(key_path(dir.path()), "sesame\n").unwrap();
        assert_eq!(saved_api_key(dir.path(), "http://gpu-box:8080"), None);
        bind_unbound_api_key(dir.path(), "http://gpu-box:8080/v1").unwrap();
        assert_eq!(
            saved_api_key(dir.path(), "http://gpu-box:8080").as_deref(),
            Some("sesame")
        );
        assert_eq!(saved_api_key(dir.path(), "http://other:8080"), None);
        // Bound once: a later start with another server in the settings does not move it.
        bind_unbound_api_key(dir.path(), "http://other:8080").unwrap();
        assert_eq!(saved_api_key(dir.path(), "http://other:8080"), None);
    }
}
