//! Getting the models onto the machine from the app: what a missing model would take to
//! download ([`ModelOffer`], shown on the first-run screen), downloading it into the Hugging
//! Face cache with progress and cancel ([`Engine::download_model`], over
//! `selfrag_hub::download`), and picking up what is now on disk without a restart
//! ([`Engine::refresh_models`]).

use std::path::PathBuf;

use selfrag_hub::download::{DownloadPhase, DownloadProgress, HubOptions};
use selfrag_hub::store::{ModelSpec, Resolved};
use serde::{Deserialize, Serialize};

use crate::status::{AppStatus, ModelRole};
use crate::{Engine, EngineError};

/// What downloading a missing model involves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ModelOffer {
    /// The manifest id, what `download_model` takes.
    pub id: String,
    /// Hugging Face repository, `org/name`.
    pub repo: String,
    /// SPDX-style license of the weights.
    pub license: String,
    /// The licence in words (what it allows and forbids).
    pub license_terms: String,
    /// Approximate download size in bytes.
    #[cfg_attr(feature = "typescript", ts(type = "number"))]
    pub size_bytes: u64,
    /// Bytes an interrupted download already has on disk; it resumes from there.
    #[cfg_attr(feature = "typescript", ts(type = "number"))]
    pub partial_bytes: u64,
    /// A caveat from the manifest (e.g. that no public conversion exists).
    pub note: Option<String>,
}

/// What a download is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum DownloadStage {
    Checking,
    Downloading,
    Verifying,
    Done,
}

/// A progress report of one model's download, streamed to the front end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ModelDownloadProgress {
    pub model_id: String,
    pub stage: DownloadStage,
    /// The file being worked on, as named in the repository.
    pub file: String,
    /// Bytes of the whole model on disk so far.
    #[cfg_attr(feature = "typescript", ts(type = "number"))]
    pub bytes_done: u64,
    /// Bytes of the whole model; 0 until the hub has answered.
    #[cfg_attr(feature = "typescript", ts(type = "number"))]
    pub bytes_total: u64,
    pub bytes_per_second: f64,
    /// Seconds left at the current rate, when there is one.
    pub eta_seconds: Option<f64>,
}

/// The offer for a model looked up by its manifest (none when the environment names a path:
/// downloading would not change what the app uses).
pub(crate) fn offer(location: &Resolved) -> Option<ModelOffer> {
    let spec = location.spec.as_ref()?;
    let partial_bytes = selfrag_hub::hf_hub_cache_dir()
        .map(|cache| selfrag_hub::download::partial_bytes(spec, &cache))
        .unwrap_or(0);
    Some(ModelOffer {
        id: spec.id.clone(),
        repo: spec.repo.clone(),
        license: spec.license.clone(),
        license_terms: spec.license_terms.clone(),
        size_bytes: spec.size_bytes,
        partial_bytes,
        note: spec.note.clone(),
    })
}

impl Engine {
    /// Downloads shipped model `id` into the Hugging Face cache (honouring `HF_ENDPOINT`,
    /// `HF_HUB_OFFLINE` and `HF_TOKEN`), streaming progress; [`Engine::cancel`] with
    /// [`crate::JobKind::Download`] stops it, keeping the partial file for the next attempt.
    /// Then re-resolves the models, so a model that is now complete is used from the next
    /// request on, and returns the new status. One download per model at a time.
    pub async fn download_model(
        &self,
        id: &str,
        on_progress: impl Fn(ModelDownloadProgress) + Send + 'static,
    ) -> Result<AppStatus, EngineError> {
        let kind = crate::JobKind::Download {
            model: id.to_owned(),
        };
        let Some(job) = self.jobs.start_alone(kind) else {
            return Err(EngineError::Download {
                model: id.to_owned(),
                code: crate::error::DownloadFailure::Busy,
                message: format!("{id} is already being downloaded; wait for it or cancel it"),
            });
        };
        let cancel = job.flag().clone();
        let spec = ModelSpec::by_id(id).map_err(|e| EngineError::Download {
            model: id.to_owned(),
            code: crate::error::DownloadFailure::UnknownModel,
            message: format!("{e}; the known ids are those of `selfrag models list`"),
        })?;
        let options = HubOptions::from_env();
        let model_id = spec.id.clone();
        let result = tokio::task::spawn_blocking(move || {
            let mut forward = |p: &DownloadProgress| on_progress(event(&model_id, p));
            // Boxed: the error is large, and it crosses a thread.
            selfrag_hub::download::download_model(&spec, &options, &mut forward, &cancel)
                .map_err(Box::new)
        })
        .await
        .map_err(|e| EngineError::Download {
            model: id.to_owned(),
            code: crate::error::DownloadFailure::Failed,
            message: format!("the download stopped unexpectedly ({e}); start it again, it resumes"),
        })?;
        // Whatever happened, what is on disk may have changed (a partial file, another model).
        let status = self.refresh_models().await;
        match result {
            Ok(report) => {
                tracing::info!(
                    model = id,
                    found = %report.found.display(),
                    fetched = report.fetched_bytes,
                    cached = report.cached_bytes,
                    resumed = report.resumed_bytes,
                    "model downloaded"
                );
                Ok(status)
            }
            Err(e) => Err(EngineError::Download {
                model: id.to_owned(),
                code: crate::error::DownloadFailure::from(&*e),
                message: e.to_string(),
            }),
        }
    }

    /// Looks for the models again (after a download, or files copied in by hand) and points
    /// the model thread at what is found now; a model whose path changed loads afresh on its
    /// next use. Returns the new status.
    pub async fn refresh_models(&self) -> AppStatus {
        let generator = selfrag_hub::store::resolve_generator(self.config().generator.as_deref());
        let embedder = selfrag_hub::store::resolve_embedder(self.config().embedder.as_deref());
        let statuses = vec![
            crate::engine::model_status(ModelRole::Generator, &generator),
            crate::engine::embedder_status(self.config(), &embedder),
        ];
        if let Ok(mut current) = self.model_status.write() {
            *current = statuses;
        }
        if let Ok(mut path) = self.embedder_path.write() {
            path.clone_from(&embedder.found);
        }
        // With an embeddings server the local embedder is never loaded.
        let local_embedder = embedder
            .found
            .filter(|_| self.config().embedder_server.is_none());
        let paths: (Option<PathBuf>, Option<PathBuf>) = (generator.found, local_embedder);
        if let Err(e) = self.models.set_paths(paths.0, paths.1) {
            tracing::warn!(error = %e, "cannot point the model thread at the new models");
        }
        self.status().await
    }
}

fn event(model_id: &str, p: &DownloadProgress) -> ModelDownloadProgress {
    ModelDownloadProgress {
        model_id: model_id.to_owned(),
        stage: match p.phase {
            DownloadPhase::Checking => DownloadStage::Checking,
            DownloadPhase::Downloading => DownloadStage::Downloading,
            DownloadPhase::Verifying => DownloadStage::Verifying,
            DownloadPhase::Done => DownloadStage::Done,
        },
        file: p.file.clone(),
        bytes_done: p.bytes_done,
        bytes_total: p.bytes_total,
        bytes_per_second: p.bytes_per_second,
        eta_seconds: p.eta_seconds,
    }
}
