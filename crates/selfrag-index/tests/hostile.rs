//! Issue 7, "Bad input": a folder of 200+ hostile and broken files ([`corpus`]) indexed by one
//! real job, as the app runs it (worker process with a time limit, real LanceDB). Every file
//! ends indexed or with an error that names it, no parser panic reaches the library, the job
//! ends within a bound, and every good file is found by a search for its phrase.

// Test code: a failed unwrap is a failed test, at the line that failed; the report is printed.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

mod common;
mod corpus;

use common::BAG_OF_WORDS;
use corpus::{Expect, HostileFile};
use selfrag_index::{Extractor, IndexError, IndexOutcome, JobEvent, Library};

/// The crate's test worker: the same `main_if_worker` the app and the CLI run.
const WORKER: &str = env!("CARGO_BIN_EXE_selfrag-extract-worker");

/// The worker's time limit. Only `deep.html` (100,000 nested `<div>`s: html5ever's tree
/// builder is quadratic in the depth, 5 s at 10,000 in a debug build) runs into it; every other
/// file takes under two seconds in a debug build on two busy cores.
const PER_FILE_LIMIT: Duration = Duration::from_secs(10);
/// Killing and reaping a worker at its limit.
const KILL_SLACK: Duration = Duration::from_secs(3);
/// The whole job, for 200+ files, in a debug build on two busy cores.
const JOB_LIMIT: Duration = Duration::from_secs(120);

/// How one file ended, as the job reported it.
#[derive(Debug)]
enum Ended {
    Indexed {
        document_id: String,
    },
    Failed {
        message: String,
        variant: &'static str,
    },
}

