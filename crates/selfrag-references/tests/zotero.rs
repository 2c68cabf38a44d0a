//! Reading a Zotero data directory written by the fixture writer with Zotero's real table and
//! column names: which files come in with which work, what is left out and why, the
//! citation keys' order, and reading while Zotero holds its database locked.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use selfrag_references::ReferencesError;
use selfrag_references::fixture::{
    ArticleFiles, FixtureFile, FixtureItem, ZoteroFixture, write_zotero_dir,
};
use selfrag_references::zotero::{
    ReferencedFile, SkipReason, ZoteroLibrary, ZoteroOptions, database_stamp, read_zotero,
    read_zotero_with,
};
use selfrag_works::{Author, FieldSource, Sourced, Work, WorkDate, WorkType, ZoteroLink};

/// A data directory in a temporary folder, with a small PDF and a text file as the article's.
fn fixture() -> (tempfile::TempDir, ZoteroFixture) {
    let temp = tempfile::tempdir().unwrap();
    let pdf = temp.path().join("source.pdf");
    std::fs::write(&pdf, b"%PDF-1.4\n% the article\n%%EOF\n").unwrap();
    let text = temp.path().join("source.txt");
    std::fs::write(&text, "Reading notes on the Øresund telemetry.\n").unwrap();
    let fixture =
        write_zotero_dir(&temp.path().join("Zotero"), &ArticleFiles { pdf, text }).unwrap();
    (temp, fixture)
}

fn document<'l>(library: &'l ZoteroLibrary, path: &Path) -> &'l ReferencedFile {
    library
        .documents
        .iter()
        .find(|d| d.path == path)
        .unwrap_or_else(|| panic!("{} is not among the documents", path.display()))
}

fn sourced<T>(value: T) -> Option<Sourced<T>> {
    Some(Sourced::new(value, FieldSource::ReferenceManager))
}

#[test]
fn every_readable_file_of_a_live_item_is_a_document_and_nothing_else() {
    let (_temp, fixture) = fixture();
    let library = read_zotero(&fixture.dir).unwrap();
    let mut paths: Vec<&PathBuf> = library.documents.iter().map(|d| &d.path).collect();
    paths.sort();
    let mut expected = vec![
        &fixture.article_pdf.path,
        &fixture.article_text.path,
        &fixture.chapter_linked_html.path,
        &fixture.paper_markdown.path,
        &fixture.standalone_text.path,
        &fixture.group_text.path,
    ];
    expected.sort();
    // Not the trashed item's PDF, the trashed attachment, the feed's PDF, the EPUB, the
    // missing PDF, the notes or the link to a web page.
    assert_eq!(paths, expected);
    for path in paths {
        assert!(path.is_file(), "{}", path.display());
    }
}

#[test]
fn the_articles_work_is_read_by_field_and_type_names_from_the_reference_manager() {
    let (_temp, fixture) = fixture();
    let library = read_zotero(&fixture.dir).unwrap();
    let pdf = document(&library, &fixture.article_pdf.path);
    let expected = Work {
        kind: sourced(WorkType::JournalArticle),
        title: sourced("Telemetry of the Øresund Bridge".into()),
        // The editor is left out: the article has authors.
        authors: sourced(vec![
            Author::person("Marrow", "Jane"),
            Author::person("Ødegård", "Kjetil"),
        ]),
        date: sourced(WorkDate {
            year: 1998,
            month: Some(3),
            day: Some(15),
        }),
        container: sourced("Journal of Bridge Engineering".into()),
        volume: sourced("12".into()),
        issue: sourced("3".into()),
        pages: sourced("117--129".into()),
        publisher: None,
        doi: sourced("10.1000/abc.123".into()),
        arxiv: sourced("2101.00001".into()),
        isbn: None,
        url: sourced("https://example.org/telemetry".into()),
        citation_key: sourced("marrow1998telemetry".into()),
        zotero: Some(ZoteroLink {
            group: None,
            item_key: fixture.article.key.clone(),
            attachment_key: Some(fixture.article_pdf.attachment_key.clone()),
            // Not the trashed collection "Old drafts" the item is also in.
            collections: vec!["Thesis/Chapter 2".into()],
        }),
    };
    assert_eq!(pdf.work, expected);
    // Its second file carries the same work, with its own attachment key.
    let text = document(&library, &fixture.article_text.path);
    let mut expected_text = expected;
    expected_text.zotero.as_mut().unwrap().attachment_key =
        Some(fixture.article_text.attachment_key.clone());
    assert_eq!(text.work, expected_text);
}

