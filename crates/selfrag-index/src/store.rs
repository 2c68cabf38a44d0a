//! The embedded LanceDB library: a `documents` table and a `passages` table under one
//! directory, written so that a crash at any moment leaves no half-indexed document.
//!
//! A document's passages are added first and its `documents` row last: the row is the commit
//! marker. Passages whose document has no row are orphans of an interrupted run and are
//! removed when the library opens.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::types::Float32Type;
use arrow_array::{
    Array, FixedSizeListArray, Float32Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::TryStreamExt;
use lancedb::DistanceType;
use lancedb::query::{ExecutableQuery, QueryBase};
use sha2::{Digest, Sha256};

use crate::chunk::chunk_text;
use crate::{Extractor, IndexError, PassageEmbedder};

const DOCUMENTS: &str = "documents";
const PASSAGES: &str = "passages";
/// Texts embedded per call; bounds memory on large documents.
const EMBED_BATCH: usize = 32;

/// A document in the library.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentRecord {
    /// The SHA-256 of the file's bytes, hex: the same content is never indexed twice.
    pub id: String,
    pub path: String,
    pub title: String,
    pub passages: u32,
    pub embedder: String,
}

/// A passage found by a search, with its provenance and score (higher is better).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub passage_id: String,
    pub document_id: String,
    pub path: String,
    pub title: String,
    pub page: Option<u32>,
    pub section: Option<String>,
    /// Character span `[start, end)` in the page text.
    pub span: (u64, u64),
    pub text: String,
    /// Dot product of the query and passage vectors.
    pub score: f32,
}

/// What indexing one file did.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexOutcome {
    /// The file was new or changed and now has this many passages.
    Indexed {
        document_id: String,
        passages: u32,
        /// What the reader should know although the file was indexed ("page 3 has no text
        /// layer (scanned?)").
        notes: Vec<String>,
    },
    /// The same content is already in the library.
    Unchanged { document_id: String },
}

/// Counts shown in the library pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LibraryStats {
    pub documents: usize,
    pub passages: usize,
}

/// The library: a LanceDB database directory with the documents and passages tables.
pub struct Library {
    dir: PathBuf,
    documents: lancedb::Table,
    passages: lancedb::Table,
    extractor: Extractor,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library").field("dir", &self.dir).finish()
    }
}

impl Library {
    /// Opens (or creates) the library in `dir` for vectors of `embedder`, removing passages
    /// left behind by an interrupted run.
    pub async fn open(dir: &Path, embedder: &dyn PassageEmbedder) -> Result<Self, IndexError> {
        std::fs::create_dir_all(dir).map_err(|source| IndexError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let store_err = |source| IndexError::Store {
            path: dir.to_path_buf(),
            source,
        };
        let uri = dir.to_string_lossy();
        let db = lancedb::connect(&uri).execute().await.map_err(store_err)?;
        let names: HashSet<String> = db
            .table_names()
            .execute()
            .await
            .map_err(store_err)?
            .into_iter()
            .collect();
        let open_or_create = |name: &'static str, schema: SchemaRef| {
            let db = db.clone();
            let exists = names.contains(name);
            async move {
                if exists {
                    db.open_table(name).execute().await
                } else {
                    db.create_empty_table(name, schema).execute().await
                }
            }
        };
        let documents = open_or_create(DOCUMENTS, documents_schema())
            .await
            .map_err(store_err)?;
        let passages = open_or_create(PASSAGES, passages_schema(embedder.dim()))
            .await
            .map_err(store_err)?;
        let library = Self {
            dir: dir.to_path_buf(),
            documents,
            passages,
            extractor: Extractor::default(),
        };
        library.check_embedder(embedder).await?;
        library.remove_orphans().await?;
        Ok(library)
    }

    /// Parses files with `extractor` from now on (in this process until this is called; the app
    /// passes a worker process).
    pub fn with_extractor(mut self, extractor: Extractor) -> Self {
        self.extractor = extractor;
        self
    }

