//! Indexing jobs: files and folders to bring into the library, with progress (files done of
//! total, passages, rate, ETA), cancellation, pausing, and resumption. The folders a job was
//! asked for are written to `job.json` before any work and removed only when the job ends, so a
//! job killed at any moment is finished by the next [`Library::run_job`] (the per-file skip
//! makes the files already done cost only a `stat`). A paused job's folders stay in `job.json`
//! apart, taken up only when asked for ([`Library::paused_job`]). A folder's documents whose
//! files are gone are removed. A file the app ended on twice in a row while reading it is
//! skipped and named from then on, so that no file makes a crash loop (`crash_guard`). Each
//! file's parse begins when the file before it begins, in its worker process
//! ([`Library::parse_ahead`]), so the embedder does not wait for parsing; a parser that crashes
//! there costs that file, as at its turn, and never the app.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::library::meta::{read_state, write_atomically};
use crate::library::{Prepared, SmallFile, path_key};
use crate::{IndexError, IndexOutcome, Library, PassageEmbedder};

mod crash_guard;
pub(crate) use crash_guard::FileVersion;

/// Files between two compactions of a job's tables, at least (the interval grows to a quarter
/// of the files done, so a large job compacts a logarithmic number of times).
const COMPACT_EVERY: usize = 256;

/// Small new files wait to be committed together until this many passages wait (two of the
/// embedder's batches), this many files, or the first has waited [`BATCH_WAIT`]: a commit per
/// 64 one-passage notes rather than per note, and a file searchable a second or two after it
/// was read.
const BATCH_PASSAGES: usize = 64;
const BATCH_FILES: usize = 64;
const BATCH_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Small new files read, waiting to be embedded and committed together.
#[derive(Default)]
struct SmallBatch {
    files: Vec<SmallFile>,
    passages: usize,
    since: Option<Instant>,
}

impl SmallBatch {
    /// Whether a file of content `document_id` waits (its passages' ids would be the same).
    fn holds(&self, document_id: &str) -> bool {
        self.files.iter().any(|f| f.document_id() == document_id)
    }

    fn push(&mut self, file: SmallFile) {
        self.passages += file.passages();
        self.since.get_or_insert_with(Instant::now);
        self.files.push(file);
    }

    /// Whether the files should be committed now.
    fn is_due(&self) -> bool {
        self.passages >= BATCH_PASSAGES
            || self.files.len() >= BATCH_FILES
            || self.since.is_some_and(|t| t.elapsed() >= BATCH_WAIT)
    }

    fn take(&mut self) -> Vec<SmallFile> {
        self.passages = 0;
        self.since = None;
        std::mem::take(&mut self.files)
    }
}

/// A running job's counts.
struct JobRun {
    summary: JobSummary,
    progress: JobProgress,
    since_compaction: usize,
    started: Instant,
}

/// What a job reports as it goes.
#[derive(Debug)]
pub enum JobEvent {
    /// The files are known; `resumed` names the folders of an interrupted job taken up again.
    Started {
        total: usize,
        resumed: Vec<String>,
    },
    FileStarted {
        path: String,
    },
    /// A slice of a long file is stored and searchable: `passages` of its `of` so far.
    FileSearchable {
        path: String,
        passages: u32,
        of: u32,
    },
    FileDone {
        path: String,
        result: Result<IndexOutcome, IndexError>,
    },
    /// A document whose file is gone was removed.
    Removed {
        path: String,
    },
    /// A symbolic link whose target lies outside the folder the user gave: not read.
    LinkSkipped {
        path: String,
        target: String,
    },
    Progress(JobProgress),
}

/// Where a job stands, after each file.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct JobProgress {
    pub done: usize,
    pub total: usize,
    /// Passages of the documents this job indexed so far (a document it finished counts
    /// whole, slices an earlier run stored included).
    pub passages: u64,
    pub files_per_second: f64,
    /// Seconds left at the current rate; `None` until a file has been done.
    pub eta_seconds: Option<f64>,
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobSummary {
    pub indexed: usize,
    /// Unchanged, reused (same content elsewhere) or unsupported.
    pub skipped: usize,
    pub failed: usize,
    pub removed: usize,
    /// Stopped before the end, paused or not.
    pub cancelled: bool,
    /// Stopped by [`JobStop::pause`]: the job's folders wait in [`Library::paused_job`].
    pub paused: bool,
}

