//! Downloads a model's files from the Hugging Face hub into the hub cache, and checks what is
//! already there. It owns the transfer (HTTP, resume, cancel, progress), the cache layout it
//! writes, and the checks of size, SHA-256 and architecture; [`crate::store`] owns the lookup.
//!
//! The cache layout is the one `huggingface_hub` (Python) and `hf-hub` (Rust) write, so models
//! fetched by any of them are reused and ours are found by them:
//!
//! ```text
//! $HF_HUB_CACHE (or $HF_HOME/hub, or ~/.cache/huggingface/hub)
//! └── models--{org}--{name}
//!     ├── blobs/{etag}                      the bytes; for Git LFS files the etag is their SHA-256
//!     ├── blobs/{etag}.incomplete           a partial download, continued with an HTTP Range request
//!     ├── refs/{revision}                   the commit the revision (e.g. `main`) resolved to
//!     └── snapshots/{commit}/{file}         a relative symlink to ../../blobs/{etag}
//! $HF_HUB_CACHE/.locks/models--{org}--{name}/{etag}.lock   held while a blob is downloaded
//! ```
//!
//! The protocol is the hub's: `HEAD {endpoint}/{repo}/resolve/{revision}/{file}` without
//! following redirects to other hosts gives `X-Repo-Commit`, `X-Linked-Etag` (or `ETag`) and
//! `X-Linked-Size` (or `Content-Length`); then `GET` the same URL, following redirects, from
//! the partial file's length onwards. `HF_ENDPOINT`, `HF_HUB_OFFLINE`, `HF_TOKEN` and the token
//! file are honoured as `huggingface_hub` honours them.
//!
//! hf-hub 0.4's sync downloader resumes (`.part` files and Range requests) but offers no way to
//! stop a transfer, reports no rate and checks no hash, so the transfer is done here with the
//! same HTTP client (ureq, rustls); hf-hub supplies the token lookup and the repo folder name,
//! and a `.part` file it left behind is resumed rather than thrown away.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::store::{ModelFile, ModelRole, ModelSpec, locate_in, repo_dir};

/// The public hub, used when `HF_ENDPOINT` is not set.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// How many bytes are read from the network between two looks at the cancel flag.
const CHUNK: usize = 64 * 1024;
/// Progress events are sent at most this often (plus at every change of file or phase).
const EMIT_EVERY: Duration = Duration::from_millis(100);
/// The transfer rate is averaged over this window.
const RATE_WINDOW: Duration = Duration::from_secs(5);

/// Where and how to download; [`HubOptions::from_env`] reads the usual Hugging Face variables.
/// `Debug` shows whether a token is set, never the token.
#[derive(Clone, PartialEq)]
pub struct HubOptions {
    /// The hub's base URL, `https://huggingface.co` unless `HF_ENDPOINT` says otherwise.
    pub endpoint: String,
    /// The hub cache; `None` when no home directory or `HF_HOME` could be found.
    pub cache_dir: Option<PathBuf>,
    /// Use only files already in the cache (`HF_HUB_OFFLINE=1`, or `--offline`).
    pub offline: bool,
    /// A Hugging Face access token for gated or private repositories.
    pub token: Option<String>,
    /// How many times a dropped connection is resumed automatically, per file.
    pub retries: u32,
    /// A connection that sends nothing for this long counts as dropped.
    pub read_timeout: Duration,
}

impl std::fmt::Debug for HubOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubOptions")
            .field("endpoint", &self.endpoint)
            .field("cache_dir", &self.cache_dir)
            .field("offline", &self.offline)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("retries", &self.retries)
            .field("read_timeout", &self.read_timeout)
            .finish()
    }
}

impl HubOptions {
    /// From the process environment: `HF_ENDPOINT`, `HF_HUB_OFFLINE`, `HF_TOKEN`,
    /// `HF_TOKEN_PATH`, and the cache of [`crate::store::hf_hub_cache_dir`].
    pub fn from_env() -> Self {
        Self::from_vars(
            |key| std::env::var(key).ok(),
            crate::store::hf_hub_cache_dir(),
        )
    }

    /// As [`HubOptions::from_env`] with the variables looked up by `var` (for tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>, cache_dir: Option<PathBuf>) -> Self {
        let non_empty = |key: &str| {
            var(key)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let endpoint = non_empty("HF_ENDPOINT")
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned())
            .trim_end_matches('/')
            .to_owned();
        let offline = non_empty("HF_HUB_OFFLINE").is_some_and(|v| is_true(&v));
        let token = non_empty("HF_TOKEN")
            .or_else(|| {
                let path = non_empty("HF_TOKEN_PATH")?;
                let text = fs::read_to_string(path).ok()?;
                Some(text.trim().to_owned()).filter(|t| !t.is_empty())
            })
            .or_else(|| {
                // `huggingface-cli login` writes $HF_HOME/token, the cache's sibling.
                let cache = cache_dir.as_ref()?;
                hf_hub::Cache::new(cache.clone()).token()
            });
        Self {
            endpoint,
            cache_dir,
            offline,
            token,
            retries: 3,
            read_timeout: Duration::from_secs(30),
        }
    }

    fn cache(&self) -> Result<&Path, DownloadError> {
        self.cache_dir.as_deref().ok_or(DownloadError::NoCache)
    }
}

/// `huggingface_hub`'s reading of a boolean variable.
fn is_true(value: &str) -> bool {
    matches!(
        value.to_ascii_uppercase().as_str(),
        "1" | "ON" | "YES" | "TRUE"
    )
}

/// Whether `HF_HUB_OFFLINE` asks for the cache only.
pub fn offline_from_env() -> bool {
    std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| is_true(v.trim()))
}

/// What a download is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownloadPhase {
    /// Asking the hub what each file is (commit, size, hash), or reading a partial file back.
    Checking,
    /// Bytes are arriving.
    Downloading,
    /// Hashing a file against its expected SHA-256.
    Verifying,
    /// Every file is in the cache and checked.
    Done,
}

/// One progress report; `bytes_*` count the whole model, not one file.
#[derive(Debug, Clone, PartialEq)]
pub struct DownloadProgress {
    pub phase: DownloadPhase,
    /// The file being worked on, as named in the repository.
    pub file: String,
    /// Bytes of the model on disk so far: complete files, the partial one, cached ones.
    pub bytes_done: u64,
    /// Bytes of the whole model; 0 until the hub has been asked.
    pub bytes_total: u64,
    /// Network bytes per second over the last few seconds.
    pub bytes_per_second: f64,
    /// Seconds left at that rate, when there is a rate.
    pub eta_seconds: Option<f64>,
}

