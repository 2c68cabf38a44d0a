//! Searching the passages: dense (dot product of Contriever vectors), full text (BM25 over an
//! inverted index of the passage text), and hybrid (both, fused by reciprocal rank fusion),
//! optionally restricted to some documents or a folder. The indexes it uses are kept by
//! `maintain.rs`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use arrow_array::{Array, Float32Array, RecordBatch, UInt32Array, UInt64Array};
use lancedb::DistanceType;
use lancedb::query::{ExecutableQuery, QueryBase, Select};

use super::schema::{self, DocumentRecord, column, sql_string, string_column};
use super::{Library, path_key};
use crate::IndexError;

/// Below this many passages an exact scan is fast enough and needs no index that must be
/// built and kept fresh. An exact scan of 768-d vectors grows with the library: hybrid p95
/// 34 ms at 10,000 passages and 121 ms at 49,000 (release build, this 2-core machine).
pub const ANN_THRESHOLD: usize = 10_000;

/// IVF partitions a search reads. The HNSW index's partitions hold about 2^20 passages or more
/// (`maintain.rs`), so this reads every partition of a library of 64M passages: on real
/// text a query's neighbours spread over the partitions, and a partition not read loses them
/// (of two partitions of 11,063 real passages, reading one found 67% of the exact top 10).
pub(crate) const PARTITIONS_READ: usize = 64;

/// How deep a search looks: how the ANN index is read, and how many passages a hybrid search
/// asks each of its halves for. The library searches at [`SearchDepth::DEFAULT`]; the search
/// benchmark (`selfrag debug bench-search --sweep`) measures others on the same library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SearchDepth {
    /// How the vectors are searched once the library has an ANN index.
    pub vector: VectorScan,
    /// A hybrid search asks each half for `k` times this many passages (at least
    /// [`MIN_FUSION_DEPTH`]): fusion needs depth in both lists.
    pub fusion_per_k: usize,
}

/// The fewest passages a hybrid search asks each of its halves for.
pub const MIN_FUSION_DEPTH: usize = 20;

/// How a vector search reads the passages' vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VectorScan {
    /// Every vector, ignoring the ANN index: the ground truth its recall is measured against.
    Exact,
    /// The HNSW index: the graph over the passages' 8-bit codes is searched keeping the `ef`
    /// best candidates (at least as many as it must return), and `refine_factor` × k of the
    /// best (if set) are re-scored with the full vectors. Below [`ANN_THRESHOLD`] passages
    /// there is no index and the scan is exact.
    Indexed {
        ef: usize,
        refine_factor: Option<u32>,
    },
}

impl SearchDepth {
    /// Chosen on real libraries (PDFs embedded by MiniLM): on 51,349 passages it found 0.990
    /// of the exact top 10 where ef 40 without refinement found 0.938, for 2 ms more at p95
    /// (`selfrag debug search-depths`); `cargo xtask bench search` measures the others.
    pub const DEFAULT: Self = Self {
        vector: VectorScan::Indexed {
            ef: 128,
            refine_factor: Some(2),
        },
        fusion_per_k: 4,
    };

    /// How many passages a hybrid search for `k` asks each of its halves for.
    pub fn fusion_depth(&self, k: usize) -> usize {
        (k * self.fusion_per_k).max(MIN_FUSION_DEPTH)
    }
}

/// The passage columns a search returns (everything but the vector).
pub(crate) const HIT_COLUMNS: &[&str] = &[
    "id",
    "doc_id",
    "path",
    "title",
    "page",
    schema::PAGE_LABEL,
    schema::OCR_CONFIDENCE,
    "section",
    "span_start",
    "span_end",
    "text",
];

/// The column LanceDB adds to a vector search's rows.
const DISTANCE_COLUMN: &str = "_distance";
/// The column LanceDB adds to a full-text search's rows (BM25).
const SCORE_COLUMN: &str = "_score";

/// [`HIT_COLUMNS`] and the score column a search adds. Naming it keeps the result the same
/// when LanceDB stops adding it unasked, and keeps its deprecation warning for a projection
/// without it off the user's terminal on every search.
fn scored_columns(score_column: &'static str) -> Vec<&'static str> {
    let mut columns = HIT_COLUMNS.to_vec();
    columns.push(score_column);
    columns
}

/// How passages are matched to a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchMode {
    /// Dot product of the query's and the passages' vectors.
    Vector,
    /// BM25 over the passage text.
    Fts,
    /// Both, fused by reciprocal rank fusion.
    #[default]
    Hybrid,
}