/// How a running job is asked to stop; both flags are read at every file and embedding batch.
#[derive(Debug, Clone, Copy)]
pub struct JobStop<'a> {
    /// Set to stop. What was done stays.
    pub stop: &'a AtomicBool,
    /// Set before `stop` to pause rather than cancel: the job's folders are kept, apart, to be
    /// resumed when asked for, not at the next start.
    pub pause: &'a AtomicBool,
}

/// The pause flag of a job that is never paused.
static NEVER_PAUSED: AtomicBool = AtomicBool::new(false);

impl<'a> From<&'a AtomicBool> for JobStop<'a> {
    /// A job that can be stopped, not paused.
    fn from(stop: &'a AtomicBool) -> Self {
        Self {
            stop,
            pause: &NEVER_PAUSED,
        }
    }
}

impl JobSummary {
    /// Counts one file's result (and its passages into `progress`).
    fn count(&mut self, result: &Result<IndexOutcome, IndexError>, progress: &mut JobProgress) {
        match result {
            Ok(IndexOutcome::Indexed { passages, .. }) => {
                self.indexed += 1;
                progress.passages += *passages as u64;
            }
            Ok(IndexOutcome::Reused { .. } | IndexOutcome::Unchanged { .. }) => self.skipped += 1,
            Err(IndexError::Unsupported { .. }) => self.skipped += 1,
            Err(_) => self.failed += 1,
        }
    }
}

/// `job.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct PendingJob {
    /// The running job's files and folders: finished at the next start if it never ended.
    #[serde(default)]
    roots: Vec<String>,
    /// A paused job's: resumed only when the user asks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    paused: Vec<String>,
    /// Files runs of the app ended while reading, as they were, and how many times: skipped
    /// after the second until they change or are named again (`crash_guard`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ended_on: Vec<crash_guard::EndedOn>,
}

/// Whether `path` is `root` or lies under it (both `path_key`s).
fn covers(root: &str, path: &str) -> bool {
    Path::new(path).starts_with(root)
}

/// Whether this computer has a job record for the library whose state folder is `state_dir`
/// (`job.json`: an interrupted, paused or ended job): where it has none, nothing needs the
/// library opened to find a job to resume.
pub fn has_job_record(state_dir: &Path) -> bool {
    job_file_in(state_dir).is_file()
}

/// `job.json` in `state_dir`.
fn job_file_in(state_dir: &Path) -> PathBuf {
    state_dir.join("job.json")
}

impl Library {
    fn job_file(&self) -> PathBuf {
        job_file_in(self.state_dir())
    }

    fn read_job_record(&self) -> PendingJob {
        read_state::<PendingJob>(&self.job_file()).unwrap_or_default()
    }

    /// Writes `job.json`, or removes it when it holds nothing.
    fn write_job_record(&self, record: &PendingJob) -> Result<(), IndexError> {
        if record.roots.is_empty() && record.paused.is_empty() && record.ended_on.is_empty() {
            return match std::fs::remove_file(self.job_file()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(IndexError::Write {
                    path: self.job_file(),
                    source: e,
                }),
                _ => Ok(()),
            };
        }
        let text = serde_json::to_string(record)
            .map_err(|e| IndexError::Schema(format!("cannot encode job.json: {e}")))?;
        write_atomically(&self.job_file(), text.as_bytes())
    }

    /// Reads `job.json`, changes it with `change` and writes it back, as one step.
    fn update_job_record(&self, change: impl FnOnce(&mut PendingJob)) -> Result<(), IndexError> {
        // A panic while held leaves the file whole: it is replaced atomically or not at all.
        let _held = self.job_record.lock().unwrap_or_else(|p| p.into_inner());
        let mut record = self.read_job_record();
        change(&mut record);
        self.write_job_record(&record)
    }

