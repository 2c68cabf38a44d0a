//! The `search` section of `cargo xtask bench`: search at scale. Hybrid query p50/p95, the ANN
//! index's recall@10 against exact search and the hybrid search's against the same search over an
//! exact vector list, on synthetic libraries of 10k, 100k and 1M passages of 768-d vectors
//! (`selfrag debug bench-search`); goals (issue 22) p95 ≤ 15 ms at 100k and ≤ 50 ms at 1M with
//! recall@10 ≥ 0.95. The sizes can be chosen with `SELFRAG_BENCH_SEARCH_SIZES=10000,100000`;
//! with `SELFRAG_BENCH_SEARCH_SWEEP=1` each size also measures the other settings of the ANN
//! index (HNSW `ef`, refine factors) on the same library and queries, in a table of its own.
//!
//! Synthetic clusters are easy for an ANN index (an IVF index found all of their neighbours,
//! and only 80% of a real library's), so the same settings are also measured on a real library (`selfrag debug search-depths`): PDFs of the
//! papers corpus (see `bench/papers.rs`), in a fixed pseudo-random order, indexed with the real
//! all-MiniLM-L6-v2 until the library passes [`REAL_PASSAGES`], queried with the first words of
//! its own passages.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::{
    Bench, check_load, command_line, json_number, load_average, locked_version, machine,
    our_binaries, verdict,
};

/// Passages of the real library: past the 10,000 from which a library is searched through its
/// ANN index. `SELFRAG_BENCH_REAL_PASSAGES` asks for more (the whole corpus is about 51,000).
const REAL_PASSAGES: f64 = 11_000.0;
/// PDFs added to the real library between two looks at its size.
const REAL_BATCH_FILES: usize = 40;
/// Queries of the real library.
const REAL_QUERIES: usize = 200;

