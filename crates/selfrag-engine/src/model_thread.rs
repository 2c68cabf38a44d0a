//! The one thread that owns the model weights. Callers send it closures over a channel and get
//! the result back, so no lock on a model is ever held across an `.await` (the pattern of
//! text-embeddings-inference). Models load on first use; a load error is reported per request.
//! Choosing another device drops the loaded models, so the next request loads them there.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, mpsc};

use selfrag_models::{BertEmbedder, LlamaGenerator};

use crate::EngineError;

type Job = Box<dyn FnOnce(&mut LoadedModels) + Send>;

/// Handle to the model thread; cheap to clone.
#[derive(Clone, Debug)]
pub struct ModelThread {
    jobs: mpsc::Sender<Job>,
    /// The kind of device the models were last loaded on (`cpu`, `cuda`, `metal`); `None` until
    /// a model loads. Read without waiting for the thread, which may be busy answering.
    in_use: Arc<Mutex<Option<&'static str>>>,
}

/// Where the models are, as resolved at start-up.
#[derive(Debug, Clone, Default)]
pub struct ModelPaths {
    pub generator: Option<PathBuf>,
    pub embedder: Option<PathBuf>,
    pub device: String,
}

/// The models, loaded lazily on the model thread.
pub struct LoadedModels {
    paths: ModelPaths,
    in_use: Arc<Mutex<Option<&'static str>>>,
    device: Option<selfrag_models::Device>,
    generator: Option<LlamaGenerator>,
    embedder: Option<BertEmbedder>,
}

impl LoadedModels {
    fn device(&mut self) -> Result<selfrag_models::Device, EngineError> {
        if let Some(d) = &self.device {
            return Ok(d.clone());
        }
        let d = selfrag_models::pick_device(&self.paths.device).map_err(|e| {
            EngineError::ModelLoad {
                role: "device",
                path: PathBuf::from(&self.paths.device),
                message: e.to_string(),
            }
        })?;
        self.device = Some(d.clone());
        *lock(&self.in_use) = Some(selfrag_models::device_kind(&d));
        Ok(d)
    }

    /// Chooses the device the models load on from now on; what was loaded elsewhere is dropped.
    /// Does nothing when `device` is the current choice.
    fn set_device(&mut self, device: String) {
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

    /// Whether the generator is loaded (for tests of reloading).
    #[cfg(test)]
    pub fn generator_loaded(&self) -> bool {
        self.generator.is_some()
    }

    /// Loads the generator if needed.
    pub fn ensure_generator(&mut self) -> Result<(), EngineError> {
        if self.generator.is_some() {
            return Ok(());
        }
        let path = self
            .paths
            .generator
            .clone()
            .ok_or(EngineError::ModelMissing {
                role: "generator",
                message: "no Self-RAG GGUF file was found; see the start screen".into(),
            })?;
        let device = self.device()?;
        let generator =
            LlamaGenerator::load(&path, &device).map_err(|e| EngineError::ModelLoad {
                role: "generator",
                path: path.clone(),
                message: e.to_string(),
            })?;
        tracing::info!(path = %path.display(), "generator loaded");
        self.generator = Some(generator);
        Ok(())
    }

    /// Loads the embedder if needed.
    pub fn ensure_embedder(&mut self) -> Result<(), EngineError> {
        if self.embedder.is_some() {
            return Ok(());
        }
        let path = self
            .paths
            .embedder
            .clone()
            .ok_or(EngineError::ModelMissing {
                role: "embedder",
                message: "no Contriever model folder was found; see the start screen".into(),
            })?;
        let device = self.device()?;
        let embedder = BertEmbedder::load(&path, &device).map_err(|e| EngineError::ModelLoad {
            role: "embedder",
            path: path.clone(),
            message: e.to_string(),
        })?;
        tracing::info!(path = %path.display(), "embedder loaded");
        self.embedder = Some(embedder);
        Ok(())
    }

    /// The embedder, loading it if needed.
    pub fn embedder(&mut self) -> Result<&BertEmbedder, EngineError> {
        self.ensure_embedder()?;
        self.embedder.as_ref().ok_or(EngineError::ModelThreadGone)
    }

    /// The generator (mutable) and, when it can be loaded, the embedder: both are needed by
    /// one Self-RAG run, which owns the thread while it runs.
    pub fn generator_and_embedder(
        &mut self,
    ) -> Result<(&mut LlamaGenerator, Result<&BertEmbedder, EngineError>), EngineError> {
        self.ensure_generator()?;
        let embedder = self.ensure_embedder();
        let generator = self
            .generator
            .as_mut()
            .ok_or(EngineError::ModelThreadGone)?;
        let embedder =
            embedder.and_then(|()| self.embedder.as_ref().ok_or(EngineError::ModelThreadGone));
        Ok((generator, embedder))
    }
}

impl ModelThread {
    /// Starts the thread; nothing is loaded until a job needs it.
    pub fn spawn(paths: ModelPaths) -> Result<Self, EngineError> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let in_use = Arc::new(Mutex::new(None));
        let thread_in_use = in_use.clone();
        std::thread::Builder::new()
            .name("selfrag-models".into())
            .spawn(move || {
                let mut models = LoadedModels {
                    paths,
                    in_use: thread_in_use,
                    device: None,
                    generator: None,
                    embedder: None,
                };
                for job in rx {
                    job(&mut models);
                }
            })
            .map_err(|_| EngineError::ModelThreadGone)?;
        Ok(Self { jobs, in_use })
    }

