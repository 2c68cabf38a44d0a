//! The `server` section of `cargo xtask bench`: one full Self-RAG answer (short form, always
//! retrieving, K = 5 candidates of at most 64 tokens) from the local generator and from
//! llama.cpp's `llama-server` on the same GGUF on this machine, an indexing job's passages/s
//! alone and while each of them answers, and how long a search waits beside the job.
//!
//! Both sides are `selfrag debug index-while-answering` (one engine: a library of 40 notes
//! indexed alone, a timed answer, then a timed answer beside a job of 800 more notes), run
//! alternately as fresh processes, median over the rounds. The server side is the same binary
//! with `SELFRAG_GENERATOR_URL`. The server is the one the tests use (`cargo xtask
//! llama-server`, built for x86-64-v3), started as the tests start it (f32 cache, flash
//! attention off: the local generator's arithmetic), with one slot per candidate. The models
//! are the generator section's random 7B-shaped GGUF and the embedder section's random
//! BERT-base.

use std::process::Command;

use anyhow::{Context, Result};
use selfrag_testkit::llama_server::{self, LlamaServer};

use super::{
    Bench, check_load, json_number, json_string, list, median, preamble, with_local_models,
};

/// Candidates per answer, and the server's slots.
const K: usize = 5;
/// Tokens of context per server slot: the answer's prompts are a few hundred tokens.
const CONTEXT_PER_SLOT: usize = 2048;
const QUESTION: &str = "What does the library say about retrieval and citation support?";

#[derive(Default)]
struct Runs {
    answer: Vec<f64>,
    answer_beside_job: Vec<f64>,
    indexing_alone: Vec<f64>,
    indexing_beside_answer: Vec<f64>,
    /// Every round's timed searches, pooled.
    search: Vec<f64>,
    search_beside_job: Vec<f64>,
}

impl Runs {
    fn record(&mut self, json: &str) -> Result<()> {
        self.answer.push(json_number(json, "answer_seconds_alone")?);
        self.answer_beside_job
            .push(json_number(json, "answer_seconds_while_indexing")?);
        self.indexing_alone
            .push(json_number(json, "passages_per_second_alone")?);
        self.indexing_beside_answer
            .push(json_number(json, "passages_per_second_while_answering")?);
        self.search
            .extend(seconds_list(json, "search_seconds_alone")?);
        self.search_beside_job
            .extend(seconds_list(json, "search_seconds_while_indexing")?);
        Ok(())
    }
}

/// The list of seconds `key` of the command's JSON report.
fn seconds_list(json: &str, key: &str) -> Result<Vec<f64>> {
    let report: serde_json::Value = serde_json::from_str(json.trim())
        .with_context(|| format!("the report of `selfrag debug index-while-answering`: {json}"))?;
    report[key]
        .as_array()
        .with_context(|| format!("no list `{key}` in {json}"))?
        .iter()
        .map(|v| v.as_f64().with_context(|| format!("`{key}` holds {v}")))
        .collect()
}

/// `median / worst` of `seconds`.
fn median_worst(seconds: &[f64]) -> String {
    let worst = seconds.iter().copied().fold(f64::NAN, f64::max);
    format!("{:.2} / {worst:.2}", median(seconds))
}

