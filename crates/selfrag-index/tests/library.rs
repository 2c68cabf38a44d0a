//! The library against a real LanceDB in a temporary directory. Vectors come from a
//! bag-of-words embedder (a double at the `PassageEmbedder` boundary) so that which passage
//! must win a search is known exactly; the real BERT embedder is exercised in selfrag-engine
//! and by the retrieval-quality test with MiniLM.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

mod common;

use common::{BAG_OF_WORDS, BagOfWords, Counting, query};
use selfrag_index::{
    IndexOutcome, JobEvent, JobStop, Library, SearchFilter, SearchMode, SearchRequest,
};

const EMBEDDER: BagOfWords = BAG_OF_WORDS;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, text).unwrap();
    p
}

async fn texts_found(lib: &Library, text: &str) -> Vec<String> {
    lib.search(&query(&EMBEDDER, text, 10))
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.text)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_markdown_file_becomes_searchable_passages() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(
        tmp.path(),
        "selfrag.md",
        "# Self-RAG\nSelf-RAG decides when to retrieve passages.\n\n## Critique\nThe model critiques its output with reflection tokens such as IsSup.\n",
    );
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    let outcome = lib.index_file(&file, &EMBEDDER).await.unwrap();
    let IndexOutcome::Indexed { passages, .. } = outcome else {
        panic!("expected a new document, got {outcome:?}")
    };
    assert!(passages >= 1);
    let stats = lib.stats().await.unwrap();
    assert_eq!((stats.documents, stats.passages), (1, passages as usize));

    for mode in [SearchMode::Vector, SearchMode::Fts, SearchMode::Hybrid] {
        let request = SearchRequest {
            mode,
            ..query(&EMBEDDER, "reflection tokens critique", 3)
        };
        let hits = lib.search(&request).await.unwrap();
        assert!(
            hits[0].text.contains("reflection tokens"),
            "{mode:?}: {hits:?}"
        );
        assert_eq!(hits[0].title, "Self-RAG");
        assert_eq!(hits[0].section.as_deref(), Some("Critique"));
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_text_search_finds_a_rare_exact_term_the_vectors_blur() {
    let tmp = tempfile::tempdir().unwrap();
    // 64 hash buckets: with this many distinct words the bag-of-words vectors collide a lot,
    // while BM25 matches the one passage containing the code word exactly.
    let mut files = Vec::new();
    for i in 0..30 {
        files.push(write(
            tmp.path(),
            &format!("note{i}.txt"),
            &format!("Meeting notes {i}: budget review, travel plans, office supplies {i}."),
        ));
    }
    files.push(write(
        tmp.path(),
        "secret.txt",
        "The project codename is zanzibarquartz and it ships in spring.",
    ));
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    for f in &files {
        lib.index_file(f, &EMBEDDER).await.unwrap();
    }
    let fts = SearchRequest {
        mode: SearchMode::Fts,
        ..query(&EMBEDDER, "zanzibarquartz", 3)
    };
    let hits = lib.search(&fts).await.unwrap();
    assert_eq!(hits.len(), 1, "BM25 matches one passage: {hits:?}");
    assert!(hits[0].text.contains("zanzibarquartz"));
    let vector = SearchRequest {
        mode: SearchMode::Vector,
        ..query(&EMBEDDER, "zanzibarquartz", 3)
    };
    let dense = lib.search(&vector).await.unwrap();
    assert!(
        dense.iter().all(|h| !h.text.contains("zanzibarquartz")),
        "the hashed vectors are meant to miss it: {dense:?}"
    );
    // Fusion brings BM25's exact match into the top 3 that vectors alone missed.
    let hybrid = lib
        .search(&query(&EMBEDDER, "zanzibarquartz", 3))
        .await
        .unwrap();
    assert!(
        hybrid.iter().any(|h| h.text.contains("zanzibarquartz")),
        "{hybrid:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_can_be_restricted_to_a_folder_or_to_documents() {
    let tmp = tempfile::tempdir().unwrap();
    let a = write(
        tmp.path(),
        "papers/a.txt",
        "Retrieval augmented generation with critique.",
    );
    let b = write(
        tmp.path(),
        "notes/b.txt",
        "Retrieval augmented generation in my notes.",
    );
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    lib.index_file(&a, &EMBEDDER).await.unwrap();
    let IndexOutcome::Indexed {
        document_id: b_id, ..
    } = lib.index_file(&b, &EMBEDDER).await.unwrap()
    else {
        panic!("b is new")
    };
    let mut request = query(&EMBEDDER, "retrieval augmented generation", 5);
    assert_eq!(lib.search(&request).await.unwrap().len(), 2);

    request.filter = SearchFilter {
        folder: Some(tmp.path().join("papers")),
        ..SearchFilter::default()
    };
    let hits = lib.search(&request).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].path.ends_with("a.txt"), "{hits:?}");

    request.filter = SearchFilter {
        documents: vec![b_id],
        ..SearchFilter::default()
    };
    let hits = lib.search(&request).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].path.ends_with("b.txt"), "{hits:?}");

    request.filter.folder = Some(tmp.path().join("elsewhere"));
    assert!(lib.search(&request).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_file_is_not_even_read_and_a_renamed_one_is_not_embedded_again() {
    let tmp = tempfile::tempdir().unwrap();
    let text = "Contriever embeds passages. Dot product ranks them.";
    let a = write(tmp.path(), "a.txt", text);
    let lib_dir = tmp.path().join("lib");
    let embedder = Counting::new(BAG_OF_WORDS);
    {
        let lib = Library::open(&lib_dir, &embedder).await.unwrap();
        lib.index_file(&a, &embedder).await.unwrap();
    }
    let embedded = embedder.embedded();
    assert!(embedded > 0);

    // Across a restart: unchanged, nothing embedded.
    let lib = Library::open(&lib_dir, &embedder).await.unwrap();
    assert!(matches!(
        lib.index_file(&a, &embedder).await.unwrap(),
        IndexOutcome::Unchanged { .. }
    ));
    // Renamed: the passages are reused for the new path, the old path goes.
    let renamed = tmp.path().join("renamed.txt");
    std::fs::rename(&a, &renamed).unwrap();
    let outcome = lib.index_file(&renamed, &embedder).await.unwrap();
    assert!(
        matches!(&outcome, IndexOutcome::Reused { from, .. } if from.ends_with("a.txt")),
        "{outcome:?}"
    );
    lib.remove(&a).await.unwrap();
    assert_eq!(embedder.embedded(), embedded, "nothing was embedded again");
    let docs = lib.documents();
    assert_eq!(docs.len(), 1);
    assert!(docs[0].path.ends_with("renamed.txt"));
    let hits = lib
        .search(&query(&EMBEDDER, "Contriever", 5))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "the passage survives the rename: {hits:?}");
    assert!(hits[0].path.ends_with("renamed.txt"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_file_replaces_its_passages_and_a_removed_one_leaves_none() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "f.txt", "The old claim about penguins flying.");
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    lib.index_file(&f, &EMBEDDER).await.unwrap();
    write(
        tmp.path(),
        "f.txt",
        "A corrected statement about albatross gliding, longer now.",
    );
    assert!(matches!(
        lib.index_file(&f, &EMBEDDER).await.unwrap(),
        IndexOutcome::Indexed { .. }
    ));
    let found = texts_found(&lib, "penguins albatross").await;
    assert_eq!(
        found.len(),
        1,
        "old content gone, new content in: {found:?}"
    );
    assert!(found[0].contains("albatross"));
    assert_eq!(lib.stats().await.unwrap().passages, 1);

    assert_eq!(lib.remove(&f).await.unwrap().len(), 1);
    let stats = lib.stats().await.unwrap();
    assert_eq!((stats.documents, stats.passages), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_copies_share_passages_until_the_last_one_is_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let text = "Identical report about reflection tokens.";
    let one = write(tmp.path(), "one.txt", text);
    let two = write(tmp.path(), "two.txt", text);
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    lib.index_file(&one, &EMBEDDER).await.unwrap();
    lib.index_file(&two, &EMBEDDER).await.unwrap();
    let stats = lib.stats().await.unwrap();
    assert_eq!((stats.documents, stats.contents, stats.passages), (2, 1, 1));
    lib.remove(&one).await.unwrap();
    assert_eq!(texts_found(&lib, "reflection tokens").await.len(), 1);
    lib.remove(&two).await.unwrap();
    assert!(texts_found(&lib, "reflection tokens").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_the_embedder_re_embeds_the_stored_text_without_reparsing() {
    let tmp = tempfile::tempdir().unwrap();
    let a = write(tmp.path(), "a.txt", "Self-RAG critiques its own answers.");
    let lib_dir = tmp.path().join("lib");
    Library::open(&lib_dir, &EMBEDDER)
        .await
        .unwrap()
        .index_file(&a, &EMBEDDER)
        .await
        .unwrap();
    // The file is gone: only the stored passage text can be re-embedded.
    std::fs::remove_file(&a).unwrap();
    let other = Counting::new(BagOfWords {
        dim: 32,
        id: "other-32",
    });
    let lib = Library::open(&lib_dir, &other).await.unwrap();
    assert_eq!(other.embedded(), 1, "one passage re-embedded");
    assert_eq!(lib.embedder_id(), "other-32");
    let hits = lib.search(&query(&other, "critiques", 3)).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].text.contains("critiques"));
    // Opening again with the same embedder re-embeds nothing.
    drop(lib);
    let again = Counting::new(BagOfWords {
        dim: 32,
        id: "other-32",
    });
    Library::open(&lib_dir, &again).await.unwrap();
    assert_eq!(again.embedded(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_cannot_be_read_fails_alone_and_names_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    let err = lib
        .index_file(&tmp.path().join("missing.md"), &EMBEDDER)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.md"), "{err}");
    assert_eq!(lib.stats().await.unwrap().documents, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_is_told_the_library_is_in_use() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lib");
    let _first = Library::open(&dir, &EMBEDDER).await.unwrap();
    let err = Library::open(&dir, &EMBEDDER)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("in use"), "{err}");
    // Issue 50: the error names who holds it, so a person can find that process.
    #[cfg(target_os = "linux")]
    assert!(
        err.contains(&format!("({} (", std::process::id())),
        "the holder is not named: {err}"
    );
}

/// Issue 50: a killed `selfrag index` left the library `Busy` for the next process: the kernel
/// releases a dead process's lock, but a worker it was starting at that instant holds a copy
/// of the lock's file until its `exec` (longer on a loaded machine). Here another open file
/// description holds the lock for a second, as that worker does, and the opener waits it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_holder_that_goes_away_is_waited_for_not_reported_busy() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lib");
    drop(Library::open(&dir, &EMBEDDER).await.unwrap());
    let held = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("library.lock"))
        .unwrap();
    held.lock().unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1000));
        drop(held);
    });
    let lib = Library::open(&dir, &EMBEDDER).await;
    release.join().unwrap();
    assert!(lib.is_ok(), "{:?}", lib.err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passages_of_a_document_whose_commit_never_landed_are_removed_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    let lib_dir = tmp.path().join("lib");
    let kept = write(tmp.path(), "kept.txt", "Self-RAG keeps this passage.");
    let torn = write(
        tmp.path(),
        "torn.txt",
        "This passage belongs to an interrupted run.",
    );
    {
        let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
        lib.index_file(&kept, &EMBEDDER).await.unwrap();
        lib.index_file(&torn, &EMBEDDER).await.unwrap();
    }
    // A crash between the passages write and the document row leaves exactly this state.
    let db = lancedb::connect(lib_dir.to_str().unwrap())
        .execute()
        .await
        .unwrap();
    let documents = db.open_table("documents_v2").execute().await.unwrap();
    documents
        .delete(format!("path = '{}'", torn.display()).as_str())
        .await
        .unwrap();
    // Without its record of durable versions (a library from before it existed), the library
    // opens its tables as they are rather than going back to the last durable commit.
    std::fs::remove_file(lib_dir.join("durable.json")).unwrap();

    let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
    let stats = lib.stats().await.unwrap();
    assert_eq!(
        (stats.documents, stats.passages),
        (1, 1),
        "only the committed document remains"
    );
    assert!(
        texts_found(&lib, "interrupted run")
            .await
            .iter()
            .all(|t| !t.contains("interrupted"))
    );
    // Indexing the file again now works as for a new file.
    assert!(matches!(
        lib.index_file(&torn, &EMBEDDER).await.unwrap(),
        IndexOutcome::Indexed { .. }
    ));
}