fn variant(e: &IndexError) -> &'static str {
    match e {
        IndexError::Read { .. } => "cannot read",
        IndexError::Unsupported { .. } => "unsupported",
        IndexError::Empty { .. } => "no text",
        IndexError::Encrypted { .. } => "encrypted",
        IndexError::NoTextLayer { .. } => "no text layer",
        IndexError::Malformed { .. } => "malformed",
        IndexError::TooLarge { .. } => "too large",
        IndexError::ParserFailed { what, .. } if what.contains("ran out of time") => "timed out",
        IndexError::ParserFailed { .. } => "parser crashed",
        _ => "other",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_file_is_indexed_or_refused_by_name_and_the_good_ones_are_found() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    let written = Instant::now();
    let corpus = corpus::write_corpus(&docs).unwrap();
    let write_time = written.elapsed();
    let walked: Vec<&HostileFile> = corpus
        .files
        .iter()
        .filter(|f| f.expect != Expect::NotWalked)
        .collect();
    assert!(
        corpus.files.len() >= 200,
        "only {} files",
        corpus.files.len()
    );

    let lib = Library::open(&tmp.path().join("lib"), &BAG_OF_WORDS)
        .await
        .unwrap()
        .with_extractor(Extractor::worker(WORKER).with_timeout(PER_FILE_LIMIT));
    let started = Instant::now();
    let mut ended: HashMap<String, Ended> = HashMap::new();
    let mut slowest = (Duration::ZERO, String::new());
    let mut slowest_parsed = (Duration::ZERO, String::new());
    let mut file_started = Instant::now();
    let cancel = AtomicBool::new(false);
    let summary = lib
        .run_job(std::slice::from_ref(&docs), &BAG_OF_WORDS, &cancel, |e| {
            match e {
                JobEvent::FileStarted { .. } => file_started = Instant::now(),
                JobEvent::FileDone { path, result } => {
                    let took = file_started.elapsed();
                    if took > slowest.0 {
                        slowest = (took, path.clone());
                    }
                    let timed_out = matches!(&result, Err(IndexError::ParserFailed { what, .. }) if what.contains("ran out of time"));
                    if !timed_out && took > slowest_parsed.0 {
                        slowest_parsed = (took, path.clone());
                    }
                    let outcome = match result {
                        Ok(
                            IndexOutcome::Indexed { document_id, .. }
                            | IndexOutcome::Reused { document_id, .. }
                            | IndexOutcome::Unchanged { document_id },
                        ) => Ended::Indexed { document_id },
                        Err(e) => Ended::Failed {
                            variant: variant(&e),
                            message: e.to_string(),
                        },
                    };
                    assert!(ended.insert(path.clone(), outcome).is_none(), "{path} twice");
                }
                _ => {}
            }
        })
        .await
        .unwrap();
    let job_time = started.elapsed();

    // What each file ended as, per kind, for the report and docs/RELIABILITY.md.
    let verbose = std::env::var_os("SELFRAG_HOSTILE_VERBOSE").is_some();
    let mut table: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    let mut problems = Vec::new();
    for f in &corpus.files {
        let key = f.path.display().to_string();
        let name = f
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let outcome = ended.get(&key);
        let label = match outcome {
            None => "not walked",
            Some(Ended::Indexed { .. }) => "indexed",
            Some(Ended::Failed { variant, .. }) => variant,
        };
        *table.entry(f.kind).or_default().entry(label).or_default() += 1;
        if verbose {
            eprintln!("{:<26} {key:?}: {outcome:?}", f.kind);
        }
        match (&f.expect, outcome) {
            (Expect::NotWalked, None) => {}
            (Expect::NotWalked, Some(o)) => problems.push(format!("{key:?} was walked: {o:?}")),
            (_, None) => problems.push(format!("{key:?} never ended")),
            (_, Some(Ended::Failed { message, variant })) => {
                if matches!(f.expect, Expect::Indexed(_)) {
                    problems.push(format!("{key:?} should be indexed: {message}"));
                }
                if !message.contains(&name) {
                    problems.push(format!(
                        "{key:?}: the error does not name the file: {message}"
                    ));
                }
                if message.contains("panicked") || *variant == "other" {
                    problems.push(format!("{key:?}: not a clear error: {message}"));
                }
            }
            (Expect::Refused, Some(o)) => {
                problems.push(format!("{key:?} should be refused: {o:?}"))
            }
            (Expect::Indexed(phrase), Some(Ended::Indexed { document_id })) => {
                // Deep enough for every copy of the phrase: truncated copies of whole.pdf that
                // still hold its first page are read through a rebuilt table, and tie with it.
                let hits = lib
                    .search(&common::query(&BAG_OF_WORDS, phrase, 256))
                    .await
                    .unwrap();
                let found = hits
                    .iter()
                    .any(|h| h.document_id == *document_id && h.text.contains(phrase.as_str()));
                if !found {
                    problems.push(format!(
                        "{key:?}: a search for {phrase:?} does not find it: {hits:?}"
                    ));
                }
            }
            (Expect::Either, Some(Ended::Indexed { .. })) => {}
        }
    }

    eprintln!(
        "{} files ({} walked) written in {:.1} s, indexed in {:.1} s; slowest file {:.2} s ({}), \
         slowest that did not time out {:.2} s ({})",
        corpus.files.len(),
        walked.len(),
        write_time.as_secs_f32(),
        job_time.as_secs_f32(),
        slowest.0.as_secs_f32(),
        slowest.1.escape_debug(),
        slowest_parsed.0.as_secs_f32(),
        slowest_parsed.1.escape_debug()
    );
    for (kind, n) in corpus.counts() {
        eprintln!("  {kind:<26} {n:>3}  {:?}", table[kind]);
    }
    for note in &corpus.notes {
        eprintln!("note: {note}");
    }
    for p in &problems {
        eprintln!("PROBLEM: {p}");
    }
    assert!(
        problems.is_empty(),
        "{} problems (see above)",
        problems.len()
    );
    assert_eq!(
        summary.indexed + summary.skipped + summary.failed,
        walked.len(),
        "{summary:?}"
    );
    assert!(!summary.cancelled);
    assert!(job_time < JOB_LIMIT, "the job took {job_time:?}");
    assert!(slowest.0 < PER_FILE_LIMIT + KILL_SLACK, "{slowest:?}");

    restore_permissions(&docs);
}

/// Lets the temp dir be deleted when the test did not run as root.
fn restore_permissions(dir: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for name in ["unreadable.txt", "locked-folder"] {
            let mode = if name.ends_with(".txt") { 0o644 } else { 0o755 };
            let _ = std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(mode));
        }
    }
}

/// A worker never outlives its parent: one stuck on a file (here a named pipe nobody writes,
/// where `open` blocks for ever) exits as soon as the parent's end of its stdin closes, which
/// is what the OS does when the app exits or is killed.
#[cfg(unix)]
#[test]
fn a_stuck_worker_exits_when_its_parent_goes_away() {
    use std::process::{Command, Stdio};
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("stuck.txt");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success(),
        "mkfifo"
    );
    let mut worker = Command::new(WORKER)
        .arg(selfrag_index::worker::WORKER_FLAG)
        .arg(&fifo)
        .env(selfrag_index::worker::WATCH_PARENT_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let parent_end = worker.stdin.take();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        worker.try_wait().unwrap().is_none(),
        "the worker should be stuck opening the pipe"
    );
    drop(parent_end);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = worker.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = worker.kill();
            panic!("the worker outlived its parent's end of the pipe by 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(3));
}

