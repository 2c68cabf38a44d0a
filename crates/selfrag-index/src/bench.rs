//! Search benchmarks on synthetic libraries, for `cargo xtask bench search` (through
//! `selfrag debug bench-search`): N passages of clustered random vectors and random-word text,
//! written straight into a real library, indexed as the app indexes them, then queried. Reports
//! hybrid query latency (p50/p95), exact-search latency, the ANN index's recall@10 against exact
//! search, and the hybrid search's against the same hybrid search over an exact vector list, at
//! the library's [`SearchDepth::DEFAULT`] and, asked for, at the other ANN settings of
//! [`sweep_depths`] on the same library and queries. Not used by the app.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::library::{DocumentRecord, Library, LibraryLocation, reciprocal_rank_fusion};
use crate::{
    IndexError, PassageEmbedder, SearchDepth, SearchHit, SearchMode, SearchRequest, VectorScan,
};

/// What one benchmark run measured.
#[derive(Debug, Clone, Serialize)]
pub struct SearchBenchReport {
    pub passages: usize,
    pub dim: usize,
    pub queries: usize,
    /// Writing the rows; building the full-text and (past the threshold) ANN indexes.
    pub write_seconds: f64,
    pub index_seconds: f64,
    pub ann_index: bool,
    /// IVF partitions of the ANN index after the library's optimize (a query reads them all).
    pub ann_partitions: Option<usize>,
    /// The searches at the library's own depth.
    #[serde(flatten)]
    pub default: DepthReport,
    /// An exact vector search as deep as a hybrid search's half.
    pub exact_p50_ms: f64,
    pub disk_bytes: u64,
    /// The same queries at the other depths of [`sweep_depths`], when asked for.
    pub sweep: Vec<DepthReport>,
}

/// The searches of every query at one [`SearchDepth`].
#[derive(Debug, Clone, Serialize)]
pub struct DepthReport {
    pub depth: SearchDepth,
    /// How many passages the hybrid search for [`K`] asks each half for.
    pub fusion_depth: usize,
    pub hybrid_p50_ms: f64,
    pub hybrid_p95_ms: f64,
    /// The two halves of a hybrid search alone, at the depth it asks each for (40 for k = 10
    /// at the default depth).
    pub hybrid_vector_p95_ms: f64,
    pub hybrid_bm25_p95_ms: f64,
    /// A vector search for 10 passages.
    pub vector_p50_ms: f64,
    pub vector_p95_ms: f64,
    /// Mean fraction of the exact top 10 that the vector search for 10 returns.
    pub recall_at_10: f64,
    /// Mean fraction of the top 10 of the same hybrid search over an exact vector list that
    /// the hybrid search returns: what the ANN index loses of the fused results.
    pub hybrid_recall_at_10: f64,
}

/// The depths `--sweep` measures besides the default: every HNSW `ef` and refine factor below,
/// at the default's fusion depth. (How deep fusion looks changes which passages win, not how
/// well an approximation finds them: random text and vectors cannot say which is better.)
pub fn sweep_depths() -> Vec<SearchDepth> {
    let mut depths = Vec::new();
    for ef in [40, 64, 128, 256] {
        for refine_factor in [None, Some(2), Some(4)] {
            let depth = SearchDepth {
                vector: VectorScan::Indexed { ef, refine_factor },
                ..SearchDepth::DEFAULT
            };
            if depth != SearchDepth::DEFAULT {
                depths.push(depth);
            }
        }
    }
    depths
}

/// What one depth measured, query by query.
#[derive(Default)]
struct DepthTimes {
    hybrid: Vec<f64>,
    dense_half: Vec<f64>,
    sparse_half: Vec<f64>,
    vector: Vec<f64>,
    recall: f64,
    hybrid_recall: f64,
}

