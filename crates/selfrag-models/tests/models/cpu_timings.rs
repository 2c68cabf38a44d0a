//! Timings of the CPU the binary runs on, for `cargo xtask cpu-check`: the benchmark's
//! Llama-2-7B-shaped Q4_K_M generator, its prompt and decode tokens/s with each of the decode
//! kernel's prefetch distances, and the distance the load calibrated (issue 48, goals 1 and 2:
//! a row per CPU family). `.cpu-check/run.sh` runs it with `--ignored` on a machine lent for
//! the purpose, where no Rust is installed, and runs llama.cpp's server on the same file as the
//! peer; never part of `cargo test`.
//!
//! Knobs: `SELFRAG_CPU_CHECK_MODEL` (the GGUF, written there if missing; default in a temporary
//! folder), `SELFRAG_CPU_CHECK_BLOCKS` (8), `SELFRAG_CPU_CHECK_ROUNDS` (3); the threads are
//! `RAYON_NUM_THREADS`'s. Each run prints one `cpu-check: {json}` line.

use std::path::PathBuf;

use candle_core::Device;
use selfrag_core::GenerateRequest;
use selfrag_fixtures as fixtures;
use selfrag_models::{LlamaGenerator, PrefetchPolicy};

/// The benchmark's prompt (`cargo xtask bench`'s `prompt_ids`): BOS, then 127 ids spread over
/// the vocabulary.
fn bench_prompt() -> Vec<u32> {
    std::iter::once(1)
        .chain((1..128u32).map(|i| 300 + (i * 7919) % 31_000))
        .collect()
}

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

#[test]
#[ignore = "timings for `cargo xtask cpu-check`, run by .cpu-check/run.sh with --ignored"]
fn timings_of_this_cpu_by_prefetch_distance() {
    let blocks = knob("SELFRAG_CPU_CHECK_BLOCKS", 8);
    let rounds = knob("SELFRAG_CPU_CHECK_ROUNDS", 3);
    let threads = rayon::current_num_threads();
    let scratch = tempfile::tempdir().unwrap();
    let gguf = std::env::var_os("SELFRAG_CPU_CHECK_MODEL").map_or_else(
        || {
            scratch
                .path()
                .join(format!("llama2-7b-shape-{blocks}.gguf"))
        },
        PathBuf::from,
    );
    if !gguf.exists() {
        // Written with every core: the model is not what is timed.
        let cores = std::thread::available_parallelism().map_or(threads, |n| n.get());
        fixtures::bench::write_llama2_7b_shaped_gguf(&gguf, blocks, cores).unwrap();
    }
    let started = std::time::Instant::now();
    let mut generator = LlamaGenerator::load(&gguf, &Device::Cpu).unwrap();
    let load_seconds = started.elapsed().as_secs_f64();
    let calibrated = generator.prefetch_choice().clone();
    println!(
        "cpu-check: {}",
        serde_json::json!({
            "model": gguf.display().to_string(),
            "threads": threads,
            "load_seconds": load_seconds,
            "kernels": generator.kernel_choice().to_string(),
            "prefetch": calibrated.to_string(),
            "prefetch_tiles": calibrated.tiles(),
        })
    );
    let request = GenerateRequest {
        max_new_tokens: 65,
        stop_ids: Vec::new(),
        markup_ids: Vec::new(),
        watch_ids: Vec::new(),
    };
    let prompt = bench_prompt();
    let distances = [1, 2, 4, 8];
    for round in 0..rounds {
        for turn in 0..distances.len() {
            let tiles = distances[(turn + round) % distances.len()];
            generator
                .choose_prefetch(PrefetchPolicy::Use(tiles))
                .unwrap();
            let timed = generator
                .generate_timed(std::slice::from_ref(&prompt), &request, false)
                .unwrap();
            #[allow(clippy::cast_precision_loss)]
            let rate = |tokens: usize, seconds: f64| tokens as f64 / seconds;
            println!(
                "cpu-check: {}",
                serde_json::json!({
                    "round": round + 1,
                    "tiles": tiles,
                    "prompt_tokens_per_s": rate(timed.prompt_tokens, timed.prompt_seconds),
                    "decode_tokens_per_s": rate(timed.decode_tokens, timed.decode_seconds),
                })
            );
        }
    }
}
