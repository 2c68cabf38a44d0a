//! Writes the benchmark models and inputs of `cargo xtask bench` (see
//! `selfrag_models::fixtures::bench`):
//!
//! - `selfrag-bench-models llama FILE BLOCKS`: a random Llama-2-7B-shaped Q4_K_M GGUF with
//!   BLOCKS blocks;
//! - `selfrag-bench-models bert DIR`: a random BERT-base in DIR;
//! - `selfrag-bench-models tiny DIR`: the tiny Self-RAG Llama made for long-form answers of
//!   full size, at Llama-2's context of 4096 tokens (`DIR/tiny-selfrag-4k.gguf`), and the tiny
//!   Contriever (`DIR/tiny-contriever`), written quickly (the re-rank benchmark);
//! - `selfrag-bench-models passages N`: N benchmark passages, one JSON array on stdout;
//! - `selfrag-bench-models generate FILE PROMPT_TOKENS MAX_TOKENS BATCH`: greedy decoding of a
//!   synthetic prompt with timings, as `selfrag debug generate --ignore-eos` prints them, from a
//!   binary that links candle only (quick to rebuild and to profile while optimising);
//! - `selfrag-bench-models embed DIR N`: embeds the N benchmark passages with the BERT in DIR
//!   and prints `{"passages": N, "seconds": s}` (loading not timed), for the same reason.

// A command-line tool reports on stdout and stderr.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use selfrag_core::GenerateRequest;
use selfrag_models::fixtures::bench::{
    bench_passages, write_bert_base_shaped, write_llama2_7b_shaped_gguf,
};
use selfrag_models::fixtures::{write_tiny_bert, write_tiny_long_form_llama_gguf};
use selfrag_models::{BertEmbedder, Device, LlamaGenerator};

const USAGE: &str = "usage: selfrag-bench-models llama FILE BLOCKS | bert DIR | tiny DIR | passages N \
                     | generate FILE PROMPT_TOKENS MAX_TOKENS BATCH | embed DIR N";

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
        Some("generate") => {
            let file = PathBuf::from(args.get(1).ok_or(USAGE)?);
            let prompt_tokens = number(args.get(2), "PROMPT_TOKENS")?;
            let max_tokens = number(args.get(3), "MAX_TOKENS")?;
            let batch = number(args.get(4), "BATCH")?;
            generate(&file, prompt_tokens, max_tokens, batch)
        }
        Some("embed") => {
            let dir = PathBuf::from(args.get(1).ok_or(USAGE)?);
            let count = number(args.get(2), "N")?;
            let embedder = BertEmbedder::load(&dir, &Device::Cpu).map_err(|e| e.to_string())?;
            let passages = bench_passages(count);
            let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
            let started = std::time::Instant::now();
            embedder.embed(&refs).map_err(|e| e.to_string())?;
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "{}",
                serde_json::json!({"passages": count, "seconds": seconds})
            );
            Ok(())
        }
        _ => Err(USAGE.to_owned()),
    }
}

/// The benchmark's greedy run: BOS and `prompt_tokens - 1` ordinary pieces, `batch` rows.
fn generate(
    file: &Path,
    prompt_tokens: usize,
    max_tokens: usize,
    batch: usize,
) -> Result<(), String> {
    let mut model = LlamaGenerator::load(file, &Device::Cpu).map_err(|e| e.to_string())?;
    let prompt: Vec<u32> = std::iter::once(1)
        .chain((1..prompt_tokens).map(|i| 300 + (i * 7919) % 31_000))
        .map(|id| u32::try_from(id).unwrap_or(0))
        .collect();
    let request = GenerateRequest {
        max_new_tokens: max_tokens,
        stop_ids: Vec::new(),
        markup_ids: Vec::new(),
        watch_ids: Vec::new(),
    };
    let timed = model
        .generate_timed(&vec![prompt; batch], &request, false)
        .map_err(|e| e.to_string())?;
    let ids: Vec<Vec<u32>> = timed
        .rows
        .iter()
        .map(|row| row.tokens.iter().map(|t| t.id).collect())
        .collect();
    let json = serde_json::json!({
        "prompt_tokens": timed.prompt_tokens,
        "prompt_seconds": timed.prompt_seconds,
        "decode_tokens": timed.decode_tokens,
        "decode_seconds": timed.decode_seconds,
        "ids": ids,
    });
    println!("{json}");
    Ok(())
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