impl DepthTimes {
    fn report(mut self, depth: SearchDepth, queries: usize) -> DepthReport {
        let queries = queries.max(1) as f64;
        DepthReport {
            depth,
            fusion_depth: depth.fusion_depth(K),
            hybrid_p50_ms: percentile(&mut self.hybrid, 0.50),
            hybrid_p95_ms: percentile(&mut self.hybrid, 0.95),
            hybrid_vector_p95_ms: percentile(&mut self.dense_half, 0.95),
            hybrid_bm25_p95_ms: percentile(&mut self.sparse_half, 0.95),
            vector_p50_ms: percentile(&mut self.vector, 0.50),
            vector_p95_ms: percentile(&mut self.vector, 0.95),
            recall_at_10: self.recall / queries,
            hybrid_recall_at_10: self.hybrid_recall / queries,
        }
    }
}

/// The share of `truth` that `found` holds.
fn overlap(truth: &[SearchHit], found: &[SearchHit]) -> f64 {
    let hits = truth
        .iter()
        .filter(|t| found.iter().any(|f| f.passage_id == t.passage_id))
        .count();
    hits as f64 / truth.len().max(1) as f64
}

/// The passages' vectors are written directly, not computed from their text; what it embeds
/// (the library's fingerprint sentences, a note of the visibility benchmark) gets a
/// reproducible random unit vector per text.
struct Synthetic {
    dim: usize,
}

impl PassageEmbedder for Synthetic {
    fn model_id(&self) -> String {
        format!("synthetic-{}", self.dim)
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        Ok(texts
            .iter()
            .map(|text| {
                // FNV-1a of the text seeds the vector.
                let seed = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                });
                let mut rng = Rng(seed);
                let v: Vec<f32> = (0..self.dim).map(|_| rng.gauss()).collect();
                let norm = v
                    .iter()
                    .map(|x| x * x)
                    .sum::<f32>()
                    .sqrt()
                    .max(f32::MIN_POSITIVE);
                v.into_iter().map(|x| x / norm).collect()
            })
            .collect())
    }
}

/// SplitMix64, and Gaussian numbers from it (Box-Muller): reproducible data from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn gauss(&mut self) -> f32 {
        let (u, v) = (self.unit().max(1e-12), self.unit());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

/// Passages every query asks for (recall@10 is measured at it).
const K: usize = 10;
const PASSAGES_PER_DOCUMENT: usize = 100;
const WRITE_BATCH: usize = 20_000;
const CLUSTERS: usize = 256;
const VOCABULARY: usize = 20_000;

fn word(i: usize) -> String {
    // Pronounceable pseudo-words, so the full-text tokenizer treats them as words.
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ba", "de", "fi", "go", "hu", "ja", "pe",
        "zo",
    ];
    let mut w = String::new();
    let mut n = i + 16;
    while n > 0 {
        w.push_str(SYLLABLES[n % 16]);
        n /= 16;
    }
    w
}