    /// The files and folders of a job that was interrupted (killed, crashed) and not finished.
    pub fn pending_job(&self) -> Vec<PathBuf> {
        let record = self.read_job_record();
        record.roots.into_iter().map(PathBuf::from).collect()
    }

    /// The files and folders of a paused job, which no start takes up on its own.
    pub fn paused_job(&self) -> Vec<PathBuf> {
        let record = self.read_job_record();
        record.paused.into_iter().map(PathBuf::from).collect()
    }

    /// Takes the paused job's files and folders off the paused list and records them as the
    /// running job's, to be given to [`Library::run_job`] next: from here a crash resumes
    /// them at the next start, Stop forgets them and Pause puts them back.
    pub fn take_paused_job(&self) -> Result<Vec<PathBuf>, IndexError> {
        let mut taken = Vec::new();
        self.update_job_record(|record| {
            taken = std::mem::take(&mut record.paused);
            let roots: BTreeSet<String> = record.roots.drain(..).chain(taken.clone()).collect();
            record.roots = roots.into_iter().collect();
        })?;
        Ok(taken.into_iter().map(PathBuf::from).collect())
    }

    /// Forgets the paused job: its files already indexed stay, the rest will not be.
    pub fn forget_paused_job(&self) -> Result<(), IndexError> {
        self.update_job_record(|record| record.paused.clear())
    }

