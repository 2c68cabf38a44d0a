//! The Arrow schemas of the `documents` and `passages` tables and the conversions between
//! their rows and Rust values.

use std::sync::Arc;

use arrow_array::types::Float32Type;
use arrow_array::{
    Array, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, StringArray, UInt32Array,
    UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use selfrag_works::{Work, WorkRecords};

use crate::IndexError;

/// A file in the library. One row per path; several paths may share one content (`id`), whose
/// passages are then stored once.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentRecord {
    /// The SHA-256 of the file's bytes, hex: the same content is never parsed or embedded twice.
    pub id: String,
    pub path: String,
    pub title: String,
    /// Pages (PDF) or 1 for formats without pages.
    pub pages: u32,
    pub passages: u32,
    /// File size and modification time (ns since the Unix epoch) when indexed: an unchanged
    /// pair means the file is not even read again.
    pub size: u64,
    pub modified_ns: i64,
    /// When it was indexed, ms since the Unix epoch.
    pub indexed_at_ms: i64,
    /// `Some(n)` while a long document is written slice by slice, searchable as it goes (see
    /// `ingest`): `passages` of its `n` passages are stored so far. `None` once all are.
    pub passages_expected: Option<u32>,
    /// The work the file holds, as each source told it: the file's own metadata (read again
    /// with the file), a reference manager or bibliography file, the person's edit. `None` for
    /// a document indexed before works existed: the next index run reads its file again.
    pub works: Option<WorkRecords>,
}

impl DocumentRecord {
    /// The work: each field from the best source that gave it.
    pub fn work(&self) -> Work {
        self.works
            .as_ref()
            .map(WorkRecords::merged)
            .unwrap_or_default()
    }

    /// Whether every passage of the document is stored.
    pub fn is_complete(&self) -> bool {
        self.passages_expected.is_none()
    }

    /// Whether the file, now `size` bytes modified at `modified_ns`, needs no reading: the
    /// document is complete, the file's size and (known) time are those indexed, and its work
    /// was read (a document indexed before works existed is read again for it).
    pub(crate) fn is_unchanged(&self, size: u64, modified_ns: i64) -> bool {
        self.is_complete()
            && self.size == size
            && self.modified_ns == modified_ns
            && modified_ns != 0
            && self.works.is_some()
    }
}

/// The column of `documents` that holds [`DocumentRecord::passages_expected`]: added after the
/// others, so a table made before it gets it as nulls (complete documents) when it opens.
pub(crate) const PASSAGES_EXPECTED: &str = "passages_expected";

/// The column of `documents` that holds [`DocumentRecord::works`] as JSON: added after the
/// others, so a table made before it gets it as nulls (not read for works yet) when it opens.
pub(crate) const WORKS: &str = "works";

/// The printed page label column of `passages` (see `ExtractedPage::label`).
pub(crate) const PAGE_LABEL: &str = "page_label";

/// The OCR confidence column of `passages`: set on the passages of a page read by OCR (see
/// `ExtractedPage::ocr_confidence`).
pub(crate) const OCR_CONFIDENCE: &str = "ocr_confidence";

/// The OCR confidence column of a passages batch: `None` in a table made before it existed.
pub(crate) fn ocr_confidence_column(batch: &RecordBatch) -> Option<&Float32Array> {
    batch
        .column_by_name(OCR_CONFIDENCE)
        .and_then(|c| c.as_any().downcast_ref::<Float32Array>())
}

/// The label column of a passages batch: `None` in a table made before it existed.
pub(crate) fn page_label_column(batch: &RecordBatch) -> Option<&StringArray> {
    batch
        .column_by_name(PAGE_LABEL)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
}

pub(crate) fn passages_schema(dim: usize) -> SchemaRef {
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
        // Added after the vector: libraries made before it get it as a column of nulls when
        // they open (`Library::open`), and a new column goes at the end.
        Field::new(PAGE_LABEL, DataType::Utf8, true),
        Field::new(OCR_CONFIDENCE, DataType::Float32, true),
    ]))
}

