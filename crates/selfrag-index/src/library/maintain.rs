//! Keeping the library's tables fit for search: a full-text index as soon as there are
//! passages, an approximate-nearest-neighbour index past [`ANN_THRESHOLD`] passages (each job's
//! new passages added as a segment of their own, small segments merged as they accumulate), and
//! compaction of the small files each commit leaves, all brought up to date after each indexing
//! job. Searching is `search.rs`; storing is `ingest.rs`.

use std::sync::atomic::Ordering;

use lancedb::DistanceType;
use lancedb::index::Index;
use lancedb::index::vector::IvfHnswSqIndexBuilder;
use lancedb::table::optimize::Duration;
use lancedb::table::{CompactionOptions, OptimizeAction, OptimizeOptions};

use super::Library;
use super::search::ANN_THRESHOLD;
use crate::IndexError;

/// Seconds an old table version is kept after a newer one exists: long enough for a search
/// that started on it to finish; only this process writes a local library (`library.lock`).
const KEEP_VERSIONS_FOR: i64 = 60;
/// The same in a shared library, where other computers' searches, index builds (minutes on a
/// large library) and commits that lost a race (which read the versions committed since they
/// began) may still need a version: a day.
const KEEP_SHARED_VERSIONS_FOR: i64 = 24 * 60 * 60;

impl Library {
    /// Reads which search indexes exist.
    pub(crate) async fn refresh_index_flags(&self) -> Result<(), IndexError> {
        let indices = self
            .passages
            .list_indices()
            .await
            .map_err(self.store_err())?;
        let on = |column: &str| {
            indices
                .iter()
                .any(|i| i.columns.iter().any(|c| c == column))
        };
        self.vector_indexed.store(on("vector"), Ordering::SeqCst);
        self.text_indexed.store(on("text"), Ordering::SeqCst);
        Ok(())
    }

    /// Creates the full-text index when there are passages and none yet. `false` when the
    /// library is empty (nothing to search).
    pub(super) async fn ensure_text_index(&self) -> Result<bool, IndexError> {
        if self.text_indexed.load(Ordering::SeqCst) {
            return Ok(true);
        }
        if self
            .passages
            .count_rows(None)
            .await
            .map_err(self.store_err())?
            == 0
        {
            return Ok(false);
        }
        self.upkeep(
            "making the full-text index",
            self.passages
                .create_index(&["text"], Index::FTS(Default::default()))
                .execute()
                .await,
        )?;
        self.text_indexed.store(true, Ordering::SeqCst);
        Ok(true)
    }

    /// Whether a full-text search can run: the index is made here when the library has passages
    /// and no index yet (a job stopped before its `optimize`). Making it is a write, so it
    /// waits for no writer: while one is busy the search goes without text hits.
    pub(super) async fn text_index_for_search(&self) -> Result<bool, IndexError> {
        if self.text_indexed.load(Ordering::SeqCst) {
            return Ok(true);
        }
        // A search never writes a shared library: its index is made by a job's upkeep, here
        // or on another computer (`catch_up` then sees it).
        if self.location.is_shared() {
            return Ok(false);
        }
        let Ok(_writer) = self.write.try_lock() else {
            return Ok(false);
        };
        let made = self.ensure_text_index().await?;
        self.make_durable().await?;
        Ok(made)
    }

