//! Model downloads against a local stand-in for the Hugging Face hub: a std `TcpListener` on
//! 127.0.0.1 serving the hub's resolve URLs (HEAD metadata, a redirect to a "CDN" for Git LFS
//! files, Range requests), able to drop a connection midway, answer 404 or send wrong bytes.
//! Nothing here touches the internet.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use selfrag_hub::download::{
    DownloadError, DownloadPhase, DownloadProgress, HubOptions, Verdict, download_model,
    verify_model,
};
use selfrag_hub::store::{ModelSpec, locate_in};
use sha2::{Digest, Sha256};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How the fake hub serves one file.
#[derive(Clone, Default)]
struct Served {
    bytes: Vec<u8>,
    /// Stored with Git LFS: the etag is the SHA-256 and the bytes come from a redirect.
    lfs: bool,
    /// Bytes sent instead of `bytes` (same headers): a corrupting proxy.
    send_instead: Option<Vec<u8>>,
    /// The next this-many GETs of the bytes stop after `drop_after` bytes.
    drop_gets: usize,
    drop_after: usize,
    /// Seconds to wait between chunks, to keep a transfer going while a test acts.
    slow: bool,
    /// Ranges are answered from this many bytes before the start asked for: a server (or a
    /// proxy) that gets resumes wrong.
    range_early: usize,
}

#[derive(Debug, Clone)]
struct Logged {
    method: String,
    path: String,
    range_start: Option<u64>,
    body_bytes: u64,
}

#[derive(Default)]
struct HubState {
    /// By path after the host, e.g. `/org/name/resolve/main/file`.
    files: HashMap<String, Served>,
    log: Vec<Logged>,
}

struct Hub {
    url: String,
    state: Arc<Mutex<HubState>>,
}

impl Hub {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(HubState::default()));
        let shared = state.clone();
        let base = url.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                let base = base.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &state, &base);
                });
            }
        });
        Self { url, state }
    }

    fn put(&self, repo: &str, file: &str, served: Served) {
        let path = format!("/{repo}/resolve/main/{file}");
        self.state.lock().unwrap().files.insert(path, served);
    }

    fn with<R>(&self, f: impl FnOnce(&mut HubState) -> R) -> R {
        f(&mut self.state.lock().unwrap())
    }

    fn log(&self) -> Vec<Logged> {
        self.with(|s| s.log.clone())
    }

    /// Body bytes sent for GETs (of the resolve URL or the CDN), in all.
    fn bytes_sent(&self) -> u64 {
        self.log()
            .iter()
            .filter(|l| l.method == "GET")
            .map(|l| l.body_bytes)
            .sum()
    }

    fn options(&self, cache: &Path) -> HubOptions {
        let mut options = HubOptions::from_vars(|_| None, Some(cache.to_path_buf()));
        options.endpoint = self.url.clone();
        options.retries = 0;
        options.read_timeout = Duration::from_secs(10);
        options
    }
}