pub(super) fn search(bench: &Bench) -> Result<String> {
    let load = check_load();
    let started = command_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let scratch = bench.out.join("search");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).context("creating target/bench/search")?;
    let selfrag = bench.binary("selfrag");
    let sizes: Vec<usize> = std::env::var("SELFRAG_BENCH_SEARCH_SIZES")
        .unwrap_or_else(|_| "10000,100000,1000000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Synthetic libraries: 768-d vectors around 256 random centres, 100 random words of a Zipf-distributed vocabulary per passage; 100 queries each. \
         Hybrid = vector search (exact below 10,000 passages, HNSW over 8-bit codes from there) + BM25, fused by reciprocal rank; \
         its halves are also timed alone at the depth it asks each for. Recall@10: of the exact top 10, the share the vector search for 10 returns; \
         hybrid recall@10: of the top 10 of the same hybrid search over an exact vector list, the share it returns. \
         Goals (issue 22): hybrid p95 ≤ 15 ms at 100k and ≤ 50 ms at 1M, recall@10 ≥ 0.95.\n\n\
         | passages | write s | index s | ANN | hybrid p50 ms | hybrid p95 ms | its vector half p95 ms | its BM25 half p95 ms | vector k=10 p95 ms | exact p50 ms | recall@10 | hybrid recall@10 | goal |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let sweep =
        std::env::var("SELFRAG_BENCH_SEARCH_SWEEP").is_ok_and(|v| !v.is_empty() && v != "0");
    let mut sweeps = String::new();
    for n in sizes {
        let dir: PathBuf = scratch.join(format!("search{n}"));
        let t = step_line(n);
        let out = bench.output(
            Command::new(&selfrag)
                .args([
                    "debug",
                    "bench-search",
                    "--dir",
                    &dir.display().to_string(),
                    "--passages",
                    &n.to_string(),
                    "--queries",
                    "100",
                ])
                .args(sweep.then_some("--sweep")),
            "selfrag debug bench-search",
        )?;
        eprintln!("  {n} passages: {out} ({:.0} s)", t.elapsed().as_secs_f64());
        let p95 = json_number(&out, "hybrid_p95_ms")?;
        let recall = json_number(&out, "recall_at_10")?;
        let goal = match n {
            n if n >= 1_000_000 => verdict(p95 <= 50.0 && recall >= 0.95),
            n if n >= 100_000 => verdict(p95 <= 15.0 && recall >= 0.95),
            _ => "—",
        };
        let _ = writeln!(
            md,
            "| {n} | {:.1} | {:.1} | {} | {:.1} | {p95:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {recall:.3} | {:.3} | {goal} |",
            json_number(&out, "write_seconds")?,
            json_number(&out, "index_seconds")?,
            if out.contains("\"ann_index\":true") {
                format!(
                    "HNSW-SQ, {} partition(s)",
                    json_number(&out, "ann_partitions")?
                )
            } else {
                "exact".to_string()
            },
            json_number(&out, "hybrid_p50_ms")?,
            json_number(&out, "hybrid_vector_p95_ms")?,
            json_number(&out, "hybrid_bm25_p95_ms")?,
            json_number(&out, "vector_p95_ms")?,
            json_number(&out, "exact_p50_ms")?,
            json_number(&out, "hybrid_recall_at_10")?,
        );
        if sweep {
            sweeps.push_str(&sweep_table(n, &out)?);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    md.push_str(&sweeps);
    // The synthetic figures took long: a real library that cannot be built is said, not fatal.
    match real_library(bench, &scratch) {
        Ok(table) => md.push_str(&table),
        Err(e) => {
            let _ = writeln!(
                md,
                "\n#### Search depths on a real library\n\nNot measured: {e:#}"
            );
        }
    }
    Ok(format!(
        "## Search\n\nMeasured from {started} on {}, one process per library, one search at a time; \
         load average {load:.2} before and {:.2} after. {}, lance {}.{}\n\n{md}",
        machine(),
        load_average(),
        command_line("rustc", &["-V"]),
        locked_version(&bench.root, "lance"),
        our_binaries(bench),
    ))
}

/// The `--sweep` settings of one library as a table, the default first.
fn sweep_table(passages: usize, json: &str) -> Result<String> {
    Ok(format!(
        "\n#### Search depths at {passages} passages\n\n{}",
        depths_table(json)?
    ))
}

/// The real library: indexed batch by batch until it passes [`REAL_PASSAGES`], then every
/// setting measured on its own passages.
fn real_library(bench: &Bench, scratch: &Path) -> Result<String> {
    let corpus = super::papers::corpus(&bench.root)?;
    let mut pdfs = Vec::new();
    for package in std::fs::read_dir(&corpus.dir)? {
        for file in std::fs::read_dir(package?.path())? {
            let path = file?.path();
            if path.extension().is_some_and(|e| e == "pdf") {
                pdfs.push(path);
            }
        }
    }
    // A fixed order that mixes the packages: by a hash of the file's place in the corpus.
    pdfs.sort_by_key(|p| fnv1a(&p.strip_prefix(&corpus.dir).unwrap_or(p).to_string_lossy()));
    let docs = scratch.join("real-docs");
    let data = scratch.join("real-data");
    std::fs::create_dir_all(&docs)?;
    let minilm = crate::minilm_dir()?;
    let selfrag = bench.binary("selfrag");
    let with_library = |cmd: &mut Command| {
        super::library_only(cmd, &data, &minilm);
    };
    eprintln!("  real library: indexing PDFs of the papers corpus…");
    let t = Instant::now();
    let wanted = match std::env::var("SELFRAG_BENCH_REAL_PASSAGES") {
        Ok(v) => v.trim().parse::<f64>().with_context(|| {
            format!("SELFRAG_BENCH_REAL_PASSAGES={v:?} is not a number of passages")
        })?,
        Err(_) => REAL_PASSAGES,
    }
    .max(REAL_PASSAGES);
    let (mut files, mut passages, mut pages, mut indexed) = (0, 0.0, 0.0, false);
    for batch in pdfs.chunks(REAL_BATCH_FILES) {
        for pdf in batch {
            let name = pdf.file_name().map(|n| n.to_string_lossy().into_owned());
            let target = docs.join(format!("{files:04}-{}", name.unwrap_or_default()));
            std::fs::copy(pdf, &target)
                .with_context(|| format!("copying {} to {}", pdf.display(), target.display()))?;
            files += 1;
        }
        // A file the library refuses (a PDF with no text) fails the command, not the library.
        let mut index = Command::new(&selfrag);
        index
            .arg("index")
            .arg(&docs)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        with_library(&mut index);
        index.status().context("starting selfrag index")?;
        let mut stats = Command::new(&selfrag);
        stats.args(["library", "stats", "--json"]);
        with_library(&mut stats);
        let stats = bench.output(&mut stats, "selfrag library stats")?;
        passages = json_number(&stats, "passages")?;
        pages = json_number(&stats, "pages")?;
        indexed =
            stats.contains("\"vector_index\": true") || stats.contains("\"vector_index\":true");
        if passages >= wanted {
            break;
        }
    }
    if passages < REAL_PASSAGES || !indexed {
        bail!(
            "the {files} PDFs of the papers corpus made a library of {passages:.0} passages{}, \
             short of the {REAL_PASSAGES:.0} searched through an ANN index",
            if indexed { "" } else { " with no vector index" }
        );
    }
    let seconds = t.elapsed().as_secs_f64();
    let mut depths = Command::new(&selfrag);
    let queries = REAL_QUERIES.to_string();
    depths.args(["debug", "search-depths", "--queries", &queries]);
    with_library(&mut depths);
    let out = bench.output(&mut depths, "selfrag debug search-depths")?;
    eprintln!("  real library: {out}");
    Ok(format!(
        "\n#### Search depths on a real library\n\n\
         {files} PDFs of the papers corpus ({pages:.0} pages, {passages:.0} passages; `cargo xtask bench papers` names the packages), \
         indexed by `selfrag index` with all-MiniLM-L6-v2 (384-d) in {seconds:.0} s, {REAL_BATCH_FILES} files at a time {} \
         (the ANN index's segments then held {} passages); \
         {:.0} queries, each the first 12 words of a passage taken at an even stride (that passage is among the exact top 10: the recall is about the other nine). \
         Exact vector search p50: {:.1} ms.\n\n{}",
        if passages >= wanted {
            format!("until the library passed {wanted:.0} passages")
        } else {
            format!("until the corpus ran out, short of the {wanted:.0} passages asked for")
        },
        segments(&out),
        json_number(&out, "queries")?,
        json_number(&out, "exact_p50_ms")?,
        depths_table(&out)?,
    ))
}

/// The `ann_rows_per_segment` list of `json`, as "10000 + 1063".
fn segments(json: &str) -> String {
    json.split("\"ann_rows_per_segment\":[")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .filter(|list| !list.trim().is_empty())
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" + ")
        })
        .unwrap_or_else(|| "no".into())
}

