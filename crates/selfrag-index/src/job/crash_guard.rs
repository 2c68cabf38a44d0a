//! The guard against a crash loop. The file the library is reading (parsing, chunking,
//! embedding, writing) is written down in `indexing.json` for as long as it is, with the run of
//! the app that reads it; a file another run left there is one that run ended on (a crash, the
//! system killing it for memory, a kill or a quit mid-file). The job record counts such ends
//! per file as it was then ([`FileVersion`]). After one, the file is read again as usual: a
//! quit or a kill mid-file must not cost it, and the interrupted job must end as if it never
//! was. After [`ENDS_BEFORE_SKIPPING`] in a row it is refused by name
//! ([`IndexError::CrashedBefore`]) until it changes or the user adds that file itself again.
//! Without this an interrupted job resumes at every start and a watched folder catches up, so
//! a file that kills the app would kill it at every launch.
//!
//! Small files committed together ([`Library::begin_committing`]) are all in progress while
//! they are embedded and written. An end then cannot be laid on any one of them: it counts on
//! none, but each is read and committed on its own from then on, so that the ends that follow
//! fall on the file that causes them alone. Counting it on all of them would skip a file for a
//! quit during a batch and a second one while that file was read alone: two ends, only one of
//! them its own. A file that kills the app while it is embedded with others is therefore read
//! once more than one that kills it alone before it is skipped. A batch of one file is that
//! file read alone: an end then counts on it.
//!
//! `indexing.json` is written without a sync: it must outlive the process, not a power cut, and
//! a file costs one small write and one removal.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::PendingJob;
use crate::library::meta::read_state;
use crate::{IndexError, Library};

/// Runs of the app that may end while reading the same file before it is skipped: one end
/// can be a quit or a kill, two in a row are the file.
pub(crate) const ENDS_BEFORE_SKIPPING: u32 = 2;

/// A file at a size and modification time: once either differs it is another file, to be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileVersion {
    /// The path as the library keys it.
    pub path: String,
    pub size: u64,
    pub modified_ns: i64,
}

/// A file runs of the app ended while reading, in the job record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EndedOn {
    #[serde(flatten)]
    file: FileVersion,
    /// Runs that ended while reading this version of it alone, in a row; 0 where the only end
    /// came while it was committed with other files (it is then read alone).
    ends: u32,
}

/// `indexing.json`.
#[derive(Debug, Serialize, Deserialize)]
struct InProgress {
    #[serde(flatten)]
    file: FileVersion,
    /// [`this_run`] of the process reading it.
    run: String,
    /// The other files being committed with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    with: Vec<FileVersion>,
}

/// Tells this process apart from every other run of the app, a dead one with the same process
/// id included.
fn this_run() -> &'static str {
    static RUN: OnceLock<String> = OnceLock::new();
    RUN.get_or_init(|| {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{}-{started}", std::process::id())
    })
}

/// While it lives, its file is the one being read. Dropped (whatever the outcome: done,
/// failed, stopped, a panic this process survived), the file is no longer in progress, and one
/// that a run ended on before is cleared of it: this run read it and lived.
#[must_use]
pub(crate) struct Reading<'a> {
    library: &'a Library,
    /// The file's path key where the job record counts ends on it.
    counted: Option<String>,
}

impl Reading<'_> {
    /// Whether a run of the app ended while reading this file before, alone or with others:
    /// it is then committed on its own, not with other files.
    pub(crate) fn after_an_end(&self) -> bool {
        self.counted.is_some()
    }
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        let marker = self.library.in_progress_file();
        if let Err(e) = std::fs::remove_file(&marker)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %marker.display(), error = %e, "cannot remove; the next start will count an end on the file it names");
        }
        if let Some(path) = self.counted.take()
            && let Err(e) = self
                .library
                .update_job_record(|record| record.ended_on.retain(|f| f.file.path != path))
        {
            tracing::warn!(%path, error = %e, "cannot clear the ends counted on a file read whole");
        }
    }
}

impl Library {
    fn in_progress_file(&self) -> PathBuf {
        self.state_dir().join("indexing.json")
    }

    /// The files another run of the app was reading when it ended, if it left any.
    pub(super) fn left_by_another_run(&self) -> Vec<FileVersion> {
        match read_state::<InProgress>(&self.in_progress_file()) {
            Some(left) if left.run != this_run() => {
                std::iter::once(left.file).chain(left.with).collect()
            }
            _ => Vec::new(),
        }
    }

    /// After the job record that counts `left` (read by [`Library::left_by_another_run`]) was
    /// written: removes the marker it came from.
    pub(super) fn forget_marker(&self, left: &[FileVersion]) {
        // Read again: a file this process began since (a watched change) is not forgotten.
        if !left.is_empty() && !self.left_by_another_run().is_empty() {
            let _ = std::fs::remove_file(self.in_progress_file());
        }
    }

