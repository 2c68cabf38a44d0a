//! The embedder's fingerprint: its vectors of a few fixed sentences, recorded in `library.json`
//! when the library is made. It tells one model from another whatever its name or its path on
//! a machine (two computers of a lab keep the same model in different folders, and one model
//! may be renamed), so that one library never holds two models' vectors.

use crate::{IndexError, PassageEmbedder};

/// The sentences every fingerprint embeds: short, unlike one another, of the kind a library
/// holds. Changing them makes every recorded fingerprint unreadable: never change them.
const PROBES: [&str; 3] = [
    "Retrieval-augmented generation grounds a language model's answer in passages it retrieves.",
    "The mitochondrion is the site of oxidative phosphorylation in eukaryotic cells.",
    "In 1648 the Peace of Westphalia ended the Thirty Years' War.",
];

/// The least cosine between an embedder's vector of a probe and the recorded one for the two
/// to count as one model. The same weights agree to 0.99999 in f32; the int8 projections of
/// CPUs with VNNI move a vector by less than this against f32 (measured on the test embedder
/// and the real MiniLM: see docs/LAB.md); two different models of the same size disagree far
/// more.
pub(crate) const SAME_MODEL_COSINE: f32 = 0.99;

/// `embedder`'s vectors of the probe sentences.
pub(crate) fn fingerprint(embedder: &dyn PassageEmbedder) -> Result<Vec<Vec<f32>>, IndexError> {
    super::embed_blocking(embedder, &PROBES)
}

/// How far two fingerprints agree: the least cosine between their vectors of one probe; `None`
/// where they cannot be compared (another number of probes, or another dimension).
pub(crate) fn agreement(recorded: &[Vec<f32>], this: &[Vec<f32>]) -> Option<f32> {
    if recorded.len() != this.len() || recorded.is_empty() {
        return None;
    }
    let mut least = f32::INFINITY;
    for (a, b) in recorded.iter().zip(this) {
        if a.len() != b.len() || a.is_empty() {
            return None;
        }
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norms = a.iter().map(|x| x * x).sum::<f32>().sqrt()
            * b.iter().map(|x| x * x).sum::<f32>().sqrt();
        let cosine = dot / norms;
        if !cosine.is_finite() {
            return None;
        }
        least = least.min(cosine);
    }
    Some(least)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn agreement_is_the_least_cosine_of_a_probe() {
        let a = vec![vec![1.0, 0.0], vec![0.0, 1.0]];
        assert_eq!(agreement(&a, &a), Some(1.0));
        let b = vec![vec![1.0, 0.0], vec![1.0, 1.0]];
        let least = agreement(&a, &b).unwrap();
        assert!(
            (least - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6,
            "{least}"
        );
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
    }
}
