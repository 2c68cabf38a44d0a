//! The `avx2` section of `cargo xtask bench`: the generator as a CPU without AVX-512 runs it
//! (issue 48, goals 1 and 2: AMD Zen 2 and 3, Intel's client CPUs), on this CPU.
//!
//! Ours is `selfrag debug generate` on the generator section's GGUF and prompt with the packed
//! tiles' kernels for AVX2 and for AVX-VNNI (`SELFRAG_CPU_SIMD`), and candle's AVX2 tier
//! (`SELFRAG_CPU_KERNELS=candle`, `MISTRALRS_FORCE_AVX2=1`), which is what ran on those CPUs
//! before the packed tiles had kernels for them. The peers are llama.cpp's server built for
//! x86-64-v3 (AVX2, FMA, F16C; the tests' build, `cargo xtask llama-server`) and built for
//! x86-64-v3 with AVX-VNNI (the AVX-VNNI row's peer), each started once with llama.cpp's f16
//! cache, asked for the same prompt as token ids and as many greedy tokens, ignoring EOS, with
//! no prompt cache; their own timings count. Fresh processes on our side, all five taking
//! turns, median over the rounds.
//!
//! What this shows is the instruction mix those CPUs run, at this CPU's speed per instruction
//! and memory; on one of them the figures are for `cargo xtask cpu-check`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use selfrag_testkit::llama_server::LlamaServer;

use super::{
    Bench, GENERATED_TOKENS, PROMPT_TOKENS, check_load, json_number, json_string, list, median,
    preamble, prompt_ids, verdict,
};

/// One of our runs.
struct Ours {
    /// Its row in the table.
    name: &'static str,
    /// The settings that choose its kernels.
    settings: &'static [(&'static str, &'static str)],
    /// Its peer, built for the same instructions: an index into [`PEERS`].
    peer: usize,
}

const OURS: [Ours; 3] = [
    Ours {
        name: "packed tiles, AVX2",
        settings: &[
            ("SELFRAG_CPU_KERNELS", "packed"),
            ("SELFRAG_CPU_SIMD", "avx2"),
        ],
        peer: 0,
    },
    Ours {
        name: "packed tiles, AVX-VNNI",
        settings: &[
            ("SELFRAG_CPU_KERNELS", "packed"),
            ("SELFRAG_CPU_SIMD", "avx-vnni"),
        ],
        peer: 1,
    },
    Ours {
        name: "candle's kernels, AVX2",
        settings: &[
            ("SELFRAG_CPU_KERNELS", "candle"),
            ("MISTRALRS_FORCE_AVX2", "1"),
        ],
        peer: 0,
    },
];

/// The peers' names, in the order of their builds in [`avx2`].
const PEERS: [&str; 2] = ["llama.cpp, x86-64-v3", "llama.cpp, x86-64-v3 with AVX-VNNI"];

/// Prompt and decode tokens/s of each round.
#[derive(Default)]
struct Runs {
    prompt: Vec<f64>,
    decode: Vec<f64>,
}

