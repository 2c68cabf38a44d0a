//! Integration tests of selfrag-models, on tiny random models written by `fixtures` at test
//! time (no downloads). One binary, one module per component.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod embedder;
mod generator;
mod llama;
mod minilm;
mod store;
mod tokenizer;

use std::path::PathBuf;

use selfrag_models::fixtures;
use tempfile::TempDir;

/// A temp dir holding the tiny Llama GGUF; keep the dir alive while using the path.
pub fn tiny_gguf() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("selfrag_llama2_7b.tiny.gguf");
    fixtures::write_tiny_llama_gguf(&path).unwrap();
    (dir, path)
}