    /// Before small files are embedded and written together: all of them are marked in
    /// progress until the guard returned is dropped (their reading was checked by
    /// [`Library::begin_reading`] and none has an end counted). Called with the library's
    /// writer lock held.
    pub(crate) fn begin_committing(
        &self,
        files: &[FileVersion],
    ) -> Result<Reading<'_>, IndexError> {
        let Some((first, with)) = files.split_first() else {
            return Ok(Reading {
                library: self,
                counted: None,
            });
        };
        self.mark_in_progress(first.clone(), with.to_vec())?;
        Ok(Reading {
            library: self,
            counted: None,
        })
    }

    fn mark_in_progress(
        &self,
        file: FileVersion,
        with: Vec<FileVersion>,
    ) -> Result<(), IndexError> {
        let marker = self.in_progress_file();
        let text = serde_json::to_string(&InProgress {
            file,
            run: this_run().to_owned(),
            with,
        })
        .map_err(|e| IndexError::Schema(format!("cannot encode indexing.json: {e}")))?;
        std::fs::write(&marker, text).map_err(|source| IndexError::Write {
            path: marker,
            source,
        })
    }

    /// Before `path`, as `file`, is read: [`IndexError::CrashedBefore`] when runs of the app
    /// ended [`ENDS_BEFORE_SKIPPING`] times in a row reading this very version of it;
    /// otherwise it is marked in progress until the guard returned is dropped. Called with the
    /// library's writer lock held, so one file at a time is in progress.
    pub(crate) fn begin_reading(
        &self,
        path: &Path,
        file: FileVersion,
    ) -> Result<Reading<'_>, IndexError> {
        let left = self.left_by_another_run();
        let listed = self
            .read_job_record()
            .ended_on
            .iter()
            .any(|f| f.file.path == file.path);
        let mut ends = None;
        if !left.is_empty() || listed {
            self.update_job_record(|record| {
                count_end(record, &left);
                if let Some(at) = record
                    .ended_on
                    .iter()
                    .position(|f| f.file.path == file.path)
                {
                    if record.ended_on[at].file == file {
                        ends = Some(record.ended_on[at].ends);
                    } else {
                        record.ended_on.remove(at);
                    }
                }
            })?;
            self.forget_marker(&left);
        }
        if let Some(times) = ends.filter(|&n| n >= ENDS_BEFORE_SKIPPING) {
            return Err(IndexError::CrashedBefore {
                path: path.to_path_buf(),
                times,
            });
        }
        let counted = ends.map(|_| file.path.clone());
        self.mark_in_progress(file, Vec::new())?;
        Ok(Reading {
            library: self,
            counted,
        })
    }
}

/// Starting a job, in its update of the job record: an end on `left`, the file another run was
/// reading, is counted, and the files the user named (`named`, path keys) are cleared of theirs,
/// to be tried again.
pub(super) fn retry_named(record: &mut PendingJob, left: &[FileVersion], named: &[String]) {
    count_end(record, left);
    record.ended_on.retain(|f| !named.contains(&f.file.path));
}

/// Records the end of another run on `left`, the files it was reading: one more end on a file
/// it read alone (the first if it was another version of it); files it was committing together
/// are listed, to be read alone, with their count as it was.
fn count_end(record: &mut PendingJob, left: &[FileVersion]) {
    let own = u32::from(left.len() == 1);
    for left in left {
        count_one_end(record, left, own);
    }
}

fn count_one_end(record: &mut PendingJob, left: &FileVersion, own: u32) {
    match record
        .ended_on
        .iter_mut()
        .find(|f| f.file.path == left.path)
    {
        Some(known) if known.file == *left => known.ends += own,
        Some(known) => {
            *known = EndedOn {
                file: left.clone(),
                ends: own,
            }
        }
        None => record.ended_on.push(EndedOn {
            file: left.clone(),
            ends: own,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(path: &str) -> FileVersion {
        FileVersion {
            path: path.to_owned(),
            size: 10,
            modified_ns: 1,
        }
    }

    fn ends_on(record: &PendingJob, path: &str) -> Option<u32> {
        record
            .ended_on
            .iter()
            .find(|f| f.file.path == path)
            .map(|f| f.ends)
    }

    /// The flake of CI run 58: a kill during a batch, then one while a file of that batch was
    /// read alone, skipped that file. The batch's end is no one's; only ends alone count.
    #[test]
    fn an_end_during_a_batch_lists_its_files_and_counts_on_none_of_them() {
        let mut record = PendingJob::default();
        let batch = [version("/n/a.md"), version("/n/b.md"), version("/n/c.md")];
        count_end(&mut record, &batch);
        for file in &batch {
            assert_eq!(ends_on(&record, &file.path), Some(0), "{}", file.path);
        }
        // Read alone since: a second end is its first own one.
        count_end(&mut record, &batch[1..2]);
        assert_eq!(ends_on(&record, "/n/b.md"), Some(1));
        assert!(ends_on(&record, "/n/b.md") < Some(ENDS_BEFORE_SKIPPING));
        count_end(&mut record, &batch[1..2]);
        assert_eq!(ends_on(&record, "/n/b.md"), Some(ENDS_BEFORE_SKIPPING));
        // Another batch over a counted file keeps its count; another version starts again.
        count_end(&mut record, &batch);
        assert_eq!(ends_on(&record, "/n/b.md"), Some(ENDS_BEFORE_SKIPPING));
        let changed = FileVersion {
            size: 11,
            ..version("/n/b.md")
        };
        count_end(&mut record, &[changed.clone(), version("/n/a.md")]);
        assert_eq!(ends_on(&record, "/n/b.md"), Some(0));
        count_end(&mut record, &[changed]);
        assert_eq!(ends_on(&record, "/n/b.md"), Some(1));
    }
}