fn serve(stream: TcpStream, state: &Mutex<HubState>, base: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut range_start = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("range")
        {
            range_start = value
                .trim()
                .strip_prefix("bytes=")
                .and_then(|r| r.split('-').next())
                .and_then(|s| s.parse::<u64>().ok());
        }
    }
    let mut out = stream;
    // A pinned manifest asks for the commit the hub named; this hub has one commit.
    let path = path.replace(&format!("/resolve/{COMMIT}/"), "/resolve/main/");

    // The model API: the commit `main` names and its files, as the hub lists them.
    if let Some(repo) = path
        .strip_prefix("/api/models/")
        .and_then(|rest| rest.split_once("/revision/main"))
        .map(|(repo, _)| repo.to_owned())
    {
        let prefix = format!("/{repo}/resolve/main/");
        let siblings: Vec<String> = state
            .lock()
            .unwrap()
            .files
            .iter()
            .filter_map(|(path, served)| {
                let name = path.strip_prefix(&prefix)?;
                let size = served.bytes.len();
                let lfs = if served.lfs {
                    format!(
                        r#","lfs":{{"sha256":"{}","size":{size},"pointerSize":132}}"#,
                        sha256_hex(&served.bytes)
                    )
                } else {
                    String::new()
                };
                Some(format!(r#"{{"rfilename":"{name}","size":{size}{lfs}}}"#))
            })
            .collect();
        let body = format!(
            r#"{{"id":"{repo}","sha":"{COMMIT}","siblings":[{}]}}"#,
            siblings.join(",")
        );
        return out.write_all(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
    }

    // The "CDN": /cdn/{sha256} serves the LFS file whose etag that is.
    let (served, is_cdn) = {
        let mut s = state.lock().unwrap();
        let found = match path.strip_prefix("/cdn/") {
            Some(sha) => s
                .files
                .values()
                .find(|f| f.lfs && sha256_hex(&f.bytes) == sha)
                .cloned()
                .map(|f| (f, true)),
            None => s.files.get(&path).cloned().map(|f| (f, false)),
        };
        match found {
            Some(found) => found,
            None => {
                s.log.push(Logged {
                    method,
                    path,
                    range_start,
                    body_bytes: 0,
                });
                drop(s);
                return out.write_all(
                    b"HTTP/1.1 404 Not Found\r\nX-Error-Code: EntryNotFound\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        }
    };
    let sha = sha256_hex(&served.bytes);
    let size = served.bytes.len();
    let mut headers = format!("X-Repo-Commit: {COMMIT}\r\nConnection: close\r\n");
    if served.lfs && !is_cdn {
        // The hub answers LFS files with a redirect to the CDN carrying the metadata.
        headers.push_str(&format!(
            "X-Linked-Etag: \"{sha}\"\r\nX-Linked-Size: {size}\r\nETag: \"gitsha-{}\"\r\nLocation: {base}/cdn/{sha}\r\nContent-Length: 0\r\n\r\n",
            &sha[..8]
        ));
        state.lock().unwrap().log.push(Logged {
            method,
            path,
            range_start,
            body_bytes: 0,
        });
        return out.write_all(format!("HTTP/1.1 302 Found\r\n{headers}").as_bytes());
    }
    if !served.lfs {
        headers.push_str(&format!("ETag: \"{}\"\r\n", &sha[..40]));
    }
    let body = served.send_instead.clone().unwrap_or(served.bytes.clone());
    let start = (range_start.unwrap_or(0).min(size as u64) as usize).saturating_sub(
        if range_start.is_some() {
            served.range_early
        } else {
            0
        },
    );
    let status = if range_start.is_some() {
        headers.push_str(&format!(
            "Content-Range: bytes {start}-{}/{size}\r\n",
            size.saturating_sub(1)
        ));
        "206 Partial Content"
    } else {
        "200 OK"
    };
    let chunk = &body[start..];
    headers.push_str(&format!("Content-Length: {}\r\n\r\n", chunk.len()));
    out.write_all(format!("HTTP/1.1 {status}\r\n{headers}").as_bytes())?;
    if method == "HEAD" {
        state.lock().unwrap().log.push(Logged {
            method,
            path,
            range_start,
            body_bytes: 0,
        });
        return Ok(());
    }
    let drop_now = {
        let mut s = state.lock().unwrap();
        let key = s
            .files
            .iter()
            .find(|(_, f)| f.bytes == served.bytes)
            .map(|(k, _)| k.clone());
        let entry = key.and_then(|k| s.files.get_mut(&k));
        match entry {
            Some(f) if f.drop_gets > 0 => {
                f.drop_gets -= 1;
                Some(f.drop_after)
            }
            _ => None,
        }
    };
    let send = drop_now.map_or(chunk.len(), |n| n.min(chunk.len()));
    let mut sent = 0;
    for piece in chunk[..send].chunks(16 * 1024) {
        if out.write_all(piece).is_err() {
            break;
        }
        sent += piece.len();
        if served.slow {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let _ = out.flush();
    state.lock().unwrap().log.push(Logged {
        method,
        path,
        range_start,
        body_bytes: sent as u64,
    });
    // Dropping the stream closes it: with `drop_now`, before Content-Length bytes were sent.
    Ok(())
}

/// Deterministic bytes that do not compress or repeat.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u8
        })
        .collect()
}

const BERT_CONFIG: &str =
    r#"{"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 32}"#;

/// An embedder manifest whose weights are `weights.len()` bytes of noise served over LFS.
fn embedder(hub: &Hub, repo: &str, weights: &[u8]) -> ModelSpec {
    hub.put(
        repo,
        "config.json",
        Served {
            bytes: BERT_CONFIG.as_bytes().to_vec(),
            ..Served::default()
        },
    );
    hub.put(
        repo,
        "pytorch_model.bin",
        Served {
            bytes: weights.to_vec(),
            lfs: true,
            ..Served::default()
        },
    );
    hub.put(
        repo,
        "vocab.txt",
        Served {
            bytes: b"[PAD]\n[UNK]\nhello\n".to_vec(),
            ..Served::default()
        },
    );
    embedder_spec(repo, weights.len())
}

/// The manifest of [`embedder`], without serving anything (for a child process).
fn embedder_spec(repo: &str, weights_len: usize) -> ModelSpec {
    ModelSpec::from_toml(
        "test.toml",
        &format!(
            r#"
id = "test-embedder"
role = "embedder"
description = "test"
repo = "{repo}"
revision = "main"
license = "mit"
size_bytes = {}

[[files]]
name = "config.json"

[[files]]
name = "pytorch_model.bin"

[[files]]
name = "vocab.txt"

[[files]]
name = "tokenizer_config.json"
required = false
"#,
            weights_len
        ),
    )
    .unwrap()
}

fn generator_spec(repo: &str, file: &str, extra: &str) -> ModelSpec {
    ModelSpec::from_toml(
        "gen.toml",
        &format!(
            r#"
id = "test-generator"
role = "generator"
description = "test"
repo = "{repo}"
revision = "main"
license = "mit"
size_bytes = 1

[[files]]
name = "{file}"
{extra}
"#
        ),
    )
    .unwrap()
}

fn run(
    spec: &ModelSpec,
    options: &HubOptions,
) -> (
    Result<selfrag_hub::download::DownloadReport, DownloadError>,
    Vec<DownloadProgress>,
) {
    let mut events = Vec::new();
    let cancel = AtomicBool::new(false);
    let result = download_model(spec, options, &mut |p| events.push(p.clone()), &cancel);
    (result, events)
}

fn repo_dir(cache: &Path, repo: &str) -> PathBuf {
    cache.join(format!("models--{}", repo.replace('/', "--")))
}

fn leftovers(cache: &Path, repo: &str) -> Vec<String> {
    std::fs::read_dir(repo_dir(cache, repo).join("blobs"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_fresh_download_lands_in_the_hf_cache_layout_where_locate_finds_it() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let gguf_dir = tempfile::tempdir().unwrap();
    let gguf_path = gguf_dir.path().join("tiny.gguf");
    selfrag_fixtures::write_tiny_llama_gguf(&gguf_path).unwrap();
    let gguf = std::fs::read(&gguf_path).unwrap();
    let repo = "test-org/tiny-selfrag-GGUF";
    hub.put(
        repo,
        "tiny.q4_k_m.gguf",
        Served {
            bytes: gguf.clone(),
            lfs: true,
            ..Served::default()
        },
    );
    let spec = generator_spec(
        repo,
        "tiny.q4_k_m.gguf",
        &format!(
            "sha256 = \"{}\"\nsize_bytes = {}",
            sha256_hex(&gguf),
            gguf.len()
        ),
    );
    let options = hub.options(cache.path());

    assert_eq!(locate_in(cache.path(), &spec).found, None);
    let (result, events) = run(&spec, &options);
    let report = result.unwrap();
    assert_eq!(report.fetched_bytes, gguf.len() as u64);

    // blobs/{sha256}, snapshots/{commit}/{file} -> ../../blobs/{sha256}, refs/main = commit.
    let dir = repo_dir(cache.path(), repo);
    let sha = sha256_hex(&gguf);
    assert_eq!(std::fs::read(dir.join("blobs").join(&sha)).unwrap(), gguf);
    let pointer = dir.join("snapshots").join(COMMIT).join("tiny.q4_k_m.gguf");
    let target = std::fs::read_link(&pointer).unwrap();
    assert_eq!(target, Path::new("../../blobs").join(&sha));
    assert_eq!(
        std::fs::read_to_string(dir.join("refs").join("main")).unwrap(),
        COMMIT
    );
    assert_eq!(leftovers(cache.path(), repo), vec![sha.clone()]);
    assert_eq!(locate_in(cache.path(), &spec).found, Some(pointer.clone()));
    assert_eq!(report.found, pointer);

    // Progress: total known up front, bytes only grow, the last event says done.
    assert!(events.iter().any(|e| e.phase == DownloadPhase::Downloading));
    let last = events.last().unwrap();
    assert_eq!(last.phase, DownloadPhase::Done);
    assert_eq!(
        (last.bytes_done, last.bytes_total),
        (gguf.len() as u64, gguf.len() as u64)
    );
    assert!(
        events
            .windows(2)
            .all(|w| w[0].bytes_done <= w[1].bytes_done)
    );

    // A second pull finds everything in the cache and fetches nothing.
    let before = hub.bytes_sent();
    let (again, _) = run(&spec, &options);
    let again = again.unwrap();
    assert_eq!(
        (again.fetched_bytes, again.cached_bytes),
        (0, gguf.len() as u64)
    );
    assert_eq!(hub.bytes_sent(), before);

    // An embedder: three files, the optional fourth absent on the hub, the folder found.
    let weights = noise(300_000, 1);
    let bert = embedder(&hub, "test-org/bert", &weights);
    let (result, _) = run(&bert, &options);
    let found = result.unwrap().found;
    assert_eq!(
        found,
        repo_dir(cache.path(), "test-org/bert")
            .join("snapshots")
            .join(COMMIT)
    );
    assert_eq!(
        std::fs::read(found.join("pytorch_model.bin")).unwrap(),
        weights
    );
    assert_eq!(locate_in(cache.path(), &bert).found, Some(found));

    // The check of what is cached: every file with a known hash matches.
    let (checks, architecture) = verify_model(&bert, cache.path(), &mut |_| {});
    assert!(architecture.is_none());
    let weights_check = checks
        .iter()
        .find(|c| c.file == "pytorch_model.bin")
        .unwrap();
    assert_eq!(weights_check.verdict, Verdict::Ok, "{weights_check:?}");
    let config_check = checks.iter().find(|c| c.file == "config.json").unwrap();
    assert_eq!(config_check.verdict, Verdict::Unverified);
    let optional = checks
        .iter()
        .find(|c| c.file == "tokenizer_config.json")
        .unwrap();
    assert_eq!(optional.verdict, Verdict::Missing);
}

#[test]
fn an_interrupted_download_resumes_without_fetching_the_start_again() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let weights = noise(1_000_000, 2);
    let repo = "test-org/resume";
    let spec = embedder(&hub, repo, &weights);
    hub.with(|s| {
        let f = s
            .files
            .get_mut(&format!("/{repo}/resolve/main/pytorch_model.bin"))
            .unwrap();
        f.drop_gets = 1;
        f.drop_after = 600_000;
    });
    let options = hub.options(cache.path());

    let (first, _) = run(&spec, &options);
    let err = first.unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(
            err,
            DownloadError::Interrupted {
                done: 600_000,
                total: 1_000_000,
                ..
            }
        ),
        "{message}"
    );
    assert!(
        message.contains("pytorch_model.bin") && message.contains("resume"),
        "{message}"
    );
    let sha = sha256_hex(&weights);
    let partial = repo_dir(cache.path(), repo)
        .join("blobs")
        .join(format!("{sha}.incomplete"));
    assert_eq!(std::fs::metadata(&partial).unwrap().len(), 600_000);
    assert_eq!(locate_in(cache.path(), &spec).found, None);

    let sent_before = hub.bytes_sent();
    let (second, _) = run(&spec, &options);
    let report = second.unwrap();
    assert_eq!(report.resumed_bytes, 600_000);
    let refetched = hub.bytes_sent() - sent_before;
    // The missing 400 000 bytes of the weights, and vocab.txt (18 bytes), which the first run
    // never reached; config.json was complete and is not fetched again.
    assert_eq!(refetched, 400_000 + 18, "re-fetched {refetched} bytes");
    let range_gets: Vec<Logged> = hub
        .log()
        .into_iter()
        .filter(|l| l.method == "GET" && l.range_start.is_some())
        .collect();
    assert!(
        range_gets
            .iter()
            .any(|l| l.range_start == Some(600_000) && l.path.starts_with("/cdn/")),
        "{range_gets:?}"
    );
    let found = locate_in(cache.path(), &spec).found.unwrap();
    assert_eq!(
        std::fs::read(found.join("pytorch_model.bin")).unwrap(),
        weights
    );
    assert!(!partial.exists());
}

#[test]
fn a_dropped_connection_is_resumed_automatically_when_retries_are_allowed() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let weights = noise(800_000, 3);
    let repo = "test-org/retry";
    let spec = embedder(&hub, repo, &weights);
    hub.with(|s| {
        let f = s
            .files
            .get_mut(&format!("/{repo}/resolve/main/pytorch_model.bin"))
            .unwrap();
        f.drop_gets = 2;
        f.drop_after = 300_000;
    });
    let mut options = hub.options(cache.path());
    options.retries = 3;
    let (result, _) = run(&spec, &options);
    let report = result.unwrap();
    assert_eq!(
        report.fetched_bytes,
        800_000 + (BERT_CONFIG.len() + 18) as u64
    );
    // 300 000 + 300 000 + the last 200 000: nothing was fetched twice.
    let weights_sent: u64 = hub
        .log()
        .iter()
        .filter(|l| l.method == "GET" && l.path.starts_with("/cdn/"))
        .map(|l| l.body_bytes)
        .sum();
    assert_eq!(weights_sent, 800_000);
    let found = locate_in(cache.path(), &spec).found.unwrap();
    assert_eq!(
        std::fs::read(found.join("pytorch_model.bin")).unwrap(),
        weights
    );
}

#[test]
fn a_resume_answered_from_another_byte_starts_the_file_again_instead_of_misplacing_it() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let weights = noise(800_000, 5);
    let repo = "test-org/early-range";
    let spec = embedder(&hub, repo, &weights);
    hub.with(|s| {
        let f = s
            .files
            .get_mut(&format!("/{repo}/resolve/main/pytorch_model.bin"))
            .unwrap();
        f.drop_gets = 1;
        f.drop_after = 300_000;
        f.range_early = 1_000;
    });
    let mut options = hub.options(cache.path());
    options.retries = 3;
    let (result, _) = run(&spec, &options);
    result.unwrap();
    let found = locate_in(cache.path(), &spec).found.unwrap();
    assert_eq!(
        std::fs::read(found.join("pytorch_model.bin")).unwrap(),
        weights,
        "the file is whole and in order"
    );
    // The resume asked for byte 300 000 and got 299 000 on: that body was not written, and
    // the file was fetched again from the start.
    let starts: Vec<Option<u64>> = hub
        .log()
        .iter()
        .filter(|l| l.method == "GET" && l.path.starts_with("/cdn/"))
        .map(|l| l.range_start)
        .collect();
    assert_eq!(starts, vec![None, Some(300_000), None], "{starts:?}");
}

#[test]
fn wrong_bytes_are_an_error_naming_the_file_and_leave_nothing_locate_accepts() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let weights = noise(200_000, 4);
    let repo = "test-org/corrupt";
    let spec = embedder(&hub, repo, &weights);
    let mut wrong = weights.clone();
    wrong[100_000] ^= 0xff;
    hub.with(|s| {
        s.files
            .get_mut(&format!("/{repo}/resolve/main/pytorch_model.bin"))
            .unwrap()
            .send_instead = Some(wrong);
    });
    let (result, _) = run(&spec, &hub.options(cache.path()));
    let err = result.unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, DownloadError::HashMismatch { .. }),
        "{message}"
    );
    assert!(message.contains("pytorch_model.bin"), "{message}");
    assert!(message.contains(&sha256_hex(&weights)), "{message}");
    assert_eq!(locate_in(cache.path(), &spec).found, None);
    let sha = sha256_hex(&weights);
    assert!(
        !leftovers(cache.path(), repo)
            .iter()
            .any(|name| name.starts_with(&sha)),
        "{:?}",
        leftovers(cache.path(), repo)
    );
}

