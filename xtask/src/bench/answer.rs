//! `cargo xtask bench answer`: the time to a cited answer, whole process (issue 22, goal 1),
//! against LlamaIndex's SelfRAGPack on llama-cpp-python, the only other runtime that runs
//! Self-RAG from a GGUF.
//!
//! Both answer one short-form question over K = 5 passages of real text (four licences every
//! Debian has, indexed by our `selfrag index` with the random BERT-base embedder) with the
//! 7B-shaped benchmark GGUF, the same threads and at most 50 new tokens per generation (the
//! pack's own limit). Ours is `selfrag ask --json --mode adaptive --threshold 0 --k 5`: it decides
//! (and, its weights being random, is made to retrieve by the threshold), searches, writes the
//! five candidates as one batch and critiques them. The pack reads the passages our run of the
//! same round retrieved (`scripts/bench/selfrag_pack_peer.py`): it decides by writing up to 50
//! tokens, is made to retrieve the same way, then writes its candidates one after the other.
//! Each side is timed from outside, start to exit, taking turns; each also says where its time
//! went. Two differences favour the pack: its retriever hands back the given passages where ours
//! embeds the question and searches the library, and its prompts hold a passage's text where
//! ours, as the paper's, also hold its title.

use std::path::Path;

use anyhow::{Context, Result};

use super::{
    Bench, check_load, install_llama_cpp_python, install_self_rag_pack, json_number, json_string,
    licence_texts, list, median, preamble, verdict, with_local_models,
};
use crate::{done, step};

const QUESTION: &str = "What must I do when I distribute a modified version of the program?";
/// New tokens per generation: SelfRAGPack's `max_tokens`.
const MAX_TOKENS: usize = 50;
/// Passages retrieved, candidates written.
const K: usize = 5;
/// The goal: the whole answer this many times faster than the pack.
const GOAL: f64 = 6.0;
/// The licences indexed (about 11,000 words).
const LICENCES: [&str; 4] = ["GPL-3", "Apache-2.0", "MPL-2.0", "LGPL-3"];

/// One side's seconds in one round.
#[derive(Default)]
struct Runs {
    process: Vec<f64>,
    rss_mb: Vec<f64>,
}