/// Issue 44: one small Markdown file, a 1 MiB heading over 2 MiB of `a. ` lines, made about
/// 14 GB in the app: its heading was the title and the section of each of its thousands of
/// passages, and every row was built before the passage limit was looked at. The title and
/// sections are now cut, and the passages counted as they are made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_markdown_file_with_a_huge_heading_is_indexed_within_bounds() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("heading-bomb.md");
    // Multi-byte characters, so the cuts fall between characters and not inside one.
    let heading = "Überschrift-".repeat((1 << 20) / 13);
    let line = format!("{}\n", "a. ".repeat(40));
    let body = line.repeat((2 << 20) / line.len());
    std::fs::write(&file, format!("# {heading}\n{body}")).unwrap();

    let lib = Library::open(&tmp.path().join("lib"), &BAG_OF_WORDS)
        .await
        .unwrap()
        .with_extractor(Extractor::worker(WORKER));
    let outcome = lib.index_file(&file, &BAG_OF_WORDS).await.unwrap();
    let IndexOutcome::Indexed { passages, .. } = outcome else {
        panic!("{outcome:?}");
    };
    // 700,000 one-word sentences, a hundred to a passage with one repeated.
    assert!((5_000..10_000).contains(&passages), "{passages} passages");
    let document = lib.documents().remove(0);
    let title_chars = document.title.chars().count();
    assert!(
        title_chars <= selfrag_index::extract::MAX_TITLE_CHARS && title_chars > 400,
        "a title of {title_chars} characters"
    );
    assert!(heading.starts_with(&document.title));
    let stored = lib.passages_of(&document.id).await.unwrap();
    assert_eq!(stored.len(), passages as usize);
    for hit in &stored {
        let section = hit.section.as_deref().unwrap_or_default();
        assert!(
            section.chars().count() <= selfrag_index::chunk::MAX_SECTION_CHARS,
            "a section of {} characters",
            section.chars().count()
        );
        assert!(heading.starts_with(section));
        assert_eq!(hit.title, document.title);
        assert!(hit.text.chars().count() <= selfrag_index::chunk::MAX_PASSAGE_CHARS);
    }

    // Past the passage limit: refused by name before any row is built or embedded.
    let counting = common::Counting::new(common::BagOfWords {
        dim: 64,
        id: "bag-of-words-64",
    });
    let limited = Library::open(&tmp.path().join("limited"), &counting)
        .await
        .unwrap()
        .with_extractor(Extractor::worker(WORKER))
        .with_passage_limit(1_000);
    let err = limited.index_file(&file, &counting).await.unwrap_err();
    assert!(
        matches!(&err, IndexError::TooManyPassages { passages: p, limit: 1_000, .. } if *p == passages as usize),
        "{err:?}"
    );
    assert!(err.to_string().contains("heading-bomb.md"), "{err}");
    assert_eq!(counting.embedded(), 0);
    assert!(limited.documents().is_empty());
}

/// Issue 44: an HTML `<title>`, a PDF's `/Title` and a page label's prefix had no length, and
/// each is copied into every passage of the document or page.
#[test]
fn titles_and_page_label_prefixes_are_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let worker = Extractor::worker(WORKER);
    let long_title = "Titel-ä ".repeat(64 << 10);
    let html = tmp.path().join("long-title.html");
    std::fs::write(
        &html,
        format!(
            "<html><head><title>{long_title}</title></head><body><p>Short body.</p></body></html>"
        ),
    )
    .unwrap();
    let document = worker.extract_blocking(&html).unwrap();
    assert_eq!(
        document.title.chars().count(),
        selfrag_index::extract::MAX_TITLE_CHARS - 1,
        "cut at 512 characters, then its trailing space"
    );
    assert!(long_title.starts_with(&document.title));

    let prefix = "Appendix-".repeat(10_000);
    let pdf = tmp.path().join("long-label.pdf");
    std::fs::write(
        &pdf,
        corpus::pdf_with_title_and_label("A labelled page.", &long_title, &prefix),
    )
    .unwrap();
    let document = worker.extract_blocking(&pdf).unwrap();
    // The string's bytes are read as PDFDocEncoding, two characters for each `ä`.
    let title_chars = document.title.chars().count();
    assert!(
        (500..=selfrag_index::extract::MAX_TITLE_CHARS).contains(&title_chars),
        "{title_chars}"
    );
    assert!(document.title.starts_with("Titel-"));
    let label = document.pages[0].label.clone().unwrap();
    assert_eq!(
        label,
        format!(
            "{}1",
            &prefix[..selfrag_index::extract::MAX_LABEL_PREFIX_CHARS]
        )
    );
}