/// `schema` with `column` marked as the table's primary key for Lance (not enforced on write):
/// concurrent merges on that key from two writers are then seen to insert the same keys, and
/// one is retried against the other instead of both inserting (a shared library's tables).
pub(crate) fn with_primary_key(schema: &SchemaRef, column: &str) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|field| {
            let field = field.as_ref().clone();
            if field.name() == column {
                let mut metadata = field.metadata().clone();
                metadata.insert(
                    "lance-schema:unenforced-primary-key".to_owned(),
                    "true".to_owned(),
                );
                field.with_metadata(metadata)
            } else {
                field
            }
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

pub(crate) fn documents_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("doc_id", DataType::Utf8, false),
        Field::new("title", DataType::Utf8, false),
        Field::new("pages", DataType::UInt32, false),
        Field::new("passages", DataType::UInt32, false),
        Field::new("size", DataType::UInt64, false),
        Field::new("modified_ns", DataType::Int64, false),
        Field::new("indexed_at_ms", DataType::Int64, false),
        Field::new(PASSAGES_EXPECTED, DataType::UInt32, true),
        Field::new(WORKS, DataType::Utf8, true),
    ]))
}

pub(crate) fn documents_batch(docs: &[DocumentRecord]) -> Result<RecordBatch, IndexError> {
    let strings = |f: fn(&DocumentRecord) -> &str| {
        Arc::new(StringArray::from_iter_values(docs.iter().map(f)))
    };
    RecordBatch::try_new(
        documents_schema(),
        vec![
            strings(|d| &d.path),
            strings(|d| &d.id),
            strings(|d| &d.title),
            Arc::new(UInt32Array::from_iter_values(docs.iter().map(|d| d.pages))),
            Arc::new(UInt32Array::from_iter_values(
                docs.iter().map(|d| d.passages),
            )),
            Arc::new(UInt64Array::from_iter_values(docs.iter().map(|d| d.size))),
            Arc::new(Int64Array::from_iter_values(
                docs.iter().map(|d| d.modified_ns),
            )),
            Arc::new(Int64Array::from_iter_values(
                docs.iter().map(|d| d.indexed_at_ms),
            )),
            Arc::new(UInt32Array::from_iter(
                docs.iter().map(|d| d.passages_expected),
            )),
            Arc::new(StringArray::from_iter(docs.iter().map(|d| {
                // Plain data with string keys: serializing cannot fail.
                d.works
                    .as_ref()
                    .map(|w| serde_json::to_string(w).unwrap_or_default())
            }))),
        ],
    )
    .map_err(|e| IndexError::Schema(e.to_string()))
}

/// Reads document rows of schema 2.
pub(crate) fn documents_from(batch: &RecordBatch) -> Result<Vec<DocumentRecord>, IndexError> {
    let (path, id, title) = (
        string_column(batch, "path")?,
        string_column(batch, "doc_id")?,
        string_column(batch, "title")?,
    );
    let (pages, passages) = (
        column::<UInt32Array>(batch, "pages")?,
        column::<UInt32Array>(batch, "passages")?,
    );
    let size = column::<UInt64Array>(batch, "size")?;
    let (modified, indexed) = (
        column::<Int64Array>(batch, "modified_ns")?,
        column::<Int64Array>(batch, "indexed_at_ms")?,
    );
    // Absent in a table made before it (the library adds it when it opens).
    let expected = batch
        .column_by_name(PASSAGES_EXPECTED)
        .and_then(|c| c.as_any().downcast_ref::<UInt32Array>());
    let works = batch
        .column_by_name(WORKS)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>());
    Ok((0..batch.num_rows())
        .map(|i| DocumentRecord {
            id: id.value(i).into(),
            path: path.value(i).into(),
            title: title.value(i).into(),
            pages: pages.value(i),
            passages: passages.value(i),
            size: size.value(i),
            modified_ns: modified.value(i),
            indexed_at_ms: indexed.value(i),
            passages_expected: expected.filter(|e| e.is_valid(i)).map(|e| e.value(i)),
            works: works
                .filter(|w| w.is_valid(i))
                .and_then(|w| read_works(path.value(i), w.value(i))),
        })
        .collect())
}