/// What a finished download did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadReport {
    /// What [`crate::store::locate`] now finds: the GGUF file or the model folder.
    pub found: PathBuf,
    /// Bytes that came over the network in this call.
    pub fetched_bytes: u64,
    /// Bytes of complete files that were already in the cache.
    pub cached_bytes: u64,
    /// Bytes of partial files continued rather than fetched again.
    pub resumed_bytes: u64,
}

/// Everything a download or a check can fail with; each message names the file and the fix.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error(transparent)]
    Store(#[from] StoreError),

    #[error(
        "no Hugging Face cache folder: HOME, HF_HOME and HF_HUB_CACHE are all unset; set HF_HOME to a folder with room for the models"
    )]
    NoCache,

    #[error(
        "{id}: {repo} publishes no GGUF file, so there is nothing to download; convert the checkpoint with llama.cpp (convert_hf_to_gguf.py, then llama-quantize Q4_K_M; the commands are in docs/MODELS.md, \"Checkpoints of other families\") and start with SELFRAG_GENERATOR=/path/to/{file}"
    )]
    NotPublished {
        id: String,
        repo: String,
        file: String,
    },

    #[error(
        "offline mode (HF_HUB_OFFLINE or --offline) and {repo}/{file} is not in the Hugging Face cache at {}; connect to the internet and run `selfrag models pull {id}` (or unset HF_HUB_OFFLINE), or copy the model there from a machine that has it",
        cache.display()
    )]
    Offline {
        id: String,
        repo: String,
        file: String,
        cache: PathBuf,
    },

    #[error(
        "cannot reach {url} for {file}: {reason}; check the internet connection (and HTTPS_PROXY if you use a proxy), then run the download again, it resumes where it stopped; with HF_HUB_OFFLINE=1 only files already in the cache are used"
    )]
    Network {
        file: String,
        url: String,
        reason: String,
    },

    #[error(
        "{url}: the hub has no {what} (HTTP 404); the manifest for {repo} may be out of date: update the app, or download {file} yourself and point SELFRAG_GENERATOR or SELFRAG_EMBEDDER at it"
    )]
    NotFound {
        repo: String,
        file: String,
        url: String,
        /// "file {file} in {repo} at revision {revision}", "repository {repo}", ...
        what: String,
    },

    #[error(
        "{url}: {repo} refused the download of {file} (HTTP {status}): the repository is gated, private or gone; accept its terms at {endpoint}/{repo} and log in with `huggingface-cli login` (or set HF_TOKEN), then try again"
    )]
    Unauthorized {
        repo: String,
        file: String,
        url: String,
        endpoint: String,
        status: u16,
    },

    #[error(
        "{url}: HTTP {status} while downloading {file}; the hub may be busy or down, try again later (a partial download resumes)"
    )]
    Http {
        file: String,
        url: String,
        status: u16,
    },

    #[error(
        "{url} answered without the {header} header, so it does not look like a Hugging Face hub; unset HF_ENDPOINT, or point it at a mirror that serves /{{repo}}/resolve/{{revision}}/{{file}}"
    )]
    NotAHub {
        file: String,
        url: String,
        header: String,
    },

    #[error(
        "{file}: the hub's copy does not match the manifest for {repo} ({what}); the repository changed since this app was released: update the app, or download the file yourself and point SELFRAG_GENERATOR or SELFRAG_EMBEDDER at it"
    )]
    ManifestMismatch {
        repo: String,
        file: String,
        what: String,
    },

    #[error(
        "the download of {file} stopped at {done} of {total} bytes ({reason}); run it again to resume from there"
    )]
    Interrupted {
        file: String,
        done: u64,
        total: u64,
        reason: String,
    },

    #[error(
        "{file}: received {received} bytes where the hub announced {expected}, so the file is not what it should be; it was deleted, run the download again"
    )]
    SizeMismatch {
        file: String,
        expected: u64,
        received: u64,
    },

    #[error(
        "{file}: the downloaded bytes have SHA-256 {actual}, not {expected} ({source_of_hash}); the download is corrupt and was deleted, run it again (if it fails the same way, a proxy or mirror is altering the file)"
    )]
    HashMismatch {
        file: String,
        expected: String,
        actual: String,
        source_of_hash: String,
    },

    #[error(
        "no space left on the disk holding {} while downloading {file}; free some space (the model needs {total} bytes in all) or set HF_HOME to a folder on a disk with room; the partial download is kept and resumes",
        path.display()
    )]
    DiskFull {
        file: String,
        path: PathBuf,
        total: u64,
    },

    #[error("{}: {source} (while downloading {file}); check that the folder is writable", path.display())]
    Io {
        file: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(
        "the download of {file} was cancelled at {done} of {total} bytes; the partial file is kept and the next download resumes from there"
    )]
    Cancelled { file: String, done: u64, total: u64 },

    #[error(
        "another program is downloading {file} into the same cache (lock {}); wait for it to finish, or remove the lock file if no download is running",
        lock.display()
    )]
    Busy { file: String, lock: PathBuf },

    #[error(
        "{}: {found} where {id} needs {expected}; this is not the model the app runs: download it again, or point SELFRAG_GENERATOR / SELFRAG_EMBEDDER at a {expected} model",
        path.display()
    )]
    WrongArchitecture {
        id: String,
        path: PathBuf,
        found: String,
        expected: String,
    },
}

/// What the hub says about one file.
#[derive(Debug, Clone)]
struct RemoteFile {
    name: String,
    url: String,
    commit: String,
    etag: String,
    size: u64,
    /// The SHA-256 the bytes must have, and where that expectation comes from.
    sha256: Option<(String, String)>,
}

