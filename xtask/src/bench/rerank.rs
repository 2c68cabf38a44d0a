//! `cargo xtask bench rerank`: how long a weight slider's move takes on a long-form answer of
//! full size (issue 18: under 50 ms for 7 segments, B = 2, K = 5). The answer is a real run
//! of the release `selfrag` with the tiny Self-RAG Llama made for long form
//! (`selfrag-bench-models tiny`: Llama-2's 4,096-token context, biases that close a sentence
//! with `[Fully supported][Utility:5][Retrieval]`), always retrieving K = 5 of 12 notes, with
//! segments of at most 200 tokens. Then `selfrag debug rerank-latency` drags the IsSup weight
//! over 41 positions, each round in a new history. There is no peer: the figure is held
//! against the bound.

use std::process::Command;

use anyhow::{Context, Result};

use super::{Bench, check_load, json_number, median, preamble, verdict, with_local_models};
use crate::{done, status, step};

const QUESTION: &str = "How do reflection tokens steer retrieval and critique?";
/// The bound for one slider move.
const BOUND_MS: f64 = 50.0;

pub(super) fn rerank(bench: &Bench) -> Result<String> {
    let scratch = bench.out.join("rerank");
    let _ = std::fs::remove_dir_all(&scratch);
    let (models, docs) = (scratch.join("models"), scratch.join("docs"));
    std::fs::create_dir_all(&docs).with_context(|| format!("creating {}", docs.display()))?;
    status(
        Command::new(bench.binary("selfrag-bench-models"))
            .arg("tiny")
            .arg(&models),
        "selfrag-bench-models tiny",
    )?;
    for i in 0..12 {
        let text = format!(
            "# Note {i}\n\nReflection tokens let the model decide when to retrieve passage {i}, \
             judge whether it is relevant, and say whether segment {i} of its answer is \
             supported by the evidence. The critique scores weigh relevance, support and \
             usefulness; a beam search keeps the paths with the best mean score, and a reader \
             checks each citation against its source before trusting the answer.\n"
        );
        let path = docs.join(format!("note-{i:02}.md"));
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let selfrag = |args: &[&str]| {
        let mut cmd = Command::new(bench.binary("selfrag"));
        cmd.args(args).env("SELFRAG_DATA_DIR", scratch.join("data"));
        with_local_models(
            &mut cmd,
            &models.join("tiny-selfrag-4k.gguf"),
            &models.join("tiny-contriever"),
        );
        cmd
    };
    let docs_arg = docs.to_string_lossy().into_owned();
    bench.output(&mut selfrag(&["index", &docs_arg]), "selfrag index")?;
    let t = step("write a 7-segment long-form answer");
    let trace = bench.output(
        &mut selfrag(&[
            "ask",
            QUESTION,
            "--json",
            "--mode",
            "always",
            "--k",
            "5",
            "--long-form",
            "--beam",
            "2",
            "--max-segments",
            "7",
            "--max-tokens",
            "200",
        ]),
        "selfrag ask --long-form",
    )?;
    done("write a 7-segment long-form answer", t);
    let trace_path = scratch.join("trace.json");
    std::fs::write(&trace_path, &trace)
        .with_context(|| format!("writing {}", trace_path.display()))?;

    let load = check_load();
    let mut reports = Vec::new();
    for round in 0..bench.rounds {
        let history = scratch.join(format!("history-{round}"));
        let trace_arg = trace_path.to_string_lossy().into_owned();
        let history_arg = history.to_string_lossy().into_owned();
        let json = bench.output(
            &mut selfrag(&["debug", "rerank-latency", &trace_arg, "--dir", &history_arg]),
            "selfrag debug rerank-latency",
        )?;
        reports.push(json);
    }
    let field =
        |key: &str| -> Result<Vec<f64>> { reports.iter().map(|r| json_number(r, key)).collect() };
    let first = reports.first().context("no rounds")?;
    let shape = |key: &str| json_number(first, key).map(|v| v as usize);
    let (core, engine, engine_p95, engine_max) = (
        field("core_ms_median")?,
        field("engine_ms_median")?,
        field("engine_ms_p95")?,
        field("engine_ms_max")?,
    );
    let worst = engine_max.iter().copied().fold(0.0, f64::max);
    Ok(format!(
        "## Re-rank\n\n{}\n\n\
         One long-form answer of {} segments, B = {}, K = {}: {} expansions, {} candidates, a \
         {:.0} KB trace, written by the release `selfrag` with the tiny Self-RAG Llama made for \
         long form (4,096 context, segments of at most 200 tokens). `selfrag debug rerank-latency` moves the IsSup weight \
         over {} positions: the replay of the beam search alone, and the engine's whole \
         re-rank as the app calls it (the view saved to disk with fsync, and the answer under \
         it). {} of the {} positions needed a branch the run did not expand.\n\n\
         | per slider move | median | p95 | max | bound | |\n\
         | --- | ---: | ---: | ---: | ---: | --- |\n\
         | replay alone, ms | {:.2} | — | — | — | — |\n\
         | engine re-rank, ms | {:.2} | {:.2} | {:.2} | {BOUND_MS:.0} | {} |\n\n\
         Per round (median ms): replay [{}], engine [{}].\n",
        preamble(bench, load),
        shape("segments")?,
        shape("beam_width")?,
        shape("k")?,
        shape("expansions")?,
        shape("candidates")?,
        json_number(first, "trace_bytes")? / 1024.0,
        shape("moves")?,
        shape("moves_with_unexplored_branch")?,
        shape("moves")?,
        median(&core),
        median(&engine),
        median(&engine_p95),
        worst,
        verdict(worst < BOUND_MS),
        list_ms(&core),
        list_ms(&engine),
    ))
}

/// Milliseconds to two decimals, comma-separated.
fn list_ms(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}
