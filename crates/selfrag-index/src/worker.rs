//! Parsing in a child process, so that a parser that panics, overflows its stack, loops forever
//! or eats all memory costs one file's error and never the app.
//!
//! The protocol is small: the [`Extractor`] runs `WORKER_EXE --selfrag-extract-worker PATH`,
//! the child runs [`crate::extract_file`] and writes one JSON [`WorkerReply`] line to stdout.
//! The parent holds the worker's stdin open while it waits, and the worker exits when that pipe
//! ends, so no worker outlives the app. The parent gives it a time limit (killing it when it is
//! spent) and a memory limit that the worker keeps itself, on every OS, through its global
//! allocator ([`WorkerHeap`], see `heap`). On Linux util-linux's `prlimit` also fences the
//! worker's whole address space, a little above that limit. Any binary can be the worker: it
//! declares [`WorkerHeap`] its global allocator and calls [`main_if_worker`] first thing in `main`.
//!
//! ```no_run
//! #[global_allocator]
//! static HEAP: selfrag_index::worker::WorkerHeap = selfrag_index::worker::WorkerHeap;
//!
//! fn main() -> std::process::ExitCode {
//!     if let Some(code) = selfrag_index::worker::main_if_worker() {
//!         return code;
//!     }
//!     // ... the program itself ...
//!     std::process::ExitCode::SUCCESS
//! }
//! ```

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::IndexError;
use crate::extract::{ExtractedDocument, extract_checked, extract_file};
use crate::granted::{FileIdentity, SeenFile};

mod heap;
pub use heap::{HEAP_LIMIT_ENV, HEAP_LIMIT_EXIT, WorkerHeap};

/// The first argument that turns a binary into an extraction worker.
pub const WORKER_FLAG: &str = "--selfrag-extract-worker";

/// Set by the parent: the worker's stdin is a pipe the parent holds open and never writes, so
/// its end (the parent exited, was killed, or gave up on the file) ends the worker too.
pub const WATCH_PARENT_ENV: &str = "SELFRAG_WORKER_WATCH_PARENT";

/// Exit code of a worker whose parent went away.
const PARENT_GONE: i32 = 3;

/// Set by the parent for a file it checked: the identity ([`FileIdentity`]) the file had, which
/// the worker's open must find (it follows no link either), so a file swapped between the
/// parent's check and the worker's read is not read.
pub const EXPECTED_FILE_ENV: &str = "SELFRAG_WORKER_EXPECTED_FILE";

/// Set with [`EXPECTED_FILE_ENV`]: where the file's bytes are (`PATH` itself, or the target of
/// the link `PATH`, which still names the format and the file).
pub const READ_FROM_ENV: &str = "SELFRAG_WORKER_READ_FROM";

/// Runs the extraction worker when the process was started as one (`EXE --selfrag-extract-worker
/// PATH`) and returns its exit code; `None` for a normal start, which the caller then continues.
pub fn main_if_worker() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()?.as_os_str() != OsStr::new(WORKER_FLAG) {
        return None;
    }
    let Some(path) = args.next() else {
        let _ = writeln!(std::io::stderr(), "usage: {WORKER_FLAG} PATH");
        return Some(ExitCode::from(2));
    };
    if std::env::var_os(WATCH_PARENT_ENV).is_some() {
        watch_parent();
    }
    let extract = || match std::env::var(EXPECTED_FILE_ENV) {
        Ok(expected) => match expected.parse::<FileIdentity>() {
            Ok(expected) => {
                let read_from = std::env::var_os(READ_FROM_ENV).unwrap_or_else(|| path.clone());
                extract_checked(Path::new(&path), Path::new(&read_from), expected)
            }
            Err(message) => Err(IndexError::ParserFailed {
                path: PathBuf::from(&path),
                what: format!("was told {EXPECTED_FILE_ENV} {message}"),
            }),
        },
        Err(_) => extract_file(Path::new(&path)),
    };
    let extracted =
        WorkerHeap::limit_from_env().map(|()| extract().map(ExtractedDocument::within_limits));
    let reply = match extracted {
        Ok(Ok(document)) => WorkerReply::Extracted {
            document: Box::new(document),
        },
        Ok(Err(e)) => WorkerReply::Failed {
            error: WireError::from_error(&e),
        },
        Err(message) => WorkerReply::Failed {
            error: WireError::Other { message },
        },
    };
    let written = serde_json::to_string(&reply)
        .map_err(std::io::Error::other)
        .and_then(|json| {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{json}")?;
            out.flush()
        });
    Some(match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "cannot write the extracted text: {e}");
            ExitCode::from(3)
        }
    })
}