    /// The directory the library lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn store_err(&self) -> impl Fn(lancedb::Error) -> IndexError + '_ {
        |source| IndexError::Store {
            path: self.dir.clone(),
            source,
        }
    }

    /// Runs `query` and gathers all its result batches.
    async fn collect(&self, query: impl ExecutableQuery) -> Result<Vec<RecordBatch>, IndexError> {
        query
            .execute()
            .await
            .map_err(self.store_err())?
            .try_collect()
            .await
            .map_err(self.store_err())
    }

    async fn check_embedder(&self, embedder: &dyn PassageEmbedder) -> Result<(), IndexError> {
        let schema = self.passages.schema().await.map_err(self.store_err())?;
        let stored_dim = vector_dim(&schema)?;
        let stored = self
            .documents()
            .await?
            .into_iter()
            .next()
            .map(|d| d.embedder);
        let current = embedder.model_id();
        let mismatch =
            stored_dim != embedder.dim() || stored.as_ref().is_some_and(|s| *s != current);
        if mismatch {
            return Err(IndexError::EmbedderMismatch {
                path: self.dir.clone(),
                stored: stored.unwrap_or_else(|| "unknown".into()),
                stored_dim,
                current,
                current_dim: embedder.dim(),
            });
        }
        Ok(())
    }

    async fn remove_orphans(&self) -> Result<(), IndexError> {
        let committed: HashSet<String> =
            self.documents().await?.into_iter().map(|d| d.id).collect();
        let batches = self
            .collect(
                self.passages
                    .query()
                    .select(lancedb::query::Select::columns(&["doc_id"])),
            )
            .await?;
        let mut orphans = HashSet::new();
        for batch in &batches {
            let ids = string_column(batch, "doc_id")?;
            for i in 0..ids.len() {
                if !committed.contains(ids.value(i)) {
                    orphans.insert(ids.value(i).to_string());
                }
            }
        }
        for doc_id in orphans {
            tracing::warn!(%doc_id, "removing passages of an interrupted indexing run");
            self.passages
                .delete(format!("doc_id = '{}'", sql_quote(&doc_id)).as_str())
                .await
                .map_err(self.store_err())?;
        }
        Ok(())
    }

    /// Extracts, chunks, embeds and stores one file. Unchanged content is skipped.
    pub async fn index_file(
        &self,
        path: &Path,
        embedder: &dyn PassageEmbedder,
    ) -> Result<IndexOutcome, IndexError> {
        // Before reading a byte: a folder may hold gigabytes of files no parser reads.
        crate::extract::supported_extension(path)?;
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|source| IndexError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        let document_id = hex(&Sha256::digest(&bytes));
        if self.document(&document_id).await?.is_some() {
            return Ok(IndexOutcome::Unchanged { document_id });
        }
        let extracted = self.extractor.extract(path).await?;
        let path_text = path.to_string_lossy().into_owned();
        let mut rows = PassageRows::default();
        for page in &extracted.pages {
            for chunk in chunk_text(&page.text) {
                rows.push(
                    &document_id,
                    &path_text,
                    &extracted.title,
                    page.number,
                    chunk,
                );
            }
        }
        if rows.texts.is_empty() {
            return Err(IndexError::Empty {
                path: path.to_path_buf(),
            });
        }
        let mut vectors = Vec::with_capacity(rows.texts.len());
        for batch in rows.embedding_inputs(&extracted.title).chunks(EMBED_BATCH) {
            let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
            vectors.extend(tokio::task::block_in_place(|| embedder.embed(&refs))?);
        }
        let count = rows.texts.len() as u32;
        let batch = rows.into_batch(vectors, embedder.dim())?;
        // Passages first, the document row last: the row commits the document.
        self.passages
            .add(batch)
            .execute()
            .await
            .map_err(self.store_err())?;
        let doc = DocumentRecord {
            id: document_id.clone(),
            path: path_text,
            title: extracted.title,
            passages: count,
            embedder: embedder.model_id(),
        };
        self.documents
            .add(documents_batch(&[doc])?)
            .execute()
            .await
            .map_err(self.store_err())?;
        Ok(IndexOutcome::Indexed {
            document_id,
            passages: count,
            notes: extracted.notes,
        })
    }

    /// All documents, in no particular order.
    pub async fn documents(&self) -> Result<Vec<DocumentRecord>, IndexError> {
        let batches = self.collect(self.documents.query()).await?;
        let mut docs = Vec::new();
        for b in &batches {
            let (id, path, title, emb) = (
                string_column(b, "doc_id")?,
                string_column(b, "path")?,
                string_column(b, "title")?,
                string_column(b, "embedder")?,
            );
            let passages = column::<UInt32Array>(b, "passages")?;
            for i in 0..b.num_rows() {
                docs.push(DocumentRecord {
                    id: id.value(i).into(),
                    path: path.value(i).into(),
                    title: title.value(i).into(),
                    passages: passages.value(i),
                    embedder: emb.value(i).into(),
                });
            }
        }
        Ok(docs)
    }

    async fn document(&self, id: &str) -> Result<Option<DocumentRecord>, IndexError> {
        Ok(self.documents().await?.into_iter().find(|d| d.id == id))
    }

    /// Document and passage counts.
    pub async fn stats(&self) -> Result<LibraryStats, IndexError> {
        Ok(LibraryStats {
            documents: self
                .documents
                .count_rows(None)
                .await
                .map_err(self.store_err())?,
            passages: self
                .passages
                .count_rows(None)
                .await
                .map_err(self.store_err())?,
        })
    }

    /// The `k` passages whose vectors have the largest dot product with `query`.
    pub async fn search(&self, query: &[f32], k: usize) -> Result<Vec<SearchHit>, IndexError> {
        if k == 0
            || self
                .passages
                .count_rows(None)
                .await
                .map_err(self.store_err())?
                == 0
        {
            return Ok(Vec::new());
        }
        let nearest = self
            .passages
            .query()
            .nearest_to(query)
            .map_err(self.store_err())?
            .distance_type(DistanceType::Dot)
            .limit(k);
        let batches = self.collect(nearest).await?;
        let mut hits = Vec::new();
        for b in &batches {
            let (id, doc, path, title, text) = (
                string_column(b, "id")?,
                string_column(b, "doc_id")?,
                string_column(b, "path")?,
                string_column(b, "title")?,
                string_column(b, "text")?,
            );
            let section = string_column(b, "section")?;
            let page = column::<UInt32Array>(b, "page")?;
            let (start, end) = (
                column::<UInt64Array>(b, "span_start")?,
                column::<UInt64Array>(b, "span_end")?,
            );
            let distance = column::<Float32Array>(b, "_distance")?;
            for i in 0..b.num_rows() {
                hits.push(SearchHit {
                    passage_id: id.value(i).into(),
                    document_id: doc.value(i).into(),
                    path: path.value(i).into(),
                    title: title.value(i).into(),
                    page: page.is_valid(i).then(|| page.value(i)),
                    section: section.is_valid(i).then(|| section.value(i).to_string()),
                    span: (start.value(i), end.value(i)),
                    text: text.value(i).into(),
                    // LanceDB's dot "distance" is 1 - dot.
                    score: 1.0 - distance.value(i),
                });
            }
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(hits)
    }
}

