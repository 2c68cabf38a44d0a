//! Crash safety of indexing, with real processes: `selfrag index` is killed with SIGKILL at
//! random moments; after each kill the library must be consistent as the next process sees it
//! (no duplicate, no orphan passage, no half-written document), and resuming must end in the
//! same library as a run that was never interrupted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{ok, selfrag_with_models};
use selfrag_engine::{Engine, EngineConfig, SearchFilter, SearchMode, SearchQuery};

const KILLS: usize = 20;

/// What a user can observe of a library: documents (path → content id, passages) and the
/// passage count.
#[derive(Debug, PartialEq)]
struct View {
    documents: BTreeMap<String, (String, u64)>,
    passages: u64,
}

/// Opens the library as the next process would (in this process, through the same engine the
/// binary uses) and checks it is consistent.
fn consistent_view(data: &Path, models: &Path, corpus: &Path) -> View {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let engine = Engine::new(EngineConfig {
            data_dir: data.to_path_buf(),
            library: None,
            generator: Some(models.join("tiny.gguf")),
            embedder: Some(models.join("tiny-bert")),
            device: selfrag_engine::DeviceChoice::Cpu,
            embedder_precision: Default::default(),
            generator_numerics: Default::default(),
            extract_worker: None,
            generator_server: None,
            embedder_server: None,
            shared_source_limit: selfrag_engine::DEFAULT_SHARED_SOURCE_LIMIT,
        })
        .unwrap();
        let mut documents = BTreeMap::new();
        let mut per_content = BTreeMap::new();
        // Issue 50: the library itself waits out a worker that held the killed process's lock
        // for an instant; the next process must never be told the library is busy.
        let listed = engine.documents().await;
        if let Err(e) = &listed {
            panic!("{e}; processes holding its lock: {:?}", lock_holders(data));
        }
        for d in listed.unwrap() {
            assert!(d.passages > 0, "a document with no passages: {d:?}");
            assert!(Path::new(&d.path).starts_with(corpus), "{}", d.path);
            per_content.insert(d.id.clone(), d.passages as u64);
            let previous = documents.insert(d.path.clone(), (d.id, d.passages as u64));
            assert!(previous.is_none(), "{} listed twice", d.path);
        }
        let passages = engine.library_stats().await.unwrap().passages as u64;
        assert_eq!(
            passages,
            per_content.values().sum::<u64>(),
            "stored passages must be exactly those of the listed documents (no orphan, no duplicate)"
        );
        let hits = engine
            .search(SearchQuery {
                text: "passage words".into(),
                mode: SearchMode::Hybrid,
                k: 50,
                filter: SearchFilter::default(),
            })
            .await
            .unwrap();
        for hit in hits {
            assert!(
                documents.contains_key(&hit.path),
                "search returned {}, not in the library",
                hit.path
            );
        }
        View {
            documents,
            passages,
        }
    })
}

fn write_corpus(dir: &Path) {
    for i in 0..16 {
        let sub = dir.join(format!("folder{}", i % 3));
        std::fs::create_dir_all(&sub).unwrap();
        let mut text = format!("# Document {i}\n");
        // Documents of one to five passages of about a hundred words.
        for p in 0..(1 + i % 5) {
            text.push_str(&format!("\n## Part {p}\n"));
            for w in 0..110 {
                text.push_str(&format!(
                    "passage words {} {} ",
                    (i * 7 + p * 3 + w) % 97,
                    i
                ));
            }
            text.push('\n');
        }
        std::fs::write(sub.join(format!("doc{i}.md")), text).unwrap();
    }
}

/// A small deterministic generator (SplitMix64): the kill moments of a run can be replayed
/// with `SELFRAG_KILL_SEED`.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn indexing_killed_at_random_moments_stays_consistent_and_resumes_to_the_same_library() {
    let tmp = tempfile::tempdir().unwrap();
    let models = common::tiny_models(&tmp.path().join("models"));
    let corpus = std::path::absolute(tmp.path().join("corpus")).unwrap();
    write_corpus(&corpus);

    let reference_dir = tmp.path().join("reference");
    let started = Instant::now();
    ok(selfrag_with_models(&reference_dir, &models)
        .arg("index")
        .arg(&corpus)
        .output()
        .unwrap());
    let full_run = started.elapsed();
    let reference = consistent_view(&reference_dir, &models, &corpus);
    assert_eq!(reference.documents.len(), 16);

    let mut seed: u64 = std::env::var("SELFRAG_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261122);
    eprintln!("full run {full_run:?}; seed {seed}");
    let mut interrupted = 0;
    // Kill moments are drawn from [0, horizon]. The reference run's time is only an estimate
    // on a shared machine: whenever a run finishes before its kill, the horizon shrinks.
    let mut horizon = full_run;
    for round in 0..KILLS {
        let data: PathBuf = tmp.path().join(format!("killed{round}"));
        let delay = Duration::from_millis(next(&mut seed) % (horizon.as_millis() as u64 + 1));
        let mut child = selfrag_with_models(&data, &models)
            .arg("index")
            .arg(&corpus)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let finished_first = child.try_wait().unwrap().is_some();
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        if finished_first {
            horizon = horizon * 3 / 4;
        } else {
            interrupted += 1;
        }

        let view = consistent_view(&data, &models, &corpus);
        eprintln!(
            "round {round}: killed after {delay:?}, {} documents survived",
            view.documents.len()
        );
        // The next start finishes the job: `selfrag index` with no path resumes it; a kill
        // before the job was even recorded means the user starts it again.
        let pending = data.join("library").join("job.json").exists();
        let mut resume = selfrag_with_models(&data, &models);
        resume.arg("index");
        if !pending {
            resume.arg(&corpus);
        }
        ok(resume.output().unwrap());
        assert_eq!(
            consistent_view(&data, &models, &corpus),
            reference,
            "round {round}: resuming must end in the uninterrupted run's library"
        );
        let _ = std::fs::remove_dir_all(&data);
    }
    assert!(
        interrupted >= KILLS / 2,
        "only {interrupted} of {KILLS} kills hit a running job"
    );
}

/// The processes with the library's lock file of `data` open, as `pid state ppid cmdline`
/// (Linux `/proc`; empty elsewhere).
fn lock_holders(data: &Path) -> Vec<String> {
    let lock = data.join("library").join("library.lock");
    let mut holders = Vec::new();
    for process in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let fds = std::fs::read_dir(process.path().join("fd"));
        let holds = fds
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == lock));
        if holds {
            let read =
                |name: &str| std::fs::read_to_string(process.path().join(name)).unwrap_or_default();
            let status = read("status");
            let field = |key: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(key))
                    .unwrap_or("")
                    .trim()
                    .to_owned()
            };
            holders.push(format!(
                "{} {} ppid {} {}",
                process.file_name().to_string_lossy(),
                field("State:"),
                field("PPid:"),
                read("cmdline").replace('\0', " ")
            ));
        }
    }
    holders
}
