//! Setting what one source says of the works the library's documents hold: a reference
//! manager's or a bibliography file's records after an import, or the person's edit. The file's
//! own metadata is not set here: it is read with the file (`ingest`).

use std::path::PathBuf;

use selfrag_works::{FieldSource, Work};

use super::schema::documents_batch;
use super::{Library, one_batch, path_key};
use crate::IndexError;

impl Library {
    /// The document at `path` (a file's path as given, made absolute as the library keys it).
    pub fn document_at(&self, path: &std::path::Path) -> Option<super::DocumentRecord> {
        self.document(&path_key(path))
    }

    /// The work in the document at `path`, or where no document is there any more, in another
    /// that holds the same content (`document_id`); `None` where neither has a record.
    pub fn work_of(&self, path: &str, document_id: &str) -> Option<Work> {
        let committed = self.committed();
        let row = committed.by_path.get(path).filter(|d| d.id == document_id);
        let row = row.or_else(|| {
            committed
                .by_path
                .values()
                .find(|d| d.id == document_id && d.works.as_ref().is_some_and(|w| !w.is_empty()))
        })?;
        let work = row.work();
        (!work.is_empty()).then_some(work)
    }

    /// Replaces what `source` says of the work in each document at the given paths (an empty
    /// work removes that source's record: the person's edit undone), in one commit, and returns
    /// the documents' works as they now read. Every path must be in the library.
    pub async fn set_works(
        &self,
        source: FieldSource,
        works: Vec<(PathBuf, Work)>,
    ) -> Result<Vec<Work>, IndexError> {
        let _writer = self.write.lock().await;
        self.reload_if_shared().await?;
        let mut rows = Vec::with_capacity(works.len());
        for (path, work) in works {
            let key = path_key(&path);
            let mut row = self
                .document(&key)
                .ok_or(IndexError::UnknownDocument { id: key })?;
            row.works.get_or_insert_default().set(source, work);
            rows.push(row);
        }
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut merge = self.documents.merge_insert(&["path"]);
        merge.when_matched_update_all(None);
        merge
            .execute(one_batch(documents_batch(&rows)?))
            .await
            .map_err(self.store_err())?;
        let merged = rows.iter().map(|r| r.work()).collect();
        {
            let mut committed = self.committed_mut();
            for row in rows {
                committed.by_path.insert(row.path.clone(), row);
            }
        }
        self.make_durable().await?;
        Ok(merged)
    }
}