/// Passage columns gathered before they become one Arrow batch.
#[derive(Default)]
struct PassageRows {
    ids: Vec<String>,
    doc_ids: Vec<String>,
    paths: Vec<String>,
    titles: Vec<String>,
    pages: Vec<Option<u32>>,
    sections: Vec<Option<String>>,
    starts: Vec<u64>,
    ends: Vec<u64>,
    texts: Vec<String>,
}

impl PassageRows {
    fn push(&mut self, doc: &str, path: &str, title: &str, page: Option<u32>, c: crate::Chunk) {
        self.ids.push(format!("{doc}:{}", self.ids.len()));
        self.doc_ids.push(doc.into());
        self.paths.push(path.into());
        self.titles.push(title.into());
        self.pages.push(page);
        self.sections.push(c.section);
        self.starts.push(c.span.0 as u64);
        self.ends.push(c.span.1 as u64);
        self.texts.push(c.text);
    }

    /// Contriever embeds `title + " " + text` (SELFRAG.md).
    fn embedding_inputs(&self, title: &str) -> Vec<String> {
        self.texts.iter().map(|t| format!("{title} {t}")).collect()
    }

    fn into_batch(self, vectors: Vec<Vec<f32>>, dim: usize) -> Result<RecordBatch, IndexError> {
        if vectors.len() != self.texts.len() || vectors.iter().any(|v| v.len() != dim) {
            return Err(IndexError::Embedder(format!(
                "expected {} vectors of length {dim}",
                self.texts.len()
            )));
        }
        let vectors = FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
            vectors.into_iter().map(|v| Some(v.into_iter().map(Some))),
            dim as i32,
        );
        RecordBatch::try_new(
            passages_schema(dim),
            vec![
                Arc::new(StringArray::from(self.ids)),
                Arc::new(StringArray::from(self.doc_ids)),
                Arc::new(StringArray::from(self.paths)),
                Arc::new(StringArray::from(self.titles)),
                Arc::new(UInt32Array::from(self.pages)),
                Arc::new(StringArray::from(self.sections)),
                Arc::new(UInt64Array::from(self.starts)),
                Arc::new(UInt64Array::from(self.ends)),
                Arc::new(StringArray::from(self.texts)),
                Arc::new(vectors),
            ],
        )
        .map_err(|e| IndexError::Schema(e.to_string()))
    }
}

