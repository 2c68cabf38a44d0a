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
//! they are embedded and written: an end then counts on each of them, and a file with an end
//! counted is read and committed on its own from then on, so that a second end falls on the
//! file that caused it alone.
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
    /// Runs that ended while reading this version of it, in a row.
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
    /// Whether a run of the app ended while reading this file before: it is then committed on
    /// its own, not with other files.
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
        let mut ends = 0;
        if !left.is_empty() || listed {
            self.update_job_record(|record| {
                count_end(record, &left);
                if let Some(at) = record
                    .ended_on
                    .iter()
                    .position(|f| f.file.path == file.path)
                {
                    if record.ended_on[at].file == file {
                        ends = record.ended_on[at].ends;
                    } else {
                        record.ended_on.remove(at);
                    }
                }
            })?;
            self.forget_marker(&left);
        }
        if ends >= ENDS_BEFORE_SKIPPING {
            return Err(IndexError::CrashedBefore {
                path: path.to_path_buf(),
                times: ends,
            });
        }
        let counted = (ends > 0).then(|| file.path.clone());
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

/// Counts one more end on each of `left`, the files another run was reading (the first if it
/// was another version of it).
fn count_end(record: &mut PendingJob, left: &[FileVersion]) {
    for left in left {
        count_one_end(record, left);
    }
}

fn count_one_end(record: &mut PendingJob, left: &FileVersion) {
    match record
        .ended_on
        .iter_mut()
        .find(|f| f.file.path == left.path)
    {
        Some(known) if known.file == *left => known.ends += 1,
        Some(known) => {
            *known = EndedOn {
                file: left.clone(),
                ends: 1,
            }
        }
        None => record.ended_on.push(EndedOn {
            file: left.clone(),
            ends: 1,
        }),
    }
}
