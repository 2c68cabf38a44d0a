//! `selfrag debug embed-agreement`: how far the int8 embedder's vectors and rankings are from
//! f32's on real text (for `cargo xtask bench embedder`).
//!
//! The text files given are cut into passages of 100 words; the queries are the first 12 words
//! of every 8th passage. Both precisions embed all of them; the report is the cosine of each
//! passage's two vectors (smallest and mean) and the top-10 overlap: for each query, the share
//! of the 10 passages with the largest dot product under f32 that int8 also ranks in its top
//! 10, averaged.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use selfrag_core::EmbedderPrecision;
use selfrag_models::{BertEmbedder, Device};
use serde::Serialize;

/// Words per passage.
const PASSAGE_WORDS: usize = 100;
/// A query is the start of every this-many-th passage.
const QUERY_EVERY: usize = 8;
/// Words per query.
const QUERY_WORDS: usize = 12;
/// The ranking compared.
const TOP: usize = 10;

#[derive(Serialize)]
pub struct Agreement {
    /// The precision the "int8" side ran in (f32 on a CPU without AVX-512 VNNI or AVX-VNNI).
    int8_ran_as: EmbedderPrecision,
    passages: usize,
    queries: usize,
    min_cosine: f64,
    mean_cosine: f64,
    top10_overlap: f64,
}

/// Passages of 100 words from each of `files`, in order.
fn passages(files: &[PathBuf]) -> Result<Vec<String>> {
    let mut passages = Vec::new();
    for file in files {
        let text = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let text = String::from_utf8_lossy(&text);
        let words: Vec<&str> = text.split_whitespace().collect();
        passages.extend(words.chunks(PASSAGE_WORDS).map(|chunk| chunk.join(" ")));
    }
    Ok(passages)
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot = |x: &[f32], y: &[f32]| -> f64 {
        x.iter()
            .zip(y)
            .map(|(p, q)| f64::from(*p) * f64::from(*q))
            .sum()
    };
    dot(a, b) / (dot(a, a) * dot(b, b)).sqrt()
}

/// The indices of the `TOP` vectors of `passages` with the largest dot product with `query`.
fn top(query: &[f32], passages: &[Vec<f32>]) -> Vec<usize> {
    let score = |v: &[f32]| -> f32 { v.iter().zip(query).map(|(a, b)| a * b).sum() };
    let mut order: Vec<usize> = (0..passages.len()).collect();
    order.sort_by(|&a, &b| score(&passages[b]).total_cmp(&score(&passages[a])));
    order.truncate(TOP);
    order
}

/// Embeds the passages and queries of `files` with the model in `dir` in both precisions.
pub fn measure(dir: &Path, files: &[PathBuf]) -> Result<Agreement> {
    let passages = passages(files)?;
    if passages.len() < TOP * QUERY_EVERY {
        bail!(
            "{} passages of {PASSAGE_WORDS} words in the files given: at least {} are needed",
            passages.len(),
            TOP * QUERY_EVERY
        );
    }
    let queries: Vec<String> = passages
        .iter()
        .step_by(QUERY_EVERY)
        .map(|p| p.split(' ').take(QUERY_WORDS).collect::<Vec<_>>().join(" "))
        .collect();
    let load = |precision| {
        BertEmbedder::load_with_precision(dir, &Device::Cpu, precision)
            .with_context(|| format!("loading the embedder {}", dir.display()))
    };
    let (exact, int8) = (
        load(EmbedderPrecision::F32)?,
        load(EmbedderPrecision::Int8)?,
    );
    let embed = |embedder: &BertEmbedder, texts: &[String]| {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        embedder.embed(&refs).context("embedding")
    };
    let (exact_passages, int8_passages) = (embed(&exact, &passages)?, embed(&int8, &passages)?);
    let (exact_queries, int8_queries) = (embed(&exact, &queries)?, embed(&int8, &queries)?);
    let cosines: Vec<f64> = exact_passages
        .iter()
        .zip(&int8_passages)
        .map(|(a, b)| cosine(a, b))
        .collect();
    let shared: usize = exact_queries
        .iter()
        .zip(&int8_queries)
        .map(|(e, i)| {
            let want = top(e, &exact_passages);
            top(i, &int8_passages)
                .iter()
                .filter(|p| want.contains(p))
                .count()
        })
        .sum();
    #[allow(clippy::cast_precision_loss)]
    Ok(Agreement {
        int8_ran_as: int8.precision(),
        passages: passages.len(),
        queries: queries.len(),
        min_cosine: cosines.iter().copied().fold(f64::INFINITY, f64::min),
        mean_cosine: cosines.iter().sum::<f64>() / cosines.len() as f64,
        top10_overlap: shared as f64 / (TOP * queries.len()) as f64,
    })
}