/// What the worker prints: the document, or the error it met, for the parent to re-raise.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
enum WorkerReply {
    // Boxed: a document (with its work record) is far larger than an error.
    Extracted { document: Box<ExtractedDocument> },
    Failed { error: WireError },
}

/// An [`IndexError`] from extraction, in a form that crosses the process boundary.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
enum WireError {
    Read {
        message: String,
    },
    Unsupported {
        reason: String,
    },
    Empty,
    Encrypted,
    NoTextLayer {
        reason: String,
    },
    Malformed {
        format: String,
        reason: String,
    },
    TooLarge {
        extension: String,
        size_mib: u64,
        limit_mib: u64,
    },
    Swapped,
    Other {
        message: String,
    },
}

impl WireError {
    fn from_error(e: &IndexError) -> Self {
        match e {
            IndexError::Read { source, .. } => Self::Read {
                message: source.to_string(),
            },
            IndexError::Unsupported { reason, .. } => Self::Unsupported {
                reason: reason.clone(),
            },
            IndexError::Empty { .. } => Self::Empty,
            IndexError::Encrypted { .. } => Self::Encrypted,
            IndexError::NoTextLayer { reason, .. } => Self::NoTextLayer {
                reason: reason.clone(),
            },
            IndexError::Malformed { format, reason, .. } => Self::Malformed {
                format: format.clone(),
                reason: reason.clone(),
            },
            IndexError::TooLarge {
                extension,
                size_mib,
                limit_mib,
                ..
            } => Self::TooLarge {
                extension: extension.clone(),
                size_mib: *size_mib,
                limit_mib: *limit_mib,
            },
            IndexError::Swapped { .. } => Self::Swapped,
            other => Self::Other {
                message: other.to_string(),
            },
        }
    }

    fn into_error(self, path: &Path) -> IndexError {
        let path = path.to_path_buf();
        match self {
            Self::Read { message } => IndexError::Read {
                path,
                source: std::io::Error::other(message),
            },
            Self::Unsupported { reason } => IndexError::Unsupported { path, reason },
            Self::Empty => IndexError::Empty { path },
            Self::Encrypted => IndexError::Encrypted { path },
            Self::NoTextLayer { reason } => IndexError::NoTextLayer { path, reason },
            Self::Malformed { format, reason } => IndexError::Malformed {
                path,
                format,
                reason,
            },
            Self::TooLarge {
                extension,
                size_mib,
                limit_mib,
            } => IndexError::TooLarge {
                path,
                extension,
                size_mib,
                limit_mib,
            },
            Self::Swapped => IndexError::Swapped { path },
            Self::Other { message } => IndexError::ParserFailed {
                path,
                what: format!("failed ({message})"),
            },
        }
    }
}

/// Where documents are parsed: in a worker process with limits (the app), or in this process
/// (tests and tools that trust their input).
#[derive(Debug, Clone, Default)]
pub struct Extractor {
    worker: Option<WorkerProcess>,
}

#[derive(Debug, Clone)]
struct WorkerProcess {
    exe: PathBuf,
    timeout: Duration,
    memory_limit: Option<u64>,
    /// The most bytes of reply read from a worker: past it the document is refused, so that a
    /// small compressed file that inflates to gigabytes of text cannot take the app's memory.
    reply_limit: usize,
    /// util-linux `prlimit`, when this system has it (Linux).
    prlimit: Option<PathBuf>,
}