    /// Brings the search indexes up to date: the full-text index, the ANN index once the
    /// library has [`ANN_THRESHOLD`] passages, and compaction of the files small writes left.
    /// Run after each indexing job.
    pub async fn optimize(&self) -> Result<(), IndexError> {
        let _writer = self.write.lock().await;
        // In a shared library another computer may have made the indexes since: build none twice.
        if self.location.is_shared() {
            self.refresh_index_flags().await?;
        }
        let rows = self
            .passages
            .count_rows(None)
            .await
            .map_err(self.store_err())?;
        self.ensure_text_index().await?;
        if rows >= ANN_THRESHOLD && !self.vector_indexed.load(Ordering::SeqCst) {
            self.create_vector_index(rows).await?;
        }
        self.compact_tables(Duration::try_seconds(self.keep_versions_for()).unwrap_or_default())
            .await?;
        // An index of an earlier version is replaced before Lance brings it up to date, which
        // could mean splitting its partitions for nothing.
        if let Ok(Some(shape)) = self.vector_index_shape().await
            && shape.kind != VECTOR_INDEX_KIND
        {
            tracing::info!(
                kind = shape.kind,
                "building the vector index again as {VECTOR_INDEX_KIND}: the library was indexed by an older version"
            );
            self.create_vector_index(rows).await?;
        }
        // Lance indexes the passages new since the last job as a segment of their own.
        for table in [&self.passages, &self.documents] {
            self.upkeep(
                "indexing new passages",
                table
                    .optimize(OptimizeAction::Index(Default::default()))
                    .await,
            )?;
        }
        self.refresh_index_flags().await?;
        // The index's shape is read for this check only: if it cannot be read, the index stays
        // as it is and the indexing job still succeeds.
        match self.vector_index_shape().await {
            Ok(Some(shape)) => {
                let merged = segments_to_merge(&shape.rows_per_segment);
                if merged > 1 {
                    tracing::info!(
                        segments = shape.rows_per_segment.len(),
                        merged,
                        "merging the vector index's newest segments"
                    );
                    self.upkeep(
                        "merging the vector index's segments",
                        self.passages
                            .optimize(OptimizeAction::Index(
                                OptimizeOptions::merge(merged)
                                    .index_names(vec![VECTOR_INDEX.into()]),
                            ))
                            .await,
                    )?;
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "cannot read the vector index's segments"),
        }
        self.make_durable().await
    }

    /// Merges the small fragments that commits leave behind and deletes the versions older than
    /// [`KEEP_VERSIONS_FOR`]. Every commit writes a manifest that lists every fragment, so
    /// without this a job of n files writes O(n²) bytes of manifests (a 10,000-file job had
    /// written 400 MB of them after 2,100 files) and slows down as it goes; LanceDB's own
    /// default keeps old versions for 7 days.
    pub async fn compact(&self) -> Result<(), IndexError> {
        let _writer = self.write.lock().await;
        self.compact_tables(Duration::try_seconds(self.keep_versions_for()).unwrap_or_default())
            .await?;
        self.make_durable().await
    }

    async fn compact_tables(&self, keep: Duration) -> Result<(), IndexError> {
        for table in [&self.passages, &self.documents] {
            self.upkeep(
                "compacting",
                table
                    .optimize(OptimizeAction::Compact {
                        options: CompactionOptions::default(),
                        remap_options: None,
                    })
                    .await,
            )?;
            // Durable before pruning: pruning may remove the version durable until now.
            self.make_durable().await?;
            self.upkeep(
                "removing old versions",
                table
                    .optimize(OptimizeAction::Prune {
                        older_than: Some(keep),
                        delete_unverified: Some(false),
                        error_if_tagged_old_versions: Some(false),
                    })
                    .await,
            )?;
        }
        Ok(())
    }

    /// Seconds an old version is kept ([`KEEP_VERSIONS_FOR`], [`KEEP_SHARED_VERSIONS_FOR`]).
    fn keep_versions_for(&self) -> i64 {
        if self.location.is_shared() {
            KEEP_SHARED_VERSIONS_FOR
        } else {
            KEEP_VERSIONS_FOR
        }
    }

    /// The outcome of one step of upkeep. In a shared library another machine may run the same
    /// step at the same moment, and Lance then refuses one of the two commits as conflicting:
    /// the other machine's did the work, so that is no failure here. Any other error is.
    fn upkeep<T>(&self, step: &str, result: Result<T, lancedb::Error>) -> Result<(), IndexError> {
        match result {
            Ok(_) => Ok(()),
            Err(e) if self.location.is_shared() && is_commit_conflict(&e) => {
                tracing::info!(step, error = %e, "another computer did this step of upkeep first");
                Ok(())
            }
            Err(e) => Err(self.store_err()(e)),
        }
    }

    /// An HNSW graph over the passages' 8-bit codes (IVF-HNSW-SQ), for dot product, with
    /// Lance's target of 2^20 passages per partition: one partition (one graph) below about
    /// two million passages, as Lance rounds the partition count down.
    ///
    /// Not IVF alone: on a real library (11,063 passages of 200 PDFs, MiniLM, pylance 14.0.2,
    /// the same Lance) IVF-SQ with √n partitions found 80–88% of the exact top 10 reading 32 of
    /// its 105 partitions, and 96% reading half of them, because a real query's neighbours
    /// spread over many partitions (synthetic clusters do not, and found 100%). The graph finds
    /// 99% in less time. Building it costs more: the optimize that builds it took 5.9 s, 85 s
    /// and 21 minutes for 10k, 100k and 1M synthetic 768-d passages on 2 cores (IVF-SQ: 0.9,
    /// 10 and 133 s), which is why new passages go into segments of their own
    /// ([`segments_to_merge`]).
    async fn create_vector_index(&self, rows: usize) -> Result<(), IndexError> {
        tracing::info!(rows, "building the passages' vector index");
        let builder = IvfHnswSqIndexBuilder::default()
            .distance_type(DistanceType::Dot)
            .target_partition_size(PASSAGES_PER_PARTITION);
        self.upkeep(
            "building the vector index",
            self.passages
                .create_index(&["vector"], Index::IvfHnswSq(builder))
                .execute()
                .await,
        )
    }

    /// The vector index's kind, partitions and segments (`None` without one): the benchmark
    /// reports it, and [`Library::optimize`] merges segments by it.
    pub(crate) async fn vector_index_shape(&self) -> Result<Option<VectorIndexShape>, IndexError> {
        match self.vector_index_statistics().await? {
            Some(stats) => VectorIndexShape::from_statistics(&stats).map(Some),
            None => Ok(None),
        }
    }

    /// Lance's statistics of the vector index, as JSON (`None` without one).
    async fn vector_index_statistics(&self) -> Result<Option<String>, IndexError> {
        use lance::index::DatasetIndexExt;
        if !self.vector_indexed.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let Some(dataset) = self.passages.dataset() else {
            return Ok(None);
        };
        let dataset = dataset.get().await.map_err(self.store_err())?;
        let stats = dataset
            .index_statistics(VECTOR_INDEX)
            .await
            .map_err(|e| self.store_err()(e.into()))?;
        Ok(Some(stats))
    }
}

/// What [`Library::vector_index_shape`] reads of the vector index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VectorIndexShape {
    /// Lance's name for the index type, e.g. `IVF_HNSW_SQ`.
    pub kind: String,
    /// The most partitions of any segment (`None` when no segment says).
    pub partitions: Option<usize>,
    /// The passages each segment holds, oldest first.
    pub rows_per_segment: Vec<u64>,
}

