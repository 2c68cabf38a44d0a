//! The library against a real LanceDB in a temporary directory. Vectors come from a
//! bag-of-words embedder (a double at the `PassageEmbedder` boundary) so that which passage
//! must win a search is known exactly; the real BERT embedder is exercised in selfrag-engine.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

mod common;

use common::{BAG_OF_WORDS, BagOfWords};
use selfrag_index::{IndexOutcome, Library, PassageEmbedder};

const EMBEDDER: BagOfWords = BAG_OF_WORDS;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
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

    let query = EMBEDDER
        .embed(&["reflection tokens critique"])
        .unwrap()
        .remove(0);
    let hits = lib.search(&query, 3).await.unwrap();
    assert!(hits[0].text.contains("reflection tokens"), "{hits:?}");
    assert_eq!(hits[0].title, "Self-RAG");
    assert_eq!(hits[0].section.as_deref(), Some("Critique"));
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_content_is_never_indexed_twice_even_after_reopening() {
    let tmp = tempfile::tempdir().unwrap();
    let a = write(
        tmp.path(),
        "a.txt",
        "Contriever embeds passages. Dot product ranks them.",
    );
    let lib_dir = tmp.path().join("lib");
    let first = {
        let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
        lib.index_file(&a, &EMBEDDER).await.unwrap();
        lib.stats().await.unwrap()
    };
    let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
    let renamed = write(
        tmp.path(),
        "renamed.txt",
        "Contriever embeds passages. Dot product ranks them.",
    );
    assert!(matches!(
        lib.index_file(&renamed, &EMBEDDER).await.unwrap(),
        IndexOutcome::Unchanged { .. }
    ));
    assert_eq!(lib.stats().await.unwrap(), first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_built_with_another_embedder_is_refused_with_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let a = write(tmp.path(), "a.txt", "Some text to index.");
    let lib_dir = tmp.path().join("lib");
    Library::open(&lib_dir, &EMBEDDER)
        .await
        .unwrap()
        .index_file(&a, &EMBEDDER)
        .await
        .unwrap();
    let other = BagOfWords {
        dim: 32,
        id: "other-32",
    };
    let err = Library::open(&lib_dir, &other)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("bag-of-words-64") && err.contains("re-index"),
        "{err}"
    );
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
async fn passages_of_a_document_whose_commit_never_landed_are_removed_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    let lib_dir = tmp.path().join("lib");
    let kept = write(tmp.path(), "kept.txt", "Self-RAG keeps this passage.");
    let torn = write(
        tmp.path(),
        "torn.txt",
        "This passage belongs to an interrupted run.",
    );
    let torn_id = {
        let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
        lib.index_file(&kept, &EMBEDDER).await.unwrap();
        match lib.index_file(&torn, &EMBEDDER).await.unwrap() {
            IndexOutcome::Indexed { document_id, .. } => document_id,
            other => panic!("expected a new document, got {other:?}"),
        }
    };
    // A crash between the passages write and the document row leaves exactly this state.
    let db = lancedb::connect(lib_dir.to_str().unwrap())
        .execute()
        .await
        .unwrap();
    let documents = db.open_table("documents").execute().await.unwrap();
    documents
        .delete(format!("doc_id = '{torn_id}'").as_str())
        .await
        .unwrap();

    let lib = Library::open(&lib_dir, &EMBEDDER).await.unwrap();
    let stats = lib.stats().await.unwrap();
    assert_eq!(
        (stats.documents, stats.passages),
        (1, 1),
        "only the committed document remains"
    );
    let query = EMBEDDER.embed(&["interrupted run"]).unwrap().remove(0);
    let hits = lib.search(&query, 5).await.unwrap();
    assert!(
        hits.iter().all(|h| !h.text.contains("interrupted")),
        "{hits:?}"
    );
    // Indexing the file again now works as for a new file.
    assert!(matches!(
        lib.index_file(&torn, &EMBEDDER).await.unwrap(),
        IndexOutcome::Indexed { .. }
    ));
}