/// Downloads every file of `spec` that the cache lacks, then checks the model's architecture.
/// Files already complete in the cache are reused; partial ones are continued. With
/// `options.offline`, nothing is fetched and a missing file is an error that says so.
pub fn download_model(
    spec: &ModelSpec,
    options: &HubOptions,
    on_progress: &mut dyn FnMut(&DownloadProgress),
    cancel: &AtomicBool,
) -> Result<DownloadReport, DownloadError> {
    if !spec.downloadable {
        return Err(DownloadError::NotPublished {
            id: spec.id.clone(),
            repo: spec.repo.clone(),
            file: spec
                .primary_file()
                .map(|f| f.name.clone())
                .unwrap_or_default(),
        });
    }
    let cache = options.cache()?;
    if options.offline {
        return offline(spec, cache);
    }
    let client = Client::new(options);
    let mut meter = Meter::new(on_progress);

    // Ask about every file first: the total size is known before the first byte arrives, and a
    // 404 or a changed hash stops the download before gigabytes are spent on the other files.
    let mut remote = Vec::new();
    for file in &spec.files {
        if cancel.load(Ordering::Relaxed) {
            return Err(DownloadError::Cancelled {
                file: file.name.clone(),
                done: 0,
                total: 0,
            });
        }
        meter.emit(DownloadPhase::Checking, &file.name, true);
        match client.metadata(spec, file) {
            Ok(found) => remote.push(found),
            Err(DownloadError::NotFound { .. }) if !file.required => {
                tracing::info!(repo = %spec.repo, file = %file.name, "optional file not on the hub");
            }
            Err(e) => return Err(e),
        }
    }
    meter.total = remote.iter().map(|f| f.size).sum();

    let repo = repo_dir(cache, &spec.repo);
    let mut report = DownloadReport {
        found: PathBuf::new(),
        fetched_bytes: 0,
        cached_bytes: 0,
        resumed_bytes: 0,
    };
    for file in &remote {
        let blob = fetch_blob(&client, &repo, cache, file, &mut meter, &mut report, cancel)?;
        link_snapshot(&repo, &blob, file)?;
        if spec.revision != file.commit {
            write_ref(&repo, &spec.revision, &file.commit, &file.name)?;
        }
    }

    let location = locate_in(cache, spec);
    let found = location.found.ok_or_else(|| DownloadError::Io {
        file: spec
            .primary_file()
            .map(|f| f.name.clone())
            .unwrap_or_default(),
        path: repo.clone(),
        source: io::Error::new(
            io::ErrorKind::NotFound,
            "the files were downloaded but the snapshot is incomplete (a file the hub sent has another size than the manifest records)",
        ),
    })?;
    check_architecture(spec, &found)?;
    report.found = found;
    let last = remote.last().map(|f| f.name.as_str()).unwrap_or_default();
    meter.emit(DownloadPhase::Done, last, true);
    Ok(report)
}

/// The offline answer: the cached model, or an error naming the first missing file.
fn offline(spec: &ModelSpec, cache: &Path) -> Result<DownloadReport, DownloadError> {
    let location = locate_in(cache, spec);
    match location.found {
        Some(found) => {
            check_architecture(spec, &found)?;
            Ok(DownloadReport {
                found,
                fetched_bytes: 0,
                cached_bytes: 0,
                resumed_bytes: 0,
            })
        }
        None => {
            let missing = spec
                .files
                .iter()
                .filter(|f| f.required)
                .find(|f| crate::store::find_in_cache(cache, &spec.repo, &f.name).is_none())
                .or_else(|| spec.primary_file());
            Err(DownloadError::Offline {
                id: spec.id.clone(),
                repo: spec.repo.clone(),
                file: missing.map(|f| f.name.clone()).unwrap_or_default(),
                cache: cache.to_path_buf(),
            })
        }
    }
}

/// The blob of `file` complete in the cache: reused, continued or fetched, then checked.
fn fetch_blob(
    client: &Client,
    repo: &Path,
    cache: &Path,
    file: &RemoteFile,
    meter: &mut Meter<'_>,
    report: &mut DownloadReport,
    cancel: &AtomicBool,
) -> Result<PathBuf, DownloadError> {
    let blobs = repo.join("blobs");
    let blob = blobs.join(&file.etag);
    if fs::metadata(&blob).is_ok_and(|m| m.is_file() && m.len() == file.size) {
        report.cached_bytes += file.size;
        meter.done += file.size;
        meter.emit(DownloadPhase::Checking, &file.name, true);
        return Ok(blob);
    }
    let total = meter.total;
    fs::create_dir_all(&blobs).map_err(io_err_at(file, total, &blobs))?;
    let lock = BlobLock::take(cache, repo, file, total)?;
    let mut partial = PartialBlob::open(&blobs, file, meter, report)?;
    match receive(client, file, &mut partial, meter, report, cancel) {
        Ok(()) => {}
        // More bytes than announced: what is there cannot be resumed.
        Err(e @ DownloadError::SizeMismatch { .. }) => {
            partial.discard();
            return Err(e);
        }
        Err(e) => return Err(e),
    }
    partial.publish(&blob, file, meter)?;
    lock.release();
    Ok(blob)
}

/// `map_err` for an I/O error on `path` while fetching `file`.
fn io_err_at<'a>(
    file: &'a RemoteFile,
    total: u64,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> DownloadError + 'a {
    move |source| io_error(&file.name, path, total, source)
}

/// One writer per blob, across processes (the app and the CLI may both be pulling): an
/// exclusive lock on `.locks/REPO/ETAG.lock` in the cache, held until the blob is in place.
struct BlobLock {
    file: File,
    path: PathBuf,
}

impl BlobLock {
    /// Takes the lock, or says another program holds it.
    fn take(
        cache: &Path,
        repo: &Path,
        file: &RemoteFile,
        total: u64,
    ) -> Result<Self, DownloadError> {
        let dir = cache.join(".locks").join(
            repo.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
        fs::create_dir_all(&dir).map_err(io_err_at(file, total, &dir))?;
        let path = dir.join(format!("{}.lock", file.etag));
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err_at(file, total, &path))?;
        match lock.try_lock() {
            Ok(()) => Ok(Self { file: lock, path }),
            Err(fs::TryLockError::WouldBlock) => Err(DownloadError::Busy {
                file: file.name.clone(),
                lock: path,
            }),
            Err(fs::TryLockError::Error(e)) => Err(io_err_at(file, total, &path)(e)),
        }
    }

    /// Unlocks and removes the lock file (a lock left on an error is released when dropped).
    fn release(self) {
        drop(self.file);
        let _ = fs::remove_file(&self.path);
    }
}

/// The blob being written: `ETAG.incomplete` beside the blobs, the bytes it holds and their hash.
struct PartialBlob {
    path: PathBuf,
    out: File,
    /// Bytes of the file in place.
    have: u64,
    /// SHA-256 of those bytes (the hash covers the whole file).
    hasher: Sha256,
    /// Bytes of the file kept from an earlier run (counted in `report.resumed_bytes`).
    resumed: u64,
}