impl VectorIndexShape {
    /// Reads Lance's index statistics (JSON).
    fn from_statistics(json: &str) -> Result<Self, IndexError> {
        let unreadable =
            |what: &str| IndexError::Schema(format!("the vector index statistics lack {what}"));
        let stats: serde_json::Value = serde_json::from_str(json).map_err(|e| {
            IndexError::Schema(format!("the vector index statistics are unreadable: {e}"))
        })?;
        let kind = stats["index_type"]
            .as_str()
            .ok_or_else(|| unreadable("index_type"))?
            .to_string();
        let partitions = stats["indices"]
            .as_array()
            .and_then(|segments| {
                segments
                    .iter()
                    .filter_map(|s| s["num_partitions"].as_u64())
                    .max()
            })
            .map(|n| n as usize);
        let rows_per_segment = stats["num_indexed_rows_per_delta"]
            .as_array()
            .ok_or_else(|| unreadable("num_indexed_rows_per_delta"))?
            .iter()
            .map(|rows| rows.as_u64().ok_or_else(|| unreadable("a segment's rows")))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            kind,
            partitions,
            rows_per_segment,
        })
    }
}

/// The index type [`Library::create_vector_index`] builds, as Lance names it.
const VECTOR_INDEX_KIND: &str = "IVF_HNSW_SQ";

/// Passages per IVF partition of the HNSW index: Lance's own target for it. Each partition is
/// one graph; a search reads them all (`search::PARTITIONS_READ`).
const PASSAGES_PER_PARTITION: u32 = 1 << 20;

/// A segment is merged into the newer ones after it when it holds at most this many times
/// their passages.
const MERGE_RATIO: u64 = 4;

/// The most segments the index keeps; past it the newest are merged whatever their size.
const MAX_SEGMENTS: usize = 4;