#[test]
fn editors_stand_in_for_absent_authors_and_single_field_names_are_organisations() {
    let (_temp, fixture) = fixture();
    let library = read_zotero(&fixture.dir).unwrap();
    let work = &document(&library, &fixture.chapter_linked_html.path).work;
    assert_eq!(work.kind(), WorkType::Chapter);
    assert_eq!(
        work.authors(),
        [
            Author::person("Ødegård", "Åse"),
            Author::Organisation {
                name: "Nordic Council".into()
            },
        ]
    );
    // `bookTitle` is the book section's `publicationTitle`, through Zotero's base fields.
    assert_eq!(
        Work::text(&work.container),
        Some("Handbook of Nordic Engineering")
    );
    assert_eq!(work.date.as_ref().unwrap().value, WorkDate::year(2004));
    assert_eq!(Work::text(&work.pages), Some("45--67"));
    assert_eq!(Work::text(&work.isbn), Some("9780262033848"));
    assert_eq!(Work::text(&work.publisher), Some("Fagbokforlaget"));
    assert_eq!(
        work.zotero.as_ref().unwrap().collections,
        ["Thesis".to_string()]
    );
}

#[test]
fn citation_keys_come_from_better_bibtex_then_extra_then_zoteros_own_field() {
    let (_temp, fixture) = fixture();
    let library = read_zotero(&fixture.dir).unwrap();
    let key =
        |path: &Path| Work::text(&document(&library, path).work.citation_key).map(str::to_string);
    // Better BibTeX's database, over a key in Extra and one in Zotero's field.
    assert_eq!(key(&fixture.article_pdf.path), fixture.article.citation_key);
    // Extra's `Citation Key:` line, over Zotero's field.
    assert_eq!(
        key(&fixture.chapter_linked_html.path),
        fixture.chapter.citation_key
    );
    // Zotero's own field.
    assert_eq!(
        key(&fixture.paper_markdown.path),
        fixture.paper.citation_key
    );
    // Better BibTeX's store for read-only group libraries.
    assert_eq!(
        key(&fixture.group_text.path),
        fixture.group_item.citation_key
    );
}

#[test]
fn a_conference_papers_proceedings_are_its_container_and_its_arxiv_id_comes_from_the_url() {
    let (_temp, fixture) = fixture();
    let library = read_zotero(&fixture.dir).unwrap();
    let work = &document(&library, &fixture.paper_markdown.path).work;
    assert_eq!(work.kind(), WorkType::ConferencePaper);
    assert_eq!(
        Work::text(&work.container),
        Some("International Conference on Learning Representations")
    );
    assert_eq!(Work::text(&work.arxiv), Some("2310.11511"));
    assert_eq!(work.authors(), [Author::person("Asai", "Akari")]);
}

