//! Looking works up by their DOI or arXiv id through the engine, with real components: the
//! tiny models, a real LanceDB library, real HTTP to a stand-in for doi.org and arXiv's API on
//! 127.0.0.1 (selfrag-references' `stand_in`) that records every request. With the setting off
//! indexing sends nothing; on, a document whose text holds a DOI gets the registry's record
//! (below the person's edit), which survives its file being indexed again and goes when the
//! file names another work.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use selfrag_engine::{DocumentInfo, Engine, EngineConfig, EngineError, IndexEvent};
use selfrag_references::lookup::LookupConfig;
use selfrag_references::stand_in::{ARXIV_ID, CROSSREF_DOI, StandInRegistry};
use selfrag_works::{FieldSource, Sourced, Work};

const TIMEOUT: Duration = Duration::from_secs(5);

fn engine(tmp: &Path) -> Engine {
    let models = tmp.join("models");
    std::fs::create_dir_all(&models).unwrap();
    let gguf = models.join("tiny.gguf");
    selfrag_fixtures::write_tiny_llama_gguf(&gguf).unwrap();
    let bert = models.join("tiny-bert");
    selfrag_fixtures::write_tiny_bert(&bert).unwrap();
    Engine::new(EngineConfig::in_process(tmp.join("data"), gguf, bert)).unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

async fn document(engine: &Engine, path: &Path) -> DocumentInfo {
    let key = std::path::absolute(path).unwrap();
    engine
        .documents()
        .await
        .unwrap()
        .into_iter()
        .find(|d| Path::new(&d.path) == key)
        .unwrap_or_else(|| panic!("{} is not in the library", path.display()))
}

/// Indexes `paths`, returning every event the job sent.
async fn index(engine: &Engine, paths: &[PathBuf]) -> Vec<IndexEvent> {
    let events = Mutex::new(Vec::new());
    engine
        .index_paths(paths, |e| events.lock().unwrap().push(e))
        .await
        .unwrap();
    events.into_inner().unwrap()
}

fn looked_up(events: &[IndexEvent]) -> Vec<&IndexEvent> {
    events
        .iter()
        .filter(|e| matches!(e, IndexEvent::WorksLookedUp { .. }))
        .collect()
}

const PAPER: &str = "Telemetry of reindeer herds in winter.\n\nPublished as doi:10.5555/Reindeer.1998 in the journal.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_look_ups_off_indexing_a_document_with_a_doi_sends_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = StandInRegistry::with_canned_records().unwrap();
    let engine = engine(tmp.path());
    engine.set_lookup_services(registry.config(TIMEOUT));
    // Off until the person turns it on.
    assert!(!engine.looks_up_works());
    let paper = write(tmp.path(), "paper.md", PAPER);
    let preprint = write(tmp.path(), "preprint.md", "See arXiv:2310.11511v1.");

    let events = index(&engine, &[paper.clone(), preprint.clone()]).await;
    let doc = document(&engine, &paper).await;
    assert_eq!(
        doc.work.doi,
        Some(Sourced::new(CROSSREF_DOI.into(), FieldSource::Identifier)),
        "the DOI in its text: {:?}",
        doc.work
    );
    assert!(looked_up(&events).is_empty(), "{events:?}");
    assert!(!doc.work_sources.contains(&FieldSource::Lookup));
    assert_eq!(doc.work.authors(), []);
    assert_eq!(
        registry.requests(),
        [],
        "nothing may reach a registry with look-ups off"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_look_ups_on_the_registrys_record_fills_the_work_below_the_persons_edit() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = StandInRegistry::with_canned_records().unwrap();
    let engine = engine(tmp.path());
    engine.set_lookup_services(registry.config(TIMEOUT));
    engine.set_look_up_works(true);
    let paper = write(tmp.path(), "paper.md", PAPER);

    let events = index(&engine, std::slice::from_ref(&paper)).await;
    // After the job's end, the round of look-ups.
    let finished = events
        .iter()
        .position(|e| matches!(e, IndexEvent::Finished { .. }))
        .unwrap();
    assert!(
        matches!(
            &events[finished + 1..],
            [IndexEvent::WorksLookedUp { found: 1, already: 0, failed }] if failed.is_empty()
        ),
        "{events:?}"
    );
    let doc = document(&engine, &paper).await;
    assert_eq!(doc.work.authors()[0].family(), "Marrow");
    assert_eq!(doc.work.authors()[1].family(), "Ødegård");
    assert_eq!(doc.work.year(), Some(1998));
    assert_eq!(
        doc.work.title(),
        Some("Satellite telemetry of reindeer herds in winter")
    );
    for field in [
        doc.work.title.as_ref().map(|t| t.source),
        doc.work.authors.as_ref().map(|a| a.source),
        doc.work.date.as_ref().map(|d| d.source),
        doc.work.container.as_ref().map(|c| c.source),
    ] {
        assert_eq!(field, Some(FieldSource::Lookup));
    }
    assert!(doc.work_sources.contains(&FieldSource::Lookup));
    // doi.org's request and the registration agency's it redirected to; nothing else.
    let sent = registry.requests();
    assert_eq!(
        sent.iter().map(|r| r.target.as_str()).collect::<Vec<_>>(),
        [
            format!("/doi/{CROSSREF_DOI}"),
            format!("/crossref/works/{CROSSREF_DOI}/transform")
        ]
    );

    // The person's edit still wins; the registry's other fields stay.
    let mine = Work {
        title: Some(Sourced::new("My reading of it".into(), FieldSource::Person)),
        ..Work::default()
    };
    let work = engine.set_work(&paper, mine).await.unwrap();
    assert_eq!(work.title(), Some("My reading of it"));
    assert_eq!(work.authors()[0].family(), "Marrow");

    // The file changes, naming the same DOI: indexed again, its record survives and is not
    // asked for again.
    std::fs::write(&paper, format!("{PAPER}\n\nA second edition.")).unwrap();
    let events = index(&engine, std::slice::from_ref(&paper)).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, IndexEvent::FileIndexed { .. })),
        "{events:?}"
    );
    let doc = document(&engine, &paper).await;
    assert_eq!(doc.work.title(), Some("My reading of it"));
    assert_eq!(doc.work.year(), Some(1998));
    assert_eq!(
        doc.work.authors.as_ref().map(|a| a.source),
        Some(FieldSource::Lookup)
    );
    assert_eq!(registry.requests().len(), 2, "not looked up again");

    // Asked to refresh, it is.
    let report = engine.look_up_works(None, true).await.unwrap();
    assert_eq!(report.found.len(), 1, "{report:?}");
    assert_eq!(report.found[0].identifier, format!("DOI {CROSSREF_DOI}"));
    assert_eq!(registry.requests().len(), 4);

    // The file is replaced by another paper, whose DOI the registry does not know: the old
    // record goes, and the failure names the service and the DOI.
    std::fs::write(
        &paper,
        "Another paper entirely, doi:10.5555/unknown.2001 here.",
    )
    .unwrap();
    let events = index(&engine, std::slice::from_ref(&paper)).await;
    let [
        IndexEvent::WorksLookedUp {
            found: 0, failed, ..
        },
    ] = looked_up(&events)[..]
    else {
        panic!("{events:?}");
    };
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0]
            .error
            .contains("has no record of DOI 10.5555/unknown.2001"),
        "{failed:?}"
    );
    let doc = document(&engine, &paper).await;
    assert!(!doc.work_sources.contains(&FieldSource::Lookup), "{doc:?}");
    assert_eq!(doc.work.authors(), []);
    assert_eq!(doc.work.title(), Some("My reading of it"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_explicit_look_up_reports_what_it_found_skipped_and_could_not_reach() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = StandInRegistry::with_canned_records().unwrap();
    let engine = engine(tmp.path());
    engine.set_lookup_services(registry.config(TIMEOUT));
    let folder = tmp.path().join("papers");
    std::fs::create_dir_all(&folder).unwrap();
    let paper = write(&folder, "paper.md", PAPER);
    let preprint = write(
        &folder,
        "preprint.md",
        "See arXiv:2310.11511v1 for the method.",
    );
    let notes = write(&folder, "notes.md", "Notes without any identifier.");
    index(&engine, std::slice::from_ref(&folder)).await;
    assert_eq!(registry.requests(), [], "the setting is off");

    // The person asks (the setting is theirs for indexing; this is an explicit action).
    let report = engine
        .look_up_works(Some(vec![folder.clone()]), false)
        .await
        .unwrap();
    assert_eq!(report.found.len(), 2, "{report:?}");
    assert_eq!(report.without_identifier, 1);
    assert!(report.failed.is_empty(), "{report:?}");
    let preprint_doc = document(&engine, &preprint).await;
    assert_eq!(preprint_doc.work.authors()[0].family(), "Asai");
    assert_eq!(preprint_doc.work.year(), Some(2023));
    assert_eq!(Work::text(&preprint_doc.work.arxiv), Some(ARXIV_ID));
    assert_eq!(document(&engine, &notes).await.work.authors(), []);
    assert_eq!(document(&engine, &paper).await.work.year(), Some(1998));
    let sent = registry.requests().len();

    // Again: each already has its record.
    let again = engine.look_up_works(None, false).await.unwrap();
    assert_eq!((again.found.len(), again.already), (0, 2), "{again:?}");
    assert_eq!(registry.requests().len(), sent);

    // A path the library does not hold is an error naming it.
    let error = engine
        .look_up_works(Some(vec![tmp.path().join("elsewhere.pdf")]), false)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, EngineError::NotInLibrary(m) if m.contains("elsewhere.pdf")),
        "{error}"
    );

    // The services cannot be reached: each document fails with the reason, the second without
    // a request of its own, and the records they had stay.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = format!("http://127.0.0.1:{port}/");
    engine.set_lookup_services(LookupConfig {
        doi_resolver: dead.parse().unwrap(),
        arxiv_api: dead.parse().unwrap(),
        timeout: TIMEOUT,
    });
    let offline = engine.look_up_works(None, true).await.unwrap();
    assert_eq!(offline.failed.len(), 2, "{offline:?}");
    assert!(
        offline
            .failed
            .iter()
            .all(|f| f.error.contains("could not reach 127.0.0.1")
                && f.error.contains("the record stays as the file gave it")),
        "{offline:?}"
    );
    assert!(offline.failed[1].error.contains("not tried"), "{offline:?}");
    assert_eq!(document(&engine, &paper).await.work.year(), Some(1998));
}
