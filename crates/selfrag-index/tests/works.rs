//! The work records the library keeps per document, against a real LanceDB: what each source
//! says is kept apart, the person's edit and a reference manager's record survive the file
//! being indexed again, they are durable across opening the library again, and a library made
//! before works gets them when its files are next indexed, without embedding anything again.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

mod common;

use common::{BAG_OF_WORDS, BagOfWords, Counting};
use selfrag_index::{IndexOutcome, Library};
use selfrag_works::{Author, FieldSource, Sourced, Work, WorkDate};

const EMBEDDER: BagOfWords = BAG_OF_WORDS;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn key(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn titled(title: &str) -> Work {
    Work {
        title: Some(Sourced::new(title.into(), FieldSource::Person)),
        ..Work::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_and_zotero_records_survive_a_re_index_and_a_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let lib_dir = tmp.path().join("lib");
    let file = write(
        tmp.path(),
        "paper.md",
        "Telemetry of reindeer herds.\n\nThe article is doi:10.5555/Reindeer.1998 online.",
    );
    let path = key(&file);
    {
        let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
        lib.index_file(&file, &EMBEDDER).await.unwrap();
        let found = lib.document(&path).unwrap().work();
        assert_eq!(
            found.doi,
            Some(Sourced::new(
                "10.5555/reindeer.1998".into(),
                FieldSource::Identifier
            )),
            "the DOI in the text: {found:?}"
        );
        let zotero = Work {
            title: Some(Sourced::new(
                "Reindeer telemetry".into(),
                FieldSource::Person,
            )),
            authors: Some(Sourced::new(
                vec![Author::person("Ødegård", "Bjørn")],
                FieldSource::Person,
            )),
            date: Some(Sourced::new(WorkDate::year(1998), FieldSource::Person)),
            ..Work::default()
        };
        let works = lib
            .set_works(FieldSource::ReferenceManager, vec![(file.clone(), zotero)])
            .await
            .unwrap();
        // Marked as Zotero's whatever the reader said.
        assert_eq!(
            works[0].title.as_ref().map(|t| t.source),
            Some(FieldSource::ReferenceManager)
        );
        lib.set_works(
            FieldSource::Person,
            vec![(file.clone(), titled("My title"))],
        )
        .await
        .unwrap();
        // The file changes: what it says is read again, the rest stays.
        std::fs::write(&file, "Telemetry of reindeer herds, second edition.").unwrap();
        let outcome = lib.index_file(&file, &EMBEDDER).await.unwrap();
        assert!(
            matches!(outcome, IndexOutcome::Indexed { .. }),
            "{outcome:?}"
        );
    }
    let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
    let work = lib.document(&path).unwrap().work();
    assert_eq!(work.title(), Some("My title"));
    assert_eq!(work.year(), Some(1998));
    assert_eq!(work.authors()[0].family(), "Ødegård");
    assert_eq!(work.doi, None, "the new text has no DOI: {work:?}");
    // The edit undone: Zotero's title again.
    let works = lib
        .set_works(FieldSource::Person, vec![(file.clone(), Work::default())])
        .await
        .unwrap();
    assert_eq!(works[0].title(), Some("Reindeer telemetry"));
    // A document the library does not hold is an error that names it.
    let missing = lib
        .set_works(
            FieldSource::Person,
            vec![(PathBuf::from("/nowhere.md"), titled("x"))],
        )
        .await
        .unwrap_err();
    assert!(missing.to_string().contains("/nowhere.md"), "{missing}");
}

/// A library made before works (its documents table has no `works` column) opens, and indexing
/// its unchanged files again reads their works without embedding a passage again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_from_before_works_reads_them_on_the_next_index_run_without_re_embedding() {
    let tmp = tempfile::tempdir().unwrap();
    let lib_dir = tmp.path().join("lib");
    let file = write(
        tmp.path(),
        "old.md",
        "See arXiv:2310.11511v1 for the method.",
    );
    {
        let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
        lib.index_file(&file, &EMBEDDER).await.unwrap();
    }
    let db = lancedb::connect(lib_dir.to_str().unwrap())
        .execute()
        .await
        .unwrap();
    let documents = db.open_table("documents_v2").execute().await.unwrap();
    documents.drop_columns(&["works"]).await.unwrap();
    drop((documents, db));
    // As a library of the time would be, with its own record of durable versions (which the
    // dropped column is not in).
    std::fs::remove_file(lib_dir.join("durable.json")).unwrap();

    let counting = Counting::new(EMBEDDER);
    let lib = Library::open(&lib_dir, &counting).await.unwrap();
    let path = key(&file);
    assert!(lib.document(&path).unwrap().works.is_none());
    let embedded_before = counting.embedded();
    let outcome = lib.index_file(&file, &counting).await.unwrap();
    assert!(
        matches!(outcome, IndexOutcome::Unchanged { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        counting.embedded(),
        embedded_before,
        "nothing embedded again"
    );
    let work = lib.document(&path).unwrap().work();
    assert_eq!(
        work.arxiv.map(|a| a.value).as_deref(),
        Some("2310.11511"),
        "read on the next run"
    );
    // Read now: the next run does not read it again.
    assert!(lib.document(&path).unwrap().works.is_some());
}