#[test]
fn attachments_that_cannot_be_read_are_reported_with_the_reason() {
    let (_temp, fixture) = fixture();
    let library = read_zotero(&fixture.dir).unwrap();
    let skipped: BTreeMap<String, (String, String, SkipReason)> = library
        .skipped
        .iter()
        .map(|s| {
            (
                s.attachment_key.clone(),
                (s.item_key.clone(), s.title.clone(), s.reason.clone()),
            )
        })
        .collect();
    let entry = |file: &FixtureFile, item: &FixtureItem, reason: SkipReason| {
        (
            file.attachment_key.clone(),
            (item.key.clone(), item.title.clone(), reason),
        )
    };
    let expected: BTreeMap<String, (String, String, SkipReason)> = [
        entry(
            &fixture.article_epub,
            &fixture.article,
            SkipReason::UnsupportedFormat {
                path: fixture.article_epub.path.clone(),
                content_type: Some("application/epub+zip".into()),
            },
        ),
        entry(
            &fixture.paper_missing_pdf,
            &fixture.paper,
            SkipReason::MissingFile {
                path: fixture.paper_missing_pdf.path.clone(),
            },
        ),
        entry(
            &fixture.chapter_linked_markdown,
            &fixture.chapter,
            SkipReason::UnresolvedLinkedPath {
                stored: "attachments:papers/bridges-notes.md".into(),
            },
        ),
    ]
    .into_iter()
    .collect();
    // The trashed attachment, the trashed item's, the feed's, the link to a web page and the
    // notes are not files of the library: not reported.
    assert_eq!(skipped, expected);
    let reason = library.skipped[0].reason.to_string();
    assert!(!reason.is_empty());
}

#[test]
fn linked_files_relative_to_the_base_directory_are_found_when_it_is_given() {
    let (_temp, fixture) = fixture();
    let options = ZoteroOptions {
        linked_attachment_base: Some(fixture.linked_attachment_base.clone()),
    };
    let library = read_zotero_with(&fixture.dir, &options).unwrap();
    let markdown = document(&library, &fixture.chapter_linked_markdown.path);
    assert_eq!(markdown.work.title(), Some(fixture.chapter.title.as_str()));
    assert!(
        !library
            .skipped
            .iter()
            .any(|s| s.attachment_key == fixture.chapter_linked_markdown.attachment_key)
    );
}

#[test]
fn a_standalone_attachment_is_a_work_of_its_own_title() {
    let (_temp, fixture) = fixture();
    let library = read_zotero(&fixture.dir).unwrap();
    let work = &document(&library, &fixture.standalone_text.path).work;
    assert_eq!(
        *work,
        Work {
            title: sourced(fixture.standalone.title.clone()),
            zotero: Some(ZoteroLink {
                group: None,
                item_key: fixture.standalone.key.clone(),
                attachment_key: Some(fixture.standalone.key.clone()),
                collections: vec!["Thesis".into()],
            }),
            ..Work::default()
        }
    );
}

#[test]
fn a_group_librarys_item_names_its_group() {
    let (_temp, fixture) = fixture();
    let library = read_zotero(&fixture.dir).unwrap();
    let link = document(&library, &fixture.group_text.path)
        .work
        .zotero
        .clone()
        .unwrap();
    assert_eq!(link.group, Some(fixture.group_id));
    assert_eq!(link.item_key, fixture.group_item.key);
    assert_eq!(link.collections, ["Lab reading".to_string()]);
    assert_eq!(
        link.open_uri(Some(3), true),
        Some(format!(
            "zotero://open-pdf/groups/{}/items/{}?page=3",
            fixture.group_id, fixture.group_text.attachment_key
        ))
    );
}

#[test]
fn collections_are_listed_as_paths_without_the_trashed_ones() {
    let (_temp, fixture) = fixture();
    let library = read_zotero(&fixture.dir).unwrap();
    assert_eq!(library.collections, fixture.collections);
}