/// A library made before page labels (its passages have no `page_label` column) and before
/// documents were written in slices (its documents have no `passages_expected`) opens, gets the
/// columns as nulls without rewriting a row, lists its documents as complete, and takes new
/// documents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_from_before_page_labels_gets_the_column_and_keeps_its_passages() {
    let tmp = tempfile::tempdir().unwrap();
    let lib_dir = tmp.path().join("lib");
    let old = write(tmp.path(), "old.md", "Indexed before page labels existed.");
    let new = write(tmp.path(), "new.md", "Indexed after the column was added.");
    {
        let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
        lib.index_file(&old, &EMBEDDER).await.unwrap();
    }
    let db = lancedb::connect(lib_dir.to_str().unwrap())
        .execute()
        .await
        .unwrap();
    let passages = db.open_table("passages").execute().await.unwrap();
    passages.drop_columns(&["page_label"]).await.unwrap();
    let documents = db.open_table("documents_v2").execute().await.unwrap();
    documents
        .drop_columns(&["passages_expected"])
        .await
        .unwrap();
    // As a library of the time: no record of durable versions either.
    std::fs::remove_file(lib_dir.join("durable.json")).unwrap();
    drop((passages, documents, db));

    let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
    assert!(lib.documents().iter().all(|d| d.is_complete()));
    // Complete: the unchanged file is not read again.
    assert!(matches!(
        lib.index_file(&old, &EMBEDDER).await.unwrap(),
        IndexOutcome::Unchanged { .. }
    ));
    assert!(
        texts_found(&lib, "before page labels")
            .await
            .iter()
            .any(|t| t.contains("before page labels"))
    );
    lib.index_file(&new, &EMBEDDER).await.unwrap();
    let hits = lib
        .search(&query(&EMBEDDER, "column was added", 5))
        .await
        .unwrap();
    assert!(hits.iter().all(|h| h.page_label.is_none()), "{hits:?}");
    assert_eq!(lib.stats().await.unwrap().documents, 2);
}