/// FNV-1a of `text`: a hash that stays the same across Rust versions and machines.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The settings measured in `json` (after each `"depth":`, the library's default first) as a
/// table.
fn depths_table(json: &str) -> Result<String> {
    let mut md = format!(
        "The same library and queries at each setting of the ANN index (the library's default first): `ef`, the candidates the HNSW search keeps, as asked (a search raises it to the candidates it returns, k × refine: for the hybrid's vector half of 40 passages an ef below 80 runs as 80 with refine ×2 and below 160 as 160 with ×4), \
         and refine factor (the candidates, × k, re-scored with the full vectors; — for none, the 8-bit codes' order kept); \
         the hybrid search asks each half for {:.0} passages.\n\n\
         | ef | refine | hybrid p50 ms | hybrid p95 ms | its vector half p95 ms | vector k=10 p95 ms | recall@10 | hybrid recall@10 |\n\
         |---|---|---|---|---|---|---|---|\n",
        json_number(json, "fusion_depth")?
    );
    // Each setting's fields follow its `"depth":`, the default's first.
    let entries = json.split("\"depth\":").skip(1);
    for entry in entries {
        let refine = if entry.contains("\"refine_factor\":null") {
            "—".to_string()
        } else {
            format!("{}", json_number(entry, "refine_factor")?)
        };
        let _ = writeln!(
            md,
            "| {} | {refine} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} | {:.3} |",
            json_number(entry, "ef")?,
            json_number(entry, "hybrid_p50_ms")?,
            json_number(entry, "hybrid_p95_ms")?,
            json_number(entry, "hybrid_vector_p95_ms")?,
            json_number(entry, "vector_p95_ms")?,
            json_number(entry, "recall_at_10")?,
            json_number(entry, "hybrid_recall_at_10")?,
        );
    }
    Ok(md)
}

fn step_line(n: usize) -> Instant {
    eprintln!("  search benchmark, {n} passages…");
    Instant::now()
}