impl Extractor {
    /// A file that takes longer than this to parse is given up.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
    /// Heap a worker may hold: generous for a 1,000-page PDF, small enough that a runaway
    /// parser cannot take the machine's memory.
    pub const DEFAULT_MEMORY_LIMIT: u64 = 4 << 30;
    /// What `prlimit` adds to the heap limit for the rest of the address space (code, thread
    /// stacks, the allocator's own slack), so that the heap limit, which says why, speaks first.
    const ADDRESS_SPACE_HEADROOM: u64 = 1 << 30;
    /// The most reply read from a worker: the JSON of about 100,000 passages' text, so the
    /// library's own limit on passages per document is met first.
    pub const DEFAULT_REPLY_LIMIT: usize = 256 << 20;

    /// Parses in this process: a parser panic is caught, but a stack overflow or an endless
    /// loop takes the process with it. For tests and trusted input.
    pub fn in_process() -> Self {
        Self { worker: None }
    }

    /// Parses each file in a child `exe --selfrag-extract-worker PATH`, with the default time
    /// and memory limits. `exe` must call [`main_if_worker`] first thing in `main`.
    pub fn worker(exe: impl Into<PathBuf>) -> Self {
        Self {
            worker: Some(WorkerProcess {
                exe: exe.into(),
                timeout: Self::DEFAULT_TIMEOUT,
                memory_limit: Some(Self::DEFAULT_MEMORY_LIMIT),
                reply_limit: Self::DEFAULT_REPLY_LIMIT,
                prlimit: find_prlimit(),
            }),
        }
    }