/// Every regular file under `dir` with its length.
fn files_under(dir: &Path) -> std::collections::BTreeMap<PathBuf, u64> {
    let mut files = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                files.insert(entry.path(), entry.metadata().unwrap().len());
            }
        }
    }
    files
}

/// A power cut in the middle of a commit, as a file system with delayed allocation leaves it:
/// every file written since the last durable commit is there but empty (its data never reached
/// the disk), manifests included, and the record of durable versions is the previous one. The
/// library opens at the last durable commit, with every document indexed before, and the cut
/// document indexes again. Without the rollback LanceDB opens the newest manifest, which is
/// empty, and the library cannot be opened at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_power_cut_during_a_commit_leaves_the_library_at_its_last_durable_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let lib_dir = tmp.path().join("lib");
    let kept = write(
        tmp.path(),
        "kept.md",
        "Self-RAG keeps what was committed durably.",
    );
    let cut = write(
        tmp.path(),
        "cut.md",
        "This document was being committed at the cut.",
    );
    let (before, record) = {
        let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
        lib.index_file(&kept, &EMBEDDER).await.unwrap();
        let before = files_under(&lib_dir);
        let record = std::fs::read(lib_dir.join("durable.json")).unwrap();
        lib.index_file(&cut, &EMBEDDER).await.unwrap();
        (before, record)
    };
    let torn: Vec<PathBuf> = files_under(&lib_dir)
        .into_keys()
        .filter(|p| !before.contains_key(p) && !p.ends_with("durable.json"))
        .collect();
    assert!(
        torn.iter()
            .any(|p| p.extension().is_some_and(|e| e == "manifest")),
        "the second commit wrote manifests: {torn:?}"
    );
    for path in &torn {
        std::fs::File::create(path).unwrap();
    }
    std::fs::write(lib_dir.join("durable.json"), &record).unwrap();
    // The same torn state without the record: LanceDB reads the empty manifests.
    let unrecorded = tmp.path().join("unrecorded");
    copy_dir(&lib_dir, &unrecorded);
    std::fs::remove_file(unrecorded.join("durable.json")).unwrap();
    let opened = Library::open(&unrecorded, &EMBEDDER).await;
    let readable = match &opened {
        Ok(lib) => lib.search(&query(&EMBEDDER, "committed", 10)).await.is_ok(),
        Err(_) => false,
    };
    assert!(!readable, "the torn library is unreadable as it is");
    drop(opened);

    let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
    let paths: Vec<String> = lib.documents().into_iter().map(|d| d.path).collect();
    assert_eq!(paths, [kept.display().to_string()]);
    assert_eq!(lib.stats().await.unwrap().passages, 1);
    assert!(
        texts_found(&lib, "committed durably")
            .await
            .iter()
            .any(|t| t.contains("durably"))
    );
    let aside: Vec<_> = std::fs::read_dir(&lib_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("recovered-"))
        .collect();
    assert_eq!(
        aside.len(),
        1,
        "the newer manifests are kept aside, not deleted"
    );
    assert!(matches!(
        lib.index_file(&cut, &EMBEDDER).await.unwrap(),
        IndexOutcome::Indexed { .. }
    ));
    // A search makes the missing full-text index (no job optimized this library): a write too.
    assert!(!texts_found(&lib, "cut").await.is_empty());
    drop(lib);
    // Reopened after a clean close: nothing to roll back, both documents there.
    let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
    assert_eq!(lib.documents().len(), 2);
    let recovered = std::fs::read_dir(&lib_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("recovered-"))
        .count();
    assert_eq!(recovered, 1, "a clean close leaves nothing to roll back");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_reports_progress_removes_vanished_files_and_resumes_an_interrupted_one() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    for i in 0..5 {
        write(
            &docs,
            &format!("d{i}.txt"),
            &format!("Document number {i} about topic {i}."),
        );
    }
    write(&docs, ".hidden.txt", "never indexed");
    write(&docs, "image.png", "not a document");
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    let never = AtomicBool::new(false);
    let mut progress = Vec::new();
    let summary = lib
        .run_job(std::slice::from_ref(&docs), &EMBEDDER, &never, |e| {
            if let JobEvent::Progress(p) = e {
                progress.push(p)
            }
        })
        .await
        .unwrap();
    assert_eq!(
        (summary.indexed, summary.skipped, summary.failed),
        (5, 1, 0)
    );
    assert_eq!(progress.len(), 6);
    let last = progress.last().unwrap();
    assert_eq!((last.done, last.total, last.passages), (6, 6, 5));
    assert_eq!(last.eta_seconds, Some(0.0));
    assert!(
        lib.pending_job().is_empty(),
        "a finished job leaves nothing to resume"
    );

    std::fs::remove_file(docs.join("d0.txt")).unwrap();
    let summary = lib
        .run_job(std::slice::from_ref(&docs), &EMBEDDER, &never, |_| {})
        .await
        .unwrap();
    assert_eq!((summary.indexed, summary.removed), (0, 1));
    assert_eq!(lib.documents().len(), 4);

    // A job file left by a killed process: the next job (even with no paths) finishes it.
    let more = tmp.path().join("more");
    write(&more, "m.txt", "A file of the interrupted job.");
    std::fs::write(
        tmp.path().join("lib").join("job.json"),
        serde_json::json!({ "roots": [more] }).to_string(),
    )
    .unwrap();
    assert_eq!(lib.pending_job(), vec![more.clone()]);
    let mut resumed = Vec::new();
    lib.run_job(&[], &EMBEDDER, &never, |e| {
        if let JobEvent::Started { resumed: r, .. } = e {
            resumed = r
        }
    })
    .await
    .unwrap();
    assert_eq!(resumed.len(), 1);
    assert_eq!(lib.documents().len(), 5);
}

