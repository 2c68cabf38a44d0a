//! Answers of past questions, kept in memory for rerank and saved one trace per file under the
//! data dir. Files are written atomically (temp file, fsync, rename): a crash mid-save leaves the
//! previous version, never half a file.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use selfrag_core::Answer;

use crate::EngineError;

/// An answer as the front ends see it: its history id, the trace, and whether a full re-run
/// could differ from the re-ranked result.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct AnswerRecord {
    pub id: String,
    pub answer: Answer,
    pub rerun_could_differ: bool,
}

/// The session's answers, backed by `dir`.
#[derive(Debug)]
pub struct History {
    dir: PathBuf,
    answers: Mutex<HashMap<String, AnswerRecord>>,
}

impl History {
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            answers: Mutex::new(HashMap::new()),
        }
    }

    /// Saves `record` to disk and keeps it for rerank.
    pub fn put(&self, record: AnswerRecord) -> Result<(), EngineError> {
        let json = serde_json::to_vec_pretty(&record).map_err(|e| EngineError::Write {
            path: self.dir.clone(),
            source: std::io::Error::other(e),
        })?;
        write_atomically(&self.dir.join(format!("{}.json", record.id)), &json)?;
        self.lock().insert(record.id.clone(), record);
        Ok(())
    }

    /// The answer with `id`, from memory or from its saved file.
    pub fn get(&self, id: &str) -> Result<AnswerRecord, EngineError> {
        if let Some(r) = self.lock().get(id) {
            return Ok(r.clone());
        }
        let valid = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        let path = self.dir.join(format!("{id}.json"));
        let bytes = valid
            .then(|| std::fs::read(&path).ok())
            .flatten()
            .ok_or_else(|| EngineError::UnknownAnswer(id.to_string()))?;
        let record: AnswerRecord =
            serde_json::from_slice(&bytes).map_err(|e| EngineError::ReadTrace {
                path,
                message: e.to_string(),
            })?;
        self.lock().insert(id.to_string(), record.clone());
        Ok(record)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, AnswerRecord>> {
        // A panic while holding this lock cannot leave the map half-updated (single insert).
        self.answers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory: after a crash the
/// file holds either the old or the new content.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), EngineError> {
    let err = |source| EngineError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(err)?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(err)
}
