//! Integration tests of selfrag-models, on tiny random models written by `fixtures` at test
//! time (no downloads). One binary, one module per component.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

mod allocation;
mod corrupt;
mod cpu_timings;
mod embedder;
mod families;
mod generator;
// Only `cargo xtask gpu-check` builds the `cuda` feature; CI never does.
#[cfg(feature = "cuda")]
mod gpu;
mod llama;
mod minilm;
mod space_prefix;
mod tokenizer;

use std::path::PathBuf;

/// Every test thread's largest single allocation is recorded (see `allocation`), so the
/// corrupt-file tests can tell an absurd count that allocated gigabytes from one that was refused.
#[global_allocator]
static ALLOCATOR: allocation::Tracking = allocation::Tracking;

use selfrag_fixtures as fixtures;
use tempfile::TempDir;

/// A temp dir holding the tiny Llama GGUF; keep the dir alive while using the path.
pub fn tiny_gguf() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("selfrag_llama2_7b.tiny.gguf");
    fixtures::write_tiny_llama_gguf(&path).unwrap();
    (dir, path)
}