/// A document of about 25 passages on `topic`: more than a file committed with others
/// (16 passages), so a job writes it on its own.
fn own_commit_text(topic: &str) -> String {
    (0..2_000).map(|w| format!("{topic}{} ", w % 97)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_stops_between_files_and_keeps_what_it_did() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    for i in 0..4 {
        write(
            &docs,
            &format!("d{i}.txt"),
            &own_commit_text(&format!("document{i}x")),
        );
    }
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    let cancel = AtomicBool::new(false);
    let summary = lib
        .run_job(std::slice::from_ref(&docs), &EMBEDDER, &cancel, |e| {
            if matches!(e, JobEvent::Progress(p) if p.done == 2) {
                cancel.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        })
        .await
        .unwrap();
    assert!(summary.cancelled);
    assert_eq!(summary.indexed, 2);
    assert_eq!(lib.documents().len(), 2);
}

/// The extraction worker built with this crate, as the app parses (in a child process).
fn worker() -> selfrag_index::Extractor {
    selfrag_index::Extractor::worker(env!("CARGO_BIN_EXE_selfrag-extract-worker"))
}

/// Embeds as `inner`, but its first call of passages takes `first_call` longer: a file being
/// embedded while the job could do something else.
struct SlowFirstCall {
    inner: BagOfWords,
    first_call: std::time::Duration,
    called: AtomicBool,
    /// Run once, at the start of the first call of passages.
    during_first_call: Box<dyn Fn() + Send + Sync>,
}

impl selfrag_index::PassageEmbedder for SlowFirstCall {
    fn model_id(&self) -> String {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, selfrag_index::IndexError> {
        if texts != selfrag_index::FINGERPRINT_SENTENCES
            && !self.called.swap(true, Ordering::SeqCst)
        {
            (self.during_first_call)();
            std::thread::sleep(self.first_call);
        }
        self.inner.embed(texts)
    }
}

/// Issue 48, goal 5: a job parses the next file in its worker process while this one is
/// embedded. The second file's worker never answers and is given 2 s; the first file's
/// embedding takes 4 s. Parsed ahead, the second file's time limit has run out by its turn,
/// so its failure follows its start at once, where parsing at its turn would take the 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_parses_the_next_file_while_this_one_is_embedded() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    write(&docs, "a-long.txt", &own_commit_text("heron").repeat(2));
    let hangs = write(&docs, "worker-hangs.txt", "This worker never answers.");
    let embedder = SlowFirstCall {
        inner: BAG_OF_WORDS,
        first_call: std::time::Duration::from_secs(4),
        called: AtomicBool::new(false),
        during_first_call: Box::new(|| {}),
    };
    let lib = Library::open(&tmp.path().join("lib"), &embedder)
        .await
        .unwrap()
        .with_extractor(worker().with_timeout(std::time::Duration::from_secs(2)));
    let never = AtomicBool::new(false);
    let hangs_path = hangs.display().to_string();
    let (mut started, mut failed) = (None, None);
    let summary = lib
        .run_job(
            std::slice::from_ref(&docs),
            &embedder,
            &never,
            |e| match e {
                JobEvent::FileStarted { path } if path == hangs_path => {
                    started = Some(std::time::Instant::now());
                }
                JobEvent::FileDone { path, result } if path == hangs_path => {
                    let err = result.unwrap_err().to_string();
                    assert!(err.contains("ran out of time"), "{err}");
                    failed = Some(std::time::Instant::now());
                }
                _ => {}
            },
        )
        .await
        .unwrap();
    assert_eq!((summary.indexed, summary.failed), (1, 1), "{summary:?}");
    let waited = failed.unwrap() - started.unwrap();
    assert!(
        waited < std::time::Duration::from_secs(1),
        "the second file's parse began at its turn: {waited:?} from its start to its failure"
    );
}

/// A file changed after its parse ahead began (while the file before it was embedded) is
/// parsed again at its turn: the library holds what the file says now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_changed_after_it_was_parsed_ahead_is_parsed_again() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    write(&docs, "a-long.txt", &own_commit_text("heron").repeat(2));
    let changing = write(&docs, "b-note.txt", "The old note on kingfishers.");
    let rewrite = changing.clone();
    let embedder = SlowFirstCall {
        inner: BAG_OF_WORDS,
        first_call: std::time::Duration::from_millis(500),
        called: AtomicBool::new(false),
        during_first_call: Box::new(move || {
            // A different size, so that even a clock too coarse to move tells them apart.
            std::fs::write(&rewrite, "The new and longer note on cormorants diving.").unwrap();
        }),
    };
    let lib = Library::open(&tmp.path().join("lib"), &embedder)
        .await
        .unwrap()
        .with_extractor(worker());
    let never = AtomicBool::new(false);
    let summary = lib
        .run_job(std::slice::from_ref(&docs), &embedder, &never, |_| {})
        .await
        .unwrap();
    assert_eq!(summary.indexed, 2, "{summary:?}");
    let hit = lib
        .search(&query(&embedder, "cormorants diving", 1))
        .await
        .unwrap()
        .remove(0);
    assert!(hit.text.contains("cormorants"), "{}", hit.text);
    let old = lib
        .search(&query(&embedder, "kingfishers", 5))
        .await
        .unwrap();
    assert!(
        old.iter().all(|h| !h.text.contains("kingfishers")),
        "{old:?}"
    );
}

/// Small new files are embedded and committed together: one embedding call for the passages of
/// several files, every file reported once stored. A Stop while some are read but not stored
/// keeps none of those (nothing of them is in the library, nothing is reported done), and the
/// next job reads them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_files_are_committed_together_and_a_stop_before_their_commit_keeps_none() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    for i in 0..5 {
        write(
            &docs,
            &format!("n{i}.txt"),
            &format!("Note {i} on heron {i}."),
        );
    }
    let embedder = Counting::new(BAG_OF_WORDS);
    let lib = Library::open(&tmp.path().join("lib"), &embedder)
        .await
        .unwrap();
    let cancel = AtomicBool::new(false);
    let (mut started, mut done) = (0, Vec::new());
    let summary = lib
        .run_job(
            std::slice::from_ref(&docs),
            &embedder,
            &cancel,
            |e| match e {
                JobEvent::FileStarted { .. } => {
                    started += 1;
                    if started == 4 {
                        cancel.store(true, Ordering::SeqCst);
                    }
                }
                JobEvent::FileDone { path, .. } => done.push(path),
                _ => {}
            },
        )
        .await
        .unwrap();
    assert!(summary.cancelled, "{summary:?}");
    assert_eq!((summary.indexed, done.len()), (0, 0), "{done:?}");
    assert!(lib.documents().is_empty());
    assert_eq!(embedder.embedded(), 0, "nothing was embedded");

    let never = AtomicBool::new(false);
    let summary = lib
        .run_job(std::slice::from_ref(&docs), &embedder, &never, |_| {})
        .await
        .unwrap();
    assert_eq!(summary.indexed, 5, "{summary:?}");
    assert_eq!(lib.documents().len(), 5);
    assert_eq!(
        (embedder.embedded(), embedder.calls()),
        (5, 1),
        "the five notes' passages in one call"
    );
    for i in 0..5 {
        let found = texts_found(&lib, &format!("heron {i}")).await;
        assert!(
            found.iter().any(|t| t.contains(&format!("Note {i} "))),
            "{found:?}"
        );
    }
}