impl std::str::FromStr for SearchMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "vector" => Ok(Self::Vector),
            "fts" => Ok(Self::Fts),
            "hybrid" => Ok(Self::Hybrid),
            other => Err(format!(
                "unknown search mode `{other}`: use vector, fts or hybrid"
            )),
        }
    }
}

/// Which documents a search may return.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchFilter {
    /// Only these documents (content ids); empty means all.
    pub documents: Vec<String>,
    /// Only documents under this folder.
    pub folder: Option<PathBuf>,
    /// Only documents of Zotero items in this collection or one inside it (a path from the
    /// top, `Thesis` or `Thesis/Chapter 2`, as `ZoteroLink::collections` holds them).
    pub collection: Option<String>,
}

/// One search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    pub text: String,
    /// The query's vector; needed by `Vector` and `Hybrid`.
    pub vector: Option<Vec<f32>>,
    pub mode: SearchMode,
    pub k: usize,
    pub filter: SearchFilter,
    /// The `k` of reciprocal rank fusion: score = Σ 1 / (rrf_k + rank).
    pub rrf_k: f32,
}

impl SearchRequest {
    /// A hybrid search for `k` passages with the usual fusion constant (60).
    pub fn hybrid(text: &str, vector: Vec<f32>, k: usize) -> Self {
        Self {
            text: text.into(),
            vector: Some(vector),
            mode: SearchMode::Hybrid,
            k,
            filter: SearchFilter::default(),
            rrf_k: 60.0,
        }
    }
}

/// A passage found by a search, with its provenance and score (higher is better).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub passage_id: String,
    pub document_id: String,
    pub path: String,
    pub title: String,
    pub page: Option<u32>,
    /// The number printed on that page, where it differs from `page`.
    pub page_label: Option<String>,
    /// The OCR engine's mean word confidence (0–1) where the page was a scan read by OCR.
    pub ocr_confidence: Option<f32>,
    pub section: Option<String>,
    /// Character span `[start, end)` in the page text.
    pub span: (u64, u64),
    pub text: String,
    /// Dot product (vector), BM25 (fts) or fused reciprocal rank (hybrid).
    pub score: f32,
}

