//! Bridges selfrag-core's synchronous `Retriever` to the library: the query is embedded on the
//! model thread (served between the forward passes of a generation in progress), or by the
//! embeddings server, and searched
//! in LanceDB, hybrid (Contriever vectors and BM25, fused by reciprocal rank).
//! [`GivenPassages`] serves passages that come with the question instead (evaluation data).

use std::sync::Arc;

use selfrag_core::{BackendError, EmbedderInfo, Passage, Retriever};
use selfrag_index::{Library, SearchRequest};

use crate::embedding::Embeddings;
use crate::model_thread::EmbedFor;

/// A `Retriever` over the library, for one Self-RAG run on a blocking thread.
pub struct LibraryRetriever {
    pub embeddings: Embeddings,
    /// `None` where the library cannot open (no embedder): nothing is found.
    pub library: Option<Arc<Library>>,
    pub runtime: tokio::runtime::Handle,
    /// The embedder of the last query searched (for the trace); `None` before the first.
    pub embedded_with: Option<EmbedderInfo>,
}

impl Retriever for LibraryRetriever {
    fn search(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, BackendError> {
        let Some(library) = &self.library else {
            return Ok(Vec::new());
        };
        let embedded = self
            .embeddings
            .embed_blocking(vec![query.to_owned()], EmbedFor::Answer)?;
        self.embedded_with = Some(embedded.by);
        let vector = embedded.vectors.into_iter().next().unwrap_or_default();
        let request = SearchRequest::hybrid(query, vector, k);
        let hits = self.runtime.block_on(library.search(&request))?;
        Ok(hits
            .into_iter()
            .map(|h| Passage {
                work: library.work_of(&h.path, &h.document_id),
                id: h.passage_id,
                title: h.title,
                path: h.path,
                page: h.page,
                page_label: h.page_label,
                ocr_confidence: h.ocr_confidence,
                text: h.text,
            })
            .collect())
    }

    fn describe(&self) -> Option<EmbedderInfo> {
        self.embedded_with.clone()
    }
}

/// A `Retriever` that serves fixed passages, the top K in the order given, whatever the query:
/// for evaluation data that comes with its retrieved passages, as the reference's evaluation
/// reads its precomputed `ctxs` (AkariAsai/self-rag `retrieval_lm/run_short_form.py` lines
/// 203–207 and 328).
pub struct GivenPassages(pub Vec<Passage>);

impl Retriever for GivenPassages {
    fn search(&mut self, _query: &str, k: usize) -> Result<Vec<Passage>, BackendError> {
        Ok(self.0.iter().take(k).cloned().collect())
    }
}