/// Every file directly in `dir`, with its bytes.
fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn zotero_is_read_while_it_holds_its_database_locked_and_nothing_of_it_changes() {
    let (_temp, fixture) = fixture();
    let db = fixture.dir.join("zotero.sqlite");
    // As Zotero does: an exclusive lock, WAL mode; the commits stay in the WAL.
    let zotero = Connection::open(&db).unwrap();
    zotero
        .execute_batch("PRAGMA main.locking_mode = EXCLUSIVE; PRAGMA wal_autocheckpoint = 0;")
        .unwrap();
    let mode: String = zotero
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let retitle = |title: &str| {
        format!(
            "INSERT INTO itemDataValues (value) VALUES ('{title}');
             UPDATE itemData SET valueID = (SELECT valueID FROM itemDataValues WHERE value = '{title}')
             WHERE itemID = (SELECT itemID FROM items WHERE key = '{key}')
               AND fieldID = (SELECT fieldID FROM fieldsCombined WHERE fieldName = 'title');",
            key = fixture.article.key
        )
    };
    zotero
        .execute_batch(&retitle("Telemetry of the Øresund Bridge, revised"))
        .unwrap();
    // A write transaction left open, as while Zotero saves an item.
    zotero
        .execute_batch(&format!(
            "BEGIN IMMEDIATE; {}",
            retitle("Not committed yet")
        ))
        .unwrap();
    assert!(
        fixture.dir.join("zotero.sqlite-wal").is_file(),
        "the commit is in the WAL"
    );
    // The lock is real: an ordinary connection cannot read the database now.
    let other = Connection::open(&db).unwrap();
    other.busy_timeout(std::time::Duration::ZERO).unwrap();
    assert!(
        other
            .query_row("SELECT count(*) FROM items", [], |row| row.get::<_, i64>(0))
            .is_err(),
        "Zotero's exclusive lock keeps ordinary readers out"
    );
    drop(other);

    let before = files_of(&fixture.dir);
    let library = read_zotero(&fixture.dir).unwrap();
    assert_eq!(
        files_of(&fixture.dir),
        before,
        "no file of the data directory was written, added or removed"
    );
    let work = &document(&library, &fixture.article_pdf.path).work;
    // The commit that is only in the WAL is read; the open transaction is not.
    assert_eq!(
        work.title(),
        Some("Telemetry of the Øresund Bridge, revised")
    );
    zotero.execute_batch("COMMIT").unwrap();
}

#[test]
fn a_folder_without_zoteros_database_is_refused_with_where_to_look() {
    let temp = tempfile::tempdir().unwrap();
    let error = read_zotero(temp.path()).unwrap_err();
    assert!(matches!(error, ReferencesError::NotZoteroDirectory { .. }));
    let message = error.to_string();
    assert!(
        message.contains(&temp.path().display().to_string()),
        "{message}"
    );
    assert!(
        message.contains("Settings ▸ Advanced ▸ Files and Folders"),
        "{message}"
    );
    assert!(matches!(
        database_stamp(temp.path()),
        Err(ReferencesError::NotZoteroDirectory { .. })
    ));
}

#[test]
fn a_database_of_another_program_is_refused_naming_the_missing_table() {
    let temp = tempfile::tempdir().unwrap();
    let connection = Connection::open(temp.path().join("zotero.sqlite")).unwrap();
    connection
        .execute_batch("CREATE TABLE items (itemID INTEGER PRIMARY KEY, name TEXT);")
        .unwrap();
    drop(connection);
    let error = read_zotero(temp.path()).unwrap_err();
    assert!(
        matches!(
            error,
            ReferencesError::UnknownSchema {
                table: "itemData",
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("zotero.sqlite"), "{error}");
}

#[test]
fn the_stamp_stays_while_nothing_is_written_and_changes_when_zotero_writes() {
    let (_temp, fixture) = fixture();
    let first = database_stamp(&fixture.dir).unwrap();
    read_zotero(&fixture.dir).unwrap();
    assert_eq!(
        database_stamp(&fixture.dir).unwrap(),
        first,
        "reading is no write"
    );
    let zotero = Connection::open(fixture.dir.join("zotero.sqlite")).unwrap();
    zotero
        .execute_batch(
            "PRAGMA journal_mode = WAL; INSERT INTO itemDataValues (value) VALUES ('new');",
        )
        .unwrap();
    let second = database_stamp(&fixture.dir).unwrap();
    assert_ne!(second, first);
    assert!(second.wal.is_some(), "the WAL is part of the stamp");
}

#[test]
fn a_better_bibtex_store_that_cannot_be_read_costs_its_keys_not_the_library() {
    let (_temp, fixture) = fixture();
    std::fs::write(
        fixture.dir.join("better-bibtex/read-only.json"),
        "{ this is not JSON",
    )
    .unwrap();
    let library = read_zotero(&fixture.dir).unwrap();
    assert!(!library.documents.is_empty());
    assert!(
        library.notes.iter().any(|n| n.contains("Better BibTeX")),
        "{:?}",
        library.notes
    );
}
