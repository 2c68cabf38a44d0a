//! Reading bibliography files as the tools write them: BibTeX and BibLaTeX with the `file`
//! fields of Zotero, JabRef and Mendeley, LaTeX accents and braces, and CSL-JSON.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use selfrag_references::ReferencesError;
use selfrag_references::bibliography::{BibliographyEntry, read_bibliography};
use selfrag_works::{Author, FieldSource, Sourced, Work, WorkDate, WorkType};

/// `text` written to `name` in `dir`.
fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder).unwrap();
    }
    std::fs::write(&path, text).unwrap();
    path
}

fn entry<'e>(entries: &'e [BibliographyEntry], key: &str) -> &'e BibliographyEntry {
    entries
        .iter()
        .find(|e| Work::text(&e.work.citation_key) == Some(key))
        .unwrap_or_else(|| panic!("no entry {key}"))
}

fn sourced<T>(value: T) -> Option<Sourced<T>> {
    Some(Sourced::new(value, FieldSource::BibliographyFile))
}

#[test]
fn a_bibtex_article_becomes_a_work_from_the_bibliography_file() {
    let temp = tempfile::tempdir().unwrap();
    let bib = write(
        temp.path(),
        "refs.bib",
        r"@article{marrow1998telemetry,
  title = {Telemetry of the {\O}resund {B}ridge},
  author = {Marrow, Jane and {\O}deg{\aa}rd, Kjetil},
  journal = {Journal of Bridge Engineering},
  year = {1998},
  month = mar,
  volume = {12},
  number = {3},
  pages = {117--129},
  doi = {https://doi.org/10.1000/ABC.123},
  eprint = {2101.00001v2},
  archiveprefix = {arXiv},
  url = {https://example.org/telemetry},
}
",
    );
    let entries = read_bibliography(&bib).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        entries[0],
        BibliographyEntry {
            work: Work {
                kind: sourced(WorkType::JournalArticle),
                title: sourced("Telemetry of the Øresund Bridge".into()),
                authors: sourced(vec![
                    Author::person("Marrow", "Jane"),
                    Author::person("Ødegård", "Kjetil"),
                ]),
                date: sourced(WorkDate {
                    year: 1998,
                    month: Some(3),
                    day: None,
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
                zotero: None,
            },
            files: vec![],
        }
    );
}

#[test]
fn latex_accents_and_braces_become_unicode_and_a_braced_name_is_an_organisation() {
    let temp = tempfile::tempdir().unwrap();
    let bib = write(
        temp.path(),
        "names.bib",
        r#"@book{names,
  title = {\"{O}ver {\o}resund: {\'E}tudes \c{c}a et l\`a},
  author = {M\"{u}ller, J\"urgen and {\O}deg{\aa}rd, {\AA}se and {Ø}degård, Kjetil
            and van Beethoven, Ludwig and {World Health Organization} and King, Jr., Martin Luther
            and others},
  date = {2004-05-01},
  publisher = {Fagbokforlaget},
  isbn = {978-0-262-03384-8},
}
"#,
    );
    let entries = read_bibliography(&bib).unwrap();
    let work = &entry(&entries, "names").work;
    assert_eq!(work.title(), Some("Över øresund: Études ça et là"));
    assert_eq!(
        work.authors(),
        [
            Author::person("Müller", "Jürgen"),
            Author::person("Ødegård", "Åse"),
            Author::person("Ødegård", "Kjetil"),
            Author::person("van Beethoven", "Ludwig"),
            Author::Organisation {
                name: "World Health Organization".into()
            },
            Author::person("King Jr.", "Martin Luther"),
        ]
    );
    assert_eq!(
        work.date.as_ref().unwrap().value,
        WorkDate {
            year: 2004,
            month: Some(5),
            day: Some(1)
        }
    );
    assert_eq!(work.kind(), WorkType::Book);
    assert_eq!(Work::text(&work.isbn), Some("9780262033848"));
    assert_eq!(Work::text(&work.publisher), Some("Fagbokforlaget"));
}

#[test]
fn zoteros_file_records_and_plain_paths_resolve_beside_the_bib_file() {
    let temp = tempfile::tempdir().unwrap();
    let bib = write(
        temp.path(),
        "export/Exported Items.bib",
        r"@article{zotero,
  title = {Zotero export},
  file = {Full Text PDF:files/12/Marrow - 1998.pdf:application/pdf;Snapshot:files/13/snapshot.html:text/html},
}
@article{bbt,
  title = {Better BibTeX export},
  file = {/home/me/Zotero/storage/AB12CD34/paper.pdf;papers/other.pdf},
}
",
    );
    let entries = read_bibliography(&bib).unwrap();
    let folder = temp.path().join("export");
    assert_eq!(
        entry(&entries, "zotero").files,
        [
            folder.join("files/12/Marrow - 1998.pdf"),
            folder.join("files/13/snapshot.html"),
        ]
    );
    assert_eq!(
        entry(&entries, "bbt").files,
        [
            PathBuf::from("/home/me/Zotero/storage/AB12CD34/paper.pdf"),
            folder.join("papers/other.pdf"),
        ]
    );
}

#[test]
fn jabrefs_file_field_with_its_escapes() {
    let temp = tempfile::tempdir().unwrap();
    let bib = write(
        temp.path(),
        "jabref.bib",
        r"@inproceedings{jabref,
  title = {A {JabRef} entry},
  author = {Doe, John},
  booktitle = {Proceedings of the Workshop},
  year = {2004},
  file = {:C\:/Users/doe/papers/jab.pdf:PDF;:papers/semi\;colon.pdf:PDF;Notes:C\:\\Users\\doe\\notes.txt:Text;Full text\: draft:papers/draft.pdf:PDF},
}
",
    );
    let entries = read_bibliography(&bib).unwrap();
    let jabref = entry(&entries, "jabref");
    assert_eq!(
        jabref.files,
        [
            PathBuf::from("C:/Users/doe/papers/jab.pdf"),
            temp.path().join("papers/semi;colon.pdf"),
            PathBuf::from(r"C:\Users\doe\notes.txt"),
            // An escaped colon in a description is no separator.
            temp.path().join("papers/draft.pdf"),
        ]
    );
    assert_eq!(jabref.work.kind(), WorkType::ConferencePaper);
    assert_eq!(
        Work::text(&jabref.work.container),
        Some("Proceedings of the Workshop")
    );
}