    /// Changes the time limit of each worker (no effect in process).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        if let Some(w) = &mut self.worker {
            w.timeout = timeout;
        }
        self
    }

    /// Changes the heap limit of each worker in bytes; `None` for none. Enforced on every OS by
    /// the worker's [`WorkerHeap`].
    pub fn with_memory_limit(mut self, bytes: Option<u64>) -> Self {
        if let Some(w) = &mut self.worker {
            w.memory_limit = bytes;
        }
        self
    }

    /// Changes the most bytes of reply read from each worker (no effect in process).
    pub fn with_reply_limit(mut self, bytes: usize) -> Self {
        if let Some(w) = &mut self.worker {
            w.reply_limit = bytes;
        }
        self
    }

    /// Extracts `path` on a blocking thread.
    #[cfg(feature = "store")]
    pub async fn extract(&self, path: &Path) -> Result<ExtractedDocument, IndexError> {
        let (this, owned) = (self.clone(), path.to_path_buf());
        tokio::task::spawn_blocking(move || this.extract_blocking(&owned))
            .await
            .map_err(|e| IndexError::ParserFailed {
                path: path.to_path_buf(),
                what: format!("was lost ({e})"),
            })?
    }

    /// Extracts `path`, blocking the calling thread until the text or the error is there.
    pub fn extract_blocking(&self, path: &Path) -> Result<ExtractedDocument, IndexError> {
        self.extract_from(path, None, None)
    }

    /// Extracts a file checked by [`crate::granted::see`] on a blocking thread: the read
    /// follows no link and refuses a file other than the one seen ([`IndexError::Swapped`]).
    /// With a worker process, setting `stop` ends the wait within a tenth of a second with
    /// [`IndexError::Stopped`] and kills the worker, as dropping the future does: a file whose
    /// parser stopped answering never holds up a Stop for the rest of the time limit. Parsing
    /// in this process cannot be cut short, so there `stop` is left to the steps after it.
    #[cfg(feature = "store")]
    pub async fn extract_seen(
        &self,
        seen: &SeenFile,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<ExtractedDocument, IndexError> {
        self.start_seen(seen).finish(stop).await
    }

    /// Whether each file is parsed in a worker process ([`Extractor::worker`]), so that a
    /// parse can run beside other work and be killed when it is no longer wanted.
    pub fn isolates(&self) -> bool {
        self.worker.is_some()
    }

    /// [`Extractor::extract_seen`] started now, on a blocking thread, and waited for later
    /// ([`Extraction::finish`]); dropped unfinished, it gives up and kills its worker.
    #[cfg(feature = "store")]
    pub fn start_seen(&self, seen: &SeenFile) -> Extraction {
        let abandon = AbandonOnDrop(std::sync::Arc::new(std::sync::atomic::AtomicBool::new(
            false,
        )));
        let (this, owned, flag) = (self.clone(), seen.clone(), abandon.0.clone());
        let task = tokio::task::spawn_blocking(move || {
            this.extract_from(&owned.path, Some(&owned), Some(&flag))
        });
        Extraction {
            path: seen.path.clone(),
            task,
            stoppable: self.isolates(),
            _abandon: abandon,
        }
    }

    /// [`Extractor::extract_seen`], blocking the calling thread.
    pub fn extract_seen_blocking(&self, seen: &SeenFile) -> Result<ExtractedDocument, IndexError> {
        self.extract_from(&seen.path, Some(seen), None)
    }

    /// Extracts `path`, read as `seen` says when given; a worker is killed as soon as
    /// `abandon` is set.
    fn extract_from(
        &self,
        path: &Path,
        seen: Option<&SeenFile>,
        abandon: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<ExtractedDocument, IndexError> {
        // A folder of images should not start a process per image just to hear "unsupported".
        crate::extract::supported_extension(path)?;
        let in_process = || match seen {
            Some(seen) => extract_checked(path, &seen.read_from, seen.identity),
            None => extract_file(path),
        };
        match &self.worker {
            Some(worker) => worker.run(path, seen, abandon),
            None => catch_unwind(AssertUnwindSafe(|| {
                in_process().map(ExtractedDocument::within_limits)
            }))
            .unwrap_or_else(|_| {
                Err(IndexError::ParserFailed {
                    path: path.to_path_buf(),
                    what: "panicked".into(),
                })
            }),
        }
    }
}

/// Tells an extraction's blocking thread to give up (and kill its worker) when whoever waits
/// for it stops waiting.
#[cfg(feature = "store")]
#[derive(Debug)]
struct AbandonOnDrop(std::sync::Arc<std::sync::atomic::AtomicBool>);

#[cfg(feature = "store")]
impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// An extraction running on a blocking thread ([`Extractor::start_seen`]); dropped before it
/// is finished, its worker is killed.
#[cfg(feature = "store")]
#[derive(Debug)]
#[must_use = "dropped, the extraction is given up"]
pub struct Extraction {
    path: PathBuf,
    task: tokio::task::JoinHandle<Result<ExtractedDocument, IndexError>>,
    /// In a worker process: the wait ends at `stop` (in this process the parse cannot be cut
    /// short, and is waited for).
    stoppable: bool,
    _abandon: AbandonOnDrop,
}

#[cfg(feature = "store")]
impl Extraction {
    /// The file's text, once its parse ends; with a worker process, [`IndexError::Stopped`]
    /// within a tenth of a second of `stop` being set (and the worker killed).
    pub async fn finish(
        mut self,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<ExtractedDocument, IndexError> {
        use std::sync::atomic::Ordering;
        let path = self.path.clone();
        let lost = |e: tokio::task::JoinError| IndexError::ParserFailed {
            path: path.clone(),
            what: format!("was lost ({e})"),
        };
        if !self.stoppable {
            return (&mut self.task).await.map_err(lost)?;
        }
        let mut poll = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                extracted = &mut self.task => return extracted.map_err(lost)?,
                _ = poll.tick() => {
                    if stop.load(Ordering::SeqCst) {
                        return Err(IndexError::Stopped { path });
                    }
                }
            }
        }
    }
}

