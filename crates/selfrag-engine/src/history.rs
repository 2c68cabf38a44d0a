//! Answers of past questions, kept in memory for rerank and saved one trace per file under the
//! data dir; the searchable list of them, reopening one, and deleting one. An answer is saved
//! as generated and never overwritten by a re-rank: the weights it is viewed with are saved
//! beside it, and the view is computed from it. Files are written atomically (temp file,
//! fsync of the file, rename, fsync of the directory): a crash mid-save leaves the previous
//! version, never half a file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use selfrag_core::{Answer, CritiqueWeights};

use crate::EngineError;

/// An answer as the front ends see it: its history id, the trace under the weights it is
/// viewed with, and where a full re-run could differ from that view.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct AnswerRecord {
    pub id: String,
    pub answer: Answer,
    /// Long form, re-ranked: the first segment (0-based) that a re-run with these weights would
    /// write on a path the run did not continue. The answer shown is the best path the run
    /// explored; a re-run could differ from that segment on. Absent when a re-run gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub unexplored_segment: Option<usize>,
    /// Set when the answer could not be saved: why, naming the file and the fix. The answer
    /// is kept for this session (re-rank and export work) and is not lost to the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub not_saved: Option<String>,
}

/// The weights and constraints an answer is viewed with, where they differ from those it was
/// generated with.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerView {
    pub weights: CritiqueWeights,
    pub hard_constraints: bool,
}

/// What the history keeps of one answer: the answer exactly as generated and the view the
/// user last chose. (Files saved before views existed hold their last re-rank as `answer`.)
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedAnswer {
    pub id: String,
    pub answer: Answer,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<AnswerView>,
    /// Why the file could not be written (this session only).
    #[serde(skip)]
    pub not_saved: Option<String>,
}

impl SavedAnswer {
    /// The answer as generated, with no view.
    pub fn new(id: String, answer: Answer) -> Self {
        Self {
            id,
            answer,
            view: None,
            not_saved: None,
        }
    }

    /// Views it with `weights` and `hard_constraints`; the generated ones clear the view.
    pub fn view_with(&mut self, weights: CritiqueWeights, hard_constraints: bool) {
        let generated = &self.answer.settings;
        self.view = (weights != generated.weights
            || hard_constraints != generated.hard_constraints)
            .then_some(AnswerView {
                weights,
                hard_constraints,
            });
    }

    /// What the front ends show: the answer under its view (the generated answer itself,
    /// byte for byte, without one).
    pub fn shown(&self) -> AnswerRecord {
        let (answer, unexplored_segment) = match self.view {
            Some(view) => {
                let reranked =
                    selfrag_core::rerank(&self.answer, view.weights, view.hard_constraints);
                (reranked.answer, reranked.unexplored_segment)
            }
            None => (self.answer.clone(), None),
        };
        AnswerRecord {
            id: self.id.clone(),
            answer,
            unexplored_segment,
            not_saved: self.not_saved.clone(),
        }
    }
}

/// The session's answers, backed by `dir`.
#[derive(Debug)]
pub struct History {
    dir: PathBuf,
    answers: Mutex<HashMap<String, SavedAnswer>>,
    /// List lines by id, with the file's modification time and length they were read from, so
    /// a search does not parse every trace again.
    summaries: Mutex<HashMap<String, Summary>>,
}

/// A cached list line and the file state it was read from.
#[derive(Debug)]
struct Summary {
    modified: Option<std::time::SystemTime>,
    len: u64,
    entry: HistoryEntry,
}