/// How many of the newest segments (`rows_per_segment`, oldest first) to merge into one; 0 or
/// 1 leaves them as they are. Every job's new passages become a segment of their own, which
/// costs no graph rebuild but makes each search read one more graph (pylance 14.0.2 on the
/// 11,063 real passages, a loaded machine: p95 6.3 ms in one segment, 16.9 ms in six); merging
/// segments rebuilds their graph from their passages.
/// So segments are merged when the older is at most [`MERGE_RATIO`] × the newer ones (a
/// passage is rebuilt a few times as its segment grows, like the levels of an LSM tree), and
/// never more than [`MAX_SEGMENTS`] are kept. Segments whose passages were all removed are left
/// out: Lance skips them when it merges.
fn segments_to_merge(rows_per_segment: &[u64]) -> usize {
    let live: Vec<u64> = rows_per_segment
        .iter()
        .copied()
        .filter(|&r| r > 0)
        .collect();
    let Some((&newest, older)) = live.split_last() else {
        return 0;
    };
    let (mut merged, mut rows) = (1, newest);
    for &segment in older.iter().rev() {
        if segment > MERGE_RATIO * rows {
            break;
        }
        merged += 1;
        rows += segment;
    }
    let kept = live.len() - merged + 1;
    if kept > MAX_SEGMENTS {
        merged += kept - MAX_SEGMENTS;
    }
    merged
}

/// The name LanceDB gives the index on the `vector` column.
const VECTOR_INDEX: &str = "vector_idx";