#[test]
fn more_bytes_than_announced_are_refused_and_leave_no_partial_file() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let weights = noise(200_000, 5);
    let repo = "test-org/too-long";
    let spec = embedder(&hub, repo, &weights);
    let mut longer = weights.clone();
    longer.extend_from_slice(&[7; 1_000]);
    hub.with(|s| {
        s.files
            .get_mut(&format!("/{repo}/resolve/main/pytorch_model.bin"))
            .unwrap()
            .send_instead = Some(longer);
    });
    let (result, _) = run(&spec, &hub.options(cache.path()));
    let err = result.unwrap_err();
    assert!(matches!(err, DownloadError::SizeMismatch { .. }), "{err}");
    assert!(err.to_string().contains("pytorch_model.bin"), "{err}");
    // What came cannot be resumed: nothing is left to resume from.
    let left = leftovers(cache.path(), repo);
    assert!(
        !left.iter().any(|name| name.ends_with(".incomplete")),
        "{left:?}"
    );
    assert_eq!(locate_in(cache.path(), &spec).found, None);
}

#[test]
fn a_manifest_hash_the_hub_disagrees_with_stops_before_downloading() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let bytes = noise(50_000, 5);
    let repo = "test-org/changed";
    hub.put(
        repo,
        "m.gguf",
        Served {
            bytes,
            lfs: true,
            ..Served::default()
        },
    );
    let spec = generator_spec(repo, "m.gguf", &format!("sha256 = \"{}\"", "ab".repeat(32)));
    let (result, _) = run(&spec, &hub.options(cache.path()));
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("m.gguf") && message.contains("update the app"),
        "{message}"
    );
    assert_eq!(hub.bytes_sent(), 0);
}