    /// Indexes `roots` (files and folders, recursively) together with any interrupted job's, one
    /// file at a time: one file's failure is an event, never the end of the job. Stopping
    /// (`stop`) ends it at the next file or embedding batch (a long file cut off there keeps
    /// the slices it wrote, and is finished the next time it is indexed); what was done stays.
    /// A stopped job is forgotten, a paused one kept apart for later
    /// ([`Library::paused_job`]); a job that ends takes the paused folders it covered
    /// off that list, and one stopped leaves that list as it was. One job at a time: the
    /// engine holds a lock around it, as `job.json` records one running job.
    pub async fn run_job<'s>(
        &self,
        roots: &[PathBuf],
        embedder: &dyn PassageEmbedder,
        stop: impl Into<JobStop<'s>>,
        mut on_event: impl FnMut(JobEvent),
    ) -> Result<JobSummary, IndexError> {
        let JobStop {
            stop: cancel,
            pause,
        } = stop.into();
        let (all, resumed) = self.record_job(roots)?;
        let (files, links_outside) = self.files_under(&all);
        let granted = self.granted_with(&all);
        let total = files.len();
        on_event(JobEvent::Started {
            total,
            resumed: resumed.clone(),
        });
        let started = Instant::now();
        let spent_before = self.step.spent();
        let mut summary = JobSummary::default();
        for (link, target) in links_outside {
            summary.skipped += 1;
            on_event(JobEvent::LinkSkipped {
                path: link.display().to_string(),
                target: target.display().to_string(),
            });
        }
        let mut run = JobRun {
            summary,
            progress: JobProgress {
                total,
                ..JobProgress::default()
            },
            since_compaction: 0,
            started,
        };
        let mut batch = SmallBatch::default();
        // The next file's parse, started when this one's turn begins: it runs in its worker
        // process while this file is parsed, embedded and written, so that the embedder does
        // not wait for each file's parse (on the papers bench's PDFs parsing had been 14–22%
        // of a job, the embedder idle meanwhile).
        let mut ahead: Option<(&PathBuf, crate::library::ParsedAhead)> = None;
        for (at, file) in files.iter().enumerate() {
            if cancel.load(Ordering::SeqCst) {
                run.summary.cancelled = true;
                break;
            }
            // Files read before a long one (or a run of unchanged ones) wait no longer than
            // their due.
            if batch.is_due()
                && self
                    .commit_batch(&mut batch, &mut run, embedder, cancel, &mut on_event)
                    .await?
            {
                break;
            }
            let path = file.display().to_string();
            on_event(JobEvent::FileStarted { path: path.clone() });
            let root = widest_holding(&granted, file);
            let parsed = ahead
                .take()
                .filter(|(ahead_of, _)| *ahead_of == file)
                .map(|(_, parsed)| parsed);
            if let Some(next) = files.get(at + 1) {
                let next_root = widest_holding(&granted, next);
                ahead = self
                    .parse_ahead(next_root, next)
                    .await
                    .map(|parsed| (next, parsed));
            }
            let watchdog = tokio::spawn(log_slow_file(path.clone(), self.step.clone()));
            let prepared = self
                .prepare_file_under(root, file, parsed, embedder, cancel, |part| {
                    on_event(JobEvent::FileSearchable {
                        path: path.clone(),
                        passages: part.passages,
                        of: part.of,
                    })
                })
                .await;
            watchdog.abort();
            let result = match prepared {
                Ok(Prepared::Done(outcome)) => Ok(outcome),
                Err(e) => Err(e),
                Ok(Prepared::Small(small)) if !batch.holds(small.document_id()) => {
                    batch.push(*small);
                    if batch.is_due()
                        && self
                            .commit_batch(&mut batch, &mut run, embedder, cancel, &mut on_event)
                            .await?
                    {
                        break;
                    }
                    continue;
                }
                Ok(Prepared::Small(_)) => {
                    // The same content as a file of the batch: the batch first, then this file
                    // again, which then reuses the other's passages.
                    if self
                        .commit_batch(&mut batch, &mut run, embedder, cancel, &mut on_event)
                        .await?
                    {
                        break;
                    }
                    self.index_file_under(root, file, embedder, cancel, |_| {})
                        .await
                }
            };
            if self
                .finish_file(&mut run, &mut on_event, path, result)
                .await?
            {
                break;
            }
        }
        // A parse ahead left by a Stop or Pause: its worker is killed now.
        drop(ahead);
        if !run.summary.cancelled {
            self.commit_batch(&mut batch, &mut run, embedder, cancel, &mut on_event)
                .await?;
        }
        let JobRun {
            mut summary,
            progress,
            ..
        } = run;
        if !summary.cancelled {
            let on_disk: HashSet<String> = files.iter().map(|f| path_key(f)).collect();
            for root in &all {
                // A shared library's folder missing here (a share not mounted) says nothing of
                // the documents other computers indexed from it.
                if self.location().is_shared() && !Path::new(root).exists() {
                    continue;
                }
                for gone in self.vanished_under(root, &on_disk) {
                    for path in self.remove(Path::new(&gone)).await? {
                        summary.removed += 1;
                        on_event(JobEvent::Removed { path });
                    }
                }
            }
            self.step.enter(crate::library::IndexStage::Compacting);
            let optimized = self.optimize().await;
            self.step.enter(crate::library::IndexStage::Idle);
            optimized?;
        }
        // Done or stopped on purpose: nothing is left to resume at the next start; a paused
        // job's folders wait apart.
        summary.paused = summary.cancelled && pause.load(Ordering::SeqCst);
        let ended = self.update_job_record(|record| {
            record.roots.retain(|r| !all.contains(r));
            if summary.paused {
                let paused: BTreeSet<String> = record.paused.drain(..).chain(all).collect();
                record.paused = paused.into_iter().collect();
            } else if !summary.cancelled {
                record
                    .paused
                    .retain(|p| !all.iter().any(|root| covers(root, p)));
            }
        });
        match ended {
            // The pause asked for is not recorded: say so rather than "paused".
            Err(e) if summary.paused => return Err(e),
            Err(e) => tracing::warn!("recording the end of the job: {e}"),
            Ok(()) => {}
        }
        // Where the job's time went, step by step (the writer's steps; parsing runs in a worker
        // process while the writer waits on it).
        let by_step = self
            .step
            .spent()
            .into_iter()
            .zip(spent_before)
            .map(|((stage, now), (_, before))| {
                format!(
                    "{stage:?} {:.1} s",
                    now.saturating_sub(before).as_secs_f64()
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        tracing::info!(
            files = total,
            done = progress.done,
            cancelled = summary.cancelled,
            paused = summary.paused,
            seconds = started.elapsed().as_secs_f64(),
            by_step = %by_step,
            "indexing job ended"
        );
        Ok(summary)
    }

    /// Commits the small files waiting in `batch` ([`Library::commit_small_files`]) and
    /// reports each; a file another writer stored meanwhile is read again on its own. A batch
    /// that fails fails each of its files (none is stored; the next job reads them again).
    /// `Ok(true)` when the job is to stop (Stop or Pause).
    async fn commit_batch(
        &self,
        batch: &mut SmallBatch,
        run: &mut JobRun,
        embedder: &dyn PassageEmbedder,
        cancel: &AtomicBool,
        on_event: &mut impl FnMut(JobEvent),
    ) -> Result<bool, IndexError> {
        let files = batch.take();
        let Some(first) = files.first().map(|f| f.path.clone()) else {
            return Ok(false);
        };
        let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
        let results: Vec<(PathBuf, Result<IndexOutcome, IndexError>)> = match self
            .commit_small_files(files, embedder, cancel)
            .await
        {
            Ok(committed) => {
                let mut results: Vec<_> = committed
                    .stored
                    .into_iter()
                    .map(|(path, outcome)| (path, Ok(outcome)))
                    .collect();
                for (root, path) in committed.stale {
                    let again = self
                        .index_file_under(&root, &path, embedder, cancel, |_| {})
                        .await;
                    results.push((path, again));
                }
                results
            }
            Err(e @ IndexError::Stopped { .. }) => vec![(first, Err(e))],
            Err(e) if is_disk_full(&e) => vec![(first, Err(e))],
            Err(e) => {
                tracing::warn!(files = paths.len(), error = %e, "a batch of small files was not stored");
                let reason = e.to_string();
                paths
                    .into_iter()
                    .map(|path| {
                        let error = IndexError::Write {
                            path: path.clone(),
                            source: std::io::Error::other(reason.clone()),
                        };
                        (path, Err(error))
                    })
                    .collect()
            }
        };
        for (path, result) in results {
            let path = path.display().to_string();
            if self.finish_file(run, on_event, path, result).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Counts and reports one file's result, then compacts now and then. `Ok(true)` when the
    /// job is to stop (the file was stopped midway); a full disk ends the job with an error.
    async fn finish_file(
        &self,
        run: &mut JobRun,
        on_event: &mut impl FnMut(JobEvent),
        path: String,
        result: Result<IndexOutcome, IndexError>,
    ) -> Result<bool, IndexError> {
        if let Err(IndexError::Stopped { .. }) = result {
            run.summary.cancelled = true;
            return Ok(true);
        }
        run.summary.count(&result, &mut run.progress);
        // A full disk fails every file after this one too, each after its parsing and
        // embedding: stop now and keep `job.json`, so the job resumes once there is room.
        if let Err(e) = &result
            && is_disk_full(e)
        {
            let error = IndexError::DiskFull {
                path: self.state_dir().to_path_buf(),
                reason: e.to_string(),
            };
            on_event(JobEvent::FileDone { path, result });
            return Err(error);
        }
        on_event(JobEvent::FileDone { path, result });
        let progress = &mut run.progress;
        progress.done += 1;
        // Every commit's manifest lists every fragment: compact now and then, at a growing
        // interval, so neither the manifests nor the rewriting grow quadratically.
        run.since_compaction += 1;
        if run.since_compaction >= COMPACT_EVERY.max(progress.done / 4) {
            run.since_compaction = 0;
            self.step.enter(crate::library::IndexStage::Compacting);
            if let Err(e) = self.compact().await {
                tracing::warn!("compacting the library during the job: {e}");
            }
            self.step.enter(crate::library::IndexStage::Idle);
        }
        let seconds = run.started.elapsed().as_secs_f64().max(1e-6);
        progress.files_per_second = progress.done as f64 / seconds;
        progress.eta_seconds =
            Some((progress.total - progress.done) as f64 / progress.files_per_second);
        on_event(JobEvent::Progress(*progress));
        Ok(false)
    }

    /// Writes `job.json` with `roots` and the roots of an unfinished earlier job, so that a job
    /// cut short resumes at the next start (the paused list stays as it is). The file another
    /// run of the app ended on, if any, is counted (`crash_guard`), and the files `roots` names
    /// are cleared of such ends: the user asks to try them again. Returns all of them, and
    /// those resumed.
    fn record_job(&self, roots: &[PathBuf]) -> Result<(BTreeSet<String>, Vec<String>), IndexError> {
        let keys: Vec<String> = roots.iter().map(|r| path_key(r)).collect();
        let mut recorded = (BTreeSet::new(), Vec::new());
        let left = self.left_by_another_run();
        self.update_job_record(|record| {
            crash_guard::retry_named(record, &left, &keys);
            let resumed: Vec<String> = record
                .roots
                .drain(..)
                .filter(|p| !keys.contains(p))
                .collect();
            let all: BTreeSet<String> = keys.iter().cloned().chain(resumed.clone()).collect();
            record.roots = all.iter().cloned().collect();
            recorded = (all, resumed);
        })?;
        self.forget_marker(&left);
        Ok(recorded)
    }

    /// The files under `roots`, sorted and once each, and the links that lead out of their
    /// root (with their targets). A root that neither exists nor was ever indexed is kept as a
    /// file, so that indexing says it cannot be read.
    fn files_under(&self, roots: &BTreeSet<String>) -> (Vec<PathBuf>, Vec<(PathBuf, PathBuf)>) {
        let mut files = Vec::new();
        let mut links_outside = Vec::new();
        let granted = self.granted_with(roots);
        for root in roots {
            let before = files.len();
            let walk = walk_under(widest_holding(&granted, Path::new(root)), Path::new(root));
            files.extend(walk.files);
            links_outside.extend(walk.links_outside);
            let known = self
                .documents()
                .iter()
                .any(|d| d.path.starts_with(root.as_str()));
            if files.len() == before && !Path::new(root).exists() && !known {
                files.push(PathBuf::from(root));
            }
        }
        files.sort();
        files.dedup();
        (files, links_outside)
    }

    /// Documents at or under `root` whose files were not found by this job's walk.
    fn vanished_under(&self, root: &str, on_disk: &HashSet<String>) -> Vec<String> {
        let prefix = format!(
            "{}{}",
            root.trim_end_matches(std::path::MAIN_SEPARATOR),
            std::path::MAIN_SEPARATOR
        );
        self.documents()
            .into_iter()
            .map(|d| d.path)
            .filter(|p| (p == root || p.starts_with(&prefix)) && !on_disk.contains(p))
            .filter(|p| !Path::new(p).exists())
            .collect()
    }
}

/// Whether `error` (or what caused it) is a write to a full disk. LanceDB passes the I/O error
/// on as text, so the operating system's message is looked for too.
pub fn is_disk_full(error: &IndexError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            )
        }) {
            return true;
        }
        source = e.source();
    }
    let text = error.to_string();
    // ENOSPC on Linux and macOS; ERROR_DISK_FULL on Windows.
    text.contains("No space left on device") || text.contains("not enough space on the disk")
}