pub(super) fn answer(bench: &Bench) -> Result<String> {
    let python = bench.python()?.to_owned();
    install_llama_cpp_python(&python)?;
    install_self_rag_pack(&python)?;
    let gguf = bench.generator_gguf()?;
    let embedder = bench.bert_dir()?;
    let scratch = bench.out.join("answer");
    let _ = std::fs::remove_dir_all(&scratch);
    let docs = scratch.join("docs");
    std::fs::create_dir_all(&docs).with_context(|| format!("creating {}", docs.display()))?;
    for source in licence_texts()? {
        let name = source
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if LICENCES.contains(&name) {
            let target = docs.join(format!("{name}.txt"));
            std::fs::copy(&source, &target)
                .with_context(|| format!("copying {} to {}", source.display(), target.display()))?;
        }
    }
    let selfrag = |args: &[String]| -> Result<std::process::Command> {
        let mut cmd = bench.selfrag_command(args)?;
        with_local_models(&mut cmd, &gguf, &embedder).env("SELFRAG_DATA_DIR", scratch.join("data"));
        Ok(cmd)
    };
    let t = step("index the licences");
    bench.output(
        &mut selfrag(&["index".to_owned(), docs.display().to_string()])?,
        "selfrag index",
    )?;
    done("index the licences", t);
    let stats = bench.output(
        &mut selfrag(&[
            "library".to_owned(),
            "stats".to_owned(),
            "--json".to_owned(),
        ])?,
        "selfrag library stats",
    )?;
    let passages = json_number(&stats, "passages")?;

    let ask: Vec<String> = [
        "ask",
        QUESTION,
        "--json",
        "--mode",
        "adaptive",
        "--threshold",
        "0",
        "--k",
        &K.to_string(),
        "--max-tokens",
        &MAX_TOKENS.to_string(),
    ]
    .map(str::to_owned)
    .to_vec();
    let load = check_load();
    let (mut ours, mut peer) = (Runs::default(), Runs::default());
    let (mut our_steps, mut peer_steps) = (Vec::new(), Vec::new());
    for round in 0..bench.rounds {
        eprintln!("answer round {}/{}", round + 1, bench.rounds);
        let trace_path = scratch.join(format!("trace-{round}.json"));
        let mut run_ours = || -> Result<()> {
            let started = std::time::Instant::now();
            let out = bench.output(&mut selfrag(&ask)?, "selfrag ask")?;
            ours.process.push(started.elapsed().as_secs_f64());
            ours.rss_mb.push(super::peak_rss_mb(&out)?);
            // The trace is all but `peak_rss.py`'s last line.
            let trace = out.trim_end().rsplit_once('\n').map_or("", |(t, _)| t);
            std::fs::write(&trace_path, trace)
                .with_context(|| format!("writing {}", trace_path.display()))?;
            our_steps.push(trace.to_owned());
            Ok(())
        };
        let mut run_peer = |trace: &Path| -> Result<()> {
            let started = std::time::Instant::now();
            let args = [
                "--model".to_owned(),
                gguf.display().to_string(),
                "--trace".to_owned(),
                trace.display().to_string(),
                "--threads".to_owned(),
                bench.threads.to_string(),
            ];
            let json = bench.script("selfrag_pack_peer.py", &args, "SelfRAGPack")?;
            peer.process.push(started.elapsed().as_secs_f64());
            peer.rss_mb.push(super::peak_rss_mb(&json)?);
            peer_steps.push(json);
            Ok(())
        };
        // The peer reads the passages of one of our runs: in even rounds ours runs first and the
        // peer reads its trace; in odd rounds the peer runs first, on the previous round's trace
        // (the same passages: the search is deterministic).
        if round % 2 == 1 {
            let previous = scratch.join(format!("trace-{}.json", round - 1));
            run_peer(&previous)?;
            run_ours()?;
        } else {
            run_ours()?;
            run_peer(&trace_path)?;
        }
    }

    let step_median = |jsons: &[String], key: &str| -> Result<f64> {
        let values = jsons
            .iter()
            .map(|j| json_number(j, key))
            .collect::<Result<Vec<_>>>()?;
        Ok(median(&values))
    };
    let (ours_s, peer_s) = (median(&ours.process), median(&peer.process));
    let speedup = peer_s / ours_s;
    let first_peer = peer_steps.first().context("no rounds")?;
    let candidates = json_number(first_peer, "candidates")?;
    let forced = json_number(first_peer, "retrieval_forced")? > 0.0;
    let text = |key: &str| json_string(first_peer, key).unwrap_or_default();
    let mut md = format!(
        "## Time to a cited answer\n\n{}\n\n\
         One short-form question (\"{QUESTION}\") over K = {K} passages of four licences \
         (GPL-3, Apache-2.0, MPL-2.0, LGPL-3: {passages:.0} passages of about 100 words, indexed by \
         `selfrag index` with the random BERT-base), the 7B-shaped benchmark GGUF ({} of 32 \
         blocks), {} threads, at most {MAX_TOKENS} new tokens per generation on both sides. \
         Ours: `selfrag ask --mode adaptive --threshold 0 --k {K} --max-tokens {MAX_TOKENS}` (the \
         decision is computed; the threshold makes the random model retrieve). Peer: \
         SelfRAGPack (`llama-index-packs-self-rag` {}, llama-index-core {}, llama-cpp-python {}) \
         as it ships (`logits_all`, a 2,048-token context, log-probabilities over the whole \
         vocabulary), reading the passages our run retrieved; its first generation was \
         made to ask for retrieval: {}. Its {candidates:.0} candidate prompts, in tokens: [{}]. \
         Tokens written, first round: the pack decided with {:.0} and wrote candidates of [{}]; \
         ours wrote at most {MAX_TOKENS} per candidate (our trace does not count them). Two \
         differences favour the \
         pack: its retriever hands back the passages where ours embeds the question and searches \
         the library, and its prompts hold a passage's text where ours, as the paper's, also hold \
         its title. Each side timed from start to exit, taking turns.\n\n",
        preamble(bench, load),
        bench.blocks,
        bench.threads,
        json_string(first_peer, "llama_index_packs_self_rag").unwrap_or_default(),
        json_string(first_peer, "llama_index_core").unwrap_or_default(),
        json_string(first_peer, "llama_cpp_python").unwrap_or_default(),
        if forced {
            "yes"
        } else {
            "no, it asked by itself"
        },
        text("candidate_prompt_tokens"),
        json_number(first_peer, "decide_tokens")?,
        text("candidate_tokens"),
    );
    md.push_str("| measure | ours | SelfRAGPack | ratio | goal | |\n");
    md.push_str("| --- | ---: | ---: | ---: | --- | --- |\n");
    md.push_str(&format!(
        "| whole answer, s (process start to exit) | {ours_s:.2} | {peer_s:.2} | {speedup:.2}× | ≥ {GOAL:.0}× faster | {} |\n",
        verdict(speedup >= GOAL)
    ));
    let rss = |runs: &Runs| runs.rss_mb.iter().copied().fold(0.0, f64::max);
    md.push_str(&format!(
        "| peak RSS, MB | {:.0} | {:.0} | — | ≤ file + 1 GB | {} |\n",
        rss(&ours),
        rss(&peer),
        verdict(rss(&ours) <= file_mb(&gguf)? + 1000.0)
    ));
    md.push_str("\nWhere the time went (medians, s):\n\n");
    md.push_str("| step | ours | SelfRAGPack |\n| --- | ---: | ---: |\n");
    let rows = [
        (
            "load the generator (ours: with the embedder beside it; the pack: llama-cpp-python's \
             `Llama`)",
            "load_seconds",
            "load_seconds",
        ),
        (
            "decide (ours: one pass; the pack: up to 50 tokens)",
            "decide_seconds",
            "decide_seconds",
        ),
        ("search", "search_seconds", "search_seconds"),
        (
            "write the candidates (ours: prefill + decode, batched)",
            "generate_seconds",
            "critique_seconds",
        ),
        (
            "critique (ours: from the tokens' probabilities)",
            "critique_seconds",
            "",
        ),
    ];
    for (label, our_key, peer_key) in rows {
        let peer_value = if peer_key.is_empty() {
            "in the line above".to_owned()
        } else {
            format!("{:.2}", step_median(&peer_steps, peer_key)?)
        };
        md.push_str(&format!(
            "| {label} | {:.2} | {peer_value} |\n",
            step_median(&our_steps, our_key)?
        ));
    }
    md.push_str(&format!(
        "| of ours' candidates: reading the prompts / decoding | {:.2} / {:.2} | — |\n",
        step_median(&our_steps, "prefill_seconds")?,
        step_median(&our_steps, "decode_seconds")?,
    ));
    md.push_str(&format!(
        "| the pack's Python imports | — | {:.2} |\n",
        step_median(&peer_steps, "import_seconds")?
    ));
    // What no step covers: ours, the process's start, the embedder's load and opening the
    // library; the pack's, Python's start and what follows the answer.
    let rest = |process: f64, steps: &[String], keys: &[&str]| -> Result<f64> {
        let counted = keys
            .iter()
            .map(|key| step_median(steps, key))
            .sum::<Result<f64>>()?;
        Ok(process - counted)
    };
    let our_keys = [
        "load_seconds",
        "decide_seconds",
        "search_seconds",
        "generate_seconds",
        "critique_seconds",
    ];
    let peer_keys = [
        "import_seconds",
        "load_seconds",
        "decide_seconds",
        "search_seconds",
        "critique_seconds",
    ];
    md.push_str(&format!(
        "| the rest (ours: start, opening the library; the pack: Python's start and exit) | \
         {:.2} | {:.2} |\n",
        rest(ours_s, &our_steps, &our_keys)?,
        rest(peer_s, &peer_steps, &peer_keys)?,
    ));
    md.push_str(&format!(
        "\nPer round, s: ours [{}], SelfRAGPack [{}].\n",
        list(&ours.process),
        list(&peer.process)
    ));
    Ok(md)
}

fn file_mb(path: &Path) -> Result<f64> {
    #[allow(clippy::cast_precision_loss)]
    let mb = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len() as f64
        / 1e6;
    Ok(mb)
}