/// Issue 19: a manifest that floats on `main` with no hash for its plain git files accepts
/// whatever the repository's owner pushes there. `scripts/pin_models.py` pins it to the commit
/// and records every file's SHA-256 and size from the hub's metadata; a file whose bytes differ
/// from the pin, LFS or not, is then refused.
#[test]
fn a_manifest_pinned_by_the_script_refuses_a_file_pushed_after_it() {
    let hub = Hub::start();
    let repo = "test-org/pinned";
    let weights = noise(20_000, 11);
    embedder(&hub, repo, &weights);
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("pinned.toml");
    let floating = format!(
        "# unpinned: run scripts/pin_models.py\nid = \"test-embedder\"\nrole = \"embedder\"\n\
         description = \"test\"\nrepo = \"{repo}\"\nrevision = \"main\"\nlicense = \"mit\"\n\
         size_bytes = 1\n\n[[files]]\nname = \"config.json\"\n\n# The weights.\n[[files]]\n\
         name = \"pytorch_model.bin\"\n\n[[files]]\nname = \"vocab.txt\"\n\n[[files]]\n\
         name = \"tokenizer_config.json\"\nrequired = false\n"
    );
    std::fs::write(&manifest, &floating).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pin_models.py");
    let mut command = std::process::Command::new("python3");
    command
        .arg(&script)
        .arg("--endpoint")
        .arg(&hub.url)
        .arg(&manifest);
    for proxy in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ] {
        command.env_remove(proxy);
    }
    let run_script = command
        .output()
        .expect("python3 runs scripts/pin_models.py");
    let said = String::from_utf8_lossy(&run_script.stderr).into_owned();
    assert!(run_script.status.success(), "{said}");
    assert!(
        said.contains("tokenizer_config.json is not in the repository"),
        "{said}"
    );

    let text = std::fs::read_to_string(&manifest).unwrap();
    assert!(
        !text.contains("# unpinned:") && text.contains("# The weights."),
        "{text}"
    );
    let spec = ModelSpec::from_toml("pinned.toml", &text).unwrap();
    assert_eq!(spec.revision, COMMIT);
    let vocab = b"[PAD]\n[UNK]\nhello\n".as_slice();
    let expected = [
        ("config.json", BERT_CONFIG.as_bytes()),
        ("pytorch_model.bin", weights.as_slice()),
        ("vocab.txt", vocab),
    ];
    for (name, bytes) in expected {
        let file = spec.files.iter().find(|f| f.name == name).unwrap();
        assert_eq!(
            file.sha256.as_deref(),
            Some(sha256_hex(bytes).as_str()),
            "{name}"
        );
        assert_eq!(file.size_bytes, Some(bytes.len() as u64), "{name}");
    }
    let optional = spec.files.iter().find(|f| !f.required).unwrap();
    assert_eq!((&optional.sha256, optional.size_bytes), (&None, None));

    // The pinned manifest downloads what it pinned.
    let cache = tempfile::tempdir().unwrap();
    let (result, _) = run(&spec, &hub.options(cache.path()));
    result.unwrap();

    // The owner pushes another vocab.txt of the same size: a plain git file, which only the
    // floating manifest's size check looked at.
    let pushed = b"[PAD]\n[UNK]\nhellO\n".to_vec();
    hub.put(
        repo,
        "vocab.txt",
        Served {
            bytes: pushed,
            ..Served::default()
        },
    );
    let fresh = tempfile::tempdir().unwrap();
    let floating = ModelSpec::from_toml("floating.toml", &floating).unwrap();
    let (result, _) = run(&floating, &hub.options(fresh.path()));
    assert!(result.is_ok(), "without the pin the pushed file is taken");
    let fresh = tempfile::tempdir().unwrap();
    let (result, _) = run(&spec, &hub.options(fresh.path()));
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("vocab.txt") && message.contains("SHA-256"),
        "{message}"
    );
}

