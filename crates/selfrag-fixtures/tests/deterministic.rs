//! The fixtures are the same bytes on every run: tests that pin a fixture's outputs rely on it.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use selfrag_fixtures as fixtures;

#[test]
fn fixtures_are_byte_for_byte_deterministic() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let read = |dir: &Path, name: &str| std::fs::read(dir.join(name)).unwrap();

    fixtures::write_tiny_llama_gguf(&a.path().join("m.gguf")).unwrap();
    fixtures::write_tiny_llama_gguf(&b.path().join("m.gguf")).unwrap();
    assert_eq!(read(a.path(), "m.gguf"), read(b.path(), "m.gguf"));
    // The Llama-3-style fixture, its BPE merges learned by a deterministic trainer.
    for dir in [a.path(), b.path()] {
        fixtures::write_tiny_llama3_gguf(&dir.join("llama3.gguf")).unwrap();
    }
    assert_eq!(read(a.path(), "llama3.gguf"), read(b.path(), "llama3.gguf"));

    for dir in [a.path(), b.path()] {
        fixtures::write_tiny_bert(&dir.join("st")).unwrap();
        fixtures::write_tiny_bert_pytorch_bin(&dir.join("bin")).unwrap();
    }
    for file in [
        "st/model.safetensors",
        "st/config.json",
        "st/vocab.txt",
        "bin/pytorch_model.bin",
    ] {
        assert_eq!(read(a.path(), file), read(b.path(), file), "{file}");
    }
}
