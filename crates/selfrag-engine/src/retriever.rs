//! Bridges selfrag-core's synchronous `Retriever` to the library: the query is embedded by the
//! model thread's embedder (directly when the run is on that thread, as a job sent to it when
//! a server generates and the run is elsewhere) and searched in LanceDB, hybrid (Contriever
//! vectors and BM25, fused by reciprocal rank).

use std::sync::Arc;

use selfrag_core::{BackendError, Passage, Retriever};
use selfrag_index::{Library, SearchRequest};
use selfrag_models::BertEmbedder;

use crate::EngineError;
use crate::model_thread::ModelThread;

/// Where the query's vector comes from.
pub enum QueryEmbedder<'a> {
    /// The run is on the model thread: its embedder, or why it could not load.
    Here(Result<&'a BertEmbedder, EngineError>),
    /// The run is on another thread (a server generates): a job for the model thread per query,
    /// which queues between indexing's batches instead of holding the thread for the answer.
    Thread(ModelThread),
}

impl QueryEmbedder<'_> {
    fn embed(&self, query: &str) -> Result<Vec<f32>, BackendError> {
        let first = |vectors: Vec<Vec<f32>>| vectors.into_iter().next().unwrap_or_default();
        match self {
            Self::Here(Ok(embedder)) => Ok(first(embedder.embed(&[query])?)),
            Self::Here(Err(e)) => Err(e.to_string().into()),
            Self::Thread(models) => {
                let query = query.to_owned();
                let vectors = models.run_blocking(move |m| -> Result<_, String> {
                    let embedder = m.embedder().map_err(|e| e.to_string())?;
                    embedder.embed(&[query.as_str()]).map_err(|e| e.to_string())
                })??;
                Ok(first(vectors))
            }
        }
    }
}

/// A `Retriever` over the library, for one Self-RAG run.
pub struct LibraryRetriever<'a> {
    pub embedder: QueryEmbedder<'a>,
    pub library: Option<Arc<Library>>,
    pub runtime: tokio::runtime::Handle,
}

impl Retriever for LibraryRetriever<'_> {
    fn search(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, BackendError> {
        let Some(library) = &self.library else {
            return Ok(Vec::new());
        };
        let vector = self.embedder.embed(query)?;
        let request = SearchRequest::hybrid(query, vector, k);
        let hits = self.runtime.block_on(library.search(&request))?;
        Ok(hits
            .into_iter()
            .map(|h| Passage {
                id: h.passage_id,
                title: h.title,
                path: h.path,
                page: h.page,
                text: h.text,
            })
            .collect())
    }
}