#[test]
fn a_404_names_the_repo_and_the_file() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let spec = generator_spec("test-org/nowhere", "absent.gguf", "");
    let (result, _) = run(&spec, &hub.options(cache.path()));
    let err = result.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, DownloadError::NotFound { .. }), "{message}");
    assert!(
        message.contains("test-org/nowhere") && message.contains("absent.gguf"),
        "{message}"
    );
}

#[test]
fn cancel_leaves_a_partial_file_that_the_next_download_resumes() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let weights = noise(2_000_000, 6);
    let repo = "test-org/cancel";
    let spec = embedder(&hub, repo, &weights);
    hub.with(|s| {
        s.files
            .get_mut(&format!("/{repo}/resolve/main/pytorch_model.bin"))
            .unwrap()
            .slow = true;
    });
    let options = hub.options(cache.path());
    let cancel = AtomicBool::new(false);
    let result = download_model(
        &spec,
        &options,
        &mut |p| {
            if p.phase == DownloadPhase::Downloading
                && p.file == "pytorch_model.bin"
                && p.bytes_done > 300_000
            {
                cancel.store(true, Ordering::Relaxed);
            }
        },
        &cancel,
    );
    let err = result.unwrap_err();
    let message = err.to_string();
    let DownloadError::Cancelled { done, .. } = err else {
        panic!("{message}");
    };
    assert!(
        message.contains("pytorch_model.bin") && message.contains("resumes"),
        "{message}"
    );
    assert!(done > 0 && done < 2_000_000, "{done}");
    let partial = repo_dir(cache.path(), repo)
        .join("blobs")
        .join(format!("{}.incomplete", sha256_hex(&weights)));
    assert_eq!(std::fs::metadata(&partial).unwrap().len(), done);
    assert_eq!(locate_in(cache.path(), &spec).found, None);

    let (again, _) = run(&spec, &options);
    let report = again.unwrap();
    assert_eq!(report.resumed_bytes, done);
    assert!(report.fetched_bytes < 2_000_000);
    let found = locate_in(cache.path(), &spec).found.unwrap();
    assert_eq!(
        std::fs::read(found.join("pytorch_model.bin")).unwrap(),
        weights
    );
}