impl PartialBlob {
    /// Opens the partial file where an earlier run (ours, or huggingface_hub's `.part`) left it,
    /// hashing what is there, or starts it empty.
    fn open(
        blobs: &Path,
        file: &RemoteFile,
        meter: &mut Meter<'_>,
        report: &mut DownloadReport,
    ) -> Result<Self, DownloadError> {
        let path = blobs.join(format!("{}.incomplete", file.etag));
        let total = meter.total;
        let io_err = |source| io_error(&file.name, &path, total, source);
        let hf_hub_partial = blobs.join(format!("{}.part", file.etag));
        if !path.exists() && hf_hub_partial.is_file() {
            fs::rename(&hf_hub_partial, &path).map_err(io_err)?;
        }
        let mut out = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_err)?;
        let mut have = out.metadata().map_err(io_err)?.len();
        if have > file.size {
            out.set_len(0).map_err(io_err)?;
            have = 0;
        }
        // A resumed download reads its first part back for the hash.
        let mut hasher = Sha256::new();
        if have > 0 {
            meter.emit(DownloadPhase::Checking, &file.name, true);
            if file.sha256.is_some() {
                hash_prefix(&mut out, have, &mut hasher).map_err(io_err)?;
            }
            report.resumed_bytes += have;
            meter.done += have;
        }
        out.seek(SeekFrom::Start(have)).map_err(io_err)?;
        Ok(Self {
            path,
            out,
            have,
            hasher,
            resumed: have,
        })
    }

    /// Empties the file to fetch it from byte 0 again; what an earlier run left is no longer
    /// resumed, and what this run fetched stays counted as fetched.
    fn restart(&mut self, meter: &mut Meter<'_>, report: &mut DownloadReport) -> io::Result<()> {
        self.out.set_len(0)?;
        self.out.seek(SeekFrom::Start(0))?;
        self.hasher = Sha256::new();
        meter.done = meter.done.saturating_sub(self.have);
        report.resumed_bytes = report.resumed_bytes.saturating_sub(self.resumed);
        self.resumed = 0;
        self.have = 0;
        Ok(())
    }

    /// Closes and removes the file.
    fn discard(self) {
        drop(self.out);
        let _ = fs::remove_file(&self.path);
    }

    /// Syncs the file, checks its hash where one is known (a mismatch removes it) and renames
    /// it to `blob`.
    fn publish(
        self,
        blob: &Path,
        file: &RemoteFile,
        meter: &mut Meter<'_>,
    ) -> Result<(), DownloadError> {
        let Self {
            path, out, hasher, ..
        } = self;
        let total = meter.total;
        out.sync_all().map_err(io_err_at(file, total, &path))?;
        drop(out);
        if let Some((expected, source_of_hash)) = &file.sha256 {
            meter.emit(DownloadPhase::Verifying, &file.name, true);
            let actual = hex(&hasher.finalize());
            if &actual != expected {
                let _ = fs::remove_file(&path);
                return Err(DownloadError::HashMismatch {
                    file: file.name.clone(),
                    expected: expected.clone(),
                    actual,
                    source_of_hash: source_of_hash.clone(),
                });
            }
        }
        fs::rename(&path, blob).map_err(io_err_at(file, total, blob))
    }
}

/// Fetches the rest of `file` into `partial`, resuming after a dropped connection up to the
/// client's retries, until it holds the whole file.
fn receive(
    client: &Client,
    file: &RemoteFile,
    partial: &mut PartialBlob,
    meter: &mut Meter<'_>,
    report: &mut DownloadReport,
    cancel: &AtomicBool,
) -> Result<(), DownloadError> {
    let total = meter.total;
    let mut attempt = 0;
    while partial.have < file.size {
        let reason = match client.get_from(&file.url, partial.have) {
            Ok(response) => match receive_body(response, file, partial, meter, report, cancel)? {
                None => return Ok(()),
                Some(reason) => reason,
            },
            Err(e @ (DownloadError::Network { .. } | DownloadError::Http { .. })) => {
                if attempt >= client.retries {
                    return Err(if partial.have > 0 {
                        DownloadError::Interrupted {
                            file: file.name.clone(),
                            done: partial.have,
                            total: file.size,
                            reason: e.to_string(),
                        }
                    } else {
                        e
                    });
                }
                e.to_string()
            }
            Err(e) => return Err(e),
        };
        if attempt >= client.retries {
            partial
                .out
                .sync_all()
                .map_err(io_err_at(file, total, &partial.path))?;
            return Err(DownloadError::Interrupted {
                file: file.name.clone(),
                done: partial.have,
                total: file.size,
                reason,
            });
        }
        attempt += 1;
        tracing::warn!(file = %file.name, done = partial.have, %reason, attempt, "download interrupted, resuming");
        std::thread::sleep(Duration::from_millis(250 * u64::from(attempt)));
    }
    Ok(())
}

/// Copies one response into `partial`: `None` once the file is whole, or why it stopped short
/// (a reason to try again); an error where trying again cannot help.
fn receive_body(
    response: ureq::Response,
    file: &RemoteFile,
    partial: &mut PartialBlob,
    meter: &mut Meter<'_>,
    report: &mut DownloadReport,
    cancel: &AtomicBool,
) -> Result<Option<String>, DownloadError> {
    let total = meter.total;
    let io_err = |path: &Path, source| io_error(&file.name, path, total, source);
    let content_start = content_range_start(&response);
    if content_start != Some(partial.have) {
        // The server ignored the Range request (a whole file, from byte 0) or answered it from
        // another byte: start the file again.
        partial
            .restart(meter, report)
            .map_err(|e| io_err(&partial.path, e))?;
    }
    let mut body = response.into_reader();
    if content_start != Some(partial.have) {
        // Neither where it was asked to start nor at byte 0: this body belongs nowhere in the
        // file. It is dropped and the file fetched from the start.
        drop(body);
        return Ok(Some(format!(
            "the server answered the resume from byte {} instead",
            content_start.map_or_else(|| "?".to_owned(), |b| b.to_string())
        )));
    }
    match copy_body(
        &mut body,
        &mut partial.out,
        &mut partial.have,
        file,
        &mut partial.hasher,
        meter,
        report,
        cancel,
    ) {
        Ok(()) if partial.have == file.size => Ok(None),
        Ok(()) => Ok(Some("the connection closed early".to_owned())),
        Err(Copy::Cancelled) => {
            partial
                .out
                .sync_all()
                .map_err(|e| io_err(&partial.path, e))?;
            Err(DownloadError::Cancelled {
                file: file.name.clone(),
                done: partial.have,
                total: file.size,
            })
        }
        Err(Copy::TooLong) => Err(DownloadError::SizeMismatch {
            file: file.name.clone(),
            expected: file.size,
            received: partial.have + 1,
        }),
        Err(Copy::Write(e)) => Err(io_err(&partial.path, e)),
        Err(Copy::Read(e)) => Ok(Some(e.to_string())),
    }
}

