//! Shared by the library's integration tests: a bag-of-words embedder, a double at the
//! `PassageEmbedder` boundary, so that which passage must win a search is known exactly.

use selfrag_index::{IndexError, PassageEmbedder};

/// Hashes each lower-cased word into one of `dim` buckets.
pub struct BagOfWords {
    pub dim: usize,
    pub id: &'static str,
}

/// The embedder most tests use.
pub const BAG_OF_WORDS: BagOfWords = BagOfWords {
    dim: 64,
    id: "bag-of-words-64",
};

impl PassageEmbedder for BagOfWords {
    fn model_id(&self) -> String {
        self.id.into()
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0; self.dim];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let h = w
                        .to_lowercase()
                        .bytes()
                        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
                    v[(h % self.dim as u64) as usize] += 1.0;
                }
                v
            })
            .collect())
    }
}

#[allow(dead_code)] // not every test file counts
/// Counts the texts it embeds: a test can tell that nothing was embedded again.
pub struct Counting {
    pub inner: BagOfWords,
    pub texts: std::sync::atomic::AtomicUsize,
    /// Calls that embedded passages.
    pub calls: std::sync::atomic::AtomicUsize,
}

#[allow(dead_code)]
impl Counting {
    pub fn new(inner: BagOfWords) -> Self {
        Self {
            inner,
            texts: std::sync::atomic::AtomicUsize::new(0),
            calls: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    pub fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn embedded(&self) -> usize {
        self.texts.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl PassageEmbedder for Counting {
    fn model_id(&self) -> String {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    /// Counts passages: the library's fingerprint sentences are left out.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        if texts != selfrag_index::FINGERPRINT_SENTENCES {
            self.texts
                .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.inner.embed(texts)
    }
}

#[allow(dead_code)] // not every test file searches
/// A hybrid search request for `text`, its vector made by `embedder`.
pub fn query(embedder: &dyn PassageEmbedder, text: &str, k: usize) -> selfrag_index::SearchRequest {
    let vector = embedder.embed(&[text]).unwrap_or_default().remove(0);
    selfrag_index::SearchRequest::hybrid(text, vector, k)
}

/// Ends a lopdf document built page by page: the page tree `pages_id` over `kids`, and a
/// catalog the trailer names.
#[allow(dead_code)] // only the files that write PDFs
pub fn close_page_tree(
    doc: &mut lopdf::Document,
    pages_id: lopdf::ObjectId,
    kids: Vec<lopdf::Object>,
) {
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        lopdf::Object::Dictionary(
            lopdf::dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => count },
        ),
    );
    let catalog = doc.add_object(lopdf::dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
}