/// Pausing stops a job as Stop does, but keeps its folders apart in `job.json`: the next job
/// (what the next start runs) does not take them up, a job given them resumes where the pause
/// left off, embedding only the files not done, and forgetting drops them with what was done
/// kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_job_waits_apart_until_resumed_and_embeds_only_what_it_had_not_done() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    for i in 0..4 {
        write(
            &docs,
            &format!("d{i}.txt"),
            &own_commit_text(&format!("otter{i}x")),
        );
    }
    let other = tmp.path().join("other");
    write(
        &other,
        "o.txt",
        "Another folder, dropped while the first is paused.",
    );
    let embedder = Counting::new(BAG_OF_WORDS);
    let lib = Library::open(&tmp.path().join("lib"), &embedder)
        .await
        .unwrap();
    let (stop, pause) = (AtomicBool::new(false), AtomicBool::new(false));
    let both = JobStop {
        stop: &stop,
        pause: &pause,
    };
    let summary = lib
        .run_job(std::slice::from_ref(&docs), &embedder, both, |e| {
            if matches!(e, JobEvent::Progress(p) if p.done == 2) {
                pause.store(true, Ordering::SeqCst);
                stop.store(true, Ordering::SeqCst);
            }
        })
        .await
        .unwrap();
    assert!(summary.paused && summary.cancelled, "{summary:?}");
    assert_eq!(summary.indexed, 2);
    // The passages of one of the (equally long) files.
    let per_file = embedder.embedded() / 2;
    assert!(
        lib.pending_job().is_empty(),
        "a paused job is not resumed at the next start"
    );
    assert_eq!(lib.paused_job(), vec![docs.clone()]);

    let never = AtomicBool::new(false);
    let mut resumed = vec!["not reported".to_string()];
    let summary = lib
        .run_job(std::slice::from_ref(&other), &embedder, &never, |e| {
            if let JobEvent::Started { resumed: r, .. } = e {
                resumed = r
            }
        })
        .await
        .unwrap();
    assert_eq!((summary.indexed, summary.paused), (1, false));
    assert!(resumed.is_empty(), "{resumed:?}");
    assert_eq!(
        lib.paused_job(),
        vec![docs.clone()],
        "another job leaves it paused"
    );
    // A job over the same folder that is stopped (not paused) leaves the pause as it was.
    let stopped = AtomicBool::new(true);
    let summary = lib
        .run_job(std::slice::from_ref(&docs), &embedder, &stopped, |_| {})
        .await
        .unwrap();
    assert!(summary.cancelled && !summary.paused);
    assert_eq!(
        lib.paused_job(),
        vec![docs.clone()],
        "a stopped job leaves it paused"
    );
    assert!(lib.pending_job().is_empty());

    let embedded = embedder.embedded();
    let resumed = lib.take_paused_job().unwrap();
    assert_eq!(resumed, vec![docs.clone()]);
    assert!(lib.paused_job().is_empty());
    assert_eq!(
        lib.pending_job(),
        vec![docs.clone()],
        "a crash now resumes it at the start"
    );
    let summary = lib
        .run_job(&resumed, &embedder, &never, |_| {})
        .await
        .unwrap();
    assert_eq!((summary.indexed, summary.skipped), (2, 2));
    assert_eq!(
        embedder.embedded() - embedded,
        2 * per_file,
        "only the two files not done are embedded"
    );
    assert!(lib.paused_job().is_empty() && lib.pending_job().is_empty());
    assert_eq!(lib.documents().len(), 5);

    write(&docs, "d4.txt", "A fifth document about otters.");
    write(&docs, "d5.txt", "A sixth document about otters.");
    let (stop, pause) = (AtomicBool::new(false), AtomicBool::new(false));
    let both = JobStop {
        stop: &stop,
        pause: &pause,
    };
    pause.store(true, Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    let summary = lib
        .run_job(std::slice::from_ref(&docs), &embedder, both, |_| {})
        .await
        .unwrap();
    assert!(summary.paused);
    assert_eq!(lib.paused_job(), vec![docs.clone()]);
    lib.forget_paused_job().unwrap();
    assert!(lib.paused_job().is_empty());
    assert!(
        !tmp.path().join("lib/job.json").exists(),
        "nothing left to record"
    );
    assert_eq!(
        lib.documents().len(),
        5,
        "forgetting removes nothing indexed"
    );
}