/// Builds a synthetic library of `passages` rows under `dir` and measures `queries` queries, at
/// the default depth and, if `sweep`, at those of [`sweep_depths`].
pub async fn search_benchmark(
    location: &LibraryLocation,
    state_dir: &Path,
    passages: usize,
    dim: usize,
    queries: usize,
    seed: u64,
    sweep: bool,
) -> Result<SearchBenchReport, IndexError> {
    let embedder = Synthetic { dim };
    let library = Library::open_at(location, state_dir, &embedder).await?;
    let mut rng = Rng(seed);
    let centers: Vec<Vec<f32>> = (0..CLUSTERS)
        .map(|_| (0..dim).map(|_| rng.gauss()).collect())
        .collect();
    let point = |rng: &mut Rng| -> Vec<f32> {
        let c = &centers[(rng.next() % CLUSTERS as u64) as usize];
        c.iter().map(|x| x + 0.6 * rng.gauss()).collect()
    };
    let text = |rng: &mut Rng, words: usize| -> String {
        (0..words)
            .map(|_| {
                // Zipf-like: low word numbers are common, high ones rare.
                let r = rng.unit();
                word(((VOCABULARY as f64).powf(r) as usize).min(VOCABULARY - 1))
            })
            .collect::<Vec<_>>()
            .join(" ")
    };

    let started = Instant::now();
    let mut written = 0;
    while written < passages {
        let n = WRITE_BATCH.min(passages - written);
        let mut rows = crate::library::PassageRowsForBench::default();
        let mut vectors = Vec::with_capacity(n);
        for i in written..written + n {
            let doc = format!("doc{:07}", i / PASSAGES_PER_DOCUMENT);
            rows.push(
                &doc,
                &format!("/bench/{doc}.txt"),
                &doc,
                &text(&mut rng, 100),
            );
            vectors.push(point(&mut rng));
        }
        library.write_bench_rows(rows, vectors).await?;
        written += n;
    }
    let documents: Vec<DocumentRecord> = (0..passages.div_ceil(PASSAGES_PER_DOCUMENT))
        .map(|d| {
            let doc = format!("doc{d:07}");
            DocumentRecord {
                path: format!("/bench/{doc}.txt"),
                id: doc.clone(),
                title: doc,
                pages: 1,
                passages: PASSAGES_PER_DOCUMENT.min(passages - d * PASSAGES_PER_DOCUMENT) as u32,
                size: 0,
                modified_ns: 0,
                indexed_at_ms: 0,
                passages_expected: None,
                works: None,
            }
        })
        .collect();
    library.commit_bench_documents(documents).await?;
    let write_seconds = started.elapsed().as_secs_f64();

    let started = Instant::now();
    library.optimize().await?;
    let index_seconds = started.elapsed().as_secs_f64();
    let stats = library.stats().await?;

    let mut depths = vec![SearchDepth::DEFAULT];
    if sweep {
        depths.extend(sweep_depths());
    }
    let queries: Vec<BenchQuery> = (0..queries)
        .map(|_| {
            let vector = point(&mut rng);
            BenchQuery {
                text: text(&mut rng, 4),
                vector,
            }
        })
        .collect();
    let measured = measure_depths(&library, &queries, &depths).await?;
    let mut reports = measured.depths.into_iter();
    let default = reports
        .next()
        .ok_or_else(|| IndexError::Schema("the search benchmark measured no depth".into()))?;
    Ok(SearchBenchReport {
        passages,
        dim,
        queries: queries.len(),
        write_seconds,
        index_seconds,
        ann_index: stats.vector_index,
        ann_partitions: library
            .vector_index_shape()
            .await?
            .and_then(|shape| shape.partitions),
        default,
        exact_p50_ms: measured.exact_p50_ms,
        disk_bytes: stats.disk_bytes,
        sweep: reports.collect(),
    })
}

/// One query of a search benchmark: its words (for BM25) and its vector.
#[derive(Debug, Clone)]
pub struct BenchQuery {
    pub text: String,
    pub vector: Vec<f32>,
}

/// What [`measure_depths`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct DepthsReport {
    pub queries: usize,
    /// The passages of each segment of the ANN index, oldest first (empty without one).
    pub ann_rows_per_segment: Vec<u64>,
    /// An exact vector search as deep as a hybrid search's half.
    pub exact_p50_ms: f64,
    /// One per depth asked, in order.
    pub depths: Vec<DepthReport>,
}