#[test]
fn offline_mode_uses_only_the_cache_and_says_what_to_do_when_it_is_empty() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let weights = noise(10_000, 7);
    let spec = embedder(&hub, "test-org/offline", &weights);
    let mut options = hub.options(cache.path());
    options.offline = true;

    let (result, _) = run(&spec, &options);
    let err = result.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, DownloadError::Offline { .. }), "{message}");
    assert!(message.contains("config.json"), "{message}");
    assert!(
        message.contains(&cache.path().display().to_string()),
        "{message}"
    );
    assert!(
        message.contains("selfrag models pull test-embedder"),
        "{message}"
    );
    assert!(hub.log().is_empty(), "offline mode made requests");

    options.offline = false;
    run(&spec, &options).0.unwrap();
    let requests = hub.log().len();
    options.offline = true;
    let (cached, _) = run(&spec, &options);
    assert_eq!(cached.unwrap().fetched_bytes, 0);
    assert_eq!(hub.log().len(), requests, "offline mode made requests");
}

/// A port nothing listens on: one bound, then let go.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_checkpoint_with_no_published_gguf_is_refused_with_the_conversion_before_any_request() {
    // The endpoint is a port nothing listens on: a request would fail as `Network`.
    let port = closed_port();
    let cache = tempfile::tempdir().unwrap();
    let spec = selfrag_hub::ModelSpec::by_id("raglab-selfrag-llama3-8b-q4km").unwrap();
    for offline in [false, true] {
        let mut options = HubOptions::from_vars(|_| None, Some(cache.path().to_path_buf()));
        options.endpoint = format!("http://127.0.0.1:{port}");
        options.offline = offline;
        let (result, events) = run(&spec, &options);
        let err = result.unwrap_err();
        let message = err.to_string();
        assert!(
            matches!(err, DownloadError::NotPublished { .. }),
            "{message}"
        );
        assert!(
            message.contains("RAGLAB/selfrag_llama3-8B")
                && message.contains("convert_hf_to_gguf.py")
                && message.contains("docs/MODELS.md")
                && message.contains("SELFRAG_GENERATOR=/path/to/selfrag_llama3-8B.q4_k_m.gguf"),
            "{message}"
        );
        assert!(events.is_empty(), "nothing was checked or fetched");
    }
}

