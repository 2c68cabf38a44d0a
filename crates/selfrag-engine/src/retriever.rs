//! Bridges selfrag-core's synchronous `Retriever` to the library: the query is embedded by the
//! model thread's own embedder (the retriever runs on that thread) and searched in LanceDB,
//! hybrid (Contriever vectors and BM25, fused by reciprocal rank).

use std::sync::Arc;

use selfrag_core::{BackendError, Passage, Retriever};
use selfrag_index::{Library, SearchRequest};
use selfrag_models::BertEmbedder;

use crate::EngineError;

/// A `Retriever` over the library, for one Self-RAG run on the model thread.
pub struct LibraryRetriever<'a> {
    pub embedder: Result<&'a BertEmbedder, EngineError>,
    pub library: Option<Arc<Library>>,
    pub runtime: tokio::runtime::Handle,
}

impl Retriever for LibraryRetriever<'_> {
    fn search(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, BackendError> {
        let embedder = match &self.embedder {
            Ok(e) => *e,
            Err(e) => return Err(e.to_string().into()),
        };
        let Some(library) = &self.library else {
            return Ok(Vec::new());
        };
        let vector = embedder
            .embed(&[query])?
            .into_iter()
            .next()
            .unwrap_or_default();
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