/// `count` of the library's stored passages (all of them if it holds fewer), taken at an even
/// stride through its documents in id order: a sample of what it holds, for queries made of its
/// own text and for timing the embedder on the passages an indexing job embedded.
pub async fn passages_at_stride(
    library: &Library,
    count: usize,
) -> Result<Vec<SearchHit>, IndexError> {
    let mut documents = library.documents();
    documents.sort_by(|a, b| a.id.cmp(&b.id));
    // Copies of one content share its passages: each is taken once.
    documents.dedup_by(|a, b| a.id == b.id);
    let total: usize = documents.iter().map(|d| d.passages as usize).sum();
    let count = count.min(total);
    let mut wanted = (0..count).map(|i| i * total / count).peekable();
    let mut hits = Vec::with_capacity(count);
    let mut first = 0;
    for document in &documents {
        let end = first + document.passages as usize;
        if wanted.peek().is_some_and(|&i| i < end) {
            let passages = library.passages_of(&document.id).await?;
            while let Some(i) = wanted.next_if(|&i| i < end) {
                if let Some(passage) = passages.get(i - first) {
                    hits.push(passage.clone());
                }
            }
        }
        first = end;
    }
    Ok(hits)
}

/// Runs every query at every one of `depths` on `library`, with the exact searches that say
/// what each depth found of the truth. The library must have no passages waiting for their
/// document (no indexing job in this process): the references assume each half of a hybrid
/// search returns exactly its fusion depth.
pub async fn measure_depths(
    library: &Library,
    queries: &[BenchQuery],
    depths: &[SearchDepth],
) -> Result<DepthsReport, IndexError> {
    if depths.is_empty() {
        return Err(IndexError::Schema(
            "a search benchmark needs at least one depth to measure".into(),
        ));
    }
    // One exact scan and one BM25 search per query, as deep as the deepest fusion asked; each
    // depth's reference takes the top of both lists.
    let deepest = depths.iter().map(|d| d.fusion_depth(K)).max().unwrap_or(K);
    let mut measured: Vec<DepthTimes> = depths.iter().map(|_| DepthTimes::default()).collect();
    let mut exact = Vec::new();
    for (query, asked) in queries.iter().enumerate() {
        let request = SearchRequest::hybrid(&asked.text, asked.vector.clone(), K);
        let at = |mode, k| SearchRequest {
            mode,
            k,
            ..request.clone()
        };

        // The references: the exact top 10, and for each depth the hybrid search over an exact
        // vector list, fused here from its two halves as `search_at` fuses them.
        let exact_depth = SearchDepth {
            vector: VectorScan::Exact,
            ..SearchDepth::DEFAULT
        };
        let t = Instant::now();
        let dense = library
            .search_at(&at(SearchMode::Vector, deepest), exact_depth)
            .await?;
        exact.push(t.elapsed().as_secs_f64() * 1e3);
        let sparse = library
            .search_at(&at(SearchMode::Fts, deepest), exact_depth)
            .await?;
        let truth = &dense[..dense.len().min(K)];
        let exact_hybrid = |fusion: usize| {
            let top = |list: &[SearchHit]| list[..list.len().min(fusion)].to_vec();
            let mut fused = reciprocal_rank_fusion(&[top(&dense), top(&sparse)], request.rrf_k);
            fused.truncate(request.k);
            fused
        };

        // Each depth in turn, starting from a different one for every query; at each, the
        // hybrid search and its halves alone (at the depth it asks each for) take turns going
        // first, so that neither always finds the other's pages in the cache.
        let mut order: Vec<usize> = (0..depths.len()).collect();
        order.rotate_left(query % depths.len());
        for i in order {
            let (depth, times) = (depths[i], &mut measured[i]);
            let fusion = depth.fusion_depth(request.k);
            let fused = exact_hybrid(fusion);
            let mut runs = [
                request.clone(),
                at(SearchMode::Vector, fusion),
                at(SearchMode::Fts, fusion),
            ];
            if query % 2 == 1 {
                runs.rotate_left(1);
            }
            for search in runs {
                let t = Instant::now();
                let hits = library.search_at(&search, depth).await?;
                let ms = t.elapsed().as_secs_f64() * 1e3;
                match search.mode {
                    SearchMode::Hybrid => {
                        times.hybrid.push(ms);
                        times.hybrid_recall += overlap(&fused, &hits);
                    }
                    SearchMode::Vector => times.dense_half.push(ms),
                    SearchMode::Fts => times.sparse_half.push(ms),
                }
            }
            let t = Instant::now();
            let approx = library.search_at(&at(SearchMode::Vector, K), depth).await?;
            times.vector.push(t.elapsed().as_secs_f64() * 1e3);
            times.recall += overlap(truth, &approx);
        }
    }
    let shape = library.vector_index_shape().await?;
    Ok(DepthsReport {
        queries: queries.len(),
        ann_rows_per_segment: shape.map(|s| s.rows_per_segment).unwrap_or_default(),
        exact_p50_ms: percentile(&mut exact, 0.50),
        depths: depths
            .iter()
            .zip(measured)
            .map(|(&depth, times)| times.report(depth, queries.len()))
            .collect(),
    })
}

