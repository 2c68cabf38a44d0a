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
                        .fold(7u64, |h, b| h * 31 + b as u64);
                    v[(h % self.dim as u64) as usize] += 1.0;
                }
                v
            })
            .collect())
    }
}