impl History {
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            answers: Mutex::new(HashMap::new()),
            summaries: Mutex::new(HashMap::new()),
        }
    }

    /// Saves `record` to disk and keeps it for rerank. An answer with a score that is not a
    /// finite number is refused: serde would write it as `null`, and the file would never
    /// read back.
    pub fn put(&self, record: SavedAnswer) -> Result<(), EngineError> {
        let path = self.dir.join(format!("{}.json", record.id));
        if let Some(what) = record.answer.non_finite_score() {
            return Err(EngineError::Write {
                path,
                source: std::io::Error::other(format!(
                    "the answer holds a score that is not a finite number ({what}), which its \
                     JSON cannot keep"
                )),
            });
        }
        let json = serde_json::to_vec_pretty(&record).map_err(|e| EngineError::Write {
            path: self.dir.clone(),
            source: std::io::Error::other(e),
        })?;
        write_atomically(&path, &json)?;
        lock(&self.summaries).remove(&record.id);
        self.lock().insert(record.id.clone(), record);
        Ok(())
    }

    /// Keeps `record` for this session only (its file could not be written).
    pub fn keep_unsaved(&self, record: SavedAnswer) {
        self.lock().insert(record.id.clone(), record);
    }

    /// The answer with `id`, from memory or from its saved file.
    pub fn get(&self, id: &str) -> Result<SavedAnswer, EngineError> {
        if let Some(r) = self.lock().get(id) {
            return Ok(r.clone());
        }
        let valid = valid_id(id);
        let path = self.dir.join(format!("{id}.json"));
        let bytes = valid
            .then(|| std::fs::read(&path).ok())
            .flatten()
            .ok_or_else(|| EngineError::UnknownAnswer(id.to_string()))?;
        let mut record: SavedAnswer =
            serde_json::from_slice(&bytes).map_err(|e| EngineError::ReadTrace {
                path,
                message: e.to_string(),
            })?;
        record.answer.refresh_verdicts();
        self.lock().insert(id.to_string(), record.clone());
        Ok(record)
    }

    /// The saved answers whose question or answer text contains every word of `query`
    /// (case-insensitive; an empty query lists them all), newest first. A file that cannot be
    /// read is left out of the list and logged: one damaged trace never hides the others.
    pub fn list(&self, query: &str) -> Result<Vec<HistoryEntry>, EngineError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(EngineError::ReadTrace {
                    path: self.dir.clone(),
                    message: e.to_string(),
                });
            }
        };
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        let mut out = Vec::new();
        for file in entries.flatten() {
            let Some(id) = file
                .file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .filter(|id| valid_id(id))
                .map(str::to_string)
            else {
                continue;
            };
            let entry = match self.summary(&id, &file) {
                Ok(entry) => entry,
                Err(e) => {
                    tracing::warn!(%id, error = %e, "history entry left out of the list");
                    continue;
                }
            };
            let haystack = format!("{}\n{}", entry.question, entry.answer).to_lowercase();
            if words.iter().all(|w| haystack.contains(w.as_str())) {
                out.push(entry);
            }
        }
        out.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(b.id.cmp(&a.id)));
        Ok(out)
    }

    /// The list line of the trace in `file`, from the cache while the file is unchanged.
    fn summary(&self, id: &str, file: &std::fs::DirEntry) -> Result<HistoryEntry, EngineError> {
        let meta = file.metadata().ok();
        let modified = meta.as_ref().and_then(|m| m.modified().ok());
        let len = meta.as_ref().map_or(0, std::fs::Metadata::len);
        if let Some(cached) = lock(&self.summaries).get(id)
            && cached.modified == modified
            && cached.len == len
            && modified.is_some()
        {
            return Ok(cached.entry.clone());
        }
        let path = file.path();
        let bytes = std::fs::read(&path).map_err(|e| EngineError::ReadTrace {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let record: SavedAnswer =
            serde_json::from_slice(&bytes).map_err(|e| EngineError::ReadTrace {
                path,
                message: e.to_string(),
            })?;
        let entry = HistoryEntry::of(&record.shown());
        lock(&self.summaries).insert(
            id.to_string(),
            Summary {
                modified,
                len,
                entry: entry.clone(),
            },
        );
        Ok(entry)
    }

    /// Deletes answer `id` from disk and memory.
    pub fn delete(&self, id: &str) -> Result<(), EngineError> {
        if !valid_id(id) {
            return Err(EngineError::UnknownAnswer(id.to_string()));
        }
        let path = self.dir.join(format!("{id}.json"));
        let removed = self.lock().remove(id).is_some();
        lock(&self.summaries).remove(id);
        match std::fs::remove_file(&path) {
            Ok(()) => {
                selfrag_index::atomic::sync_dir(&self.dir).map_err(|source| {
                    EngineError::Write {
                        path: self.dir.clone(),
                        source,
                    }
                })?;
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && removed => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(EngineError::UnknownAnswer(id.to_string()))
            }
            Err(source) => Err(EngineError::Write { path, source }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SavedAnswer>> {
        lock(&self.answers)
    }
}

/// A panic while holding one of these locks cannot leave its map half-updated (single inserts
/// and removals), so a poisoned lock is still good.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An id as the engine makes them (letters, digits, `-`): never a path.
fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// One line of the history list.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct HistoryEntry {
    pub id: String,
    pub question: String,
    /// The answer text without citation markers.
    pub answer: String,
    /// When it was asked, in milliseconds since the Unix epoch (0 when unknown).
    #[cfg_attr(feature = "typescript", ts(type = "number"))]
    pub created_ms: u64,
    /// How many passages the answer cites.
    pub citations: u32,
}

impl HistoryEntry {
    fn of(record: &AnswerRecord) -> Self {
        let answer = &record.answer;
        let text: Vec<&str> = answer.segments.iter().map(|s| s.text.trim()).collect();
        let mut cited: Vec<usize> = answer.segments.iter().filter_map(|s| s.citation).collect();
        cited.sort_unstable();
        cited.dedup();
        Self {
            id: record.id.clone(),
            question: answer.question.clone(),
            answer: text.join(" "),
            // Ids start with the creation time in hex milliseconds (see `Engine::ask`).
            created_ms: record
                .id
                .split('-')
                .next()
                .and_then(|t| u64::from_str_radix(t, 16).ok())
                .unwrap_or(0),
            citations: u32::try_from(cited.len()).unwrap_or(u32::MAX),
        }
    }
}

/// Writes `bytes` to `path` atomically and durably (see [`selfrag_index::atomic`]).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), EngineError> {
    selfrag_index::atomic::write(path, bytes).map_err(|source| EngineError::Write {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer of one segment citing one passage.
    fn record(id: &str, question: &str, answer: &str) -> SavedAnswer {
        let a = selfrag_testkit::traces::TraceBuilder::new(question)
            .passage(
                "Notes",
                "/docs/notes.md",
                None,
                "Self-RAG critiques itself.",
            )
            .segment(answer, Some(1), None)
            .text(format!("{answer} [1]"))
            .build();
        SavedAnswer::new(id.into(), a)
    }

    fn history() -> (tempfile::TempDir, History) {
        let tmp = tempfile::tempdir().unwrap();
        let h = History::new(tmp.path().join("history"));
        (tmp, h)
    }

    /// Issue 44, item 6: a NaN was saved as `null`, and the answer silently dropped out of
    /// the history for good.
    #[test]
    fn an_answer_with_a_nan_score_is_refused_before_its_file_is_written() {
        let (_tmp, h) = history();
        h.put(record("1-0", "Kept", "fine")).unwrap();
        let mut broken = record("2-0", "Broken", "nan");
        broken.answer.segments[0].candidates[0].score = f32::NAN;
        let err = h.put(broken).unwrap_err();
        assert!(matches!(err, EngineError::Write { .. }), "{err:?}");
        let message = err.to_string();
        assert!(
            message.contains("2-0.json") && message.contains("score is NaN"),
            "{message}"
        );
        assert!(!h.dir.join("2-0.json").exists());
        let listed: Vec<String> = h.list("").unwrap().into_iter().map(|e| e.id).collect();
        assert_eq!(listed, ["1-0"]);
    }

    #[test]
    fn an_empty_or_missing_history_lists_nothing() {
        let (_tmp, h) = history();
        assert_eq!(h.list("").unwrap(), []);
    }

    #[test]
    fn list_is_newest_first_and_search_matches_question_and_answer_words() {
        let (_tmp, h) = history();
        h.put(record(
            "18f0000000a-0",
            "When does Self-RAG retrieve?",
            "When p exceeds δ.",
        ))
        .unwrap();
        h.put(record(
            "18f0000000b-1",
            "What is IsSup?",
            "A reflection token for support.",
        ))
        .unwrap();
        h.put(record("18f0000000c-2", "Who wrote it?", "Asai et al."))
            .unwrap();
        let all = h.list("").unwrap();
        let ids: Vec<&str> = all.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["18f0000000c-2", "18f0000000b-1", "18f0000000a-0"]);
        assert_eq!(all[2].created_ms, 0x18f_0000_000a);
        assert_eq!(all[2].answer, "When p exceeds δ.");
        assert_eq!(all[2].citations, 1);

        let ids =
            |q: &str| -> Vec<String> { h.list(q).unwrap().into_iter().map(|e| e.id).collect() };
        assert_eq!(ids("RETRIEVE"), ["18f0000000a-0"], "question, any case");
        assert_eq!(
            ids("reflection token"),
            ["18f0000000b-1"],
            "answer text, every word"
        );
        assert_eq!(
            ids("reflection asai"),
            Vec::<String>::new(),
            "all words must match"
        );
        assert_eq!(ids("  δ "), ["18f0000000a-0"]);
    }

    #[test]
    fn search_sees_a_rerank_and_survives_a_damaged_file() {
        let (_tmp, h) = history();
        h.put(record("1-0", "First question", "old text")).unwrap();
        assert_eq!(h.list("old").unwrap().len(), 1);
        h.put(record("1-0", "First question", "new text")).unwrap();
        assert_eq!(h.list("old").unwrap().len(), 0);
        assert_eq!(h.list("new").unwrap().len(), 1);
        std::fs::write(h.dir.join("2-0.json"), b"{ not json").unwrap();
        std::fs::write(h.dir.join("notes.txt"), b"not a trace").unwrap();
        assert_eq!(
            h.list("").unwrap().len(),
            1,
            "the damaged trace is left out"
        );
    }

    #[test]
    fn reopen_from_disk_and_delete() {
        let (_tmp, h) = history();
        h.put(record("1-0", "Q one", "A one")).unwrap();
        h.put(record("2-0", "Q two", "A two")).unwrap();
        let fresh = History::new(h.dir.clone());
        assert_eq!(fresh.get("1-0").unwrap().answer.question, "Q one");

        fresh.delete("1-0").unwrap();
        assert!(!h.dir.join("1-0.json").exists());
        assert!(matches!(
            fresh.get("1-0"),
            Err(EngineError::UnknownAnswer(_))
        ));
        let left: Vec<String> = fresh.list("").unwrap().into_iter().map(|e| e.id).collect();
        assert_eq!(left, ["2-0"]);
        assert!(matches!(
            fresh.delete("1-0"),
            Err(EngineError::UnknownAnswer(_))
        ));
        assert!(matches!(
            fresh.delete("../2-0"),
            Err(EngineError::UnknownAnswer(_))
        ));
        assert!(h.dir.join("2-0.json").exists(), "a path is never an id");
    }

    #[test]
    fn atomic_writes_replace_the_file_and_leave_no_temp_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("sub/answer.md");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(tmp.path().join("sub"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, ["answer.md"]);
    }

    #[test]
    fn a_failed_write_names_the_file_and_cleans_up() {
        let tmp = tempfile::tempdir().unwrap();
        // A directory in the way of the rename.
        let blocked = tmp.path().join("dir.md");
        std::fs::create_dir_all(blocked.join("x")).unwrap();
        let err = write_atomically(&blocked, b"new").unwrap_err();
        assert!(err.to_string().contains("dir.md"), "{err}");
        assert!(blocked.join("x").is_dir(), "what was there is untouched");
        let leftovers = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .count();
        assert_eq!(leftovers, 0, "the temp file is removed");
    }

    #[test]
    fn the_next_save_removes_temp_files_of_killed_writers_but_not_live_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("settings.json");
        let abandoned = tmp.path().join(".settings.json.tmp-999999-0");
        let live = tmp.path().join(".settings.json.tmp-999998-0");
        let young = tmp.path().join(".settings.json.tmp-999997-0");
        let other = tmp.path().join(".history.json.tmp-999999-0");
        for p in [&abandoned, &live, &young, &other] {
            std::fs::write(p, b"half").unwrap();
        }
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        for p in [&abandoned, &live, &other] {
            std::fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        let writer = std::fs::File::open(&live).unwrap();
        writer.lock().unwrap();
        write_atomically(&path, b"{}").unwrap();
        assert!(!abandoned.exists(), "an abandoned temp file is removed");
        assert!(live.exists(), "a temp file another writer holds is kept");
        assert!(young.exists(), "a temp file too young to judge is kept");
        assert!(
            other.exists(),
            "temp files of other targets are not this save's business"
        );
    }
}