#[test]
fn no_network_is_an_error_naming_the_file_and_the_fix() {
    let port = closed_port();
    let cache = tempfile::tempdir().unwrap();
    let mut options = HubOptions::from_vars(|_| None, Some(cache.path().to_path_buf()));
    options.endpoint = format!("http://127.0.0.1:{port}");
    let spec = generator_spec("test-org/x", "x.gguf", "");
    let (result, _) = run(&spec, &options);
    let err = result.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, DownloadError::Network { .. }), "{message}");
    assert!(
        message.contains("x.gguf") && message.contains("internet connection"),
        "{message}"
    );
}

#[test]
fn a_model_of_the_wrong_architecture_is_refused_by_name() {
    use candle_core::quantized::gguf_file;
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let mut gguf = std::io::Cursor::new(Vec::new());
    let arch = gguf_file::Value::String("gpt2".to_owned());
    gguf_file::write(&mut gguf, &[("general.architecture", &arch)], &[]).unwrap();
    let repo = "test-org/gpt2-GGUF";
    hub.put(
        repo,
        "gpt2.gguf",
        Served {
            bytes: gguf.into_inner(),
            lfs: true,
            ..Served::default()
        },
    );
    let spec = generator_spec(repo, "gpt2.gguf", "");
    let (result, _) = run(&spec, &hub.options(cache.path()));
    let err = result.unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, DownloadError::WrongArchitecture { .. }),
        "{message}"
    );
    assert!(
        message.contains("gpt2.gguf") && message.contains("gpt2"),
        "{message}"
    );
}

#[test]
fn verify_finds_a_truncated_or_corrupted_cached_file() {
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let weights = noise(100_000, 8);
    let repo = "test-org/verify";
    let spec = embedder(&hub, repo, &weights);
    let found = run(&spec, &hub.options(cache.path())).0.unwrap().found;

    // Flip a byte in the blob: the hash no longer matches its LFS name.
    let blob = std::fs::canonicalize(found.join("pytorch_model.bin")).unwrap();
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[5] ^= 1;
    std::fs::write(&blob, &bytes).unwrap();
    let (checks, _) = verify_model(&spec, cache.path(), &mut |_| {});
    let weights_check = checks
        .iter()
        .find(|c| c.file == "pytorch_model.bin")
        .unwrap();
    assert_eq!(weights_check.verdict, Verdict::WrongHash);
    assert!(
        weights_check
            .detail
            .contains("selfrag models pull test-embedder")
    );

    // A manifest that records the size: a truncated file is not accepted by locate either.
    bytes.truncate(50_000);
    std::fs::write(&blob, &bytes).unwrap();
    let text = format!(
        r#"
id = "sized"
role = "embedder"
description = "d"
repo = "{repo}"
revision = "main"
license = "mit"
size_bytes = 1
[[files]]
name = "config.json"
[[files]]
name = "pytorch_model.bin"
size_bytes = 100000
"#
    );
    let sized = ModelSpec::from_toml("sized.toml", &text).unwrap();
    assert_eq!(locate_in(cache.path(), &sized).found, None);
    let (checks, _) = verify_model(&sized, cache.path(), &mut |_| {});
    assert_eq!(checks[1].verdict, Verdict::WrongSize, "{:?}", checks[1]);
}

/// Environment of [`kill_child_downloads_until_killed`]: the hub URL, the cache, the repo and
/// the weights' size, separated by newlines.
const KILL_CHILD_ENV: &str = "SELFRAG_TEST_KILL_CHILD_DOWNLOAD";