/// A document's stored work records. A record this version cannot read (written by a newer
/// one, or damaged) reads as not read yet (`None`), with a warning: the document stays
/// searchable and what its file says is read again at the next index run.
fn read_works(path: &str, json: &str) -> Option<WorkRecords> {
    serde_json::from_str(json)
        .map_err(|error| {
            tracing::warn!(%path, %error, "the document's work record could not be read; it is read again with the file");
        })
        .ok()
}

/// The id of passage `n` (from 0, in reading order) of content `doc`.
pub(crate) fn passage_id(doc: &str, n: usize) -> String {
    format!("{doc}:{n}")
}

/// The `n` of a [`passage_id`].
pub(crate) fn passage_number(id: &str) -> Option<u32> {
    id.rsplit(':').next().and_then(|n| n.parse().ok())
}

impl DocumentRecord {
    /// Whether the row counts passage `id` of its content: every passage of a complete
    /// document, the first `passages` of one written in slices (a later slice is stored just
    /// before the row that counts it, or left by a run cut off between the two).
    pub(crate) fn counts(&self, id: &str) -> bool {
        self.is_complete() || passage_number(id).is_some_and(|n| n < self.passages)
    }
}

/// What the embedder reads for a passage of a document titled `title`: Contriever embeds
/// `title + " " + text` (SELFRAG.md).
pub fn embedding_input(title: &str, text: &str) -> String {
    format!("{title} {text}")
}

/// Passage columns gathered before they become one Arrow batch.
#[derive(Default, Clone)]
pub(crate) struct PassageRows {
    pub ids: Vec<String>,
    pub doc_ids: Vec<String>,
    pub paths: Vec<String>,
    pub titles: Vec<String>,
    pub pages: Vec<Option<u32>>,
    pub page_labels: Vec<Option<String>>,
    pub ocr_confidences: Vec<Option<f32>>,
    pub sections: Vec<Option<String>>,
    pub starts: Vec<u64>,
    pub ends: Vec<u64>,
    pub texts: Vec<String>,
}

impl PassageRows {
    /// One passage of `doc` on `page` (1-based, printed as `label` where that differs; read by
    /// OCR with confidence `ocr` where it had no text layer).
    pub fn push(
        &mut self,
        doc: &str,
        path: &str,
        title: &str,
        (page, label, ocr): (Option<u32>, Option<&str>, Option<f32>),
        c: crate::Chunk,
    ) {
        self.ids.push(passage_id(doc, self.ids.len()));
        self.doc_ids.push(doc.into());
        self.paths.push(path.into());
        self.titles.push(title.into());
        self.pages.push(page);
        self.page_labels.push(label.map(str::to_owned));
        self.ocr_confidences.push(ocr);
        self.sections.push(c.section);
        self.starts.push(c.span.0 as u64);
        self.ends.push(c.span.1 as u64);
        self.texts.push(c.text);
    }