/// Whether Lance refused a commit because another writer's commit came first.
fn is_commit_conflict(error: &lancedb::Error) -> bool {
    matches!(
        error,
        lancedb::Error::Lance {
            source: lance::Error::CommitConflict { .. }
                | lance::Error::RetryableCommitConflict { .. }
                | lance::Error::IncompatibleTransaction { .. }
                | lance::Error::TooMuchWriteContention { .. }
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::schema::DocumentRecord;
    use crate::library::search::{SearchDepth, SearchHit, VectorScan};

    /// Vectors of this many dimensions are written directly; nothing is embedded.
    struct Dimensions(usize);

    const TWO_DIMENSIONS: Dimensions = Dimensions(2);

    impl crate::PassageEmbedder for Dimensions {
        fn model_id(&self) -> String {
            format!("dimensions-{}", self.0)
        }
        fn dim(&self) -> usize {
            self.0
        }
        /// Used for the library's fingerprint only: a vector from the text's length.
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
            Ok(texts
                .iter()
                .map(|t| (0..self.0).map(|i| (t.len() + i) as f32).collect())
                .collect())
        }
    }

    fn manifests(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("passages"))
            .map(|e| {
                std::fs::read_dir(e.path().join("_versions"))
                    .unwrap()
                    .count()
            })
            .sum()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn compaction_merges_fragments_and_drops_old_versions_keeping_every_row() {
        let dir = tempfile::tempdir().unwrap();
        let lib = Library::open(dir.path(), &TWO_DIMENSIONS).await.unwrap();
        for i in 0..12 {
            let mut rows = crate::library::PassageRowsForBench::default();
            let doc = format!("doc{i}");
            rows.push(
                &doc,
                &format!("/notes/{doc}.txt"),
                &doc,
                &format!("passage {i}"),
            );
            lib.write_bench_rows(rows, vec![vec![i as f32, 1.0]])
                .await
                .unwrap();
        }
        let fragments = |lib: &Library| {
            let table = lib.passages.clone();
            async move { table.stats().await.unwrap().fragment_stats.num_fragments }
        };
        assert_eq!(fragments(&lib).await, 12, "a commit per write");
        assert!(manifests(dir.path()) >= 12);

        lib.compact_tables(Duration::zero()).await.unwrap();
        assert_eq!(fragments(&lib).await, 1);
        assert!(
            manifests(dir.path()) <= 2,
            "old versions are deleted: {} manifests left",
            manifests(dir.path())
        );
        assert_eq!(lib.passages.count_rows(None).await.unwrap(), 12);
    }

    /// Clustered vectors, as embeddings are: points around 20 centres in `DIM` dimensions, the
    /// same sequence on every run.
    struct Clusters {
        centres: Vec<Vec<f32>>,
        seed: u64,
    }

    const DIM: usize = 32;

    impl Clusters {
        fn new() -> Self {
            let mut clusters = Clusters {
                centres: Vec::new(),
                seed: 7,
            };
            clusters.centres = (0..20)
                .map(|_| (0..DIM).map(|_| clusters.gauss()).collect())
                .collect();
            clusters
        }

        fn gauss(&mut self) -> f32 {
            let mut unit = || {
                self.seed = self
                    .seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((self.seed >> 11) as f64 / (1u64 << 53) as f64).max(1e-12)
            };
            let (u, v) = (unit(), unit());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
        }

        fn point(&mut self, i: usize) -> Vec<f32> {
            let centre = self.centres[i % 20].clone();
            centre.iter().map(|c| c + 0.3 * self.gauss()).collect()
        }

        /// Writes and commits passages `rows` as documents of 100 passages each.
        async fn write(&mut self, lib: &Library, rows: std::ops::Range<usize>) {
            let mut passages = crate::library::PassageRowsForBench::default();
            for i in rows.clone() {
                let doc = format!("doc{}", i / 100);
                passages.push(
                    &doc,
                    &format!("/notes/{doc}.txt"),
                    &doc,
                    &format!("passage {i}"),
                );
            }
            let vectors = rows.clone().map(|i| self.point(i)).collect();
            lib.write_bench_rows(passages, vectors).await.unwrap();
            let records = (rows.start / 100..rows.end.div_ceil(100))
                .map(|d| DocumentRecord {
                    id: format!("doc{d}"),
                    path: format!("/notes/doc{d}.txt"),
                    title: format!("doc{d}"),
                    pages: 1,
                    passages: 100,
                    size: 0,
                    modified_ns: 0,
                    indexed_at_ms: 0,
                    passages_expected: None,
                    works: None,
                })
                .collect();
            lib.commit_bench_documents(records).await.unwrap();
        }

        /// How many of the exact top 10 the index finds, over 20 queries (of 200).
        async fn recall(&mut self, lib: &Library) -> usize {
            let mut found = 0;
            for i in 0..20 {
                let query = self.point(i * 7);
                let ids = |hits: Vec<SearchHit>| -> Vec<String> {
                    hits.into_iter().map(|h| h.passage_id).collect()
                };
                let truth = ids(lib
                    .vector_search(&query, 10, None, VectorScan::Exact)
                    .await
                    .unwrap());
                let approx = ids(lib
                    .vector_search(&query, 10, None, SearchDepth::DEFAULT.vector)
                    .await
                    .unwrap());
                assert_eq!(truth.len(), 10);
                found += truth.iter().filter(|id| approx.contains(id)).count();
            }
            found
        }
    }

    /// A library of `rows` clustered passages with a vector index built on them.
    async fn library_indexed_at(rows: usize) -> (tempfile::TempDir, Library, Clusters) {
        let dir = tempfile::tempdir().unwrap();
        let lib = Library::open(dir.path(), &Dimensions(DIM)).await.unwrap();
        let mut clusters = Clusters::new();
        clusters.write(&lib, 0..rows).await;
        lib.create_vector_index(rows).await.unwrap();
        lib.refresh_index_flags().await.unwrap();
        (dir, lib, clusters)
    }

    async fn shape(lib: &Library) -> VectorIndexShape {
        lib.vector_index_shape().await.unwrap().unwrap()
    }

    /// The ids of the vector index's segments: a rebuilt index has new ones.
    async fn segment_ids(lib: &Library) -> Vec<String> {
        let stats = lib.vector_index_statistics().await.unwrap().unwrap();
        let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
        stats["indices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["uuid"].as_str().unwrap().to_string())
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_vector_index_is_one_graph_and_finds_what_exact_search_finds() {
        let (_dir, lib, mut clusters) = library_indexed_at(2000).await;
        let built = shape(&lib).await;
        assert_eq!(built.kind, VECTOR_INDEX_KIND);
        assert_eq!(built.partitions, Some(1));
        assert_eq!(built.rows_per_segment, [2000]);
        let before = segment_ids(&lib).await;
        lib.optimize().await.unwrap();
        assert_eq!(
            shape(&lib).await,
            built,
            "nothing new: optimize keeps the index"
        );
        assert_eq!(segment_ids(&lib).await, before, "and does not rebuild it");
        let found = clusters.recall(&lib).await;
        assert!(found >= 190, "recall@10 {:.3}", found as f64 / 200.0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_job_adds_a_segment_and_small_segments_are_merged() {
        let (_dir, lib, mut clusters) = library_indexed_at(2000).await;
        let mut seen = Vec::new();
        for job in 0..6 {
            let start = 2000 + job * 300;
            clusters.write(&lib, start..start + 300).await;
            lib.optimize().await.unwrap();
            seen.push(shape(&lib).await.rows_per_segment);
        }
        // A job's 300 passages are a segment of their own, merged with the older ones while
        // each is at most 4 × the passages merged so far.
        let expected: [&[u64]; 6] = [
            &[2000, 300],
            &[2600],
            &[2600, 300],
            &[2600, 600],
            &[3500],
            &[3500, 300],
        ];
        assert_eq!(seen, expected, "segments after each job");
        let found = clusters.recall(&lib).await;
        assert!(found >= 190, "recall@10 {:.3}", found as f64 / 200.0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_ivf_index_of_an_older_version_is_built_again_as_a_graph() {
        let dir = tempfile::tempdir().unwrap();
        let lib = Library::open(dir.path(), &Dimensions(DIM)).await.unwrap();
        let mut clusters = Clusters::new();
        clusters.write(&lib, 0..2000).await;
        // What versions up to this one built: IVF-SQ with √n partitions.
        let old = lancedb::index::vector::IvfSqIndexBuilder::default()
            .distance_type(DistanceType::Dot)
            .target_partition_size(44);
        lib.passages
            .create_index(&["vector"], Index::IvfSq(old))
            .execute()
            .await
            .unwrap();
        lib.refresh_index_flags().await.unwrap();
        assert_eq!(shape(&lib).await.kind, "IVF_SQ");

        lib.optimize().await.unwrap();
        let rebuilt = shape(&lib).await;
        assert_eq!(rebuilt.kind, VECTOR_INDEX_KIND);
        assert_eq!(rebuilt.rows_per_segment, [2000]);
        let ids = segment_ids(&lib).await;
        lib.optimize().await.unwrap();
        assert_eq!(
            segment_ids(&lib).await,
            ids,
            "rebuilt once, not at every job"
        );
        let found = clusters.recall(&lib).await;
        assert!(found >= 190, "recall@10 {:.3}", found as f64 / 200.0);
    }

    #[test]
    fn the_newest_segments_are_merged_while_the_older_is_at_most_four_times_them() {
        assert_eq!(segments_to_merge(&[]), 0);
        assert_eq!(
            segments_to_merge(&[10_000]),
            1,
            "one segment: nothing to merge"
        );
        assert_eq!(segments_to_merge(&[10_000, 300]), 1);
        assert_eq!(segments_to_merge(&[10_000, 300, 300]), 2);
        assert_eq!(
            segments_to_merge(&[10_000, 1_500, 300]),
            1,
            "1,500 > 4 × 300"
        );
        assert_eq!(
            segments_to_merge(&[10_000, 1_500, 300, 300]),
            3,
            "1,500 ≤ 4 × 600"
        );
        assert_eq!(segments_to_merge(&[10_000, 2_400]), 1);
        assert_eq!(
            segments_to_merge(&[10_000, 2_500]),
            2,
            "a quarter of the first"
        );
        // Never more than four segments, whatever their sizes: the newest are merged.
        assert_eq!(
            segments_to_merge(&[1_000_000, 200_000, 40_000, 8_000, 300]),
            2
        );
        // A segment whose passages were all removed is not counted (Lance skips it).
        assert_eq!(segments_to_merge(&[10_000, 0, 300]), 1);
        assert_eq!(segments_to_merge(&[10_000, 300, 0, 300]), 2);
        assert_eq!(segments_to_merge(&[0]), 0);
    }

    #[test]
    fn the_shape_is_read_from_lances_statistics() {
        let json = r#"{"index_type": "IVF_HNSW_SQ", "name": "vector_idx", "num_indices": 2,
            "indices": [{"num_partitions": 1}, {"num_partitions": 1}],
            "num_indexed_rows_per_delta": [10000, 300], "num_unindexed_rows": 0}"#;
        assert_eq!(
            VectorIndexShape::from_statistics(json).unwrap(),
            VectorIndexShape {
                kind: "IVF_HNSW_SQ".into(),
                partitions: Some(1),
                rows_per_segment: vec![10_000, 300],
            }
        );
        let err = VectorIndexShape::from_statistics(r#"{"index_type": "IVF_SQ"}"#).unwrap_err();
        assert!(
            err.to_string().contains("num_indexed_rows_per_delta"),
            "{err}"
        );
    }
}