impl Library {
    /// The file or folder the user gave that bounds what `path` may lead to, as the walk and
    /// the indexing of its files take it: the widest watched folder holding `path` (by name),
    /// else `path` itself.
    pub fn granted_root(&self, path: &Path) -> PathBuf {
        widest_holding(&self.granted_with(&BTreeSet::new()), path).to_path_buf()
    }

    /// The job's `roots` and the watched folders: all the user gave.
    fn granted_with(&self, roots: &BTreeSet<String>) -> Vec<PathBuf> {
        roots
            .iter()
            .map(PathBuf::from)
            .chain(self.watched_folders())
            .collect()
    }
}

/// The widest of `granted` that holds `path` (by name), else `path`: a link found below a job's
/// folder may lead anywhere in a watched folder that holds that folder, as the watcher allows.
fn widest_holding<'a>(granted: &'a [PathBuf], path: &'a Path) -> &'a Path {
    granted
        .iter()
        .filter(|root| path.starts_with(root))
        .min_by_key(|root| root.as_os_str().len())
        .map_or(path, PathBuf::as_path)
}

/// What a walk of a path the user granted (a dropped or picked file or folder, a watched
/// folder) found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Walk {
    pub files: Vec<PathBuf>,
    /// Files whose canonical path lies outside the granted path, as (path, canonical target):
    /// a link to a file outside, or a file reached through a link to a folder outside (a change
    /// reported under `refs -> ../..`). Never read, so a folder holding
    /// `notes.txt -> ~/.ssh/id_rsa` cannot bring the key into the library.
    pub links_outside: Vec<(PathBuf, PathBuf)>,
}