/// How copying a response body into the partial file ended, short of the end of the body.
enum Copy {
    Cancelled,
    /// More bytes than the hub announced.
    TooLong,
    Read(io::Error),
    Write(io::Error),
}

#[allow(clippy::too_many_arguments)]
fn copy_body(
    body: &mut dyn Read,
    out: &mut File,
    have: &mut u64,
    file: &RemoteFile,
    hasher: &mut Sha256,
    meter: &mut Meter<'_>,
    report: &mut DownloadReport,
    cancel: &AtomicBool,
) -> Result<(), Copy> {
    let mut buf = vec![0u8; CHUNK];
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(Copy::Cancelled);
        }
        let n = match body.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Copy::Read(e)),
        };
        if *have + n as u64 > file.size {
            return Err(Copy::TooLong);
        }
        let bytes = buf.get(..n).unwrap_or_default();
        out.write_all(bytes).map_err(Copy::Write)?;
        hasher.update(bytes);
        *have += n as u64;
        report.fetched_bytes += n as u64;
        meter.fetched(n as u64);
        meter.emit(DownloadPhase::Downloading, &file.name, false);
    }
}

/// Feeds the first `len` bytes of `file` to `hasher`.
fn hash_prefix(file: &mut File, len: u64, hasher: &mut Sha256) -> io::Result<()> {
    file.seek(SeekFrom::Start(0))?;
    let copied = io::copy(&mut file.take(len), hasher)?;
    if copied != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the partial file shrank while it was read",
        ));
    }
    Ok(())
}

/// The first byte a `206 Partial Content` response starts at.
fn content_range_start(response: &ureq::Response) -> Option<u64> {
    if response.status() != 206 {
        return (response.status() == 200).then_some(0);
    }
    let range = response.header("Content-Range")?;
    let range = range.trim().strip_prefix("bytes")?.trim();
    range.split('-').next()?.trim().parse().ok()
}

/// `snapshots/{commit}/{file}` pointing at the blob (a relative symlink where the system allows).
fn link_snapshot(repo: &Path, blob: &Path, file: &RemoteFile) -> Result<(), DownloadError> {
    let pointer = repo.join("snapshots").join(&file.commit).join(&file.name);
    let io_err = |path: &Path| {
        let name = file.name.clone();
        let path = path.to_path_buf();
        move |source: io::Error| DownloadError::Io {
            file: name,
            path,
            source,
        }
    };
    if let Some(parent) = pointer.parent() {
        fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    if fs::symlink_metadata(&pointer).is_ok() {
        // A pointer that resolves to a blob of the right size is kept; a stale one is replaced.
        if fs::metadata(&pointer).is_ok_and(|m| m.len() == file.size) {
            return Ok(());
        }
        fs::remove_file(&pointer).map_err(io_err(&pointer))?;
    }
    let depth = file.name.split('/').count() + 1;
    let mut target = PathBuf::new();
    for _ in 0..depth {
        target.push("..");
    }
    target.push("blobs");
    target.push(&file.etag);
    symlink(&target, blob, &pointer).map_err(io_err(&pointer))
}

#[cfg(unix)]
fn symlink(relative_target: &Path, _blob: &Path, link: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(relative_target, link)
}

#[cfg(windows)]
fn symlink(relative_target: &Path, blob: &Path, link: &Path) -> io::Result<()> {
    // Symlinks need developer mode on Windows; huggingface_hub then keeps a copy instead.
    std::os::windows::fs::symlink_file(relative_target, link)
        .or_else(|_| fs::hard_link(blob, link))
        .or_else(|_| fs::copy(blob, link).map(|_| ()))
}

#[cfg(not(any(unix, windows)))]
fn symlink(_relative_target: &Path, blob: &Path, link: &Path) -> io::Result<()> {
    fs::hard_link(blob, link).or_else(|_| fs::copy(blob, link).map(|_| ()))
}

/// `refs/{revision}` = `commit`, written whole or not at all.
fn write_ref(repo: &Path, revision: &str, commit: &str, file: &str) -> Result<(), DownloadError> {
    let path = repo.join("refs").join(revision);
    let io_err = |source: io::Error| DownloadError::Io {
        file: file.to_owned(),
        path: path.clone(),
        source,
    };
    if fs::read_to_string(&path).is_ok_and(|c| c.trim() == commit) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io_err)?;
    }
    let tmp = path.with_extension("selfrag-tmp");
    fs::write(&tmp, commit).map_err(io_err)?;
    fs::rename(&tmp, &path).map_err(io_err)
}

/// An I/O error as the user should read it: a full disk says how to make room.
fn io_error(file: &str, path: &Path, total: u64, source: io::Error) -> DownloadError {
    let disk_full = matches!(
        source.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    ) || matches!(source.raw_os_error(), Some(28) if cfg!(unix));
    if disk_full {
        DownloadError::DiskFull {
            file: file.to_owned(),
            path: path.to_path_buf(),
            total,
        }
    } else {
        DownloadError::Io {
            file: file.to_owned(),
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Checks that the model at `found` (as [`crate::store::locate`] returns it) is the kind the
/// app runs: a Llama GGUF for a generator, a BERT folder for an embedder. Reads only headers.
pub fn check_architecture(spec: &ModelSpec, found: &Path) -> Result<(), DownloadError> {
    let wrong =
        |found_what: String, expected: &str, path: &Path| DownloadError::WrongArchitecture {
            id: spec.id.clone(),
            path: path.to_path_buf(),
            found: found_what,
            expected: expected.to_owned(),
        };
    match spec.role {
        ModelRole::Generator => {
            let mut reader = File::open(found).map_err(StoreError::io(found))?;
            let architecture = crate::gguf::architecture(&mut io::BufReader::new(&mut reader))
                .map_err(|reason| {
                    wrong(
                        format!("not a usable GGUF file ({reason})"),
                        "a Llama GGUF",
                        found,
                    )
                })?
                .unwrap_or_else(|| "no general.architecture".to_owned());
            if architecture != "llama" {
                return Err(wrong(
                    format!("a GGUF of architecture `{architecture}`"),
                    "a Llama GGUF",
                    found,
                ));
            }
            Ok(())
        }
        ModelRole::Embedder => {
            let config = found.join("config.json");
            let text = fs::read_to_string(&config).map_err(StoreError::io(&config))?;
            let model_type = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("model_type")?.as_str().map(str::to_owned));
            match model_type.as_deref() {
                Some("bert") => Ok(()),
                Some(other) => Err(wrong(format!("a `{other}` model"), "a BERT model", &config)),
                None => Err(wrong(
                    "a config.json without model_type".to_owned(),
                    "a BERT model",
                    &config,
                )),
            }
        }
    }
}

/// Bytes of interrupted downloads of `spec`'s repository waiting in `cache` to be resumed.
pub fn partial_bytes(spec: &ModelSpec, cache: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(repo_dir(cache, &spec.repo).join("blobs")) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".incomplete") || name.ends_with(".part")
        })
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// The verdict on one cached file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Size and SHA-256 match what is known.
    Ok,
    /// Present, of the recorded size if one is recorded, but no hash is known to compare with.
    Unverified,
    /// Not in the cache.
    Missing,
    /// Another size than the manifest records: truncated or a different file.
    WrongSize,
    /// Another SHA-256 than expected: corrupt.
    WrongHash,
}