pub(super) fn server(bench: &Bench) -> Result<String> {
    let gguf = bench.generator_gguf()?;
    let bert = bench.bert_dir()?;
    let binary = crate::llama_server::binary()?;
    let scratch = bench.out.join("server");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let threads = bench.threads.to_string();
    let server = LlamaServer::start(
        &binary,
        &gguf,
        &scratch,
        K,
        CONTEXT_PER_SLOT,
        &["-t", &threads, "-tb", &threads],
    )
    .with_context(|| format!("starting {} on {}", binary.display(), gguf.display()))?;
    let build = server_build(&server.url);

    let load = check_load();
    let run = |round: usize, url: Option<&str>| -> Result<String> {
        let dir = scratch.join(format!(
            "{}-{round}",
            if url.is_some() { "server" } else { "local" }
        ));
        let mut cmd = Command::new(bench.binary("selfrag"));
        cmd.args(["debug", "index-while-answering", "--question", QUESTION])
            .args(["--k", &K.to_string(), "--files", "40", "--dir"])
            .arg(&dir);
        with_local_models(&mut cmd, &gguf, &bert);
        if let Some(url) = url {
            cmd.env("SELFRAG_GENERATOR_URL", url);
        }
        let json = bench.output(&mut cmd, "selfrag debug index-while-answering")?;
        let _ = std::fs::remove_dir_all(&dir);
        Ok(json)
    };
    let (mut local, mut remote) = (Runs::default(), Runs::default());
    let mut candidates = String::new();
    for round in 0..bench.rounds {
        eprintln!("server round {}/{}", round + 1, bench.rounds);
        let order = if round % 2 == 0 {
            [None, Some(server.url.as_str())]
        } else {
            [Some(server.url.as_str()), None]
        };
        for url in order {
            let json = run(round, url)?;
            candidates = format!("{}", json_number(&json, "candidates")?);
            match url {
                Some(_) => remote.record(&json)?,
                None => local.record(&json)?,
            }
        }
    }
    drop(server);

    let ratio = |ours: f64, peer: f64| ours / peer;
    let (answer, answer_peer) = (median(&local.answer), median(&remote.answer));
    let (beside, beside_peer) = (
        median(&local.answer_beside_job),
        median(&remote.answer_beside_job),
    );
    let (alone, alone_peer) = (
        median(&local.indexing_alone),
        median(&remote.indexing_alone),
    );
    let (during, during_peer) = (
        median(&local.indexing_beside_answer),
        median(&remote.indexing_beside_answer),
    );
    let mut md = format!(
        "## Generator server\n\n{} llama-server: llama.cpp {build} (`cargo xtask llama-server`, \
         x86-64-v3 build: AVX2, no AVX-512), {K} slots of {CONTEXT_PER_SLOT} tokens, f32 \
         cache, flash attention off, {} threads.\n\n\
         One answer: short form, always retrieving, K = {K} candidates ({candidates} generated) \
         of at most 64 tokens, from a library of 40 one-passage notes, in one engine after a \
         first answer that loads the models; the generator section's random 7B-shaped GGUF and \
         the embedder section's random BERT-base, on the CPU. \"Beside\" runs the answer while \
         an indexing job of 800 more notes runs in the same engine (`selfrag debug \
         index-while-answering`); it also times {searches} vector searches, 0.73 s apart, \
         with no job and after the answer beside the job (their query's embedding waits for \
         what the model thread is doing).\n\n\
         | measure | local (candle) | llama-server | local / server |\n\
         | --- | ---: | ---: | ---: |\n\
         | answer, seconds | {answer:.2} | {answer_peer:.2} | {:.2}× the time |\n\
         | answer beside an indexing job, seconds | {beside:.2} | {beside_peer:.2} | {:.2}× the time |\n\
         | indexing alone, passages/s | {alone:.2} | {alone_peer:.2} | — |\n\
         | indexing while answering, passages/s | {during:.2} | {during_peer:.2} | {:.2}× |\n\
         | a search, seconds (median / worst) | {} | {} | — |\n\
         | a search beside the indexing job, seconds (median / worst) | {} | {} | — |\n\n",
        preamble(bench, load),
        bench.threads,
        ratio(answer, answer_peer),
        ratio(beside, beside_peer),
        ratio(during, during_peer),
        median_worst(&local.search),
        median_worst(&remote.search),
        median_worst(&local.search_beside_job),
        median_worst(&remote.search_beside_job),
        searches = local.search.len() / bench.rounds.max(1),
    );
    md.push_str(&format!(
        "Per round: answer seconds local [{}], server [{}]; beside the job local [{}], server \
         [{}]; indexing passages/s while answering local [{}], server [{}] (alone: local [{}], \
         server [{}]). The engine's model thread gives an indexing job at most a quarter of \
         its time while it generates (`BACKGROUND_SHARE`), and embeds a job's batch in pieces \
         of about half a second (`BACKGROUND_PIECE`), so a search waits at most one piece; \
         with a server it only embeds, and the two compete for the same {} cores here, as \
         they would not with a GPU server.\n",
        list(&local.answer),
        list(&remote.answer),
        list(&local.answer_beside_job),
        list(&remote.answer_beside_job),
        list(&local.indexing_beside_answer),
        list(&remote.indexing_beside_answer),
        list(&local.indexing_alone),
        list(&remote.indexing_alone),
        bench.threads,
    ));
    Ok(md)
}

/// The server's llama.cpp build as `/props` reports it, or `unknown`.
fn server_build(url: &str) -> String {
    url.rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .and_then(|port| llama_server::get(port, "/props"))
        .and_then(|reply| json_string(&reply, "build_info"))
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reports_search_seconds_are_read_and_summed_up_as_median_and_worst() {
        let json = r#"{"answer_seconds_alone":1.5,"search_seconds_alone":[0.04,0.5,0.06]}"#;
        let seconds = seconds_list(json, "search_seconds_alone").unwrap();
        assert_eq!(seconds, [0.04, 0.5, 0.06]);
        assert_eq!(median_worst(&seconds), "0.06 / 0.50");
        let missing = seconds_list(json, "search_seconds_while_indexing").unwrap_err();
        assert!(missing.to_string().contains("no list"), "{missing}");
        assert!(seconds_list("not json", "x").is_err());
    }
}