/// The files under `root` (itself if it is a file); see [`walk_under`].
pub fn walk(root: &Path) -> Walk {
    walk_under(root, root)
}

/// The files under `path`, which lies in the granted `root`, skipping hidden files and
/// folders (`.git`, `.DS_Store`) and never following a symbolic link to a folder (no loops).
/// Every file and folder walked is inside the bound of `root` by canonical path
/// ([`crate::granted::bound`]: the folder resolved; a file given alone is bounded by its own
/// place, so a link given alone leads out), so a link to a file is followed only where its
/// target stays inside, and a `path` that leads through a link out of `root` yields nothing;
/// the files left out are listed in [`Walk::links_outside`].
pub fn walk_under(root: &Path, path: &Path) -> Walk {
    let bound = crate::granted::bound(root);
    let mut walk = Walk::default();
    collect(bound.as_deref(), path, &mut walk);
    walk
}

fn collect(bound: Option<&Path>, path: &Path, walk: &mut Walk) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        // Missing: the walk reports nothing; the job removes its documents.
        return;
    };
    // Dangling or gone since: nothing to read.
    let Ok(target) = std::fs::canonicalize(path) else {
        return;
    };
    let inside = bound.is_some_and(|bound| target.starts_with(bound));
    if meta.is_dir() {
        // A folder reached through a link (a change reported under `refs -> ../..`) is not
        // entered; below one that is inside, only links can lead out, and each is checked.
        if !inside {
            return;
        }
        let Ok(entries) = std::fs::read_dir(path) else {
            // Unreadable folder: let indexing report the error on the folder itself.
            walk.files.push(path.to_path_buf());
            return;
        };
        let mut children: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        children.sort();
        for child in children {
            let hidden = child
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            if !hidden {
                collect(bound, &child, walk);
            }
        }
        return;
    }
    // A link to a folder or to a device is not a document; a FIFO or a device itself is
    // handed on, for indexing to say it is not a regular file.
    if meta.file_type().is_symlink() && !target.is_file() {
        return;
    }
    if inside {
        walk.files.push(path.to_path_buf());
    } else {
        walk.links_outside.push((path.to_path_buf(), target));
    }
}

/// How long one step of a file may take before the log says so, and then again at each such
/// interval; the engine's notice to the person uses the same bound.
pub const SLOW_STEP: std::time::Duration = std::time::Duration::from_secs(20);

/// Logs, while a file is being indexed, each [`SLOW_STEP`] it takes and where it is (its
/// [`crate::library::IndexStage`]): a file that never ends then shows where it stopped. Runs as
/// its own task, since parsing and embedding hold the job's thread.
async fn log_slow_file(path: String, step: std::sync::Arc<crate::library::StepClock>) {
    let mut waited = std::time::Duration::ZERO;
    loop {
        tokio::time::sleep(SLOW_STEP).await;
        waited += SLOW_STEP;
        let now = step.now();
        tracing::warn!(
            %path,
            seconds = waited.as_secs(),
            stage = now.stage.describe(),
            stage_file = now.file.as_deref().unwrap_or(""),
            stage_seconds = now.began.elapsed().as_secs(),
            "a file is taking long"
        );
    }
}