/// A folder given to the library may hold links: one to a file inside it is indexed, one to a
/// file outside it (`notes.txt -> ~/.ssh/id_rsa`) is never read and is reported by name, by a
/// job and by the watcher alike.
#[cfg(unix)]
#[tokio::test]
async fn symlinks_out_of_a_granted_folder_are_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let secret = write(
        &tmp.path().join("home/.ssh"),
        "id_rsa",
        "BEGIN OPENSSH PRIVATE KEY zebrasecret",
    );
    let docs = tmp.path().join("docs");
    let real = write(&docs, "real.txt", "Otters hold hands while sleeping.");
    std::os::unix::fs::symlink(&secret, docs.join("notes.txt")).unwrap();
    std::os::unix::fs::symlink(&real, docs.join("again.txt")).unwrap();
    std::os::unix::fs::symlink("../docs/real.txt", docs.join("relative.txt")).unwrap();
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    let never = AtomicBool::new(false);
    let mut skipped = Vec::new();
    lib.run_job(std::slice::from_ref(&docs), &EMBEDDER, &never, |e| {
        if let JobEvent::LinkSkipped { path, target } = e {
            skipped.push((path, target));
        }
    })
    .await
    .unwrap();
    let notes = docs.join("notes.txt").display().to_string();
    assert_eq!(
        skipped,
        [(
            notes.clone(),
            secret.canonicalize().unwrap().display().to_string()
        )]
    );
    let paths: Vec<String> = lib.documents().into_iter().map(|d| d.path).collect();
    assert!(!paths.contains(&notes), "{paths:?}");
    assert!(paths.iter().any(|p| p.ends_with("again.txt")), "{paths:?}");
    assert!(
        paths.iter().any(|p| p.ends_with("relative.txt")),
        "{paths:?}"
    );
    let found = texts_found(&lib, "zebrasecret").await;
    assert!(
        !found.iter().any(|t| t.contains("zebrasecret")),
        "{found:?}"
    );

    // The watcher: a link made later in a watched folder is held to the same rule.
    lib.set_watched(&docs, true).unwrap();
    let later = docs.join("later.txt");
    std::os::unix::fs::symlink(&secret, &later).unwrap();
    let mut events = Vec::new();
    let summary = lib
        .apply_changes(std::slice::from_ref(&later), &EMBEDDER, |e| {
            events.push(format!("{e:?}"))
        })
        .await
        .unwrap();
    assert_eq!((summary.indexed, summary.skipped), (0, 1), "{events:?}");
    assert!(events[0].contains("LinkSkipped") && events[0].contains("later.txt"));
    let found = texts_found(&lib, "zebrasecret").await;
    assert!(
        !found.iter().any(|t| t.contains("zebrasecret")),
        "{found:?}"
    );
}