/// One file of a cached model, checked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileCheck {
    pub file: String,
    pub required: bool,
    pub path: Option<PathBuf>,
    pub size: Option<u64>,
    pub expected_size: Option<u64>,
    pub sha256: Option<String>,
    pub expected_sha256: Option<String>,
    /// Where the expected hash comes from (the manifest, or the blob's LFS name).
    pub expected_from: Option<String>,
    pub verdict: Verdict,
    /// One sentence for people: what is wrong and what to do.
    pub detail: String,
}

/// Every file of `spec` in `cache`, checked for size and SHA-256 (the bytes are read in full),
/// and the architecture of the whole when it is complete.
pub fn verify_model(
    spec: &ModelSpec,
    cache: &Path,
    on_progress: &mut dyn FnMut(&DownloadProgress),
) -> (Vec<FileCheck>, Option<DownloadError>) {
    let location = locate_in(cache, spec);
    let snapshot = location.searched.iter().find(|d| d.is_dir()).cloned();
    let mut meter = Meter::new(on_progress);
    let paths: Vec<Option<PathBuf>> = spec
        .files
        .iter()
        .map(|f| {
            snapshot
                .as_ref()
                .map(|dir| dir.join(&f.name))
                .filter(|p| p.is_file())
        })
        .collect();
    meter.total = paths
        .iter()
        .flatten()
        .filter_map(|p| fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let checks = spec
        .files
        .iter()
        .zip(paths)
        .map(|(file, path)| check_file(spec, file, path, &mut meter))
        .collect();
    let architecture = location
        .found
        .as_deref()
        .and_then(|found| check_architecture(spec, found).err());
    (checks, architecture)
}

fn check_file(
    spec: &ModelSpec,
    file: &ModelFile,
    path: Option<PathBuf>,
    meter: &mut Meter<'_>,
) -> FileCheck {
    let mut check = FileCheck {
        file: file.name.clone(),
        required: file.required,
        path: path.clone(),
        size: None,
        expected_size: file.size_bytes,
        sha256: None,
        expected_sha256: None,
        expected_from: None,
        verdict: Verdict::Missing,
        detail: String::new(),
    };
    let Some(path) = path else {
        check.detail = if file.required {
            format!(
                "not in the Hugging Face cache; run `selfrag models pull {}`",
                spec.id
            )
        } else {
            "not in the cache (optional)".to_owned()
        };
        return check;
    };
    let size = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    check.size = Some(size);
    if let Some(expected) = file.sha256.clone() {
        check.expected_sha256 = Some(expected);
        check.expected_from = Some(format!("models/{}.toml", spec.id));
    } else if let Some(lfs) = lfs_sha256_of_blob(&path) {
        check.expected_sha256 = Some(lfs);
        check.expected_from = Some("the hub's Git LFS SHA-256 (the blob's name)".to_owned());
    }
    if let Some(expected) = file.size_bytes
        && expected != size
    {
        check.verdict = Verdict::WrongSize;
        check.detail = format!(
            "{size} bytes where the manifest records {expected}: truncated or another file; run `selfrag models pull {}` again",
            spec.id
        );
        meter.done += size;
        return check;
    }
    let Some(expected) = check.expected_sha256.clone() else {
        check.verdict = Verdict::Unverified;
        check.detail =
            "present; no SHA-256 is known for this file, so only its presence was checked"
                .to_owned();
        meter.done += size;
        return check;
    };
    meter.emit(DownloadPhase::Verifying, &file.name, true);
    match sha256_of(&path, &file.name, meter) {
        Ok(actual) if actual == expected => {
            check.verdict = Verdict::Ok;
            check.detail = "size and SHA-256 match".to_owned();
            check.sha256 = Some(actual);
        }
        Ok(actual) => {
            check.verdict = Verdict::WrongHash;
            check.detail = format!(
                "SHA-256 {actual} is not the expected {expected}: the file is corrupt; delete {} and run `selfrag models pull {}`",
                path.display(),
                spec.id
            );
            check.sha256 = Some(actual);
        }
        Err(e) => {
            check.verdict = Verdict::WrongHash;
            check.detail = format!("cannot be read ({e}); download it again");
        }
    }
    check
}

/// The SHA-256 a snapshot file must have when it links to a blob named by one (Git LFS files).
fn lfs_sha256_of_blob(pointer: &Path) -> Option<String> {
    let blob = fs::canonicalize(pointer).ok()?;
    let name = blob.file_name()?.to_str()?;
    let in_blobs = blob
        .parent()
        .and_then(|p| p.file_name())
        .is_some_and(|n| n == "blobs");
    (in_blobs && is_sha256(name)).then(|| name.to_owned())
}

fn sha256_of(path: &Path, name: &str, meter: &mut Meter<'_>) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(buf.get(..n).unwrap_or_default());
        meter.done += n as u64;
        meter.emit(DownloadPhase::Verifying, name, false);
    }
    Ok(hex(&hasher.finalize()))
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The HTTP side: two agents (one that stays on the hub's host for metadata, one that follows
/// redirects to the CDN for bytes) and the headers every request carries.
struct Client {
    endpoint: String,
    token: Option<String>,
    retries: u32,
    metadata_agent: ureq::Agent,
    download_agent: ureq::Agent,
}

impl Client {
    fn new(options: &HubOptions) -> Self {
        let proxy = use_proxy(&options.endpoint, std::env::var("NO_PROXY").ok().as_deref());
        let agent = |redirects: u32| {
            ureq::AgentBuilder::new()
                .try_proxy_from_env(proxy)
                .redirects(redirects)
                .timeout_connect(Duration::from_secs(20))
                .timeout_read(options.read_timeout)
                .user_agent(concat!(
                    "selfrag-desktop/",
                    env!("CARGO_PKG_VERSION"),
                    "; hf_hub/0.4; rust/unknown"
                ))
                .build()
        };
        Self {
            endpoint: options.endpoint.clone(),
            token: options.token.clone(),
            retries: options.retries,
            metadata_agent: agent(0),
            download_agent: agent(10),
        }
    }

    fn url(&self, spec: &ModelSpec, file: &str) -> String {
        format!(
            "{}/{}/resolve/{}/{}",
            self.endpoint,
            spec.repo,
            spec.revision.replace('/', "%2F"),
            file
        )
    }

    fn authorized(&self, request: ureq::Request) -> ureq::Request {
        let request = request.set("Accept-Encoding", "identity");
        match &self.token {
            Some(token) => request.set("Authorization", &format!("Bearer {token}")),
            None => request,
        }
    }

    /// `HEAD` on the resolve URL, following only redirects on the same host (renamed repos,
    /// `resolve-cache`), as huggingface_hub does; a redirect to a CDN already has the headers.
    fn metadata(&self, spec: &ModelSpec, file: &ModelFile) -> Result<RemoteFile, DownloadError> {
        let url = self.url(spec, &file.name);
        let mut current = url.clone();
        let mut response = None;
        for _ in 0..5 {
            let r = self
                .authorized(self.metadata_agent.head(&current))
                .call()
                .map_err(|e| self.http_error(e, spec, &file.name, &current))?;
            let relative = (300..400).contains(&r.status())
                && r.header("Location").is_some_and(|l| l.starts_with('/'));
            if relative {
                let location = r.header("Location").unwrap_or_default().to_owned();
                current = format!("{}{location}", origin(&current));
                continue;
            }
            response = Some(r);
            break;
        }
        let Some(r) = response else {
            return Err(DownloadError::Network {
                file: file.name.clone(),
                url,
                reason: "too many redirects".to_owned(),
            });
        };
        let header = |name: &str| r.header(name).map(|v| v.trim().to_owned());
        let missing = |name: &str| DownloadError::NotAHub {
            file: file.name.clone(),
            url: url.clone(),
            header: name.to_owned(),
        };
        let commit = header("X-Repo-Commit").ok_or_else(|| missing("X-Repo-Commit"))?;
        let etag = header("X-Linked-Etag")
            .or_else(|| header("ETag"))
            .ok_or_else(|| missing("ETag"))?;
        let etag = etag.trim_start_matches("W/").replace('"', "");
        let size = header("X-Linked-Size")
            .or_else(|| header("Content-Length"))
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| missing("X-Linked-Size or Content-Length"))?;
        let safe = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if !safe(&etag) || !safe(&commit) {
            return Err(DownloadError::NotAHub {
                file: file.name.clone(),
                url,
                header: "a well-formed ETag and X-Repo-Commit".to_owned(),
            });
        }
        if let Some(expected) = file.size_bytes
            && expected != size
        {
            return Err(DownloadError::ManifestMismatch {
                repo: spec.repo.clone(),
                file: file.name.clone(),
                what: format!("{size} bytes on the hub, {expected} in the manifest"),
            });
        }
        let hub_sha = is_sha256(&etag).then(|| etag.clone());
        let sha256 = match (&file.sha256, hub_sha) {
            (Some(ours), Some(hub)) if *ours != hub => {
                return Err(DownloadError::ManifestMismatch {
                    repo: spec.repo.clone(),
                    file: file.name.clone(),
                    what: format!("SHA-256 {hub} on the hub, {ours} in the manifest"),
                });
            }
            (Some(ours), _) => Some((ours.clone(), format!("recorded in models/{}.toml", spec.id))),
            (None, Some(hub)) => Some((hub, "the hub's Git LFS SHA-256".to_owned())),
            (None, None) => None,
        };
        Ok(RemoteFile {
            name: file.name.clone(),
            url,
            commit,
            etag,
            size,
            sha256,
        })
    }

    /// `GET` the file from byte `start` on.
    fn get_from(&self, url: &str, start: u64) -> Result<ureq::Response, DownloadError> {
        let mut request = self.authorized(self.download_agent.get(url));
        if start > 0 {
            request = request.set("Range", &format!("bytes={start}-"));
        }
        let name = url.rsplit('/').next().unwrap_or(url);
        request.call().map_err(|e| match e {
            ureq::Error::Status(status, _) => DownloadError::Http {
                file: name.to_owned(),
                url: url.to_owned(),
                status,
            },
            ureq::Error::Transport(t) => DownloadError::Network {
                file: name.to_owned(),
                url: url.to_owned(),
                reason: t.to_string(),
            },
        })
    }

    fn http_error(&self, e: ureq::Error, spec: &ModelSpec, file: &str, url: &str) -> DownloadError {
        match e {
            ureq::Error::Status(status, response) => {
                let code = response
                    .header("X-Error-Code")
                    .unwrap_or_default()
                    .to_owned();
                match (status, code.as_str()) {
                    (401 | 403, "RepoNotFound") | (404, "RepoNotFound") => {
                        DownloadError::NotFound {
                            repo: spec.repo.clone(),
                            file: file.to_owned(),
                            url: url.to_owned(),
                            what: format!("repository {} (or it is private)", spec.repo),
                        }
                    }
                    (401 | 403, _) => DownloadError::Unauthorized {
                        repo: spec.repo.clone(),
                        file: file.to_owned(),
                        url: url.to_owned(),
                        endpoint: self.endpoint.clone(),
                        status,
                    },
                    (404, "RevisionNotFound") => DownloadError::NotFound {
                        repo: spec.repo.clone(),
                        file: file.to_owned(),
                        url: url.to_owned(),
                        what: format!("revision {} of {}", spec.revision, spec.repo),
                    },
                    (404, _) => DownloadError::NotFound {
                        repo: spec.repo.clone(),
                        file: file.to_owned(),
                        url: url.to_owned(),
                        what: format!("file {file} in {} at revision {}", spec.repo, spec.revision),
                    },
                    _ => DownloadError::Http {
                        file: file.to_owned(),
                        url: url.to_owned(),
                        status,
                    },
                }
            }
            ureq::Error::Transport(t) => DownloadError::Network {
                file: file.to_owned(),
                url: url.to_owned(),
                reason: t.to_string(),
            },
        }
    }
}

/// Whether requests to `endpoint` may go through the proxy of `HTTPS_PROXY` and the like: not
/// for this machine (a local mirror, the tests' stand-in hub) nor for a host `no_proxy` lists
/// (ureq itself does not read `NO_PROXY`).
fn use_proxy(endpoint: &str, no_proxy: Option<&str>) -> bool {
    let origin = origin(endpoint);
    let host_port = origin.split("://").nth(1).unwrap_or(origin);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => host_port.split(':').next().unwrap_or(host_port),
    };
    let host = host.to_ascii_lowercase();
    if host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
    {
        return false;
    }
    let listed = no_proxy.unwrap_or_default().split(',').any(|entry| {
        let entry = entry.trim().trim_start_matches('.').to_ascii_lowercase();
        entry == "*"
            || (!entry.is_empty() && (host == entry || host.ends_with(&format!(".{entry}"))))
    });
    !listed
}

