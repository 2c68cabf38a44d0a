//! Writes the tiny test models to a folder: `selfrag-fixtures DIR` creates
//! `DIR/tiny-selfrag.gguf` (a random-weight Llama GGUF with the Self-RAG vocabulary layout),
//! `DIR/tiny-selfrag-llama3.gguf` (the same in Llama-3's layout: byte-level BPE vocabulary,
//! `llama-bpe` pre-tokenizer), `DIR/tiny-selfrag-mistral.gguf` and
//! `DIR/tiny-selfrag-llama31.gguf` (Mistral 7B v0.1's and Llama-3.1's shapes and RoPE, SPM
//! vocabulary), `DIR/tiny-contriever/` (a random BERT laid out like
//! facebook/contriever-msmarco) and `DIR/tiny-contriever.gguf` (the same BERT for
//! `llama-server --embedding`).
//! `cargo xtask fixtures DIR` runs this; the tests call the same functions.

// A command-line tool reports on stderr.
#![allow(clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use selfrag_fixtures::{
    write_tiny_bert, write_tiny_bert_gguf, write_tiny_llama_gguf, write_tiny_llama3_gguf,
};
use selfrag_fixtures::{write_tiny_llama31_gguf, write_tiny_mistral_gguf};

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: selfrag-fixtures DIR");
        return ExitCode::FAILURE;
    };
    let result = std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))
        .and_then(|()| {
            write_tiny_llama_gguf(&dir.join("tiny-selfrag.gguf")).map_err(|e| e.to_string())
        })
        .and_then(|()| {
            write_tiny_llama3_gguf(&dir.join("tiny-selfrag-llama3.gguf")).map_err(|e| e.to_string())
        })
        .and_then(|()| {
            write_tiny_mistral_gguf(&dir.join("tiny-selfrag-mistral.gguf"))
                .and_then(|()| write_tiny_llama31_gguf(&dir.join("tiny-selfrag-llama31.gguf")))
                .map_err(|e| e.to_string())
        })
        .and_then(|()| {
            write_tiny_bert(&dir.join("tiny-contriever"))
                .and_then(|()| write_tiny_bert_gguf(&dir.join("tiny-contriever.gguf")))
                .map_err(|e| e.to_string())
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