/// Issue 44: a file given alone was its own bound and a link given alone was followed (“a
/// link the user named”); a re-index runs a job of the document's path that way, so an
/// indexed `notes.txt` swapped for a link to a file outside was read through it. A file
/// given alone is bounded by its own place now: once it is a link it leads out, and is named.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_given_alone_that_became_a_link_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let secret = write(
        &tmp.path().join("home/.ssh"),
        "id_rsa",
        "BEGIN OPENSSH PRIVATE KEY zebrasecret",
    );
    let notes = write(
        &tmp.path().join("docs"),
        "notes.txt",
        "Otters hold hands while sleeping.",
    );
    let lib = Library::open(&tmp.path().join("lib"), &EMBEDDER)
        .await
        .unwrap();
    let never = AtomicBool::new(false);
    let summary = lib
        .run_job(std::slice::from_ref(&notes), &EMBEDDER, &never, |_| {})
        .await
        .unwrap();
    assert_eq!(summary.indexed, 1);

    std::fs::rename(&notes, tmp.path().join("docs/notes.old")).unwrap();
    std::os::unix::fs::symlink(&secret, &notes).unwrap();
    lib.remove(&notes).await.unwrap();
    let mut skipped = Vec::new();
    let summary = lib
        .run_job(std::slice::from_ref(&notes), &EMBEDDER, &never, |e| {
            if let JobEvent::LinkSkipped { path, target } = e {
                skipped.push((path, target));
            }
        })
        .await
        .unwrap();
    assert_eq!((summary.indexed, summary.failed), (0, 0));
    assert_eq!(
        skipped,
        [(
            notes.display().to_string(),
            secret.canonicalize().unwrap().display().to_string()
        )]
    );
    assert!(lib.documents().is_empty());
    let err = lib.index_file(&notes, &EMBEDDER).await.unwrap_err();
    assert!(
        matches!(err, selfrag_index::IndexError::LeadsOutside { .. }),
        "{err}"
    );
    assert!(lib.documents().is_empty());
}

/// An embedder that sets `stop` once it has embedded `after` texts.
struct StopsAfter<'a> {
    inner: Counting,
    stop: &'a AtomicBool,
    after: usize,
}

impl selfrag_index::PassageEmbedder for StopsAfter<'_> {
    fn model_id(&self) -> String {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, selfrag_index::IndexError> {
        let vectors = self.inner.embed(texts)?;
        if self.inner.embedded() >= self.after {
            self.stop.store(true, Ordering::SeqCst);
        }
        Ok(vectors)
    }
}

/// 1,600 paragraphs of distinct words: far more passages than one slice or embedding batch.
fn long_text() -> String {
    (0..400)
        .map(|i| format!("Paragraph {i} tells of river {i} and of mountain {i} in detail.\n\n"))
        .collect::<String>()
        .repeat(4)
}

/// A long file is searchable slice by slice: Stop acts at the next embedding batch, the
/// slices written stay searchable and the document is listed with what it has; indexing it
/// again goes on from there, embedding only the rest, and completes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_file_is_searchable_slice_by_slice_and_a_stopped_one_goes_on_where_it_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    let file = write(&docs, "long.txt", &long_text());
    let stop = AtomicBool::new(false);
    // Slices of 16, 16, 32 and 64 passages, embedded in batches of at most 32: stops after
    // the fourth slice's first batch.
    let embedder = StopsAfter {
        inner: Counting::new(BAG_OF_WORDS),
        stop: &stop,
        after: 80,
    };
    let lib = Library::open(&tmp.path().join("lib"), &embedder)
        .await
        .unwrap();
    let mut searchable = Vec::new();
    let summary = lib
        .run_job(std::slice::from_ref(&docs), &embedder, &stop, |e| {
            if let JobEvent::FileSearchable { passages, of, .. } = e {
                searchable.push((passages, of));
            }
        })
        .await
        .unwrap();
    assert!(summary.cancelled);
    assert_eq!((summary.indexed, summary.failed), (0, 0));
    let total = searchable.first().map(|s| s.1).unwrap();
    assert!(total > 200, "{total} passages");
    assert_eq!(searchable, [(16, total), (32, total), (64, total)]);
    assert_eq!(
        embedder.inner.embedded(),
        96,
        "the fourth slice's first batch, then the stop"
    );
    let listed = lib.documents();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].passages, listed[0].passages_expected),
        (64, Some(total))
    );
    assert!(!listed[0].is_complete());
    assert_eq!(lib.stats().await.unwrap().passages, 64);
    // The first slices are searchable, with their document's title and path.
    let hits = lib
        .search(&query(&BAG_OF_WORDS, "river 3 mountain 3", 1))
        .await
        .unwrap();
    assert!(hits[0].text.contains("river 3 "), "{hits:?}");
    assert_eq!(hits[0].path, listed[0].path);

    // Indexing it again goes on from passage 64.
    let again = Counting::new(BAG_OF_WORDS);
    let outcome = lib.index_file(&file, &again).await.unwrap();
    assert!(
        matches!(outcome, IndexOutcome::Indexed { passages, .. } if passages == total),
        "{outcome:?}"
    );
    assert_eq!(
        again.embedded(),
        total as usize - 64,
        "only the rest embedded"
    );
    let listed = lib.documents();
    assert_eq!(
        (listed[0].passages, listed[0].passages_expected),
        (total, None)
    );
    let stored = lib.passages_of(&listed[0].id).await.unwrap();
    let ids: Vec<String> = stored.iter().map(|h| h.passage_id.clone()).collect();
    let expected: Vec<String> = (0..total)
        .map(|i| format!("{}:{i}", listed[0].id))
        .collect();
    assert_eq!(ids, expected, "every passage once, in order");
    // Complete now: the next run only looks at the file.
    let unchanged = lib.index_file(&file, &again).await.unwrap();
    assert!(
        matches!(unchanged, IndexOutcome::Unchanged { .. }),
        "{unchanged:?}"
    );
}

