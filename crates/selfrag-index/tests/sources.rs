//! The evidence viewer's data, against a real LanceDB: a cited passage found in its source by
//! its id only, the file checked to hold the content that was indexed, and every way that can
//! fail (moved, changed, removed, not a passage of this library) said by name.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

mod common;
mod corpus;

use common::BAG_OF_WORDS;
use selfrag_index::{IndexError, Library, SourceView};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A Markdown file long enough for several passages, each sentence numbered.
fn long_markdown() -> String {
    let mut text = String::from("# Findings\n\n");
    for i in 0..60 {
        text.push_str(&format!(
            "Sentence {i} says that reflection token number {i} critiques candidate {i}. "
        ));
        if i % 10 == 9 {
            text.push_str("\n\n");
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_passage_is_found_at_its_span_in_the_text_read_again() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "findings.md", long_markdown().as_bytes());
    let lib = Library::open(&tmp.path().join("lib"), &BAG_OF_WORDS)
        .await
        .unwrap();
    lib.index_file(&file, &BAG_OF_WORDS).await.unwrap();
    let doc = lib.documents().remove(0);
    let passages = lib.passages_of(&doc.id).await.unwrap();
    assert!(passages.len() >= 3, "{passages:?}");
    for hit in &passages {
        let source = lib.passage_source(&hit.passage_id).await.unwrap();
        assert_eq!(source.document_id, doc.id);
        assert_eq!(source.path, file.display().to_string());
        assert_eq!(source.text, hit.text);
        assert_eq!((source.page, source.pages), (None, 1));
        let SourceView::Text { text, span } = source.view else {
            panic!("a Markdown file is shown as text: {:?}", source.view)
        };
        let (start, end) = span.expect("the passage is in the text");
        let marked: String = text
            .chars()
            .skip(start as usize)
            .take((end - start) as usize)
            .collect();
        assert_eq!(marked.trim(), hit.text);
    }
    // Only PDFs are handed over as bytes.
    let err = lib.document_pdf(&doc.id).await.unwrap_err();
    assert!(matches!(err, IndexError::Unsupported { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_passage_names_its_page_and_the_bytes_are_the_indexed_file() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = corpus::pdf(&[
        "The first page is about retrieval.",
        "The second page says that IsSup judges support.",
    ]);
    let file = write(tmp.path(), "paper.pdf", &bytes);
    let lib = Library::open(&tmp.path().join("lib"), &BAG_OF_WORDS)
        .await
        .unwrap();
    lib.index_file(&file, &BAG_OF_WORDS).await.unwrap();
    let doc = lib.documents().remove(0);
    let second = lib
        .passages_of(&doc.id)
        .await
        .unwrap()
        .into_iter()
        .find(|h| h.text.contains("IsSup"))
        .unwrap();
    let source = lib.passage_source(&second.passage_id).await.unwrap();
    assert_eq!(source.view, SourceView::Pdf);
    assert_eq!((source.page, source.pages), (Some(2), 2));
    assert_eq!(lib.document_pdf(&source.document_id).await.unwrap(), bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_or_changed_file_is_named_and_a_copy_of_the_same_content_serves_instead() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = corpus::pdf(&["Self-RAG retrieves on demand."]);
    let one = write(tmp.path(), "one.pdf", &bytes);
    let two = write(tmp.path(), "two.pdf", &bytes);
    let lib = Library::open(&tmp.path().join("lib"), &BAG_OF_WORDS)
        .await
        .unwrap();
    lib.index_file(&one, &BAG_OF_WORDS).await.unwrap();
    lib.index_file(&two, &BAG_OF_WORDS).await.unwrap();
    let id = lib.documents()[0].id.clone();
    let passage = lib.passages_of(&id).await.unwrap().remove(0).passage_id;

    // One copy gone: the other serves.
    std::fs::remove_file(&one).unwrap();
    let source = lib.passage_source(&passage).await.unwrap();
    assert_eq!(source.path, two.display().to_string());
    assert_eq!(lib.document_pdf(&id).await.unwrap(), bytes);

    // The other edited after indexing: named as changed, its bytes not served.
    std::fs::write(&two, corpus::pdf(&["Edited later."])).unwrap();
    let err = lib.passage_source(&passage).await.unwrap_err();
    assert!(
        matches!(&err, IndexError::SourceChanged { path } if *path == two),
        "{err}"
    );
    assert!(err.to_string().contains("re-index it"), "{err}");
    let err = lib.document_pdf(&id).await.unwrap_err();
    assert!(matches!(err, IndexError::SourceChanged { .. }), "{err}");

    // Both gone: named as missing.
    std::fs::remove_file(&two).unwrap();
    let err = lib.passage_source(&passage).await.unwrap_err();
    assert!(matches!(err, IndexError::SourceMissing { .. }), "{err}");
    assert!(err.to_string().contains("moved or deleted"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_passages_and_documents_of_the_library_are_served_never_a_path() {
    let tmp = tempfile::tempdir().unwrap();
    let secret = write(tmp.path(), "secret.pdf", &corpus::pdf(&["A secret."]));
    let file = write(tmp.path(), "notes.md", b"# Notes\n\nIndexed text.\n");
    let lib = Library::open(&tmp.path().join("lib"), &BAG_OF_WORDS)
        .await
        .unwrap();
    lib.index_file(&file, &BAG_OF_WORDS).await.unwrap();
    let doc = lib.documents().remove(0);
    let path = secret.display().to_string();
    for id in [
        path.as_str(),
        "",
        "x' OR '1'='1",
        &format!("{}:999", doc.id),
    ] {
        let err = lib.passage_source(id).await.unwrap_err();
        assert!(
            matches!(err, IndexError::UnknownPassage { .. }),
            "{id}: {err}"
        );
        let err = lib.document_pdf(id).await.unwrap_err();
        assert!(
            matches!(err, IndexError::UnknownDocument { .. }),
            "{id}: {err}"
        );
    }
    // A removed document's passages are no longer served.
    let passage = lib.passages_of(&doc.id).await.unwrap().remove(0).passage_id;
    lib.remove(&file).await.unwrap();
    let err = lib.passage_source(&passage).await.unwrap_err();
    assert!(matches!(err, IndexError::UnknownPassage { .. }), "{err}");
    assert!(err.to_string().contains("ask again"), "{err}");
}