/// The child process of [`a_download_killed_again_and_again_resumes_to_a_verified_file`]: a
/// download that runs until its parent SIGKILLs it. Does nothing when run as a plain test.
#[test]
#[ignore = "run as a child process by a_download_killed_again_and_again_resumes_to_a_verified_file"]
fn kill_child_downloads_until_killed() {
    let Ok(setup) = std::env::var(KILL_CHILD_ENV) else {
        return;
    };
    let fields: Vec<&str> = setup.split('\n').collect();
    let [url, cache, repo, len] = fields[..] else {
        panic!("{KILL_CHILD_ENV} = {setup:?}");
    };
    let spec = embedder_spec(repo, len.parse().unwrap());
    let mut options = HubOptions::from_vars(|_| None, Some(PathBuf::from(cache)));
    options.endpoint = url.to_owned();
    options.retries = 0;
    let _ = download_model(&spec, &options, &mut |_| {}, &AtomicBool::new(false));
}

/// Issue 7, "Faults": `selfrag models pull` killed with SIGKILL mid-download, again and again, in
/// a real child process. After every kill the cache holds no model `locate` would accept unless
/// it is the complete, verified file; the next download resumes from what arrived; and at the end
/// the file is the served one, fetched about once in all, with no partial file left.
#[cfg(unix)]
#[test]
fn a_download_killed_again_and_again_resumes_to_a_verified_file() {
    use std::process::{Command, Stdio};

    const KILLS: u64 = 8;
    let hub = Hub::start();
    let cache = tempfile::tempdir().unwrap();
    let weights = noise(1_500_000, 77);
    let repo = "test-org/killed";
    let spec = embedder(&hub, repo, &weights);
    hub.with(|s| {
        s.files
            .get_mut(&format!("/{repo}/resolve/main/pytorch_model.bin"))
            .unwrap()
            .slow = true;
    });
    // 16 KiB every 5 ms: the weights take about half a second to send.
    let mut delays = SplitDelays(0x00C0_FFEE);
    let mut kills = Vec::new();
    for _ in 0..KILLS {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "kill_child_downloads_until_killed",
                "--exact",
                "--ignored",
                "--quiet",
            ])
            .env(
                KILL_CHILD_ENV,
                format!(
                    "{}\n{}\n{repo}\n{}",
                    hub.url,
                    cache.path().display(),
                    weights.len()
                ),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Killed once the child has added to the partial file (its start-up takes a varying
        // few hundred milliseconds), after a random further moment: mid-transfer every time.
        let partial = repo_dir(cache.path(), repo)
            .join("blobs")
            .join(format!("{}.incomplete", sha256_hex(&weights)));
        let size = || std::fs::metadata(&partial).map_or(0, |m| m.len());
        let before = size();
        let waiting = std::time::Instant::now();
        while size() <= before && waiting.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(2));
        }
        let delay = delays.next() % 60;
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap();
        child.wait().unwrap();
        let have = size();
        kills.push((delay, have));
        // Whatever the moment of the kill: nothing half-written is offered as the model.
        if let Some(found) = locate_in(cache.path(), &spec).found {
            assert_eq!(
                std::fs::read(found.join("pytorch_model.bin")).unwrap(),
                weights,
                "killed after {delay} ms: locate accepted a file that is not the served one"
            );
        }
    }

    let (last, _) = run(&spec, &hub.options(cache.path()));
    let report = last.unwrap();
    let found = locate_in(cache.path(), &spec).found.unwrap();
    assert_eq!(
        std::fs::read(found.join("pytorch_model.bin")).unwrap(),
        weights
    );
    let left: Vec<String> = leftovers(cache.path(), repo)
        .into_iter()
        .filter(|name| name.contains(".incomplete") || name.contains(".part"))
        .collect();
    assert!(left.is_empty(), "partial files left behind: {left:?}");
    // Each killed child fetched only what was missing; the rest came with the verified last run.
    let weights_sent: u64 = hub
        .log()
        .iter()
        .filter(|l| l.method == "GET" && l.path.starts_with("/cdn/"))
        .map(|l| l.body_bytes)
        .sum();
    eprintln!(
        "download: {KILLS} SIGKILLs (ms after the partial file grew, its bytes after the kill): {kills:?}; {weights_sent} bytes of weights sent in all for {}; the last run resumed {} bytes",
        weights.len(),
        report.resumed_bytes
    );
    assert!(
        weights_sent < 2 * weights.len() as u64,
        "{weights_sent} bytes sent for a {}-byte file over {KILLS} kills {kills:?} (resumed {})",
        weights.len(),
        report.resumed_bytes
    );
    assert!(
        kills.windows(2).all(|w| w[0].1 < w[1].1) && report.resumed_bytes > 0,
        "every kill must land mid-transfer and every run resume the last: {kills:?}"
    );
}

/// Deterministic kill delays.
struct SplitDelays(u64);

impl SplitDelays {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let z = (self.0 ^ (self.0 >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z ^ (z >> 31)
    }
}
