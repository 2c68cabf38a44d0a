//! Issue 7, "Load": questions asked while a large folder is indexed and a watched folder
//! churns, on one engine as the app runs them (the real LanceDB library, the `selfrag` binary
//! as the extraction worker, the tiny GGUF and BERT written by selfrag-fixtures).
//!
//! Every question must be answered, every file indexed, and the watched folder must end equal
//! to the disk (no lost update); the process's peak resident memory is printed. The README's
//! test command runs 200 files and 10 questions; the figure is
//! `SELFRAG_LOAD_FILES=2000 SELFRAG_LOAD_QUESTIONS=50 cargo test --workspace --test load -- --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use selfrag_core::{RetrieveMode, Settings};
use selfrag_engine::{Engine, EngineConfig, IndexEvent, LibraryEvent};

/// How long the watched folder may take to catch up once the churn stops.
const SETTLE_LIMIT: Duration = Duration::from_secs(300);
/// A round of four changes in the watched folder this often (two of them need embedding).
const CHURN_EVERY: Duration = Duration::from_millis(500);

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident memory of this process in KiB (`VmRSS`, or `VmHWM` for the peak), 0 off Linux.
fn memory_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// A corpus of `n` small notes in three formats, 20 folders deep enough to be walked.
fn write_corpus(root: &Path, n: usize) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    for i in 0..n {
        let dir = root.join(format!("d{:02}", i % 20));
        std::fs::create_dir_all(&dir).unwrap();
        let words: Vec<String> = (0..60)
            .map(|w| format!("term{}", (i * 31 + w * 7) % 997))
            .collect();
        let body = words.join(" ");
        let (name, text) = match i % 3 {
            0 => (format!("note{i}.md"), format!("# Note {i}\n\n{body}.\n")),
            1 => (format!("note{i}.txt"), format!("Note {i}. {body}.\n")),
            _ => (
                format!("note{i}.html"),
                format!(
                    "<html><head><title>Note {i}</title></head><body><p>{body}.</p></body></html>"
                ),
            ),
        };
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        paths.insert(path.display().to_string());
    }
    paths
}

/// The Markdown files now in `folder` (what the library must hold for it once it settles).
fn on_disk(folder: &Path) -> BTreeSet<String> {
    std::fs::read_dir(folder)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.display().to_string())
        .collect()
}

async fn in_library(engine: &Engine, folder: &Path) -> BTreeSet<String> {
    let prefix = format!("{}/", folder.display());
    engine
        .documents()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.path)
        .filter(|p| p.starts_with(&prefix))
        .collect()
}