    /// Queues a device change behind the running job: the next request loads the models on
    /// `device`.
    pub fn set_device(&self, device: String) -> Result<(), EngineError> {
        self.jobs
            .send(Box::new(move |m| m.set_device(device)))
            .map_err(|_| EngineError::ModelThreadGone)
    }

    /// Queues new model paths behind the running job (see [`LoadedModels::set_paths`]).
    pub fn set_paths(
        &self,
        generator: Option<PathBuf>,
        embedder: Option<PathBuf>,
    ) -> Result<(), EngineError> {
        self.jobs
            .send(Box::new(move |m| m.set_paths(generator, embedder)))
            .map_err(|_| EngineError::ModelThreadGone)
    }

    /// The kind of device the models are loaded on, if any are.
    pub fn device_in_use(&self) -> Option<&'static str> {
        *lock(&self.in_use)
    }

    /// Runs `f` on the model thread and waits for it, blocking the calling thread.
    pub fn run_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut LoadedModels) -> R + Send + 'static,
    ) -> Result<R, EngineError> {
        let (tx, rx) = mpsc::channel();
        self.jobs
            .send(Box::new(move |m| {
                let _ = tx.send(f(m));
            }))
            .map_err(|_| EngineError::ModelThreadGone)?;
        rx.recv().map_err(|_| EngineError::ModelThreadGone)
    }

    /// Runs `f` on the model thread; the future resolves when it is done.
    pub async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut LoadedModels) -> R + Send + 'static,
    ) -> Result<R, EngineError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Box::new(move |m| {
                let _ = tx.send(f(m));
            }))
            .map_err(|_| EngineError::ModelThreadGone)?;
        rx.await.map_err(|_| EngineError::ModelThreadGone)
    }
}

/// The value is replaced whole under the lock, so a poisoned lock still holds a good one.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_new_device_drops_the_models_and_the_next_request_reloads_them() {
        let tmp = tempfile::tempdir().unwrap();
        let gguf = tmp.path().join("tiny.gguf");
        selfrag_models::fixtures::write_tiny_llama_gguf(&gguf).unwrap();
        let thread = ModelThread::spawn(ModelPaths {
            generator: Some(gguf),
            embedder: None,
            device: "cpu".into(),
        })
        .unwrap();
        assert_eq!(
            thread.device_in_use(),
            None,
            "nothing loads before it is needed"
        );
        thread.run(|m| m.ensure_generator()).await.unwrap().unwrap();
        assert_eq!(thread.device_in_use(), Some("cpu"));

        // The same choice again keeps what is loaded.
        thread.set_device("cpu".into()).unwrap();
        assert!(thread.run(|m| m.generator_loaded()).await.unwrap());

        thread.set_device("auto".into()).unwrap();
        assert!(!thread.run(|m| m.generator_loaded()).await.unwrap());
        assert_eq!(thread.device_in_use(), None);
        let device = thread
            .run(|m| {
                m.ensure_generator()?;
                Ok::<_, EngineError>(m.paths.device.clone())
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(device, "auto");
        assert!(
            thread.device_in_use().is_some(),
            "reloaded on the new device"
        );
    }
}
