//! The embeddings server as the app shows and changes it: the embedder in use (this computer's,
//! or a server's), whether the environment fixes it (`SELFRAG_EMBEDDER_URL`), the saved choice
//! that applies at the next start, and the connection test.
//!
//! A change takes effect when the app starts again: the open library was opened with the
//! embedder in use, and its fingerprint decides at the next opening whether the other embedder
//! is the same model (see selfrag-index's `fingerprint`). The API key is kept as the generator
//! server's is ([`KeyFile::Embedder`]): apart from the settings, readable by the user only, sent
//! only to the origin it was saved for.

use std::path::Path;
use std::time::Instant;

use selfrag_remote::{EmbedderServerConfig, ServerEmbedder, ServerUrl};
use serde::{Deserialize, Serialize};

use crate::generator_server::{KeyFile, save_key, saved_key};
use crate::{EMBEDDER_URL_ENV, EngineConfig, EngineError};

/// The embedder choice as the settings panel shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct EmbedderServerState {
    /// The server embedding now; `None`: this computer.
    pub url: Option<String>,
    /// The model asked of it; `None`: the one it serves.
    pub model: Option<String>,
    /// Set when `SELFRAG_EMBEDDER_URL` fixes the choice for this run.
    pub fixed_by_env: bool,
    /// The choice saved for the next start, where it is not the one in use: a server's address,
    /// or `""` for this computer.
    pub next_start: Option<String>,
    /// The model saved with that choice.
    pub next_model: Option<String>,
    /// Whether an API key is saved for the server of the saved choice (the key itself never
    /// leaves the Rust side).
    pub has_api_key: bool,
}

/// What a successful connection test found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct EmbedderServerCheck {
    /// The API's address requests go to (ending in `/v1`).
    pub url: String,
    /// The model the server names in its replies.
    pub model: String,
    /// The length of its vectors.
    pub dimensions: usize,
    /// The test's round trip (finding the model and embedding one sentence), in milliseconds.
    pub round_trip_ms: f64,
}

/// Whether `SELFRAG_EMBEDDER_URL` fixes the embedder for this run.
pub fn embedder_fixed_by_env() -> bool {
    std::env::var_os(EMBEDDER_URL_ENV).is_some_and(|v| !v.is_empty())
}

