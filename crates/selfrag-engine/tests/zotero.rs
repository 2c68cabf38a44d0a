//! A Zotero library through the engine, with real components: a Zotero data directory with the
//! real schema's tables (selfrag-references' fixture), the tiny models, a real LanceDB library.
//! Its files come in with their items' records; the person's edit stays above Zotero's; and
//! when Zotero changes its database (an edited title, an item moved to the trash) the sync
//! reads it again.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use selfrag_engine::{DocumentInfo, Engine, EngineConfig, SearchFilter, SearchMode, SearchQuery};
use selfrag_references::fixture::{ArticleFiles, write_zotero_dir};
use selfrag_works::{FieldSource, Sourced, Work};

fn engine(tmp: &Path) -> Engine {
    let models = tmp.join("models");
    std::fs::create_dir_all(&models).unwrap();
    let gguf = models.join("tiny.gguf");
    selfrag_fixtures::write_tiny_llama_gguf(&gguf).unwrap();
    let bert = models.join("tiny-bert");
    selfrag_fixtures::write_tiny_bert(&bert).unwrap();
    Engine::new(EngineConfig::in_process(tmp.join("data"), gguf, bert)).unwrap()
}

/// A one-page PDF with `text` on it (offsets computed, so any reader takes it).
fn pdf(text: &str) -> Vec<u8> {
    let content = format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_string(),
        format!("<< /Length {} >>\nstream\n{content}\nendstream", content.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_string(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend(format!("{} 0 obj\n{object}\nendobj\n", i + 1).bytes());
    }
    let xref = out.len();
    out.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).bytes());
    for offset in offsets {
        out.extend(format!("{offset:010} 00000 n \n").bytes());
    }
    out.extend(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .bytes(),
    );
    out
}