/// A PDF stream that inflates to 300 MiB, and a worker allowed 192 MiB: the file must be
/// refused by its check, which holds a few buffers, before anything decodes it whole.
const BOMB: u64 = 300 << 20;
const BOMB_WORKER_HEAP: u64 = 192 << 20;

fn assert_refused_as_a_bomb(file: &Path) {
    let err = Extractor::worker(WORKER)
        .with_memory_limit(Some(BOMB_WORKER_HEAP))
        .extract_blocking(file)
        .unwrap_err();
    let message = err.to_string();
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        matches!(err, IndexError::Malformed { .. })
            && message.contains(&name)
            && message.contains("inflates to more than 256 MiB"),
        "{message}"
    );
}

/// Issue 44: the inflate cap read only the first filter of a chain, so a bomb behind
/// `/ASCII85Decode` or `/ASCIIHexDecode`, or in the second `/FlateDecode` of two, was decoded
/// whole by lopdf.
#[test]
fn a_pdf_bomb_behind_a_chain_of_filters_is_refused_in_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let bomb = corpus::zlib_bomb(BOMB);
    for (name, filters, content) in [
        (
            "ascii85-flate.pdf",
            "[/ASCII85Decode /FlateDecode]",
            corpus::ascii85(&bomb),
        ),
        (
            "hex-flate.pdf",
            "[/ASCIIHexDecode /FlateDecode]",
            corpus::ascii_hex(&bomb),
        ),
        (
            "flate-flate.pdf",
            "[/FlateDecode /FlateDecode]",
            corpus::zlib(&bomb),
        ),
    ] {
        let file = tmp.path().join(name);
        std::fs::write(&file, corpus::pdf_with_filtered_content(filters, &content)).unwrap();
        assert!(std::fs::metadata(&file).unwrap().len() < 2 << 20);
        assert_refused_as_a_bomb(&file);
    }
}

/// Issue 44: lopdf unpacks object streams while it loads a file, so a bomb in one was
/// inflated whole before the check of the loaded document could see it.
#[test]
fn an_object_stream_bomb_is_refused_before_the_file_is_loaded() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("object-stream-bomb.pdf");
    std::fs::write(
        &file,
        corpus::object_stream_bomb_pdf("A page beside an object stream.", BOMB),
    )
    .unwrap();
    assert_refused_as_a_bomb(&file);
}

/// Set, to its library and its roots, for [`crash_child_indexes_until_the_marked_file_kills_it`].
const CRASH_CHILD_ENV: &str = "SELFRAG_TEST_CRASH_CHILD";
/// Text that kills the process embedding it.
const KILLER: &str = "killerphrase";

/// [`BAG_OF_WORDS`], aborting the process (a crash, as an allocation failure is one) when it
/// is given [`KILLER`].
struct AbortingOnKiller;

impl selfrag_index::PassageEmbedder for AbortingOnKiller {
    fn model_id(&self) -> String {
        BAG_OF_WORDS.model_id()
    }
    fn dim(&self) -> usize {
        BAG_OF_WORDS.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        if texts.iter().any(|t| t.contains(KILLER)) {
            std::process::abort();
        }
        BAG_OF_WORDS.embed(texts)
    }
}

/// The child of [`a_file_the_app_keeps_dying_on_is_skipped_and_named`]: runs one indexing job
/// as the app does, in the library and over the roots its environment names (no root: the
/// interrupted job), and dies on the file that holds [`KILLER`]. Does nothing as a plain test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by a_file_the_app_keeps_dying_on_is_skipped_and_named"]
async fn crash_child_indexes_until_the_marked_file_kills_it() {
    let Ok(setup) = std::env::var(CRASH_CHILD_ENV) else {
        return;
    };
    let mut lines = setup.lines();
    let library = lines.next().unwrap();
    let roots: Vec<std::path::PathBuf> = lines.map(Into::into).collect();
    let lib = Library::open(Path::new(library), &AbortingOnKiller)
        .await
        .unwrap();
    lib.run_job(&roots, &AbortingOnKiller, &AtomicBool::new(false), |_| {})
        .await
        .unwrap();
}