/// A value as typed: trimmed, blank is none.
fn given(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// The state of `config`'s embedder, with `saved_url` and `saved_model` the settings' choice
/// for the next start.
pub fn embedder_server_state(
    config: &EngineConfig,
    saved_url: Option<String>,
    saved_model: Option<String>,
) -> EmbedderServerState {
    let fixed_by_env = embedder_fixed_by_env();
    let in_use = config.embedder_server.as_ref();
    let url = in_use.map(|s| s.url.clone());
    let model = in_use.and_then(|s| s.model.clone());
    let (saved_url, saved_model) = (given(saved_url), given(saved_model));
    let changes =
        !fixed_by_env && (saved_url != url || (saved_url.is_some() && saved_model != model));
    EmbedderServerState {
        has_api_key: saved_url
            .as_deref()
            .is_some_and(|u| saved_key(&config.data_dir, KeyFile::Embedder, u).is_some()),
        next_start: changes.then(|| saved_url.clone().unwrap_or_default()),
        next_model: changes.then_some(saved_model).flatten(),
        url,
        model,
        fixed_by_env,
    }
}

/// The embeddings server the settings name for this start (`saved_url`, `saved_model`), with
/// its saved key: applied where the environment does not fix the embedder.
pub fn saved_embedder_server(
    data_dir: &Path,
    saved_url: Option<String>,
    saved_model: Option<String>,
) -> Option<EmbedderServerConfig> {
    let url = given(saved_url)?;
    let key = saved_key(data_dir, KeyFile::Embedder, &url);
    Some(crate::embedder_server_config(&url, given(saved_model), key))
}

/// Tests the server at `url` for `model` (`None`: the one it serves) as the embedder would use
/// it, changing nothing; `api_key` `None` uses the key saved for `url`'s origin, blank none.
pub async fn test_embedder_server(
    data_dir: &Path,
    url: String,
    model: Option<String>,
    api_key: Option<String>,
) -> Result<EmbedderServerCheck, EngineError> {
    let key = match api_key {
        None => saved_key(data_dir, KeyFile::Embedder, &url),
        typed => given(typed),
    };
    let config = crate::embedder_server_config(&url, model, key);
    let started = Instant::now();
    let server = tokio::task::spawn_blocking(move || ServerEmbedder::connect(&config))
        .await
        .map_err(|_| EngineError::ModelThreadGone)??;
    let info = server.info();
    Ok(EmbedderServerCheck {
        url: info.url.clone(),
        model: info.model.clone(),
        dimensions: info.dim,
        round_trip_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

/// Saves `api_key` for the server at `url`: `Some` replaces the saved key (blank removes it),
/// `None` keeps it; a key with no server to belong to is not kept.
pub fn save_embedder_api_key(
    data_dir: &Path,
    url: Option<&str>,
    api_key: Option<&str>,
) -> Result<(), EngineError> {
    let origin = url
        .map(ServerUrl::parse)
        .transpose()
        .map_err(selfrag_remote::EmbedderServerError::from)?
        .map(|u| u.origin());
    match (api_key.map(str::trim), origin) {
        (Some(""), _) => save_key(data_dir, KeyFile::Embedder, "", None),
        (Some(key), Some(origin)) => save_key(data_dir, KeyFile::Embedder, &origin, Some(key)),
        (Some(_), None) | (None, _) => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn config(dir: &Path, server: Option<&str>) -> EngineConfig {
        let mut config = EngineConfig::in_process(dir.to_owned(), "g".into(), "e".into());
        config.embedder_server = server.map(|u| crate::embedder_server_config(u, None, None));
        config
    }

    #[test]
    fn the_saved_choice_shows_as_the_next_start_only_where_it_differs() {
        let dir = tempfile::tempdir().unwrap();
        let local = config(dir.path(), None);
        let state = embedder_server_state(&local, None, None);
        assert_eq!((state.url, state.next_start), (None, None));
        let state = embedder_server_state(&local, Some(" http://gpu-box:8081 ".into()), None);
        assert_eq!(state.next_start.as_deref(), Some("http://gpu-box:8081"));
        assert!(!state.has_api_key);

        let served = config(dir.path(), Some("http://gpu-box:8081"));
        let state = embedder_server_state(&served, Some("http://gpu-box:8081".into()), None);
        assert_eq!(state.url.as_deref(), Some("http://gpu-box:8081"));
        assert_eq!(state.next_start, None);
        // Back to this computer at the next start.
        let state = embedder_server_state(&served, None, None);
        assert_eq!(state.next_start.as_deref(), Some(""));
        // Another model of the same server.
        let state = embedder_server_state(
            &served,
            Some("http://gpu-box:8081".into()),
            Some("bge".into()),
        );
        assert_eq!(state.next_model.as_deref(), Some("bge"));
    }

    #[test]
    fn the_key_is_kept_for_its_origin_apart_from_the_generators() {
        let dir = tempfile::tempdir().unwrap();
        save_embedder_api_key(
            dir.path(),
            Some("http://gpu-box:8081/v1"),
            Some(" lab-key "),
        )
        .unwrap();
        let saved =
            saved_embedder_server(dir.path(), Some("http://gpu-box:8081".into()), None).unwrap();
        assert_eq!(saved.api_key.as_deref(), Some("lab-key"));
        let elsewhere =
            saved_embedder_server(dir.path(), Some("http://other:8081".into()), None).unwrap();
        assert_eq!(elsewhere.api_key, None);
        assert_eq!(
            crate::generator_server::saved_api_key(dir.path(), "http://gpu-box:8081"),
            None,
            "the generator's key file is another"
        );
        assert!(dir.path().join("embedder-api-key").is_file());
        save_embedder_api_key(dir.path(), None, Some("")).unwrap();
        assert!(!dir.path().join("embedder-api-key").exists());
        assert_eq!(saved_embedder_server(dir.path(), None, None), None);
    }
}