fn percentile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let i = ((values.len() as f64 - 1.0) * q).round() as usize;
    values[i]
}

/// How long a document one computer indexes takes to turn up in another's searches of a shared
/// library: for `cargo xtask bench shared` (`selfrag debug shared-visibility`).
#[derive(Debug, Clone, Serialize)]
pub struct VisibilityReport {
    pub rounds: usize,
    /// From the writer's commit (its `index_file` returning) to the reader's first search that
    /// returns the note, one per round, in seconds.
    pub seconds: Vec<f64>,
    pub median_seconds: f64,
    pub max_seconds: f64,
    /// How long one `index_file` of a one-passage note took for the writer, median.
    pub index_median_seconds: f64,
}

/// Opens the library at `location` twice, as two computers would (two state folders in
/// `scratch`, two LanceDB connections), and for each of `rounds` notes: the writer indexes a
/// note with a word of its own, and the reader searches every 20 ms, for as many passages as
/// there are notes, until one holds that word (or 60 s pass).
pub async fn visibility_benchmark(
    location: &LibraryLocation,
    scratch: &Path,
    rounds: usize,
) -> Result<VisibilityReport, IndexError> {
    let embedder = Synthetic { dim: 64 };
    let writer = Library::open_at(location, &scratch.join("writer"), &embedder).await?;
    let reader = Library::open_at(location, &scratch.join("reader"), &embedder).await?;
    let notes = scratch.join("notes");
    std::fs::create_dir_all(&notes).map_err(|source| IndexError::Write {
        path: notes.clone(),
        source,
    })?;
    let mut seconds = Vec::with_capacity(rounds);
    let mut indexing = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let word = format!("visibilityprobe{round}x{}", std::process::id());
        let path = notes.join(format!("{word}.md"));
        std::fs::write(
            &path,
            format!("# Note {round}\nThe word {word} is in this note.\n"),
        )
        .map_err(|source| IndexError::Write {
            path: path.clone(),
            source,
        })?;
        let started = Instant::now();
        writer.index_file(&path, &embedder).await?;
        let committed = Instant::now();
        indexing.push(committed.duration_since(started).as_secs_f64());
        // A vector search over every note so far: a new shared library has no full-text index
        // until a job's upkeep makes one, and a search never writes a shared library.
        let request = SearchRequest {
            mode: SearchMode::Vector,
            ..SearchRequest::hybrid(
                &word,
                embedder.embed(&[word.as_str()])?.remove(0),
                rounds + 1,
            )
        };
        loop {
            let found = reader
                .search(&request)
                .await?
                .iter()
                .any(|hit| hit.text.contains(&word));
            if found {
                break;
            }
            if committed.elapsed() > std::time::Duration::from_secs(60) {
                return Err(IndexError::Schema(format!(
                    "the reader did not see the note {} within 60 s",
                    path.display()
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        seconds.push(committed.elapsed().as_secs_f64());
    }
    let median = |values: &[f64]| {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
    };
    Ok(VisibilityReport {
        rounds,
        median_seconds: median(&seconds),
        max_seconds: seconds.iter().copied().fold(0.0, f64::max),
        index_median_seconds: median(&indexing),
        seconds,
    })
}