/// Runs [`crash_child_indexes_until_the_marked_file_kills_it`] and asserts it died.
fn crash_child(library: &Path, roots: &[&Path]) {
    let mut setup = library.display().to_string();
    for root in roots {
        setup.push('\n');
        setup.push_str(&root.display().to_string());
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "crash_child_indexes_until_the_marked_file_kills_it",
            "--exact",
            "--ignored",
            "--quiet",
        ])
        .env(CRASH_CHILD_ENV, setup)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the child should have died on the killer file: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The texts a job embedded and how each file ended.
#[derive(Default)]
struct JobRecord {
    embedded: std::sync::Mutex<Vec<String>>,
    ended: std::sync::Mutex<HashMap<String, Result<(), String>>>,
}

impl selfrag_index::PassageEmbedder for JobRecord {
    fn model_id(&self) -> String {
        BAG_OF_WORDS.model_id()
    }
    fn dim(&self) -> usize {
        BAG_OF_WORDS.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        let mut embedded = self.embedded.lock().unwrap();
        embedded.extend(texts.iter().map(|t| t.to_string()));
        BAG_OF_WORDS.embed(texts)
    }
}

impl JobRecord {
    async fn run(lib: &Library, roots: &[&Path]) -> Self {
        let record = Self::default();
        let roots: Vec<std::path::PathBuf> = roots.iter().map(|r| r.to_path_buf()).collect();
        lib.run_job(&roots, &record, &AtomicBool::new(false), |e| {
            if let JobEvent::FileDone { path, result } = e {
                let name = Path::new(&path)
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                record
                    .ended
                    .lock()
                    .unwrap()
                    .insert(name, result.map(|_| ()).map_err(|e| e.to_string()));
            }
        })
        .await
        .unwrap();
        record
    }

    fn ended(&self, name: &str) -> Result<(), String> {
        self.ended.lock().unwrap()[name].clone()
    }

    fn embedded_killer(&self) -> bool {
        self.embedded
            .lock()
            .unwrap()
            .iter()
            .any(|t| t.contains(KILLER))
    }
}

/// Issue 44: an interrupted job resumes at every start and a watched folder catches up, so a
/// file that kills the app killed it at every launch. A run that ends on a file (killed, quit)
/// costs it nothing: the next start reads it again. A second in a row, and the file is skipped
/// and named, until the user names that file itself. An end while small files are committed
/// together counts on none of them (it is no one file's): they are read alone after it.
#[test]
fn a_file_the_app_keeps_dying_on_is_skipped_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    let library = tmp.path().join("lib");
    for (name, text) in [
        ("a.md", "Alpha notes about otters.".to_owned()),
        ("b.md", format!("Bravo notes with the {KILLER} in them.")),
        ("c.md", "Charlie notes about beavers.".to_owned()),
    ] {
        std::fs::write(docs.join(name), text).unwrap();
    }
    let killer = docs.join("b.md");
    // Dies while a.md, b.md and c.md are embedded together; resumed, reads them alone and
    // dies on b.md; resumed, reads it again and dies again.
    crash_child(&library, &[&docs]);
    crash_child(&library, &[]);
    crash_child(&library, &[]);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let lib = Library::open(&library, &BAG_OF_WORDS).await.unwrap();
        assert_eq!(lib.pending_job(), vec![docs.clone()]);
        // The next start: the interrupted job goes on without b.md, and says so.
        let resumed = JobRecord::run(&lib, &[]).await;
        assert!(!resumed.embedded_killer(), "b.md was read a third time");
        let skipped = resumed.ended("b.md").unwrap_err();
        assert!(
            skipped.contains(&killer.display().to_string())
                && skipped.contains("stopped 2 times in a row"),
            "{skipped}"
        );
        assert_eq!(resumed.ended("c.md"), Ok(()));
        assert!(lib.pending_job().is_empty());
        // So does every later job over its folder, a watched folder's catch-up among them.
        let again = JobRecord::run(&lib, &[&docs]).await;
        assert!(!again.embedded_killer());
        assert!(again.ended("b.md").is_err());
    });
    drop(runtime);

    // Named itself, it is read again (and kills the app again, once).
    crash_child(&library, &[&killer]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let lib = Library::open(&library, &BAG_OF_WORDS).await.unwrap();
        // One end since: read again, by an embedder that lives through it.
        let retried = JobRecord::run(&lib, &[&docs]).await;
        assert!(retried.embedded_killer());
        assert_eq!(retried.ended("b.md"), Ok(()));
        assert_eq!(lib.documents().len(), 3);
    });
}