/// `scheme://host[:port]` of `url`.
fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url.get(after_scheme..).and_then(|rest| rest.find('/')) {
        Some(i) => url.get(..after_scheme + i).unwrap_or(url),
        None => url,
    }
}

/// Counts bytes, measures the rate, and sends throttled progress events.
struct Meter<'a> {
    on_progress: &'a mut dyn FnMut(&DownloadProgress),
    total: u64,
    done: u64,
    fetched: u64,
    samples: VecDeque<(Instant, u64)>,
    last_emit: Option<(Instant, DownloadPhase, String)>,
}

impl<'a> Meter<'a> {
    fn new(on_progress: &'a mut dyn FnMut(&DownloadProgress)) -> Self {
        Self {
            on_progress,
            total: 0,
            done: 0,
            fetched: 0,
            samples: VecDeque::new(),
            last_emit: None,
        }
    }

    fn fetched(&mut self, n: u64) {
        self.done += n;
        self.fetched += n;
        let now = Instant::now();
        self.samples.push_back((now, self.fetched));
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > RATE_WINDOW)
            && self.samples.len() > 2
        {
            self.samples.pop_front();
        }
    }

    fn rate(&self) -> f64 {
        match (self.samples.front(), self.samples.back()) {
            (Some((t0, b0)), Some((t1, b1))) if t1 > t0 => {
                (b1 - b0) as f64 / t1.duration_since(*t0).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    /// Sends an event when `force`d, when the phase or file changed, or every [`EMIT_EVERY`].
    fn emit(&mut self, phase: DownloadPhase, file: &str, force: bool) {
        let now = Instant::now();
        let due = match &self.last_emit {
            None => true,
            Some((at, last_phase, last_file)) => {
                force
                    || *last_phase != phase
                    || last_file != file
                    || now.duration_since(*at) >= EMIT_EVERY
            }
        };
        if !due {
            return;
        }
        let rate = self.rate();
        let left = self.total.saturating_sub(self.done);
        let eta = (rate > 0.0 && phase == DownloadPhase::Downloading).then(|| left as f64 / rate);
        (self.on_progress)(&DownloadProgress {
            phase,
            file: file.to_owned(),
            bytes_done: self.done,
            bytes_total: self.total,
            bytes_per_second: rate,
            eta_seconds: if phase == DownloadPhase::Done {
                Some(0.0)
            } else {
                eta
            },
        });
        self.last_emit = Some((now, phase, file.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_honour_the_hugging_face_variables() {
        let vars = |key: &str| match key {
            "HF_ENDPOINT" => Some("http://mirror.example/".to_owned()),
            "HF_HUB_OFFLINE" => Some("yes".to_owned()),
            "HF_TOKEN" => Some(" hf_abc ".to_owned()),
            _ => None,
        };
        let options = HubOptions::from_vars(vars, Some(PathBuf::from("/c/hub")));
        assert_eq!(options.endpoint, "http://mirror.example");
        assert!(options.offline);
        assert_eq!(options.token.as_deref(), Some("hf_abc"));
        let shown = format!("{options:?}");
        assert!(
            !shown.contains("hf_abc") && shown.contains("<redacted>"),
            "{shown}"
        );

        let defaults = HubOptions::from_vars(|_| None, None);
        assert_eq!(defaults.endpoint, DEFAULT_ENDPOINT);
        assert!(!defaults.offline);
        assert!(matches!(defaults.cache(), Err(DownloadError::NoCache)));
        let zero = HubOptions::from_vars(|k| (k == "HF_HUB_OFFLINE").then(|| "0".to_owned()), None);
        assert!(!zero.offline);
    }

    #[test]
    fn a_full_disk_says_how_to_make_room() {
        let e = io_error(
            "model.gguf",
            Path::new("/c/hub/blobs/x.incomplete"),
            4_000,
            io::Error::from(io::ErrorKind::StorageFull),
        );
        let text = e.to_string();
        assert!(matches!(e, DownloadError::DiskFull { .. }), "{text}");
        assert!(
            text.contains("model.gguf") && text.contains("HF_HOME"),
            "{text}"
        );
        let other = io_error(
            "a",
            Path::new("/x"),
            0,
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        assert!(matches!(other, DownloadError::Io { .. }));
    }

    #[test]
    fn origin_is_scheme_and_host() {
        assert_eq!(
            origin("http://127.0.0.1:9/a/resolve/main/f"),
            "http://127.0.0.1:9"
        );
        assert_eq!(origin("https://huggingface.co"), "https://huggingface.co");
    }

    #[test]
    fn this_machine_and_no_proxy_hosts_bypass_the_proxy() {
        assert!(!use_proxy("http://127.0.0.1:8080", None));
        assert!(!use_proxy("http://[::1]:9", None));
        assert!(!use_proxy("http://localhost:1", None));
        assert!(use_proxy("https://huggingface.co", None));
        assert!(!use_proxy(
            "https://huggingface.co",
            Some("example.org, .huggingface.co")
        ));
        assert!(use_proxy("https://huggingface.co", Some("example.org")));
    }

    #[test]
    fn the_rate_and_eta_come_from_recent_bytes() {
        let mut events = Vec::new();
        let mut sink = |p: &DownloadProgress| events.push(p.clone());
        let mut meter = Meter::new(&mut sink);
        meter.total = 1_000_000;
        meter.fetched(1000);
        std::thread::sleep(Duration::from_millis(20));
        meter.fetched(1000);
        meter.emit(DownloadPhase::Downloading, "f", true);
        drop(meter);
        let last = events.last().cloned();
        let rate = last.as_ref().map_or(0.0, |p| p.bytes_per_second);
        assert!(rate > 0.0 && rate < 1000.0 / 0.019, "rate {rate}");
        assert!(
            last.and_then(|p| p.eta_seconds)
                .is_some_and(|eta| eta > 0.0)
        );
    }
}
