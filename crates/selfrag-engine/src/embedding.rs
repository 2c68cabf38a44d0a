//! Where text becomes vectors: the local embedder on the model thread, or an embeddings server
//! (`SELFRAG_EMBEDDER_URL`, with `SELFRAG_EMBEDDER_MODEL` and `SELFRAG_EMBEDDER_API_KEY`; the
//! CLI's `--embedder-url` and `--embedder-model`). With a server, nothing is embedded on this
//! computer: queries, passages and the library's fingerprint all go to it, so a library's
//! vectors come from one model, and the model thread stays free for the generator.
//!
//! The server is connected (its model found, its vectors' length learnt) on first use, and again
//! after a failure, so a server started after the app is used once it answers. A failed
//! connection is remembered for [`RETRY_AFTER`]: the callers meanwhile (the status, the library
//! list, a search) get its error at once rather than each waiting on the server again.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use selfrag_core::{DeviceKind, EmbedderInfo, EmbedderPrecision};
use selfrag_remote::{EmbedderServerConfig, EmbedderServerError, ServerEmbedder};

use crate::EngineError;
use crate::model_thread::{EmbedFor, Embedded, ModelThread};

/// The embedder in use, for queries and passages alike.
#[derive(Debug, Clone)]
pub(crate) struct Embeddings {
    models: ModelThread,
    server: Option<Arc<ServerSlot>>,
}

/// How long a failed connection's error stands before the server is asked again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The embeddings server: its configuration, and the connection once made (or the last failure).
#[derive(Debug)]
struct ServerSlot {
    config: EmbedderServerConfig,
    state: Mutex<Connection>,
}

#[derive(Debug, Default)]
struct Connection {
    connected: Option<Arc<ServerEmbedder>>,
    failed: Option<(Instant, EmbedderServerError)>,
}

impl Embeddings {
    pub fn new(models: ModelThread, server: Option<EmbedderServerConfig>) -> Self {
        Self {
            models,
            server: server.map(|config| {
                Arc::new(ServerSlot {
                    config,
                    state: Mutex::new(Connection::default()),
                })
            }),
        }
    }

    /// The connected server, connecting first where needed; `None` for the local embedder.
    /// Blocks: call from a blocking thread. The lock is not held while connecting.
    fn connected_server(&self) -> Option<Result<Arc<ServerEmbedder>, EngineError>> {
        let slot = self.server.as_ref()?;
        {
            let state = slot.state.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(server) = &state.connected {
                return Some(Ok(server.clone()));
            }
            if let Some((at, error)) = &state.failed
                && at.elapsed() < RETRY_AFTER
            {
                return Some(Err(error.clone().into()));
            }
        }
        let connected = ServerEmbedder::connect(&slot.config).map(Arc::new);
        let mut state = slot.state.lock().unwrap_or_else(PoisonError::into_inner);
        Some(match connected {
            Ok(server) => {
                state.failed = None;
                Ok(state.connected.get_or_insert(server).clone())
            }
            Err(e) => {
                state.failed = Some((Instant::now(), e.clone()));
                Err(e.into())
            }
        })
    }

    /// Forgets the connection after a failed request: the next one connects afresh (the server
    /// restarted, or serves another model now).
    fn disconnect(&self) {
        if let Some(slot) = &self.server {
            slot.state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .connected = None;
        }
    }

    /// Embeds `texts` for `purpose`, blocking the calling thread (which must not be a runtime
    /// worker).
    pub fn embed_blocking(
        &self,
        texts: Vec<String>,
        purpose: EmbedFor,
    ) -> Result<Embedded, EngineError> {
        let Some(server) = self.connected_server() else {
            return self.models.embed_blocking(texts, purpose);
        };
        let server = server?;
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = server.embed(&refs).inspect_err(|_| self.disconnect())?;
        Ok(Embedded {
            vectors,
            by: EmbedderInfo {
                model: server.info().model.clone(),
                precision: EmbedderPrecision::F32,
                device: DeviceKind::Cpu,
                server: Some(server.info().url.clone()),
            },
        })
    }

    /// Embeds `texts` for a search, at once.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EngineError> {
        if self.server.is_none() {
            return self.models.embed(texts).await;
        }
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.embed_blocking(texts, EmbedFor::Answer))
            .await
            .map_err(|_| EngineError::ModelThreadGone)?
            .map(|embedded| embedded.vectors)
    }

    /// The server's model and address, and its vectors' length (`None` for the local embedder,
    /// whose name is its folder and whose length the model thread knows).
    pub async fn server_identity(&self) -> Option<Result<(String, usize), EngineError>> {
        self.server.as_ref()?;
        let this = self.clone();
        Some(
            tokio::task::spawn_blocking(move || {
                this.connected_server()
                    .unwrap_or(Err(EngineError::ModelThreadGone))
                    .map(|server| (server.model_id(), server.dim()))
            })
            .await
            .unwrap_or(Err(EngineError::ModelThreadGone)),
        )
    }

    /// The local embedder's vector length, loading it if needed.
    pub async fn local_shape(&self) -> Result<crate::model_thread::EmbedderShape, EngineError> {
        self.models.embedder_shape().await
    }
}