fn passages_schema(dim: usize) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("doc_id", DataType::Utf8, false),
        Field::new("path", DataType::Utf8, false),
        Field::new("title", DataType::Utf8, false),
        Field::new("page", DataType::UInt32, true),
        Field::new("section", DataType::Utf8, true),
        Field::new("span_start", DataType::UInt64, false),
        Field::new("span_end", DataType::UInt64, false),
        Field::new("text", DataType::Utf8, false),
        Field::new(
            "vector",
            DataType::FixedSizeList(
                Arc::new(Field::new("item", DataType::Float32, true)),
                dim as i32,
            ),
            false,
        ),
    ]))
}

fn documents_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("doc_id", DataType::Utf8, false),
        Field::new("path", DataType::Utf8, false),
        Field::new("title", DataType::Utf8, false),
        Field::new("passages", DataType::UInt32, false),
        Field::new("embedder", DataType::Utf8, false),
    ]))
}

fn documents_batch(docs: &[DocumentRecord]) -> Result<RecordBatch, IndexError> {
    let strings = |f: fn(&DocumentRecord) -> &str| {
        Arc::new(StringArray::from_iter_values(docs.iter().map(f)))
    };
    RecordBatch::try_new(
        documents_schema(),
        vec![
            strings(|d| &d.id),
            strings(|d| &d.path),
            strings(|d| &d.title),
            Arc::new(UInt32Array::from_iter_values(
                docs.iter().map(|d| d.passages),
            )),
            strings(|d| &d.embedder),
        ],
    )
    .map_err(|e| IndexError::Schema(e.to_string()))
}

fn vector_dim(schema: &Schema) -> Result<usize, IndexError> {
    match schema.field_with_name("vector").map(|f| f.data_type()) {
        Ok(DataType::FixedSizeList(_, n)) => Ok(*n as usize),
        _ => Err(IndexError::Schema(
            "passages table has no vector column".into(),
        )),
    }
}

fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> Result<&'a T, IndexError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| IndexError::Schema(format!("column `{name}` is missing or mistyped")))
}

fn string_column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a StringArray, IndexError> {
    column::<StringArray>(batch, name)
}

fn sql_quote(s: &str) -> String {
    s.replace('\'', "''")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
