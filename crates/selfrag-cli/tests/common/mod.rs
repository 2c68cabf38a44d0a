//! What the `selfrag` binary's tests share: the command with its own folders, the tiny models,
//! and a success check that shows the whole output when it fails.

#![allow(dead_code)] // Each test binary uses its own part of this module.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `selfrag` with its own data and config folders (`data`, `data/config`), on the CPU.
pub fn selfrag(data: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_selfrag"));
    c.env("SELFRAG_DATA_DIR", data)
        .env("SELFRAG_CONFIG_DIR", data.join("config"))
        .env("SELFRAG_DEVICE", "cpu");
    c
}

/// [`selfrag`] with the tiny models that [`tiny_models`] wrote to `models`.
pub fn selfrag_with_models(data: &Path, models: &Path) -> Command {
    let mut c = selfrag(data);
    c.env("SELFRAG_GENERATOR", models.join(GENERATOR))
        .env("SELFRAG_EMBEDDER", models.join(EMBEDDER));
    c
}

/// The tiny Self-RAG GGUF's file name in a [`tiny_models`] folder.
pub const GENERATOR: &str = "tiny.gguf";
/// The tiny BERT embedder's folder name in a [`tiny_models`] folder.
pub const EMBEDDER: &str = "tiny-bert";

/// Writes the tiny Self-RAG GGUF and the tiny BERT embedder into `dir` (created) and returns it.
pub fn tiny_models(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    selfrag_fixtures::write_tiny_llama_gguf(&dir.join(GENERATOR)).unwrap();
    selfrag_fixtures::write_tiny_bert(&dir.join(EMBEDDER)).unwrap();
    dir.to_owned()
}

/// A finished process as text: exit status, stdout and stderr.
pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The stdout of a process that must have succeeded.
pub fn ok(out: Output) -> String {
    assert!(out.status.success(), "{}", describe(&out));
    String::from_utf8(out.stdout).unwrap()
}