/// Whether the work's Zotero item is in `collection` or in a collection inside it.
fn in_collection(work: &selfrag_works::Work, collection: &str) -> bool {
    let collection = collection.trim_end_matches('/');
    work.zotero.as_ref().is_some_and(|z| {
        z.collections.iter().any(|c| {
            c == collection
                || c.strip_prefix(collection)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    })
}

/// The passages a [`SearchFilter`] lets a search see.
enum Scope {
    /// No filter: the whole library.
    Everything,
    /// The committed documents the filter names or holds in its folder, as a SQL predicate.
    Documents(String),
    /// No committed document matches: the search finds nothing without asking LanceDB.
    Nothing,
}

impl Library {
    /// The best `request.k` passages for `request`, best first.
    pub async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, IndexError> {
        self.search_at(request, SearchDepth::DEFAULT).await
    }

    /// [`Library::search`] looking as deep as `depth` says.
    pub(crate) async fn search_at(
        &self,
        request: &SearchRequest,
        depth: SearchDepth,
    ) -> Result<Vec<SearchHit>, IndexError> {
        if request.k == 0 {
            return Ok(Vec::new());
        }
        // Another machine's documents of a shared library count once they are seen.
        self.catch_up().await?;
        let filter = match self.scope(&request.filter) {
            Scope::Everything => None,
            Scope::Documents(sql) => Some(sql),
            Scope::Nothing => return Ok(Vec::new()),
        };
        let vector = || {
            request.vector.as_deref().ok_or_else(|| {
                IndexError::Schema("a vector or hybrid search needs the query's vector".into())
            })
        };
        // Fetch more than asked: uncommitted passages are filtered out below, and fusion needs
        // depth in both lists.
        let scan = depth.vector;
        let limit = request.k + self.uncommitted.load(Ordering::SeqCst);
        let fused_limit = limit.max(depth.fusion_depth(request.k));
        match request.mode {
            SearchMode::Vector => {
                let hits = self
                    .vector_search(vector()?, limit, filter.as_deref(), scan)
                    .await?;
                Ok(truncate(hits, request.k))
            }
            SearchMode::Fts => {
                let hits = self
                    .text_hits(&request.text, limit, filter.as_deref())
                    .await?;
                Ok(truncate(hits, request.k))
            }
            SearchMode::Hybrid => {
                // The two halves at once: the slower one sets the latency, not their sum.
                let (dense, sparse) = futures::try_join!(
                    self.vector_search(vector()?, fused_limit, filter.as_deref(), scan),
                    self.text_hits(&request.text, fused_limit, filter.as_deref()),
                )?;
                Ok(truncate(
                    reciprocal_rank_fusion(&[dense, sparse], request.rrf_k),
                    request.k,
                ))
            }
        }
    }

    /// Which passages `filter` lets a search see.
    fn scope(&self, filter: &SearchFilter) -> Scope {
        if filter.documents.is_empty() && filter.folder.is_none() && filter.collection.is_none() {
            return Scope::Everything;
        }
        let committed = self.committed();
        let folder = filter.folder.as_deref().map(|f| {
            let key = path_key(f);
            format!(
                "{}{}",
                key.trim_end_matches(std::path::MAIN_SEPARATOR),
                std::path::MAIN_SEPARATOR
            )
        });
        let mut ids: Vec<&str> = committed
            .by_path
            .values()
            .filter(|d| filter.documents.is_empty() || filter.documents.contains(&d.id))
            .filter(|d| folder.as_ref().is_none_or(|f| d.path.starts_with(f)))
            .filter(|d| {
                filter
                    .collection
                    .as_deref()
                    .is_none_or(|c| in_collection(&d.work(), c))
            })
            .map(|d| d.id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Scope::Nothing;
        }
        let list: Vec<String> = ids.iter().map(|id| sql_string(id)).collect();
        Scope::Documents(format!("doc_id IN ({})", list.join(",")))
    }

    /// The `limit` passages whose vectors are nearest `vector`, read as `scan` says.
    pub(crate) async fn vector_search(
        &self,
        vector: &[f32],
        limit: usize,
        filter: Option<&str>,
        scan: VectorScan,
    ) -> Result<Vec<SearchHit>, IndexError> {
        let mut query = self
            .passages
            .query()
            .nearest_to(vector)
            .map_err(self.store_err())?
            .distance_type(DistanceType::Dot)
            .select(Select::columns(&scored_columns(DISTANCE_COLUMN)))
            .limit(limit);
        match scan {
            VectorScan::Exact => query = query.bypass_vector_index(),
            VectorScan::Indexed { ef, refine_factor }
                if self.vector_indexed.load(Ordering::SeqCst) =>
            {
                // Lance refuses an `ef` below the candidates it must return.
                let candidates = limit.saturating_mul(refine_factor.unwrap_or(1).max(1) as usize);
                query = query
                    .nprobes(PARTITIONS_READ)
                    .map_err(self.store_err())?
                    .ef(ef.max(candidates));
                if let Some(factor) = refine_factor {
                    query = query.refine_factor(factor);
                }
            }
            VectorScan::Indexed { .. } => {}
        }
        if let Some(f) = filter {
            query = query.only_if(f);
        }
        // LanceDB's dot "distance" is 1 - dot.
        self.scored_hits(query, DISTANCE_COLUMN, |d| 1.0 - d).await
    }

    async fn text_hits(
        &self,
        text: &str,
        limit: usize,
        filter: Option<&str>,
    ) -> Result<Vec<SearchHit>, IndexError> {
        if text.trim().is_empty() || !self.text_index_for_search().await? {
            return Ok(Vec::new());
        }
        let mut query = self
            .passages
            .query()
            .full_text_search(lancedb::index::scalar::FullTextSearchQuery::new(
                text.to_string(),
            ))
            .select(Select::columns(&scored_columns(SCORE_COLUMN)))
            .limit(limit);
        if let Some(f) = filter {
            query = query.only_if(f);
        }
        self.scored_hits(query, SCORE_COLUMN, |s| s).await
    }

    /// Runs `query` and turns its rows into hits of committed documents, scored by `score` of
    /// the `column` LanceDB added, best first.
    async fn scored_hits(
        &self,
        query: impl ExecutableQuery,
        column_name: &str,
        score: impl Fn(f32) -> f32,
    ) -> Result<Vec<SearchHit>, IndexError> {
        let batches = self.collect(query).await?;
        let committed = self.committed();
        let by_id = committed.by_id();
        let mut hits = Vec::new();
        for b in &batches {
            let values = column::<Float32Array>(b, column_name)?;
            let scores: Vec<f32> = (0..b.num_rows()).map(|i| score(values.value(i))).collect();
            hits.extend(hits_from(b, &by_id, Some(&scores))?);
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(hits)
    }
}
/// Hits of a batch whose document is committed, with `scores` (or 0) as their score and the
/// document's current path and title.
pub(crate) fn hits_from(
    b: &RecordBatch,
    by_id: &HashMap<&str, &DocumentRecord>,
    scores: Option<&[f32]>,
) -> Result<Vec<SearchHit>, IndexError> {
    let (id, doc, text) = (
        string_column(b, "id")?,
        string_column(b, "doc_id")?,
        string_column(b, "text")?,
    );
    let section = string_column(b, "section")?;
    let page = column::<UInt32Array>(b, "page")?;
    let label = schema::page_label_column(b);
    let ocr = schema::ocr_confidence_column(b);
    let (start, end) = (
        column::<UInt64Array>(b, "span_start")?,
        column::<UInt64Array>(b, "span_end")?,
    );
    let mut hits = Vec::new();
    for i in 0..b.num_rows() {
        let Some(document) = by_id.get(doc.value(i)).filter(|d| d.counts(id.value(i))) else {
            // Not committed: an interrupted run's, a replaced content's, or a slice its
            // document's row does not count yet.
            continue;
        };
        hits.push(SearchHit {
            passage_id: id.value(i).into(),
            document_id: doc.value(i).into(),
            path: document.path.clone(),
            title: document.title.clone(),
            page: page.is_valid(i).then(|| page.value(i)),
            page_label: label
                .filter(|l| l.is_valid(i))
                .map(|l| l.value(i).to_string()),
            ocr_confidence: ocr.filter(|o| o.is_valid(i)).map(|o| o.value(i)),
            section: section.is_valid(i).then(|| section.value(i).to_string()),
            span: (start.value(i), end.value(i)),
            text: text.value(i).into(),
            score: scores.map(|s| s[i]).unwrap_or(0.0),
        });
    }
    Ok(hits)
}

/// Reciprocal rank fusion: each list contributes `1 / (k + rank)` (rank from 1) to a passage's
/// score. Ties keep the order of first appearance.
pub fn reciprocal_rank_fusion(lists: &[Vec<SearchHit>], k: f32) -> Vec<SearchHit> {
    let mut fused: Vec<SearchHit> = Vec::new();
    let mut position: HashMap<String, usize> = HashMap::new();
    for list in lists {
        for (rank, hit) in list.iter().enumerate() {
            let contribution = 1.0 / (k + rank as f32 + 1.0);
            match position.get(&hit.passage_id) {
                Some(&i) => fused[i].score += contribution,
                None => {
                    position.insert(hit.passage_id.clone(), fused.len());
                    fused.push(SearchHit {
                        score: contribution,
                        ..hit.clone()
                    });
                }
            }
        }
    }
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused
}

fn truncate(mut hits: Vec<SearchHit>, k: usize) -> Vec<SearchHit> {
    hits.truncate(k);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: &str) -> SearchHit {
        SearchHit {
            passage_id: id.into(),
            document_id: "d".into(),
            path: "p".into(),
            title: "t".into(),
            page: None,
            page_label: None,
            ocr_confidence: None,
            section: None,
            span: (0, 1),
            text: id.into(),
            score: 0.0,
        }
    }

    #[test]
    fn fusion_rewards_a_passage_both_lists_rank_well() {
        let dense = vec![hit("a"), hit("b"), hit("c")];
        let sparse = vec![hit("c"), hit("b"), hit("d")];
        let fused = reciprocal_rank_fusion(&[dense, sparse], 60.0);
        let order: Vec<&str> = fused.iter().map(|h| h.passage_id.as_str()).collect();
        // c: 1/63 + 1/61 = 0.032266; b: 1/62 + 1/62 = 0.032258; a: 1/61; d: 1/63.
        assert_eq!(order, ["c", "b", "a", "d"]);
        assert!((fused[0].score - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-6);
    }

    #[test]
    fn fusion_constant_controls_how_much_the_top_rank_dominates() {
        let dense = vec![hit("a"), hit("b")];
        let sparse = vec![hit("b"), hit("x1"), hit("x2"), hit("a")];
        // Small k: a's first place counts for much, b's two high places win.
        let small = reciprocal_rank_fusion(&[dense.clone(), sparse.clone()], 1.0);
        assert_eq!(small[0].passage_id, "b");
        let large = reciprocal_rank_fusion(&[dense, sparse], 1000.0);
        assert_eq!(large[0].passage_id, "b");
        assert!(large[0].score - large[1].score < small[0].score - small[1].score);
    }
}
