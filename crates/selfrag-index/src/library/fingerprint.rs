//! The embedder's fingerprint: its vectors of a few fixed sentences, recorded in `library.json`
//! when the library is made. It tells one model from another whatever its name or its path on
//! a machine (two computers of a lab keep the same model in different folders, and one model
//! may be renamed), so that one library never holds two models' vectors.

use crate::{IndexError, PassageEmbedder};

/// The sentences every fingerprint embeds: short, unlike one another, of the kind a library
/// holds. Changing them makes every recorded fingerprint unreadable: never change them. Public
/// for tests whose embedders count the passages they embed, and leave these out.
pub const PROBES: [&str; 3] = [
    "Retrieval-augmented generation grounds a language model's answer in passages it retrieves.",
    "The mitochondrion is the site of oxidative phosphorylation in eukaryotic cells.",
    "In 1648 the Peace of Westphalia ended the Thirty Years' War.",
];

/// The least cosine between an embedder's vector of a probe and the recorded one for the two
/// to count as one model. The same weights agree to 0.99999 in f32; the int8 projections of
/// CPUs with VNNI move the real all-MiniLM-L6-v2's probes to 0.9988–0.9990 of f32's; two
/// different models of the same size disagree far more.
pub const SAME_MODEL_COSINE: f32 = 0.99;

/// The least ratio of the shorter vector's length to the longer's, over the probes, for two
/// embedders to count as one model. The library ranks by inner product, so the same directions
/// at other lengths (a server that normalizes what the local model does not) rank passages
/// differently. int8 moves MiniLM's lengths by under 1% (0.991 of f32's at the least);
/// normalizing moves a raw mean-pooled vector by far more.
pub const SAME_MODEL_LENGTH_RATIO: f32 = 0.95;

/// `embedder`'s vectors of the probe sentences.
pub(crate) fn fingerprint(embedder: &dyn PassageEmbedder) -> Result<Vec<Vec<f32>>, IndexError> {
    super::embed_blocking(embedder, &PROBES)
}

/// How far two fingerprints agree, each the least over the probes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Agreement {
    /// The cosine between the two vectors of one probe.
    pub cosine: f32,
    /// The shorter vector's length over the longer's.
    pub length_ratio: f32,
}

impl Agreement {
    /// Whether the two are one model: [`SAME_MODEL_COSINE`] and [`SAME_MODEL_LENGTH_RATIO`].
    pub fn same_model(&self) -> bool {
        self.cosine >= SAME_MODEL_COSINE && self.length_ratio >= SAME_MODEL_LENGTH_RATIO
    }
}

/// How far two fingerprints agree; `None` where they cannot be compared (another number of
/// probes, another dimension, a vector of length 0).
pub fn agreement(recorded: &[Vec<f32>], this: &[Vec<f32>]) -> Option<Agreement> {
    if recorded.len() != this.len() || recorded.is_empty() {
        return None;
    }
    let mut least = Agreement {
        cosine: f32::INFINITY,
        length_ratio: f32::INFINITY,
    };
    for (a, b) in recorded.iter().zip(this) {
        if a.len() != b.len() || a.is_empty() {
            return None;
        }
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let length = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        let (la, lb) = (length(a), length(b));
        let cosine = dot / (la * lb);
        let length_ratio = la.min(lb) / la.max(lb);
        if !cosine.is_finite() || !length_ratio.is_finite() {
            return None;
        }
        least.cosine = least.cosine.min(cosine);
        least.length_ratio = least.length_ratio.min(length_ratio);
    }
    Some(least)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn agreement_is_the_least_cosine_and_length_ratio_of_a_probe() {
        let a = vec![vec![1.0, 0.0], vec![0.0, 1.0]];
        let same = agreement(&a, &a).unwrap();
        assert_eq!((same.cosine, same.length_ratio), (1.0, 1.0));
        assert!(same.same_model());
        // Cosine 1/√2, lengths 1 and √2.
        let b = vec![vec![1.0, 0.0], vec![1.0, 1.0]];
        let least = agreement(&a, &b).unwrap();
        assert!(
            (least.cosine - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6,
            "{least:?}"
        );
        assert!((least.length_ratio - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert!(!least.same_model());
        assert_eq!(
            agreement(&a, &[vec![1.0, 0.0]]),
            None,
            "another number of probes"
        );
        assert_eq!(
            agreement(&a, &[vec![1.0], vec![1.0]]),
            None,
            "another dimension"
        );
        assert_eq!(agreement(&a, &[vec![f32::NAN, 0.0], vec![0.0, 1.0]]), None);
        assert_eq!(agreement(&a, &[vec![0.0, 0.0], vec![0.0, 1.0]]), None);
        // The same directions at another length: a normalizing server against a model that
        // does not normalize.
        let longer = vec![vec![2.0, 0.0], vec![0.0, 2.0]];
        let scaled = agreement(&a, &longer).unwrap();
        assert_eq!((scaled.cosine, scaled.length_ratio), (1.0, 0.5));
        assert!(!scaled.same_model());
        // Lengths within 5%, as int8 against f32: one model.
        let close = vec![vec![0.97, 0.0], vec![0.0, 1.0]];
        assert!(agreement(&a, &close).unwrap().same_model());
    }
}