/// A copy of a file that was cut off is not a finished twin to reuse: indexing the copy
/// finishes the content, and both paths' rows say it is complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_a_cut_off_file_finishes_it_for_both_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    let first = write(&docs, "long.txt", &long_text());
    let stop = AtomicBool::new(false);
    let embedder = StopsAfter {
        inner: Counting::new(BAG_OF_WORDS),
        stop: &stop,
        after: 16,
    };
    let lib = Library::open(&tmp.path().join("lib"), &embedder)
        .await
        .unwrap();
    let cut = lib.index_file_stoppable(&first, &embedder, &stop).await;
    assert!(
        matches!(cut, Err(selfrag_index::IndexError::Stopped { .. })),
        "{cut:?}"
    );
    let copy = write(&tmp.path().join("elsewhere"), "copy.txt", &long_text());
    let again = Counting::new(BAG_OF_WORDS);
    let outcome = lib.index_file(&copy, &again).await.unwrap();
    let IndexOutcome::Indexed { passages, .. } = outcome else {
        panic!("expected the content written, got {outcome:?}")
    };
    assert_eq!(again.embedded(), passages as usize - 16);
    let listed = lib.documents();
    assert_eq!(listed.len(), 2);
    for d in &listed {
        assert_eq!((d.passages, d.passages_expected), (passages, None), "{d:?}");
    }
    assert_eq!(lib.stats().await.unwrap().passages, passages as usize);
}

/// Keeps every text it is given, fingerprint sentences left out.
struct Recording {
    inner: BagOfWords,
    texts: std::sync::Mutex<Vec<String>>,
}

impl selfrag_index::PassageEmbedder for Recording {
    fn model_id(&self) -> String {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, selfrag_index::IndexError> {
        if texts != selfrag_index::FINGERPRINT_SENTENCES {
            self.texts
                .lock()
                .unwrap()
                .extend(texts.iter().map(|t| (*t).to_owned()));
        }
        self.inner.embed(texts)
    }
}

/// The sample `cargo xtask bench index` times the embedder alone on is what the indexing job
/// gave the embedder: passages taken at an even stride through the whole library (not the
/// first document's), each written as the job wrote it for the embedder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sample_of_the_library_is_what_its_job_embedded() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    // Three files of the same length, each many passages long.
    for part in 0..3 {
        let text: String = (0..300)
            .map(|i| format!("Part {part} paragraph {i} tells of river {i} and of lake {i}.\n\n"))
            .collect();
        write(&docs, &format!("part{part}.txt"), &text);
    }
    let embedder = Recording {
        inner: BAG_OF_WORDS,
        texts: Default::default(),
    };
    let lib = Library::open(&tmp.path().join("lib"), &embedder)
        .await
        .unwrap();
    let never = AtomicBool::new(false);
    let summary = lib
        .run_job(std::slice::from_ref(&docs), &embedder, &never, |_| {})
        .await
        .unwrap();
    assert_eq!(summary.indexed, 3, "{summary:?}");
    let total = lib.stats().await.unwrap().passages;
    assert!(total >= 24, "{total} passages: too few for a stride");
    let embedded = embedder.texts.lock().unwrap().clone();
    assert_eq!(embedded.len(), total, "each passage embedded once");

    let sample = selfrag_index::bench::passages_at_stride(&lib, 8)
        .await
        .unwrap();
    assert_eq!(sample.len(), 8);
    let ids: std::collections::BTreeSet<&str> =
        sample.iter().map(|h| h.passage_id.as_str()).collect();
    assert_eq!(ids.len(), 8, "no passage twice");
    let documents: std::collections::BTreeSet<&str> =
        sample.iter().map(|h| h.document_id.as_str()).collect();
    assert_eq!(documents.len(), 3, "the stride goes through every document");
    for hit in &sample {
        let input = selfrag_index::embedding_input(&hit.title, &hit.text);
        assert!(
            embedded.contains(&input),
            "{input:?} is not what the job embedded"
        );
    }
    let everything = selfrag_index::bench::passages_at_stride(&lib, total + 10)
        .await
        .unwrap();
    assert_eq!(everything.len(), total, "at most what the library holds");
}