    /// Reads back the rows of a passages batch (all columns but the vector).
    pub fn from_batch(batch: &RecordBatch) -> Result<Self, IndexError> {
        let strings = |name| -> Result<Vec<String>, IndexError> {
            let c = string_column(batch, name)?;
            Ok((0..c.len()).map(|i| c.value(i).to_string()).collect())
        };
        let page = column::<UInt32Array>(batch, "page")?;
        let label = page_label_column(batch);
        let ocr = ocr_confidence_column(batch);
        let section = string_column(batch, "section")?;
        let (start, end) = (
            column::<UInt64Array>(batch, "span_start")?,
            column::<UInt64Array>(batch, "span_end")?,
        );
        let n = batch.num_rows();
        Ok(Self {
            ids: strings("id")?,
            doc_ids: strings("doc_id")?,
            paths: strings("path")?,
            titles: strings("title")?,
            pages: (0..n)
                .map(|i| page.is_valid(i).then(|| page.value(i)))
                .collect(),
            page_labels: (0..n)
                .map(|i| {
                    label
                        .filter(|l| l.is_valid(i))
                        .map(|l| l.value(i).to_string())
                })
                .collect(),
            ocr_confidences: (0..n)
                .map(|i| ocr.filter(|o| o.is_valid(i)).map(|o| o.value(i)))
                .collect(),
            sections: (0..n)
                .map(|i| section.is_valid(i).then(|| section.value(i).to_string()))
                .collect(),
            starts: (0..n).map(|i| start.value(i)).collect(),
            ends: (0..n).map(|i| end.value(i)).collect(),
            texts: strings("text")?,
        })
    }

    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// Moves the first `n` rows (all, if fewer) out into their own rows.
    pub fn split_front(&mut self, n: usize) -> Self {
        fn front<T>(column: &mut Vec<T>, n: usize) -> Vec<T> {
            let rest = column.split_off(n.min(column.len()));
            std::mem::replace(column, rest)
        }
        Self {
            ids: front(&mut self.ids, n),
            doc_ids: front(&mut self.doc_ids, n),
            paths: front(&mut self.paths, n),
            titles: front(&mut self.titles, n),
            pages: front(&mut self.pages, n),
            page_labels: front(&mut self.page_labels, n),
            ocr_confidences: front(&mut self.ocr_confidences, n),
            sections: front(&mut self.sections, n),
            starts: front(&mut self.starts, n),
            ends: front(&mut self.ends, n),
            texts: front(&mut self.texts, n),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// Moves `other`'s rows to the end of these.
    pub fn append(&mut self, mut other: Self) {
        self.ids.append(&mut other.ids);
        self.doc_ids.append(&mut other.doc_ids);
        self.paths.append(&mut other.paths);
        self.titles.append(&mut other.titles);
        self.pages.append(&mut other.pages);
        self.page_labels.append(&mut other.page_labels);
        self.ocr_confidences.append(&mut other.ocr_confidences);
        self.sections.append(&mut other.sections);
        self.starts.append(&mut other.starts);
        self.ends.append(&mut other.ends);
        self.texts.append(&mut other.texts);
    }

    /// What the embedder reads for each passage: [`embedding_input`].
    pub fn embedding_inputs(&self) -> Vec<String> {
        self.texts
            .iter()
            .zip(&self.titles)
            .map(|(text, title)| embedding_input(title, text))
            .collect()
    }

    pub fn into_batch(self, vectors: Vec<Vec<f32>>, dim: usize) -> Result<RecordBatch, IndexError> {
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
                Arc::new(StringArray::from(self.page_labels)),
                Arc::new(Float32Array::from(self.ocr_confidences)),
            ],
        )
        .map_err(|e| IndexError::Schema(e.to_string()))
    }
}

pub(crate) fn vector_dim(schema: &Schema) -> Result<usize, IndexError> {
    match schema.field_with_name("vector").map(|f| f.data_type()) {
        Ok(DataType::FixedSizeList(_, n)) => Ok(*n as usize),
        _ => Err(IndexError::Schema(
            "passages table has no vector column".into(),
        )),
    }
}

pub(crate) fn column<'a, T: 'static>(
    batch: &'a RecordBatch,
    name: &str,
) -> Result<&'a T, IndexError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| IndexError::Schema(format!("column `{name}` is missing or mistyped")))
}

pub(crate) fn string_column<'a>(
    batch: &'a RecordBatch,
    name: &str,
) -> Result<&'a StringArray, IndexError> {
    column::<StringArray>(batch, name)
}

/// Quotes a value for a LanceDB SQL filter.
pub(crate) fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}