impl WorkerProcess {
    fn run(
        &self,
        path: &Path,
        seen: Option<&SeenFile>,
        abandon: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<ExtractedDocument, IndexError> {
        let failed = |what: String| IndexError::ParserFailed {
            path: path.to_path_buf(),
            what,
        };
        // Checked here because under `prlimit` a missing program is only an exit status.
        if !self.exe.is_file() {
            return Err(failed(format!(
                "could not be started ({} does not exist)",
                self.exe.display()
            )));
        }
        let mut command = match (&self.prlimit, self.memory_limit) {
            (Some(prlimit), Some(bytes)) => {
                let mut c = Command::new(prlimit);
                c.arg(format!(
                    "--as={}",
                    bytes.saturating_add(Extractor::ADDRESS_SPACE_HEADROOM)
                ))
                .arg("--")
                .arg(&self.exe);
                c
            }
            _ => Command::new(&self.exe),
        };
        if let Some(bytes) = self.memory_limit {
            command.env(HEAP_LIMIT_ENV, bytes.to_string());
        }
        match seen {
            Some(seen) => command
                .env(EXPECTED_FILE_ENV, seen.identity.to_string())
                .env(READ_FROM_ENV, &seen.read_from),
            None => command
                .env_remove(EXPECTED_FILE_ENV)
                .env_remove(READ_FROM_ENV),
        };
        command
            .arg(WORKER_FLAG)
            .arg(path)
            // The error names the cause in one line; a backtrace would bury it.
            .env("RUST_BACKTRACE", "0")
            .env(WATCH_PARENT_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| {
            failed(format!(
                "could not be started ({}: {e})",
                self.exe.display()
            ))
        })?;
        // Held, never written, until the worker is done: its end tells the worker that this
        // process is gone (see `watch_parent`).
        let _parent_alive = child.stdin.take();
        // Drain both pipes while waiting, or a large document would fill the pipe and the
        // worker would block forever on its write.
        let stdout = drain(child.stdout.take(), self.reply_limit);
        let stderr = drain(child.stderr.take(), STDERR_LIMIT);
        let deadline = Instant::now() + self.timeout;
        let mut pause = Duration::from_millis(1);
        let status = loop {
            // Whatever ends the wait early kills the worker, and its error says why.
            let give_up = match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None)
                    if abandon.is_some_and(|a| a.load(std::sync::atomic::Ordering::SeqCst)) =>
                {
                    IndexError::Stopped {
                        path: path.to_path_buf(),
                    }
                }
                Ok(None) if Instant::now() >= deadline => failed(format!(
                    "ran out of time ({} s)",
                    self.timeout.as_secs_f32()
                )),
                Ok(None) => {
                    std::thread::sleep(
                        pause.min(deadline.saturating_duration_since(Instant::now())),
                    );
                    pause = (pause * 2).min(Duration::from_millis(50));
                    continue;
                }
                Err(e) => failed(format!("could not be waited for ({e})")),
            };
            let _ = child.kill();
            let _ = child.wait();
            return Err(give_up);
        };
        let (stdout, too_long) = stdout.join().unwrap_or_default();
        let (stderr, _) = stderr.join().unwrap_or_default();
        if too_long {
            return Err(failed(format!(
                "answered more than {} MiB of text, the most read from one document; split the \
                 file into smaller ones and index those",
                self.reply_limit >> 20
            )));
        }
        if !status.success() {
            let mut what = describe_exit(status, self.memory_limit);
            if let Some(line) = diagnosis(&stderr) {
                what = format!("{what}: {line}");
            }
            return Err(failed(what));
        }
        let reply = last_line(&stdout)
            .and_then(|line| serde_json::from_str::<WorkerReply>(&line).ok())
            .ok_or_else(|| failed("answered something that is not a document".into()))?;
        match reply {
            WorkerReply::Extracted { document } => Ok(*document),
            WorkerReply::Failed { error } => Err(error.into_error(path)),
        }
    }
}

/// Ends this worker process once its stdin reaches its end: the parent holds the pipe's other
/// end for as long as it waits for the reply, so a parent that exits, is killed or gives up
/// never leaves a worker behind, on any OS (a pipe's end is what every OS reports when its
/// last writer is gone; no signal, job object or `unsafe` needed).
fn watch_parent() {
    let spawned = std::thread::Builder::new()
        .name("parent-watch".into())
        .spawn(|| {
            let mut stdin = std::io::stdin();
            let mut buffer = [0u8; 64];
            loop {
                match stdin.read(&mut buffer) {
                    Ok(0) | Err(_) => std::process::exit(PARENT_GONE),
                    Ok(_) => {}
                }
            }
        });
    if let Err(e) = spawned {
        let _ = writeln!(std::io::stderr(), "cannot watch the parent process: {e}");
    }
}

