//! The embedder on a server against a real `llama-server --embedding` (built by `cargo xtask
//! test`, path in `SELFRAG_LLAMA_SERVER`) serving the tiny test BERT converted to GGUF, compared
//! with the local candle embedder on the same weights: same vectors, in order, across requests.
//! Then the failures, each provoked for real.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use selfrag_core::EmbedderPrecision;
use selfrag_models::{BertEmbedder, Device};
use selfrag_remote::{EmbedderServerConfig, EmbedderServerError, ServerEmbedder};
use selfrag_testkit::llama_server::{self, LlamaServer};

/// One server at a time (two threads each on two cores).
static ONE_SERVER_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Fixture {
    dir: tempfile::TempDir,
    server: LlamaServer,
    _alone: std::sync::MutexGuard<'static, ()>,
}

/// The tiny BERT as a folder (`bert/`) for the local embedder and as a GGUF served by
/// llama-server with `extra` arguments; `None` after a loud skip where there is no
/// llama-server (a failure under CI).
fn serving(extra: &[&str]) -> Option<Fixture> {
    let alone = ONE_SERVER_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let binary = llama_server::binary()?;
    let dir = tempfile::tempdir().unwrap();
    selfrag_fixtures::write_tiny_bert(&dir.path().join("bert")).unwrap();
    let gguf = dir.path().join("tiny-bert.gguf");
    selfrag_fixtures::write_tiny_bert_gguf(&gguf).unwrap();
    let mut args = llama_server::EMBEDDING_ARGS.to_vec();
    args.extend_from_slice(extra);
    let server = LlamaServer::start(&binary, &gguf, dir.path(), 1, 512, &args).unwrap();
    Some(Fixture {
        dir,
        server,
        _alone: alone,
    })
}

fn local(dir: &Path) -> BertEmbedder {
    BertEmbedder::load_with_precision(&dir.join("bert"), &Device::Cpu, EmbedderPrecision::F32)
        .unwrap()
}

/// Sentences of the kinds a library holds: words of the tiny vocabulary, capitals (lowercased
/// by both), punctuation, digits, words no vocabulary holds, and an accent.
fn sentences() -> Vec<String> {
    let mut texts: Vec<String> = [
        "Retrieval-augmented generation grounds a language model's answer in passages.",
        "The model reads the passage, and the answer is supported.",
        "In 1648 the Peace of Westphalia ended the war.",
        "Zyxwvut qrstuv: an unknown word, then café.",
        "what is self-rag?",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    // Past one request's 32 texts, so the batches and their order are checked too.
    texts.extend((0..40).map(|i| format!("passage number {i} of the library is about the model")));
    texts
}

fn cosine_and_length_ratio(a: &[f32], b: &[f32]) -> (f32, f32) {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let length = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let (la, lb) = (length(a), length(b));
    (dot / (la * lb), la.min(lb) / la.max(lb))
}

#[test]
fn llama_server_embeds_as_the_local_embedder_does() {
    let Some(fixture) = serving(&[]) else {
        return;
    };
    let server = ServerEmbedder::connect(&EmbedderServerConfig::new(&fixture.server.url)).unwrap();
    let embedder = local(fixture.dir.path());
    assert_eq!(server.dim(), embedder.dim());
    assert_eq!(server.info().url, format!("{}/v1", fixture.server.url));
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let remote = server.embed(&refs).unwrap();
    let here = embedder.embed(&refs).unwrap();
    assert_eq!(remote.len(), texts.len());
    let mut least = (f32::INFINITY, f32::INFINITY);
    for ((text, a), b) in texts.iter().zip(&remote).zip(&here) {
        let (cosine, ratio) = cosine_and_length_ratio(a, b);
        assert!(cosine > 0.9999, "{text:?}: cosine {cosine}");
        assert!(ratio > 0.9999, "{text:?}: length ratio {ratio}");
        least = (least.0.min(cosine), least.1.min(ratio));
    }
    eprintln!(
        "llama-server against the local embedder, {} texts: least cosine {:.7}, least length ratio {:.7}",
        texts.len(),
        least.0,
        least.1
    );
    // The same URL with its API's path works alike.
    let v1 = ServerEmbedder::connect(&EmbedderServerConfig::new(format!(
        "{}/v1",
        fixture.server.url
    )))
    .unwrap();
    assert_eq!(v1.embed(&refs[..1]).unwrap(), remote[..1].to_vec());
}

#[test]
fn a_key_the_server_wants_is_sent_and_a_missing_one_named() {
    let Some(fixture) = serving(&["--api-key", "lab-key"]) else {
        return;
    };
    let without =
        ServerEmbedder::connect(&EmbedderServerConfig::new(&fixture.server.url)).unwrap_err();
    assert!(
        matches!(
            without,
            EmbedderServerError::Unauthorized { status: 401, .. }
        ),
        "{without}"
    );
    assert!(
        without.to_string().contains("SELFRAG_EMBEDDER_API_KEY"),
        "{without}"
    );
    let mut config = EmbedderServerConfig::new(&fixture.server.url);
    config.api_key = Some("lab-key".into());
    let server = ServerEmbedder::connect(&config).unwrap();
    assert_eq!(server.embed(&["a passage"]).unwrap().len(), 1);
}

#[test]
fn a_model_the_server_does_not_serve_is_refused_naming_what_it_serves() {
    let Some(fixture) = serving(&["--alias", "tiny-contriever"]) else {
        return;
    };
    let mut config = EmbedderServerConfig::new(&fixture.server.url);
    config.model = Some("bge-large".into());
    let error = ServerEmbedder::connect(&config).unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, EmbedderServerError::ModelNotServed { .. }),
        "{message}"
    );
    assert!(message.contains("\"bge-large\""), "{message}");
    assert!(message.contains("tiny-contriever"), "{message}");
    config.model = Some("tiny-contriever".into());
    let server = ServerEmbedder::connect(&config).unwrap();
    assert!(
        server.model_id().starts_with("tiny-contriever on "),
        "{}",
        server.model_id()
    );
}