fn document<'a>(docs: &'a [DocumentInfo], path: &Path) -> Option<&'a DocumentInfo> {
    let key = std::path::absolute(path).unwrap();
    docs.iter().find(|d| Path::new(&d.path) == key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zotero_library_comes_in_with_its_records_and_stays_in_sync() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = engine(tmp.path());
    let files = tmp.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let (article_pdf, article_text) = (files.join("article.pdf"), files.join("notes.txt"));
    std::fs::write(
        &article_pdf,
        pdf("Reindeer herds were followed by satellite telemetry."),
    )
    .unwrap();
    std::fs::write(
        &article_text,
        "Notes on the telemetry of reindeer herds in winter.",
    )
    .unwrap();
    let zotero_dir = tmp.path().join("Zotero");
    let zotero = write_zotero_dir(
        &zotero_dir,
        &ArticleFiles {
            pdf: article_pdf,
            text: article_text,
        },
    )
    .unwrap();

    let import = engine
        .add_zotero_library(&zotero_dir, |_| {})
        .await
        .unwrap();
    assert!(import.with_record >= 4, "{import:?}");
    assert!(
        import
            .skipped
            .iter()
            .any(|s| s.contains(&zotero.article_epub.attachment_key) || s.contains(".epub")),
        "the EPUB is named as skipped: {:?}",
        import.skipped
    );
    let docs = engine.documents().await.unwrap();
    let article = document(&docs, &zotero.article_text.path).expect("the article's text file");
    assert_eq!(article.work.title(), Some(zotero.article.title.as_str()));
    assert_eq!(article.work.authors()[0].family(), "Marrow");
    assert_eq!(article.work.authors()[1].family(), "Ødegård");
    assert_eq!(article.work.year(), Some(1998));
    assert_eq!(
        Work::text(&article.work.citation_key),
        zotero.article.citation_key.as_deref()
    );
    assert_eq!(
        article.work.title.as_ref().map(|t| t.source),
        Some(FieldSource::ReferenceManager)
    );
    let link = article.work.zotero.as_ref().unwrap();
    assert_eq!(link.item_key, zotero.article.key);
    assert_eq!(
        link.attachment_key.as_deref(),
        Some(zotero.article_text.attachment_key.as_str())
    );
    assert!(
        document(&docs, &zotero.article_pdf.path).is_some(),
        "the PDF too"
    );
    assert!(document(&docs, &zotero.article_trashed_pdf.path).is_none());
    assert!(document(&docs, &zotero.trashed_pdf.path).is_none());
    assert!(document(&docs, &zotero.paper_markdown.path).is_some());
    assert_eq!(engine.zotero_libraries(), vec![zotero_dir.clone()]);

    // Its collections filter a search: the article is in `Thesis/Chapter 2`.
    let search = |collection: &str| {
        engine.search(SearchQuery {
            text: "telemetry reindeer".into(),
            mode: SearchMode::Fts,
            k: 10,
            filter: SearchFilter {
                collection: Some(collection.into()),
                ..SearchFilter::default()
            },
        })
    };
    let in_thesis = search("Thesis").await.unwrap();
    assert!(!in_thesis.is_empty());
    let article_files = [&zotero.article_text.path, &zotero.article_pdf.path].map(|p| {
        std::path::absolute(p)
            .unwrap()
            .to_string_lossy()
            .into_owned()
    });
    assert!(
        in_thesis.iter().all(|h| article_files.contains(&h.path)),
        "{in_thesis:?}"
    );
    assert_eq!(
        search("Thesis/Chapter 2").await.unwrap().len(),
        in_thesis.len()
    );
    assert!(
        search("Thes").await.unwrap().is_empty(),
        "a name, not a prefix"
    );

    // The person's title wins over Zotero's.
    let mine = Work {
        title: Some(Sourced::new("My reading of it".into(), FieldSource::Person)),
        ..Work::default()
    };
    let work = engine
        .set_work(&zotero.article_text.path, mine)
        .await
        .unwrap();
    assert_eq!(work.title(), Some("My reading of it"));

    // Zotero changes while the sync runs: the article's title edited, the paper trashed.
    let (synced, mut sync) = tokio::sync::mpsc::unbounded_channel();
    let syncing = engine.keep_zotero_in_sync(
        Duration::from_millis(200),
        |_| {},
        move |dir, result| {
            let _ = synced.send((dir.to_path_buf(), result.map(|r| r.with_record)));
        },
    );
    let change_and_wait = async {
        // The first read at start (nothing changed yet, but the app may have been closed).
        let (dir, first) = sync.recv().await.unwrap();
        assert_eq!((dir, first.unwrap() >= 4), (zotero_dir.clone(), true));
        let db = rusqlite::Connection::open(zotero_dir.join("zotero.sqlite")).unwrap();
        db.execute(
            "UPDATE itemDataValues SET value = 'Reindeer telemetry, revised' WHERE value = ?1",
            [&zotero.article.title],
        )
        .unwrap();
        db.execute(
            "INSERT INTO deletedItems (itemID) SELECT itemID FROM items WHERE key = ?1",
            [&zotero.paper.key],
        )
        .unwrap();
        drop(db);
        let (_, second) = sync.recv().await.unwrap();
        second.unwrap()
    };
    let with_record = tokio::select! {
        n = change_and_wait => n,
        () = syncing => unreachable!("the sync runs until dropped"),
        () = tokio::time::sleep(Duration::from_secs(60)) => panic!("no sync within a minute"),
    };
    assert!(with_record >= 3, "{with_record}");
    let docs = engine.documents().await.unwrap();
    assert!(
        document(&docs, &zotero.paper_markdown.path).is_none(),
        "the trashed paper's file left the library"
    );
    let article = document(&docs, &zotero.article_text.path).unwrap();
    assert_eq!(
        article.work.title(),
        Some("My reading of it"),
        "the edit stays"
    );
    // The edit undone: Zotero's new title.
    let work = engine
        .set_work(&zotero.article_text.path, Work::default())
        .await
        .unwrap();
    assert_eq!(work.title(), Some("Reindeer telemetry, revised"));

    // A file missing for now (an unmounted drive) stays; a file the person removed stays out.
    std::fs::rename(&zotero.article_text.path, tmp.path().join("away.txt")).unwrap();
    let pdf_id = document(&engine.documents().await.unwrap(), &zotero.article_pdf.path)
        .unwrap()
        .id
        .clone();
    engine.remove_document(&pdf_id).await.unwrap();
    let import = engine
        .add_zotero_library(&zotero_dir, |_| {})
        .await
        .unwrap();
    let docs = engine.documents().await.unwrap();
    assert!(
        document(&docs, &zotero.article_text.path).is_some(),
        "missing for now, not gone: {import:?}"
    );
    assert!(
        document(&docs, &zotero.article_pdf.path).is_none(),
        "the person removed it"
    );
    let _: PathBuf = zotero.dir;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bibliography_names_files_to_read_never_folders_and_each_once() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = engine(tmp.path());
    let papers = tmp.path().join("papers");
    std::fs::create_dir_all(papers.join("inner")).unwrap();
    std::fs::write(papers.join("a.txt"), "Reindeer telemetry in winter.").unwrap();
    std::fs::write(papers.join("inner/secret.txt"), "Not named by any entry.").unwrap();
    let bib = papers.join("refs.bib");
    std::fs::write(
        &bib,
        "@article{first, title = {First}, author = {Marrow, Ann}, year = {1998}, file = {a.txt}}\n\
         @article{again, title = {Again}, author = {Other, Bo}, year = {2001}, file = {./a.txt}}\n\
         @misc{folder, title = {A folder}, file = {inner}}\n",
    )
    .unwrap();
    let import = engine.add_bibliography(&bib, |_| {}).await.unwrap();
    assert_eq!((import.files, import.with_record), (1, 1), "{import:?}");
    assert!(
        import.skipped.iter().any(|s| s.contains("inner")),
        "{import:?}"
    );
    assert!(
        import.skipped.iter().any(|s| s.contains("named again")),
        "{import:?}"
    );
    let docs = engine.documents().await.unwrap();
    assert_eq!(docs.len(), 1, "the folder was not walked: {docs:?}");
    assert_eq!(Work::text(&docs[0].work.citation_key), Some("first"));
}