/// The most of a worker's stderr kept (its last line says what went wrong).
const STDERR_LIMIT: usize = 1 << 20;

/// Reads a child's pipe to its end on a thread of its own, keeping at most `limit` bytes (the
/// rest is read and dropped, so the child never blocks on a full pipe); `true` when there was
/// more.
fn drain<R: Read + Send + 'static>(
    pipe: Option<R>,
    limit: usize,
) -> std::thread::JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut more = false;
        if let Some(pipe) = pipe {
            let mut kept = pipe.take(limit as u64);
            let _ = kept.read_to_end(&mut bytes);
            let mut rest = kept.into_inner();
            more = std::io::copy(&mut rest, &mut std::io::sink()).is_ok_and(|n| n > 0);
        }
        (bytes, more)
    })
}

/// The last non-empty line: the reply (a library may have printed before it) or the panic.
fn last_line(bytes: &[u8]) -> Option<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

/// The line of a dead worker's stderr that says why: the panic message, "memory allocation of
/// … failed", "thread 'main' has overflowed its stack", not the hints that follow them.
fn diagnosis(stderr: &[u8]) -> Option<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("note:") && !l.starts_with("fatal runtime error"))
        .map(str::to_string)
}

/// "crashed (…)", "panicked", "exited with status 3": how the worker ended, for the error.
fn describe_exit(status: ExitStatus, memory_limit: Option<u64>) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            let limit = memory_limit
                .map(|b| format!(", the limit is {} MiB", b >> 20))
                .unwrap_or_default();
            return match signal {
                6 => format!("crashed (it aborted: a stack overflow, or out of memory{limit})"),
                9 => format!("was killed (SIGKILL, often the system running out of memory{limit})"),
                11 => "crashed (segmentation fault)".into(),
                other => format!("crashed (signal {other})"),
            };
        }
    }
    match (status.code(), memory_limit) {
        // Rust's exit code for a panic that unwound out of main.
        (Some(101), _) => "panicked".into(),
        (Some(HEAP_LIMIT_EXIT), Some(limit)) => format!(
            "needed more than {} MiB of memory, the most one file may take to parse (a \
             decompression bomb, or a document too large to parse whole: split it)",
            limit >> 20
        ),
        (Some(code), _) => format!("exited with status {code}"),
        (None, _) => "stopped".into(),
    }
}

/// util-linux `prlimit` on `PATH` (Linux only; elsewhere the heap limit stands alone).
fn find_prlimit() -> Option<PathBuf> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("prlimit"))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_extraction_error_crosses_the_process_boundary_with_its_meaning() {
        let path = Path::new("/docs/paper.pdf");
        let errors = [
            IndexError::Encrypted { path: path.into() },
            IndexError::NoTextLayer {
                path: path.into(),
                reason: "the OCR found no text on it".into(),
            },
            IndexError::Empty { path: path.into() },
            IndexError::Unsupported {
                path: path.into(),
                reason: "`.png` files are not read".into(),
            },
            IndexError::Malformed {
                path: path.into(),
                format: "PDF".into(),
                reason: "bad xref".into(),
            },
            IndexError::TooLarge {
                path: path.into(),
                extension: "pdf".into(),
                size_mib: 1024,
                limit_mib: 512,
            },
            IndexError::Swapped { path: path.into() },
        ];
        for e in errors {
            let json = serde_json::to_string(&WireError::from_error(&e)).unwrap();
            let back = serde_json::from_str::<WireError>(&json)
                .unwrap()
                .into_error(path);
            assert_eq!(back.to_string(), e.to_string());
        }
    }

    #[test]
    fn the_reply_is_found_after_stray_output() {
        let out =
            b"a library printed this\n{\"outcome\":\"failed\",\"error\":{\"kind\":\"empty\"}}\n\n";
        let reply: WorkerReply = serde_json::from_str(&last_line(out).unwrap()).unwrap();
        assert!(matches!(
            reply,
            WorkerReply::Failed {
                error: WireError::Empty
            }
        ));
    }
}