#[test]
fn mendeleys_file_field_with_its_latex_backslashes() {
    let temp = tempfile::tempdir().unwrap();
    // Mendeley on Linux and macOS writes an absolute path without its first `/`.
    let pdf = write(
        temp.path(),
        "Mendeley Desktop/Roe - 2010 - Field work.pdf",
        b"%PDF-1.4\n",
    );
    let rootless = pdf
        .to_string_lossy()
        .trim_start_matches('/')
        .replace('_', r"\_");
    let bib = write(
        temp.path(),
        "library.bib",
        format!(
            r"@book{{mendeley,
  title = {{Field work}},
  author = {{Roe, Richard}},
  year = {{2010}},
  file = {{:C$\backslash$:/Users/roe/Documents/Mendeley Desktop/Roe - 2010 - Field\_work.pdf:pdf;:{rootless}:pdf}},
}}
"
        ),
    );
    let entries = read_bibliography(&bib).unwrap();
    assert_eq!(
        entry(&entries, "mendeley").files,
        [
            PathBuf::from("C:/Users/roe/Documents/Mendeley Desktop/Roe - 2010 - Field_work.pdf"),
            pdf,
        ]
    );
}

#[test]
fn entry_types_become_work_types_and_editors_stand_in_for_authors() {
    let temp = tempfile::tempdir().unwrap();
    let bib = write(
        temp.path(),
        "types.bib",
        r"@incollection{chapter, title = {A chapter}, editor = {{\O}deg{\aa}rd, {\AA}se and {Nordic Council}}, booktitle = {Handbook}, year = 2004}
@phdthesis{thesis, title = {A thesis}, author = {Doe, Jane}, school = {University of Oslo}, year = 2010}
@techreport{report, title = {A report}, author = {Doe, Jane}, institution = {SINTEF}, year = 2011}
@online{page, title = {A page}, url = {https://example.org}, urldate = {2020-01-01}, date = {2019}}
@misc{preprint, title = {A preprint}, author = {Doe, Jane}, journal = {arXiv preprint arXiv:2310.11511}, year = 2023}
",
    );
    let entries = read_bibliography(&bib).unwrap();
    let chapter = &entry(&entries, "chapter").work;
    assert_eq!(chapter.kind(), WorkType::Chapter);
    assert_eq!(
        chapter.authors(),
        [
            Author::person("Ødegård", "Åse"),
            Author::Organisation {
                name: "Nordic Council".into()
            },
        ]
    );
    assert_eq!(Work::text(&chapter.container), Some("Handbook"));
    let thesis = &entry(&entries, "thesis").work;
    assert_eq!(thesis.kind(), WorkType::Thesis);
    assert_eq!(Work::text(&thesis.publisher), Some("University of Oslo"));
    let report = &entry(&entries, "report").work;
    assert_eq!(report.kind(), WorkType::Report);
    assert_eq!(Work::text(&report.publisher), Some("SINTEF"));
    let page = &entry(&entries, "page").work;
    assert_eq!(page.kind(), WorkType::WebPage);
    assert_eq!(page.year(), Some(2019));
    let preprint = &entry(&entries, "preprint").work;
    assert_eq!(preprint.kind(), WorkType::Other);
    assert_eq!(Work::text(&preprint.arxiv), Some("2310.11511"));
}

#[test]
fn a_bib_file_that_does_not_parse_is_refused_naming_the_file_and_line() {
    let temp = tempfile::tempdir().unwrap();
    let bib = write(
        temp.path(),
        "broken.bib",
        "@article{fine, title = {Fine}}\n\n@article{broken,\n  title = {Broken}\n  year = {2001}\n}\n",
    );
    let error = read_bibliography(&bib).unwrap_err();
    // The comma missing at the end of line 4 is noticed where `year` stands instead.
    match &error {
        ReferencesError::Bibliography { path, line, .. } => {
            assert_eq!(path, &bib);
            assert_eq!(*line, Some(5));
        }
        other => panic!("{other}"),
    }
    let message = error.to_string();
    assert!(
        message.contains("broken.bib, line 5: expected comma"),
        "{message}"
    );
}

#[test]
fn a_bib_file_in_a_legacy_encoding_is_read() {
    let temp = tempfile::tempdir().unwrap();
    // Windows-1252, as JabRef's old default wrote it: ü is the single byte 0xFC.
    let bib = write(
        temp.path(),
        "latin1.bib",
        b"@book{legacy, title = {Br\xfccken}, author = {M\xfcller, J\xfcrgen}, year = 1999}\n",
    );
    let entries = read_bibliography(&bib).unwrap();
    let work = &entry(&entries, "legacy").work;
    assert_eq!(work.title(), Some("Brücken"));
    assert_eq!(work.authors(), [Author::person("Müller", "Jürgen")]);
}

#[test]
fn csl_json_items_become_works_without_files() {
    let temp = tempfile::tempdir().unwrap();
    let json = write(
        temp.path(),
        "refs.json",
        r#"[
  {
    "id": "marrow1998telemetry",
    "type": "article-journal",
    "title": "Telemetry of the Øresund Bridge",
    "author": [{"family": "Marrow", "given": "Jane"}, {"family": "Ødegård", "given": "Kjetil"},
               {"family": "Beethoven", "given": "Ludwig", "non-dropping-particle": "van"}],
    "issued": {"date-parts": [["1998", 3, "15"]]},
    "container-title": "Journal of Bridge Engineering",
    "volume": 12,
    "issue": "3",
    "page": "117-129",
    "DOI": "10.1000/ABC.123",
    "URL": "https://arxiv.org/abs/2101.00001"
  },
  {
    "id": "http://zotero.org/users/local/abc/items/CHP2XDG4",
    "type": "chapter",
    "title": "Bridges of the North",
    "editor": [{"literal": "Nordic Council"}],
    "issued": {"raw": "2004"},
    "ISBN": "978-0-262-03384-8 0262033844",
    "publisher": "Fagbokforlaget"
  },
  {"id": 7, "citation-key": "asai2024selfrag", "type": "paper-conference", "title": "Self-RAG",
   "issued": {"literal": "Spring 2024"}},
  {"id": "page", "type": "webpage", "title": "A page"},
  {"id": "dataset", "type": "dataset", "title": "A dataset"}
]"#,
    );
    let entries = read_bibliography(&json).unwrap();
    assert_eq!(entries.len(), 5);
    assert!(entries.iter().all(|e| e.files.is_empty()));
    assert_eq!(
        entries[0].work,
        Work {
            kind: sourced(WorkType::JournalArticle),
            title: sourced("Telemetry of the Øresund Bridge".into()),
            authors: sourced(vec![
                Author::person("Marrow", "Jane"),
                Author::person("Ødegård", "Kjetil"),
                Author::person("van Beethoven", "Ludwig"),
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
            doi: sourced("10.1000/abc.123".into()),
            arxiv: sourced("2101.00001".into()),
            url: sourced("https://arxiv.org/abs/2101.00001".into()),
            citation_key: sourced("marrow1998telemetry".into()),
            ..Work::default()
        }
    );
    let chapter = &entries[1].work;
    assert_eq!(chapter.kind(), WorkType::Chapter);
    assert_eq!(
        chapter.authors(),
        [Author::Organisation {
            name: "Nordic Council".into()
        }]
    );
    assert_eq!(chapter.year(), Some(2004));
    assert_eq!(Work::text(&chapter.isbn), Some("9780262033848"));
    // Zotero's own export names items by address: that is no citation key.
    assert_eq!(chapter.citation_key, None);
    let paper = &entries[2].work;
    assert_eq!(Work::text(&paper.citation_key), Some("asai2024selfrag"));
    assert_eq!(paper.kind(), WorkType::ConferencePaper);
    assert_eq!(paper.year(), Some(2024));
    assert_eq!(entries[3].work.kind(), WorkType::WebPage);
    assert_eq!(entries[4].work.kind(), WorkType::Other);
}

#[test]
fn a_json_file_that_is_not_csl_is_refused_naming_the_file_and_line() {
    let temp = tempfile::tempdir().unwrap();
    let json = write(
        temp.path(),
        "settings.json",
        "{\n  \"theme\": \"dark\"\n}\n",
    );
    let error = read_bibliography(&json).unwrap_err();
    assert!(
        matches!(&error, ReferencesError::Bibliography { path, line: Some(_), .. } if *path == json),
        "{error}"
    );
    assert!(
        error.to_string().contains("settings.json, line 1"),
        "{error}"
    );
}

#[test]
fn a_file_of_another_kind_is_refused_saying_what_to_export() {
    let temp = tempfile::tempdir().unwrap();
    let text = write(temp.path(), "notes.txt", "Just some notes.\n");
    let error = read_bibliography(&text).unwrap_err();
    assert!(
        matches!(&error, ReferencesError::UnknownBibliographyFormat { path } if *path == text),
        "{error}"
    );
    assert!(error.to_string().contains("CSL JSON (.json)"), "{error}");
    // Without an extension, the first character tells.
    let bib = write(temp.path(), "references", "@misc{k, title = {T}}\n");
    assert_eq!(read_bibliography(&bib).unwrap().len(), 1);
}