/// One round of changes in the watched folder: a new file, an edit, a rename and a delete, so
/// the folder keeps its size however long the big job runs.
fn churn_round(folder: &Path, round: usize) -> usize {
    std::fs::write(
        folder.join(format!("new{round}.md")),
        format!("# New {round}\n\nWritten in round {round} while the library was busy.\n"),
    )
    .unwrap();
    let files: Vec<PathBuf> = on_disk(folder).into_iter().map(PathBuf::from).collect();
    let pick = |salt: usize| files[(round * salt) % files.len()].clone();
    std::fs::write(pick(7), format!("# Edited\n\nEdited in round {round}.\n")).unwrap();
    let (from, gone) = (pick(3), pick(5));
    if from != gone {
        std::fs::rename(&from, folder.join(format!("renamed{round}.md"))).unwrap();
        std::fs::remove_file(&gone).unwrap();
        4
    } else {
        std::fs::remove_file(&gone).unwrap();
        3
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_while_a_big_folder_indexes_and_a_watched_folder_churns() {
    let files = env_number("SELFRAG_LOAD_FILES", 200);
    let questions = env_number("SELFRAG_LOAD_QUESTIONS", 10);
    let tmp = tempfile::tempdir().unwrap();
    let gguf = tmp.path().join("tiny.gguf");
    selfrag_fixtures::write_tiny_llama_gguf(&gguf).unwrap();
    let bert = tmp.path().join("tiny-bert");
    selfrag_fixtures::write_tiny_bert(&bert).unwrap();
    let corpus = tmp.path().join("corpus");
    let expected = write_corpus(&corpus, files);
    let watched = tmp.path().join("inbox");
    std::fs::create_dir_all(&watched).unwrap();
    for i in 0..20 {
        std::fs::write(
            watched.join(format!("seed{i}.md")),
            format!("# Seed {i}\n\nA note.\n"),
        )
        .unwrap();
    }

    let engine = Engine::new(EngineConfig {
        data_dir: tmp.path().join("data"),
        library: None,
        generator: Some(gguf),
        embedder: Some(bert),
        device: selfrag_engine::DeviceChoice::Cpu,
        // The real worker process, as in the app.
        embedder_precision: Default::default(),
        generator_numerics: Default::default(),
        extract_worker: Some(PathBuf::from(env!("CARGO_BIN_EXE_selfrag"))),
        generator_server: None,
        embedder_server: None,
        shared_source_limit: selfrag_engine::DEFAULT_SHARED_SOURCE_LIMIT,
    })
    .unwrap();

    // Peak memory, sampled beside the work (VmHWM is read at the end as well).
    let rss_start = memory_kib("VmRSS:");
    let rss_peak = Arc::new(AtomicU64::new(rss_start));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, on) = (rss_peak.clone(), sampling.clone());
        std::thread::spawn(move || {
            while on.load(Ordering::Relaxed) {
                peak.fetch_max(memory_kib("VmRSS:"), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    engine.set_watched(&watched, true).await.unwrap();
    let caught_up = AtomicBool::new(false);
    let watch_errors = Mutex::new(Vec::new());
    // The engine's background work, as the app runs it: it ends when the test's work does.
    let watch = engine.keep_library_in_sync(|event| match event {
        LibraryEvent::Index {
            event: IndexEvent::Finished { .. },
            ..
        } => caught_up.store(true, Ordering::SeqCst),
        LibraryEvent::Index {
            event: IndexEvent::FileFailed { path, error },
            ..
        } => watch_errors
            .lock()
            .unwrap()
            .push(format!("{path}: {error}")),
        LibraryEvent::Failed { message, .. } => watch_errors.lock().unwrap().push(message),
        LibraryEvent::Index { .. } | LibraryEvent::ChangedElsewhere { .. } => {}
    });

    let started = Instant::now();
    let done_files = AtomicUsize::new(0);
    let job_over = AtomicBool::new(false);
    let job_errors = Mutex::new(Vec::new());
    let checkpoints = Mutex::new(Vec::new());
    let work = async {
        // The app runs the watcher's catch-up under the job lock: the big job comes after it.
        while !caught_up.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let job = async {
            let finished = engine
                .index_paths(std::slice::from_ref(&corpus), |event| match event {
                    IndexEvent::Progress { done, .. } => {
                        done_files.store(done, Ordering::SeqCst);
                        if done % (files / 10).max(1) == 0 {
                            checkpoints
                                .lock()
                                .unwrap()
                                .push((done, memory_kib("VmRSS:") / 1024));
                        }
                    }
                    IndexEvent::FileFailed { path, error } => {
                        job_errors.lock().unwrap().push(format!("{path}: {error}"))
                    }
                    _ => {}
                })
                .await;
            job_over.store(true, Ordering::SeqCst);
            finished
        };
        let churn = async {
            let (mut rounds, mut ops) = (0, 0);
            while !job_over.load(Ordering::SeqCst) || rounds < 10 {
                ops += churn_round(&watched, rounds);
                rounds += 1;
                tokio::time::sleep(CHURN_EVERY).await;
            }
            (rounds, ops)
        };
        let asks = async {
            let mut answered = Vec::new();
            for q in 0..questions {
                // Spread over the job: question q waits for its share of the files.
                while !job_over.load(Ordering::SeqCst)
                    && done_files.load(Ordering::SeqCst) < q * files / questions
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let settings = Settings {
                    mode: RetrieveMode::Always,
                    k: 3,
                    max_new_tokens: 8,
                    max_segment_tokens: 8,
                    max_segments: 1,
                    ..Settings::default()
                };
                let asked = Instant::now();
                let record = engine
                    .ask(
                        format!("What does term{} say about note {q}?", q * 13 % 997),
                        settings,
                        |_| {},
                    )
                    .await
                    .unwrap_or_else(|e| panic!("question {q} failed while indexing: {e}"));
                answered.push((done_files.load(Ordering::SeqCst), asked.elapsed(), record));
            }
            answered
        };
        let (finished, (rounds, ops), answered) = tokio::join!(job, churn, asks);
        // No lost update: the watched folder's documents end equal to its files.
        let churn_stopped = Instant::now();
        let mut settled = None;
        while churn_stopped.elapsed() < SETTLE_LIMIT {
            if in_library(&engine, &watched).await == on_disk(&watched) {
                settled = Some(churn_stopped.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let settle_view = (in_library(&engine, &watched).await, on_disk(&watched));
        (finished, rounds, ops, answered, settled, settle_view)
    };
    let (finished, rounds, ops, answered, settled, settle_view) = tokio::select! {
        () = watch => unreachable!("the background work ends only when dropped"),
        done = work => done,
    };
    let seconds = started.elapsed().as_secs_f64();
    sampling.store(false, Ordering::Relaxed);
    sampler.join().unwrap();
    let peak_kib = rss_peak.load(Ordering::Relaxed).max(memory_kib("VmHWM:"));

    let during = answered.iter().filter(|(done, _, _)| *done < files).count();
    let slowest = answered
        .iter()
        .map(|(_, t, _)| *t)
        .max()
        .unwrap_or_default();
    println!(
        "load: {files} files indexed in {seconds:.1} s ({:.1} files/s) while {questions} questions \
         were answered ({during} during the job, slowest {:.2} s) and the watched folder took \
         {ops} changes in {rounds} rounds, equal to the disk ({} files) {:?} after the churn \
         stopped; peak RSS {:.0} MiB (at start {:.0} MiB); RSS in MiB by files done: {:?}",
        files as f64 / seconds,
        slowest.as_secs_f64(),
        settle_view.1.len(),
        settled,
        peak_kib as f64 / 1024.0,
        rss_start as f64 / 1024.0,
        checkpoints.lock().unwrap(),
    );

    let finished = finished.unwrap();
    assert!(
        job_errors.lock().unwrap().is_empty(),
        "files failed: {:?}",
        job_errors.lock().unwrap()
    );
    assert!(
        watch_errors.lock().unwrap().is_empty(),
        "watched changes failed: {:?}",
        watch_errors.lock().unwrap()
    );
    assert!(
        matches!(finished, IndexEvent::Finished { indexed, failed: 0, cancelled: false, .. } if indexed == files),
        "{finished:?}"
    );
    let library: BTreeSet<String> = in_library(&engine, &corpus).await;
    assert_eq!(
        library, expected,
        "every file of the big folder is in the library"
    );
    assert!(
        settled.is_some(),
        "the watched folder did not settle within {SETTLE_LIMIT:?}: only in the library {:?}, only on disk {:?}",
        settle_view.0.difference(&settle_view.1).collect::<Vec<_>>(),
        settle_view.1.difference(&settle_view.0).collect::<Vec<_>>()
    );
    assert_eq!(answered.len(), questions);
    assert!(
        during * 2 >= questions,
        "only {during} of {questions} questions were asked while the job ran"
    );
}