pub(super) fn avx2(bench: &Bench) -> Result<String> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let has = |flag: &str| cpu.split_whitespace().any(|f| f == flag);
    if !["avx2", "fma", "f16c", "avx_vnni"].iter().all(|f| has(f)) {
        bail!(
            "the avx2 section runs the kernels of AVX2 and AVX-VNNI, which this CPU lacks; run \
             the other sections"
        );
    }
    let gguf = bench.generator_gguf()?;
    let scratch = bench.out.join("avx2");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let threads = bench.threads.to_string();
    let mut servers = Vec::new();
    for binary in [
        crate::llama_server::binary()?,
        crate::llama_server::binary_avx_vnni()?,
    ] {
        let server = LlamaServer::start(
            &binary,
            &gguf,
            &scratch,
            1,
            1024,
            // llama.cpp's own cache type (the generator section's peer has it), over the f32
            // that the tests ask for.
            &[
                "-t", &threads, "-tb", &threads, "-ctk", "f16", "-ctv", "f16",
            ],
        )
        .with_context(|| format!("starting {} on {}", binary.display(), gguf.display()))?;
        let port: u16 = server
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .context("the server's port")?;
        servers.push((server, port));
    }
    let ids = prompt_ids();
    let gguf_arg = gguf.display().to_string();
    let args: Vec<String> = [
        "debug",
        "generate",
        "--model",
        &gguf_arg,
        "--ids",
        &ids,
        "--max-tokens",
        &GENERATED_TOKENS.to_string(),
        "--ignore-eos",
        "--threads",
        &threads,
    ]
    .map(str::to_owned)
    .to_vec();
    let load = check_load();
    let mut ours: Vec<Runs> = OURS.iter().map(|_| Runs::default()).collect();
    let mut peers: Vec<Runs> = PEERS.iter().map(|_| Runs::default()).collect();
    let mut kernels: Vec<String> = vec![String::new(); OURS.len()];
    let turns = OURS.len() + PEERS.len();
    for round in 0..bench.rounds {
        eprintln!("avx2 round {}/{}", round + 1, bench.rounds);
        for turn in 0..turns {
            let job = (turn + round) % turns;
            if let Some(Ours { name, settings, .. }) = OURS.get(job) {
                let mut cmd = bench.selfrag_command(&args)?;
                cmd.env_remove("SELFRAG_CPU_SIMD")
                    .env_remove("MISTRALRS_FORCE_AVX2")
                    .envs(settings.iter().copied());
                let json = bench.output(&mut cmd, &format!("selfrag debug generate, {name}"))?;
                ours[job].prompt.push(
                    json_number(&json, "prompt_tokens")? / json_number(&json, "prompt_seconds")?,
                );
                ours[job].decode.push(
                    json_number(&json, "decode_tokens")? / json_number(&json, "decode_seconds")?,
                );
                kernels[job] = json_string(&json, "kernels").unwrap_or_default();
            } else {
                let peer = job - OURS.len();
                let (prompt, decode) = completion(servers[peer].1, &ids)?;
                peers[peer].prompt.push(prompt);
                peers[peer].decode.push(decode);
            }
        }
    }
    drop(servers);

    let mut md = format!(
        "## Generator without AVX-512\n\n{} The generator as a CPU without AVX-512 runs it (AMD \
         Zen 2 and 3, Intel's client CPUs), on this CPU: our packed tiles with the kernels of \
         AVX2 and of AVX-VNNI (`SELFRAG_CPU_SIMD`), and candle's AVX2 tier \
         (`MISTRALRS_FORCE_AVX2=1`), which is what such a CPU ran before the packed tiles had \
         kernels for it; against llama.cpp's server built for x86-64-v3 (AVX2, FMA, F16C: \
         `cargo xtask llama-server`) and, for the AVX-VNNI row, for x86-64-v3 with AVX-VNNI, \
         f16 cache, asked for the generator section's {} prompt \
         tokens as ids and {} greedy tokens ignoring EOS, no prompt cache, its own timings. The \
         generator section's GGUF; all five take turns. This is those CPUs' instruction mix at \
         this CPU's speed per instruction and memory; `cargo xtask cpu-check` measures one of \
         them.\n\n\
         | kernels | prompt, tokens/s | decode, tokens/s | its peer | prompt / peer | decode / peer | decode ≥ 1.0× llama.cpp |\n\
         | --- | ---: | ---: | --- | ---: | ---: | --- |\n",
        preamble(bench, load),
        PROMPT_TOKENS,
        GENERATED_TOKENS,
    );
    for (Ours { name, peer, .. }, runs) in OURS.iter().zip(&ours) {
        let (prompt, decode) = (median(&runs.prompt), median(&runs.decode));
        let (prompt_peer, decode_peer) =
            (median(&peers[*peer].prompt), median(&peers[*peer].decode));
        md.push_str(&format!(
            "| {name} | {prompt:.1} | {decode:.2} | {} | {:.2}× | {:.2}× | {} |\n",
            PEERS[*peer],
            prompt / prompt_peer,
            decode / decode_peer,
            verdict(decode / decode_peer >= 1.0),
        ));
    }
    for (name, runs) in PEERS.iter().zip(&peers) {
        md.push_str(&format!(
            "| {name} | {:.1} | {:.2} | | | | |\n",
            median(&runs.prompt),
            median(&runs.decode)
        ));
    }
    md.push_str("\nPer round, prompt and decode tokens/s: ");
    let rounds: Vec<String> = OURS
        .iter()
        .map(|run| run.name)
        .zip(&ours)
        .chain(PEERS.iter().copied().zip(&peers))
        .map(|(name, runs)| format!("{name} [{}], [{}]", list(&runs.prompt), list(&runs.decode)))
        .collect();
    md.push_str(&rounds.join("; "));
    md.push_str(". Our runs reported their kernels as: ");
    md.push_str(
        &kernels
            .iter()
            .map(|k| format!("\"{k}\""))
            .collect::<Vec<_>>()
            .join(", "),
    );
    md.push_str(".\n");
    Ok(md)
}

/// One completion of the prompt `ids` on the server at `port`: its prompt and decode tokens/s.
fn completion(port: u16, ids: &str) -> Result<(f64, f64)> {
    let body = format!(
        "{{\"prompt\":[{ids}],\"n_predict\":{GENERATED_TOKENS},\"ignore_eos\":true,\
         \"cache_prompt\":false,\"temperature\":0.0,\"top_k\":1,\"samplers\":[\"top_k\"]}}"
    );
    let reply = post(port, "/completion", &body)?;
    let json = reply
        .split_once("\r\n\r\n")
        .map_or(reply.as_str(), |(_, body)| body);
    let timings = serde_json::from_str::<serde_json::Value>(json.trim())
        .with_context(|| format!("llama-server's reply: {}", super::preview(json)))?["timings"]
        .clone();
    let rate = |key: &str| {
        timings[key]
            .as_f64()
            .with_context(|| format!("no `timings.{key}` in llama-server's reply"))
    };
    let predicted = timings["predicted_n"].as_u64().unwrap_or(0);
    if predicted as usize != GENERATED_TOKENS {
        bail!("llama-server generated {predicted} tokens, not {GENERATED_TOKENS}");
    }
    Ok((rate("prompt_per_second")?, rate("predicted_per_second")?))
}

/// `POST path` with the JSON `body` to the server at `port`, the whole reply.
fn post(port: u16, path: &str, body: &str) -> Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .with_context(|| format!("connecting to llama-server on port {port}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(600)))?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes())?;
    let mut reply = String::new();
    stream
        .read_to_string(&mut reply)
        .context("reading llama-server's reply")?;
    if !reply.starts_with("HTTP/1.1 200") {
        bail!("llama-server answered {}", super::preview(&reply));
    }
    Ok(reply)
}
