//! Writes the benchmark models and inputs of `cargo xtask bench` (see
//! `selfrag_fixtures::bench`):
//!
//! - `selfrag-bench-models llama FILE BLOCKS`: a random Llama-2-7B-shaped Q4_K_M GGUF with
//!   BLOCKS blocks;
//! - `selfrag-bench-models bert DIR`: a random BERT-base in DIR;
//! - `selfrag-bench-models tiny DIR`: the tiny Self-RAG Llama made for long-form answers of
//!   full size, at Llama-2's context of 4096 tokens (`DIR/tiny-selfrag-4k.gguf`), and the tiny
//!   Contriever (`DIR/tiny-contriever`), written quickly (the re-rank benchmark);
//! - `selfrag-bench-models passages N`: N benchmark passages, one JSON array on stdout.
//!
//! The benchmark runs these models through the real CLI (`selfrag debug generate`, `selfrag
//! debug embed`).

// A command-line tool reports on stdout and stderr.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::path::PathBuf;
use std::process::ExitCode;

use selfrag_fixtures::bench::{
    bench_passages, write_bert_base_shaped, write_llama2_7b_shaped_gguf,
};
use selfrag_fixtures::{write_tiny_bert, write_tiny_long_form_llama_gguf};

const USAGE: &str =
    "usage: selfrag-bench-models llama FILE BLOCKS | bert DIR | tiny DIR | passages N";

fn run(args: &[String]) -> Result<(), String> {
    let number = |arg: Option<&String>, what: &str| -> Result<usize, String> {
        arg.ok_or_else(|| format!("missing {what}\n{USAGE}"))?
            .parse()
            .map_err(|e| format!("{what}: {e}\n{USAGE}"))
    };
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    match args.first().map(String::as_str) {
        Some("llama") => {
            let file = PathBuf::from(args.get(1).ok_or(USAGE)?);
            let blocks = number(args.get(2), "BLOCKS")?;
            if let Some(dir) = file.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            write_llama2_7b_shaped_gguf(&file, blocks, threads).map_err(|e| e.to_string())
        }
        Some("bert") => {
            let dir = PathBuf::from(args.get(1).ok_or(USAGE)?);
            write_bert_base_shaped(&dir).map_err(|e| e.to_string())
        }
        Some("tiny") => {
            let dir = PathBuf::from(args.get(1).ok_or(USAGE)?);
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            write_tiny_long_form_llama_gguf(&dir.join("tiny-selfrag-4k.gguf"), 4096)
                .and_then(|()| write_tiny_bert(&dir.join("tiny-contriever")))
                .map_err(|e| e.to_string())
        }
        Some("passages") => {
            let count = number(args.get(1), "N")?;
            let json = serde_json::to_string(&bench_passages(count)).map_err(|e| e.to_string())?;
            println!("{json}");
            Ok(())
        }
        _ => Err(USAGE.to_owned()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
